-- scripts/bench/gqa.lua -- grouped-query attention on the fused CPU kernel
-- against standard multi-head attention: fwd+bwd ms of the attention op
-- (8 query heads, head_dim 32, causal), kv heads read in place.
--   build/bin/ember scripts/bench/gqa.lua [--L 4096] [--reps 5]
local ember = require "ember"
local L, reps = 4096, 5
for i = 1, #arg do
  if arg[i] == "--help" or arg[i] == "-h" then
    print([[Usage: ember scripts/bench/gqa.lua [--L N] [--reps N]

Grouped-query attention (8 query heads, 2 or 1 kv heads) against standard
attention (8 and 8): fwd+bwd ms of the fused op, and the bytes of K and V.

Options:
   --L N      sequence length (default 4096)
   --reps N   timed repetitions (median; default 5)
   -h, --help this text]])
    os.exit(0)
  end
  if arg[i] == "--L" then L = tonumber(arg[i + 1]) end
  if arg[i] == "--reps" then reps = tonumber(arg[i + 1]) end
end
local att = ember.Attention { attention = "standard", heads = 8, head_dim = 32 }
-- Each configuration's step; the timed steps take turns (8, 2, 1, 8, 2, 1, ...) so that a
-- machine whose load drifts slows all three alike (one after the other, the same 8 / 8 run
-- measured 1.09x of itself).
local function setup(Hkv)
  local q = ember.randn(1, 8, L, 32):requires_grad_()
  local k, v = ember.randn(1, Hkv, L, 32):requires_grad_(), ember.randn(1, Hkv, L, 32):requires_grad_()
  return { hkv = Hkv, ts = {}, bytes = 2 * Hkv * L * 32 * 4,
    step = function() q.grad, k.grad, v.grad = nil, nil, nil; att(q, k, v, { causal = true }):sum():backward() end }
end
local configs = { setup(8), setup(2), setup(1) }
for _, c in ipairs(configs) do c.step() end
for _ = 1, reps do
  for _, c in ipairs(configs) do
    local t0 = ember.clock()
    c.step()
    c.ts[#c.ts + 1] = (ember.clock() - t0) * 1000
  end
end
local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end
print(require("ember.cli").machine())
print(("median of %d fwd+bwd steps each, taking turns"):format(reps))
print(("| L | heads / kv heads | fwd+bwd ms | vs MHA | K+V bytes |"))
print("|---|---|---|---|---|")
local base = median(configs[1].ts)
for _, c in ipairs(configs) do
  local ms = median(c.ts)
  print(("| %d | 8 / %d | %.1f | %.2f | %d |"):format(L, c.hkv, ms, ms / base, c.bytes))
end
