--- nn/_torch7.lua (internal): Torch7's nn.Module calls on ember's modules,
-- on top of autograd (no second gradient engine); the methods and their
-- documentation live here, Module.lua installs them
-- (`require(this)(Module)` returns {forward_of =, missing =}).
--
--   m:forward(x)                 the module's forward; called directly (not as m(x))
--                                once Torch7's calls are in use (below), it keeps the
--                                output it gave for x (only the last one, weakly keyed
--                                by x: dropping x drops it)
--   m:backward(x, gout [, s])    Torch7's backward: adds s * dL/dp into each p.grad
--                                (accGradParameters) and returns dL/dx (updateGradInput),
--                                through the graph of that forward, by autograd
--   m:updateOutput(x)            m:forward(x)
--   m:updateGradInput(x, gout)   dL/dx only;  m:accGradParameters(x, gout [, s]) the p.grad only
--   m:zeroGradParameters()       every p.grad zeroed in place (m:zero_grad(false))
--   m:updateParameters(lr)       p = p - lr * p.grad, without recording
--   m:getParameters()            one flat parameter tensor and one flat gradient tensor
--                                that the parameters and their .grad then view
--   m:evaluate()                 m:eval() (Torch7's m:training() is m:train(): m.training
--                                is PyTorch's flag, a boolean, here)
--   m:clearState()               forgets the kept outputs; returns m
--   m:listModules()              m:modules() (the module, then its descendants)
--   m:findModules(name)          the descendants (and m) of that class
--   m:type(name)                 m:to(name), Torch7's names included ("torch.DoubleTensor")
--   m:share(other, name, ...)    m's parameters of those names become other's (tied)
--   m:noBias()                   drops the bias parameter (forward runs without it)
--
-- gradInput is dL/dx where x required grad when the forward ran (a leaf
-- given requires_grad, or another module's output): autograd only
-- differentiates what was recorded, so for a plain data tensor x it is nil
-- (x:requires_grad_() before the forward gives it). The gradient stops at
-- x: backward adds into this module's parameters only, so a chain
-- m2:backward(h, g2), m1:backward(x, gh) counts each module once, as Torch7's.
--
-- Keeping outputs costs a graph held past its loss (a PyTorch-style
-- `m:forward(x)` in a loop would hold two steps' activations), so it starts
-- at the first Torch7 call of the process: an nn.*Criterion built, or
-- getParameters, zeroGradParameters, updateParameters, updateOutput,
-- backward, evaluate, ... called (T7.activate). Torch7 scripts make their
-- criterion (or call getParameters) before the first forward; code that
-- never makes a Torch7 call keeps nothing and pays nothing.
--
-- Other Torch7 names with no one meaning here are errors that name the
-- Torch7 call and the ember way (HINTS below, Module.__index's fallback).
-- @module nn._torch7
local ember = require "ember.nn._ember"
local errors = require "ember._errors"

return function(Module)
  -- active: m:forward keeps its output (Module.__index reads it); set once
  local T7 = { active = false }

  --- Turns on keeping m:forward's outputs for Torch7's backward (see the
  -- header); the Torch7 calls and nn.*Criterion's constructor call it.
  function T7.activate() T7.active = true end

  -- module -> (weak-keyed: input -> {out =, grad = grad mode at the forward}),
  -- one input at a time, as Torch7's self.output; both weak (ephemerons):
  -- a module or an input that is gone takes its output and graph with it
  local last = setmetatable({}, { __mode = "k" })
  local wrappers = setmetatable({}, { __mode = "k" }) -- a class's forward -> the keeping one

  local function keep(self, x, out)
    local t = setmetatable({}, { __mode = "k" })
    t[x] = { out = out, grad = ember.is_grad_enabled() }
    last[self] = t
  end

  --- The forward `m:forward(x)` calls (Module.__index gives it for "forward"):
  -- fwd, keeping its first result for x. m(x) calls the class's forward
  -- itself (Module.raw_forward) and keeps nothing.
  function T7.forward_of(fwd)
    local w = wrappers[fwd]
    if not w then
      w = errors.wrap(function(self, x, ...)
        local r = table.pack(fwd(self, x, ...))
        local tx = type(x)
        if (tx == "userdata" or tx == "table") and type(self) == "table" then keep(self, x, r[1]) end
        return table.unpack(r, 1, r.n)
      end)
      wrappers[fwd] = w
    end
    return w
  end

  -- The tensors of x (a tensor or a list of them), as a list.
  local function tensors_of(x)
    if Module.is_tensor(x) then return { x } end
    local list = {}
    if type(x) == "table" then for i, v in ipairs(x) do if Module.is_tensor(v) then list[i] = v end end end
    return list
  end

  -- The kept forward of self for x, or an error naming who and what to do.
  local function kept(self, who, x)
    local t = last[self]
    local rec = t and t[x]
    if not rec then
      errors.raise("%s: no forward of this module on this input to go back through: call m:forward(x) with this "
        .. "same x first (the last m:forward is kept once a Torch7 call was made, such as building an nn.*Criterion "
        .. "or m:getParameters(); m(x) keeps none: its gradients come from loss:backward())", who)
    end
    local outs = tensors_of(rec.out)
    local any = false
    for _, o in pairs(outs) do any = any or o.requires_grad end
    if not rec.grad then
      errors.raise("%s: the forward on this input ran under no_grad (nothing was recorded to go back through): "
        .. "run m:forward(x) with grad mode on", who)
    end
    return rec, outs, any
  end

  -- The gradients of the kept outputs (weighted by gout) added into
  -- `params`' .grad (scaled) and, when want_input, those with respect to x's
  -- tensors that required grad, returned in x's form (a tensor or a list).
  -- Autograd's backward with `inputs`: nothing before x is touched.
  local function go_back(self, who, x, gout, scale, params, want_input)
    if scale ~= nil and type(scale) ~= "number" then errors.raise("%s: scale must be a number, got %s", who, type(scale)) end
    scale = scale or 1
    local _, outs, any = kept(self, who, x)
    local gouts = tensors_of(gout)
    local roots, grads = {}, {}
    for i, o in pairs(outs) do
      if not gouts[i] then
        errors.raise("%s: gradOutput must be %s, got %s", who, Module.is_tensor(outs[i]) and #outs == 1
          and "a tensor of the output's shape" or "a list of tensors, one per output", type(gout))
      end
      if o.requires_grad then roots[#roots + 1], grads[#grads + 1] = o, gouts[i] end
    end
    local wanted = {}
    if want_input and any then
      for i, t in pairs(tensors_of(x)) do if t.requires_grad then wanted[i] = t end end
    end
    -- one backward pass into ps and ins (ins' .grad read, then put back)
    local function pass(gs, ps, ins)
      local inputs, saved, got = {}, {}, {}
      for _, p in ipairs(ps) do inputs[#inputs + 1] = p end
      for i, t in pairs(ins) do
        saved[i], t.grad = t.grad, nil
        inputs[#inputs + 1] = t
      end
      if #inputs == 0 then return got end
      local ok, err = pcall(ember.autograd.backward, roots, gs, { retain_graph = true, inputs = inputs })
      for i, t in pairs(ins) do got[i], t.grad = t.grad, saved[i] end
      if not ok then errors.raise("%s: %s", who, (errors.strip_library_position(err):gsub("^ember%.[%w_.]+: ", ""))) end
      return got
    end
    local function scaled()
      local gs = {}
      for i, g in ipairs(grads) do gs[i] = g * scale end
      return gs
    end
    local result
    if #roots == 0 then
      result = {}
    elseif scale == 1 or next(wanted) == nil then
      result = pass(scale == 1 and grads or scaled(), params, wanted)
    else -- Torch7's scale weighs the parameters' gradients, not gradInput: two passes
      result = pass(grads, {}, wanted)
      pass(scaled(), params, {})
    end
    if not want_input then return nil end
    if Module.is_tensor(x) then return result[1] end
    return result
  end

  -- The parameters of self that require grad (distinct), for backward's pass.
  local function learned(self)
    local list = {}
    for _, p in ipairs(self:parameters()) do if p.requires_grad then list[#list + 1] = p end end
    return list
  end

  --- Torch7's backward(input, gradOutput [, scale]): scale * the gradients of
  -- the last `m:forward(input)` (weighted by gradOutput) added into the
  -- parameters' .grad (Torch7's accGradParameters), and the gradient with
  -- respect to input returned (updateGradInput; nil where input did not
  -- require grad at the forward: autograd differentiates what it recorded).
  -- The graph is kept, so updateGradInput and accGradParameters may follow.
  -- @tparam Tensor|table input the tensor (or list) the forward was run on
  -- @tparam Tensor|table gradOutput dL/d(output), the output's shape
  -- @number[opt=1] scale
  -- @treturn ?Tensor gradInput
  -- @usage local m, crit = nn.Linear(3, 2), nn.MSECriterion()   -- a Torch7 call: forward keeps
  -- local x = ember.randn(4, 3):requires_grad_()
  -- local y = m:forward(x)
  -- local gx = m:backward(x, crit:backward(y, ember.zeros(4, 2)))
  -- print(gx.shape, m.weight.grad.shape)   --> ember.Size{4, 3}	ember.Size{2, 3}
  function Module:backward(input, gradOutput, scale)
    T7.activate()
    return go_back(self, self.__name .. ".backward", input, gradOutput, scale, learned(self), true)
  end

  --- Torch7's updateGradInput(input, gradOutput): the gradient with respect
  -- to input of the last `m:forward(input)`, the parameters' .grad untouched.
  -- @treturn ?Tensor
  function Module:updateGradInput(input, gradOutput)
    T7.activate()
    return go_back(self, self.__name .. ".updateGradInput", input, gradOutput, 1, {}, true)
  end

  --- Torch7's accGradParameters(input, gradOutput [, scale]): adds scale *
  -- the parameters' gradients of the last `m:forward(input)` into their .grad.
  function Module:accGradParameters(input, gradOutput, scale)
    T7.activate()
    go_back(self, self.__name .. ".accGradParameters", input, gradOutput, scale, learned(self), false)
  end

  --- Torch7's updateOutput(input): `m:forward(input)` (keeping its output for backward).
  function Module:updateOutput(...)
    T7.activate()
    return self:forward(...)
  end

  --- Torch7's zeroGradParameters(): every parameter's .grad zeroed in place
  -- (`zero_grad(false)`: a flat gradient tensor from getParameters stays the
  -- one the gradients land in). Returns self.
  -- @treturn Module self
  function Module:zeroGradParameters()
    T7.activate()
    return self:zero_grad(false)
  end

  --- Torch7's updateParameters(lr): p = p - lr * p.grad for every parameter
  -- with a gradient, in place and not recorded (plain SGD). Returns self.
  -- @number lr
  -- @treturn Module self
  function Module:updateParameters(lr)
    T7.activate()
    if type(lr) ~= "number" then errors.raise("%s.updateParameters: learningRate must be a number, got %s", self.__name, type(lr)) end
    ember.no_grad(function()
      for _, p in ipairs(self:parameters()) do
        local g = p.grad
        if g ~= nil then p:add_(g, -lr) end
      end
    end)
    return self
  end

  --- Torch7's getParameters(): the parameters copied into one flat 1-d tensor
  -- and each parameter made a view of its part (the same tensor objects,
  -- re-pointed: an optimizer made before still holds them), and one flat
  -- gradient tensor of that size that the parameters' .grad view (their
  -- gradients so far copied in). Writing into `params` (optim's functional
  -- form: `params:add_(grad, -lr)`) changes the model; backward (Module's
  -- or loss:backward()) adds into `gradParams`. As Torch7's: call it once,
  -- after the model is built and converted (m:to, m:float, ... re-point the
  -- parameters again), and zero gradients in place (zeroGradParameters,
  -- `gradParams:zero_()`, or an optimizer's `zero_grad(false)`): a
  -- `zero_grad()` that sets .grad to nil breaks the link (the next backward
  -- makes new gradients). All parameters must share one dtype and device.
  -- @treturn Tensor params
  -- @treturn Tensor gradParams
  -- @usage local m = nn.Linear(3, 2)
  -- local params, grads = m:getParameters()
  -- params:fill_(0.5)
  -- print(params.shape, m.weight:sum():item())   --> ember.Size{8}	3.0
  function Module:getParameters()
    T7.activate()
    local who = self.__name .. ".getParameters"
    local ps = self:parameters()
    if #ps == 0 then return ember.zeros(0), ember.zeros(0) end
    local dtype, device, n = ps[1].dtype, ps[1].device, 0
    for i, p in ipairs(ps) do
      if p.dtype ~= dtype or p.device ~= device then
        errors.raise("%s: parameter %d (%s) is %s on %s, parameter 1 (%s) %s on %s: the flat tensors need one dtype "
          .. "and device (m:to(...) first)", who, i, self:parameter_names()[i], p.dtype, p.device,
          self:parameter_names()[1], dtype, device)
      end
      n = n + p:numel()
    end
    local opts = { dtype = dtype, device = device }
    local flat, gflat = ember.zeros(n, opts), ember.zeros(n, opts)
    ember.no_grad(function()
      local at = 1
      for _, p in ipairs(ps) do
        local k, shape, g = p:numel(), p.shape, p.grad
        local part = flat:narrow(1, at, k):view(shape)
        part:copy_(p)
        local gpart = gflat:narrow(1, at, k):view(shape)
        if g ~= nil then gpart:copy_(g) end
        p:_assign(part:requires_grad_(p.requires_grad))
        p.grad = gpart
        at = at + k
      end
    end)
    return flat, gflat
  end

  -- Torch7's training() cannot be: m.training is PyTorch's flag here (m:train() sets it).
  --- Torch7's evaluate(): `eval()`.
  function Module:evaluate()
    T7.activate()
    return self:eval()
  end

  --- Torch7's clearState(): forgets the outputs `m:forward` kept (and so
  -- their graphs) for the module and its descendants. Returns self.
  function Module:clearState()
    for _, m in ipairs(self:modules()) do last[m] = nil end
    return self
  end

  --- Torch7's listModules(): the module and its distinct descendants, depth
  -- first (`m:modules()`).
  function Module:listModules() return self:modules() end

  --- Torch7's findModules(typename): the module and the descendants that
  -- are of that class (by name: "nn.Linear", "Linear"; or the class), depth
  -- first, and the container of each (nil for the module itself), as Torch7's.
  -- @tparam string|table typename
  -- @treturn {Module,...} the modules
  -- @treturn table their containers
  function Module:findModules(typename)
    local name = typename
    if type(typename) == "table" then name = rawget(typename, "__name") end
    if type(name) ~= "string" then
      errors.raise("%s.findModules: expected a class name (\"nn.Linear\") or a class, got %s", self.__name, type(typename))
    end
    name = name:gsub("^nn%.", "")
    local nodes, containers = {}, {}
    local function walk(m, parent)
      if m.__name == name then nodes[#nodes + 1], containers[#nodes + 1] = m, parent end
      for _, c in ipairs(m:children()) do walk(c, m) end
    end
    walk(self, nil)
    return nodes, containers
  end

  local TORCH7_TYPES = {
    ["torch.FloatTensor"] = "float32", ["torch.DoubleTensor"] = "float64", ["torch.CudaTensor"] = "cuda",
    ["torch.CudaDoubleTensor"] = "float64", ["torch.CudaHalfTensor"] = false, ["torch.HalfTensor"] = false,
  }

  --- Torch7's type(name): `to(name)` for ember's dtype and device names and
  -- Torch7's ("torch.FloatTensor", "torch.DoubleTensor", "torch.CudaTensor",
  -- "torch.CudaDoubleTensor"); without a name, the first parameter's dtype.
  -- @string[opt] name
  function Module:type(name)
    local who = self.__name .. ".type"
    if name == nil then
      local p = self:parameters()[1]
      return p and p.dtype or nil
    end
    if type(name) ~= "string" then errors.raise("%s: expected a type name, got %s", who, type(name)) end
    local t = TORCH7_TYPES[name]
    if t == false then errors.raise("%s: ember has no float16 dtype (%s); its 16-bit float is bfloat16", who, name) end
    if name == "torch.CudaDoubleTensor" then self:to("cuda") end
    return self:to(t or name)
  end

  --- Torch7's share(other, name, ...): the parameters (or buffers) of those
  -- names become `other`'s tensors (tied: one tensor, updated once), as
  -- Torch7's m:share(other, "weight", "bias"). Returns self.
  -- @tparam Module other
  -- @string ... names
  function Module:share(other, ...)
    local who = self.__name .. ".share"
    if not Module.is_module(other) then errors.raise("%s: expected a module to share with, got %s", who, type(other)) end
    for i = 1, select("#", ...) do
      local name = select(i, ...)
      local mine, theirs = rawget(self, "_reg")[name], rawget(other, "_reg")[name]
      if not Module.is_tensor(mine) or not Module.is_tensor(theirs) then
        errors.raise("%s: '%s' must be a parameter or buffer of both modules (%s and %s)", who, tostring(name),
          self.__name, other.__name)
      end
      if mine.shape ~= theirs.shape then
        errors.raise("%s: '%s' is %s here and %s in the other module", who, name, errors.shape_str(mine), errors.shape_str(theirs))
      end
      self[name] = theirs
    end
    return self
  end

  --- Torch7's noBias(): removes the bias parameter (the forward then runs
  -- without one, as a module built with {bias = false}). Returns self.
  function Module:noBias()
    if not Module.is_tensor(rawget(self, "_reg").bias) then
      errors.raise("%s.noBias: this module has no bias", self.__name)
    end
    self.bias = nil
    return self
  end

  -- Torch7's calls that ember does not have, and what to write instead.
  local HINTS = {
    accUpdateGradParameters = "m:backward(x, gradOutput) then m:updateParameters(lr)",
    sharedClone = "build another module and m2:share(m, \"weight\", \"bias\") (or load_state_dict(m:state_dict()))",
    clone = "build another module of the same class and m2:load_state_dict(m:state_dict())",
    reset = "m:reset_parameters() where the module has one, or the nn.init functions: nn.init.uniform_(m.weight, -stdv, stdv)",
    replace = "m:apply(fn) visits every module; assign a child to replace it (seq[i] = new, m.name = new)",
    write = "ember.save(m:state_dict(), path) (and m:load_state_dict(ember.load(path)))",
    read = "m:load_state_dict(ember.load(path))",
    setNumInputDims = "nn.View(...):setNumInputDims(n) only; nn.Flatten / nn.Unflatten keep the batch dims",
    gradParamClip = "nn.utils.clip_grad_norm_(m:parameters(), max_norm)",
    maxParamNorm = "nn.utils.clip_grad_norm_, or weight norms through nn.utils.parametrizations",
  }

  --- Module.__index's last step: a Torch7 method name ember does not have
  -- gives a function raising an error that says the ember way; other names nil.
  function T7.missing(self, k)
    local hint = HINTS[k]
    if not hint then return nil end
    return function()
      errors.raise("%s.%s: Torch7's %s is not an ember method; %s", rawget(getmetatable(self), "__name") or "Module",
        k, k, hint)
    end
  end

  return T7
end
