-- conv.lua -- nn.Conv2d forward + backward, side by side in one run:
--   ember     nn.Conv2d as a user gets it (route "auto", printed beside it):
--             the kernel route, oneDNN's convolution primitives with the
--             reorders from and to NCHW (core/src/ops_conv.c on
--             backends/cpu/cpu_conv.c: x, y, dy and dx once each, the
--             weight gradient reading the x the forward reordered and
--             kept; with few channels, as the ViT stem's 3, oneDNN's gemm
--             on ember's plain layouts where the first call measured it
--             faster);
--   composed  nn.Conv2d{route = "composed"}: strided views and one matmul;
--   layer     nn.Conv2d as a layer inside a network sees it: the module
--             and x already in the dtype (m:to("bfloat16") for bf16, as
--             the layer after a bf16 one gets its input), forward, then
--             y:backward(dy) from a ready dy: no autocast casts, no sum;
--   op        the kernel op alone (ember._conv2d forward, then its backward
--             from a ready dy), inputs already in the dtype: no autocast
--             casts, no sum, no module;
--   oneDNN    oneDNN's own primitives on the layouts they prefer, no
--             reorders (scripts/bench/conv_peer.c, ember_conv_peer beside
--             the ember binary): the ceiling of any caller;
--   torch     PyTorch 1.13's nn.Conv2d (scripts/bench/conv_torch.py, run
--             with /usr/bin/python3 at ember's thread count).
-- Cases:
--   vit_stem  the ViT patch embedding: B32, 3 -> 192 channels, kernel 4,
--             stride 4, on 32x32 (a [32, 192, 8, 8] output);
--   resnet3x3 a ResNet-style 3x3 convolution: B32, 64 -> 64 channels,
--             32x32, padding 1.
-- A step is y = conv(x), sum(y):backward() (gradients of x, weight and
-- bias). Times are the best of REPS, the four ember steps taking turns,
-- after warm-up steps (at least two and WARM_S = 0.3 s: ember's thread
-- team classifies the machine over its first regions, and a stem's step
-- ran 2-3x slower for its first ~30 ms,
-- backends/cpu/cpu_team.c; the peers warm up alike), in ms; ember's steps
-- and the oneDNN peer take turns for ROUNDS rounds (--rounds=N, 3), each
-- keeping its best (on a machine shared with other jobs a single round
-- put the peer and ember in different moments: oneDNN/layer of one build
-- ranged 0.70-1.19 over six runs). The
-- machine may be shared: read the ratios, which come from the same run:
-- ember/torch (at most 1.0 is the goal), oneDNN/ember (the share of the
-- primitives' own speed the module step keeps; at least 0.9 is the goal)
-- and oneDNN/op (the same for the op alone: what the reorders cost).
-- oneDNN/layer is the same share for the layer; the module step's sum and
-- its backward (an 8 MB ones tensor on the ResNet block) and autocast's
-- casts of x, y and the gradients are not convolution work, so issue 27's
-- "90% of oneDNN's own primitive" is read off oneDNN/layer (the step's
-- own ratio, oneDNN/ember, stays beside it).
-- float32 and bfloat16 (ember.autocast against torch.autocast("cpu",
-- bfloat16)); --fp32 runs float32 only.
--   ember scripts/bench/conv.lua [REPS=5] [--rounds=3] [--no-torch] [--fp32]
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"
local nn = require "ember.nn"

local CASES = {
  vit_stem = { B = 32, cin = 3, cout = 192, k = 4, stride = 4, padding = 0, H = 32 },
  resnet3x3 = { B = 32, cin = 64, cout = 64, k = 3, stride = 1, padding = 1, H = 32 },
}
local ORDER = { "vit_stem", "resnet3x3" }

local function step_of(c, bf16, route)
  ember.manual_seed(0)
  local m = nn.Conv2d(c.cin, c.cout, c.k, { stride = c.stride, padding = c.padding, route = route })
  local x = ember.randn(c.B, c.cin, c.H, c.H):requires_grad_()
  return function()
    local y = bf16 and ember.autocast("bfloat16", function() return m(x) end) or m(x)
    y:float():sum():backward()
    m:zero_grad()
    x.grad = nil
  end
end

local reps, rounds, with_torch, bf16 = 5, 3, true, true
for _, v in ipairs(arg) do
  if v == "--no-torch" then with_torch = false
  elseif v == "--fp32" then bf16 = false
  elseif v == "--bf16" then bf16 = true -- the default; kept for old command lines
  elseif v:match("^%-%-rounds=%d+$") then rounds = math.max(1, math.tointeger(tonumber(v:match("%d+"))))
  elseif tonumber(v) then reps = math.tointeger(tonumber(v)) or reps
  else error("conv.lua: unknown argument " .. v .. " (see --help)", 0) end
end
local threads = ember.get_num_threads()
local torch_py = arg[0]:gsub("conv%.lua$", "conv_torch.py")

local exe = arg[-1] or "build/bin/ember"
local peer = (exe:match("^(.*)/[^/]*$") or ".") .. "/ember_conv_peer"

local function sizes(c, prec)
  return ("%d %d %d %d %d %d %d %s %d %d"):format(c.B, c.cin, c.cout, c.k, c.stride, c.padding, c.H, prec, reps,
    threads)
end

local function torch_ms(name, c, prec)
  local p = io.popen(("/usr/bin/python3 %q %s 2>&1"):format(torch_py, sizes(c, prec)))
  local out = p:read("a")
  p:close()
  local v = tonumber(out:match("^%s*([%d%.]+)%s*$"))
  if not v then io.stderr:write(("conv.lua: %s %s: the PyTorch peer failed: %s\n"):format(name, prec, out)) end
  return v
end

-- oneDNN's own primitives: ms and the implementations it chose
local function onednn_ms(name, c, prec)
  -- with the OpenMP spin libember sets for its own team (core/src/plugin.c:
  -- GOMP_SPINCOUNT=1000 unless OMP_WAIT_POLICY is set), so both wait alike
  local env = os.getenv("OMP_WAIT_POLICY") and "" or "GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-1000} "
  local p = io.popen(("%s%q %s 2>&1"):format(env, peer, sizes(c, prec)))
  local out = p:read("a")
  p:close()
  local v, impl = out:match("^onednn ([%d%.]+) (%S+)")
  if not v then io.stderr:write(("conv.lua: %s %s: the oneDNN peer failed: %s\n"):format(name, prec, out)) end
  return tonumber(v), impl
end

local WARM_S = 0.3
-- Best ms of each step, the steps taking turns rep by rep (so a busy
-- moment, or what the step before left behind -- the composed route's
-- large buffers slowed the next step's first reps -- does not land on one).
local function best_ms(steps)
  for _, step in ipairs(steps) do
    local t0, n = ember.clock(), 0
    while n < 2 or ember.clock() - t0 < WARM_S do
      step()
      n = n + 1
    end
  end
  local best = {}
  for i = 1, #steps do best[i] = math.huge end
  for _ = 1, reps do
    for i, step in ipairs(steps) do
      local t0 = ember.clock()
      step()
      best[i] = math.min(best[i], ember.clock() - t0)
    end
  end
  for i = 1, #steps do best[i] = best[i] * 1e3 end
  return table.unpack(best)
end

-- The op alone: forward and backward given dy, in the step's dtype.
local function op_step(c, bf16)
  ember.manual_seed(0)
  local dt = bf16 and "bfloat16" or "float32"
  local x = ember.randn(c.B, c.cin, c.H, c.H):to(dt):requires_grad_()
  local w = (ember.randn(c.cout, c.cin, c.k, c.k) * 0.1):to(dt):requires_grad_()
  local b = ember.randn(c.cout):to(dt):requires_grad_()
  local s, p = c.stride, c.padding
  local Ho = (c.H + 2 * p - c.k) // s + 1
  local dy = ember.ones(c.B, c.cout, Ho, Ho):to(dt)
  return function()
    ember._conv2d(x, w, b, s, s, p, p, p, p, 1, 1, 1):backward(dy)
    x.grad, w.grad, b.grad = nil, nil, nil
  end
end

-- nn.Conv2d as a layer: module and x in the dtype, backward from a ready dy.
local function layer_step(c, bf16)
  ember.manual_seed(0)
  local dt = bf16 and "bfloat16" or "float32"
  local m = nn.Conv2d(c.cin, c.cout, c.k, { stride = c.stride, padding = c.padding }):to(dt)
  local x = ember.randn(c.B, c.cin, c.H, c.H):to(dt):requires_grad_()
  local Ho = (c.H + 2 * c.padding - c.k) // c.stride + 1
  local dy = ember.ones(c.B, c.cout, Ho, Ho):to(dt)
  return function()
    m(x):backward(dy)
    m:zero_grad()
    x.grad = nil
  end
end

local function f(v) return v and ("%.2f"):format(v) or "-" end
local function r(a, b) return a and b and ("%.2f"):format(a / b) or "-" end

print(require("ember.cli").machine())
print(("%d threads, best of %d in each of %d rounds, wall ms, forward + backward"):format(threads, reps, rounds))
print(("%-10s %-4s %8s %-8s %8s %8s %8s %8s %8s %11s %10s %12s %12s %9s  %s"):format("case", "prec", "ember",
  "(route)", "composed", "layer", "op", "oneDNN", "torch", "ember/torch", "comp/torch", "oneDNN/ember", "oneDNN/layer",
  "oneDNN/op", "oneDNN impl (fwd/bwd-data/bwd-weights)"))
for _, name in ipairs(ORDER) do
  local c = CASES[name]
  for _, prec in ipairs(bf16 and { "fp32", "bf16" } or { "fp32" }) do
    local before = ember.conv_routes().kernel
    local auto = step_of(c, prec == "bf16")
    auto()
    -- nn.Conv2d's own choice ("auto"): the kernel where the backend has one
    local route = ember.conv_routes().kernel > before and "kernel" or "composed"
    local steps = { auto, step_of(c, prec == "bf16", "composed"), layer_step(c, prec == "bf16"), op_step(c, prec == "bf16") }
    -- ember's steps and oneDNN's peer take turns, round by round, each side
    -- keeping its best: one busy moment of a shared machine no longer
    -- decides a ratio
    local e, comp, layer, op, d, impl = math.huge, math.huge, math.huge, math.huge, math.huge, nil
    for _ = 1, rounds do
      local e1, comp1, layer1, op1 = best_ms(steps)
      e, comp, layer, op = math.min(e, e1), math.min(comp, comp1), math.min(layer, layer1), math.min(op, op1)
      local d1, impl1 = onednn_ms(name, c, prec)
      if d1 then d, impl = math.min(d, d1), impl1 end
    end
    if d == math.huge then d = nil end
    local t = with_torch and torch_ms(name, c, prec) or nil
    print(("%-10s %-4s %8s %-8s %8s %8s %8s %8s %8s %11s %10s %12s %12s %9s  %s"):format(name, prec, f(e), route,
      f(comp), f(layer), f(op), f(d), f(t), r(e, t), r(comp, t), r(d, e), r(d, layer), r(d, op), impl or "-"))
  end
end
