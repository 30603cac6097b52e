-- contention.lua -- the seed classifier's training step (B64 L64, float32,
-- default thread count) and KV-cached decoding (kv_decode.lua, positions
-- 128 and 2048) on an idle machine and beside one competing CPU-bound
-- process, which this script starts and stops itself, for each way
-- libgomp's idle workers can wait, and with ember's adaptive team off
-- (EMBER_CPU_TEAM=always; backends/cpu/cpu_team.c). The goal (issue "CPU compute at the
-- hardware's limit"): busy <= 2.2x idle, idle no worse than before.
--   ember scripts/bench/contention.lua [REPS=10] [PATTERN]   (PATTERN: only the settings whose label matches, e.g. default)
-- Each setting runs in a child (precision.lua --one), since libgomp reads
-- its environment once at start. Best of REPS, ms. On a shared machine the
-- "idle" column is only as idle as the others make it: read the ratios.
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"
local reps = tonumber(arg[1]) or 10
local only = arg[2] -- a Lua pattern: run only the settings whose label matches
local exe, script = arg[-1] or "ember", arg[0]
local precision = script:gsub("contention%.lua$", "precision.lua")

local settings = {
  { "ember's default", "" },
  { "EMBER_CPU_TEAM=always (no adaptive team)", "EMBER_CPU_TEAM=always" },
  { "GOMP_SPINCOUNT=300000 (libgomp's)", "GOMP_SPINCOUNT=300000" },
  { "GOMP_SPINCOUNT=10000", "GOMP_SPINCOUNT=10000" },
  { "GOMP_SPINCOUNT=3000", "GOMP_SPINCOUNT=3000" },
  { "GOMP_SPINCOUNT=1000", "GOMP_SPINCOUNT=1000" },
  { "OMP_WAIT_POLICY=passive", "OMP_WAIT_POLICY=passive" },
  { "OMP_WAIT_POLICY=active", "OMP_WAIT_POLICY=active" },
}

local function step_ms(env)
  local p = io.popen(("env %s %q %q --one classifier 64 64 fp32 %d 2>&1"):format(env, exe, precision, reps))
  local out = p:read("a")
  p:close()
  return tonumber(out:match("^%s*([%d%.]+)%s*$")) or error(out)
end

-- KV-cached decoding (scripts/bench/kv_decode.lua, 4 layers d256) at
-- position 128 and 2048: ms per token, best of 3 rounds of 16 steps.
local kv_decode = script:gsub("contention%.lua$", "kv_decode.lua")
local function decode_ms(env)
  local p = io.popen(("env %s %q %q 16 3 128,2048 2>&1"):format(env, exe, kv_decode))
  local out = p:read("a")
  p:close()
  local a, b = out:match("\n128 ([%d%.]+)[^\n]*\n2048 ([%d%.]+)")
  return tonumber(a) or error(out), tonumber(b)
end

-- One CPU-bound competitor (_competitor.lua, beside this script).
local start_competitor = dofile((script:gsub("[^/]*$", "")) .. "_competitor.lua")

print(require("ember.cli").machine())
print(("seed classifier step B64 L64 float32, %d threads (default), best of %d, ms; "
  .. "KV-cached decoding float32 at positions 128 and 2048, ms per token"):format(ember.get_num_threads(), reps))
print(("%-42s %8s %8s %7s | %-13s %-13s %-15s"):format("", "step", "", "", "decode idle", "decode busy",
  "ratio busy/idle"))
print(("%-42s %8s %8s %7s | %6s %6s %6s %6s %7s %7s"):format("wait setting", "idle", "busy", "ratio", "128", "2048",
  "128", "2048", "128", "2048"))
for _, s in ipairs(settings) do
  if only and not s[1]:find(only) then goto next end
  local idle = step_ms(s[2])
  local d1, d2 = decode_ms(s[2])
  local pid = start_competitor()
  local ok, busy = pcall(step_ms, s[2])
  local ok2, b1, b2 = pcall(decode_ms, s[2])
  os.execute("kill " .. pid)
  if not ok then error(busy) end
  if not ok2 then error(b1) end
  print(("%-42s %8.1f %8.1f %6.2fx | %6.3f %6.3f %6.3f %6.3f %6.2fx %6.2fx"):format(s[1], idle, busy, busy / idle,
    d1, d2, b1, b2, b1 / d1, b2 / d2))
  ::next::
end
