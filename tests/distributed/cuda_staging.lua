-- CUDA tensors through ember.distributed: host staging for every
-- collective and for DistributedDataParallel, or with a CUDA-aware MPI
-- (EMBER_DIST_CUDA_AWARE=1; ctest runs both) device memory handed to MPI
-- as it is. ctest runs it on the emulated CUDA backend (backends/cuda/emu,
-- whose device memory the host can address, as a CUDA-aware MPI's can), so
-- no GPU is needed; on a GPU machine EMBER_PLUGIN_PATH can point at the real one.
local ember = require "ember"
local nn = require "ember.nn"
local dist = require "ember.distributed"
local H = dofile((os.getenv("EMBER_SOURCE_DIR") or ".") .. "/tests/distributed/harness.lua")
dist.init{timeout = 60}
local R, me = dist.world_size(), dist.rank()
if ember.device_count("cuda") == 0 then
  print("SKIP: no CUDA device (real or emulated)")
  os.exit(77)
end
local dev = "cuda:" .. (dist.local_rank() % ember.device_count("cuda") + 1)

H.test("cuda_aware() is what the library says, or what EMBER_DIST_CUDA_AWARE says", function()
  local forced = os.getenv("EMBER_DIST_CUDA_AWARE")
  if forced == "1" or forced == "0" then assert(dist.cuda_aware() == (forced == "1")) end
  assert(type(dist.cuda_aware()) == "boolean")
end)
H.test("all_reduce of a cuda tensor stays on the device", function()
  local t = (ember.arange(0, 6, {dtype = "float32"}):view(2, 3) + me):to(dev)
  dist.all_reduce(t)
  local want = ember.arange(0, 6, {dtype = "float32"}):view(2, 3) * R + R * (R - 1) / 2
  assert(t.device:find("cuda"))
  assert(H.same(t:cpu(), want))
end)
-- Device memory that MPI takes as it is goes to MPI_Allreduce, which a
-- CUDA-aware MPI can reduce; ember's point-to-point algorithms reduce on
-- the host. A staged tensor is host memory by then: any algorithm.
H.test("all_reduce_algorithm of a cuda tensor: MPI's own when MPI takes device memory", function()
  local t = ember.ones(3000):to(dev)
  local host = dist.all_reduce_algorithm(ember.ones(3000))
  assert(dist.all_reduce_algorithm(t) == (dist.cuda_aware() and "mpi" or host), dist.all_reduce_algorithm(t))
  assert(dist.all_reduce_algorithm(t:view(1000, 3):transpose(1, 2)) == host, "a strided one is staged")
end)
H.test("broadcast into a strided cuda view", function()
  local s = (ember.ones(4, 3, {dtype = "float64"}) * me):to(dev):transpose(1, 2)
  dist.broadcast(s, R - 1)
  assert(H.same(s:cpu(), ember.full({3, 4}, R - 1, {dtype = "float64"})))
end)
H.test("all_gather and reduce_scatter of cuda tensors", function()
  local g = dist.all_gather(ember.full({2}, me):to(dev))
  assert(g.device:find("cuda") and g:cpu()[R][1]:item() == R - 1)
  local rs = dist.reduce_scatter(ember.ones(2 * R):to(dev), "max")
  assert(rs.device:find("cuda") and H.same(rs:cpu(), ember.ones(2)))
end)
H.test("DistributedDataParallel on cuda: the same averaged gradients everywhere", function()
  ember.manual_seed(0)
  local m = nn.Linear(3, 2):to(dev)
  local ddp = dist.DistributedDataParallel(m)
  ddp(ember.ones(4, 3):to(dev) * (me + 1)):sum():backward()
  local gg = dist.all_gather(m.weight.grad:cpu())
  for r = 2, R do assert(H.same(gg[r], gg[1])) end
  -- the mean of the ranks' gradients: d(sum)/dW = sum of inputs = 4 (rank + 1), averaged
  local want = 4 * (R + 1) / 2
  assert(math.abs(gg[1][1][1]:item() - want) < 1e-5, "grad " .. gg[1][1][1]:item() .. " want " .. want)
  ddp:remove_hooks()
end)
H.done()
