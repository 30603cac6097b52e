-- kernels.lua -- ember's own CPU kernels (not the products): add, relu,
-- exp, GELU, sum, softmax, layer_norm and cross entropy (forward) on
-- float32, each timed alone at a size that stays in L2 and at one that
-- streams from memory; GB/s counts each tensor read or written once.
-- Prints the instruction set each group runs (ember.cpu_info().float32's
-- "kernels:"); run it under builds with and without an AVX-512 clone to see
-- whether one pays (backends/cpu/README.md has the table).
--   ember scripts/bench/kernels.lua [REPS=20]   (OMP_NUM_THREADS=1 for one core)
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"
local reps = tonumber(arg[1]) or 20

local function best(fn)
  fn()
  local b = math.huge
  for _ = 1, reps do
    local t0 = ember.clock()
    fn()
    b = math.min(b, ember.clock() - t0)
  end
  return b
end

local cases = {}
local function case(name, make)
  cases[#cases + 1] = { name, make }
end
for _, n in ipairs({ 64 * 1024, 8 * 1024 * 1024 }) do
  local tag = n >= 2 ^ 20 and ("%dM"):format(n // 2 ^ 20) or ("%dK"):format(n // 1024)
  case("add " .. tag, function()
    local a, b = ember.randn(n), ember.randn(n)
    return function() return a + b end, 3 * n * 4
  end)
  case("relu " .. tag, function()
    local a = ember.randn(n)
    return function() return a:relu() end, 2 * n * 4
  end)
  case("exp " .. tag, function()
    local a = ember.randn(n)
    return function() return a:exp() end, 2 * n * 4
  end)
  case("gelu " .. tag, function()
    local a = ember.randn(n)
    return function() return ember.gelu(a) end, 2 * n * 4
  end)
  case("sum " .. tag, function()
    local a = ember.randn(n)
    return function() return a:sum() end, n * 4
  end)
  case("softmax rows of 1024, " .. tag, function()
    local a = ember.randn(n // 1024, 1024)
    return function() return a:softmax(2) end, 2 * n * 4
  end)
  case("layer_norm rows of 256, " .. tag, function()
    local a, w, b = ember.randn(n // 256, 256), ember.ones(256), ember.zeros(256)
    return function() return ember.layer_norm(a, { 256 }, w, b) end, 2 * n * 4
  end)
  case("cross_entropy 1000 classes, " .. tag, function()
    local a = ember.randn(n // 1000, 1000)
    local y = (ember.rand(n // 1000) * 999):long() + 1
    return function() return ember.cross_entropy(a, y) end, n * 4
  end)
end

local info = ember.cpu_info()
print(require("ember.cli").machine())
print(("%d threads, best of %d; float32 %s"):format(ember.get_num_threads(), reps,
  info.float32:match("kernels: [^;]*") or "?"))
print(("%-34s %10s %8s"):format("kernel", "us", "GB/s"))
for _, c in ipairs(cases) do
  local fn, bytes = c[2]()
  local t = best(fn)
  print(("%-34s %10.1f %8.2f"):format(c[1], t * 1e6, bytes / t * 1e-9))
end
