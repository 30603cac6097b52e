--- nn.checkpoint(fn, ...): activation checkpointing, as
-- torch.utils.checkpoint.checkpoint (the reentrant form). Runs `fn(...)`
-- without keeping its intermediate activations, and runs it again during
-- the backward to get them: memory for compute. A model of N checkpointed
-- layers keeps only each layer's input instead of everything inside it.
--
--  * The random generator's state is saved before the forward and set back
--    for the recompute (`ember.get_rng_state`), so dropout draws the same
--    masks; afterwards the generator continues where it was, so a run with
--    checkpoints draws exactly what the same run without them draws.
--  * The recompute runs under the autocast state of the forward; its
--    backward under the caller's (outside autocast, as backward() is called).
--  * Fused attention is not computed twice (selective recompute, as
--    PyTorch's selective activation checkpointing and Megatron's): the
--    first forward keeps each fused attention call's output and row
--    logsumexp (O(L*d) bytes a call, against O(L^2) work), and the
--    recompute takes them back instead of running the attention kernel
--    again, when the call is the same one (same sizes, options, dropout
--    stream and sampled input values, output not written since; else it
--    computes). The rule is core/src/attention_reuse.c's; the gradients
--    are the same bits. `require("ember.nn.activation_checkpoint")
--    .reuse_attention = false` recomputes everything (for measuring).
--  * Gradients are those of the run without checkpointing, bit for bit (the
--    recompute repeats the same ops on the same values; a tensor given as
--    several arguments, as torch's m(x, x, x), is one tensor there too, and
--    the first forward runs under grad mode as well, its graph dropped, so
--    that routes chosen by grad mode or by what requires grad -- a learned
--    attention mask's -- are the same); a parameter used
--    both inside and outside fn gets the same sum, possibly added in
--    another order.
--  * fn may read parameters through a closure or a module (they are
--    leaves: their gradients are added during the recompute's backward). A
--    tensor fn needs a gradient for that is not a parameter (an activation
--    computed earlier) must be passed as an argument, not captured.
--  * Arguments may be tensors, numbers, strings, tables (e.g. an options
--    table with a mask) or modules; fn returns a tensor or several (of one
--    dtype and device), which checkpoint returns as fn does. A last table
--    of torch.utils.checkpoint's keyword arguments (`{use_reentrant =
--    false}`) is checkpoint's own and does not reach fn (see checkpoint).
--  * State a forward moves on in training mode moves once, in the forward,
--    as without checkpointing: during the recompute
--    (`require("ember.nn.activation_checkpoint").recomputing()` is true)
--    BatchNorm's and InstanceNorm's running statistics and
--    num_batches_tracked stay, and spectral_norm's power iteration is not
--    run again (it would change u and v, and with them the weight the
--    gradients are taken through). PyTorch's reentrant checkpoint updates
--    them twice.
--  * With grad mode off (`ember.no_grad`, inference) it is just fn(...).
--    Under grad mode the output requires grad even when nothing in fn does.
--  * The recompute's backward runs inside the outer one; the backward-end
--    hooks run once, at the end of the outer one, so
--    `DistributedDataParallel` works with checkpointed layers. A
--    parameter's gradient-ready hook runs when its gradient is final, as
--    long as the parameter is not also used outside fn.
--
-- Errors name nn.checkpoint: fn not callable, outputs that are not tensors.
-- @usage local layer, x = nn.Linear(8, 8), ember.randn(2, 5, 8)
-- local y = nn.checkpoint(layer, x)                 -- a module
-- local ff, norm = nn.Linear(8, 8), nn.LayerNorm(8)
-- local y2 = nn.checkpoint(function(h) return ff(norm(h)) + h end, x)
-- -- a stack of Transformer layers, each recomputed in the backward:
-- local layers = {nn.TransformerEncoderLayer(8, 2), nn.TransformerEncoderLayer(8, 2)}
-- local h, pad = x, ember.tensor({{false, false, false, true, true}, {false, false, false, false, false}})
-- for _, layer in ipairs(layers) do h = nn.checkpoint(layer, h, {key_padding_mask = pad}) end
-- h:sum():backward()
-- @module nn.checkpoint
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"

local M = {}

-- false: the recompute runs fused attention again (see the module's doc)
M.reuse_attention = true

-- how many recomputes are running (one inside another's backward: nested checkpoints)
local recompute_depth = 0

--- Whether a checkpoint's recompute is running: a module that moves state
-- in its forward (running statistics, a power iteration) leaves it then, so
-- the state moves once per step, as without checkpointing.
-- @treturn boolean
function M.recomputing() return recompute_depth > 0 end

local function callable(fn)
  if type(fn) == "function" then return true end
  local mt = getmetatable(fn)
  return type(mt) == "table" and mt.__call ~= nil
end

-- fn's results as one tensor: a single tensor as it is, several flattened
-- and joined (the caller splits them again). Returns the tensor and the
-- shapes of the pieces (nil for a single tensor).
local function pack(results)
  -- trailing nils are left out, as PyTorch drops None outputs: a module
  -- such as nn.MultiHeadAttention returns (out, nil) without need_weights
  while results.n > 1 and results[results.n] == nil do results.n = results.n - 1 end
  if results.n == 1 and ember.is_tensor(results[1]) then return results[1], nil end
  if results.n == 0 then error("nn.checkpoint: fn returned nothing; it must return a tensor or several") end
  local flat, shapes = {}, {}
  for i = 1, results.n do
    local r = results[i]
    if not ember.is_tensor(r) then
      error(("nn.checkpoint: fn's result %d is a %s; fn must return tensors only"):format(i, type(r)))
    end
    if r.dtype ~= results[1].dtype or r.device ~= results[1].device then
      error(("nn.checkpoint: fn's results must share one dtype and device; result 1 is %s on %s, result %d %s on %s")
        :format(results[1].dtype, results[1].device, i, r.dtype, r.device))
    end
    shapes[i] = r.shape
    flat[i] = r:reshape({ -1 })
  end
  return ember.cat(flat, 1), shapes
end

local function unpack_results(y, shapes)
  if not shapes then return y end
  local out, at = {}, 1
  for i, s in ipairs(shapes) do
    local n = 1
    for _, d in ipairs(s) do n = n * d end
    out[i] = y:narrow(1, at, n):view(s)
    at = at + n
  end
  return table.unpack(out, 1, #shapes)
end

local Checkpoint = ember.Function {
  name = "checkpoint",
  -- args: the anchor (a leaf that makes sure the node is recorded), the
  -- call's state (fn, the generator's state, ...), then fn's arguments
  forward = function(ctx, _anchor, st, ...)
    ctx.state = st
    local results, y, shapes
    do -- the fused attention calls' results, kept for the recompute
      local _ <close> = st.tape and st.tape:push("record")
      -- under grad mode, as the recompute and a run without checkpointing: a
      -- route chosen by grad mode or by what requires grad (a learned mask's
      -- core ops, a mask computed in fn from a parameter) is theirs, so the
      -- output has their bits; the graph is dropped (y is detached)
      local was = ember.set_grad_enabled(true)
      local _g <close> = setmetatable({}, { __close = function() ember.set_grad_enabled(was) end })
      results = table.pack(st.fn(...))
      y, shapes = pack(results)
    end
    st.shapes = shapes
    -- the arguments, as detached aliases (the ctx must not hold the graph)
    ctx:save_for_backward(...)
    return y:detach()
  end,
  backward = function(ctx, g)
    local st = ctx.state
    local saved = ctx.saved
    local args, leaves = {}, {}
    for i = 1, saved.n do
      local a = saved[i]
      local first = st.same_as[i]
      if first then
        a = args[first] -- one tensor given twice (m(x, x, x)) is one leaf, as in the forward
      elseif st.requires_grad[i] then
        a = a:detach():requires_grad_()
        leaves[i] = a
      end
      args[i] = a
    end
    local now = ember.get_rng_state()
    local grad_was = ember.set_grad_enabled(true)
    local ac_was, ac_dtype_was = ember.set_autocast(st.autocast, st.autocast_dtype)
    ember.set_rng_state(st.rng)
    local ok, err = pcall(function()
      local results
      do -- the attention calls take back what the forward kept
        local _ <close> = st.tape and st.tape:push("replay")
        recompute_depth = recompute_depth + 1
        local _d <close> = setmetatable({}, { __close = function() recompute_depth = recompute_depth - 1 end })
        results = table.pack(st.fn(table.unpack(args, 1, saved.n)))
      end
      if st.tape then st.tape:clear() end -- a second backward computes them
      local y = pack(results)
      -- the recompute's backward runs as the outer one does, outside autocast
      -- (its products take the dtypes the forward's casts recorded)
      ember.set_autocast(ac_was, ac_dtype_was)
      if y.requires_grad then
        if ember._backward_filtered() then
          -- inside autograd.grad / backward(inputs=): the outer pass's
          -- leaves, and these, get gradients; nothing else does
          local want = {}
          for i = 1, saved.n do want[#want + 1] = leaves[i] end
          y:backward(g, { inputs = want })
        else
          y:backward(g)
        end
      end
    end)
    if st.tape then st.tape:clear() end
    ember.set_rng_state(now)
    ember.set_autocast(ac_was, ac_dtype_was)
    ember.set_grad_enabled(grad_was)
    if not ok then error(err, 0) end
    -- one gradient per forward argument: the anchor, the state, then fn's
    local grads = {}
    for i = 1, saved.n do grads[i] = leaves[i] and leaves[i].grad or nil end
    return nil, nil, table.unpack(grads, 1, saved.n)
  end,
}

-- torch.utils.checkpoint.checkpoint's keyword arguments, as a PyTorch user
-- writes them after fn's: what each value means here (nil: taken).
local TORCH_KW = {
  -- both forms give the run's own gradients here (backward and autograd.grad alike)
  use_reentrant = function(v) return type(v) ~= "boolean" and "must be true or false" or nil end,
  -- the generator's state is always saved and set back for the recompute (the
  -- run's own dropout masks); false, which would draw other masks there, is taken as true
  preserve_rng_state = function(v) return type(v) ~= "boolean" and "must be true or false" or nil end,
  determinism_check = function(v)
    return v ~= "default" and v ~= "none" and "must be \"default\" or \"none\"" or nil
  end,
  debug = function(v) return v ~= false and "(true) is not supported: ember's checkpoint has no debug trace" or nil end,
  context_fn = function()
    return "is not supported: ember keeps the fused attention's results for the recompute by itself (selective "
      .. "recompute); other ops are recomputed"
  end,
}

-- A last argument holding torch.utils.checkpoint's keyword arguments
-- ({use_reentrant = false}) is checkpoint's, not fn's: the count of fn's
-- arguments without it. Such names beside others (fn's options) are an error.
local function torch_options(n, ...)
  local last = n > 0 and select(n, ...) or nil
  if type(last) ~= "table" or getmetatable(last) ~= nil then return n end
  local ours, theirs, distinct = {}, {}, false
  for k in pairs(last) do
    if TORCH_KW[k] then ours[#ours + 1] = tostring(k) else theirs[#theirs + 1] = tostring(k) end
    distinct = distinct or (TORCH_KW[k] and k ~= "debug") -- (debug alone may well be fn's own option)
  end
  if not distinct then return n end
  table.sort(ours)
  table.sort(theirs)
  if #theirs > 0 then
    error(("nn.checkpoint: the last argument mixes torch.utils.checkpoint's options (%s) with fn's (%s): give "
      .. "checkpoint's in a table of their own after fn's arguments"):format(table.concat(ours, ", "),
      table.concat(theirs, ", ")))
  end
  for _, k in ipairs(ours) do
    local bad = TORCH_KW[k](last[k])
    if bad then
      error(("nn.checkpoint: %s %s%s"):format(k, bad, bad:find("^must") and ", got " .. tostring(last[k]) or ""))
    end
  end
  return n - 1
end

--- fn(...), with fn's activations recomputed during the backward instead
-- of kept; returns what fn returns (one tensor or several).
-- torch.utils.checkpoint's keyword arguments may follow fn's, in a table
-- of their own: `nn.checkpoint(layer, x, {use_reentrant = false})`.
-- `use_reentrant` (either value: the same gradients, through backward or
-- autograd.grad), `preserve_rng_state` (the generator's state is always
-- set back for the recompute) and `determinism_check` are taken; that table
-- does not reach fn.
-- @param fn a function or a module (anything callable)
-- @param ... fn's arguments
-- @return fn's results
function M.checkpoint(fn, ...)
  if not callable(fn) then
    error("nn.checkpoint: fn must be a function or a module, got " .. type(fn))
  end
  local n = torch_options(select("#", ...), ...)
  if not ember.is_grad_enabled() then return fn(table.unpack({ ... }, 1, n)) end
  local args = table.pack(...)
  args.n = n
  local requires_grad, same_as = {}, {}
  for i = 1, n do
    local a = args[i]
    requires_grad[i] = ember.is_tensor(a) and a.requires_grad or false
    -- a tensor given again: the recompute passes the first one's leaf there too, so that fn
    -- sees one tensor where it saw one (self-attention's joined projection takes that route),
    -- and the gradient arrives once, at the first place
    for j = 1, i - 1 do
      if requires_grad[i] and rawequal(args[j], a) then
        same_as[i] = j
        break
      end
    end
  end
  local ac, ac_dtype = ember.autocast.enabled()
  local state = { fn = fn, requires_grad = requires_grad, same_as = same_as, rng = ember.get_rng_state(),
    autocast = ac, autocast_dtype = ac_dtype, tape = M.reuse_attention and ember._attention_tape() or nil }
  -- a fresh leaf that requires grad, so that the node is recorded even when
  -- no argument requires grad (the parameters fn reads are not arguments)
  local anchor = ember.zeros({}, { dtype = "float32" }):requires_grad_()
  local y = Checkpoint(anchor, state, table.unpack(args, 1, n))
  return unpack_results(y, state.shapes)
end

--- Runs a chain of modules in `segments` parts, each but the last under
-- nn.checkpoint: torch.utils.checkpoint.checkpoint_sequential. As PyTorch
-- does, the parts hold #functions // segments modules each, the last part
-- takes the rest and runs without a checkpoint (its activations are what
-- the backward needs first), and each module gets the previous one's
-- output. Gradients are those of running the chain plainly. A last table
-- of torch's keyword arguments (`{use_reentrant = false}`) is taken as
-- checkpoint takes it.
-- @param functions an nn.Sequential, or a list of modules or functions
-- @int segments how many parts, 1 to the number of functions
-- @param input the first function's input
-- @return the last function's output
-- @usage local nn = require "ember.nn"
-- local net = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8), nn.GELU())
-- local y = nn.checkpoint_sequential(net, 2, ember.randn(4, 8, { requires_grad = true }))
-- y:sum():backward()
function M.checkpoint_sequential(functions, segments, input, ...)
  -- torch's keyword arguments after input ({use_reentrant = false}), as checkpoint takes them
  local extra = select("#", ...)
  if extra > 1 or (extra == 1 and torch_options(1, ...) ~= 0) then
    error("nn.checkpoint_sequential: expected (functions, segments, input [, {use_reentrant =, preserve_rng_state =}]), "
      .. "got another argument after input")
  end
  local fns = {}
  if type(functions) ~= "table" then
    error("nn.checkpoint_sequential: functions must be an nn.Sequential or a list of modules or functions, got "
      .. type(functions))
  elseif getmetatable(functions) and callable(functions) and #functions > 0 then -- an nn.Sequential
    for i = 1, #functions do fns[i] = functions[i] end
  else
    for i, f in ipairs(functions) do fns[i] = f end
  end
  for i, f in ipairs(fns) do
    if not callable(f) then
      error(("nn.checkpoint_sequential: functions[%d] must be a module or a function, got %s"):format(i, type(f)))
    end
  end
  local n = #fns
  if n == 0 then error("nn.checkpoint_sequential: no functions to run") end
  if math.type(segments) ~= "integer" or segments < 1 or segments > n then
    error(("nn.checkpoint_sequential: segments must be an integer from 1 to %d (the number of functions), got %s")
      :format(n, tostring(segments)))
  end
  local size = n // segments
  local function run(first, last)
    return function(x)
      for i = first, last do x = fns[i](x) end
      return x
    end
  end
  local last = 0
  for first = 1, size * (segments - 1), size do
    last = first + size - 1
    input = M.checkpoint(run(first, last), input)
  end
  return run(last + 1, n)(input)
end

return M
