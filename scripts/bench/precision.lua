-- precision.lua -- bfloat16 (ember.autocast) against float32, and both
-- against PyTorch fp32 and torch.autocast("cpu", bfloat16), in one run:
--   attention  one MultiHeadAttention layer fwd+bwd, d_model 256, 8 heads,
--              B*L = 4096 (L = 256, 1024, 4096), and causal at L = 4096
--              (both sides: ember's causal flag, torch's triangular mask);
--   classifier a training step of the seed AttentionClassifier (embedding
--              10000x128, one encoder layer with 4 heads and FFN 256, mean
--              pool, 5 classes; AdamW, gradient clipping 0.5) at B64 L64 and
--              B32 L256.
-- Each case runs in a child process (this script with --one ...); times
-- are the best of REPS after a warm-up, in ms. The machine is shared, so
-- read the ratios, which come from the same run; --cpu-time times process
-- CPU seconds instead (both sides), what stays comparable for a 1-thread
-- run (OMP_NUM_THREADS=1) on a machine other jobs share. --profile
-- instead times each ember case in float32 with and without ember.profile
-- (steps alternating, best of REPS each: the profiler's overhead) and
-- prints the profile of one step: where its time goes.
--   ember scripts/bench/precision.lua [REPS=5] [--no-torch] [--quick] [--cpu-time] [--profile]
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"

local function attention_step(L, B, bf16, causal)
  ember.manual_seed(0)
  local m = ember.MultiHeadAttention { d_model = 256, heads = 8, causal = causal }
  local x = ember.randn(B, L, 256):requires_grad_()
  return function()
    local out = bf16 and ember.autocast("bfloat16", function() return m:forward(x) end) or m:forward(x)
    out:to("float32"):sum():backward()
    m:zero_grad()
  end
end

local function classifier_step(B, L, bf16)
  ember.manual_seed(0)
  local emb = nn.Embedding(10000, 128)
  local enc = nn.TransformerEncoderLayer(128, 4, { dim_feedforward = 256, dropout = 0.1 })
  local head = nn.Linear(128, 5)
  local model = nn.Sequential(emb, enc)
  local params = model:parameters()
  for _, p in ipairs(head:parameters()) do params[#params + 1] = p end
  local opt = optim.AdamW(params, { lr = 1e-3 })
  local x = (ember.rand(B, L) * 9999):long() + 1
  local y = (ember.rand(B) * 4.999):long() + 1
  local function loss_of()
    local h = model(x):mean(2)
    return ember.cross_entropy(head(h), y)
  end
  return function()
    local loss = bf16 and ember.autocast("bfloat16", loss_of) or loss_of()
    opt:zero_grad()
    loss:backward()
    optim.clip_grad_norm(params, 0.5)
    opt:step()
  end
end

if arg[1] == "--one" then
  local kind, a, b, prec, reps = arg[2], tonumber(arg[3]), tonumber(arg[4]), arg[5], tonumber(arg[6])
  local now = arg[7] == "cpu" and os.clock or ember.clock -- os.clock: the process's CPU time
  local step = kind == "classifier" and classifier_step(a, b, prec == "bf16")
    or attention_step(a, b, prec == "bf16", kind == "causal")
  step()
  step()
  if arg[8] == "profile" then
    -- alternating, so that both see the same machine; "on" times the step
    -- while recording (starting and stopping, once per profile, are not
    -- in it); the profile of the last step is printed after the two times
    local off, on, prof = math.huge, math.huge, nil
    for _ = 1, reps do
      local t0 = now()
      step()
      off = math.min(off, now() - t0)
      prof = ember.profiler.start()
      t0 = now()
      step()
      on = math.min(on, now() - t0)
      prof:stop()
    end
    print(("%.3f %.3f"):format(off * 1e3, on * 1e3))
    print(prof:table { row_limit = 12 })
    os.exit(0)
  end
  local best = math.huge
  for _ = 1, reps do
    local t0 = now()
    step()
    best = math.min(best, now() - t0)
  end
  print(("%.3f"):format(best * 1e3))
  os.exit(0)
end

local reps, with_torch, quick, clock, profile = 5, true, false, "wall", false
for _, v in ipairs(arg) do
  if v == "--no-torch" then with_torch = false
  elseif v == "--profile" then profile = true
  elseif v == "--cpu-time" then clock = "cpu"
  elseif v == "--quick" then quick = true
  elseif tonumber(v) then reps = tonumber(v) end
end
local exe, script = arg[-1] or "ember", arg[0]
local threads = ember.get_num_threads()
local torch_py = script:gsub("precision%.lua$", "precision_torch.py")

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  p:close()
  return tonumber(out:match("^%s*([%d%.]+)%s*$")), out
end

local cases = {
  { "attention", 256, 16 }, { "attention", 1024, 4 }, { "attention", 4096, 1 }, { "causal", 4096, 1 },
  { "classifier", 64, 64 }, { "classifier", 32, 256 },
}
local function case_label(c)
  if c[1] == "classifier" then return ("classifier B%d L%d"):format(c[2], c[3]) end
  return ("attention L%d B%d%s"):format(c[2], c[3], c[1] == "causal" and " causal" or "")
end
if quick then cases = { { "attention", 256, 16 }, { "classifier", 64, 64 } } end

if profile then
  print(require("ember.cli").machine())
  print(("%d threads, float32, best of %d alternating steps, %s ms"):format(threads, reps, clock))
  for _, c in ipairs(cases) do
    local label = case_label(c)
    local p = io.popen(("%q %q --one %s %d %d fp32 %d %s profile 2>&1"):format(exe, script, c[1], c[2], c[3],
      reps, clock))
    local out = p:read("a")
    p:close()
    local off, on = out:match("^%s*([%d%.]+) ([%d%.]+)\n")
    if not off then error(label .. ": " .. out) end
    print(("\n%s: %.2f ms without the profiler, %.2f ms with it (%+.1f%%)"):format(label, off, on,
      100 * (on / off - 1)))
    print((out:gsub("^[^\n]*\n", "")))
  end
  os.exit(0)
end

print(require("ember.cli").machine())
local info = ember.cpu_info()
print(("%d threads, best of %d, %s ms; ember bf16 products: %s"):format(threads, reps,
  clock == "cpu" and "process CPU" or "wall", info.bfloat16))
print(("%-26s %9s %9s %9s %9s | %8s %8s"):format("case", "ember f32", "ember bf16", "torch f32",
  "torch bf16", "e32/ebf", "tbf/ebf"))
for _, c in ipairs(cases) do
  local label = case_label(c)
  local t = {}
  for _, prec in ipairs { "fp32", "bf16" } do
    local v, out = run(("%q %q --one %s %d %d %s %d %s"):format(exe, script, c[1], c[2], c[3], prec, reps, clock))
    if not v then error(label .. " " .. prec .. ": " .. out) end
    t["e" .. prec] = v
    if with_torch then
      t["t" .. prec] = run(("/usr/bin/python3 %q %s %d %d %s %d %d %s"):format(torch_py, c[1], c[2], c[3], prec, reps,
                                                                          threads, clock))
    end
  end
  local function f(v) return v and ("%9.1f"):format(v) or ("%9s"):format("-") end
  print(("%-26s %s %s %s %s | %7.2fx %7sx"):format(label, f(t.efp32), f(t.ebf16), f(t.tfp32), f(t.tbf16),
    t.efp32 / t.ebf16, t.tbf16 and ("%.2f"):format(t.tbf16 / t.ebf16) or "-"))
end
