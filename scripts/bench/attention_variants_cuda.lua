-- attention_variants_cuda.lua -- the declared attention variants, and two
-- written in Lua (plugins/flex: their traced programs run inside the fused
-- kernel), on the CUDA device, through ember.Attention (the fused kernel),
-- as ratios of their time to standard attention's at the same size in the
-- same run.
--
--   ember scripts/bench/attention_variants_cuda.lua [--lengths 1024,4096] [--heads 16]
--         [--head-dim 64] [--reps 5] [--device cuda] [--help]
--
-- B = 1, non-causal, float32 (em_attention takes float32 and float64; the
-- bfloat16 kernels are timed by backends/cuda/gpu_bench.c). Variants:
-- standard, local (sliding window 256 + 256, and block-sparse: blocks of
-- 64, one neighbour, 64 global tokens), relpos alibi, t5 (32 buckets,
-- distance 128) and shaw (clip 16, key and value terms); in Lua: softcap
-- (cap 50) and a document mask of 8 equal documents (tiles across
-- documents skipped by the block map). Each line gives
-- milliseconds per forward and per forward+backward (best of reps after a
-- warm-up, the device synchronised around each), the ratios to standard, and
-- the route the calls took (fused/composed counts from
-- ember.attention_routes(): a variant that fell back to the composition is
-- marked COMPOSED, and the script exits 1).
-- On the emulated CUDA backend (backends/cuda/emu) it runs with tiny
-- sizes (--lengths 64 --heads 2 --head-dim 16 --reps 1) to check that it works.
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"

local opt = {lengths = "1024,4096", heads = 16, ["head-dim"] = 64, reps = 5, device = "cuda"}
local i = 1
while i <= #arg do
  local k = arg[i]:match("^%-%-(.+)$")
  if not k or opt[k] == nil or arg[i + 1] == nil then
    io.stderr:write("attention_variants_cuda.lua: unknown or incomplete argument '", arg[i], "' (see --help)\n")
    os.exit(2)
  end
  opt[k] = type(opt[k]) == "number" and assert(tonumber(arg[i + 1]), k .. " must be a number") or arg[i + 1]
  i = i + 2
end
local dev, H, D, reps = opt.device, opt.heads, opt["head-dim"], opt.reps
if ember.device_count("cuda") == 0 and dev == "cuda" then
  print("SKIP: no CUDA device (ember.device_count('cuda') == 0)")
  os.exit(77)
end

local variants = {
  {label = "standard", spec = {attention = "standard"}},
  {label = "local window 256+256", spec = {attention = "local", window_left = 256, window_right = 256}},
  {label = "local blocks 64 +global", spec = {attention = "local", mode = "block", block_size = 64, local_blocks = 1,
                                           global_tokens = 64}},
  {label = "relpos alibi", spec = {attention = "relpos", mode = "alibi"}},
  {label = "relpos t5", spec = {attention = "relpos", mode = "t5", num_buckets = 32, max_distance = 128}},
  {label = "relpos shaw", spec = {attention = "relpos", mode = "shaw", max_relative_position = 16}},
  {label = "lua softcap 50", spec = {attention = "softcap", cap = 50}},
  {label = "lua document 8 docs", spec = {attention = "document"},
   -- ids [1, L]: 8 equal documents
   inputs = function(L)
     local ids = {}
     for p = 1, L do ids[p] = (p - 1) * 8 // L + 1 end
     return {doc = ember.tensor({ids}, {dtype = "int64"}):to(dev)}
   end},
}

-- best seconds of reps calls of f, after one warm-up call
local function best(f)
  f()
  ember.synchronize(dev)
  local t = math.huge
  for _ = 1, reps do
    local s = ember.clock()
    f()
    ember.synchronize(dev)
    t = math.min(t, ember.clock() - s)
  end
  return t
end

local failed = false
print(string.format("attention variants on %s, B=1 H=%d d=%d float32, non-causal (ms; ratio to standard)", dev, H, D))
print(string.format("%-24s %6s %10s %10s %8s %8s  %s", "variant", "L", "fwd", "fwd+bwd", "fwd/std", "f+b/std", "route"))
for L in opt.lengths:gmatch("%d+") do
  L = tonumber(L)
  local q = ember.randn(1, H, L, D):to(dev):requires_grad_()
  local k = ember.randn(1, H, L, D):to(dev):requires_grad_()
  local v = ember.randn(1, H, L, D):to(dev):requires_grad_()
  local g = ember.randn(1, H, L, D):to(dev)
  local std_f, std_b
  for _, var in ipairs(variants) do
    local spec = {heads = H, head_dim = D}
    for key, val in pairs(var.spec) do spec[key] = val end
    local m = ember.Attention(spec):to(dev)
    local o = var.inputs and {variant_inputs = var.inputs(L)} or nil
    local r0 = ember.attention_routes()
    local tf = best(function() ember.no_grad(function() return m:forward(q, k, v, o) end) end)
    local tb = best(function()
      q.grad, k.grad, v.grad = nil, nil, nil
      m:forward(q, k, v, o):backward(g)
    end)
    local r1 = ember.attention_routes()
    local composed = r1.composed - r0.composed
    local route = composed == 0 and string.format("fused x%d", r1.fused - r0.fused)
                  or string.format("COMPOSED x%d", composed)
    if composed > 0 then failed = true end
    std_f, std_b = std_f or tf, std_b or tb
    print(string.format("%-24s %6d %10.3f %10.3f %8.2f %8.2f  %s", var.label, L, 1e3 * tf, 1e3 * tb,
                        tf / std_f, tb / std_b, route))
  end
end
os.exit(failed and 1 or 0)
