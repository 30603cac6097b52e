-- scaling_model.lua: projects data-parallel step time and efficiency from
-- measured per-step compute and a ring all-reduce cost model, and checks
-- the model against the measured 2- and 4-rank points of this machine.
--
--   ember scripts/bench/scaling_model.lua STEPS ALLREDUCE DDP
--     STEPS      output of scaling_steps.sh    ("model params step_ms")
--     ALLREDUCE  output of allreduce.sh        (its table)
--     DDP        output of ddp_overlap.sh      (its table)
--
-- Model (weak scaling: the per-rank batch stays, the global batch grows with p):
--   T_allreduce(p) = 2(p-1)/p * G / B  +  2(p-1) * alpha * buckets
--     G: gradient bytes (4 per fp32 parameter), B: link bandwidth,
--     alpha: per-message latency, buckets: ceil(G / 25 MiB), each a ring of 2(p-1) steps
--   serial     t = t_compute + T_allreduce            (no overlap)
--   overlapped t = max(t_compute, t_forward + T_allreduce), t_forward = t_compute / 3
--              (the all-reduce can hide behind the backward, two thirds of the step)
--   efficiency = t_compute / t
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local function read_lines(path)
  local f = assert(io.open(path), "cannot open " .. tostring(path))
  local t = {}
  for line in f:lines() do t[#t + 1] = line end
  f:close()
  return t
end

local steps_file, ar_file, ddp_file = arg[1], arg[2], arg[3]
local models = {}
for _, line in ipairs(read_lines(steps_file)) do
  local name, params, ms = line:match("^(%S+) (%d+) ([%d.]+)$")
  if name then models[#models + 1] = {name = name, params = tonumber(params), t = tonumber(ms) / 1e3} end
end
-- the 100M-parameter model: compute from 6 * N * tokens FLOPs per step
-- (forward + backward), 8 sequences of 512 tokens per rank, at two rates
local function flop_model(label, rate)
  return {name = label, params = 1e8, t = 6 * 1e8 * 8 * 512 / rate}
end
models[#models + 1] = flop_model("100M@50TF", 50e12)  -- an accelerator at 50 TFLOP/s sustained
models[#models + 1] = flop_model("100M@100GF", 100e9) -- a CPU node at 100 GFLOP/s

local MIB = 2 ^ 20
local function t_allreduce(p, G, B, alpha)
  if p == 1 then return 0 end
  local buckets = math.max(1, math.ceil(G / (25 * MIB)))
  return 2 * (p - 1) / p * G / B + 2 * (p - 1) * alpha * buckets
end

-- ---- fit alpha and B on this machine from allreduce.sh's table ----
local fits = {}
if ar_file then
  local rows = {}
  for _, line in ipairs(read_lines(ar_file)) do
    local np, btl, size, unit, mpi_us, ember_us = line:match("^(%d+)%s+(%a+)%s+(%d+) (%a+)%s+([%d.]+)%s+([%d.]+)")
    if np then
      local bytes = tonumber(size) * (unit == "MiB" and MIB or 1024)
      local key = np .. " " .. btl
      rows[key] = rows[key] or {}
      table.insert(rows[key], {bytes = bytes, t = tonumber(ember_us) / 1e6})
    end
  end
  -- Least squares on relative error over every size: t = a + b x with
  -- x = 2(p-1)/p bytes, a = 2(p-1) alpha, b = 1/B (one bucket). Weighting
  -- each point by 1/t keeps the small sizes, which set alpha, from being
  -- drowned by the large ones, which set B.
  for key, r in pairs(rows) do
    local p = tonumber(key:match("^%d+"))
    local suu, sxu, sxx, su, sx = 0, 0, 0, 0, 0
    for _, pt in ipairs(r) do
      local u, x = 1 / pt.t, 2 * (p - 1) / p * pt.bytes
      suu, sxu, sxx, su, sx = suu + u * u, sxu + x * u * u, sxx + x * x * u * u, su + u, sx + x * u
    end
    local det = suu * sxx - sxu * sxu
    local a, b = 0, sx / sxx
    if #r >= 2 and det > 0 then a, b = (su * sxx - sx * sxu) / det, (suu * sx - sxu * su) / det end
    if a < 0 then a, b = 0, sx / sxx end -- no latency term the data can see (or one size only)
    local worst = 0
    for _, pt in ipairs(r) do
      local model = a + b * 2 * (p - 1) / p * pt.bytes
      worst = math.max(worst, math.abs(model - pt.t) / pt.t)
    end
    fits[key] = {alpha = a / (2 * (p - 1)), B = 1 / b, p = p, worst = worst, n = #r}
  end
end

print("## Fitted on this machine (ember's all_reduce, allreduce.sh)")
print("")
print("| ranks | transport | alpha (us) | B (GB/s) | sizes | worst size off by |")
print("|---|---|---|---|---|---|")
local keys = {}
for k in pairs(fits) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do
  local f = fits[k]
  print(("| %d | %s | %.1f | %.2f | %d | %.0f%% |"):format(f.p, k:match("%a+$"), f.alpha * 1e6, f.B / 1e9, f.n,
        100 * f.worst))
end

-- ---- check against the measured DDP points ----
if ddp_file then
  print("")
  print("## Model against the measured DDP steps (ddp_overlap.sh, shared memory)")
  print("")
  print("| model | ranks | compute ms | measured comm ms | model comm ms | measured serial ms | model serial ms | measured ddp ms | model overlapped ms |")
  print("|---|---|---|---|---|---|---|---|---|")
  for _, line in ipairs(read_lines(ddp_file)) do
    local name, np, params, _, compute, ddp, serial, comm = line:match(
      "^(%a+)%s+(%d+)%s+(%d+)%s+([%d.]+)%s+([%d.]+)%s+([%d.]+)%s+([%d.]+)%s+([%d.]+)")
    if name then
      local f = fits[np .. " vader"]
      if f then
        local G = tonumber(params) * 4
        local tc = tonumber(compute) / 1e3
        local ta = t_allreduce(tonumber(np), G, f.B, f.alpha)
        print(("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |"):format(name, np, tc * 1e3, tonumber(comm),
              ta * 1e3, tonumber(serial), (tc + ta) * 1e3, tonumber(ddp), math.max(tc, tc / 3 + ta) * 1e3))
      end
    end
  end
end

-- ---- projections ----
print("")
print("## Projected step time and efficiency (alpha = 5 us per message)")
print("")
print("| model | params | compute ms | link | p | all-reduce ms | serial ms (eff) | overlapped ms (eff) |")
print("|---|---|---|---|---|---|---|---|")
for _, m in ipairs(models) do
  local G = m.params * 4
  for _, gbps in ipairs({25, 100}) do
    for _, p in ipairs({8, 64, 512}) do
      local ta = t_allreduce(p, G, gbps * 1e9 / 8, 5e-6)
      local serial = m.t + ta
      local over = math.max(m.t, m.t / 3 + ta)
      print(("| %s | %.3gM | %.1f | %d Gb/s | %d | %.2f | %.1f (%.0f%%) | %.1f (%.0f%%) |"):format(
        m.name, m.params / 1e6, m.t * 1e3, gbps, p, ta * 1e3, serial * 1e3, 100 * m.t / serial, over * 1e3, 100 * m.t / over))
    end
  end
end
