-- Float64 central-difference gradient checks of every differentiable op
-- through the Lua API (tests/lua/helpers/gradcheck.lua), on fresh random
-- inputs rather than fixtures. Most ops run twice: on contiguous inputs and
-- on non-contiguous leaves (permuted, or strided with step 2), which is
-- where kernels and backward formulas that assume a layout go wrong; ops
-- with several float inputs also run with only one of them requiring grad.
-- The last blocks check the autograd engine itself (a leaf used twice, a
-- diamond, broadcast gradients summed back to the input's shape, repeated
-- backward, retain_graph, detach and no_grad, dtypes, empty tensors) and
-- the checker's own ability to fail.
local ember = require "ember"
local gradcheck = require "tests.lua.helpers.gradcheck"

local F64 = { dtype = "float64" }

-- The op checks run on EMBER_TEST_DEVICE (default "cpu"; e.g. "cuda" to
-- check a GPU backend, real or emulated); the engine checks run on the CPU.
local DEVICE = os.getenv("EMBER_TEST_DEVICE") or "cpu"
local D64 = { dtype = "float64", device = DEVICE }

-- Input makers: mk(shape) gives a float64 leaf of that shape.
local function contiguous(shape)
  return ember.randn(shape, D64)
end

-- A non-contiguous leaf: dims >= 2 are a permutation of a tensor stored
-- with the dims reversed; 1-d (or a shape whose permutation is still
-- contiguous because of size-1 dims) takes every other element along the
-- largest dim of a longer tensor.
local function noncontiguous(shape)
  local n = #shape
  if n == 0 then return ember.randn(shape, D64) end
  if n >= 2 then
    local rev, perm = {}, {}
    for i = 1, n do rev[i] = shape[n + 1 - i]; perm[i] = n + 1 - i end
    local t = ember.randn(rev, D64):permute(perm):detach()
    if not t:is_contiguous() then return t end
  end
  local k = 1
  for i = 2, n do if shape[i] > shape[k] then k = i end end
  local long_shape = {}
  for i = 1, n do long_shape[i] = shape[i] end
  long_shape[k] = 2 * shape[k]
  local t = ember.randn(long_shape, D64):slice(k, 1, -1, 2):detach()
  assert(shape[k] == 1 or not t:is_contiguous())
  return t
end

-- Rewrites x's values in place with fn(x), keeping its layout.
local function tf(x, fn)
  ember.no_grad(function() x:copy_(fn(x)) end)
  return x
end
local function positive(x) return tf(x, function(t) return t:abs() * 0.75 + 0.3 end) end
local function nonzero(x)
  return tf(x, function(t) return ember.where(t:ge(0), t:abs() + 0.5, -t:abs() - 0.5) end)
end
-- Moves values at least 0.1 away from `p` (a kink of relu, abs, clamp...).
local function away(x, p)
  p = p or 0
  return tf(x, function(t) return t + t:ge(p):double() * 0.2 - 0.1 end)
end

local function long(data) return ember.tensor(data, { dtype = "int64", device = DEVICE }) end
local function bool(data) return ember.tensor(data, { dtype = "bool", device = DEVICE }) end

-- Each case: name, f, and inputs(mk) building the argument list. `nc =
-- false` skips the non-contiguous run (ops whose point is a layout).
local CASES = {}
local function case(name, inputs, f, opts)
  CASES[#CASES + 1] = { name = name, inputs = inputs, f = f, opts = opts or {} }
end

-- ---- elementwise ---------------------------------------------------------
case("add broadcast", function(mk) return { mk{ 3, 4 }, mk{ 4 } } end, function(a, b) return a + b end)
case("add method", function(mk) return { mk{ 2, 3 }, mk{ 2, 3 } } end, function(a, b) return a:add(b) end)
case("sub broadcast", function(mk) return { mk{ 2, 1, 3 }, mk{ 4, 3 } } end, function(a, b) return a - b end)
case("sub method", function(mk) return { mk{ 3, 1 }, mk{ 1, 2 } } end, function(a, b) return a:sub(b) end)
case("mul broadcast", function(mk) return { mk{ 3, 1 }, mk{ 1, 4 } } end, function(a, b) return a * b end)
case("mul method", function(mk) return { mk{ 2, 3 }, mk{ 3 } } end, function(a, b) return a:mul(b) end)
case("mul by 0-d tensor", function(mk) return { mk{ 2, 3 }, mk{} } end, function(a, b) return a * b end)
case("div broadcast", function(mk) return { mk{ 2, 3 }, nonzero(mk{ 3 }) } end, function(a, b) return a / b end)
case("div method", function(mk) return { mk{ 3, 1 }, nonzero(mk{ 3, 2 }) } end, function(a, b) return a:div(b) end)
case("pow tensor^tensor", function(mk) return { positive(mk{ 2, 3 }), mk{ 3 } } end, function(a, b) return a ^ b end)
case("pow method", function(mk) return { positive(mk{ 3, 1 }), mk{ 3, 2 } } end, function(a, b) return a:pow(b) end)
case("maximum", function(mk) return { mk{ 3, 4 }, mk{ 4 } } end, function(a, b) return a:maximum(b) end)
case("minimum", function(mk) return { mk{ 2, 1, 3 }, mk{ 2, 3 } } end, function(a, b) return a:minimum(b) end)
case("tensor + number", function(mk) return { mk{ 2, 3 } } end, function(x) return x + 1.5 end)
case("number + tensor", function(mk) return { mk{ 2, 3 } } end, function(x) return 1.5 + x end)
case("tensor - number", function(mk) return { mk{ 2, 3 } } end, function(x) return x - 0.5 end)
case("number - tensor", function(mk) return { mk{ 2, 3 } } end, function(x) return 2 - x end)
case("tensor * number", function(mk) return { mk{ 2, 3 } } end, function(x) return x * -2.5 end)
case("number * tensor", function(mk) return { mk{ 2, 3 } } end, function(x) return 3 * x end)
case("tensor / number", function(mk) return { mk{ 2, 3 } } end, function(x) return x / 4 end)
case("number / tensor", function(mk) return { nonzero(mk{ 2, 3 }) } end, function(x) return 3 / x end)
case("number ^ tensor", function(mk) return { mk{ 2, 3 } } end, function(x) return 2.5 ^ x end)
case("tensor ^ 2", function(mk) return { mk{ 2, 3 } } end, function(x) return x ^ 2 end)
case("tensor ^ 3", function(mk) return { mk{ 2, 3 } } end, function(x) return x ^ 3 end)
case("tensor ^ 0.5", function(mk) return { positive(mk{ 2, 3 }) } end, function(x) return x ^ 0.5 end)
case("tensor ^ -1.5", function(mk) return { positive(mk{ 2, 3 }) } end, function(x) return x ^ -1.5 end)
case("tensor:pow(number)", function(mk) return { mk{ 2, 3 } } end, function(x) return x:pow(3) end)
case("unary minus", function(mk) return { mk{ 2, 3 } } end, function(x) return -x end)
case("neg", function(mk) return { mk{ 2, 3 } } end, function(x) return x:neg() end)

-- Moves values to [k + 0.25 + shift, k + 0.75 + shift): off the steps of
-- floor, ceil, trunc and sign (shift 0) and of round (shift 0.5), where
-- their gradient, zero, is what finite differences see.
local function off_steps(shift)
  return function(x)
    return tf(x, function(t) return t:floor() + 0.25 + (t - t:floor()) * 0.5 + shift end)
  end
end

local UNARY = {
  { "exp" }, { "log", positive }, { "sqrt", positive }, { "rsqrt", positive }, { "abs", away },
  { "tanh" }, { "sigmoid" }, { "relu", away }, { "gelu" }, { "silu" }, { "sin" }, { "cos" },
  { "elu", away }, { "floor", off_steps(0) }, { "ceil", off_steps(0) }, { "trunc", off_steps(0) },
  { "sign", off_steps(0) }, { "round", off_steps(0.5) },
}
for _, u in ipairs(UNARY) do
  local fn, prep = u[1], u[2] or function(x) return x end
  case(fn, function(mk) return { prep(mk{ 3, 4 }) } end, function(x) return x[fn](x) end)
end
case("gelu tanh", function(mk) return { mk{ 3, 4 } } end, function(x) return x:gelu("tanh") end)
case("gelu none", function(mk) return { mk{ 3, 4 } } end, function(x) return x:gelu("none") end)
case("elu alpha", function(mk) return { away(mk{ 3, 4 }) } end, function(x) return x:elu(0.5) end)
case("clamp", function(mk) return { away(away(mk{ 3, 4 }, -0.5), 0.7) } end,
  function(x) return x:clamp(-0.5, 0.7) end)
case("clamp min only", function(mk) return { away(mk{ 3, 4 }, -0.2) } end, function(x) return x:clamp(-0.2) end)
case("clamp max only", function(mk) return { away(mk{ 3, 4 }, 0.3) } end, function(x) return x:clamp(nil, 0.3) end)
case("where", function(mk)
  return { bool{ { true, false, true, false }, { false, false, true, true }, { true, true, false, true } },
    mk{ 3, 4 }, mk{ 3, 4 } }
end, function(c, a, b) return ember.where(c, a, b) end)
case("where broadcast", function(mk) return { bool{ { true }, { false }, { true } }, mk{ 1, 4 }, mk{ 3, 4 } } end,
  function(c, a, b) return ember.where(c, a, b) end)
case("where with numbers", function(mk) return { bool{ { true, false, true }, { false, true, false } }, mk{ 2, 3 } } end,
  function(c, a) return ember.where(c, a, -1.25) + ember.where(c, 0.5, a) end)
case("masked_fill", function(mk) return { mk{ 3, 4 } } end, function(x)
  return x:masked_fill(bool{ { true, false, false, true }, { false, false, true, false }, { true, true, false, false } }, -2)
end)
case("masked_fill broadcast", function(mk) return { mk{ 2, 3, 4 } } end,
  function(x) return x:masked_fill(bool{ { true }, { false }, { true } }, 0.5) end)

-- ---- reductions ---------------------------------------------------------
local X3 = function(mk) return { mk{ 2, 3, 4 } } end
case("sum all", X3, function(x) return x:sum() end)
case("sum dim", X3, function(x) return x:sum(2) end)
case("sum dim -1 keepdim", X3, function(x) return x:sum(-1, true) end)
case("sum dims", X3, function(x) return x:sum({ 1, 3 }) end)
case("sum dims keepdim", X3, function(x) return x:sum({ 2, 3 }, true) end)
case("mean all", X3, function(x) return x:mean() end)
case("mean dim", X3, function(x) return x:mean(1) end)
case("mean dims keepdim", X3, function(x) return x:mean({ 1, -1 }, true) end)
case("var all", X3, function(x) return x:var() end)
case("var all correction 0", X3, function(x) return x:var(nil, { correction = 0 }) end)
case("var dim", X3, function(x) return x:var(2) end)
case("var dim keepdim correction 0", X3, function(x) return x:var(-1, { correction = 0, keepdim = true }) end)
case("var dims", X3, function(x) return x:var({ 1, 3 }) end)
case("var dim unbiased keepdim booleans", X3, function(x) return x:var(3, true, true) end)
case("max all", X3, function(x) return x:max() end)
case("min all", X3, function(x) return x:min() end)
case("max dim", X3, function(x) return (x:max(2)) end)
case("max dim keepdim", X3, function(x) return (x:max(-1, true)) end)
case("min dim", X3, function(x) return (x:min(1)) end)
case("min dim keepdim", X3, function(x) return (x:min(3, true)) end)

-- ---- linear algebra, softmax, normalisation -------------------------------
local function mm(a, b) return ember.matmul(a, b) end
case("matmul 2d", function(mk) return { mk{ 3, 4 }, mk{ 4, 5 } } end, mm)
case("matmul 1d 1d", function(mk) return { mk{ 4 }, mk{ 4 } } end, mm)
case("matmul 1d 2d", function(mk) return { mk{ 4 }, mk{ 4, 3 } } end, mm)
case("matmul 2d 1d", function(mk) return { mk{ 3, 4 }, mk{ 4 } } end, mm)
case("matmul 3d 2d", function(mk) return { mk{ 2, 3, 4 }, mk{ 4, 2 } } end, mm)
case("matmul 2d 3d", function(mk) return { mk{ 3, 4 }, mk{ 2, 4, 2 } } end, mm)
case("matmul 3d 1d", function(mk) return { mk{ 2, 3, 4 }, mk{ 4 } } end, mm)
case("matmul 1d 3d", function(mk) return { mk{ 4 }, mk{ 2, 4, 3 } } end, mm)
case("matmul batch broadcast", function(mk) return { mk{ 2, 1, 3, 4 }, mk{ 3, 4, 2 } } end, mm)
case("matmul method", function(mk) return { mk{ 2, 3 }, mk{ 3, 2 } } end, function(a, b) return a:matmul(b) end)
case("bmm", function(mk) return { mk{ 2, 3, 4 }, mk{ 2, 4, 2 } } end, function(a, b) return ember.bmm(a, b) end)
for _, d in ipairs({ 1, 2, 3, -1 }) do
  case("softmax dim " .. d, X3, function(x) return x:softmax(d) end)
  case("log_softmax dim " .. d, X3, function(x) return x:log_softmax(d) end)
end
case("ember.softmax", X3, function(x) return ember.softmax(x, -1) end)
case("layer_norm affine", function(mk) return { mk{ 2, 3, 4 }, mk{ 4 }, mk{ 4 } } end,
  function(x, w, b) return ember.layer_norm(x, 1, w, b) end)
case("layer_norm plain", function(mk) return { mk{ 2, 3, 4 } } end, function(x) return ember.layer_norm(x, 1) end)
case("layer_norm weight only", function(mk) return { mk{ 3, 4 }, mk{ 4 } } end,
  function(x, w) return ember.layer_norm(x, 1, w) end)
case("layer_norm bias only", function(mk) return { mk{ 3, 4 }, mk{ 4 } } end,
  function(x, b) return ember.layer_norm(x, 1, nil, b) end)
case("layer_norm two dims", function(mk) return { mk{ 2, 3, 4 }, mk{ 3, 4 }, mk{ 3, 4 } } end,
  function(x, w, b) return ember.layer_norm(x, { 3, 4 }, w, b, 1e-3) end)

-- ---- indexing and joining -----------------------------------------------
case("embedding", function(mk) return { mk{ 5, 3 } } end,
  function(w) return ember.embedding(w, long{ { 1, 3, 5 }, { 3, 3, 2 } }) end)
case("embedding 1d ids", function(mk) return { mk{ 4, 2 } } end, function(w) return ember.embedding(w, long{ 4, 1, 4 }) end)
case("index_select dim 1", function(mk) return { mk{ 3, 4 } } end, function(x) return x:index_select(1, long{ 3, 1, 3 }) end)
case("index_select dim -1", function(mk) return { mk{ 2, 3, 4 } } end,
  function(x) return x:index_select(-1, long{ 4, 2, 2, 1, 4 }) end)
case("gather dim 1", function(mk) return { mk{ 3, 4 } } end,
  function(x) return x:gather(1, long{ { 1, 2, 3, 1 }, { 3, 3, 2, 1 } }) end)
case("gather dim -1", function(mk) return { mk{ 2, 3 } } end,
  function(x) return x:gather(-1, long{ { 3, 3, 1, 2 }, { 2, 1, 1, 3 } }) end)
case("scatter_add dim 1", function(mk) return { mk{ 3, 4 }, mk{ 2, 4 } } end,
  function(x, src) return x:scatter_add(1, long{ { 1, 2, 3, 1 }, { 3, 3, 2, 1 } }, src) end)
case("scatter_add dim 2", function(mk) return { mk{ 2, 5 }, mk{ 2, 3 } } end,
  function(x, src) return x:scatter_add(2, long{ { 5, 1, 5 }, { 2, 2, 4 } }, src) end)
case("cat dim 1", function(mk) return { mk{ 2, 3 }, mk{ 1, 3 }, mk{ 3, 3 } } end,
  function(a, b, c) return ember.cat({ a, b, c }, 1) end)
case("cat dim 2", function(mk) return { mk{ 2, 1, 3 }, mk{ 2, 2, 3 } } end, function(a, b) return ember.cat({ a, b }, 2) end)
case("cat dim -1", function(mk) return { mk{ 2, 2 }, mk{ 2, 1 }, mk{ 2, 3 } } end,
  function(a, b, c) return ember.cat({ a, b, c }, -1) end)
case("cat default dim", function(mk) return { mk{ 1, 2 }, mk{ 2, 2 } } end, function(a, b) return ember.cat({ a, b }) end)
case("cat one tensor", function(mk) return { mk{ 2, 2 } } end, function(a) return ember.cat({ a }) end)
for _, d in ipairs({ 1, 2, 3, -1 }) do
  case("stack dim " .. d, function(mk) return { mk{ 2, 3 }, mk{ 2, 3 }, mk{ 2, 3 } } end,
    function(a, b, c) return ember.stack({ a, b, c }, d) end)
end
case("cat same tensor twice", function(mk) return { mk{ 2, 3 } } end, function(a) return ember.cat({ a, a, a:sin() }, 2) end)
case("stack same tensor twice", function(mk) return { mk{ 2, 3 } } end, function(a) return ember.stack({ a, a:exp() }) end)
case("split dim 1", function(mk) return { mk{ 5, 3 } } end, function(x) return x:split(2, 1) end)
case("split default dim", function(mk) return { mk{ 5, 2 } } end, function(x) return x:split(3) end)
case("split dim 2", function(mk) return { mk{ 2, 7 } } end, function(x) return x:split(3, 2) end)
case("split, some pieces unused", function(mk) return { mk{ 6, 2 } } end, function(x) return x:split(2)[2] end)
case("chunk dim 1", function(mk) return { mk{ 7, 2 } } end, function(x) return x:chunk(3, 1) end)
case("chunk dim -1", function(mk) return { mk{ 2, 6 } } end, function(x) return x:chunk(2, -1) end)
case("dropout p=0 training", function(mk) return { mk{ 3, 4 } } end, function(x) return ember.dropout(x, 0, true) end)
case("dropout eval", function(mk) return { mk{ 3, 4 } } end, function(x) return ember.dropout(x, 0.5, false) end)
-- reseeding inside f makes the mask the same on every call
case("dropout p=0.3 training (seeded)", function(mk) return { mk{ 4, 5 } } end,
  function(x) ember.manual_seed(7); return ember.dropout(x, 0.3, true) end)

-- ---- losses ---------------------------------------------------------------
local TARGET = { 2, 1, 4, 3, 3 }
local function ce(opts) return function(l) return ember.cross_entropy(l, long(TARGET), opts) end end
local LOGITS = function(mk) return { mk{ 5, 4 } } end
case("cross_entropy", LOGITS, ce())
for _, red in ipairs({ "mean", "sum", "none" }) do
  case("cross_entropy " .. red, LOGITS, ce{ reduction = red })
  case("cross_entropy ignore_index " .. red, LOGITS, ce{ ignore_index = 3, reduction = red })
  case("cross_entropy label_smoothing " .. red, LOGITS, ce{ label_smoothing = 0.1, reduction = red })
  case("cross_entropy ignore_index+smoothing " .. red, LOGITS,
    ce{ ignore_index = 3, label_smoothing = 0.2, reduction = red })
end
case("cross_entropy 1d logits", function(mk) return { mk{ 5 } } end,
  function(l) return ember.cross_entropy(l, ember.tensor(4, { dtype = "int64", device = DEVICE })) end)
for _, red in ipairs({ "mean", "sum", "none" }) do
  case("mse_loss " .. red, function(mk) return { mk{ 3, 4 }, mk{ 3, 4 } } end,
    function(a, b) return ember.mse_loss(a, b, red) end)
end
case("mse_loss default", function(mk) return { mk{ 2, 3 }, mk{ 2, 3 } } end, function(a, b) return ember.mse_loss(a, b) end)

-- ---- views ------------------------------------------------------------------
-- Each view is followed by a nonlinear op so the gradient flows through
-- the view's strides into a real computation.
case("narrow", X3, function(x) return x:narrow(2, 2, 2):exp() end)
case("narrow negative start", X3, function(x) return x:narrow(-1, -3, 2):sin() end)
case("select", X3, function(x) return x:select(1, 2):tanh() end)
case("select negative index", X3, function(x) return x:select(3, -2) * x:select(3, 1) end)
case("t[i]", X3, function(x) return x[2] * x[1] end)
case("slice with step", X3, function(x) return x:slice(3, 1, 4, 2):exp() end)
case("slice middle", X3, function(x) return x:slice(2, 2, 3) ^ 2 end)
case("transpose", X3, function(x) return x:transpose(1, 3):sin() end)
case("t", function(mk) return { mk{ 4, 3 } } end, function(x) return x:t():sin() * ember.arange(1, 5, D64) end)
case("transpose then matmul", function(mk) return { mk{ 4, 3 }, mk{ 4, 2 } } end,
  function(a, b) return a:transpose(1, 2):matmul(b) end)
case("permute", X3, function(x) return x:permute(3, 1, 2):exp() * ember.arange(1, 4, D64) end)
case("expand", function(mk) return { mk{ 3, 1 } } end, function(x) return x:expand(2, 3, 4):sin() end)
case("expand keep -1", function(mk) return { mk{ 1, 4 } } end, function(x) return x:expand(3, -1) ^ 2 end)
case("view", X3, function(x) return x:contiguous():view(4, 6):exp() end, { nc = false })
case("view infer", X3, function(x) return x:view(-1, 4):sin() end, { nc = false })
case("reshape", X3, function(x) return x:reshape(6, 4):sin() end)
case("reshape of transpose", X3, function(x) return x:transpose(1, 2):reshape(3, 8):exp() end)
case("squeeze all", function(mk) return { mk{ 3, 1, 4, 1 } } end, function(x) return x:squeeze():exp() end)
case("squeeze dim", function(mk) return { mk{ 3, 1, 4, 1 } } end, function(x) return x:squeeze(2):exp() end)
case("unsqueeze", function(mk) return { mk{ 3, 4 } } end, function(x) return x:unsqueeze(2):sin() end)
case("unsqueeze last", function(mk) return { mk{ 3, 4 } } end, function(x) return x:unsqueeze(-1):exp() end)
case("flatten", X3, function(x) return x:flatten():exp() end)
case("flatten range", function(mk) return { mk{ 2, 3, 4, 2 } } end, function(x) return x:flatten(2, 3):sin() end)
case("contiguous", X3, function(x) return x:transpose(1, 2):contiguous():exp() end)
case("clone", X3, function(x) return x:clone() * x end)
case("to float64 (no-op)", X3, function(x) return x:double():exp() end)
case("a chain of views", X3,
  function(x) return x:transpose(1, 2):narrow(3, 2, 3):unsqueeze(1):select(2, 2):reshape(-1) ^ 3 end)

-- ---- high ranks ------------------------------------------------------------
local X6 = function(mk) return { mk{ 2, 1, 3, 2, 1, 2 } } end
case("rank 6: sum dims keepdim", X6, function(x) return x:sum({ 2, 4, 6 }, true) end)
case("rank 6: var dims", X6, function(x) return x:var({ 1, 4 }) end)
case("rank 6: max dim", X6, function(x) return (x:max(3)) end)
case("rank 6 + rank 4 broadcast", function(mk) return { mk{ 2, 1, 3, 2, 1, 2 }, mk{ 3, 2, 1, 1 } } end,
  function(a, b) return a * b + b end)
case("rank 5: permute", function(mk) return { mk{ 2, 3, 1, 2, 2 } } end,
  function(x) return x:permute(5, 3, 1, 4, 2):exp() end)
case("rank 5: matmul batch broadcast", function(mk) return { mk{ 2, 1, 2, 3, 4 }, mk{ 2, 1, 4, 2 } } end, mm)
case("rank 5: softmax dim 3", function(mk) return { mk{ 2, 1, 3, 2, 2 } } end, function(x) return x:softmax(3) end)
case("rank 4: layer_norm two dims", function(mk) return { mk{ 2, 1, 3, 4 }, mk{ 3, 4 }, mk{ 3, 4 } } end,
  function(x, w, b) return ember.layer_norm(x, 2, w, b) end)
case("rank 8: transpose and sum", function(mk) return { mk{ 2, 1, 2, 1, 2, 1, 2, 2 } } end,
  function(x) return x:transpose(1, 8):sin():sum(5) end)

-- ---- torch's and torch.nn.functional's, composed in Lua (and log1p, expm1) --------
case("prod along a dim, with a zero", function(mk) return { mk{ 3, 5 } } end,
  function(x) return (x * ember.tensor({ 1, 1, 0, 1, 1 }, D64)):prod(2) end)
case("prod of all", function(mk) return { mk{ 2, 3 } } end, function(x) return x:prod() end)
case("cumprod", function(mk) return { mk{ 2, 6 } } end, function(x) return x:cumprod(-1) end)
case("repeat_interleave with counts", function(mk) return { mk{ 3, 2 } } end,
  function(x) return x:repeat_interleave({ 2, 0, 1 }, 1) end)
case("log1p", function(mk) return { positive(mk{ 2, 3 }) } end, function(x) return x:log1p() end)
case("expm1", function(mk) return { mk{ 2, 3 } } end, function(x) return x:expm1() end)
case("normalize", function(mk) return { mk{ 3, 4 } } end, function(x) return x:normalize({ dim = 2 }) end)
case("cosine_similarity", function(mk) return { mk{ 3, 4 }, mk{ 3, 4 } } end,
  function(a, b) return ember.cosine_similarity(a, b) end)
case("softplus", function(mk) return { mk{ 3, 4 } } end, function(x) return (x * 3):softplus({ threshold = 2 }) end)
case("pad reflect and constant crop", function(mk) return { mk{ 2, 4, 5 } } end,
  function(x) return ember.pad(ember.pad(x, { 2, 1, 1, 3 }, "reflect"), { -1, 2 }, { value = 3 }) end)

-- ---- composites ------------------------------------------------------------
case("attention-like composite", function(mk) return { mk{ 2, 3, 4 }, mk{ 2, 3, 4 }, mk{ 2, 3, 4 } } end,
  function(q, k, v)
    local s = ember.matmul(q, k:transpose(-1, -2)) / 2
    return ember.matmul(s:softmax(-1), v)
  end)
case("mlp composite", function(mk) return { mk{ 3, 4 }, mk{ 4, 5 }, mk{ 5 }, mk{ 5, 2 } } end,
  function(x, w1, b1, w2)
    local h = ember.layer_norm(x:matmul(w1) + b1, 1):gelu()
    return ember.cross_entropy(h:matmul(w2), long{ 1, 2, 2 })
  end)

describe("gradcheck", function()
  for _, c in ipairs(CASES) do
    it(c.name, function()
      ember.manual_seed(1234)
      gradcheck.check(c.f, c.inputs(contiguous), { name = c.name })
    end)
    if c.opts.nc ~= false then
      it(c.name .. " (non-contiguous inputs)", function()
        ember.manual_seed(4321)
        local inputs = c.inputs(noncontiguous)
        gradcheck.check(c.f, inputs, { name = c.name .. " (non-contiguous)" })
      end)
    end
    -- With several float inputs, also with only one of them requiring
    -- grad: backward formulas must not assume every input wants one.
    ember.manual_seed(1234)
    local probe, floats = c.inputs(contiguous), {}
    for i, x in ipairs(probe) do
      if type(x) == "userdata" and x.dtype == "float64" then floats[#floats + 1] = i end
    end
    if #floats > 1 then
      for _, i in ipairs(floats) do
        it(c.name .. " (only input " .. i .. " requires grad)", function()
          ember.manual_seed(1234)
          gradcheck.check(c.f, c.inputs(contiguous), { name = c.name, wrt = { i } })
        end)
      end
    end
  end
end)

-- ---- the autograd engine ------------------------------------------------------
local function max_abs_diff(a, b) return (a - b):abs():max():item() end

describe("autograd engine", function()
  before_each(function() ember.manual_seed(99) end)

  it("accumulates the gradient of a leaf used twice", function()
    local x = ember.randn({ 3, 2 }, F64):requires_grad_()
    local y = (x * x + x:exp()):sum()
    y:backward()
    local want = ember.no_grad(function() return x * 2 + x:exp() end)
    assert.is_true(max_abs_diff(x.grad, want) < 1e-14)
    gradcheck.check(function(a) return a * a + a:exp() end, { x })
  end)

  it("accumulates the same tensor as both operands (x * x, x + x)", function()
    local x = ember.randn({ 4 }, F64):requires_grad_()
    ;(x + x):sum():backward()
    assert.is_true(max_abs_diff(x.grad, ember.full({ 4 }, 2, F64)) == 0)
    gradcheck.check(function(a) return a * a end, { x })
    gradcheck.check(function(a) return a:matmul(a) end, { x })
  end)

  it("sums the gradients of a diamond", function()
    local x = ember.randn({ 2, 3 }, F64):requires_grad_()
    local a = x:exp()
    local b = a * 2
    local c = a:sin()
    ;(b * c):sum():backward()
    -- d/dx [2 e^x sin(e^x)] = 2 e^x sin(e^x) + 2 e^2x cos(e^x)
    local want = ember.no_grad(function()
      local e = x:exp()
      return e * e:sin() * 2 + e * e * e:cos() * 2
    end)
    assert.is_true(max_abs_diff(x.grad, want) < 1e-13)
    gradcheck.check(function(t) local e = t:exp(); return (e * 2) * e:sin() end, { x })
  end)

  it("diamond with a view on one branch and broadcasting on the other", function()
    local x = ember.randn({ 3, 4 }, F64)
    gradcheck.check(function(t)
      local a = t:tanh()
      return a:transpose(1, 2):matmul(a) + a:sum(1, true):transpose(1, 2)
    end, { x })
  end)

  it("reduces broadcast gradients to the input's shape", function()
    local a = ember.randn({ 3, 1 }, F64):requires_grad_()
    local b = ember.randn({ 4 }, F64):requires_grad_()
    local c = ember.randn({}, F64):requires_grad_()
    ;((a + b) * c):sum():backward()
    assert.are.same({ 3, 1 }, a.grad.shape)
    assert.are.same({ 4 }, b.grad.shape)
    assert.are.same({}, c.grad.shape)
    -- d/da = 4 c per row, d/db = 3 c per column, d/dc = sum(a + b)
    local cv = c:item()
    assert.is_true(max_abs_diff(a.grad, ember.full({ 3, 1 }, 4 * cv, F64)) < 1e-14)
    assert.is_true(max_abs_diff(b.grad, ember.full({ 4 }, 3 * cv, F64)) < 1e-14)
    local want_c = ember.no_grad(function() return (a + b):sum():item() end)
    assert.is_true(math.abs(c.grad:item() - want_c) < 1e-13)
  end)

  it("reduces broadcast gradients over leading and size-1 dims at once", function()
    gradcheck.check(function(a, b, c) return (a * b - c) / (b:abs() + 1) end,
      { ember.randn({ 2, 1, 3 }, F64), ember.randn({ 4, 1 }, F64), ember.randn({ 1, 1, 1, 3 }, F64) })
  end)

  it("adds the gradients of repeated backward calls into .grad", function()
    local x = ember.randn({ 3 }, F64):requires_grad_()
    ;(x * 3):sum():backward()
    ;(x * x):sum():backward()
    local want = ember.no_grad(function() return x * 2 + 3 end)
    assert.is_true(max_abs_diff(x.grad, want) < 1e-14)
    x.grad = nil
    ;(x * 3):sum():backward()
    assert.is_true(max_abs_diff(x.grad, ember.full({ 3 }, 3, F64)) == 0)
  end)

  it("backward twice needs retain_graph", function()
    local x = ember.randn({ 3 }, F64):requires_grad_()
    local y = (x:exp() * x):sum()
    y:backward(true) -- retain
    local once = x.grad:clone()
    y:backward()
    assert.is_true(max_abs_diff(x.grad, once * 2) < 1e-14)
    assert.has_error(function() y:backward() end)
  end)

  it("takes an explicit output gradient", function()
    local x = ember.randn({ 2, 3 }, F64):requires_grad_()
    local g = ember.randn({ 2, 3 }, F64)
    local y = x:sin()
    y:backward(g)
    local want = ember.no_grad(function() return x:cos() * g end)
    assert.is_true(max_abs_diff(x.grad, want) < 1e-15)
  end)

  it("detach and no_grad stop gradients", function()
    local x = ember.randn({ 3 }, F64):requires_grad_()
    local y = (x * x:detach()):sum()
    y:backward()
    assert.is_true(max_abs_diff(x.grad, x:detach()) == 0)
    local z = ember.no_grad(function() return x * 2 end)
    assert.is_false(z.requires_grad)
    assert.is_nil(z.grad_fn)
  end)

  it("gives no gradient to inputs that do not require it", function()
    local x = ember.randn({ 3 }, F64):requires_grad_()
    local w = ember.randn({ 3 }, F64)
    ;(x * w):sum():backward()
    assert.is_nil(w.grad)
    assert.is_true(max_abs_diff(x.grad, w) == 0)
  end)

  it("gives each input a gradient of its own dtype and shape (0-d operand of another dtype)", function()
    local a = ember.randn({ 2, 3 }):requires_grad_()            -- float32
    local b = ember.tensor(2.5, F64):requires_grad_()            -- float64, 0-d
    local y = a * b
    assert.are.equal("float32", y.dtype)
    y:sum():backward()
    assert.are.equal("float32", a.grad.dtype)
    assert.are.equal("float64", b.grad.dtype)
    assert.are.same({}, b.grad.shape)
    assert.is_true(math.abs(b.grad:item() - a:sum():item()) < 1e-5)
    assert.is_true(max_abs_diff(a.grad, ember.full({ 2, 3 }, 2.5)) == 0)
  end)

  it("backpropagates through empty tensors", function()
    local x = ember.zeros({ 0, 3 }, F64):requires_grad_()
    local b = ember.ones({ 2, 3 }, F64):requires_grad_()
    local y = ember.cat({ x:exp(), b * 2 }, 1):sum(1)
    y:sum():backward()
    assert.are.same({ 0, 3 }, x.grad.shape)
    assert.is_true(max_abs_diff(b.grad, ember.full({ 2, 3 }, 2, F64)) == 0)
    local p = ember.zeros({ 2, 0 }, F64):requires_grad_()
    local q = ember.zeros({ 0, 3 }, F64):requires_grad_()
    local m = p:matmul(q)
    assert.are.same({ 2, 3 }, m.shape)
    assert.are.equal(0, m:abs():sum():item())
    m:sum():backward()
    assert.are.same({ 2, 0 }, p.grad.shape)
    assert.are.same({ 0, 3 }, q.grad.shape)
  end)

  it("gives an expanded (stride 0) leaf a gradient of its full shape", function()
    local x = ember.randn({ 3, 1 }, F64):expand(3, 4):detach():requires_grad_()
    ;(x * ember.arange(1, 5, F64)):sum():backward()
    assert.are.same({ 3, 4 }, x.grad.shape)
    local want = ember.arange(1, 5, F64):expand(3, 4)
    assert.is_true(max_abs_diff(x.grad, want) == 0)
  end)

  it("passes gradients through dtype conversions in the input's dtype", function()
    -- finite differences cannot see through float32 rounding, so this one
    -- is checked against the closed form
    local x = ember.randn({ 4 }, F64):requires_grad_()
    local y = (x:float() * 3):exp():double()
    y:sum():backward()
    assert.are.equal("float64", x.grad.dtype)
    local want = ember.no_grad(function() return (x * 3):exp() * 3 end)
    local rel = max_abs_diff(x.grad, want) / want:abs():max():item()
    assert.is_true(rel < 1e-6, "relative error " .. rel)
    local z = ember.randn({ 3 }):requires_grad_()
    ;(z:double() * z:double()):sum():backward()
    assert.are.equal("float32", z.grad.dtype)
    assert.is_true(max_abs_diff(z.grad, z:detach() * 2) < 1e-6)
  end)

  it("dropout's gradient is its mask scaled by 1/(1-p)", function()
    local x = ember.ones({ 100, 100 }, F64):requires_grad_()
    local y = ember.dropout(x, 0.25, true)
    y:sum():backward()
    assert.is_true(max_abs_diff(x.grad, y:detach()) == 0)
    local kept = y:detach():ne(0):double():mean():item()
    assert.is_true(math.abs(kept - 0.75) < 0.03, "kept fraction " .. kept)
    assert.is_true(max_abs_diff(y:detach():masked_fill(y:eq(0), 1 / 0.75), ember.full({ 100, 100 }, 1 / 0.75, F64)) < 1e-15)
  end)

  it("refuses an implicit gradient for a non-scalar output", function()
    local x = ember.randn({ 3 }, F64):requires_grad_()
    assert.has_error(function() x:exp():backward() end)
  end)

  it("checks an ember.Function against finite differences", function()
    local cube = ember.Function{
      name = "cube",
      forward = function(ctx, a) ctx:save_for_backward(a); return a * a * a end,
      backward = function(ctx, g) local a = ctx.saved[1]; return g * a * a * 3 end,
    }
    gradcheck.check(function(a) return cube(a):sin() end, { ember.randn({ 2, 3 }, F64) })
  end)
end)

-- ---- the checker itself ---------------------------------------------------------
describe("gradcheck helper", function()
  -- Wrong gradients without ember.Function: `v - v:detach()` is zero in
  -- value but carries v's gradient, so these have a correct forward and a
  -- backward that is wrong in a known way.
  local function ghost(v) return v - v:detach() end

  local function wrong(scale) -- d/da = 2 a * scale
    return function(a) return a * a + ghost(a * a) * (scale - 1) end
  end

  it("passes a correct gradient and fails a wrong one", function()
    local x = ember.randn({ 2, 3 }, F64)
    assert.is_true((gradcheck.run(wrong(1), { x })))
    local ok, report = gradcheck.run(wrong(1 + 1e-4), { x })
    assert.is_false(ok)
    assert.matches("analytic", report)
    assert.has_error(function() gradcheck.check(wrong(1.01), { x }) end)
  end)

  it("fails a missing gradient", function()
    local ok = gradcheck.run(function(a, b) return a:detach() * b end,
      { ember.randn({ 3 }, F64), ember.randn({ 3 }, F64) })
    assert.is_false(ok)
  end)

  it("fails a gradient for the wrong element (a layout bug)", function()
    -- value exp(a); gradient of element (i, j) uses the weight of (j, i)
    local function flipped(a)
      local at = a:transpose(1, 2)
      return a:exp():detach() + ghost(at) * a:exp():transpose(1, 2):detach()
    end
    local ok = gradcheck.run(flipped, { ember.randn({ 2, 2 }, F64) })
    assert.is_false(ok)
  end)

  it("fails a forward that changes with grad mode", function()
    local ok, report = gradcheck.run(function(a)
      return ember.is_grad_enabled() and a:exp() or a:exp() * (1 + 1e-9)
    end, { ember.randn({ 3 }, F64) })
    assert.is_false(ok)
    assert.matches("grad mode", report)
  end)

  it("checks a Lua backward (ember.Function) like any op", function()
    local wrong_square = ember.Function{
      name = "gradcheck_spec_wrong_square",
      forward = function(ctx, a) ctx:save_for_backward(a); return a * a end,
      backward = function(ctx, g) return g * ctx.saved[1] * 2.001 end,
    }
    assert.is_false((gradcheck.run(function(a) return wrong_square(a) end, { ember.randn({ 3 }, F64) })))
  end)

  it("checks only the inputs in wrt and leaves int64 inputs alone", function()
    local x, y = ember.randn({ 3 }, F64), ember.randn({ 3 }, F64)
    local worst = gradcheck.check(function(a, b, idx) return (a * b):gather(1, idx) end,
      { x, y, ember.tensor({ 3, 1 }, { dtype = "int64" }) }, { wrt = { 2 } })
    assert.is_true(worst <= 1)
    assert.is_nil(x.grad)
    assert.is_not_nil(y.grad)
  end)

  it("keeps a non-contiguous input's layout", function()
    local x = noncontiguous({ 3, 4 })
    local seen
    gradcheck.check(function(a) seen = a:is_contiguous(); return a:exp() end, { x })
    assert.is_false(seen)
    assert.is_false(x:is_contiguous())
  end)
end)
