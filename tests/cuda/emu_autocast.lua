-- Mixed precision on the emulated CUDA device (backends/cuda/emu, which runs
-- the CUDA backend's own kernels and a cuBLAS stand-in on the host): the
-- same ember.autocast scope as on the CPU sends products to the bfloat16
-- gemm and keeps softmax, layer_norm, losses and reductions in float32;
-- parameters and their gradients stay float32, and a training step tracks
-- the float32 step on the CPU within bfloat16's precision.
--   ember tests/cuda/emu_autocast.lua   (EMBER_PLUGIN_PATH: the emu folder first)
local ember = require "ember"
local nn = require "ember.nn"
if ember.device_count("cuda") == 0 then
  print("SKIP: no CUDA device (real or emulated)")
  os.exit(77)
end
local failed, n = 0, 0
local function check(ok, what, detail)
  n = n + 1
  if not ok then failed = failed + 1 end
  print(("%s %d - %s%s"):format(ok and "ok" or "not ok", n, what, detail and (": " .. detail) or ""))
end
local function rel(a, b) -- max |a - b| / max |b|, both on the CPU in float64
  a, b = a:to("cpu"):double(), b:to("cpu"):double()
  return (a - b):abs():max():item() / math.max(b:abs():max():item(), 1e-30)
end

-- bfloat16 keeps 8 significant bits: one rounding is a relative error of at
-- most 2^-9; a K-term product with float32 accumulation of rounded inputs
-- stays within a few 2^-8 of the float32 result for K in the tens. 2e-2
-- leaves room for the two layers and the loss on top.
local TOL = 2e-2

ember.manual_seed(0)
local cpu = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 5))
local gpu = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 5)):to("cuda")
gpu:load_state_dict(cpu:state_dict())
local x, y = ember.randn(8, 16), ember.tensor({1, 2, 3, 4, 5, 1, 2, 3}, {dtype = "int64"})

local h, logits, loss
ember.autocast("bfloat16", function()
  h = gpu[1](x:to("cuda"))
  logits = gpu(x:to("cuda"))
  loss = nn.CrossEntropyLoss()(logits, y:to("cuda"))
end)
check(h.dtype == "bfloat16" and h.device:find("cuda") ~= nil, "Linear under autocast runs in bfloat16 on cuda", h.dtype .. " " .. h.device)
check(loss.dtype == "float32", "the loss is float32 under autocast", loss.dtype)
loss:backward()
local want = nn.CrossEntropyLoss()(cpu(x), y)
want:backward()
check(rel(loss, want) < TOL, "loss tracks the float32 CPU loss", ("rel diff %.2e"):format(rel(loss, want)))
local names, worst = gpu:parameter_names(), 0
for i, p in ipairs(gpu:parameters()) do
  if p.dtype ~= "float32" or p.grad.dtype ~= "float32" then
    check(false, "parameters and gradients stay float32", names[i] .. " " .. p.dtype .. "/" .. p.grad.dtype)
  end
  worst = math.max(worst, rel(p.grad, cpu:parameters()[i].grad))
end
check(worst < 5 * TOL, "every gradient tracks the float32 CPU gradient", ("worst rel diff %.2e"):format(worst))

-- batched products and attention on the device, under the same scope
local a, b = ember.randn(3, 8, 16), ember.randn(3, 16, 4)
local c
ember.autocast("bfloat16", function() c = ember.bmm(a:to("cuda"), b:to("cuda")) end)
check(c.dtype == "bfloat16" and rel(c, ember.bmm(a, b)) < TOL, "bmm under autocast: bfloat16 on cuda", ("rel diff %.2e"):format(rel(c, ember.bmm(a, b))))
local mha_c = nn.MultiHeadAttention{d_model = 16, heads = 2, dropout = 0}
local mha_g = nn.MultiHeadAttention{d_model = 16, heads = 2, dropout = 0}:to("cuda")
mha_g:load_state_dict(mha_c:state_dict())
local s = ember.randn(2, 6, 16)
local og
ember.autocast("bfloat16", function() og = mha_g(s:to("cuda")) end)
check(rel(og, mha_c(s)) < TOL, "MultiHeadAttention under autocast on cuda tracks float32 on the CPU",
      ("rel diff %.2e, output %s"):format(rel(og, mha_c(s)), og.dtype))
-- declared variants under autocast: the CUDA fused kernel's bfloat16 path, not the composition
for _, spec in ipairs{{attention = "relpos", mode = "t5"}, {attention = "relpos", mode = "alibi"},
                      {attention = "local", window_left = 3, window_right = 2}} do
  spec.heads, spec.head_dim = 2, 8
  local ac, ag = ember.Attention(spec), ember.Attention(spec):to("cuda")
  ag:load_state_dict(ac:state_dict())
  local q, k, v = ember.randn(2, 2, 12, 8), ember.randn(2, 2, 12, 8), ember.randn(2, 2, 12, 8)
  local before, o = ember.attention_routes()
  ember.autocast("bfloat16", function() o = ag:forward(q:to("cuda"), k:to("cuda"), v:to("cuda")) end)
  local after = ember.attention_routes()
  local d = rel(o, ac:forward(q, k, v))
  check(o.dtype == "bfloat16" and after.fused == before.fused + 1 and after.composed == before.composed and d < TOL,
        ("%s %s under autocast on cuda: fused, bfloat16"):format(spec.attention, spec.mode or "window"),
        ("%s, fused +%d, composed +%d, rel diff %.2e"):format(o.dtype, after.fused - before.fused,
                                                            after.composed - before.composed, d))
end
-- nn.Conv2d: the CUDA backend has no convolution kernel, so it is composed
-- (im2col views + the bfloat16 gemm); the CPU runs oneDNN's kernel
do
  ember.manual_seed(7)
  local cc = nn.Conv2d(3, 8, 3, { padding = 1, stride = 2 })
  local cg = nn.Conv2d(3, 8, 3, { padding = 1, stride = 2 }):to("cuda")
  cg:load_state_dict(cc:state_dict())
  local x = ember.randn(2, 3, 9, 9)
  local before, y = ember.conv_routes()
  ember.autocast("bfloat16", function() y = cg(x:to("cuda")) end)
  local mid = ember.conv_routes()
  local want = cc(x)
  local after = ember.conv_routes()
  local d = rel(y, want)
  check(y.dtype == "bfloat16" and mid.composed == before.composed + 1 and mid.kernel == before.kernel
        and after.kernel == mid.kernel + 1 and d < TOL,
        "Conv2d under autocast on cuda: composed, bfloat16, tracks the CPU's oneDNN kernel",
        ("%s, composed +%d, kernel +%d, then the CPU kernel +%d, rel diff %.2e"):format(y.dtype,
          mid.composed - before.composed, mid.kernel - before.kernel, after.kernel - mid.kernel, d))
end
print(("%d passed, %d failed"):format(n - failed, failed))
os.exit(failed == 0 and 0 or 1)
