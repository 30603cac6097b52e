--- nn.Module: the base class of every layer (Torch7's nn.Module, with
-- PyTorch's names).
--
-- A module owns, in registration order:
--
--  * parameters: learned tensors (leaves with requires_grad), `self.name`;
--  * buffers: other state tensors (saved unless non-persistent), `self.name`;
--  * children: sub-modules, `self.name`.
--
-- Assigning a module, or a tensor with `requires_grad`, to a field
-- registers it, as in PyTorch: `self.fc = nn.Linear(4, 4)`. Assigning nil
-- to a registered name removes it; assigning a tensor to a registered
-- parameter or buffer replaces it. Other tensors become buffers only
-- through `register_buffer`. Names, parameter lists, state dicts and
-- printing all follow registration order (a module's own parameters, then
-- its buffers, then its children, as PyTorch), so they are stable.
--
--    local MyLayer = nn.Module:extend("MyLayer")
--    function MyLayer:__init(n) self.w = ember.zeros(n):requires_grad_() end
--    function MyLayer:forward(x) return x * self.w end
--
-- Registered values live in `self._reg`, not in the instance table itself,
-- so that every assignment to their names goes through `__newindex`.
-- @classmod nn.Module
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
-- the named_* results and the lists (lists that print(): readable, not an address), also
-- generic-for iterators: `for name, p in m:named_parameters() do`, `for m in model:modules() do`
local iterable = require "ember.nn._iterable"
local list_of = iterable.list
local iterable_map, pair_list = iterable.map, iterable.pair_list

local Module = {}
Module.__name = "Module"
local forward_hooks = require("ember.nn._module_hooks")(Module) -- {call =, add =}
local convert = require("ember.nn._module_convert")(Module) -- {to =, float_dtype =}

local is_tensor, is_module

local torch7 -- Torch7's calls (nn/_torch7.lua), installed at the end of this file

--- Looks up registered values first, then the class (methods, defaults), then
-- PyTorch's name of a part the class keeps elsewhere (its TORCH_NAMES, as its
-- state dicts: a Transformer layer's linear1 is ff.linear1), as torch code reads it,
-- then a Torch7 method ember does not have (a function raising an error
-- that says the ember way). Once a Torch7 call was made (nn/_torch7.lua),
-- `m:forward` is the class's forward keeping its output for Torch7's
-- `m:backward(x, gradOutput)` (`m(x)` keeps nothing).
function Module.__index(t, k)
  local reg = rawget(t, "_reg")
  local v = reg and reg[k]
  if v ~= nil then return v end
  local cls = getmetatable(t)
  v = cls[k]
  if v == nil then
    if type(k) ~= "string" then return nil end
    local path = cls.TORCH_NAMES and cls.TORCH_NAMES[k]
    if path then v = t; for part in path:gmatch("[^.]+") do v = v and v[part] end end
    if v == nil then return torch7.missing(t, k) end
    return v
  end
  if k == "forward" and torch7.active then return torch7.forward_of(v) end
  return v
end

--- The forward `m(x)` runs: an instance's own `forward` field, else its
-- class's (not the one `m:forward` gives, which keeps its output).
-- @treturn function
function Module.raw_forward(self) return rawget(self, "forward") or getmetatable(self).forward end

-- A constructor's errors, C ones too (a weight that cannot be allocated),
-- at the user's line, as every forward's (errors.wrap).
local init = errors.wrap(function(obj, ...) return obj:__init(...) end)
-- PyTorch's positional options and Lua's table of names, as __init takes them
local normalize_args = require "ember.nn._module_args"

local function construct(cls, ...)
  local obj = setmetatable({}, cls)
  Module._setup(obj)
  init(obj, normalize_args(cls, ...))
  return obj
end

--- A subclass of this class: `local Net = nn.Module:extend("Net")`; define
-- `Net:__init(...)` and `Net:forward(...)`, then `Net(...)` makes one.
-- Metamethods are not inherited through `__index`: every "__" key of the
-- parent class (`__tostring`, `__call`, `__index`, ...) is copied into the
-- new class.
-- @string name the class name, used in messages and printing
-- @treturn table the class; call it to make an instance (runs `__init`)
function Module:extend(name)
  local cls = {}
  for k, v in pairs(self) do
    if type(k) == "string" and k:sub(1, 2) == "__" then cls[k] = v end
  end
  cls.__name = name
  cls.super = self
  return setmetatable(cls, { __index = self, __call = construct })
end

function Module._setup(self)
  rawset(self, "_reg", {})
  rawset(self, "_params", {})
  rawset(self, "_buffers", {})
  rawset(self, "_nonpersistent", {})
  rawset(self, "_children", {})
  rawset(self, "training", true)
end

--- Called by the constructor with its arguments; subclasses register
-- their parameters, buffers and children here.
function Module:__init() end

--- The module's computation; every subclass defines it.
function Module:forward()
  errors.raise("%s.forward: not defined for this module", self.__name)
end

function Module:__call(...)
  local hooks = rawget(self, "_forward_hooks")
  if not hooks then return (rawget(self, "forward") or getmetatable(self).forward)(self, ...) end -- the usual case: no hook, no cost
  return Module._call_with_hooks(self, hooks, ...)
end

-- The call of a module with forward hooks (nn/_module_hooks.lua): the
-- pre-hooks, forward, the hooks, the full backward hooks around them.
Module._call_with_hooks = forward_hooks.call

--- Calls `fn(module, inputs)` before every forward, as PyTorch's
-- `register_forward_pre_hook`: `inputs` is the table of the arguments
-- (`inputs[1]`, ...); a value fn returns replaces them (a table of
-- arguments, or one argument). Returns a handle with `remove()`.
-- @tparam function fn
-- @treturn table handle
function Module:register_forward_pre_hook(fn, ...)
  return forward_hooks.add(self, "pre", fn, "register_forward_pre_hook", ...)
end

--- Calls `fn(module, inputs, output)` after every forward, as PyTorch's
-- `register_forward_hook` (features of a layer, activation statistics); a
-- value fn returns replaces the output. Returns a handle with `remove()`.
-- @tparam function fn
-- @treturn table handle
-- @usage local m = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
-- local seen
-- local h = m[1]:register_forward_hook(function(mod, inputs, out) seen = out.shape end)
-- m(ember.randn(2, 4))
-- print(seen)   --> ember.Size{2, 3}
-- h:remove()
function Module:register_forward_hook(fn, ...)
  return forward_hooks.add(self, "post", fn, "register_forward_hook", ...)
end

--- Calls `fn(module, grad_input, grad_output)` in the backward of every call
-- made in grad mode, as PyTorch's `register_full_backward_hook`, once the
-- gradients with respect to the module's inputs are known: `grad_input[i]`
-- is the gradient of argument i (nil for an argument that is no tensor or
-- does not require grad), `grad_output[i]` that of result i. A table fn
-- returns replaces grad_input (Grad-CAM, gradient clipping per layer). The
-- arguments that require grad must share one dtype and device. Returns a
-- handle with `remove()`.
-- @tparam function fn
-- @treturn table handle
-- @usage local lin = nn.Linear(3, 2)
-- local seen
-- lin:register_full_backward_hook(function(mod, gin, gout) seen = gout[1].shape end)
-- lin(ember.randn(4, 3)):sum():backward()
-- print(seen)   --> ember.Size{4, 2}
function Module:register_full_backward_hook(fn, ...)
  return forward_hooks.add(self, "backward", fn, "register_full_backward_hook", ...)
end

is_module = function(v)
  return type(v) == "table" and getmetatable(v) ~= nil and rawget(v, "_reg") ~= nil
end
--- Is `v` an nn module instance?
-- @function Module.is_module
Module.is_module = is_module

--- What a value that should have been a module is, for an error: its type
-- ("number"), or for a class given where an instance goes (`seq:add(nn.ReLU)`)
-- "the class nn.ReLU (call it: nn.ReLU(...))".
-- @param v
-- @treturn string
function Module.describe_non_module(v)
  local c = type(v) == "table" and rawget(v, "_reg") == nil and v
  while c and c ~= Module do c = rawget(c, "super") end
  if c then
    local nn, name = package.loaded["ember.nn"], v.__name
    if nn and nn[name] == v then name = "nn." .. name end
    return ("the class %s (call it: %s(...))"):format(name, name)
  end
  return type(v)
end

is_tensor = function(v)
  local mt = type(v) == "userdata" and getmetatable(v)
  return mt and mt.__name == "ember.Tensor" or false
end
--- Is `v` an ember tensor?
-- @function Module.is_tensor
Module.is_tensor = is_tensor

local function check_name(self, name, what)
  if type(name) ~= "string" or name == "" or name:find(".", 1, true) then
    errors.raise("%s.%s: name must be a non-empty string without '.', got %s", self.__name, what, tostring(name))
  end
end

local function remove_name(list, name)
  for i, n in ipairs(list) do
    if n == name then return table.remove(list, i) end
  end
end

-- Registers value under name in list, taking the name away from any other
-- kind and from the plain fields.
local function register(self, list, name, value)
  for _, other in ipairs({ self._params, self._buffers, self._children }) do
    if other ~= list then remove_name(other, name) end
  end
  local found = false
  for _, n in ipairs(list) do if n == name then found = true end end
  if not found then list[#list + 1] = name end
  rawset(self, name, nil)
  self._reg[name] = value
  return value
end

--- Registers a learned tensor (it gets requires_grad) under `name`.
-- @string name
-- @tparam Tensor t
-- @treturn Tensor t
function Module:register_parameter(name, t)
  check_name(self, name, "register_parameter")
  if not is_tensor(t) then
    errors.raise("%s.register_parameter: '%s' is a %s, not a tensor", self.__name, name, type(t))
  end
  if not t.requires_grad then t:requires_grad_(true) end
  self._nonpersistent[name] = nil
  return register(self, self._params, name, t)
end

--- Registers a state tensor that is not learned.
-- @string name
-- @tparam Tensor t
-- @bool[opt=true] persistent false keeps it out of `state_dict` (e.g. a
-- table of sinusoids the constructor recomputes)
-- @treturn Tensor t
function Module:register_buffer(name, t, persistent)
  check_name(self, name, "register_buffer")
  if not is_tensor(t) then
    errors.raise("%s.register_buffer: '%s' is a %s, not a tensor", self.__name, name, type(t))
  end
  self._nonpersistent[name] = persistent == false or nil
  return register(self, self._buffers, name, t)
end

--- Registers a child module under `name` (a number becomes its string).
-- @string name
-- @tparam Module m
-- @treturn Module m
function Module:add_module(name, m)
  name = tostring(name)
  check_name(self, name, "add_module")
  if not is_module(m) then
    local what = Module.describe_non_module(m)
    errors.raise("%s.add_module: '%s' is %s, not a module", self.__name, name, what == type(m) and "a " .. what or what)
  end
  return register(self, self._children, name, m)
end

-- What a registered name is: "param", "buffer", "child" or nil.
local function kind_of(self, name)
  local reg = rawget(self, "_reg")
  if not reg or reg[name] == nil then return nil end
  for _, n in ipairs(self._params) do if n == name then return "param" end end
  for _, n in ipairs(self._buffers) do if n == name then return "buffer" end end
  return "child"
end

--- Field assignment registers modules and tensors with requires_grad,
-- replaces registered values, and removes them when given nil.
function Module.__newindex(self, name, v)
  local kind = type(name) == "string" and kind_of(self, name)
  if not kind then
    if type(name) == "string" and rawget(self, "_reg") then
      if is_module(v) then return self:add_module(name, v) end
      if is_tensor(v) and v.requires_grad then return self:register_parameter(name, v) end
    end
    return rawset(self, name, v)
  end
  if v == nil then
    remove_name(self._params, name)
    remove_name(self._buffers, name)
    remove_name(self._children, name)
    self._nonpersistent[name] = nil
    self._reg[name] = nil
  elseif kind == "child" then
    if not is_module(v) then
      errors.raise("%s: '%s' is a child module; assign a module or nil, not a %s", self.__name, name, type(v))
    end
    self._reg[name] = v
  elseif kind == "param" then
    if not is_tensor(v) then
      errors.raise("%s: '%s' is a parameter; assign a tensor or nil, not a %s", self.__name, name, type(v))
    end
    self:register_parameter(name, v)
  else
    if not is_tensor(v) then
      errors.raise("%s: '%s' is a buffer; assign a tensor or nil, not a %s", self.__name, name, type(v))
    end
    self._reg[name] = v
  end
end

--- Calls fn(fullname, tensor, kind) for every tensor in registration order;
-- kind is "param", "buffer" or "nonpersistent".
function Module:_each_tensor(fn, prefix)
  prefix = prefix or ""
  local reg = self._reg
  for _, n in ipairs(self._params) do fn(prefix .. n, reg[n], "param") end
  for _, n in ipairs(self._buffers) do
    fn(prefix .. n, reg[n], self._nonpersistent[n] and "nonpersistent" or "buffer")
  end
  for _, n in ipairs(self._children) do reg[n]:_each_tensor(fn, prefix .. n .. ".") end
end

-- Calls fn(name, tensor) once per distinct parameter: a tensor registered
-- twice (tied weights, a module used twice) is listed under its first name
-- only, so an optimizer updates it once.
function Module:_each_param(fn)
  local seen = {}
  self:_each_tensor(function(n, t, kind)
    if kind == "param" and not seen[t] then
      seen[t] = true
      fn(n, t)
    end
  end)
end

--- The distinct parameters, in registration order (what an optimizer takes).
-- @treturn {Tensor,...}
function Module:parameters()
  local list = {}
  self:_each_param(function(_, t) list[#list + 1] = t end)
  return list_of(list)
end

--- name -> parameter (the tensors themselves, shared); `pairs` gives
-- them in registration order (`parameter_names`'s), as PyTorch's, and so
-- does PyTorch's loop `for name, p in m:named_parameters() do` (as
-- named_buffers, named_children and named_modules).
-- @treturn table
function Module:named_parameters()
  local map, names = {}, {}
  self:_each_param(function(n, t) map[n], names[#names + 1] = t, n end)
  return iterable_map(map, names)
end

--- The distinct buffers (running statistics, tables; persistent or not),
-- in registration order, as PyTorch's buffers().
-- @treturn {Tensor,...}
function Module:buffers()
  local list, seen = {}, {}
  self:_each_tensor(function(_, t, kind)
    if kind ~= "param" and not seen[t] then seen[t], list[#list + 1] = true, t end
  end)
  return list_of(list)
end

--- name -> buffer, as PyTorch's named_buffers() (the tensors themselves).
-- @treturn table
function Module:named_buffers()
  local map, seen, names = {}, {}, {}
  self:_each_tensor(function(n, t, kind)
    if kind ~= "param" and not seen[t] then seen[t], map[n], names[#names + 1] = true, t, n end
  end)
  return iterable_map(map, names)
end

--- The names of `parameters()`, in the same order.
-- @treturn {string,...}
function Module:parameter_names()
  local list = {}
  self:_each_param(function(n) list[#list + 1] = n end)
  return list_of(list)
end

--- The number of learned scalars (a tensor shared by several names counted
-- once), as Hugging Face's `model.num_parameters(only_trainable=False,
-- exclude_embeddings=False)`, positionally or by name: only_trainable
-- counts the parameters that require grad (a frozen base under adapters
-- left out), exclude_embeddings leaves out the weights of nn.Embedding
-- modules (and an output layer tied to one).
-- @tparam[opt=false] bool|table only_trainable or `{only_trainable =, exclude_embeddings =}`
-- @tparam[opt=false] bool exclude_embeddings
-- @treturn integer
-- @usage local m = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2))
-- m[2]:requires_grad_(false)
-- print(m:num_parameters(), m:num_parameters(true), m:num_parameters{exclude_embeddings = true})   --> 50 40 10
function Module:num_parameters(only_trainable, exclude_embeddings)
  local who = self.__name .. ".num_parameters"
  if type(only_trainable) == "table" then
    if exclude_embeddings ~= nil then
      errors.raise("%s: give only_trainable and exclude_embeddings either by position or in one table, not both", who)
    end
    local o = Module.check_options(who, only_trainable, { "only_trainable", "exclude_embeddings" })
    only_trainable, exclude_embeddings = o.only_trainable, o.exclude_embeddings
  end
  for name, v in pairs { only_trainable = only_trainable, exclude_embeddings = exclude_embeddings } do
    if v ~= nil and type(v) ~= "boolean" then errors.raise("%s: %s must be a boolean, got %s", who, name, type(v)) end
  end
  local skip = {}
  if exclude_embeddings then
    local Embedding = require "ember.nn.Embedding"
    for _, m in ipairs(self:modules()) do
      if m:isinstance(Embedding) and m.weight ~= nil then skip[m.weight] = true end
    end
  end
  local n = 0
  for _, p in ipairs(self:parameters()) do
    if not skip[p] and (not only_trainable or p.requires_grad) then n = n + p:numel() end
  end
  return n
end

-- Calls fn(name, child) for each distinct direct child in registration
-- order: a module registered under two names comes once, under its first,
-- as PyTorch's children()/named_children() (and so apply, train and
-- modules() visit it once).
local function each_child(self, fn)
  local seen = {}
  for _, n in ipairs(self._children) do
    local c = self._reg[n]
    if not seen[c] then
      seen[c] = true
      fn(n, c)
    end
  end
end

--- The distinct direct children, in registration order (a module
-- registered twice comes once, as PyTorch's children()).
-- @treturn {Module,...}
function Module:children()
  local list = {}
  each_child(self, function(_, c) list[#list + 1] = c end)
  return list_of(list)
end

--- The direct children as {name, module} pairs, in registration order, as
-- PyTorch's named_children() iterates (a Sequential's names are "1", "2", ...);
-- `for name, child in m:named_children() do` walks them as PyTorch's loop.
-- @treturn {{string,Module},...}
-- @usage local m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
-- local nc = m:named_children()
-- print(#nc, nc[2][1], nc[2][2].__name)   --> 2	2	ReLU
function Module:named_children()
  local list = {}
  each_child(self, function(n, c) list[#list + 1] = { n, c } end)
  return pair_list(list)
end

--- The descendant at a dotted path ("encoder.layers.1.ff"), as PyTorch's
-- get_submodule; "" is the module itself. The names are those of
-- named_modules() and the state dict (a Sequential's children "1", "2", ...;
-- a ModuleList's "0", "1", ... as PyTorch's). A name on the path that is no
-- child is an error naming it and the children there.
-- @tparam string target
-- @treturn Module
function Module:get_submodule(target)
  local who = self.__name .. ".get_submodule"
  if type(target) ~= "string" then errors.raise("%s: expected a dotted name, got %s", who, type(target)) end
  local m, path = self, {}
  if target == "" then return m end
  for name in (target .. "."):gmatch("([^.]*)%.") do
    local child = m._reg[name]
    local is_child = false
    for _, n in ipairs(m._children) do if n == name then is_child = true end end
    if not is_child then
      local here = #path > 0 and ("'" .. table.concat(path, ".") .. "' (" .. m.__name .. ")") or m.__name
      errors.raise("%s: %s has no child module '%s' (its children: %s)", who, here, name,
        #m._children > 0 and table.concat(m._children, ", ") or "none")
    end
    m, path[#path + 1] = child, name
  end
  return m
end

-- get_parameter / get_buffer: the tensor of that kind at a dotted path.
local function get_tensor(self, target, kind, what)
  local who = self.__name .. ".get_" .. what
  if type(target) ~= "string" then errors.raise("%s: expected a dotted name, got %s", who, type(target)) end
  local path, name = target:match("^(.*)%.([^.]+)$")
  if not path then path, name = "", target end
  local m = self:get_submodule(path)
  if kind_of(m, name) ~= kind then
    errors.raise("%s: '%s' (%s) has no %s '%s'", who, path == "" and self.__name or path, m.__name, what, name)
  end
  return m._reg[name]
end

--- The parameter at a dotted path ("model.layers.0.self_attn.q_proj.weight"),
-- as PyTorch's get_parameter: the names of named_parameters(). A path
-- that is no parameter is an error naming it.
-- @tparam string target
-- @treturn Tensor
-- @usage local m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
-- print(m:get_parameter("1.weight").shape)   --> ember.Size{3, 2}
function Module:get_parameter(target) return get_tensor(self, target, "param", "parameter") end

--- The buffer at a dotted path ("1.running_mean"), as PyTorch's get_buffer.
-- @tparam string target
-- @treturn Tensor
-- @usage local m = nn.Sequential(nn.BatchNorm1d(3))
-- print(m:get_buffer("1.running_var").shape)   --> ember.Size{3}
function Module:get_buffer(target) return get_tensor(self, target, "buffer", "buffer") end

-- Calls fn(prefix, module) for the module and each descendant, depth first,
-- each distinct module once (under its first name, as PyTorch's memo).
local function each_module(self, fn, prefix, seen)
  if seen[self] then return end
  seen[self] = true
  fn(prefix, self)
  for _, n in ipairs(self._children) do each_module(self._reg[n], fn, prefix .. n .. ".", seen) end
end

--- The module and all its distinct descendants, depth first (a module
-- reached twice comes once, as PyTorch's modules()).
-- @treturn {Module,...}
function Module:modules(list)
  list = list or {}
  each_module(self, function(_, m) list[#list + 1] = m end, "", {})
  return list_of(list)
end

--- Calls fn(prefix, module) for the module (prefix "") and every distinct
-- descendant (prefix "a.b."), depth first; a module reached twice (shared,
-- or registered under two names) comes once, under its first name, as
-- PyTorch's named_modules(). Without fn, returns the list of
-- {name, module} pairs instead, as PyTorch's named_modules() iterates
-- (names without the trailing dot: "", "a", "a.b").
function Module:named_modules(fn, prefix)
  if fn == nil then
    local list = {}
    self:named_modules(function(p, m) list[#list + 1] = { (p:gsub("%.$", "")), m } end)
    return pair_list(list)
  end
  if type(fn) ~= "function" then
    errors.raise("%s.named_modules: expected a function(prefix, module) or nothing, got %s", self.__name, type(fn))
  end
  each_module(self, fn, prefix or "", {})
end

--- Calls fn(m) for every descendant and then the module itself, children
-- first as PyTorch's `module.apply(fn)` (an initialiser: `m:apply(init)`).
-- @tparam function fn
-- @treturn Module self
function Module:apply(fn)
  if type(fn) ~= "function" then
    errors.raise("%s.apply: expected a function(module), got %s", self.__name, type(fn))
  end
  for _, c in ipairs(self:children()) do c:apply(fn) end
  fn(self)
  return self
end

--- Whether the module is an instance of class `cls` or of a subclass of it,
-- as PyTorch's `isinstance(m, nn.Linear)`; `cls` may be a list of classes
-- (any of them, as isinstance's tuple). For initialisers under `apply`.
-- @tparam table cls a module class (nn.Linear, ...) or a list of them
-- @treturn boolean
-- @usage local net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
-- net:apply(function(m) if m:isinstance(nn.Linear) then nn.init.zeros_(m.bias) end end)
-- print(net[1]:isinstance(nn.Module), net[2]:isinstance({nn.Linear, nn.Conv2d}))   --> true false
function Module:isinstance(cls)
  local function is_class(c) return type(c) == "table" and rawget(c, "__name") ~= nil and rawget(c, "__call") ~= nil end
  if type(cls) == "table" and not is_class(cls) and #cls > 0 then
    for _, c in ipairs(cls) do
      if self:isinstance(c) then return true end
    end
    return false
  end
  if not is_class(cls) then
    errors.raise("%s.isinstance: expected a module class (nn.Linear, ...) or a list of them, got %s", self.__name,
      type(cls) == "table" and "a table" or type(cls))
  end
  local c = getmetatable(self)
  while c do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

--- Sets training mode (dropout on) on the module and its descendants.
-- @bool[opt=true] mode
-- @treturn Module self
function Module:train(mode)
  if mode == nil then mode = true end
  self.training = mode and true or false
  for _, c in ipairs(self:children()) do c:train(self.training) end
  return self
end

--- Evaluation mode: `train(false)`.
-- @treturn Module self
function Module:eval() return self:train(false) end

--- Sets requires_grad on every parameter (freezing with `false`), as
-- PyTorch's `module.requires_grad_()`. An optimizer skips a frozen
-- parameter while it has no gradient.
-- @bool[opt=true] on
-- @treturn Module self
-- @usage local m = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
-- m[1]:requires_grad_(false)      -- freeze the first layer
-- print(m[1].weight.requires_grad, m[2].weight.requires_grad)   --> false	true
function Module:requires_grad_(on)
  if on == nil then on = true end
  if type(on) ~= "boolean" then
    errors.raise("%s.requires_grad_: expected a boolean or nothing, got %s", self.__name, type(on))
  end
  for _, p in ipairs(self:parameters()) do p:requires_grad_(on) end
  return self
end

--- Drops the gradients of every parameter (PyTorch 2's default), or with
-- `set_to_none = false` zeroes them in place (PyTorch 1.13's default), as
-- `model.zero_grad(set_to_none)`.
-- `zero_grad{set_to_none = false}` is the same, as PyTorch's keyword.
-- @tparam[opt=true] boolean set_to_none
-- @treturn Module self
-- @usage local m = ember.nn.Linear(2, 1)
-- m(ember.ones(1, 2)):sum():backward()
-- m:zero_grad(false)
-- print(m.weight.grad:abs():sum():item(), m:zero_grad().weight.grad)   --> 0.0	nil
function Module:zero_grad(set_to_none)
  local ok, v = Module.set_to_none_arg(set_to_none)
  if not ok then errors.raise("%s.zero_grad: %s", self.__name, v) end
  Module.zero_grads(self:parameters(), v)
  return self
end

--- zero_grad's argument, the one rule of Module:zero_grad and the
-- optimizers': nothing, a boolean, or `{set_to_none = boolean}` (PyTorch's
-- keyword). Returns true and the boolean (or nil), or false and what was wrong.
-- @param v the argument
function Module.set_to_none_arg(v)
  if type(v) == "table" and getmetatable(v) == nil then
    for k in pairs(v) do
      if k ~= "set_to_none" then
        return false, ("unknown option '%s' (the option is set_to_none)"):format(tostring(k))
      end
    end
    v = v.set_to_none
  end
  if v ~= nil and type(v) ~= "boolean" then
    return false, ("set_to_none must be a boolean or nothing, got %s"):format(type(v))
  end
  return true, v
end

--- Drops the gradients of the tensors in params, or zeroes them in place
-- when set_to_none is false: the one rule of Module:zero_grad and of the
-- optimizers' zero_grad.
-- @tparam table params a list of tensors
-- @tparam[opt=true] boolean set_to_none
function Module.zero_grads(params, set_to_none)
  for _, p in ipairs(params) do
    if set_to_none == false then
      local g = p.grad
      if g ~= nil then ember.no_grad(function() g:zero_() end) end
    else
      p.grad = nil
    end
  end
end

-- Whether k is in one of the lists (a forward checks its options on every
-- call: building the sorted name list each time was a twentieth of a
-- decoding step's Lua time, so it is built for the error only).
local function listed(k, ...)
  for i = 1, select("#", ...) do
    local list = select(i, ...)
    for j = 1, #list do
      if list[j] == k then return true end
    end
  end
  return false
end

--- Checks a constructor's or forward's options table: nil becomes {}, a
-- key not in the name lists is an error at the user's line naming `who`
-- and every option it takes (a misspelt key would otherwise be ignored:
-- `{key_padding_mak = pad}` ran without the mask).
-- @string who "nn.Linear", "TransformerEncoderLayer.forward", ...
-- @tparam ?table opts
-- @tparam table ... lists of option names
-- @treturn table opts
function Module.check_options(who, opts, ...)
  if opts == nil then return {} end
  if type(opts) == "table" then
    local ok = true
    for k in pairs(opts) do
      if not listed(k, ...) then
        ok = false
        break
      end
    end
    if ok then return opts end
  end
  local known, names = {}, {}
  for i = 1, select("#", ...) do
    for _, n in ipairs(select(i, ...)) do
      if not known[n] then known[n], names[#names + 1] = true, n end
    end
  end
  table.sort(names)
  if type(opts) ~= "table" then
    -- a class without a SIGNATURE (nn/_module_args.lua) takes its options by name only
    errors.raise("%s: options must be a table, got %s (%s: the options after the sizes go by name, "
      .. "e.g. {%s = ...}; options: %s)", who, type(opts), tostring(opts), names[1] or "name", table.concat(names, ", "))
  end
  for k in pairs(opts) do
    if not known[k] then
      errors.raise("%s: unknown option '%s' (options: %s)", who, tostring(k), table.concat(names, ", "))
    end
  end
  return opts
end

--- PyTorch's keyword arguments for a constructor whose arguments are all
-- optional: `nn.Flatten{start_dim = 2}` is `nn.Flatten(2)`. When the only
-- argument is a plain table (not a tensor or module), its keys must be
-- among `names` (the positional order; an unknown key is an error naming
-- `who` at the user's line) and the values come back in that order; other
-- calls come back as given.
-- @string who "nn.Flatten", ...
-- @tparam {string,...} names the arguments' names, in positional order
-- @param ... the constructor's arguments
-- @return the arguments, positionally
function Module.keyword_args(who, names, ...)
  local first = ...
  if select("#", ...) ~= 1 or type(first) ~= "table" or is_tensor(first) or is_module(first) then return ... end
  Module.check_options(who, first, names)
  local out = {}
  for i, n in ipairs(names) do out[i] = first[n] end
  return table.unpack(out, 1, #names)
end

--- Raises at the user's line unless x is a tensor (a number or a table
-- would fail deeper as "attempt to index a number value").
-- @string who the module's forward, for the error ("ReLU.forward")
-- @param x
function Module.check_tensor_input(who, x)
  if not is_tensor(x) then errors.raise("%s: expected a tensor, got %s", who, type(x)) end
end

--- Raises at the user's line unless the tensor x has a floating-point dtype
-- (an integer input would fail deeper, in an op the user did not call).
-- @string who the module's forward, for the error ("BatchNorm2d.forward")
-- @tparam Tensor x
function Module.check_float_input(who, x)
  Module.check_tensor_input(who, x)
  local info = ember.dtype_info(x.dtype)
  if not (info and info.floating) then errors.raise("%s: expected a floating-point input, got %s", who, x.dtype) end
end

--- The floating-point dtype a name means ("double" -> "float64"), or nil
-- when the name is no dtype (a device, then). Modules convert only to
-- floating dtypes, so an integer or bool dtype is an error naming `op`.
-- @string where a dtype or device name
-- @string op the operation, for the error ("Linear.to")
-- @treturn ?string the dtype's name
function Module.float_dtype(where, op) return convert.float_dtype(where, op) end

--- Moves or converts every tensor: `to("cuda")`, `to("float64")`, both
-- `to("cuda", "bfloat16")`, another tensor's `to(x)`, or `to{dtype=, device=}`;
-- PyTorch's non_blocking (`to("float64", true)`, `to{..., non_blocking = true}`)
-- is taken and ignored (ember's copies are synchronous).
-- Parameters keep their identity (the same tensor objects, converted in
-- place, their gradients dropped), so an optimizer made before still
-- updates the model, as PyTorch's module.to() keeps its Parameters; the
-- optimizer's state stays where it was (build it after moving, as PyTorch
-- advises). A dtype converts only floating-point tensors;
-- integer and bool buffers keep theirs. A tensor shared by several names
-- (tied weights) stays shared.
-- @string where a dtype or device name
-- @tparam[opt] table _moved old tensor -> new one, shared by a whole tree (internal)
-- @treturn Module self
function Module:to(where, _moved) return convert.to(self, where, _moved) end

--- `to("cuda")`
function Module:cuda() return self:to("cuda") end
--- `to("cpu")`
function Module:cpu() return self:to("cpu") end
--- `to("float64")`
function Module:double() return self:to("float64") end
--- `to("float32")`
function Module:float() return self:to("float32") end
--- `to("bfloat16")`
function Module:bfloat16() return self:to("bfloat16") end
--- PyTorch's float16 conversion: an error, ember has no float16 dtype
-- (its 16-bit float is bfloat16: `m:bfloat16()`, or ember.autocast).
function Module:half()
  errors.raise("%s.half: ember has no float16 dtype; its 16-bit float is bfloat16 (m:bfloat16(), or "
    .. "ember.autocast(\"bfloat16\") for mixed precision)", self.__name)
end

-- the state dicts' mapping and loading (nn/_module_state.lua)
local state_dicts = require("ember.nn._module_state")(Module, kind_of)

--- name -> detached tensor sharing the parameter's or buffer's storage;
-- `pairs` gives them in registration order, as PyTorch's OrderedDict.
-- PyTorch's arguments, positionally or by name
-- (`m:state_dict{prefix = "encoder."}`): the entries go into `destination`
-- (returned) under `prefix` .. name, and `keep_vars` keeps the tensors
-- themselves (parameters with their requires_grad) instead of detached views.
-- @tparam[opt] table destination
-- @string[opt=""] prefix
-- @bool[opt=false] keep_vars
-- @treturn table
function Module:state_dict(...) return state_dicts.state_dict(self, ...) end

--- Names this module had in earlier versions of ember: a table
-- old name -> current name, relative to the module. Subclasses that
-- renamed their state override it, so old checkpoints still load.
-- @treturn table|nil
function Module:legacy_names() return nil end

--- A copy of `sd` (names relative to this module) under today's names, and
-- how many names of earlier ember versions were mapped (`legacy_names`).
-- This is the per-module hook load_state_dict calls: each module maps its
-- own part, then hands every child the names under "child." (the prefix
-- taken off, put back after) through the child's own upgrade_state_dict,
-- so a module's map works at any depth. A module whose names differ
-- elsewhere overrides it, maps its own level and calls
-- `Module.upgrade_state_dict(self, mapped)`: nn.Sequential takes PyTorch's
-- 0-based numbering, nn.MultiHeadAttention torch.nn.MultiheadAttention's
-- in_proj_weight, the Transformer layers PyTorch's linear1/linear2 and
-- multihead_attn (nn/_torch_names.lua).
-- @tparam table sd name -> tensor
-- @string[opt=""] prefix where the module sits in the model being loaded
-- ("encoder.layers.1."), for messages; a hook passes it on
-- @treturn table
-- @treturn integer
function Module:upgrade_state_dict(sd, prefix) return state_dicts.upgrade_state_dict(self, sd, prefix) end

--- The per-module hook of `torch_state_dict`: `sd` (this module's state
-- under ember's names, relative to it, its children's parts already
-- mapped) under PyTorch's names and layouts. The default keeps the names;
-- the modules whose names differ from PyTorch's override it.
-- @tparam table sd name -> tensor
-- @treturn table
function Module:to_torch_names(sd) return sd end

--- The state dict under PyTorch's names and layouts, for torch's
-- `load_state_dict` (ember's `state_dict` and `load_state_dict` use
-- ember's names, and load PyTorch's too): nn.Sequential's children
-- numbered from 0, nn.MultiHeadAttention's q, k and v projections as one
-- in_proj_weight / in_proj_bias, the Transformer layers' ff.linear1 as
-- linear1 and cross_attn as multihead_attn. Tensors are detached; a
-- stacked in_proj_weight is a new tensor, the others share storage.
-- Save it with `ember.save(model:torch_state_dict(), "model.safetensors")`,
-- then in Python `model.load_state_dict(safetensors.torch.load_file(path))`.
-- @treturn table name -> tensor
-- @usage local mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
-- local names = {}
-- for k in pairs(mlp:torch_state_dict()) do names[#names + 1] = k end
-- table.sort(names)
-- print(table.concat(names, " "))   --> 0.bias 0.weight 2.bias 2.weight
-- mlp:load_state_dict(mlp:torch_state_dict())   -- PyTorch's names load too
function Module:torch_state_dict() return state_dicts.torch_state_dict(self) end

--- Copies the tensors of `sd` into the module. Everything is checked
-- before anything is copied, so a failed load leaves the module unchanged.
-- Each module maps the names it knows first (`upgrade_state_dict`, at any
-- depth): earlier ember versions' and PyTorch's (a torch.nn state dict
-- loads as it is, see nn/_torch_names.lua). Values are converted to each
-- tensor's dtype and device (a float64 or bfloat16 checkpoint into a
-- float32 model; a scalar saved as [1] fits a 0-d tensor, as PyTorch's); a
-- shape that differs is an error naming every such key and both shapes,
-- strict or not, as PyTorch's.
-- @tparam table sd name -> tensor
-- @tparam[opt=true] bool|table strict every name must be present and no other
-- may appear (an error lists the missing and unexpected names); false loads
-- the names that match. PyTorch's keyword form `{strict = false}` works too.
-- @treturn Module self
-- @treturn {string,...} missing names (sorted, after the mapping)
-- @treturn {string,...} unexpected names
-- @usage local m = nn.Linear(3, 2)
-- local _, missing, unexpected = m:load_state_dict({weight = ember.zeros(2, 3), scale = ember.ones(1)}, false)
-- print(missing, unexpected)   --> {"bias"}	{"scale"}
function Module:load_state_dict(sd, strict) return state_dicts.load_state_dict(self, sd, strict) end

--- One line describing the module's own settings, e.g. "in_features=4".
-- @treturn string
function Module:extra_repr() return "" end

--- The module tree, as PyTorch and Torch7 print it.
function Module:__tostring()
  local extra = self:extra_repr()
  if #self._children == 0 then return self.__name .. "(" .. extra .. ")" end
  local lines = { self.__name .. "(" }
  if extra ~= "" then lines[2] = "  " .. extra end
  for _, n in ipairs(self._children) do
    local s = tostring(self._reg[n]):gsub("\n", "\n  ")
    lines[#lines + 1] = "  (" .. n .. "): " .. s
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- Torch7's backward, getParameters, zeroGradParameters, ... (nn/_torch7.lua)
torch7 = require("ember.nn._torch7")(Module)
--- Turns on Torch7's keeping of `m:forward`'s outputs (nn/_torch7.lua's
-- header says when and why); nn.*Criterion's constructor calls it.
function Module.torch7_activate() torch7.activate() end

-- nn.Module() itself is an empty container, as in PyTorch.
setmetatable(Module, { __call = construct })

return Module
