-- bf16_passes.lua -- the CPU backend's bfloat16 passes of a KJV training step
-- (B32 L128 d128 H4, autocast) alone, at the step's shapes: rope forward
-- on heads viewed from a [B, L, 128] or a joined q/k/v [B, L, 384]
-- projection and its backward, bias gradients (column sums of [4096, n]
-- bfloat16 for n = 128, 384, 512, float32 beside them), and the float32 <-> bfloat16 casts.
-- Prints the median wall time of a call (output allocation included) and
-- the kernel's own time from ember.profile. EMBER_CPU_BF16=avx512 or
-- plain runs the integer-rounding or scalar paths (backends/cpu/README.md,
-- cpu_bf16_avx512.h) for a before/after on one machine.
--   ember scripts/bench/bf16_passes.lua [REPS=400]   (OMP_NUM_THREADS=1 for one core)
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"
local reps = tonumber(arg[1]) or 400

-- median wall ms of fn, and the mean ms of its `kernel` spans
local function time(fn, kernel)
  for _ = 1, 20 do fn() end
  local t = {}
  for i = 1, reps do
    local t0 = ember.clock()
    fn()
    t[i] = ember.clock() - t0
  end
  table.sort(t)
  local own = 0 / 0
  local prof = ember.profile(function() for _ = 1, reps do fn() end end)
  for _, r in ipairs(prof:stats()) do
    if r.name == kernel then own = r.self / r.calls / 1e3 end
  end
  return t[(reps + 1) // 2] * 1e3, own
end

local function row(name, fn, kernel)
  local wall, own = time(fn, kernel)
  print(("%-46s %9.4f %9.4f"):format(name, wall, own))
end

local B, L, H, dh = 32, 128, 4, 32
local half = dh // 2
local inv = {}
for m = 0, half - 1 do inv[m + 1] = 10000 ^ (-2.0 * m / dh) end
local ang = ember.arange(0, L, { dtype = "float64" }):unsqueeze(2)
  * ember.tensor(inv, { dtype = "float64" }):unsqueeze(1)
local c, s = ang:cos():to("bfloat16"), ang:sin():to("bfloat16")

print(require("ember.cli").machine())
print(("%-46s %9s %9s"):format("pass", "wall ms", "kernel ms"))
for _, w in ipairs({ 128, 384 }) do
  local proj = ember.randn(B, L, w):to("bfloat16")
  local q = proj:narrow(3, 1, H * dh):reshape(B, L, H, dh):transpose(2, 3)
  row(("rope forward, heads of [%d, %d, %d]"):format(B, L, w), function() return ember._rope(q, c, s) end, "rope")
end
local leaf = ember.randn(B, L, H * dh):to("bfloat16"):requires_grad_()
local y = ember._rope(leaf:reshape(B, L, H, dh):transpose(2, 3), c, s)
local gy = ember.randn(B, H, L, dh):to("bfloat16")
row("rope backward (autograd, rope_grad)", function()
  y:backward(gy, { retain_graph = true })
  leaf.grad = nil
end, "rope_grad")
for _, n in ipairs({ 128, 384, 512 }) do
  local g = ember.randn(4096, n)
  local gb = g:to("bfloat16")
  row(("bias gradient: sum over dim 1, bf16 [4096, %d]"):format(n), function() return gb:sum(1) end, "sum")
  row(("bias gradient: sum over dim 1, f32  [4096, %d]"):format(n), function() return g:sum(1) end, "sum")
end
local f = ember.randn(4096, 128)
local h = f:to("bfloat16")
row("cast f32 -> bf16 [4096, 128]", function() return f:to("bfloat16") end, "cast")
row("cast bf16 -> f32 [4096, 128]", function() return h:to("float32") end, "cast")
