-- The rank program of test_fault.sh: DDP training that runs until stopped.
--   fault_train.lua DIR MODE   MODE: kill (the shell kills rank 1), error (rank 1 raises
--   an error at step 5), slow (rank 1 sleeps past the others' timeout at step 5, before
--   backward: the others wait in DDP's bucket all-reduce, on the communication thread),
--   slow_sync (the same after the step: the others wait in the small synchronous
--   all-reduce of the loss; its error must name the script's line)
-- Each rank writes its pid to DIR/pid.<rank>; rank 0 touches DIR/step5 at step 5.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local dist = require "ember.distributed"
local dir, mode = arg[1], arg[2]
dist.init{timeout = tonumber(os.getenv("FAULT_TIMEOUT") or "20")}
local me = dist.rank()
local f = assert(io.open(("%s/pid.%d"):format(dir, me), "w"))
f:write(tostring(ember.getpid and ember.getpid() or io.open("/proc/self/stat"):read("n")))
f:close()
ember.manual_seed(0)
local model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
local ddp = dist.DistributedDataParallel(model)
local opt = optim.SGD(ddp:parameters(), {lr = 0.01})
for step = 1, 100000 do
  if step == 5 and me == 0 then io.open(dir .. "/step5", "w"):close() end
  if step == 5 and me == 1 and mode == "error" then error("rank 1 fails on purpose at step 5") end
  if step == 5 and me == 1 and mode == "slow" then os.execute("sleep 30") end
  local x = ember.randn(16, 32)
  local loss = model(x):pow(2):mean()
  opt:zero_grad()
  loss:backward()
  opt:step()
  if step == 5 and me == 1 and mode == "slow_sync" then os.execute("sleep 30") end
  dist.all_reduce(loss:detach(), "mean") -- as a script averages the loss it prints
  if mode == "kill" then os.execute("sleep 0.05") end
end
print("fault_train: rank " .. me .. " ran to the end, which it never should")
