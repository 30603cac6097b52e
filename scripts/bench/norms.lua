-- norms.lua -- layer_norm and rms_norm alone, forward and backward, at the
-- shapes of the training demos ([4096, 128] and [4096, 256]: rows x
-- features), float32 and bfloat16 (bf16 activations, float32 weight and
-- bias, under ember.autocast("bfloat16") -- the norm runs in float32 and
-- its output is float32), against PyTorch 1.13 (norms_torch.py, the same
-- thread count, torch.autocast("cpu", dtype=torch.bfloat16) for bf16).
--
--   ember scripts/bench/norms.lua [REPS=200] [--cpu-time] [--no-torch] [--quick]
--
-- fwd  one F.layer_norm / F.rms_norm call on an input that requires grad
--      (the graph recorded, as in training), ms;
-- bwd  ember.autograd.backward of the output with a fixed grad_output and
--      the graph retained, into x's, weight's (and bias's) .grad, reset to
--      nil before each run (torch.autograd.backward the same), ms.
-- Each is the best of REPS after a warm-up. --cpu-time times process CPU
-- seconds (os.clock; Python's process_time): with OMP_NUM_THREADS=1 on a
-- machine other jobs share, that is what stays comparable. PyTorch 1.13 has
-- no RMSNorm: its row is the composition Llama's code writes,
-- x * rsqrt(mean(x^2) + eps) * weight, in float32.
-- The ratio columns are torch / ember (above 1: ember is faster).
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"
local F = ember.nn.functional

local reps, with_torch, quick, clock = 200, true, false, "wall"
for _, v in ipairs(arg) do
  if v == "--no-torch" then with_torch = false
  elseif v == "--cpu-time" then clock = "cpu"
  elseif v == "--quick" then quick = true
  elseif tonumber(v) then reps = math.tointeger(tonumber(v)) or reps end
end
local now = clock == "cpu" and os.clock or ember.clock
local threads = ember.get_num_threads()
local ROWS, EPS = 4096, 1e-5
local widths = quick and { 128 } or { 128, 256 }

local function best(fn)
  fn()
  local b = math.huge
  for _ = 1, reps do
    local t0 = now()
    fn()
    b = math.min(b, now() - t0)
  end
  return b * 1e3
end

-- {fwd ms, bwd ms} of one case
local function time_case(op, n, prec)
  ember.manual_seed(0)
  local x = ember.randn(ROWS, n)
  if prec == "bf16" then x = x:to("bfloat16") end
  x:requires_grad_()
  local w = (ember.rand(n) + 0.5):requires_grad_()
  local b = op == "layer_norm" and ember.randn(n):requires_grad_() or nil
  local function fwd()
    if prec == "bf16" then
      return ember.autocast("bfloat16", function()
        if op == "layer_norm" then return F.layer_norm(x, { n }, w, b, EPS) end
        return F.rms_norm(x, { n }, w, EPS)
      end)
    end
    if op == "layer_norm" then return F.layer_norm(x, { n }, w, b, EPS) end
    return F.rms_norm(x, { n }, w, EPS)
  end
  local tf = best(fwd)
  local y = fwd()
  local gy = ember.randn(ROWS, n):to(y.dtype)
  local ins = b and { x, w, b } or { x, w }
  local tb = best(function()
    for _, t in ipairs(ins) do t.grad = nil end
    ember.autograd.backward(y, gy, { retain_graph = true })
  end)
  return tf, tb
end

local torch = {}
if with_torch then
  local py = arg[0]:gsub("norms%.lua$", "norms_torch.py")
  local p = io.popen(("/usr/bin/python3 %q %d %d %s %s 2>&1"):format(py, reps, threads, clock,
    table.concat(widths, ",")))
  local out = p:read("a")
  p:close()
  for op, n, prec, f, b in out:gmatch("(%S+) (%d+) (%S+) ([%d%.]+) ([%d%.]+)\n") do
    torch[op .. n .. prec] = { tonumber(f), tonumber(b) }
  end
  if next(torch) == nil then io.stderr:write("norms_torch.py gave nothing:\n", out, "\n") end
end

print(require("ember.cli").machine())
print(("%d threads, %d rows, best of %d, %s ms; ember kernels: %s"):format(threads, ROWS, reps,
  clock == "cpu" and "process CPU" or "wall", ember.cpu_info().float32))
print(("%-27s %9s %9s %9s %9s | %8s %8s"):format("case", "ember fwd", "torch fwd", "ember bwd",
  "torch bwd", "t/e fwd", "t/e bwd"))
for _, op in ipairs { "layer_norm", "rms_norm" } do
  for _, n in ipairs(widths) do
    for _, prec in ipairs { "fp32", "bf16" } do
      local ef, eb = time_case(op, n, prec)
      local t = torch[op .. n .. prec] or {}
      local function f(v) return v and ("%9.3f"):format(v) or ("%9s"):format("-") end
      local function r(tv, ev) return tv and ("%7.2fx"):format(tv / ev) or ("%8s"):format("-") end
      print(("%-27s %s %s %s %s | %s %s"):format(("%s [%d,%d] %s"):format(op, ROWS, n, prec), f(ef),
        f(t[1]), f(eb), f(t[2]), r(t[1], ef), r(t[2], eb)))
    end
  end
end
