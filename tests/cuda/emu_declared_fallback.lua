-- On the emulated CUDA device (backends/cuda/emu), whose fused kernel
-- takes standard attention but declines declared terms: standard runs
-- fused, every declared variant falls back to the core's composition, and
-- both agree with the CPU, gradients (tables included) too.
--   ember tests/cuda/emu_declared_fallback.lua   (EMBER_PLUGIN_PATH: the emu folder first)
local specs = {
  {attention = "standard", fused = true},
  {attention = "relpos", mode = "t5"}, {attention = "relpos", mode = "shaw"}, {attention = "relpos", mode = "alibi"},
  {attention = "local", window_left = 5, window_right = 2},
  {attention = "local", mode = "block", block_size = 4, global_tokens = 2},
}
local failed = 0
for _, spec in ipairs(specs) do
  local s = {heads = 2, head_dim = 8}
  for k, v in pairs(spec) do if k ~= "fused" then s[k] = v end end
  local a = ember.Attention(s)
  ember.no_grad(function() for _, t in ipairs(a:parameters()) do t:copy_(ember.randn(t.shape) * 0.5) end end)
  local g = ember.Attention(s):to("cuda")
  g:load_state_dict(a:state_dict())
  local q, k, v = ember.randn(2, 2, 20, 8), ember.randn(2, 2, 20, 8), ember.randn(2, 2, 20, 8)
  local before = ember.attention_routes()
  local qg = q:to("cuda"):requires_grad_()
  g:forward(qg, k:to("cuda"), v:to("cuda"), {causal = true}):sum():backward()
  local after = ember.attention_routes()
  local qc = q:clone():requires_grad_()
  local oc = a:forward(qc, k, v, {causal = true})
  oc:sum():backward()
  local og = g:forward(q:to("cuda"), k:to("cuda"), v:to("cuda"), {causal = true})
  local d = math.max((og:to("cpu") - oc):abs():max():item(), (qg.grad:to("cpu") - qc.grad):abs():max():item())
  for i, t in ipairs(a:parameters()) do
    d = math.max(d, (g:parameters()[i].grad:to("cpu") - t.grad):abs():max():item())
  end
  local route_ok = spec.fused and (after.fused == before.fused + 1) or (after.composed == before.composed + 1 and after.fused == before.fused)
  local ok = d < 1e-4 and route_ok
  if not ok then failed = failed + 1 end
  print(string.format("%s %s - %s: max diff vs cpu %.2e, fused +%d, composed +%d", ok and "ok" or "not ok",
                      spec.attention, spec.mode or "", d, after.fused - before.fused, after.composed - before.composed))
end
os.exit(failed == 0 and 0 or 1)
