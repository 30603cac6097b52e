-- conv.lua -- nn.Conv2d forward + backward against PyTorch 1.13 in the same run:
--   vit_stem  the ViT patch embedding: B32, 3 -> 192 channels, kernel 4,
--             stride 4, on 32x32 (a [32, 192, 8, 8] output);
--   resnet3x3 a ResNet-style 3x3 convolution: B32, 64 -> 64 channels,
--             32x32, padding 1.
-- A step is y = conv(x), sum(y):backward() (gradients of x, weight and
-- bias). Times are the best of REPS after two warm-up steps, in ms; the
-- PyTorch side is scripts/bench/conv_torch.py, run with /usr/bin/python3 at
-- ember's thread count. The machine may be shared: read the ratios, which
-- come from the same run. float32 by default; --bf16 adds a bfloat16 row
-- per case (ember.autocast against torch.autocast("cpu", bfloat16)).
--   ember scripts/bench/conv.lua [REPS=5] [--no-torch] [--bf16]
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"
local nn = require "ember.nn"

local CASES = {
  vit_stem = { B = 32, cin = 3, cout = 192, k = 4, stride = 4, padding = 0, H = 32 },
  resnet3x3 = { B = 32, cin = 64, cout = 64, k = 3, stride = 1, padding = 1, H = 32 },
}
local ORDER = { "vit_stem", "resnet3x3" }

local function step_of(c, bf16)
  ember.manual_seed(0)
  local m = nn.Conv2d(c.cin, c.cout, c.k, { stride = c.stride, padding = c.padding })
  local x = ember.randn(c.B, c.cin, c.H, c.H):requires_grad_()
  return function()
    local y = bf16 and ember.autocast("bfloat16", function() return m(x) end) or m(x)
    y:float():sum():backward()
    m:zero_grad()
    x.grad = nil
  end
end

local reps, with_torch, bf16 = 5, true, false
for _, v in ipairs(arg) do
  if v == "--no-torch" then with_torch = false
  elseif v == "--bf16" then bf16 = true
  elseif tonumber(v) then reps = math.tointeger(tonumber(v)) or reps
  else error("conv.lua: unknown argument " .. v .. " (see --help)", 0) end
end
local threads = ember.get_num_threads()
local torch_py = arg[0]:gsub("conv%.lua$", "conv_torch.py")

local function torch_ms(name, c, prec)
  local p = io.popen(("/usr/bin/python3 %q %d %d %d %d %d %d %d %s %d %d 2>&1"):format(torch_py, c.B, c.cin, c.cout,
    c.k, c.stride, c.padding, c.H, prec, reps, threads))
  local out = p:read("a")
  p:close()
  local v = tonumber(out:match("^%s*([%d%.]+)%s*$"))
  if not v then io.stderr:write(("conv.lua: %s %s: the PyTorch peer failed: %s\n"):format(name, prec, out)) end
  return v
end

print(("%d threads, best of %d, wall ms, forward + backward"):format(threads, reps))
print(("%-12s %-5s %10s %10s %12s"):format("case", "prec", "ember", "torch", "ember/torch"))
for _, name in ipairs(ORDER) do
  local c = CASES[name]
  for _, prec in ipairs(bf16 and { "fp32", "bf16" } or { "fp32" }) do
    local step = step_of(c, prec == "bf16")
    step()
    step()
    local best = math.huge
    for _ = 1, reps do
      local t0 = ember.clock()
      step()
      best = math.min(best, ember.clock() - t0)
    end
    local e = best * 1e3
    local t = with_torch and torch_ms(name, c, prec) or nil
    print(("%-12s %-5s %10.2f %10s %12s"):format(name, prec, e, t and ("%.2f"):format(t) or "-",
      t and ("%.2fx"):format(e / t) or "-"))
  end
end
