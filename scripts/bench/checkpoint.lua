-- scripts/bench/checkpoint.lua -- activation checkpointing on a stack of
-- Transformer encoder layers (pre-norm, d256, 8 heads, FFN 1024, dropout
-- 0.1, causal): fwd+bwd ms and the memory the autograd graph keeps after
-- the forward (ember.live_bytes after a full collection), with and without
-- `checkpoint = true`, side by side.
--   build/bin/ember scripts/bench/checkpoint.lua [--layers 8] [--L 2048] [--reps 3]
local ember = require "ember"
local nn = require "ember.nn"
local layers, L, reps = 8, 2048, 3
for i = 1, #arg do
  if arg[i] == "--help" or arg[i] == "-h" then
    print([[Usage: ember scripts/bench/checkpoint.lua [--layers N] [--L N] [--reps N]

Activation checkpointing (checkpoint = true on TransformerEncoderLayer)
against the plain stack: fwd+bwd ms and the bytes kept after the forward.

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

local function run(ck)
  ember.manual_seed(1)
  local stack = {}
  for i = 1, layers do
    stack[i] = nn.TransformerEncoderLayer(256, 8, { dim_feedforward = 1024, norm_first = true, checkpoint = ck })
  end
  local x = ember.randn(1, L, 256):requires_grad_()
  local kept, ts = 0, {}
  for r = 0, reps do
    collectgarbage(); collectgarbage()
    local base = ember.live_bytes()
    local t0 = ember.clock()
    local y = x
    for i = 1, layers do y = stack[i](y, { causal = true }) end
    collectgarbage(); collectgarbage()
    kept = ember.live_bytes() - base
    y:sum():backward()
    if r > 0 then ts[#ts + 1] = (ember.clock() - t0) * 1000 end
  end
  table.sort(ts)
  return ts[(#ts + 1) // 2], kept
end

local t0, m0 = run(false)
local t1, m1 = run(true)
print(("%d layers, d256 h8 FFN1024, B1 L%d, fwd+bwd (median of %d)"):format(layers, L, reps))
print("| | ms | vs plain | MB kept after forward | vs plain |")
print("|---|---|---|---|---|")
print(("| plain | %.0f | 1.00 | %.1f | 1.00 |"):format(t0, m0 / 2 ^ 20))
print(("| checkpoint = true | %.0f | %.2f | %.1f | %.2f |"):format(t1, t1 / t0, m1 / 2 ^ 20, m1 / m0))
