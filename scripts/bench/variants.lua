-- scripts/bench/variants.lua -- attention variants written in Lua against
-- the built-in ones, fwd+bwd on the fused CPU kernel (ms, median of reps):
--   build/bin/ember scripts/bench/variants.lua [--reps 5] [--dtype float32|bfloat16] [--L 256,1024,4096]
-- d_model 256, 8 heads (head_dim 32), B*L = 4096. Ratios are against the
-- built-in twin (ALiBi, window) or against standard attention. "first call"
-- is construction (tracing) plus the first forward.
local ember = require "ember"

for i = 1, #arg do
  if arg[i] == "--help" or arg[i] == "-h" then
    print([[Usage: ember scripts/bench/variants.lua [--reps N] [--dtype float32|bfloat16] [--L 256,1024,4096]

Attention variants written in Lua against the built-in ones and standard
attention: fwd+bwd ms on the fused CPU kernel, d256 h8, B*L = 4096.

Options:
   --reps N        timed repetitions per case (median; default 5)
   --dtype DTYPE   float32 or bfloat16 (under ember.autocast)
   --L LIST        sequence lengths, comma-separated (default 256,1024,4096)
   -h, --help      this text]])
    os.exit(0)
  end
end

local reps, dtype, Ls = 5, "float32", { 256, 1024, 4096 }
for i = 1, #arg do
  if arg[i] == "--reps" then reps = tonumber(arg[i + 1]) end
  if arg[i] == "--dtype" then dtype = arg[i + 1] end
  if arg[i] == "--L" then
    Ls = {}
    for x in arg[i + 1]:gmatch("%d+") do Ls[#Ls + 1] = tonumber(x) end
  end
end

local H, dh = 8, 32

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

local function time_case(spec, L, opts)
  local B = 4096 // L
  spec.heads, spec.head_dim, spec.dtype = H, dh, "float32"
  local t0 = ember.clock()
  local att = ember.Attention(spec)
  local mk = function() return ember.randn(B, H, L, dh):requires_grad_() end
  local q, k, v = mk(), mk(), mk()
  local function step()
    local out
    if dtype == "bfloat16" then
      out = ember.autocast("bfloat16", function() return att(q, k, v, opts) end)
    else
      out = att(q, k, v, opts)
    end
    out:float():sum():backward()
  end
  local clock = ember.clock
  local first0 = clock()
  step()
  local first = clock() - first0 + (first0 - t0)
  local ts = {}
  for _ = 1, reps do
    local a = clock()
    step()
    ts[#ts + 1] = (clock() - a) * 1000
  end
  return median(ts), first * 1000
end

local function doc_ids(B, L, n)
  local rows = {}
  for b = 1, B do
    rows[b] = {}
    for i = 1, L do rows[b][i] = (i - 1) * n // L + 1 end
  end
  return ember.tensor(rows, { dtype = "int64" })
end

print(require("ember.cli").machine())
print(("fwd+bwd ms, %s, d256 h8, B*L = 4096, median of %d; %d threads"):format(dtype, reps,
  ember.get_num_threads and ember.get_num_threads() or 0))
print("| L | case | ms | vs | ratio | first call ms |")
print("|---|---|---|---|---|---|")
for _, L in ipairs(Ls) do
  local B = 4096 // L
  local std = time_case({ attention = "standard" }, L, {})
  local stdc = time_case({ attention = "standard" }, L, { causal = true })
  local function row(name, ms, ref_name, ref, first)
    print(("| %d | %s | %.1f | %s | %.2f | %.0f |"):format(L, name, ms, ref_name, ms / ref, first or 0))
  end
  row("standard", std, "standard", std)
  local a, af = time_case({ attention = "relpos", mode = "alibi" }, L, {})
  local al, alf = time_case({ attention = "alibi_lua" }, L, {})
  row("relpos alibi (built-in)", a, "standard", std, af)
  row("alibi_lua", al, "built-in alibi", a, alf)
  local t5, t5f = time_case({ attention = "relpos", mode = "t5" }, L, {})
  local t5l, t5lf = time_case({ attention = "t5_lua" }, L, {})
  row("relpos t5 (built-in)", t5, "standard", std, t5f)
  row("t5_lua", t5l, "built-in t5", t5, t5lf)
  local w, wf = time_case({ attention = "local", window_left = 64, window_right = 64 }, L, {})
  local wl, wlf = time_case({ attention = "window_lua", window_left = 64, window_right = 64 }, L, {})
  row("local window 64/64 (built-in)", w, "standard", std, wf)
  row("window_lua 64/64", wl, "built-in window", w, wlf)
  local sc, scf = time_case({ attention = "softcap", cap = 30 }, L, {})
  row("softcap", sc, "standard", std, scf)
  local ss, ssf = time_case({ attention = "sliding_sinks", window_left = 128, window_right = 0, sinks = 4 }, L,
    { causal = true })
  row("sliding_sinks 128 + 4, causal", ss, "standard causal", stdc, ssf)
  local d, df = time_case({ attention = "document" }, L, { variant_inputs = { doc = doc_ids(B, L, 8) } })
  row("document, 8 equal docs", d, "standard", std, df)
end
