--- nn.Bilinear(in1_features, in2_features, out_features [, {bias=true, dtype=, device=}]):
-- y = x1^T A x2 + b for each of out_features, as torch.nn.Bilinear:
-- y[..., o] = sum_ij x1[..., i] weight[o, i, j] x2[..., j] + bias[o].
-- Parameters as PyTorch's: `weight` [out, in1, in2] and `bias` [out], both
-- U(+-1/sqrt(in1_features)). x1 [..., in1] and x2 [..., in2] share their
-- leading dims. Computed as one matmul (x1 against the weight laid out as
-- [in1, out * in2]), a product with x2 and a sum; gradients through autograd.
-- Errors name nn.Bilinear at the caller's line: bad sizes or options, inputs
-- whose last dims are not in1/in2 or whose leading dims differ.
-- @usage local bil = nn.Bilinear(3, 4, 2)
-- print(bil(ember.randn(5, 3), ember.randn(5, 4)).shape)   --> ember.Size{5, 2}
-- @classmod nn.Bilinear
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Bilinear = Module:extend("Bilinear")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
Bilinear.SIGNATURE = { sizes = { "in1_features", "in2_features", "out_features" },
  options = { "bias" } }

function Bilinear:__init(in1_features, in2_features, out_features, opts)
  for _, f in ipairs { { "in1_features", in1_features }, { "in2_features", in2_features },
    { "out_features", out_features } } do
    if math.type(f[2]) ~= "integer" or f[2] < 1 then
      error(("Bilinear: %s must be a positive integer, got %s"):format(f[1], tostring(f[2])))
    end
  end
  opts = Module.check_options("nn.Bilinear", opts, { "bias", "dtype", "device" })
  self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
  local bound = 1 / math.sqrt(in1_features)
  local topts = { dtype = opts.dtype, device = opts.device }
  self.weight = ember.uniform({ out_features, in1_features, in2_features }, -bound, bound, topts):requires_grad_()
  if opts.bias ~= false then self.bias = ember.uniform({ out_features }, -bound, bound, topts):requires_grad_() end
end

--- x1^T A x2 + b.
-- @tparam Tensor x1 [..., in1_features]
-- @tparam Tensor x2 [..., in2_features] (x1's leading dims)
-- @treturn Tensor [..., out_features]
function Bilinear:forward(x1, x2)
  local ok = ember.is_tensor(x1) and ember.is_tensor(x2) and x1.ndim >= 1 and x1.ndim == x2.ndim
    and x1.shape[x1.ndim] == self.in1_features and x2.shape[x2.ndim] == self.in2_features
  for i = 1, ok and x1.ndim - 1 or 0 do ok = ok and x1.shape[i] == x2.shape[i] end
  if not ok then
    local function s(t) return ember.is_tensor(t) and ("[" .. table.concat(t.shape, ", ") .. "]") or type(t) end
    error(("Bilinear.forward: expected x1 [..., %d] and x2 [..., %d] with the same leading dims, got %s and %s")
      :format(self.in1_features, self.in2_features, s(x1), s(x2)))
  end
  return Bilinear._bilinear(x1, x2, self.weight, self.bias)
end

-- x1^T W_o x2 + b_o for each output o, over the leading dims (checked by
-- the caller): the module's forward and nn.functional.bilinear's.
function Bilinear._bilinear(x1, x2, weight, bias)
  local O, I1, I2 = weight.shape[1], weight.shape[2], weight.shape[3]
  local lead = {}
  for i = 1, x1.ndim - 1 do lead[i] = x1.shape[i] end
  local a = x1:reshape({ -1, I1 })
  local b = x2:reshape({ -1, 1, I2 })
  local w = weight:permute(2, 1, 3):reshape({ I1, O * I2 })
  local y = (a:matmul(w):reshape({ -1, O, I2 }) * b):sum(3)
  if bias then y = y + bias end
  lead[#lead + 1] = O
  return y:reshape(lead)
end

--- The sizes, for printing (PyTorch's text).
function Bilinear:extra_repr()
  return ("in1_features=%d, in2_features=%d, out_features=%d, bias=%s"):format(self.in1_features,
    self.in2_features, self.out_features, tostring(self.bias ~= nil))
end

-- C errors (bad shapes, dtypes) name the user's line, not this file's.
Bilinear.forward = require("ember._errors").wrap(Bilinear.forward)

return Bilinear
