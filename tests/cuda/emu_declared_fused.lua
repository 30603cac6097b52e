-- On the emulated CUDA device (backends/cuda/emu): every declared variant
-- (relpos alibi / t5 bidirectional and not / shaw, local sliding, causal +
-- window, block-sparse with global tokens, cross-attention Lq ~= Lk, and
-- grouped heads: k and v with fewer heads than q) must
-- take the fused kernel (ember.attention_routes(): fused +1 forward, and
-- nothing composed), so a silent fallback to the composition fails here;
-- and it must agree with the CPU: output, dq, dk, dv and the tables'
-- gradients within 1e-4 in float32, and within 0.05 in bfloat16 (both
-- sides from the same bf16-rounded inputs; the CPU side in float32).
--   ember tests/cuda/emu_declared_fused.lua   (EMBER_PLUGIN_PATH: the emu folder first)
local specs = {
  {attention = "standard"},
  {attention = "relpos", mode = "alibi"},
  {attention = "relpos", mode = "t5", num_buckets = 8, max_distance = 12},
  {attention = "relpos", mode = "t5", num_buckets = 6, max_distance = 12, bidirectional = false},
  {attention = "relpos", mode = "shaw", max_relative_position = 4},
  {attention = "local", window_left = 5, window_right = 2},
  {attention = "local", window_left = 6, window_right = 0, causal = true},
  {attention = "local", mode = "block", block_size = 4, global_tokens = 2},
  {attention = "relpos", mode = "t5", num_buckets = 8, max_distance = 12, lq = 9},
  {attention = "local", window_left = 3, window_right = 3, lq = 7},
  -- grouped heads (MQA here: 2 query heads on 1 k/v head), read in place by both kernels
  {attention = "standard", kv = 1},
  {attention = "relpos", mode = "alibi", kv = 1},
  {attention = "local", window_left = 5, window_right = 2, kv = 1},
}
local failed = 0
local function maxdiff(a, b) return (a:to("cpu"):to("float32") - b):abs():max():item() end

for _, spec in ipairs(specs) do
  for _, dt in ipairs({"float32", "bfloat16"}) do
    local s = {heads = 2, head_dim = 8}
    for k, v in pairs(spec) do if k ~= "causal" and k ~= "lq" and k ~= "kv" then s[k] = v end end
    local opts = {causal = spec.causal or spec.attention ~= "local"}
    local a = ember.Attention(s)
    ember.no_grad(function() for _, t in ipairs(a:parameters()) do t:copy_(ember.randn(t.shape) * 0.5) end end)
    local g = ember.Attention(s):to("cuda")
    g:load_state_dict(a:state_dict())
    if dt == "bfloat16" then g = g:to("bfloat16") end
    local lq, lk = spec.lq or 20, 20
    local hkv = spec.kv or 2
    local q, k, v = ember.randn(2, 2, lq, 8), ember.randn(2, hkv, lk, 8), ember.randn(2, hkv, lk, 8)
    if dt == "bfloat16" then -- both sides start from the same rounded inputs
      q, k, v = q:to("bfloat16"):to("float32"), k:to("bfloat16"):to("float32"), v:to("bfloat16"):to("float32")
    end
    local qg, kg, vg = q:to("cuda"):to(dt):requires_grad_(), k:to("cuda"):to(dt):requires_grad_(),
                       v:to("cuda"):to(dt):requires_grad_()
    local before = ember.attention_routes()
    local og = g:forward(qg, kg, vg, opts)
    og:to("float32"):sum():backward()
    local after = ember.attention_routes()
    local qc, kc, vc = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
    local oc = a:forward(qc, kc, vc, opts)
    oc:sum():backward()
    local d = math.max(maxdiff(og:detach(), oc:detach()), maxdiff(qg.grad, qc.grad), maxdiff(kg.grad, kc.grad),
                       maxdiff(vg.grad, vc.grad))
    for i, t in ipairs(a:parameters()) do d = math.max(d, maxdiff(g:parameters()[i].grad, t.grad)) end
    local tol = dt == "float32" and 1e-4 or 5e-2
    local fused = after.fused - before.fused
    local composed = after.composed - before.composed
    local ok = d < tol and fused == 1 and composed == 0
    if not ok then failed = failed + 1 end
    print(string.format("%s %s %s %s Lq=%d Lk=%d kv_heads=%d %s: max diff vs cpu %.2e (tol %g), fused +%d, composed +%d",
                        ok and "ok" or "not ok", dt, spec.attention, spec.mode or "", lq, lk, hkv,
                        opts.causal and "causal" or "", d, tol, fused, composed))
  end
end
print(failed == 0 and "all fused and equal to the CPU" or (failed .. " failed"))
os.exit(failed == 0 and 0 or 1)
