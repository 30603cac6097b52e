-- fp32_limit.lua -- how close the float32 MHA layer's fwd+bwd comes to the
-- machine's float32 matmul rate (issue "CPU speed": at least 60% of
-- oneDNN's own f32 matmul, measured in the same run, at L = 1024 and 4096).
--   limit    oneDNN's own f32 matmul (the C peer ember_matmul_peer, default
--            threads) at 1024^3 and at 4096 x 256 x 256 (the projections'
--            shape); the better of the two is the limit
--   layer    one nn.MultiHeadAttention (d_model 256, 8 heads) fwd+bwd on
--            [B, L, 256], B*L = 4096: 4 projections (3 products each, fwd
--            and bwd) and the attention (QK^T and PV forward, 4 products
--            backward, not counting the backward's recompute of QK^T):
--            FLOPs = 2 * (12 * B*L * 256^2 + 6 * B*8*L^2*32), 19.3 G at L1024
--   attention the attention op alone (ember.Attention, [B, 8, L, 32]), its
--            FLOPs the second term
-- Best of REPS after a warm-up, ms; GFLOP/s and % of the limit.
--   ember scripts/bench/fp32_limit.lua [REPS=5]
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = require "ember"

local reps = tonumber(arg[1]) or 5
local exe = arg and arg[-1] or "build/bin/ember"
local peer = (exe:match("^(.*)/[^/]*$") or ".") .. "/ember_matmul_peer"
local threads = ember.get_num_threads()

local function best_ms(step)
  step()
  local best = math.huge
  for _ = 1, reps do
    local t0 = ember.clock()
    step()
    best = math.min(best, ember.clock() - t0)
  end
  return best * 1e3
end

local function onednn_gflops(m, n, k)
  local p = io.popen(("%q %d %d %d %d %d 2>&1"):format(peer, m, n, k, 10, threads))
  local out = p:read("a")
  p:close()
  return tonumber(out:match("onednn_f32 ([%d%.]+)")) or error("ember_matmul_peer failed:\n" .. out)
end

local limit_a, limit_b = onednn_gflops(1024, 1024, 1024), onednn_gflops(4096, 256, 256)
local limit = math.max(limit_a, limit_b)
print(require("ember.cli").machine())
print(("# float32, %d threads, best of %d; %s"):format(threads, reps, tostring(ember.cpu_info().float32)))
print(("# limit: oneDNN's own f32 matmul %.1f GFLOP/s at 1024^3, %.1f at 4096x256x256 -> %.1f"):format(
  limit_a, limit_b, limit))
print("| case | ms | GFLOP | GFLOP/s | % of limit |")
print("|---|---|---|---|---|")
local D, H, dh = 256, 8, 32
for _, L in ipairs { 1024, 4096 } do
  local B = 4096 // L
  local proj = 12 * B * L * D * D
  local att = 6 * B * H * L * L * dh
  ember.manual_seed(0)
  local m = ember.MultiHeadAttention { d_model = D, heads = H }
  local x = ember.randn(B, L, D):requires_grad_()
  local ms = best_ms(function()
    m:forward(x):sum():backward()
    m:zero_grad()
  end)
  local gf = 2 * (proj + att) * 1e-9
  print(("| MHA layer fwd+bwd, B%d L%d | %.1f | %.1f | %.0f | %.0f%% |"):format(B, L, ms, gf, gf / ms * 1e3,
    100 * gf / ms * 1e3 / limit))
  local a = ember.Attention { heads = H, head_dim = dh }
  local q, k, v = ember.randn(B, H, L, dh):requires_grad_(), ember.randn(B, H, L, dh):requires_grad_(),
    ember.randn(B, H, L, dh):requires_grad_()
  ms = best_ms(function() a(q, k, v):sum():backward() end)
  gf = 2 * att * 1e-9
  print(("| attention op alone, B%d L%d | %.1f | %.1f | %.0f | %.0f%% |"):format(B, L, ms, gf, gf / ms * 1e3,
    100 * gf / ms * 1e3 / limit))
end
