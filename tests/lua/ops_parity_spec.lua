-- Every differentiable core op through the Lua API against PyTorch 1.13:
-- forward values and the gradients of sum(out * w), in float64 and float32.
-- The reference values are the committed fixtures tests/fixtures/ops_*.lua,
-- written by tests/gen_op_fixtures.py (see there for the format). Index
-- tensors, dims and positions in the fixtures are already 1-based. Every
-- case runs four times: float64 and float32, with contiguous inputs and
-- with the same values in a non-contiguous layout.
local ember = require "ember"

-- EMBER_TEST_DEVICE (default "cpu") runs everything on another device,
-- e.g. "cuda" for a GPU backend (real or the emulated build).
local DEVICE = os.getenv("EMBER_TEST_DEVICE") or "cpu"

local FILES = { "ops_elementwise", "ops_reduce", "ops_nn", "ops_index", "ops_views", "ops_edge",
                "ops_rank", "ops_helpers", "ops_compat", "ops_rounding", "ops_einsum", "ops_functional" }

-- Relative tolerance per dtype; the absolute floor is rtol * max|expected|
-- of the tensor (plus a tiny constant for all-zero tensors), so an element
-- that is small next to its neighbours is judged at the tensor's scale.
local RTOL = { float64 = 1e-10, float32 = 1e-4 }
local TINY = { float64 = 1e-14, float32 = 1e-7 }

-- How each fixture op is called. I: the inputs as ember tensors, A: args.
local OPS = {
  add = function(I) return I.a + I.b end,
  sub = function(I) return I.a - I.b end,
  mul = function(I) return I.a * I.b end,
  div = function(I) return I.a / I.b end,
  pow = function(I) return I.a ^ I.b end,
  maximum = function(I) return I.a:maximum(I.b) end,
  minimum = function(I) return I.a:minimum(I.b) end,
  add_number = function(I, A) return I.x + A.s end,
  number_add = function(I, A) return A.s + I.x end,
  sub_number = function(I, A) return I.x - A.s end,
  number_sub = function(I, A) return A.s - I.x end,
  mul_number = function(I, A) return I.x * A.s end,
  number_mul = function(I, A) return A.s * I.x end,
  div_number = function(I, A) return I.x / A.s end,
  number_div = function(I, A) return A.s / I.x end,
  number_pow = function(I, A) return A.s ^ I.x end,
  pow_number = function(I, A) return I.x ^ A.e end,
  neg = function(I) return -I.x end,
  unary = function(I, A) return I.x[A.fn](I.x, table.unpack(A.extra or {})) end,
  clamp = function(I, A) return I.x:clamp(A.lo, A.hi) end,
  where = function(I) return ember.where(I.cond, I.a, I.b) end,
  einsum = function(I, A)
    local operands = {}
    for _, k in ipairs { "a", "b", "c" } do operands[#operands + 1] = I[k] end
    return ember.einsum(A.eq, table.unpack(operands))
  end,
  where_number = function(I, A) return ember.where(I.cond, I.a, A.b) end,
  masked_fill = function(I, A) return I.x:masked_fill(I.mask, A.value) end,

  sum = function(I, A) return I.x:sum(A.dim, A.keepdim) end,
  mean = function(I, A) return I.x:mean(A.dim, A.keepdim) end,
  var = function(I, A)
    if next(A) == nil then return I.x:var() end
    return I.x:var(A.dim, { correction = A.correction, keepdim = A.keepdim })
  end,
  max_all = function(I) return I.x:max() end,
  min_all = function(I) return I.x:min() end,
  max = function(I, A) return I.x:max(A.dim, A.keepdim) end,
  min = function(I, A) return I.x:min(A.dim, A.keepdim) end,

  matmul = function(I) return ember.matmul(I.a, I.b) end,
  bmm = function(I) return ember.bmm(I.a, I.b) end,
  softmax = function(I, A) return I.x:softmax(A.dim) end,
  log_softmax = function(I, A) return I.x:log_softmax(A.dim) end,
  layer_norm = function(I, A) return ember.layer_norm(I.x, A.norm, I.weight, I.bias, A.eps) end,
  dropout = function(I, A) return ember.dropout(I.x, A.p, A.training) end,
  cross_entropy = function(I, A) return ember.cross_entropy(I.logits, I.target, A.opts) end,
  mse_loss = function(I, A) return ember.mse_loss(I.input, I.target, A.reduction) end,

  embedding = function(I) return ember.embedding(I.weight, I.ids) end,
  index_select = function(I, A) return I.x:index_select(A.dim, I.index) end,
  gather = function(I, A) return I.x:gather(A.dim, I.index) end,
  scatter_add = function(I, A) return I.x:scatter_add(A.dim, I.index, I.src) end,
  cat = function(I, A) return ember.cat({ I.a, I.b, I.c }, A.dim) end,
  stack = function(I, A) return ember.stack({ I.a, I.b, I.c }, A.dim) end,
  split = function(I, A) return I.x:split(A.size, A.dim) end,
  chunk = function(I, A) return I.x:chunk(A.chunks, A.dim) end,

  narrow = function(I, A) return I.x:narrow(A.dim, A.start, A.length) end,
  select = function(I, A) return I.x:select(A.dim, A.index) end,
  index_integer = function(I, A) return I.x[A.index] end,
  slice = function(I, A) return I.x:slice(A.dim, A.start, A.stop, A.step) end,
  transpose = function(I, A) return I.x:transpose(A.d0, A.d1) end,
  permute = function(I, A) return I.x:permute(table.unpack(A.dims)) end,
  expand = function(I, A) return I.x:expand(A.shape) end,
  view = function(I, A) return I.x:view(A.shape) end,
  reshape = function(I, A) return I.x:reshape(table.unpack(A.shape)) end,
  transpose_reshape = function(I, A) return I.x:transpose(A.d0, A.d1):reshape(A.shape) end,
  squeeze = function(I, A) return I.x:squeeze(A.dim) end,
  unsqueeze = function(I, A) return I.x:unsqueeze(A.dim) end,
  flatten = function(I, A) return I.x:flatten(A.s, A.e) end,
  transpose_contiguous = function(I, A) return I.x:transpose(A.d0, A.d1):contiguous() end,
  clone = function(I) return I.x:clone() end,
  -- used by the large cases
  max_values = function(I, A) return (I.x:max(A.dim)) end,
  min_values = function(I, A) return (I.x:min(A.dim)) end,
  matmul_tt = function(I) return ember.matmul(I.a:transpose(1, 2), I.b:transpose(1, 2)) end,
  permute_reshape = function(I, A) return I.x:permute(table.unpack(A.dims)):reshape(A.shape) end,
  -- the everyday helpers (lua/ember/_helpers.lua)
  triu = function(I, A) return I.x:triu(A.diagonal) end,
  tril = function(I, A) return ember.tril(I.x, A.diagonal) end,
  sort = function(I, A) return I.x:sort(A.dim, A.descending) end,
  topk = function(I, A) return I.x:topk(A.k, A.dim, A.largest) end,
  std = function(I, A)
    if A.dim == nil then return I.x:std() end
    return I.x:std(A.dim, { correction = A.correction, keepdim = A.keepdim })
  end,
  norm = function(I, A) return I.x:norm(A.p, A.dim, A.keepdim) end,
  cumsum = function(I, A) return I.x:cumsum(A.dim) end,
  masked_select = function(I) return I.x:masked_select(I.mask) end,
  flip = function(I, A) return I.x:flip(A.dims) end,
  roll = function(I, A) return I.x:roll(A.shifts, A.dims) end,
  -- PyTorch's products and conveniences (lua/ember/_helpers.lua)
  mm = function(I) return I.a:mm(I.b) end,
  bmm = function(I) return ember.bmm(I.a, I.b) end,
  dot = function(I) return I.a:dot(I.b) end,
  outer = function(I) return ember.outer(I.a, I.b) end,
  square = function(I) return I.x:square() end,
  reciprocal = function(I) return I.x:reciprocal() end,
  logsumexp = function(I, A) return I.x:logsumexp(A.dim, A.keepdim) end,
  amax = function(I, A) return I.x:amax(A.dim, A.keepdim) end,
  amin = function(I, A) return I.x:amin(A.dim, A.keepdim) end,
  unbind = function(I, A) return I.x:unbind(A.dim) end,
  tile = function(I, A) return I.x:tile(A.reps) end,
  index_table = function(I, A) return I.x[A.key] end,
  -- torch's and torch.nn.functional's (lua/ember/_helpers.lua, _functional.lua; log1p, expm1 in C)
  prod = function(I, A) return I.x:prod(A.dim, A.keepdim) end,
  cumprod = function(I, A) return ember.cumprod(I.x, A.dim) end,
  repeat_interleave = function(I, A) return I.x:repeat_interleave(A.repeats, A.dim) end,
  log1p = function(I) return I.x:log1p() end,
  expm1 = function(I) return ember.expm1(I.x) end,
  normalize = function(I, A) return I.x:normalize({ p = A.p, dim = A.dim }) end,
  cosine_similarity = function(I, A) return ember.cosine_similarity(I.a, I.b, { dim = A.dim }) end,
  softplus = function(I, A) return I.x:softplus({ beta = A.beta, threshold = A.threshold }) end,
  leaky_relu = function(I, A) return ember.leaky_relu(I.x, A.negative_slope) end,
  pad = function(I, A) return ember.pad(I.x, A.pad, A.mode, A.value) end,
}

-- view() needs a layout that fits; it rightly refuses these inputs.
local CONTIGUOUS_ONLY = { view = true }

local parity = require "tests.lua.helpers.parity"
local shape_of, flatten_nested, flat = parity.nested_shape, parity.nested_values, parity.values

local function shape_str(s) return "[" .. table.concat(s, ", ") .. "]" end

-- Compares tensor `got` with the nested table `want`.
local function compare(what, got, want, dtype)
  assert(got ~= nil, what .. " is nil")
  local ws = shape_of(want)
  assert(shape_str(got.shape) == shape_str(ws),
    ("%s: shape %s, expected %s"):format(what, shape_str(got.shape), shape_str(ws)))
  assert(got.dtype == dtype, ("%s: dtype %s, expected %s"):format(what, got.dtype, dtype))
  assert(got.device:match("^%a+") == DEVICE:match("^%a+"),
    ("%s: on %s, expected %s"):format(what, got.device, DEVICE))
  local g, w = flat(got), flatten_nested(want)
  local scale = 0
  for i = 1, #w do
    if w[i] == w[i] and math.abs(w[i]) ~= math.huge then scale = math.max(scale, math.abs(w[i])) end
  end
  local rtol = RTOL[dtype]
  local atol = rtol * scale + TINY[dtype]
  for i = 1, #w do
    local err = math.abs(g[i] - w[i])
    local mag = math.abs(w[i])
    if w[i] ~= w[i] then -- NaN expected
      err, mag = (g[i] ~= g[i]) and 0 or math.huge, 0
    elseif mag == math.huge then
      err, mag = (g[i] == w[i]) and 0 or math.huge, 0
    end
    if not (err <= rtol * mag + atol) then
      error(("%s: element %d is %.17g, expected %.17g (|diff| %.3g, scale %.3g, rtol %g)"):format(
        what, i, g[i], w[i], err, scale, rtol), 0)
    end
  end
end

local function compare_exact(what, got, want)
  local ws = shape_of(want)
  assert(shape_str(got.shape) == shape_str(ws),
    ("%s: shape %s, expected %s"):format(what, shape_str(got.shape), shape_str(ws)))
  assert(got.dtype == "int64", what .. ": dtype " .. got.dtype .. ", expected int64")
  local g, w = flat(got), flatten_nested(want)
  for i = 1, #w do
    if g[i] ~= w[i] then
      error(("%s: element %d is %s, expected %s"):format(what, i, tostring(g[i]), tostring(w[i])), 0)
    end
  end
end

local function all_zero(nested)
  for _, v in ipairs(flatten_nested(nested)) do if v ~= 0 then return false end end
  return true
end

-- The same values in a non-contiguous layout: stored with the dims
-- reversed and permuted back, or (1-d, or when size-1 dims keep that
-- contiguous) every other element of a buffer twice as long.
local function noncontiguous(t)
  local n = t:dim()
  if n == 0 or t:numel() < 2 then return t end
  if n >= 2 then
    local rev = {}
    for i = 1, n do rev[i] = n + 1 - i end
    local p = t:permute(rev):contiguous():permute(rev):detach()
    if not p:is_contiguous() then return p end
  end
  local p = ember.stack({ t, t }, -1):select(-1, 1):detach()
  assert(not p:is_contiguous())
  return p
end

local function run_case(c, dtype, layout)
  local I = {}
  for k, v in pairs(c.inputs) do
    local dt = (c.dtypes and c.dtypes[k]) or dtype
    I[k] = ember.tensor(v, { dtype = dt, device = DEVICE })
    if layout == "non-contiguous" then I[k] = noncontiguous(I[k]) end
    if dt == dtype then I[k]:requires_grad_(true) end
  end
  local fn = assert(OPS[c.op], "no ember call for fixture op " .. c.op)
  local out, indices = fn(I, c.args)

  local outs, wants, ws
  if type(out) == "table" then -- split / chunk: a list of tensors
    assert(#out == #c.out, ("%d pieces, expected %d"):format(#out, #c.out))
    outs, wants, ws = out, c.out, c.w
  else
    outs, wants, ws = { out }, { c.out }, { c.w }
  end
  for k = 1, #outs do compare("output " .. k, outs[k], wants[k], dtype) end
  if c.indices then compare_exact("indices", indices, c.indices) end

  local loss
  for k = 1, #outs do
    local s = (outs[k] * ember.tensor(ws[k], { dtype = dtype, device = DEVICE })):sum()
    loss = loss and loss + s or s
  end
  loss:backward()
  local n = 0
  for k, want in pairs(c.grads) do
    n = n + 1
    local g = I[k].grad
    if g == nil then
      assert(all_zero(want), "no gradient for input " .. k .. ", expected a non-zero one")
    else
      compare("grad " .. k, g, want, dtype)
    end
  end
  assert(n > 0, "the fixture has no gradients")
  -- forward and backward must leave their inputs alone
  for k, v in pairs(c.inputs) do
    if not (c.dtypes and c.dtypes[k]) then
      local before = ember.tensor(v, { dtype = dtype })
      local diff = (I[k]:detach():cpu() - before):abs():max():item()
      assert(diff == 0, "input " .. k .. " was changed by the op")
    end
  end
end

describe("op parity with PyTorch", function()
  for _, file in ipairs(FILES) do
    local cases = dofile("tests/fixtures/" .. file .. ".lua")
    local names = {}
    for name in pairs(cases) do names[#names + 1] = name end
    table.sort(names)
    describe(file, function()
      for _, name in ipairs(names) do
        for _, dtype in ipairs({ "float64", "float32" }) do
          it(name .. " " .. dtype, function() run_case(cases[name], dtype) end)
          if not CONTIGUOUS_ONLY[cases[name].op] then
            it(name .. " " .. dtype .. " non-contiguous", function()
              run_case(cases[name], dtype, "non-contiguous")
            end)
          end
        end
      end
    end)
  end

  -- The comparison itself must be able to fail: a copy of a case with one
  -- value moved by 1e-8 of the tensor's scale is rejected in float64.
  it("rejects a perturbed expected value", function()
    local function copy(v)
      if type(v) ~= "table" then return v end
      local t = {}
      for k, e in pairs(v) do t[k] = copy(e) end
      return t
    end
    local function fails_with(case, pattern)
      local ok, err = pcall(run_case, case, "float64")
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    local c = dofile("tests/fixtures/ops_nn.lua").matmul_2d
    run_case(c, "float64")
    local bad = copy(c)
    bad.out[2][3] = bad.out[2][3] + 1e-8 * math.abs(bad.out[2][3]) + 1e-8
    fails_with(bad, "output 1: element 8 ")
    bad = copy(c)
    bad.grads.b[1][1] = bad.grads.b[1][1] * (1 + 1e-8)
    fails_with(bad, "grad b: element 1 ")
    bad = copy(c)
    bad.inputs.a[1][2] = bad.inputs.a[1][2] + 1e-6
    fails_with(bad, "output 1: element")
    bad = copy(dofile("tests/fixtures/ops_reduce.lua").max_dim)
    bad.indices[1][1] = bad.indices[1][1] % 3 + 1
    fails_with(bad, "indices: element 1 ")
  end)

  it("covers every fixture op", function()
    for _, file in ipairs(FILES) do
      for name, c in pairs(dofile("tests/fixtures/" .. file .. ".lua")) do
        assert(OPS[c.op], file .. "/" .. name .. ": no ember call for op " .. c.op)
      end
    end
  end)
end)

-- ---- large inputs (tests/fixtures/ops_large.lua) ----------------------------
-- Inputs are formulas (see tests/gen_op_fixtures.py), results are compared
-- through weighted sums in float64; float32 is then compared elementwise
-- with ember's own float64 result.
local function formula(spec)
  local n = 1
  for _, d in ipairs(spec.shape) do n = n * d end
  local v = {}
  if spec.dtype == "int64" or spec.dtype == "bool" then
    for i = 0, n - 1 do
      local r = (i * spec.mul + spec.add) % spec.mod
      if spec.dtype == "bool" then v[i + 1] = (r == 0) else v[i + 1] = r + 1 end -- 1-based
    end
    return ember.tensor(v, { dtype = spec.dtype, device = DEVICE }):view(spec.shape)
  end
  for i = 0, n - 1 do v[i + 1] = spec.off + spec.amp * math.sin(spec.a * i + spec.b) end
  return ember.tensor(v, { dtype = "float64", device = DEVICE }):view(spec.shape)
end

local function projection(t, f, a, b)
  local p = 0
  for i, x in ipairs(flat(t:double())) do p = p + x * f(a * (i - 1) + b) end
  return p
end

-- Inputs and weights are made once per case (Lua loops over ~10^5
-- elements are most of this block's time); `cache` is dropped after the
-- case's last test.
local cache = {}

local function weights(n, dtype)
  local key = "w" .. n .. dtype
  if not cache[key] then
    local w = {}
    for i = 0, n - 1 do w[i + 1] = math.cos(0.37 * i + 0.1) end
    cache[key] = ember.tensor(w, { dtype = dtype, device = DEVICE })
  end
  return cache[key]
end

local function input(k, spec)
  if not cache[k] then cache[k] = formula(spec) end
  return cache[k]
end

-- Runs a large case in dtype; returns the output and the gradients. With
-- `rounded`, float64 runs on the inputs rounded to float32, the reference
-- for a float32 run (so that both take the same side of every kink and
-- tie of max, maximum, relu...).
local function run_large(c, dtype, rounded, layout)
  local I = {}
  for k, spec in pairs(c.specs) do
    I[k] = input(k, spec)
    if layout == "non-contiguous" then I[k] = noncontiguous(I[k]) end
    if I[k].dtype == "float64" then
      if rounded then I[k] = I[k]:float():double() end
      if dtype ~= "float64" then I[k] = I[k]:to(dtype) end
      if I[k] == cache[k] then I[k] = I[k]:clone() end -- a fresh leaf
      I[k]:requires_grad_(true)
    end
  end
  local out = OPS[c.op](I, c.args)
  assert(shape_str(out.shape) == shape_str(c.out_shape),
    ("output: shape %s, expected %s"):format(shape_str(out.shape), shape_str(c.out_shape)))
  assert(out.dtype == dtype, "output dtype " .. out.dtype)
  ;(out:reshape(-1) * weights(out:numel(), dtype)):sum():backward()
  local grads = {}
  for k in pairs(c.grad_proj) do grads[k] = I[k].grad end
  return out, grads
end

local function check_projection(what, got, want, scale)
  local tol = RTOL.float64 * scale + 1e-300
  local err = math.abs(got - want)
  if not (err <= tol) then
    error(("%s: projection %.17g, expected %.17g (|diff| %.3g > %.3g = rtol * 2-norm %.3g)"):format(
      what, got, want, err, tol, scale), 0)
  end
end

-- Elementwise comparison of two tensors of the same shape.
local function compare_tensors(what, got, want, dtype)
  assert(shape_str(got.shape) == shape_str(want.shape), what .. ": shape " .. shape_str(got.shape))
  assert(got.dtype == dtype, what .. ": dtype " .. got.dtype)
  local g, w = flat(got:double()), flat(want)
  local scale = 0
  for i = 1, #w do scale = math.max(scale, math.abs(w[i])) end
  local rtol = RTOL[dtype]
  local atol = rtol * scale + TINY[dtype]
  for i = 1, #w do
    local err = math.abs(g[i] - w[i])
    if not (err <= rtol * math.abs(w[i]) + atol) then
      error(("%s: element %d is %.9g, float64 gives %.17g (|diff| %.3g)"):format(what, i, g[i], w[i], err), 0)
    end
  end
end

describe("op parity with PyTorch on large inputs", function()
  local cases = dofile("tests/fixtures/ops_large.lua")
  local names = {}
  for name in pairs(cases) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local c = cases[name]
    local function check_float64(layout)
      local out, grads = run_large(c, "float64", false, layout)
      check_projection("output", projection(out, math.sin, 1.3, 0.5), c.out_proj, c.out_scale)
      for k, want in pairs(c.grad_proj) do
        local g = grads[k]
        local got = g and projection(g, math.sin, 0.61, 0.3) or 0
        check_projection("grad " .. k, got, want, c.grad_scale[k])
      end
    end
    it(name .. " float64", function()
      cache = {}
      check_float64()
    end)
    if not CONTIGUOUS_ONLY[c.op] then
      it(name .. " float64 non-contiguous", function() check_float64("non-contiguous") end)
    end
    it(name .. " float32 against float64", function()
      local out64, grads64 = run_large(c, "float64", true)
      local out32, grads32 = run_large(c, "float32")
      compare_tensors("output", out32, out64, "float32")
      for k in pairs(c.grad_proj) do
        if grads64[k] == nil then
          assert(grads32[k] == nil, "grad " .. k .. ": float32 has one, float64 none")
        else
          compare_tensors("grad " .. k, grads32[k], grads64[k], "float32")
        end
      end
      cache = {}
    end)
  end
end)
