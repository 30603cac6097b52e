-- nn/_conv_transpose.lua (internal): the transposed convolution shared by
-- nn.ConvTranspose1d and nn.ConvTranspose2d (torch.nn.ConvTranspose*d).
--
-- How it is computed: as an ordinary convolution (nn/_conv.lua's conv2d,
-- so the backend's kernel where it has one, else the composition) of the
-- input dilated by the stride (stride - 1 zeros between neighbours) and
-- padded by dilation * (kernel - 1) - padding on each side (plus
-- output_padding after; a negative pad crops), with stride 1, the same
-- dilation and groups, and the weight [in, out/g, k...] turned into a
-- convolution's [out, in/g, k...]: per group the in/out axes swapped and
-- the kernel flipped.
--
-- Why this route and not the others:
-- * the convolution's input gradient (what a transposed convolution is) is
--   reachable only inside autograd's backward, and ember's backward is not
--   differentiable (no double backward), so a module built on it would have
--   no gradients of its own;
-- * im2col's adjoint (one matmul w^T x, then col2im: every kernel offset's
--   columns added into a strided window of the output) does only the useful
--   products, but ember has no strided scatter-add, and composing col2im from
--   core ops means kh * kw padded output-sized tensors summed, which costs
--   more in memory traffic than it saves;
-- * the dilate-and-convolve form is exact for groups (the conv's own groups:
--   group j of the weight is group j of the input), runs on oneDNN's
--   convolution forward and backward in float32/bfloat16 and on the
--   composition everywhere else (float64, CUDA), and its gradients are the
--   convolution's. Its price is the zeros: with stride s the convolution
--   sees s^2 (s for 1-d) times more input positions than the useful ones;
--   for stride 1 it does no extra work at all.
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local conv = require "ember.nn._conv"
local init = require "ember.nn.weight_init"

local M = {}

local OPTS = { "stride", "padding", "output_padding", "dilation", "groups", "bias", "padding_mode", "dtype", "device",
  "route" }

local function fmt(v)
  if type(v) == "table" then
    local t = {}
    for i, x in ipairs(v) do t[i] = tostring(x) end
    return "{" .. table.concat(t, ", ") .. "}"
  end
  return type(v) == "string" and ("%q"):format(v) or tostring(v)
end

-- output_padding as nd non-negative integers, or nil.
local function tuple0(v, nd)
  if math.type(v) == "integer" then
    local t = {}
    for i = 1, nd do t[i] = v end
    return t
  end
  if type(v) ~= "table" or #v ~= nd then return nil end
  for i = 1, nd do if math.type(v[i]) ~= "integer" or v[i] < 0 then return nil end end
  return { table.unpack(v, 1, nd) }
end

-- The module's sizes and parameters; nd = 1 or 2, name "ConvTranspose1d"/"ConvTranspose2d".
function M.setup(self, name, nd, in_channels, out_channels, kernel_size, opts)
  opts = Module.check_options("nn." .. name, opts, OPTS)
  for _, f in ipairs { { "in_channels", in_channels }, { "out_channels", out_channels } } do
    if math.type(f[2]) ~= "integer" or f[2] < 1 then
      error(("%s: %s must be a positive integer, got %s"):format(name, f[1], tostring(f[2])))
    end
  end
  local groups = opts.groups or 1
  if math.type(groups) ~= "integer" or groups < 1 then
    error(("%s: groups must be a positive integer, got %s"):format(name, tostring(groups)))
  end
  if in_channels % groups ~= 0 then
    error(("%s: in_channels=%d must be divisible by groups=%d"):format(name, in_channels, groups))
  end
  if out_channels % groups ~= 0 then
    error(("%s: out_channels=%d must be divisible by groups=%d"):format(name, out_channels, groups))
  end
  if type(opts.padding) == "string" then
    error(("%s: padding must be a non-negative integer or %s (PyTorch's transposed convolutions take no \"%s\"), "
      .. "got %s"):format(name, nd == 2 and "a pair of them" or "a table of one", opts.padding, fmt(opts.padding)))
  end
  -- The rest (kernel_size, stride, padding, dilation, padding_mode, route,
  -- and PyTorch's initialisation) is nn.Conv*d's, with the channels swapped:
  -- the weight is [in, out/groups, k...], and PyTorch initialises it as a
  -- convolution's of that shape (fan_in = out/groups * prod(k)).
  local copts = {}
  for k, v in pairs(opts) do if k ~= "output_padding" then copts[k] = v end end
  conv.setup(self, name, nd, out_channels, in_channels, kernel_size, copts)
  self.in_channels, self.out_channels = in_channels, out_channels
  self._pads = nil
  if self.bias then
    -- conv.setup made it [in_channels] (its out_channels); PyTorch's is [out] with the same bound
    local bound = 1 / math.sqrt(init.calculate_fans(self.weight))
    self.bias = ember.uniform({ out_channels }, -bound, bound, { dtype = opts.dtype, device = opts.device })
      :requires_grad_()
  end
  local op = tuple0(opts.output_padding or 0, nd)
  if not op then
    error(("%s: output_padding must be a non-negative integer or %s, got %s"):format(name,
      nd == 2 and "a pair of them" or "a table of one", fmt(opts.output_padding)))
  end
  for i = 1, nd do
    if op[i] >= self.stride[i] and op[i] >= self.dilation[i] then
      error(("%s: output_padding must be smaller than either stride or dilation (as PyTorch), got output_padding=%s, "
        .. "stride=%s, dilation=%s"):format(name, fmt(op), fmt(self.stride), fmt(self.dilation)))
    end
  end
  self.output_padding = op
end

-- The output size of each spatial dim for input sizes n (a list of nd).
local function out_sizes(self, n, op)
  local o = {}
  for i = 1, #n do
    o[i] = (n[i] - 1) * self.stride[i] - 2 * self.padding[i] + self.dilation[i] * (self.kernel_size[i] - 1) + op[i] + 1
  end
  return o
end

-- x [N, C, H, W] with s - 1 zeros between neighbours along dim (3 or 4).
local function dilate(x, dim, s)
  if s == 1 or x.shape[dim] == 1 then return x end
  local shape = x.shape
  local n = shape[dim]
  local zshape = {}
  for i = 1, 4 do zshape[i] = shape[i] end
  -- [.., n, 1, ..] next to [.., n, s - 1, ..] zeros, read as [.., n * s, ..]
  table.insert(zshape, dim + 1, s - 1)
  local z = ember.zeros(zshape, { dtype = x.dtype, device = x.device })
  local y = ember.cat({ x:unsqueeze(dim + 1), z }, dim + 1)
  local flat = {}
  for i = 1, 4 do flat[i] = shape[i] end
  flat[dim] = n * s
  return y:reshape(flat):narrow(dim, 1, (n - 1) * s + 1)
end

-- The module's forward: x [N, C, *spatial] or [C, *spatial]; output_size
-- (optional, as PyTorch's forward(input, output_size)) picks the
-- output_padding that gives those spatial sizes.
function M.forward(self, name, nd, x, output_size)
  local shape = nd == 2 and "[N, C, H, W] or [C, H, W]" or "[N, C, L] or [C, L]"
  if not ember.is_tensor(x) or (x.ndim ~= nd + 1 and x.ndim ~= nd + 2) then
    error(("%s.forward: expected an input %s, got %s"):format(name, shape,
      ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)))
  end
  local batched = x.ndim == nd + 2
  local c = x.shape[batched and 2 or 1]
  if c ~= self.in_channels then
    error(("%s.forward: expected %d input channels (in_channels), got %d in an input of shape [%s]")
      :format(name, self.in_channels, c, table.concat(x.shape, ", ")))
  end
  local n = {}
  for i = 1, nd do n[i] = x.shape[x.ndim - nd + i] end
  local op = self.output_padding
  if output_size ~= nil then
    -- PyTorch's output_size: the spatial sizes (a longer list's last nd)
    local want = math.type(output_size) == "integer" and { output_size } or output_size
    if type(want) == "table" and #want >= nd then
      local w = {}
      for i = 1, nd do w[i] = want[#want - nd + i] end
      want = w
    end
    local lo = out_sizes(self, n, { 0, 0 })
    local ok = type(want) == "table" and #want == nd
    op = {}
    for i = 1, nd do
      local v = ok and want[i]
      if math.type(v) ~= "integer" or v < lo[i] or v >= lo[i] + math.max(self.stride[i], self.dilation[i]) then
        local hi = {}
        for j = 1, nd do hi[j] = lo[j] + math.max(self.stride[j], self.dilation[j]) - 1 end
        error(("%s.forward: output_size %s is not reachable from an input of shape [%s]: each size must be between "
          .. "%s and %s"):format(name, fmt(output_size), table.concat(x.shape, ", "), fmt(lo), fmt(hi)))
      end
      op[i] = v - lo[i]
    end
  end
  local o = out_sizes(self, n, op)
  for i = 1, nd do
    if o[i] < 1 then
      error(("%s.forward: the output would be empty (size %d along dim %d) for an input of shape [%s]")
        :format(name, o[i], x.ndim - nd + i, table.concat(x.shape, ", ")))
    end
  end
  local xb = batched and x or x:unsqueeze(1)
  if nd == 1 then xb = xb:unsqueeze(3) end
  -- the convolution's weight: [in, out/g, k...] -> per group [out/g, in/g, k...], kernel flipped
  local g = self.groups
  local w = self.weight
  if nd == 1 then w = w:unsqueeze(3) end
  local Cin, Cog, kh, kw = w.shape[1], w.shape[2], w.shape[3], w.shape[4]
  w = w:reshape({ g, Cin // g, Cog, kh, kw }):transpose(2, 3):reshape({ Cog * g, Cin // g, kh, kw })
  w = w:flip(nd == 2 and { 3, 4 } or { 4 })
  local s = nd == 2 and self.stride or { 1, self.stride[1] }
  local d = nd == 2 and self.dilation or { 1, self.dilation[1] }
  local k = { kh, kw }
  local p = nd == 2 and self.padding or { 0, self.padding[1] }
  local opad = nd == 2 and op or { 0, op[1] }
  local pads = {}
  for i = 1, 2 do
    xb = dilate(xb, 2 + i, s[i])
    local lo = d[i] * (k[i] - 1) - p[i]
    local hi = lo + opad[i]
    -- a negative pad crops
    if lo < 0 or hi < 0 then
      local a, b = math.max(-lo, 0), math.max(-hi, 0)
      xb = xb:narrow(2 + i, 1 + a, xb.shape[2 + i] - a - b)
    end
    pads[2 * i - 1], pads[2 * i] = math.max(lo, 0), math.max(hi, 0)
  end
  local y = conv.conv2d(xb, w, self.bias, { 1, 1 }, pads, d, g, self.route)
  if nd == 1 then y = y:squeeze(3) end
  if not batched then y = y:squeeze(1) end
  return y
end

-- PyTorch's extra_repr, with output_padding when it is not zero.
function M.extra_repr(self, nd)
  local s = conv.extra_repr(self, nd)
  local zero = true
  for i = 1, nd do if self.output_padding[i] ~= 0 then zero = false end end
  if not zero then
    local t = nd == 1 and ("(" .. self.output_padding[1] .. ",)")
      or ("(%d, %d)"):format(self.output_padding[1], self.output_padding[2])
    -- PyTorch prints it after padding and dilation, before groups and bias
    local at = s:find(", groups=", 1, true) or s:find(", bias=", 1, true)
    if at then s = s:sub(1, at - 1) .. ", output_padding=" .. t .. s:sub(at) else s = s .. ", output_padding=" .. t end
  end
  return s
end

return M
