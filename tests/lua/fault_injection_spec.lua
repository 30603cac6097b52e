-- Fault injection over a training step (issue 11): the CPU backend's N-th
-- allocation fails (backends/cpu/cpu_fault.c, reached through the test-only
-- module build/tests/ember_fault.so), for every N the step reaches. Each
-- failure must be a Lua error that says it ran out of memory and names an
-- op; no tensor memory may be left behind; and the next step must work.
-- Under ctest's ASan pass LeakSanitizer also checks that nothing leaks.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"

local build = os.getenv("EMBER_BUILD_DIR") or "build"
local fault = assert(package.loadlib(build .. "/tests/ember_fault.so", "luaopen_ember_fault"))()

local function cpu_plugin_path()
  for _, p in ipairs(ember.plugins()) do
    if p.name == "cpu" and p.loaded then return p.path end
  end
  error("no cpu backend loaded")
end

local function live()
  collectgarbage()
  collectgarbage()
  return ember.live_bytes()
end

local total_allocs, total_survived = 0, 0

-- Fails each allocation of step() in turn: a clean Lua error naming an op
-- and "injected fault", no tensor memory left (clear_grads drops the
-- gradients), and the next step works.
local function survive_every_failure(label, step, clear_grads, min_allocs)
  step() -- the optimizer's state exists from here on
  clear_grads()
  fault.fail_alloc(0)
  step()
  local n = fault.fail_alloc(0)
  assert.is_true(n > min_allocs, "a step makes many allocations, counted " .. n)
  clear_grads()
  local baseline = live()
  local failures = 0
  for k = 1, n do
    fault.fail_alloc(k)
    local ok, err = pcall(step)
    fault.fail_alloc(0)
    assert.is_false(ok, ("allocation %d of %d: the step did not fail"):format(k, n))
    assert.are.equal("string", type(err))
    assert(err:find("out of memory", 1, true) and err:find("injected fault", 1, true),
      ("allocation %d: %s"):format(k, err))
    assert(err:find("ember%.[%w_]+") or err:find("%u%a+[.:]"), ("allocation %d: no op named in %s"):format(k, err))
    failures = failures + 1
    clear_grads()
    assert.are.equal(baseline, live(), ("allocation %d (%s): tensor memory left behind"):format(k, err))
    -- the next step works
    local loss = step()
    assert.is_true(loss == loss and loss > 0, "a finite loss after failure " .. k)
    clear_grads()
    assert.are.equal(baseline, live(), ("allocation %d: memory grew after the good step"):format(k))
  end
  total_allocs, total_survived = total_allocs + n, total_survived + failures
  print(("\n  fault injection (%s): %d allocations per step, %d injected failures survived; %d in all so far")
    :format(label, n, failures, total_survived))
  assert.are.equal(n, failures)
end

for _, variant in ipairs { "standard", "local", "linear", "relpos" } do
describe("allocation failures in a training step with " .. variant .. " attention", function()
  fault.open(cpu_plugin_path())
  ember.manual_seed(1)
  local B, L, D, V = 3, 5, 16, 7
  local model = nn.Sequential(
    nn.TransformerEncoderLayer(D, 2, { dim_feedforward = 32, dropout = variant == "linear" and 0 or 0.1, attention = variant }),
    nn.Linear(D, V))
  local params = model:parameters()
  local opt = optim.AdamW(params, { lr = 1e-3 })
  local x = ember.randn(B, L, D)
  local target = ember.tensor({ { 1, 2, 3, 4, 5 }, { 2, 3, 4, 5, 6 }, { 7, 6, 5, 4, 3 } }, { dtype = "int64" })

  -- a Lua backward in the graph too: its ops fail inside the engine's call
  local Half = ember.Function {
    name = "half", forward = function(ctx, a) return a * 0.5 end, backward = function(ctx, g) return g * 0.5 end,
  }

  local function step()
    opt:zero_grad()
    local logits = Half(model:forward(x))
    local loss = ember.cross_entropy(logits:view(B * L, V), target:view(B * L))
    loss:backward()
    optim.clip_grad_norm(params, 1.0)
    opt:step()
    return loss:item()
  end

  local function clear_grads()
    for _, p in ipairs(params) do p.grad = nil end
  end

  it("every injected failure is a clean Lua error; nothing leaks; the next step works", function()
    survive_every_failure(variant, step, clear_grads, 50)
  end)
end)
end

-- nn.Conv2d on the kernel with 16 channels: oneDNN's blocked layout, x kept
-- in it by the forward for the weight gradient (a buffer the graph holds).
describe("allocation failures in a step of two nn.Conv2d on the kernel", function()
  fault.open(cpu_plugin_path())
  ember.manual_seed(2)
  local model = nn.Sequential(nn.Conv2d(16, 16, 3, { padding = 1 }), nn.ReLU(), nn.Conv2d(16, 16, 3, { padding = 1 }))
  local params = model:parameters()
  local x = ember.randn(2, 16, 6, 6):requires_grad_()

  local function step()
    local loss = model(x):pow(2):sum()
    loss:backward()
    return loss:item()
  end

  local function clear_grads()
    for _, p in ipairs(params) do p.grad = nil end
    x.grad = nil
  end

  it("every injected failure is a clean Lua error; nothing leaks; the next step works", function()
    local before = ember.conv_routes().kernel
    survive_every_failure("conv2d", step, clear_grads, 10)
    assert.is_true(ember.conv_routes().kernel > before, "the convolutions ran on the kernel")
  end)
end)
