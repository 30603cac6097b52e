-- scripts/bench/checkpoint.lua -- activation checkpointing on a stack of
-- Transformer encoder layers (pre-norm, d256, 8 heads, FFN 1024, dropout
-- 0.1, causal): fwd+bwd ms, the memory the autograd graph keeps after
-- the forward (ember.live_bytes after a full collection) and the peak of
-- the tensor bytes over a fwd+bwd with no collection forced (an untimed
-- step of its own: ember.max_memory_allocated), with and without
-- `checkpoint = true`, side by side; and checkpointing with the fused
-- attention recomputed too (nn.checkpoint's reuse_attention = false), the
-- full recompute that the kept attention results avoid.
--   build/bin/ember scripts/bench/checkpoint.lua [--layers 8] [--L 2048] [--reps 3]
local ember = require "ember"
local nn = require "ember.nn"
local AC = require "ember.nn.activation_checkpoint"
local layers, L, reps = 8, 2048, 3
for i = 1, #arg do
  if arg[i] == "--help" or arg[i] == "-h" then
    print([[Usage: ember scripts/bench/checkpoint.lua [--layers N] [--L N] [--reps N]

Activation checkpointing (checkpoint = true on TransformerEncoderLayer)
against the plain stack: fwd+bwd ms and the bytes kept after the forward;
also with the attention recomputed (no reuse of its kept results).

Options:
   --layers N   encoder layers (default 8)
   --L N        sequence length, batch 1 (default 2048)
   --reps N     timed steps (median; default 3)
   -h, --help   this text]])
    os.exit(0)
  end
  if arg[i] == "--layers" then layers = tonumber(arg[i + 1]) end
  if arg[i] == "--L" then L = tonumber(arg[i + 1]) end
  if arg[i] == "--reps" then reps = tonumber(arg[i + 1]) end
end

-- the three configurations, each with its own stack (same weights); the
-- timed steps take turns (plain, checkpoint, recomputed, plain, ...) so
-- that a machine whose load drifts slows all three alike
local configs = {
  { name = "plain", ck = false, reuse = true },
  { name = "checkpoint = true", ck = true, reuse = true },
  { name = "checkpoint, attention recomputed", ck = true, reuse = false },
}
local x = ember.randn(1, L, 256):requires_grad_()
for _, c in ipairs(configs) do
  ember.manual_seed(1)
  c.stack, c.ts, c.cpu = {}, {}, {}
  for i = 1, layers do
    c.stack[i] = nn.TransformerEncoderLayer(256, 8, { dim_feedforward = 1024, norm_first = true, checkpoint = c.ck })
  end
end

local function step(c, timed)
  AC.reuse_attention = c.reuse
  x.grad = nil
  collectgarbage(); collectgarbage()
  local base = ember.live_bytes()
  local t0, cpu0 = ember.clock(), os.clock()
  local y = x
  for i = 1, layers do y = c.stack[i](y, { causal = true }) end
  collectgarbage(); collectgarbage()
  c.kept = ember.live_bytes() - base
  y:sum():backward()
  if timed then
    c.ts[#c.ts + 1] = (ember.clock() - t0) * 1000
    c.cpu[#c.cpu + 1] = (os.clock() - cpu0) * 1000
  end
end

-- The peak of the tensor bytes over a whole fwd+bwd, as a training loop
-- sees it: no collection forced inside, so tensors dropped but not yet
-- collected count (ember.max_memory_allocated).
local function peak_step(c)
  AC.reuse_attention = c.reuse
  x.grad = nil
  collectgarbage(); collectgarbage()
  local base = ember.live_bytes()
  ember.reset_peak_memory_stats()
  local y = x
  for i = 1, layers do y = c.stack[i](y, { causal = true }) end
  y:sum():backward()
  c.peak = ember.max_memory_allocated() - base
end

for r = 0, reps do
  for _, c in ipairs(configs) do step(c, r > 0) end
end
for _, c in ipairs(configs) do peak_step(c) end
AC.reuse_attention = true

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end
local p = configs[1]
local pt, pc = median(p.ts), median(p.cpu)
print(require("ember.cli").machine())
print(("%d layers, d256 h8 FFN1024, B1 L%d, fwd+bwd (median of %d, taking turns)"):format(layers, L, reps))
print("| | ms | vs plain | CPU ms (all threads) | vs plain | MB kept after forward | vs plain | peak MB, fwd+bwd | vs plain |")
print("|---|---|---|---|---|---|---|---|---|")
for _, c in ipairs(configs) do
  local t, cpu = median(c.ts), median(c.cpu)
  print(("| %s | %.0f | %.2f | %.0f | %.2f | %.1f | %.2f | %.1f | %.2f |"):format(c.name, t, t / pt, cpu, cpu / pc,
    c.kept / 2 ^ 20, c.kept / p.kept, c.peak / 2 ^ 20, c.peak / p.peak))
end
