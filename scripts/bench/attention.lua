-- attention.lua -- forward+backward time and peak memory of one
-- MultiHeadAttention layer per variant, against PyTorch's
-- nn.MultiheadAttention in the same run.
--
--   ember scripts/bench/attention.lua [--quick] [--no-torch]
--
-- d_model 256, 8 heads, float32, L = 256, 1024, 4096 with B*L = 4096 held
-- constant (B = 16, 4, 1), causal and non-causal. Each configuration runs
-- in a child process (this script with --one ...), so memory numbers do not
-- leak into each other:
--   time   seconds per forward+backward (the best of `reps` after a warm-up:
--          the least disturbed run on a shared machine);
--   peak   growth of the peak resident size during those runs (VmHWM after
--          resetting it with /proc/self/clear_refs, minus VmRSS before), MiB;
--   saved  ember.live_bytes() held by the graph after the forward (what is
--          saved for backward), MiB -- an L x L tensor shows up here.
-- With B*L constant, a variant whose memory is linear in L keeps the same
-- memory as L grows; a quadratic one grows 4x from 1024 to 4096. The ratio
-- is printed for every variant and PyTorch.
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"

local D_MODEL, HEADS, BL = 256, 8, 4096

local function rss_kib(field)
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  for line in f:lines() do
    local v = line:match("^" .. field .. ":%s+(%d+)")
    if v then f:close() return tonumber(v) end
  end
  f:close()
  return 0
end

-- ---------------------------------------------------------------- child
if arg[1] == "--one" then
  local variant, L, B, causal, reps = arg[2], tonumber(arg[3]), tonumber(arg[4]), arg[5] == "1", tonumber(arg[6])
  local spec = {d_model = D_MODEL, heads = HEADS, attention = variant}
  for kv in (arg[7] or ""):gmatch("[^,]+") do
    local k, v = kv:match("^([%w_]+)=(.*)$")
    spec[k] = tonumber(v) or (v == "true" and true) or (v == "false" and false) or v
  end
  ember.manual_seed(0)
  local m = ember.MultiHeadAttention(spec)
  local x = ember.randn(B, L, D_MODEL):requires_grad_()
  local function step()
    local out = m:forward(x, nil, {causal = causal})
    local before = ember.live_bytes()
    local loss = out:sum()
    loss:backward()
    return before
  end
  step()
  m:zero_grad()
  local f = io.open("/proc/self/clear_refs", "w")
  if f then f:write("5") f:close() end
  local base = rss_kib("VmRSS")
  local live0 = ember.live_bytes()
  local saved, dt = 0, math.huge
  for _ = 1, reps do
    local start = ember.clock() -- monotonic wall clock
    local after_fwd = step()
    dt = math.min(dt, ember.clock() - start)
    saved = math.max(saved, after_fwd - live0)
    m:zero_grad()
  end
  print(string.format("%.6f %.1f %.1f", dt, (rss_kib("VmHWM") - base) / 1024, saved / 2^20))
  os.exit(0)
end

-- ---------------------------------------------------------------- parent
local quick, with_torch = false, true
for _, a in ipairs(arg) do
  if a == "--quick" then quick = true end
  if a == "--no-torch" then with_torch = false end
end
local exe = arg[-1] or "ember"
local script = arg[0]

local variants = {
  {"standard", ""},
  {"local", "window_left=64,window_right=64"},
  {"linear", ""},
  {"relpos", "mode=alibi"},
}
local lengths = quick and {256, 1024} or {256, 1024, 4096}

local function run(cmd)
  local p = io.popen(cmd)
  local line = p:read("*l")
  p:close()
  local t, peak, saved = (line or ""):match("^(%S+) (%S+) ?(%S*)")
  return tonumber(t), tonumber(peak), tonumber(saved)
end

local rows = {}
print(string.format("# one MultiHeadAttention layer, d_model %d, %d heads, float32, B*L = %d, %d threads",
                    D_MODEL, HEADS, BL, ember.get_num_threads()))
print(string.format("%-22s %6s %4s %7s %10s %10s %10s", "variant", "L", "B", "causal", "time (s)", "peak MiB", "saved MiB"))
for _, causal in ipairs({false, true}) do
  for _, L in ipairs(lengths) do
    local B = BL // L
    local reps = L >= 4096 and 1 or 3
    for _, v in ipairs(variants) do
      if not v.max_L or L <= v.max_L then
        local label = v[1] .. (v[2] ~= "" and ("(" .. v[2]:gsub("window_left=64,window_right=64", "w=64+64") .. ")") or "")
        local cmd = string.format("%q %q --one %s %d %d %d %d %q", exe, script, v[1], L, B, causal and 1 or 0, reps, v[2])
        local t, peak, saved = run(cmd)
        rows[#rows + 1] = {variant = v[1], L = L, causal = causal, t = t, peak = peak, saved = saved}
        print(string.format("%-22s %6d %4d %7s %10s %10s %10s", label, L, B, tostring(causal),
                            t and string.format("%.3f", t) or "failed", peak and string.format("%.1f", peak) or "-",
                            saved and string.format("%.1f", saved) or "-"))
      end
    end
    if with_torch then
      local cmd = string.format("/usr/bin/python3 scripts/bench/attention_torch.py %d %d %d %d %d %d %d 2>/dev/null",
                                L, B, causal and 1 or 0, D_MODEL, HEADS, reps, ember.get_num_threads())
      local t, peak = run(cmd)
      rows[#rows + 1] = {variant = "pytorch", L = L, causal = causal, t = t, peak = peak}
      print(string.format("%-22s %6d %4d %7s %10s %10s %10s", "pytorch nn.MHA", L, B, tostring(causal),
                          t and string.format("%.3f", t) or "n/a", peak and string.format("%.1f", peak) or "-", "-"))
    end
  end
end

local function find(variant, L, causal)
  for _, r in ipairs(rows) do
    if r.variant == variant and r.L == L and r.causal == causal then return r end
  end
end
if not quick then
  print("# memory ratio L=1024 -> L=4096 at constant B*L (1.0 = linear in L, 4.0 = quadratic)")
  for _, v in ipairs({"local", "linear", "relpos", "standard", "pytorch"}) do
    for _, causal in ipairs({false, true}) do
      local a, b = find(v, 1024, causal), find(v, 4096, causal)
      if a and b and a.peak and b.peak and a.peak > 0 then
        print(string.format("%-10s causal=%-5s peak %.2f  saved %.2f", v, tostring(causal), b.peak / a.peak,
                            (a.saved and a.saved > 0) and b.saved / a.saved or 0))
      end
    end
  end
end
