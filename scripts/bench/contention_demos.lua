-- contention_demos.lua -- the demos' training steps on an idle machine and
-- beside one competing CPU-bound process (which this script starts and
-- stops itself), ember against its PyTorch peer (scripts/bench/torch_*.py)
-- in the same run. ember runs as a user runs it (--precision given, default
-- threads); the peer with the same threads, under bf16 autocast when the
-- precision is bf16 or auto (its faster here). The convolution demos are
-- the case this was written for: oneDNN's convolutions wait at barriers
-- for a descheduled worker, and backends/cpu/cpu_conv.c runs them on one
-- thread while ember's team sees the machine contended (cpu_team.c).
--   ember scripts/bench/contention_demos.lua [STEPS=100] [DEMOS=fashion_vit,sort_of_clevr] [PRECISION=auto]
-- Training seconds of STEPS steps, one run each (these machines are noisy:
-- read the ratios, and run it twice). EMBER_CPU_TEAM=always in the
-- environment turns the adaptive team off, for the comparison.
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"
local steps = tonumber(arg[1]) or 100
local demos = arg[2] or "fashion_vit,sort_of_clevr"
local precision = arg[3] or "auto"
local exe, script = arg[-1] or "ember", arg[0]
local root = script:gsub("scripts/bench/contention_demos%.lua$", "")
if root == script or root == "" then root = "." end

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  p:close()
  return tonumber(out:match("train_s=([%d%.]+)")) or error(cmd .. "\n" .. out)
end

local function ember_s(demo)
  return run(("cd %q && EMBER_PROGRESS_PLAIN=1 %q scripts/%s.lua --max_steps %d --precision %s --out %q"):format(
    root, exe, demo, steps, precision, os.tmpname() .. "_dir"))
end

local function torch_s(demo)
  local bf16 = precision ~= "fp32" and precision ~= "float32" and " --bf16" or ""
  return run(("cd %q/scripts/bench && /usr/bin/python3 torch_%s.py --threads %d --max-steps %d%s"):format(
    root, demo, ember.get_num_threads(), steps, bf16))
end

-- One CPU-bound competitor (_competitor.lua, beside this script).
local start_competitor = dofile((script:gsub("[^/]*$", "")) .. "_competitor.lua")

print(require("ember.cli").machine())
print(("%d training steps, %d threads, ember --precision %s, PyTorch %s; training seconds"):format(steps,
  ember.get_num_threads(), precision, precision == "fp32" and "fp32" or "bf16 autocast"))
print(("%-15s %8s %8s %7s | %8s %8s %7s | %s"):format("demo", "ember", "busy", "ratio", "torch", "busy", "ratio",
  "torch/ember busy"))
for demo in demos:gmatch("[^,]+") do
  local e_idle, t_idle = ember_s(demo), torch_s(demo)
  local pid = start_competitor()
  local ok, e_busy = pcall(ember_s, demo)
  local ok2, t_busy = pcall(torch_s, demo)
  os.execute("kill " .. pid)
  if not ok then error(e_busy) end
  if not ok2 then error(t_busy) end
  print(("%-15s %8.2f %8.2f %6.2fx | %8.2f %8.2f %6.2fx | %.2fx"):format(demo, e_idle, e_busy, e_busy / e_idle,
    t_idle, t_busy, t_busy / t_idle, t_busy / e_busy))
end
