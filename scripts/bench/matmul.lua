-- matmul.lua -- ember's float32 matmul against OpenBLAS's own sgemm, in
-- the same run. usage: ember scripts/bench/matmul.lua [N=1024] [REPEATS=10]
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = require "ember"
local n = tonumber(arg[1]) or 1024
local reps = tonumber(arg[2]) or 10
local threads = ember.get_num_threads()

local a, b = ember.randn(n, n), ember.randn(n, n)
local c = a:matmul(b) -- warm-up
local best = math.huge
for _ = 1, reps do
  local t0 = ember.clock()
  c = a:matmul(b)
  local dt = ember.clock() - t0
  if dt < best then best = dt end
end
local ours = 2 * n * n * n / best * 1e-9

-- The peer sits beside the ember program in the build tree.
local exe = arg and arg[-1] or "build/bin/ember"
local bin = (exe:match("^(.*)/[^/]*$") or ".") .. "/ember_sgemm_peer"
local p = io.popen(("%q %d %d %d 2>&1"):format(bin, n, reps, threads))
local out = p:read("a")
p:close()
local peer = tonumber(out:match("gflops ([%d%.]+)"))

print(("matmul %dx%dx%d float32, %d threads, best of %d"):format(n, n, n, threads, reps))
print(("%-22s %10s"):format("", "GFLOP/s"))
print(("%-22s %10.1f"):format("ember a:matmul(b)", ours))
if peer then
  print(("%-22s %10.1f"):format("OpenBLAS cblas_sgemm", peer))
  print(("%-22s %9.1f%%"):format("ember / OpenBLAS", 100 * ours / peer))
else
  print("OpenBLAS peer not found at " .. bin .. ": " .. out)
end
