-- matmul.lua -- ember's matmul against its peers, in the same run:
-- float32 against OpenBLAS's own threaded sgemm and oneDNN's own f32
-- matmul; bfloat16 against oneDNN's own bf16 matmul, with the ISA oneDNN
-- chose. Also ember float32 forced onto each library (EMBER_CPU_SGEMM), the
-- measurement behind the rule in backends/cpu/cpu_gemm.c.
-- usage: ember scripts/bench/matmul.lua [REPEATS=10] [MxNxK ...]
--        (default shapes: 1024^3 and 4096 x {128,256,512} x {128,256,512})
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = require "ember"

local function best_gflops(m, n, k, dtype, reps)
  local a = ember.randn(m, k):to(dtype)
  local b = ember.randn(k, n):to(dtype)
  local c = a:matmul(b) -- warm-up (and oneDNN's primitive creation)
  local best = math.huge
  for _ = 1, reps do
    local t0 = ember.clock()
    c = a:matmul(b)
    local dt = ember.clock() - t0
    if dt < best then best = dt end
  end
  return 2 * m * n * k / best * 1e-9, c
end

-- child mode: one shape, prints "f32 <gflops> bf16 <gflops>"
if arg[1] == "--one" then
  local m, n, k, reps = tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4]), tonumber(arg[5])
  local f = best_gflops(m, n, k, "float32", reps)
  local h = best_gflops(m, n, k, "bfloat16", reps)
  print(("f32 %.2f bf16 %.2f"):format(f, h))
  return
end

local reps = tonumber(arg[1]) or 10
local shapes = {}
for i = 2, #arg do
  local m, n, k = arg[i]:match("^(%d+)x(%d+)x(%d+)$")
  shapes[#shapes + 1] = { tonumber(m), tonumber(n), tonumber(k) }
end
if #shapes == 0 then
  shapes[1] = { 1024, 1024, 1024 }
  for _, n in ipairs { 128, 256, 512 } do
    for _, k in ipairs { 128, 256, 512 } do shapes[#shapes + 1] = { 4096, n, k } end
  end
end
local threads = ember.get_num_threads()
local exe = arg and arg[-1] or "build/bin/ember"
local script = arg and arg[0] or "scripts/bench/matmul.lua"
local peer = (exe:match("^(.*)/[^/]*$") or ".") .. "/ember_matmul_peer"

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  p:close()
  return out
end

local function ember_child(env, m, n, k)
  local out = run(("%s %q %q --one %d %d %d %d"):format(env, exe, script, m, n, k, reps))
  return tonumber(out:match("f32 ([%d%.]+)")), tonumber(out:match("bf16 ([%d%.]+)")), out
end

local info = ember.cpu_info and ember.cpu_info() or {}
print(require("ember.cli").machine())
print(("matmul M x N x K, %d threads, best of %d; GFLOP/s; one run, ratios within a row come from the same run"):format(threads, reps))
print(("ember's ISA: float32 %s, bfloat16 %s"):format(tostring(info.float32), tostring(info.bfloat16)))
print(("%-16s %8s %8s %8s %8s %8s %7s | %8s %8s %7s  %s"):format("M x N x K", "ember", "em:oblas", "em:dnnl",
  "OpenBLAS", "oneDNN", "ours/b", "ember", "oneDNN", "ours/o", "oneDNN bf16 impl"))
print(("%-16s %8s %8s %8s %8s %8s %7s | %8s %8s %7s"):format("", "f32", "f32", "f32", "sgemm", "f32", "best", "bf16", "bf16", "dnnl"))
for _, s in ipairs(shapes) do
  local m, n, k = s[1], s[2], s[3]
  local f, h, err = ember_child("", m, n, k)
  local fo = ember_child("EMBER_CPU_SGEMM=openblas", m, n, k)
  local fd = ember_child("EMBER_CPU_SGEMM=onednn", m, n, k)
  local out = run(("%q %d %d %d %d %d"):format(peer, m, n, k, reps, threads))
  local pb = tonumber(out:match("openblas_f32 ([%d%.]+)"))
  local pf = tonumber(out:match("onednn_f32 ([%d%.]+)"))
  local ph, impl = out:match("onednn_bf16 ([%d%.]+) (%S+)")
  ph = tonumber(ph)
  if not (f and pb and pf and ph) then error("a run failed:\n" .. tostring(err) .. "\n" .. out) end
  local bestpeer = math.max(pb, pf)
  print(("%-16s %8.1f %8.1f %8.1f %8.1f %8.1f %6.0f%% | %8.1f %8.1f %6.0f%%  %s"):format(
    ("%dx%dx%d"):format(m, n, k), f, fo, fd, pb, pf, 100 * f / bestpeer, h, ph, 100 * h / ph, impl))
end
