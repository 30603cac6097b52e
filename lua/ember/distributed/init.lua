-- ember.distributed: data-parallel training over MPI (Open MPI on Debian).
--
--   local dist = require "ember.distributed"     -- run by `mpirun -np 2 build/bin/ember x.lua`
--   dist.init()                               -- from the environment mpirun sets
--   print(dist.rank(), dist.world_size())     -- 0 .. world_size-1, as MPI numbers them: 0 2, 1 2
--   local t = ember.ones(3)
--   dist.all_reduce(t)                        -- in place; op "sum" (default), "mean", "max", "min"
--   print(t:sum():item())                     --> 6.0
--   local w = dist.all_reduce(t, "mean", {async = true})
--   w:wait()                                  -- t holds the mean after wait()
--   local ddp = dist.DistributedDataParallel(nn.Linear(4, 2))
--
-- Ranks are MPI's own numbers, 0-based (rank 0 is the main process), as in
-- torch.distributed and TorchMPI: they name processes, they are not
-- positions in a Lua list. Lists that hold one entry per rank (what
-- all_gather_string returns, the rows of all_gather) are 1-based lists, so
-- rank r is entry r + 1.
--
-- The C side is the module ember.distributed_mpi, built only when MPI is
-- found; without it every function but is_available() raises an error
-- saying so. Collectives run on one communication thread per process, in
-- the order they were called, and wait with a timeout (init{timeout = s},
-- EMBER_DIST_TIMEOUT, default 300 s): a rank that died or stopped calling
-- becomes an error on the others, never a hang.
local ember = require "ember"

local raise_at_user = require("ember._errors").error -- at the first frame outside ember (tail calls too)

local M = {}
local okC, C = pcall(require, "ember.distributed_mpi")
local state = nil -- what init() learnt: rank, size, local_rank, local_size, library

local function need_c(fn)
  if not okC then
    local why = tostring(C)
    if why:find("module 'ember.distributed_mpi' not found", 1, true) then
      why = "ember/distributed_mpi.so was not built"
    end
    raise_at_user(("ember.distributed.%s: this ember has no MPI (install libopenmpi-dev and openmpi-bin, "
           .. "then rebuild): %s"):format(fn, why))
  end
end

local function need_init(fn)
  need_c(fn)
  if not state then raise_at_user(("ember.distributed.%s: call ember.distributed.init() first"):format(fn)) end
end

-- Is the MPI module built into this ember?
function M.is_available() return okC end

-- Was this process started by an MPI launcher (mpirun, mpiexec, srun)?
function M.is_launched()
  for _, v in ipairs({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) do
    if os.getenv(v) then return true end
  end
  return false
end

function M.is_initialized() return state ~= nil end

-- init([opts]): opts.timeout (seconds each collective may wait for the
-- other ranks), opts.threads (CPU threads of this rank; default: the
-- cores divided among the ranks on this machine, unless OMP_NUM_THREADS
-- or set_num_threads chose). Calling it again only changes the timeout.
function M.init(opts)
  opts = opts or {}
  need_c("init")
  for k in pairs(opts) do
    if k ~= "timeout" and k ~= "threads" then error(("ember.distributed.init: unknown option '%s'"):format(k), 2) end
  end
  local timeout = opts.timeout or tonumber(os.getenv("EMBER_DIST_TIMEOUT") or "") or 300
  if type(timeout) ~= "number" or timeout <= 0 then
    error("ember.distributed.init: timeout must be a positive number of seconds", 2)
  end
  local first = state == nil
  state = C.init(timeout)
  C.set_timeout(timeout)
  if first then
    if opts.threads then
      ember.set_num_threads(opts.threads)
    elseif not os.getenv("OMP_NUM_THREADS") and state.local_size > 1 then
      -- ranks on one machine share its cores; oversubscribed threads thrash
      ember.set_num_threads(math.max(1, ember.get_num_threads() // state.local_size))
    end
  end
  return M
end

function M.rank() need_init("rank") return state.rank end
function M.world_size() need_init("world_size") return state.size end
M.get_rank, M.get_world_size = M.rank, M.world_size -- torch.distributed's names
-- The rank among the processes on this machine (0-based), for picking a GPU: "cuda:" .. local_rank() + 1.
function M.local_rank() need_init("local_rank") return state.local_rank end
function M.local_world_size() need_init("local_world_size") return state.local_size end
-- The MPI library's version line.
function M.library() need_init("library") return state.library end
-- Does MPI read and write CUDA memory itself? Then contiguous CUDA tensors
-- go to it as they are; otherwise through a host copy. Open MPI says so
-- through MPIX_Query_cuda_support (Debian's build: no);
-- EMBER_DIST_CUDA_AWARE=0 or 1 overrides it.
function M.cuda_aware() need_init("cuda_aware") return state.cuda_aware end
-- Do the ranks reach each other through Open MPI's shared-memory transport
-- (all on one machine, and its btl parameter allows vader)? Over a network
-- all_reduce takes other algorithms (all_reduce_algorithm says which).
function M.shared_memory() need_init("shared_memory") return state.shared_memory end
function M.set_timeout(s) need_init("set_timeout") C.set_timeout(s) end
function M.get_timeout() need_init("get_timeout") return C.timeout() end

-- Rank and world size whether or not MPI runs: 0 and 1 without init.
function M.rank_or_0() return state and state.rank or 0 end
function M.size_or_1() return state and state.size or 1 end

-- The trailing options table of a collective: {async = bool}.
local function async_of(fn, o)
  if o == nil then return false end
  if type(o) ~= "table" then error(("ember.distributed.%s: options must be a table, got %s"):format(fn, type(o)), 3) end
  for k in pairs(o) do
    if k ~= "async" and k ~= "op" then error(("ember.distributed.%s: unknown option '%s'"):format(fn, tostring(k)), 3) end
  end
  return o.async == true
end

-- (t, op, opts) or (t, opts) with opts.op.
local function op_and_opts(a, b)
  if type(a) == "table" then return a.op, a end
  return a, b
end

-- Wraps a C handle so that wait() returns `result` (the output tensor).
local Work = {}
Work.__index = Work
function Work:wait() self.h:wait() return self.result end
function Work:is_completed() return self.h:is_completed() end
function Work:__tostring() return tostring(self.h) end
local function work(h, result) return setmetatable({h = h, result = result}, Work) end

-- A synchronous call waits on the C handle itself: no Work table for the
-- small collectives a training loop makes every step.
local function finish(h, async, result)
  if async then return work(h, result) end
  h:wait()
  return result
end

-- all_reduce(t [, op] [, {async = true}]): t becomes the reduction over all
-- ranks, in place. Returns t, or with async a handle whose wait() returns t
-- (read t only after wait()). bool tensors: sum and max are logical or,
-- min logical and; mean needs a floating-point dtype. Every rank passes a
-- tensor of the same number of elements: a rank whose differs gets an error
-- naming the sizes ("the tensors differ in size across ranks"), and one
-- whose dtype or op differs an error naming both, on the algorithms of
-- point-to-point messages (not on MPI_Allreduce: the "mpi" one, over 2 GiB,
-- or CUDA-aware), and the process can no longer communicate. broadcast,
-- all_gather and reduce_scatter compare every rank's count, dtype, op and
-- root first: a difference is the same error on every rank, which go on.
function M.all_reduce(t, op, opts)
  need_init("all_reduce")
  op, opts = op_and_opts(op, opts)
  local async = async_of("all_reduce", opts)
  if not async and C.all_reduce_now(t, op or "sum") then return t end
  return finish(C.all_reduce(t, op or "sum", not async), async, t)
end

-- all_reduce_algorithm(t): how all_reduce(t) would run, chosen by its
-- size, the rank count and the transport, alike on every rank:
-- "doubling" (recursive doubling: up to 32 KiB, or 1 MiB at 2 ranks over
-- TCP), "halving" (Rabenseifner's: larger, at a power of two ranks, until
-- bytes / ranks reaches 1 MiB), "ring" (beyond, and above 32 KiB at other
-- rank counts), all three made of point-to-point messages (a synchronous
-- one runs on the calling thread),
-- or "mpi" (MPI_Allreduce on the communication thread: one rank, zero
-- size, over 2 GiB, or CUDA memory that a CUDA-aware MPI takes as it is).
-- EMBER_DIST_ALLREDUCE=doubling|ring|halving|mpi (the same on every rank)
-- forces one.
function M.all_reduce_algorithm(t)
  need_init("all_reduce_algorithm")
  return C.all_reduce_algorithm(t)
end

-- broadcast(t, root): every rank's t becomes root's (root 0-based, default 0).
function M.broadcast(t, root, opts)
  need_init("broadcast")
  if type(root) == "table" then root, opts = root.root, root end
  root = root or 0
  if math.type(root) ~= "integer" then error("ember.distributed.broadcast: root must be an integer rank", 2) end
  local async = opts and opts.async == true
  return finish(C.broadcast(t, root), async, t)
end

-- all_gather(t [, {out = o, async = true}]) -> a tensor [world_size, ...t.shape]
-- whose row r + 1 is rank r's t (o: a tensor of that many elements to fill).
function M.all_gather(t, opts)
  need_init("all_gather")
  opts = opts or {}
  if type(opts) ~= "table" then
    error(("ember.distributed.all_gather: options must be a table, got %s"):format(type(opts)), 2)
  end
  for k in pairs(opts) do
    if k ~= "async" and k ~= "out" then
      error(("ember.distributed.all_gather: unknown option '%s'"):format(tostring(k)), 2)
    end
  end
  local out = opts.out
  if not out then
    local shape = {state.size}
    for _, s in ipairs(t.shape) do shape[#shape + 1] = s end
    out = ember.empty(shape, {dtype = t.dtype, device = t.device})
  end
  return finish(C.all_gather(out, t), opts.async == true, out)
end

-- reduce_scatter(t [, op] [, {async = true}]) -> this rank's block: t's
-- first dim is split into world_size blocks, each reduced over the ranks,
-- and rank r gets block r + 1.
function M.reduce_scatter(t, op, opts)
  need_init("reduce_scatter")
  op, opts = op_and_opts(op, opts)
  local async = async_of("reduce_scatter", opts)
  local shape = t.shape
  if #shape == 0 or shape[1] % state.size ~= 0 then
    error(("ember.distributed.reduce_scatter: the first dim (%s) must divide by the world size %d")
          :format(tostring(shape[1]), state.size), 2)
  end
  local oshape = {}
  for i, s in ipairs(shape) do oshape[i] = s end
  oshape[1] = shape[1] // state.size
  local out = ember.empty(oshape, {dtype = t.dtype, device = t.device})
  return finish(C.reduce_scatter(out, t, op or "sum"), async, out)
end

function M.barrier(opts)
  need_init("barrier")
  return finish(C.barrier(), opts and opts.async == true, nil)
end

-- all_gather_string(s) -> {rank 0's s, rank 1's s, ...}
function M.all_gather_string(s)
  need_init("all_gather_string")
  if type(s) ~= "string" then error("ember.distributed.all_gather_string: expected a string", 2) end
  return C.all_gather_string(s):wait()
end

-- Sums plain Lua numbers over the ranks (float64): sum_numbers(a, b, ...) -> a', b', ...
-- Identity without init, so scripts can use it either way.
function M.sum_numbers(...)
  local n = select("#", ...)
  if not state or state.size == 1 or n == 0 then return ... end
  local t = ember.tensor({...}, {dtype = "float64"})
  M.all_reduce(t)
  return table.unpack(t:totable())
end

-- Ends MPI (also done when the Lua state closes). Returns true, or false
-- and why it was skipped.
function M.finalize()
  if not okC or not state then return true end
  local ok, why = C.finalize()
  return ok, why
end

-- Why this process can no longer communicate (a collective failed or
-- timed out), or nil.
function M.broken() return okC and C.broken() or nil end

-- A collective's error (a timeout, an MPI error, a bad argument found in C)
-- is raised at the user's line that called it or waited for it.
local wrap = require("ember._errors").wrap
for _, name in ipairs{"init", "all_reduce", "all_reduce_algorithm", "broadcast", "all_gather", "reduce_scatter",
                      "barrier", "all_gather_string"} do
  M[name] = wrap(M[name])
end
-- Library callers inside a backward hook (DistributedDataParallel) use the
-- unwrapped wait: ember.backward already raises at the user's line.
Work.wait_unpositioned = Work.wait
Work.wait = wrap(Work.wait)

local lazy = {DistributedDataParallel = "ember.distributed.DistributedDataParallel",
              DistributedSampler = "ember.distributed.DistributedSampler",
              World = "ember.distributed.World"}
setmetatable(M, {__index = function(t, k)
  local name = lazy[k]
  if not name then return nil end
  local v = require(name)
  rawset(t, k, v)
  return v
end})

return M
