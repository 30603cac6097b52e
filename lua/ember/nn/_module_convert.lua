-- nn/_module_convert.lua (internal): how nn.Module converts its tensors
-- (Module:to and Module.float_dtype; the methods and their documentation
-- are Module.lua's): PyTorch's argument forms, a bad dtype or device
-- refused before any tensor moves, only floating-point tensors given a
-- dtype, parameters kept as the same objects (converted in place: an
-- optimizer made before still holds them), tied tensors kept tied.
-- `require(this)(Module)` gives {to =, float_dtype =}.
local ember = require "ember.nn._ember"
local errors = require "ember._errors"

return function(Module)
  local C = {}

  -- Module.float_dtype: the floating-point dtype a name means, or nil (a
  -- device); an integer or bool dtype is an error naming op.
  local function float_dtype(where, op)
    local info = ember.dtype_info(where)
    if info and not info.floating then
      errors.raise("%s: modules convert to floating-point dtypes (float32, float64, bfloat16), not %s", op, info.name)
    end
    return info and info.name
  end

  C.float_dtype = float_dtype

  -- Module:to: PyTorch's forms (two names, a tensor, a table) as one pass per
  -- name; a device name tried on an empty tensor first; every tensor of the tree
  -- moved once (tied ones stay tied), parameters converted in place.
  function C.to(self, where, _moved)
    -- PyTorch's non_blocking (to(dtype, True), to(x, True), to{non_blocking =}):
    -- taken and ignored, ember's copies are synchronous
    if type(_moved) == "boolean" then _moved = nil end
    if _moved ~= nil and type(_moved) ~= "string" and type(_moved) ~= "table" then
      errors.raise("%s.to: the second argument must be a dtype or device name (or non_blocking, a boolean), got %s",
        self.__name, Module.is_tensor(_moved) and "a tensor" or type(_moved))
    end
    -- PyTorch's forms: to(device, dtype) in either order, to(tensor) (its
    -- device and dtype), to{device =, dtype =}; each name is one pass
    if type(_moved) == "string" or Module.is_tensor(where)
        or (type(where) == "table" and not Module.is_module(where)) then
      local names
      if Module.is_tensor(where) then
        names = { where.device, where.dtype }
      elseif type(where) == "table" then
        Module.check_options(self.__name .. ".to", where, { "dtype", "device", "non_blocking" })
        if where.non_blocking ~= nil and type(where.non_blocking) ~= "boolean" then
          errors.raise("%s.to: non_blocking must be a boolean, got %s", self.__name, type(where.non_blocking))
        end
        names = { where.device, where.dtype }
      else
        names = { where, _moved }
      end
      for i = 1, 2 do
        if names[i] ~= nil then self:to(names[i]) end
      end
      return self
    end
    if type(where) ~= "string" then
      errors.raise("%s.to: expected a dtype or device name (or both), a tensor or {dtype=, device=}, got %s",
        self.__name, type(where))
    end
    local is_dtype = float_dtype(where, self.__name .. ".to") ~= nil
    if not is_dtype and not _moved then
      -- a device, or neither: asked of an empty tensor, so a bad name is
      -- refused here, at the user's line, before any tensor moved
      local ok, err = pcall(function() return ember.zeros(0):to(where) end)
      if not ok then
        errors.raise("%s.to: %s", self.__name, (errors.strip_library_position(err):gsub("^ember%.to: ", "")))
      end
    end
    local moved = _moved or {} -- old tensor -> new one across the whole tree
    local function move(t, param)
      if moved[t] then return moved[t] end
      local new = (is_dtype and not ember.dtype_info(t.dtype).floating) and t or t:detach():to(where)
      if param and not rawequal(new, t) then
        -- a frozen parameter stays frozen (PyTorch's to() keeps requires_grad),
        -- and the parameter stays the same object: an optimizer holds it
        new = t:_assign(new:requires_grad_(t.requires_grad))
      end
      moved[t] = new
      return new
    end
    local reg = self._reg
    for _, n in ipairs(self._params) do reg[n] = move(reg[n], true) end
    for _, n in ipairs(self._buffers) do reg[n] = move(reg[n], false) end
    for _, c in ipairs(self:children()) do c:to(where, moved) end
    return self
  end

  return C
end
