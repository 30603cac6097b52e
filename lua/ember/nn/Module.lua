-- nn.Module: the base class of every layer (Torch7's nn.Module, with
-- PyTorch's names). A module owns
--   parameters  learned tensors (leaves with requires_grad), self[name]
--   buffers     other state tensors (saved unless non-persistent), self[name]
--   children    sub-modules, self[name]: Lua modules or C userdata that have
--               the same methods (ember.MultiHeadAttention)
-- in registration order, so names, parameter lists and state dicts come out
-- in a stable order. Subclasses only register things and write forward.
--
--   local MyLayer = nn.Module:extend("MyLayer")
--   function MyLayer:__init(n) self:register_parameter("w", ember.zeros(n)) end
--   function MyLayer:forward(x) return x * self.w end
local ember = require "ember.nn._ember"

local Module = {}
Module.__index = Module
Module.__name = "Module"

-- Metamethods are not inherited through __index: copy them (every "__"
-- key of the parent class: __tostring, __call, __len, ...) into each class.
function Module:extend(name)
  local cls = {}
  for k, v in pairs(self) do
    if type(k) == "string" and k:sub(1, 2) == "__" then cls[k] = v end
  end
  -- a function __index (Sequential's integer indexing) is inherited
  if type(cls.__index) ~= "function" then cls.__index = cls end
  cls.__name = name
  cls.super = self
  return setmetatable(cls, {
    __index = self,
    __call = function(c, ...)
      local obj = setmetatable({}, c)
      Module._setup(obj)
      obj:__init(...)
      return obj
    end,
  })
end

function Module._setup(self)
  rawset(self, "_params", {})
  rawset(self, "_buffers", {})
  rawset(self, "_nonpersistent", {})
  rawset(self, "_children", {})
  rawset(self, "training", true)
end

function Module:__init() end

function Module:forward()
  error(self.__name .. ".forward: not defined for this module", 2)
end

function Module:__call(...) return self:forward(...) end

local function is_module(v)
  local t = type(v)
  if t == "table" then return getmetatable(v) ~= nil and v.named_parameters ~= nil end
  if t ~= "userdata" then return false end
  local ok, f = pcall(function() return v.named_parameters end)
  return ok and f ~= nil
end
Module.is_module = is_module

local function is_tensor(v)
  local mt = type(v) == "userdata" and getmetatable(v)
  return mt and mt.__name == "ember.Tensor" or false
end
Module.is_tensor = is_tensor

local function check_name(self, name, what)
  if type(name) ~= "string" or name == "" or name:find(".", 1, true) then
    error(("%s.%s: name must be a non-empty string without '.', got %s"):format(
      self.__name, what, tostring(name)), 3)
  end
end

local function add_name(list, name)
  for _, n in ipairs(list) do if n == name then return end end
  list[#list + 1] = name
end

function Module:register_parameter(name, t)
  check_name(self, name, "register_parameter")
  if not t.requires_grad then t:requires_grad_(true) end
  add_name(self._params, name)
  rawset(self, name, t)
  return t
end

-- persistent = false keeps a buffer out of state_dict (e.g. a table of
-- sinusoids that the constructor recomputes).
function Module:register_buffer(name, t, persistent)
  check_name(self, name, "register_buffer")
  add_name(self._buffers, name)
  self._nonpersistent[name] = persistent == false or nil
  rawset(self, name, t)
  return t
end

function Module:add_module(name, m)
  name = tostring(name)
  check_name(self, name, "add_module")
  if not is_module(m) then
    error(("%s.add_module: '%s' is a %s, not a module"):format(self.__name, name, type(m)), 2)
  end
  add_name(self._children, name)
  rawset(self, name, m)
  return m
end

-- Calls fn(fullname, tensor, kind) for every tensor in order: kind is
-- "param", "buffer" or "nonpersistent". C children report params and
-- buffers through their state_dict / named_parameters.
function Module:_each_tensor(fn, prefix)
  prefix = prefix or ""
  for _, n in ipairs(self._params) do fn(prefix .. n, self[n], "param") end
  for _, n in ipairs(self._buffers) do
    fn(prefix .. n, self[n], self._nonpersistent[n] and "nonpersistent" or "buffer")
  end
  for _, n in ipairs(self._children) do
    local c = self[n]
    if type(c) == "table" then
      c:_each_tensor(fn, prefix .. n .. ".")
    else
      local learned, sd, names = c:named_parameters(), c:state_dict(), {}
      for k in pairs(sd) do names[#names + 1] = k end
      table.sort(names)
      for _, k in ipairs(names) do
        fn(prefix .. n .. "." .. k, learned[k] or sd[k], learned[k] and "param" or "buffer")
      end
    end
  end
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

function Module:parameters()
  local list = {}
  self:_each_param(function(_, t) list[#list + 1] = t end)
  return list
end

-- name -> tensor (the tensors themselves, shared). parameter_names() gives
-- the order.
function Module:named_parameters()
  local map = {}
  self:_each_param(function(n, t) map[n] = t end)
  return map
end

function Module:parameter_names()
  local list = {}
  self:_each_param(function(n) list[#list + 1] = n end)
  return list
end

function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  return n
end

function Module:children()
  local list = {}
  for _, n in ipairs(self._children) do list[#list + 1] = self[n] end
  return list
end

-- The module and all its descendants, depth first.
function Module:modules(list)
  list = list or {}
  list[#list + 1] = self
  for _, c in ipairs(self:children()) do
    if type(c) == "table" then c:modules(list) else list[#list + 1] = c end
  end
  return list
end

function Module:apply(fn)
  for _, m in ipairs(self:modules()) do fn(m) end
  return self
end

function Module:train(mode)
  if mode == nil then mode = true end
  self.training = mode and true or false
  for _, c in ipairs(self:children()) do c:train(self.training) end
  return self
end

function Module:eval() return self:train(false) end

function Module:zero_grad()
  for _, n in ipairs(self._params) do self[n].grad = nil end
  for _, c in ipairs(self:children()) do c:zero_grad() end
  return self
end

local DTYPES = { float32 = 1, float = 1, f32 = 1, float64 = 1, double = 1, f64 = 1, bfloat16 = 1, bf16 = 1 }
local FLOATS = { float32 = true, float64 = true, bfloat16 = true }

-- to("cuda") / to("float64"): parameters become new leaves (build the
-- optimizer after moving the model, as in PyTorch). A dtype converts only
-- floating-point tensors; integer and bool buffers keep their dtype.
function Module:to(where, _moved)
  if type(where) ~= "string" then
    error(self.__name .. ".to: expected a dtype or device name, got " .. type(where), 2)
  end
  local is_dtype = DTYPES[where] ~= nil
  -- _moved: old tensor -> new one across the whole tree, so tied weights stay tied
  local moved = _moved or {}
  local function move(t, param)
    if moved[t] then return moved[t] end
    local new = (is_dtype and not FLOATS[t.dtype]) and t or t:detach():to(where)
    if param then new:requires_grad_(true) end
    moved[t] = new
    return new
  end
  for _, n in ipairs(self._params) do rawset(self, n, move(self[n], true)) end
  for _, n in ipairs(self._buffers) do rawset(self, n, move(self[n], false)) end
  for _, c in ipairs(self:children()) do
    if type(c) == "table" then c:to(where, moved) else c:to(where) end
  end
  return self
end

function Module:cuda() return self:to("cuda") end
function Module:cpu() return self:to("cpu") end
function Module:double() return self:to("float64") end
function Module:float() return self:to("float32") end

-- name -> detached tensor sharing the parameter's storage.
function Module:state_dict()
  local sd = {}
  self:_each_tensor(function(n, t, kind)
    if kind ~= "nonpersistent" then sd[n] = t:detach() end
  end)
  return sd
end

local function shape_str(t) return "[" .. table.concat(t.shape, ", ") .. "]" end

-- Copies the tensors of `sd` into the module. strict (default true): every
-- name must be present and no other name may appear. Everything is checked
-- before anything is copied, so a failed load leaves the module unchanged.
function Module:load_state_dict(sd, strict)
  local who = self.__name .. ".load_state_dict"
  if type(sd) ~= "table" then error(who .. ": expected a table of tensors, got " .. type(sd), 2) end
  if strict == nil then strict = true end
  local own = self:state_dict()
  local missing, unexpected = {}, {}
  for n, dst in pairs(own) do
    local src = sd[n]
    if src == nil then
      missing[#missing + 1] = n
    elseif not is_tensor(src) then
      error(("%s: '%s' is a %s, expected a tensor"):format(who, n, type(src)), 2)
    elseif shape_str(src) ~= shape_str(dst) then
      error(("%s: '%s' has shape %s in the state dict, the module expects %s"):format(
        who, n, shape_str(src), shape_str(dst)), 2)
    end
  end
  for n in pairs(sd) do if own[n] == nil then unexpected[#unexpected + 1] = tostring(n) end end
  table.sort(missing)
  table.sort(unexpected)
  if strict and (#missing > 0 or #unexpected > 0) then
    local parts = {}
    if #missing > 0 then parts[#parts + 1] = "missing " .. table.concat(missing, ", ") end
    if #unexpected > 0 then parts[#parts + 1] = "unexpected " .. table.concat(unexpected, ", ") end
    error(("%s: names do not match the module: %s"):format(who, table.concat(parts, "; ")), 2)
  end
  ember.no_grad(function()
    for n, dst in pairs(own) do
      local src = sd[n]
      if src ~= nil then
        if src.device ~= dst.device then src = src:to(dst.device) end
        dst:copy_(src)
      end
    end
  end)
  return self, missing, unexpected
end

-- One line describing the module's own settings, e.g. "in_features=4".
function Module:extra_repr() return "" end

function Module:__tostring()
  local extra = self:extra_repr()
  if #self._children == 0 then return self.__name .. "(" .. extra .. ")" end
  local lines = { self.__name .. "(" }
  if extra ~= "" then lines[2] = "  " .. extra end
  for _, n in ipairs(self._children) do
    local s = tostring(self[n]):gsub("\n", "\n  ")
    lines[#lines + 1] = "  (" .. n .. "): " .. s
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

return Module
