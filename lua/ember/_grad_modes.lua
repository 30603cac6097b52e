-- ember/_grad_modes.lua: PyTorch's autograd entry points over ember's
-- graph: no_grad / enable_grad / set_grad_enabled / inference_mode as
-- functions, scopes and decorators, and ember.grad (torch.autograd.grad).
-- Split from _compat.lua, which init.lua loads before it.
local core = require "ember.core"
local helpers = require "ember._helpers"
local shape_str = require("ember._errors").shape_str

local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set

local check_opts = require("ember._functional").check_opts

-- ember.no_grad(fn, ...) runs fn with grad mode off (the C function);
-- ember.no_grad() alone returns a scope for `local g <close> = ember.no_grad()`,
-- as PyTorch's `with torch.no_grad():`. ember.enable_grad is the same with
-- grad mode on (torch.enable_grad), for a piece of a no_grad region.
-- ember.no_grad()(fn) is PyTorch's decorator `@torch.no_grad()`: the scope
-- ends at once and fn comes back wrapped, run with grad mode off at each call.
local function grad_mode(name, on, run)
  local function scope()
    local prev = core.set_grad_enabled(on)
    local closed = false
    local function close()
      if not closed then
        closed = true
        core.set_grad_enabled(prev)
      end
    end
    return setmetatable({}, {
      __close = close,
      __call = function(_, fn)
        close()
        if type(fn) ~= "function" then
          require("ember._errors").raise("ember.%s: ember.%s()(fn) wraps a function (torch's decorator), got %s",
            name, name, type(fn))
        end
        return function(...)
          local g <close> = scope()
          return fn(...)
        end
      end,
      __name = "ember." .. name .. " scope",
    })
  end
  return function(fn, ...)
    if fn == nil and select("#", ...) == 0 then return scope() end
    if type(fn) ~= "function" then
      fail(name, "expected a function (ember.%s(fn, ...)) or nothing (local g <close> = ember.%s()), got %s",
        name, name, type(fn))
    end
    if run then return run(fn, ...) end
    local g <close> = scope()
    return fn(...)
  end
end
core.no_grad = helpers.guard(grad_mode("no_grad", false, core.no_grad))
core.enable_grad = helpers.guard(grad_mode("enable_grad", true))

-- ember.inference_mode(fn, ...) / `local g <close> = ember.inference_mode()`:
-- torch.inference_mode, which is no_grad here (ember has no inference
-- tensors: what is made inside does not require grad, and may be used in
-- autograd later). inference_mode(false) is a scope with recording on, as
-- torch's; ember.is_inference_mode_enabled() says whether one is open.
local inference_depth = 0
local inference_on = grad_mode("inference_mode", false)
local inference_off = grad_mode("inference_mode", true)
core.inference_mode = helpers.guard(function(mode, ...)
  local scope_of = mode == false and inference_off or inference_on
  if mode == nil or type(mode) == "boolean" then
    if select("#", ...) > 0 then
      fail("inference_mode", "ember.inference_mode(mode) takes no function (give it to ember.inference_mode(fn, ...))")
    end
    local inner = scope_of()
    local prev, closed = inference_depth, false
    inference_depth = mode == false and 0 or inference_depth + 1
    return setmetatable({}, {
      __close = function()
        if closed then return end
        closed = true
        inference_depth = prev
        getmetatable(inner).__close(inner)
      end,
      __name = "ember.inference_mode scope",
    })
  end
  if type(mode) ~= "function" then
    fail("inference_mode", "expected a function (ember.inference_mode(fn, ...)), a boolean or nothing "
      .. "(local g <close> = ember.inference_mode()), got %s", type(mode))
  end
  local g <close> = core.inference_mode()
  return mode(...)
end)
core.is_inference_mode_enabled = function() return inference_depth > 0 end

-- ember.grad(outputs, inputs [, {grad_outputs =, retain_graph = false, allow_unused = false}]):
-- the gradients of outputs (a tensor, or a list summed) with respect to
-- each of inputs (a tensor or a list of tensors that require grad, leaves
-- or not), returned as a list without touching their .grad or any other's
-- (torch.autograd.grad; grad_outputs may also come third, as torch's;
-- create_graph is not supported: ember's backward is not differentiable).
-- torch's positional form, grad(outputs, inputs, grad_outputs, retain_graph,
-- create_graph, only_inputs, allow_unused), is taken too, and so is
-- grad(outputs, inputs, grad_outputs, {options}).
local GRAD_POSITIONAL = { "retain_graph", "create_graph", "only_inputs", "allow_unused" }

-- The root of one backward pass over several outputs, for ember.grad and
-- ember.autograd.backward: the sum of each output weighted by its gradient
-- ((o * g):sum(), or o:sum() for a one-element output without one),
-- recorded with grad mode on (both may run where it is off). As torch's,
-- a gradient must have its output's shape (o * g would broadcast it into
-- wrong numbers) and is a constant: a g that requires grad gives its own
-- graph nothing. `what` names the lists in errors: {"output", "grad_outputs"}.
local function outputs_root(op, outs, gs, what)
  if gs ~= nil and #gs > #outs then
    fail(op, "got %d %s and %d %s: give one gradient per %s", #outs, what[1] .. "s", #gs, what[2], what[1])
  end
  local was = core.set_grad_enabled(true)
  local ok, root = pcall(function()
    local r
    for i, o in ipairs(outs) do
      local g = gs and gs[i]
      local term
      if g ~= nil then
        check_tensor(op, g, ("%s[%d]"):format(what[2], i))
        if o.shape ~= g.shape then
          fail(op, "%s[%d] is %s, but %s %d is %s: a gradient has its output's shape", what[2], i, shape_str(g),
            what[1], i, shape_str(o))
        end
        term = (o * g:detach()):sum()
      else
        term = o:sum()
      end
      r = r and r + term or term
    end
    return r
  end)
  core.set_grad_enabled(was)
  if not ok then require("ember._errors").error(root) end -- at the user's line
  return root
end
core._outputs_root = outputs_root

set("grad", function(outputs, inputs, opts, ...)
  local op = "grad"
  local n_more = select("#", ...)
  local is_options = type(opts) == "table" and not core.is_tensor(opts) and opts[1] == nil and next(opts) ~= nil
  if n_more > 0 or (opts ~= nil and not is_options) then
    -- torch.autograd.grad(outputs, inputs, grad_outputs [, retain_graph, create_graph, ...])
    local gouts = opts
    if gouts ~= nil and not core.is_tensor(gouts) and type(gouts) ~= "table" then
      fail(op, "grad_outputs (argument 3) must be a tensor, a list of tensors or nil, got %s", type(gouts))
    end
    local more = ...
    if n_more == 1 and type(more) == "table" then
      opts = {}
      for k, v in pairs(more) do opts[k] = v end
    else
      if n_more > #GRAD_POSITIONAL then
        fail(op, "takes at most %d arguments (outputs, inputs, grad_outputs, %s), got %d", 3 + #GRAD_POSITIONAL,
          table.concat(GRAD_POSITIONAL, ", "), 3 + n_more)
      end
      opts = {}
      for i = 1, n_more do
        local v = select(i, ...)
        if v ~= nil and type(v) ~= "boolean" then
          fail(op, "%s (argument %d) must be a boolean or nil, got %s", GRAD_POSITIONAL[i], 3 + i, type(v))
        end
        opts[GRAD_POSITIONAL[i]] = v
      end
      if opts.only_inputs == false then
        fail(op, "only_inputs = false is not supported (deprecated in torch: the gradients go to the inputs only)")
      end
      opts.only_inputs = nil
    end
    if gouts ~= nil then opts.grad_outputs = gouts end
  end
  opts = check_opts(op, opts, { grad_outputs = true, retain_graph = true, allow_unused = true, create_graph = true })
  if opts.create_graph then
    fail(op, "create_graph is not supported: ember's backward is not itself differentiable (no higher-order gradients)")
  end
  local outs = core.is_tensor(outputs) and { outputs } or outputs
  local ins = core.is_tensor(inputs) and { inputs } or inputs
  if type(outs) ~= "table" or #outs == 0 then fail(op, "outputs must be a tensor or a list of tensors") end
  if type(ins) ~= "table" or #ins == 0 then fail(op, "inputs must be a tensor or a list of tensors") end
  for i, t in ipairs(ins) do
    check_tensor(op, t, "input " .. i)
    if not t.requires_grad then fail(op, "input %d does not require grad", i) end
  end
  -- A leaf's gradient is read from its .grad (backward's inputs =: other
  -- leaves, a model's weights, keep theirs); a non-leaf's from a hook of
  -- this call only (retain_grad would leave it retaining in later backwards).
  -- An input given twice gets the same gradient twice (as torch's): its
  -- first position does the work (saving and restoring .grad once).
  local saved, leaves, captured, handles, first = {}, {}, {}, {}, {}
  for i, t in ipairs(ins) do
    if not first[t] then
      first[t] = i
      saved[i] = t.grad
      t.grad = nil
      if t.is_leaf then
        leaves[#leaves + 1] = t
      else
        handles[#handles + 1] = t:register_hook(function(g)
          captured[i] = core.no_grad(function() return g:clone() end)
        end)
      end
    end
  end
  local gouts = opts.grad_outputs
  if core.is_tensor(gouts) then gouts = { gouts } end
  -- Recorded with grad mode on: ember.grad may run where it is off (in a
  -- Function's backward, under no_grad), as torch's.
  local was = core.set_grad_enabled(true)
  local ok, err = pcall(function()
    local root, seed
    for i, o in ipairs(outs) do
      check_tensor(op, o, "output " .. i)
      if (gouts == nil or gouts[i] == nil) and o:numel() ~= 1 then
        fail(op, "output %d is not a scalar: give grad_outputs", i)
      end
    end
    if #outs == 1 and (gouts == nil or #gouts <= 1) then
      root, seed = outs[1], gouts and gouts[1] -- straight from the output (backward casts a gradient of another dtype)
    else
      root = outputs_root(op, outs, gouts, { "output", "grad_outputs" })
    end
    root:backward { gradient = seed, retain_graph = opts.retain_graph == true, inputs = leaves }
  end)
  core.set_grad_enabled(was)
  for _, h in ipairs(handles) do h:remove() end
  local result = {}
  for i, t in ipairs(ins) do
    if first[t] ~= i then
      result[i] = result[first[t]]
    else
      if t.is_leaf then result[i] = t.grad else result[i] = captured[i] end
      t.grad = saved[i]
    end
  end
  if not ok then
    -- the message names what the user called (the freed-graph error, a Function's backward)
    error(type(err) == "string" and (err:gsub("ember%.backward: ", "ember.grad: ", 1)) or err, 0)
  end
  for i = 1, #ins do
    if result[i] == nil and not opts.allow_unused then
      fail(op, "input %d was not used to compute the outputs (allow_unused = true gives nil)", i)
    end
  end
  return result
end)
