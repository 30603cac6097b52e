-- Dispatch overhead: the cost of one small op called from a Lua loop.
--
--   ember scripts/bench/dispatch.lua [iterations=1000000] [repeats=5]
--
-- Times `for i = 1, N do c = a + b end` with two 16-element float32
-- tensors (the result kept until the next iteration), and the same loop in
-- PyTorch when /usr/bin/python3 has torch, in the same run. Each side
-- reports its best of `repeats` timings, in microseconds per iteration.
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"

local N = math.tointeger(tonumber(arg and arg[1]) or 1000000)
local REPEATS = math.tointeger(tonumber(arg and arg[2]) or 5)
local TARGET_US = 0.5

local function ember_us()
  local a, b = ember.rand(16), ember.rand(16)
  local c
  for _ = 1, N // 10 do c = a + b end -- warm up (allocator, GC pacing)
  local best = math.huge
  for _ = 1, REPEATS do
    local t0 = ember.clock()
    for _ = 1, N do c = a + b end
    best = math.min(best, (ember.clock() - t0) / N * 1e6)
  end
  assert(c:numel() == 16)
  return best
end

local PYTHON = "/usr/bin/python3"

local TORCH_SNIPPET = [[
import sys, time
import torch
n, repeats, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
a, b = torch.rand(16), torch.rand(16)
for _ in range(n // 10):
    c = a + b
best = float("inf")
for _ in range(repeats):
    t0 = time.perf_counter()
    for _ in range(n):
        c = a + b
    best = min(best, (time.perf_counter() - t0) / n * 1e6)
print("torch", torch.__version__, best)
]]

-- PyTorch's µs/iter and version, or nil and why not.
local function torch_us()
  local f = io.open(PYTHON, "r")
  if not f then return nil, PYTHON .. " not found" end
  f:close()
  local script = os.tmpname()
  f = assert(io.open(script, "w"))
  f:write(TORCH_SNIPPET)
  f:close()
  local cmd = ("%s %s %d %d %d 2>&1"):format(PYTHON, script, N, REPEATS, ember.get_num_threads())
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  os.remove(script)
  local version, us = out:match("torch (%S+) (%S+)")
  if not us then return nil, "PyTorch did not run: " .. (out:match("[^\n]*Error[^\n]*") or out) end
  return tonumber(us), version
end

local e = ember_us()
local t, torch_info = torch_us()

print(require("ember.cli").machine())
print(("dispatch: c = a + b on 16-element float32 tensors, %d iterations, best of %d"):format(N, REPEATS))
print(("%-26s %10s"):format("", "us/iter"))
print(("%-26s %10.3f"):format("ember (Lua " .. _VERSION:match("%d.%d") .. ")", e))
if t then
  print(("%-26s %10.3f"):format("pytorch " .. torch_info .. " (python3)", t))
  print(("%-26s %9.2fx"):format("ratio pytorch / ember", t / e))
else
  print(("%-26s %10s   (%s)"):format("pytorch", "-", torch_info))
end
print(("target: ember < %.1f us/iter and faster than pytorch: %s"):format(TARGET_US,
  (e < TARGET_US and (not t or e < t)) and "met" or "NOT met"))
