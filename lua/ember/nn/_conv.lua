-- nn/_conv.lua (internal): the convolution shared by nn.Conv1d and nn.Conv2d.
-- conv2d(x, w, b, s, p, d, g [, route]): x [N, C, H, W], w [O, C/g, kh, kw];
-- p = {top, bottom, left, right}. Two routes:
-- * the kernel: the core op ember._conv2d (core/src/ops_conv.c) on the
--   backend's convolution (oneDNN's primitives on the CPU, float32 and
--   bfloat16), forward and backward in one node each;
-- * the composition from core ops (so autograd, every dtype, autocast and
--   every backend work), taken when the backend declines the call
--   (float64, CUDA, no oneDNN kernel for the CPU) or when route is
--   "composed". On CUDA it is im2col + cuBLAS.
-- ember.conv_routes() counts the calls of each.
-- The composition is im2col through strided views: the
-- zero-padded input (cat) cut by one strided slice per kernel offset (as
-- nn/_pool.lua cuts the pooling windows) and stacked, or for a patch
-- embedding (kernel = stride, windows that tile the input) a reshape and a
-- permute, to [N, g, C/g * kh * kw, Ho * Wo]; then one matmul per call:
-- [O, K] @ [N, K, L], or batched over the groups with w viewed as
-- [g, O/g, K]. Autograd differentiates the views (so double backward works
-- too). The only Lua loop is over the kh * kw kernel offsets. (An
-- ember.Function im2col with a strided add_ col2im, channels-last or not,
-- measured no faster on 2 shared cores, so there is none.)
-- setup(self, name, nd, ...) parses a module's arguments (sizes, padding
-- "same"/"valid", groups) and makes its parameters as PyTorch does.
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local init = require "ember.nn.weight_init"

local M = {}

-- x padded with zeros: p = {top, bottom, left, right}.
local function pad(x, p)
  local opts = { dtype = x.dtype, device = x.device }
  local N, C = x.shape[1], x.shape[2]
  if p[1] > 0 or p[2] > 0 then
    local parts = {}
    if p[1] > 0 then parts[#parts + 1] = ember.zeros({ N, C, p[1], x.shape[4] }, opts) end
    parts[#parts + 1] = x
    if p[2] > 0 then parts[#parts + 1] = ember.zeros({ N, C, p[2], x.shape[4] }, opts) end
    x = ember.cat(parts, 3)
  end
  if p[3] > 0 or p[4] > 0 then
    local parts = {}
    if p[3] > 0 then parts[#parts + 1] = ember.zeros({ N, C, x.shape[3], p[3] }, opts) end
    parts[#parts + 1] = x
    if p[4] > 0 then parts[#parts + 1] = ember.zeros({ N, C, x.shape[3], p[4] }, opts) end
    x = ember.cat(parts, 4)
  end
  return x
end

-- Output size of one dim with padding lo + hi.
function M.out_size(n, k, s, lo, hi, d)
  return (n + lo + hi - d * (k - 1) - 1) // s + 1
end

-- The columns [N, C, kh*kw, Ho, Wo] of x (already padded).
local function columns(xp, k, s, d, Ho, Wo)
  local kh, kw = k[1], k[2]
  -- a patch embedding: non-overlapping windows that tile the input exactly
  if kh == s[1] and kw == s[2] and d[1] * d[2] == 1 and xp.shape[3] == Ho * kh and xp.shape[4] == Wo * kw then
    local N, C = xp.shape[1], xp.shape[2]
    return xp:reshape({ N, C, Ho, kh, Wo, kw }):permute(1, 2, 4, 6, 3, 5)
  end
  local parts = {}
  for i = 0, kh - 1 do
    local r0 = i * d[1] + 1
    local rows = xp:slice(3, r0, r0 + (Ho - 1) * s[1], s[1])
    for j = 0, kw - 1 do
      local c0 = j * d[2] + 1
      parts[#parts + 1] = rows:slice(4, c0, c0 + (Wo - 1) * s[2], s[2])
    end
  end
  if #parts == 1 then return parts[1]:unsqueeze(3) end
  return ember.stack(parts, 3)
end

-- im2col: x [N, C, H, W] padded by p = {top, bottom, left, right} cut into
-- its blocks, [N, C * kh * kw, Ho * Wo] (nn.functional.unfold; the
-- composed convolution below multiplies these columns).
function M.unfold(x, k, s, p, d)
  local N, C, H, W = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  local Ho, Wo = M.out_size(H, k[1], s[1], p[1], p[2], d[1]), M.out_size(W, k[2], s[2], p[3], p[4], d[2])
  return columns(pad(x, p), k, s, d, Ho, Wo):reshape({ N, C * k[1] * k[2], Ho * Wo })
end

-- col2im, unfold's adjoint: cols [N, C * kh * kw, L] (L = blocks[1] *
-- blocks[2]) added into [N, C, out[1], out[2]] padded by p = {ph, pw}
-- (one index_add of every block position; the padding cut off after).
function M.fold(cols, out, k, s, p, d, blocks)
  local N, K = cols.shape[1], k[1] * k[2]
  local C = cols.shape[2] // K
  local Hp, Wp = out[1] + 2 * p[1], out[2] + 2 * p[2]
  local idx, n = {}, 0
  for i = 0, k[1] - 1 do
    for j = 0, k[2] - 1 do
      for oh = 0, blocks[1] - 1 do
        local row = (i * d[1] + oh * s[1]) * Wp + j * d[2] + 1
        for ow = 0, blocks[2] - 1 do
          n = n + 1
          idx[n] = row + ow * s[2]
        end
      end
    end
  end
  local y = ember.zeros({ N, C, Hp * Wp }, { dtype = cols.dtype, device = cols.device })
  y = y:index_add(3, ember.tensor(idx, { dtype = "int64", device = cols.device }), cols:reshape({ N, C, n }))
  y = y:reshape({ N, C, Hp, Wp })
  if p[1] > 0 then y = y:narrow(3, p[1] + 1, out[1]) end
  if p[2] > 0 then y = y:narrow(4, p[2] + 1, out[2]) end
  return y
end

-- 3-d convolution composed from conv2d (nn.functional.conv3d): x [N, C,
-- D, H, W] (zero padding p = {front, back, top, bottom, left, right}), w
-- [O, C/g, kd, kh, kw]; each depth tap of the kernel is one conv2d of the
-- input's depth slices it meets (strided views, the output depths folded
-- into the batch), and the taps are summed: kd conv2d calls, each on the
-- backend's kernel where it has one. s, d: {depth, height, width}.
function M.conv3d(x, w, b, s, p, d, g, route)
  local N, C, H, W = x.shape[1], x.shape[2], x.shape[4], x.shape[5]
  local O, kd = w.shape[1], w.shape[3]
  local Do = M.out_size(x.shape[3], kd, s[1], p[1], p[2], d[1])
  local xp = x
  if p[1] > 0 or p[2] > 0 then
    local opts = { dtype = x.dtype, device = x.device }
    local parts = {}
    if p[1] > 0 then parts[#parts + 1] = ember.zeros({ N, C, p[1], H, W }, opts) end
    parts[#parts + 1] = x
    if p[2] > 0 then parts[#parts + 1] = ember.zeros({ N, C, p[2], H, W }, opts) end
    xp = ember.cat(parts, 3)
  end
  local y
  for t = 0, kd - 1 do
    local z0 = t * d[1] + 1
    local slices = xp:slice(3, z0, z0 + (Do - 1) * s[1], s[1]):transpose(2, 3):reshape({ N * Do, C, H, W })
    local part = M.conv2d(slices, w:select(3, t + 1):contiguous(), nil, { s[2], s[3] }, { p[3], p[4], p[5], p[6] },
      { d[2], d[3] }, g, route)
    y = y and y + part or part
  end
  y = y:reshape({ N, Do, O, y.shape[3], y.shape[4] }):transpose(2, 3)
  if b then
    if y.dtype == "bfloat16" and b.dtype ~= "bfloat16" and ember.autocast.enabled() then b = b:to("bfloat16") end
    y = y + b:view({ 1, O, 1, 1, 1 })
  end
  return y
end

function M.conv2d(x, w, b, s, p, d, g, route)
  -- a stride past the padded input gives one position, as the padded size does (oneDNN refused 2^40)
  local hp, wp = x.shape[3] + p[1] + p[2], x.shape[4] + p[3] + p[4]
  if s[1] > hp or s[2] > wp then s = { math.min(s[1], hp), math.min(s[2], wp) } end
  -- under autocast a bias of another dtype joins the weight's (as PyTorch casts every argument)
  if b and b.dtype ~= w.dtype and ember.autocast.enabled() then b = b:to(w.dtype) end
  if route ~= "composed" then
    local y = ember._conv2d(x, w, b, s[1], s[2], p[1], p[2], p[3], p[4], d[1], d[2], g)
    if y then return y end
  end
  ember._conv_count_composed()
  local N, C, H, W = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  local O, kh, kw = w.shape[1], w.shape[3], w.shape[4]
  local Ho, Wo = M.out_size(H, kh, s[1], p[1], p[2], d[1]), M.out_size(W, kw, s[2], p[3], p[4], d[2])
  -- under autocast the matmul runs in bfloat16: the columns are made in it
  -- (half the bytes to copy) rather than cast after
  local on, dt = ember.autocast.enabled()
  if on and x.dtype == "float32" and (dt == nil or dt == "bfloat16") then x = x:to("bfloat16") end
  local cols = columns(pad(x, p), { kh, kw }, s, d, Ho, Wo)
  local K = (C // g) * kh * kw
  local y
  if g == 1 then
    -- [O, K] @ [N, K, L] -> [N, O, L]
    y = w:reshape({ O, K }):matmul(cols:reshape({ N, K, Ho * Wo }))
  else
    -- [g, O/g, K] @ [N, g, K, L] -> [N, g, O/g, L]
    y = w:reshape({ g, O // g, K }):matmul(cols:reshape({ N, g, K, Ho * Wo }))
  end
  y = y:reshape({ N, O, Ho, Wo })
  if b then
    -- under autocast the product is bfloat16: the bias joins it (as nn.Linear)
    if y.dtype == "bfloat16" and b.dtype ~= "bfloat16" and ember.autocast.enabled() then b = b:to("bfloat16") end
    y = y + b:view({ 1, O, 1, 1 })
  end
  return y
end

-- A size option as nd positive (or, with min = 0, non-negative) integers,
-- or nil (shared with nn/_conv_transpose.lua, as fmt and the checks below).
local function tuple(v, nd, min)
  if math.type(v) == "integer" then
    local t = {}
    for i = 1, nd do t[i] = v end
    v = t
  end
  if type(v) ~= "table" or #v ~= nd then return nil end
  for i = 1, nd do
    if math.type(v[i]) ~= "integer" or v[i] < min then return nil end
  end
  return { table.unpack(v, 1, nd) }
end

local function fmt(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" then
    local t = {}
    for i, x in ipairs(v) do t[i] = tostring(x) end
    return "{" .. table.concat(t, ", ") .. "}"
  end
  return tostring(v)
end
M.tuple, M.fmt = tuple, fmt

-- A module constructor's size option: v unless tuple(v, nd, min) refuses it (an integer, or a
-- table of nd integers >= min), then an error naming `name` and `what` at the user's line. A
-- table of names without the size ({stride = 2}) is told how the sizes are given.
function M.check_size(name, what, v, nd, min)
  if tuple(v, nd, min) then return v end
  local hint = ""
  if type(v) == "table" and v[1] == nil and next(v) ~= nil then
    hint = (" (a table of names must name the sizes, nn.%s{%s = 2, stride = 1}, or give them first by position, "
      .. "nn.%s(2, {stride = 1}))"):format(name, what, name)
  end
  error(("%s: %s must be a %s integer or %s, got %s%s"):format(name, what, min == 0 and "non-negative" or "positive",
    ({ "a table of one", "a pair of them", "a table of three" })[nd], fmt(v), hint))
end

-- in_channels and out_channels positive integers, groups (default 1) a
-- positive integer dividing both; returns groups. name: the module's.
function M.check_channels(name, in_channels, out_channels, groups)
  for _, f in ipairs { { "in_channels", in_channels }, { "out_channels", out_channels } } do
    if math.type(f[2]) ~= "integer" or f[2] < 1 then
      error(("%s: %s must be a positive integer, got %s"):format(name, f[1], tostring(f[2])))
    end
  end
  groups = groups or 1
  if math.type(groups) ~= "integer" or groups < 1 then
    error(("%s: groups must be a positive integer, got %s"):format(name, tostring(groups)))
  end
  if in_channels % groups ~= 0 then
    error(("%s: in_channels=%d must be divisible by groups=%d"):format(name, in_channels, groups))
  end
  if out_channels % groups ~= 0 then
    error(("%s: out_channels=%d must be divisible by groups=%d"):format(name, out_channels, groups))
  end
  return groups
end

-- A forward's input: x [N, C, *spatial] or [C, *spatial] (nd spatial dims)
-- with C = self.in_channels; returns whether it is batched. who: the
-- caller, for errors ("Conv2d.forward").
function M.check_input(self, who, nd, x)
  local shape = ({ "[N, C, L] or [C, L]", "[N, C, H, W] or [C, H, W]", "[N, C, D, H, W] or [C, D, H, W]" })[nd]
  if not ember.is_tensor(x) or (x.ndim ~= nd + 1 and x.ndim ~= nd + 2) then
    error(("%s: expected an input %s, got %s"):format(who, shape,
      ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)))
  end
  local batched = x.ndim == nd + 2
  require("ember.nn.Module").check_float_input(who, x)
  -- (under autocast the products run in bfloat16 whatever the two dtypes)
  local wd = self.weight.dtype
  if x.dtype ~= wd and not ember.autocast.enabled() then
    -- a module's (self.__name) or nn.functional's weight (self: the call's sizes)
    local whose = self.__name and "module" or "weight"
    error(("%s: the input is %s but the %s is %s (convert one: x:to(\"%s\") or %s:to(\"%s\"))"):format(who,
      x.dtype, self.__name and "module's weight" or "weight", wd, wd, whose, x.dtype))
  end
  local b = self.bias
  if b ~= nil and b.dtype ~= wd and not ember.autocast.enabled() then
    error(("%s: the bias is %s but the weight is %s (convert one: bias:to(\"%s\"))"):format(who, b.dtype, wd, wd))
  end
  local c = x.shape[batched and 2 or 1]
  if c ~= self.in_channels then
    error(("%s: expected %d input channels (in_channels), got %d in an input of shape [%s]")
      :format(who, self.in_channels, c, table.concat(x.shape, ", ")))
  end
  return batched
end

local OPTS = { "stride", "padding", "dilation", "groups", "bias", "padding_mode", "dtype", "device", "route" }
-- padding_mode -> ember.pad's mode (PyTorch pads the input so, then convolves without padding)
local PADDING_MODES = { zeros = "constant", reflect = "reflect", replicate = "replicate", circular = "circular" }

-- The sizes of a convolution (the module's and nn.functional's):
-- kernel_size, stride, dilation, padding, padding_mode, route and _pads
-- (the padding applied: {top, bottom, left, right}; a 1-d conv's 2-d view
-- {0, 0, left, right}) set on self from opts (checked by the caller).
-- nd = 1 or 2; name for errors ("Conv2d", "nn.functional.conv2d").
function M.sizes(self, name, nd, kernel_size, opts)
  local pair = nd == 2 and "a pair of them" or nd == 3 and "a table of three" or "a table of one"
  self.kernel_size = tuple(kernel_size, nd, 1)
  if not self.kernel_size then
    error(("%s: kernel_size must be a positive integer or %s, got %s"):format(name, pair, fmt(kernel_size)))
  end
  self.stride = tuple(opts.stride or 1, nd, 1)
  self.dilation = tuple(opts.dilation or 1, nd, 1)
  for _, f in ipairs { "stride", "dilation" } do
    if not self[f] then
      error(("%s: %s must be a positive integer or %s, got %s"):format(name, f, pair, fmt(opts[f])))
    end
  end
  local padding = opts.padding or 0
  if padding == "valid" then padding = 0 end
  if padding == "same" then
    for i = 1, nd do
      if self.stride[i] ~= 1 then
        error(("%s: padding=\"same\" needs stride 1 (as PyTorch), got stride %s"):format(name, fmt(opts.stride)))
      end
    end
    self.padding = "same"
  else
    self.padding = tuple(padding, nd, 0)
    if not self.padding then
      error(("%s: padding must be a non-negative integer, %s, \"same\" or \"valid\", got %s"):format(name, pair,
        fmt(opts.padding)))
    end
  end
  local mode = opts.padding_mode or "zeros"
  if not PADDING_MODES[mode] then
    error(("%s: padding_mode must be \"zeros\", \"reflect\", \"replicate\" or \"circular\", got %s"):format(name,
      fmt(mode)))
  end
  self.padding_mode = mode
  local route = opts.route or "auto"
  if route ~= "auto" and route ~= "composed" then
    error(("%s: route must be \"auto\" (the backend's kernel where it has one) or \"composed\", got %s")
      :format(name, fmt(route)))
  end
  self.route = route
  self._pads = M.pads(self, nd)
end

-- padding_mode's limits (PyTorch's F.pad's): x's last #pads dims padded by pads[i] = {lo, hi};
-- "reflect" pads less than the size, "circular" at most the size, none of them an empty dim.
-- Else an error naming `who`.
function M.check_mode_pads(who, padding_mode, x, pads)
  local mode = PADDING_MODES[padding_mode]
  for i, lh in ipairs(pads) do
    local dim = x.ndim - #pads + i
    local n, lo, hi = x.shape[dim], lh[1], lh[2]
    local limit = mode == "reflect" and n - 1 or mode == "circular" and n or math.huge
    if lo > limit or hi > limit or n == 0 then
      error(("%s: padding_mode=%q pads %d and %d, more than the %d elements along dim %d of shape [%s] "
        .. "allow (%s)"):format(who, padding_mode, lo, hi, n, dim, table.concat(x.shape, ", "),
        mode == "reflect" and "reflect padding must be less than the size" or "at most the size"))
    end
  end
end

-- The padding a convolution applies: {top, bottom, left, right} ({0, 0,
-- left, right} for nd = 1), "same" worked out (the extra one after, as PyTorch).
function M.pads(self, nd)
  local pads = {}
  for i = 1, nd do
    local lo, hi
    if self.padding == "same" then
      local total = self.dilation[i] * (self.kernel_size[i] - 1)
      lo = total // 2
      hi = total - lo
    else
      lo, hi = self.padding[i], self.padding[i]
    end
    pads[#pads + 1], pads[#pads + 2] = lo, hi
  end
  if nd == 1 then table.insert(pads, 1, 0); table.insert(pads, 1, 0) end
  return pads
end

-- The module's sizes and parameters; nd = 1 or 2, name "Conv1d"/"Conv2d".
function M.setup(self, name, nd, in_channels, out_channels, kernel_size, opts)
  opts = require("ember.nn.Module").check_options(name, opts, OPTS)
  local groups = M.check_channels(name, in_channels, out_channels, opts.groups)
  M.sizes(self, name, nd, kernel_size, opts)
  self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
  -- PyTorch's reset_parameters: kaiming_uniform_(a = sqrt(5)) is U(+-1/sqrt(fan_in)); the bias too
  local topts = { dtype = opts.dtype, device = opts.device }
  local shape = { out_channels, in_channels // groups, table.unpack(self.kernel_size) }
  local w = ember.empty(shape, topts)
  init.kaiming_uniform_(w, math.sqrt(5))
  self.weight = w:requires_grad_()
  if opts.bias ~= false then
    local fan_in = init.calculate_fans(w)
    local bound = 1 / math.sqrt(fan_in)
    self.bias = ember.uniform({ out_channels }, -bound, bound, topts):requires_grad_()
  end
end

-- PyTorch's reset_parameters of a convolution (nn.Conv*d's and nn.ConvTranspose*d's, as their
-- constructors draw them): the weight by kaiming_uniform_(a = sqrt(5)), i.e. U(+-1/sqrt(fan_in)),
-- the bias U(+-1/sqrt(fan_in)), fan_in from the weight; in place, outside autograd.
function M.reset_parameters(self)
  ember.no_grad(function()
    init.kaiming_uniform_(self.weight, math.sqrt(5))
    if self.bias then
      local bound = 1 / math.sqrt(init.calculate_fans(self.weight))
      local b = self.bias
      b:copy_(ember.uniform(b.shape, -bound, bound, { dtype = b.dtype, device = b.device })) -- the constructor's draw
    end
  end)
end

-- The convolution of x [N, C, *spatial] or [C, *spatial] (nd spatial dims)
-- by cfg's weight, bias and sizes: the module's forward (cfg = the module)
-- and nn.functional.conv1d/conv2d's (cfg from their arguments). `who`
-- names the caller in errors (default name .. ".forward").
function M.forward(self, name, nd, x, who)
  who = who or name .. ".forward"
  local batched = M.check_input(self, who, nd, x)
  local xb = batched and x or x:unsqueeze(1)
  if nd == 1 then xb = xb:unsqueeze(3) end
  local p = self._pads
  for i = 1, nd do
    local n = xb.shape[4 - nd + i]
    local lo, hi = p[2 * (2 - nd + i) - 1], p[2 * (2 - nd + i)]
    local k, d = self.kernel_size[i], self.dilation[i]
    if n + lo + hi < d * (k - 1) + 1 then
      error(("%s: the kernel (size %d, dilation %d: %d) is larger than the padded input (%d + %d) along "
        .. "dim %d of shape [%s]"):format(who, k, d, d * (k - 1) + 1, n, lo + hi, x.ndim - nd + i,
        table.concat(x.shape, ", ")))
    end
  end
  if self.padding_mode ~= "zeros" then
    -- PyTorch's F.pad(x, padding, mode) then a convolution without padding
    local mode = PADDING_MODES[self.padding_mode]
    local pads = {}
    for i = 1, nd do pads[i] = { p[2 * (2 - nd + i) - 1], p[2 * (2 - nd + i)] } end
    M.check_mode_pads(who, self.padding_mode, x, pads)
    -- ember.pad's order: the last dim first (a 1-d conv's [N, C, 1, L] view: that dim only)
    local amounts = nd == 2 and { p[3], p[4], p[1], p[2] } or { p[3], p[4] }
    xb = ember.pad(xb, amounts, mode)
    p = { 0, 0, 0, 0 }
  end
  local w = self.weight
  if nd == 1 then w = w:unsqueeze(3) end
  local s = nd == 2 and self.stride or { 1, self.stride[1] }
  local d = nd == 2 and self.dilation or { 1, self.dilation[1] }
  local y = M.conv2d(xb, w, self.bias, s, p, d, self.groups, self.route)
  if nd == 1 then y = y:squeeze(3) end
  if not batched then y = y:squeeze(1) end
  return y
end

-- PyTorch's extra_repr: "3, 8, kernel_size=(3, 3), stride=(1, 1)" and the non-default options.
function M.extra_repr(self, nd)
  local function t(v)
    if nd == 1 then return "(" .. v[1] .. ",)" end
    return "(" .. table.concat(v, ", ", 1, nd) .. ")"
  end
  local s = ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels, t(self.kernel_size),
    t(self.stride))
  if self.padding == "same" then
    s = s .. ", padding=same"
  else
    local zero = true
    for i = 1, nd do if self.padding[i] ~= 0 then zero = false end end
    if not zero then s = s .. ", padding=" .. t(self.padding) end
  end
  local one = true
  for i = 1, nd do if self.dilation[i] ~= 1 then one = false end end
  if not one then s = s .. ", dilation=" .. t(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if not self.bias then s = s .. ", bias=false" end
  if self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
  return s
end

return M
