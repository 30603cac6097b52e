--- nn.View(size1, size2, ...): Torch7's nn.View, `x:view(sizes)` with
-- Torch7's batch rule: when the input has more elements than the sizes
-- give (none is -1), the first dim is the batch (the output is [B, sizes...]);
-- one size may be -1 (inferred, and then no batch is inferred).
-- `View(...):setNumInputDims(n)` says the input's last n dims are one
-- sample, so that a batch of one is kept as [1, sizes...]. The input must
-- allow a view (contiguous: x:contiguous() first, else nn.Reshape copies).
-- @usage local v = nn.View(2, 6)
-- print(v(ember.zeros(12)).shape, v(ember.zeros(5, 12)).shape)   --> ember.Size{2, 6}	ember.Size{5, 2, 6}
-- @classmod nn.View
local errors = require "ember._errors"
local Module = require "ember.nn.Module"

local View = Module:extend("View")

-- sizes from numbers, a list or an ember.Size; checked as Torch7's
function View:__init(...)
  local sizes = select("#", ...) == 1 and type((...)) ~= "number" and (...) or { ... }
  if type(sizes) ~= "table" and type(sizes) ~= "userdata" then
    errors.raise("nn.View: expected sizes (numbers, a list or an ember.Size), got %s", type(sizes))
  end
  local size, n, infer = {}, 1, false
  for i = 1, #sizes do
    local s = sizes[i]
    if math.type(s) ~= "integer" or s < -1 or s == 0 then
      errors.raise("nn.View: size %d must be a positive integer or -1, got %s", i, tostring(s))
    end
    if s == -1 then
      if infer then errors.raise("nn.View: only one size can be -1") end
      infer = true
    else
      n = n * s
    end
    size[i] = s
  end
  self.size, self.num_elements, self.infer = size, n, infer
end

--- Torch7's setNumInputDims(n): the input's last n dims are one sample.
-- @int n
-- @treturn View self
function View:setNumInputDims(n)
  if math.type(n) ~= "integer" or n < 1 then errors.raise("View.setNumInputDims: expected a positive integer, got %s", tostring(n)) end
  self.num_input_dims = n
  return self
end

-- Torch7's batchsize(): the batch size, or nil when the view takes the whole input.
local function batch_size(self, x)
  local nd, shape = x:dim(), x.shape
  local maxdim = self.num_input_dims or nd
  local ne = 1
  for i = nd, math.max(nd - maxdim + 1, 1), -1 do ne = ne * shape[i] end
  if ne % self.num_elements ~= 0 then
    errors.raise("View.forward: input view (%s) and desired view (%s) do not match", table.concat(shape, "x"),
      table.concat(self.size, "x"))
  end
  local b = self.infer and 1 or ne // self.num_elements
  for i = nd - maxdim, 1, -1 do b = b * shape[i] end
  if b == 1 and (not self.num_input_dims or nd <= self.num_input_dims) then return nil end
  return b
end

--- The view of x.
-- @tparam Tensor x
function View:forward(x)
  Module.check_tensor_input("View.forward", x)
  local b = batch_size(self, x)
  if b then return x:view(b, table.unpack(self.size)) end
  return x:view(table.unpack(self.size))
end

--- The settings, for printing.
function View:extra_repr() return table.concat(self.size, ", ") end

View.forward = errors.wrap(View.forward)

return View
