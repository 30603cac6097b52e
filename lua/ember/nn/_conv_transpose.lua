-- nn/_conv_transpose.lua (internal): the transposed convolution shared by
-- nn.ConvTranspose1d, nn.ConvTranspose2d and nn.ConvTranspose3d (torch.nn.ConvTranspose*d).
-- (3-d: the textbook form below, `forward3d`.)
--
-- How it is computed: as ordinary convolutions (nn/_conv.lua's conv2d, so
-- the backend's kernel where it has one -- oneDNN's forward and backward on
-- the CPU in float32/bfloat16 -- else the composition), one per output
-- phase. With stride s, output position f takes only the kernel taps i with
-- (i d) = (f + p) mod s: so the s_h * s_w phases (f mod s) are each a
-- stride-1 correlation of the undilated input with those taps flipped
-- (dilation d / gcd(s, d)), interleaved afterwards (a stack and a reshape)
-- and cut to the output size (`phases` below works out each phase's taps
-- and input window). The weight [in, out/g, k...] becomes a convolution's
-- [out, in/g, k...] by swapping the in/out axes per group; the conv's own
-- groups then pair group j of the input with group j of the weight, so
-- groups are exact by construction. For stride 1 it is one convolution.
--
-- Why this route and not the others:
-- * the convolution's input gradient (what a transposed convolution is) is
--   reachable only inside autograd's backward, and ember's backward is not
--   differentiable (no double backward), so a module built on it would have
--   no gradients of its own;
-- * im2col's adjoint (one matmul w^T x, then col2im: every kernel offset's
--   columns added into a strided window of the output) needs a strided
--   scatter-add ember does not have; composed from core ops it is kh * kw
--   padded output-sized tensors summed;
-- * the textbook form (the input dilated with s - 1 zeros, then one
--   convolution) is the simplest, but its convolution multiplies the zeros
--   too: s^2 times the useful work. On [8, 64, 32, 32], 64 -> 32, kernel 4,
--   stride 2, forward + backward at 1 thread it took 32 ms, the phases take
--   11.5 ms (PyTorch 1.13's ConvTranspose2d 24.5 ms; the adjoint Conv2d 8.3).
--   The phases do exactly the useful products; their price is s^2 kernel
--   calls and one copy of the output to interleave them.
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local conv = require "ember.nn._conv"
local init = require "ember.nn.weight_init"

local M = {}

local phases

local OPTS = { "stride", "padding", "output_padding", "dilation", "groups", "bias", "padding_mode", "dtype", "device",
  "route" }

local fmt = conv.fmt

-- The sizes of a transposed convolution (the module's and nn.functional's):
-- nn/_conv.lua's (kernel_size, stride, padding, dilation, route) and
-- output_padding, set on self from opts (checked by the caller); nd = 1 or
-- 2; name for errors ("ConvTranspose2d", "nn.functional.conv_transpose2d").
function M.sizes(self, name, nd, kernel_size, opts)
  if type(opts.padding) == "string" then
    error(("%s: padding must be a non-negative integer or %s (PyTorch's transposed convolutions take no \"%s\"), "
      .. "got %s"):format(name, ({ "a table of one", "a pair of them", "a table of three" })[nd], opts.padding, fmt(opts.padding)))
  end
  if opts.padding_mode ~= nil and opts.padding_mode ~= "zeros" then
    error(("%s: only padding_mode \"zeros\" is supported (as PyTorch's transposed convolutions), got %s"):format(
      name, fmt(opts.padding_mode)))
  end
  conv.sizes(self, name, nd, kernel_size, opts)
  self._pads = nil
  local op = conv.tuple(opts.output_padding or 0, nd, 0)
  if not op then
    error(("%s: output_padding must be a non-negative integer or %s, got %s"):format(name,
      ({ "a table of one", "a pair of them", "a table of three" })[nd], fmt(opts.output_padding)))
  end
  for i = 1, nd do
    if op[i] >= self.stride[i] and op[i] >= self.dilation[i] then
      error(("%s: output_padding must be smaller than either stride or dilation (as PyTorch), got output_padding=%s, "
        .. "stride=%s, dilation=%s"):format(name, fmt(op), fmt(self.stride), fmt(self.dilation)))
    end
  end
  self.output_padding = op
end

-- The module's sizes and parameters; nd = 1 or 2, name "ConvTranspose1d"/"ConvTranspose2d".
function M.setup(self, name, nd, in_channels, out_channels, kernel_size, opts)
  opts = Module.check_options("nn." .. name, opts, OPTS)
  -- checked here with this module's names (conv.setup sees them swapped)
  conv.check_channels(name, in_channels, out_channels, opts.groups)
  M.sizes(self, name, nd, kernel_size, opts)
  -- The parameters are nn.Conv*d's, with the channels swapped: the weight
  -- is [in, out/groups, k...], and PyTorch initialises it as a
  -- convolution's of that shape (fan_in = out/groups * prod(k)).
  local copts = {}
  for k, v in pairs(opts) do if k ~= "output_padding" then copts[k] = v end end
  local op = self.output_padding
  conv.setup(self, name, nd, out_channels, in_channels, kernel_size, copts)
  self.in_channels, self.out_channels = in_channels, out_channels
  self._pads, self.output_padding = nil, op
  if self.bias then
    -- conv.setup made it [in_channels] (its out_channels); PyTorch's is [out] with the same bound
    local bound = 1 / math.sqrt(init.calculate_fans(self.weight))
    self.bias = ember.uniform({ out_channels }, -bound, bound, { dtype = opts.dtype, device = opts.device })
      :requires_grad_()
  end
end

-- The output size of each spatial dim for input sizes n (a list of nd).
local function out_sizes(self, n, op)
  local o = {}
  for i = 1, #n do
    o[i] = (n[i] - 1) * self.stride[i] - 2 * self.padding[i] + self.dilation[i] * (self.kernel_size[i] - 1) + op[i] + 1
  end
  return o
end

-- The output phases of one spatial dim: output position f (0-based) with
-- f mod s = phi takes the kernel taps i with (i d) mod s = (phi + p) mod s,
-- i = i0, i0 + step, ... (step = s / gcd(s, d)), which meet the input
-- positions q - t (t = (i d - r) / s, spaced d / gcd(s, d) apart): a
-- correlation of the input with those taps flipped, dilation d / gcd(s, d).
-- Each phase computes n0 = ceil(out / s) positions (the last cut after
-- interleaving) from the input window [from, from + len) (1-based) padded
-- by lo / hi zeros. n, k, s, d, p: the dim's sizes; out its output length.
local function gcd(a, b)
  while b ~= 0 do a, b = b, a % b end
  return a
end

phases = function(n, k, s, d, p, out)
  local step, dil = s // gcd(s, d), d // gcd(s, d)
  local n0 = (out + s - 1) // s
  local list = { n0 = n0 }
  for phi = 0, s - 1 do
    local r, c = (phi + p) % s, (phi + p) // s
    local i0
    for i = 0, math.min(k, step) - 1 do
      if (i * d) % s == r then i0 = i; break end
    end
    local ph = { taps = 0 }
    if i0 then
      local taps = (k - 1 - i0) // step + 1
      local span = (taps - 1) * dil
      -- input positions (0-based) read: c - t0 - span + [0, n0 + span)
      local ws = c - (i0 * d - r) // s - span
      local we = ws + n0 + span
      local is, ie = math.max(ws, 0), math.min(we, n)
      if ie > is then
        ph = { taps = taps, i0 = i0 + 1, step = step, dil = dil, from = is + 1, len = ie - is, lo = is - ws,
          hi = we - ie }
      end
    end
    list[#list + 1] = ph
  end
  return list
end

-- The module's forward: x [N, C, *spatial] or [C, *spatial]; output_size
-- (optional, as PyTorch's forward(input, output_size)) picks the
-- output_padding that gives those spatial sizes. The module's forward (self
-- = the module) and nn.functional.conv_transpose1d/2d's (self from their
-- arguments); `who` names the caller in errors (default name .. ".forward").
function M.forward(self, name, nd, x, output_size, who)
  who = who or name .. ".forward"
  local batched = conv.check_input(self, who, nd, x)
  local n = {}
  for i = 1, nd do n[i] = x.shape[x.ndim - nd + i] end
  local op = self.output_padding
  output_size = require("ember.nn._functional_checks").forward_option(who, "output_size", output_size)
  if output_size ~= nil then
    -- PyTorch's output_size: the spatial sizes (a longer list's last nd)
    local want = math.type(output_size) == "integer" and { output_size } or output_size
    if type(want) == "table" and #want >= nd then
      local w = {}
      for i = 1, nd do w[i] = want[#want - nd + i] end
      want = w
    end
    local lo = out_sizes(self, n, { 0, 0, 0 })
    local ok = type(want) == "table" and #want == nd
    op = {}
    for i = 1, nd do
      local v = ok and want[i]
      if math.type(v) ~= "integer" or v < lo[i] or v >= lo[i] + math.max(self.stride[i], self.dilation[i]) then
        local hi = {}
        for j = 1, nd do hi[j] = lo[j] + math.max(self.stride[j], self.dilation[j]) - 1 end
        error(("%s: output_size %s is not reachable from an input of shape [%s]: each size must be between "
          .. "%s and %s"):format(who, fmt(output_size), table.concat(x.shape, ", "), fmt(lo), fmt(hi)))
      end
      op[i] = v - lo[i]
    end
  end
  local o = out_sizes(self, n, op)
  for i = 1, nd do
    if o[i] < 1 then
      error(("%s: the output would be empty (size %d along dim %d) for an input of shape [%s]")
        :format(who, o[i], x.ndim - nd + i, table.concat(x.shape, ", ")))
    end
  end
  -- an absurd stride is an error before one convolution per output phase is built (it hung)
  local O = self.weight.shape[2] * self.groups
  local shape = batched and { x.shape[1], O } or { O }
  for i = 1, nd do shape[#shape + 1] = o[i] end
  require("ember.nn._pool").check_shape_fits(who, shape)
  if nd == 3 then return M.forward3d(self, x, batched, op) end
  local xb = batched and x or x:unsqueeze(1)
  if nd == 1 then xb = xb:unsqueeze(3) end
  -- the convolution's weight: [in, out/g, k...] -> per group [out/g, in/g, k...]
  local g = self.groups
  local w = self.weight
  if nd == 1 then w = w:unsqueeze(3) end
  local Cin, Cog, kh, kw = w.shape[1], w.shape[2], w.shape[3], w.shape[4]
  w = w:reshape({ g, Cin // g, Cog, kh, kw }):transpose(2, 3):reshape({ Cog * g, Cin // g, kh, kw })
  local two = function(v, one) if nd == 2 then return v end return { one, v[1] } end
  local s, d, p = two(self.stride, 1), two(self.dilation, 1), two(self.padding, 0)
  local k, n, out = { kh, kw }, { xb.shape[3], xb.shape[4] }, two(o, 1)
  -- one convolution per output phase, s_h * s_w of them: a stride of millions would build them for minutes
  if s[1] * s[2] > 1 << 20 then
    error(("%s: stride %s makes %d output phases, more than the %d this transposed convolution builds")
      :format(who, fmt(self.stride), s[1] * s[2], 1 << 20))
  end
  local ph = { phases(n[1], k[1], s[1], d[1], p[1], out[1]), phases(n[2], k[2], s[2], d[2], p[2], out[2]) }
  -- one convolution per output phase (stride s: s_h * s_w of them), each on
  -- the input itself with the kernel taps that reach that phase
  local Y, first = {}, nil
  for a, A in ipairs(ph[1]) do
    Y[a] = {}
    for b, Bp in ipairs(ph[2]) do
      if A.taps > 0 and Bp.taps > 0 then
        local xw = xb
        if A.from > 1 or A.len < n[1] then xw = xw:narrow(3, A.from, A.len) end
        if Bp.from > 1 or Bp.len < n[2] then xw = xw:narrow(4, Bp.from, Bp.len) end
        local wk = w
        if A.taps < kh then wk = wk:slice(3, A.i0, A.i0 + (A.taps - 1) * A.step, A.step) end
        if Bp.taps < kw then wk = wk:slice(4, Bp.i0, Bp.i0 + (Bp.taps - 1) * Bp.step, Bp.step) end
        wk = wk:flip({ 3, 4 })
        Y[a][b] = conv.conv2d(xw, wk, nil, { 1, 1 }, { A.lo, A.hi, Bp.lo, Bp.hi }, { A.dil, Bp.dil }, g, self.route)
        first = first or Y[a][b]
      end
    end
  end
  local N, O = xb.shape[1], Cog * g
  local y
  if #ph[1] == 1 and #ph[2] == 1 then
    y = first
  else
    -- the phases interleaved: [N, O, n0h, s_h, n0w, s_w] read as [N, O, n0h s_h, n0w s_w]
    local rows = {}
    for a = 1, #ph[1] do
      local row = {}
      for b = 1, #ph[2] do
        row[b] = Y[a][b] or ember.zeros({ N, O, ph[1].n0, ph[2].n0 }, { dtype = first.dtype, device = first.device })
      end
      rows[a] = #row == 1 and row[1]:unsqueeze(5) or ember.stack(row, 5)
    end
    y = (#rows == 1 and rows[1]:unsqueeze(4) or ember.stack(rows, 4))
      :reshape({ N, O, ph[1].n0 * #ph[1], ph[2].n0 * #ph[2] })
    if y.shape[3] ~= out[1] then y = y:narrow(3, 1, out[1]) end
    if y.shape[4] ~= out[2] then y = y:narrow(4, 1, out[2]) end
  end
  local bias = self.bias
  if bias then
    -- under autocast the products are bfloat16: the bias joins them (as nn/_conv.lua)
    if y.dtype == "bfloat16" and bias.dtype ~= "bfloat16" and ember.autocast.enabled() then bias = bias:to("bfloat16") end
    y = y + bias:view({ 1, O, 1, 1 })
  end
  if nd == 1 then y = y:squeeze(3) end
  if not batched then y = y:squeeze(1) end
  return y
end

-- nd = 3: the textbook form -- the input dilated with stride - 1 zeros between its elements,
-- padded by dilation (k - 1) - padding on each side (negative: cropped) and output_padding more
-- after, then one stride-1 nn.functional.conv3d (its autograd, its kernels) with the flipped
-- weight, in/out swapped per group. It multiplies the zeros too (stride^3 the useful products;
-- the 1-d/2-d phases above avoid that); x [N, C, D, H, W] or [C, D, H, W], op the output_padding.
function M.forward3d(self, x, batched, op)
  local xb = batched and x or x:unsqueeze(1)
  local s, d, p, k = self.stride, self.dilation, self.padding, self.kernel_size
  for i = 1, 3 do
    if s[i] > 1 then -- [.., n, ..] -> [.., n, s, ..] (each element, then s - 1 zeros) -> [.., (n - 1) s + 1, ..]
      local dim, n = 2 + i, xb.shape[2 + i]
      local zshape = { table.unpack(xb.shape) }
      table.insert(zshape, dim + 1, s[i] - 1)
      local zeros = ember.zeros(zshape, { dtype = xb.dtype, device = xb.device })
      local shape = { table.unpack(xb.shape) }
      shape[dim] = n * s[i]
      xb = ember.cat({ xb:unsqueeze(dim + 1), zeros }, dim + 1):reshape(shape):narrow(dim, 1, (n - 1) * s[i] + 1)
    end
  end
  local pads = {}
  for i = 3, 1, -1 do -- ember.pad takes the last dim first
    local lo = d[i] * (k[i] - 1) - p[i]
    pads[#pads + 1], pads[#pads + 2] = lo, lo + op[i]
  end
  xb = ember.pad(xb, pads)
  local g, w = self.groups, self.weight
  local Cin, Cog = w.shape[1], w.shape[2]
  w = w:reshape({ g, Cin // g, Cog, k[1], k[2], k[3] }):transpose(2, 3)
    :reshape({ Cog * g, Cin // g, k[1], k[2], k[3] }):flip({ 3, 4, 5 })
  local y = require("ember.nn.functional").conv3d(xb, w, self.bias, { dilation = d, groups = g })
  return batched and y or y:squeeze(1)
end

-- PyTorch's extra_repr, with output_padding when it is not zero.
function M.extra_repr(self, nd)
  local s = conv.extra_repr(self, nd)
  local zero = true
  for i = 1, nd do if self.output_padding[i] ~= 0 then zero = false end end
  if not zero then
    local t = nd == 1 and ("(" .. self.output_padding[1] .. ",)")
      or ("(" .. table.concat(self.output_padding, ", ", 1, nd) .. ")")
    -- PyTorch prints it after padding and dilation, before groups and bias
    local at = s:find(", groups=", 1, true) or s:find(", bias=", 1, true)
    if at then s = s:sub(1, at - 1) .. ", output_padding=" .. t .. s:sub(at) else s = s .. ", output_padding=" .. t end
  end
  return s
end

return M
