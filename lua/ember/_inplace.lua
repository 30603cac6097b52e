-- ember/_inplace.lua: PyTorch's in-place twins of elementwise ops,
-- t:masked_fill_(mask, v), t:clamp_(lo, hi), t:relu_(), t:sub_(x) ...:
-- the out-of-place op, written back into t (t:copy_), t returned. As
-- copy_, they are recorded by autograd on a tensor of a graph that no other
-- tensor shares (the core's records_inplace, as PyTorch's in-place ops), and
-- refuse a leaf that requires grad outside no_grad. init.lua loads it.
local core = require "ember.core"
local errors = require "ember._errors"
local index_value = require("ember._helpers").index_value
local positions = require("ember._helpers").positions
local T = core.Tensor

local OPS = {
  "masked_fill", "clamp", "clamp_min", "clamp_max", "relu", "sub", "div", "pow", "abs", "neg", "exp", "log",
  "sqrt", "rsqrt", "sigmoid", "tanh", "floor", "ceil", "round", "trunc", "sign", "sin", "cos", "log1p", "expm1",
  "erf", "atan", "asin", "acos", "erfinv", "lgamma", "digamma", "atan2", "silu", "gelu", "lerp", "addcmul", "addcdiv", "nan_to_num",
  "index_fill", "index_add", "index_copy", "scatter", "scatter_add", "tril", "triu", "fmod", "remainder",
  "reciprocal", "square", "frac", "floor_divide", "true_divide", "logical_not", "put", "masked_scatter", "copysign",
  "hypot",
}

-- bool < integers < floats: an in-place op may not write a result of a
-- higher category into x (torch.can_cast: x:clamp_(2.5, 6) on int64 is
-- "result type Float can't be cast to the desired output type Long").
local function category(dt)
  if dt == "bool" then return 0 end
  local info = core.dtype_info(dt)
  return info and info.floating and 2 or 1
end

for _, op in ipairs(OPS) do
  local name, f = op .. "_", T[op]
  if T[name] == nil and f ~= nil then
    T[name] = function(x, ...)
      local ok, err = pcall(function(...)
        local y = f(x, ...)
        if core.is_tensor(y) and core.is_tensor(x) and category(y.dtype) > category(x.dtype) then
          error(("ember.%s: result type %s can't be cast to the desired output type %s"):format(name, y.dtype, x.dtype), 0)
        end
        x:copy_(y)
      end, ...)
      if not ok then
        -- the message names what the user called, not copy_
        errors.raise("%s", (tostring(err):gsub("^[^\n]-:%d+: ", ""):gsub("ember%.copy_", "ember." .. name)))
      end
      return x
    end
  end
end

-- ---- boolean masks as indices: x[mask] and x[mask] = v ----------------------

local mt = debug.getregistry()["ember.Tensor"]
local shape_str = errors.shape_str

-- The mask's checks (its shape is x's leading dims) and the 1-based row
-- numbers it selects in x viewed as [rows, rest...].
local function mask_rows(op, x, mask)
  local ok = mask.ndim >= 1 and mask.ndim <= x.ndim and mask.device == x.device
  for i = 1, ok and mask.ndim or 0 do ok = ok and mask.shape[i] == x.shape[i] end
  if not ok then
    errors.raise("ember.%s: a bool mask must have the tensor's leading dims (and device): mask %s, tensor %s",
      op, shape_str(mask), shape_str(x))
  end
  local rest = {}
  for i = mask.ndim + 1, x.ndim do rest[#rest + 1] = x.shape[i] end
  return core.nonzero(mask:reshape(-1)):view(-1), rest
end

-- x[mask]: the selected elements (rows, when the mask covers leading dims
-- only) as [n, rest...], in row-major order, as PyTorch (differentiable:
-- an index_select).
mt.__mask_index = function(x, mask)
  local idx, rest = mask_rows("index", x, mask)
  return x:reshape(-1, table.unpack(rest)):index_select(1, idx)
end

-- x[mask] = v: a number, or a tensor of the selected shape [n, rest...]
-- (or one that broadcasts to it), written in place (as copy_: not on a
-- tensor of an autograd graph).
mt.__mask_newindex = function(x, mask, v)
  local idx, rest = mask_rows("setindex", x, mask)
  local ok, err = pcall(function()
    if type(v) == "number" or type(v) == "boolean" then
      local full = mask
      for _ = 1, #rest do full = full:unsqueeze(-1) end
      x:copy_(x:masked_fill(full:expand(x.shape), v))
    elseif core.is_tensor(v) then
      local rows = x:reshape(-1, table.unpack(rest)):clone()
      local n = idx.shape[1]
      local shape = { n, table.unpack(rest) }
      local src = index_value("setindex", v, x.dtype, shape)
      -- one row at a time is slow; an index_copy along dim 1 in one op:
      -- zero the selected rows, then add the values there
      local keep = core.ones(rows.shape[1], { dtype = x.dtype, device = x.device })
      keep = keep:masked_fill(mask:reshape(-1), 0)
      local view = { rows.shape[1] }
      for _ = 1, #rest do view[#view + 1] = 1 end
      rows = rows * keep:view(table.unpack(view))
      local index = idx:view(n, table.unpack(view, 2)):expand(shape)
      rows = rows:scatter_add(1, index, src)
      x:copy_(rows:reshape(x.shape))
    else
      errors.raise("ember.setindex: value must be a number or a tensor, got %s", type(v))
    end
  end)
  if not ok then errors.raise("%s", (tostring(err):gsub("^[^\n]-:%d+: ", ""):gsub("ember%.copy_", "ember.setindex"))) end
end

-- ---- int64 tensors as indices: x[idx] = v -------------------------------------------

-- x[idx] = v: the rows at the 1-based positions idx (an int64 tensor of any
-- shape) set to v, a number or a tensor that broadcasts to [#idx, rest...]
-- (torch's x[idx] = v; written in place, as copy_).
mt.__index_newindex = function(x, idx, v)
  local ok, err = pcall(function()
    if idx.dtype ~= "int64" then
      error(("ember.setindex: an index tensor must be int64 (1-based positions in dim 1) or a bool mask, got %s")
        :format(idx.dtype), 0)
    end
    local flat = positions("setindex", idx:reshape(-1), x.shape[1])
    if type(v) == "number" or type(v) == "boolean" then
      x:copy_(x:index_fill(1, flat, type(v) == "boolean" and (v and 1 or 0) or v))
    elseif core.is_tensor(v) then
      local shape = { flat:numel() }
      for i = 2, x.ndim do shape[i] = x.shape[i] end
      x:copy_(x:index_copy(1, flat, index_value("setindex", v, x.dtype, shape)))
    else
      error(("ember.setindex: value must be a number or a tensor, got %s"):format(type(v)), 0)
    end
  end)
  if not ok then
    errors.raise("%s", (tostring(err):gsub("^[^\n]-:%d+: ", ""):gsub("^ember%.[%w_]+:", "ember.setindex:")))
  end
end
