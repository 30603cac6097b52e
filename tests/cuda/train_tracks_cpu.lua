-- train_tracks_cpu.lua -- a short classifier training run on the CUDA
-- device whose loss curve must track the same run on the CPU.
-- Run by tests/cuda/run_on_gpu.sh (label "cuda"); prints "N passed, M failed".
local nn, optim = require "ember.nn", require "ember.optim"
local device = os.getenv("EMBER_TEST_DEVICE") or "cuda"

local function run(dev)
  ember.manual_seed(7)
  local x = ember.randn(256, 20)
  local y = (x:narrow(2, 1, 1):squeeze(2):gt(0)):long() + 1 -- labels 1 or 2
  local model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
  model:to(dev)
  x, y = x:to(dev), y:to(dev)
  local opt = optim.AdamW(model:parameters(), {lr = 1e-2})
  local losses = {}
  for step = 1, 30 do
    local loss = ember.cross_entropy(model(x), y)
    opt:zero_grad()
    loss:backward()
    opt:step()
    losses[step] = loss:item()
  end
  return losses
end

local cpu, gpu = run("cpu"), run(device)
local passed, failed = 0, 0
for step = 1, #cpu do
  local rel = math.abs(cpu[step] - gpu[step]) / math.max(math.abs(cpu[step]), 1e-6)
  if rel <= 1e-3 then passed = passed + 1 else
    failed = failed + 1
    print(("not ok - step %d: cpu loss %.6f, %s loss %.6f (rel %.2e)"):format(step, cpu[step], device, gpu[step], rel))
  end
end
if gpu[#gpu] < gpu[1] then passed = passed + 1 else
  failed = failed + 1
  print("not ok - the loss on " .. device .. " did not fall")
end
print(("%d passed, %d failed"):format(passed, failed))
os.exit(failed == 0 and 0 or 1)
