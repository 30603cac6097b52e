-- Every collective against a reference computed locally: each rank can
-- make every rank's input (a function of the rank), so the expected result
-- is computed here with ordinary tensor ops. All dtypes, contiguous and
-- non-contiguous inputs, zero-size and 0-d tensors, sync and async.
local ember = require "ember"
local dist = require "ember.distributed"
local H = dofile((os.getenv("EMBER_SOURCE_DIR") or ".") .. "/tests/distributed/harness.lua")

dist.init{timeout = 60}
local R, me = dist.world_size(), dist.rank()
H.check("init: world size " .. R .. ", rank in range", R >= 2 and me >= 0 and me < R)
H.check("local_rank in range", dist.local_rank() >= 0 and dist.local_rank() < dist.local_world_size())
H.check("get_rank and get_world_size, torch.distributed's names", dist.get_rank() == me and dist.get_world_size() == R)

-- Integer-valued data, so every reduction order gives the same answer in
-- every dtype (bfloat16 holds integers up to 256 exactly).
local function input(rank, dtype, shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  if n == 0 then return ember.zeros(shape, {dtype = dtype}) end
  local v = {}
  for i = 1, n do
    if dtype == "bool" then v[i] = ((i - 1 + rank) % 3 == 0) and 1 or 0
    else v[i] = ((i - 1) * 7 + rank * 5) % 11 - 4 end -- -4..6
  end
  local t = ember.tensor(v, {dtype = "float64"}):reshape(shape)
  if dtype == "bool" then return t:ne(0) end
  return t:to(dtype)
end

-- rank r's tensor: contiguous, or (layout "strided", 2-d shapes) the
-- transposed view of a contiguous [shape[2], shape[1]] tensor.
local function make(rank, dtype, shape, layout)
  if layout == "strided" then return input(rank, dtype, {shape[2], shape[1]}):transpose(1, 2) end
  return input(rank, dtype, shape)
end

local function reference(op, dtype, shape, layout)
  local acc
  for r = 0, R - 1 do
    local x = make(r, dtype, shape, layout):double()
    if not acc then acc = x
    elseif op == "sum" or op == "mean" then acc = dtype == "bool" and acc:maximum(x) or acc + x
    elseif op == "max" then acc = acc:maximum(x)
    else acc = acc:minimum(x) end
  end
  if op == "mean" then acc = acc / ember.tensor(R, {dtype = "float64"}) end -- one rounding of sum / R
  return acc:to(dtype)
end

local DTYPES = {"float32", "float64", "int64", "bool", "bfloat16"}
local SHAPES = {{5, 3}, {0, 4}, {}, {3000}}

for _, dt in ipairs(DTYPES) do
  for _, shape in ipairs(SHAPES) do
    local sh = "[" .. table.concat(shape, ",") .. "]"
    for _, op in ipairs({"sum", "mean", "max", "min"}) do
      local floaty = dt == "float32" or dt == "float64" or dt == "bfloat16"
      if op ~= "mean" or floaty then
        for _, layout in ipairs({"contiguous", "strided"}) do
          if layout == "contiguous" or #shape == 2 then
            H.test(("all_reduce %s %s %s %s"):format(op, dt, sh, layout), function()
              local t = make(me, dt, shape, layout)
              -- (an empty tensor is contiguous whatever its strides, as in PyTorch)
              if layout == "strided" and t:numel() > 0 then assert(not t:is_contiguous(), "expected a strided view") end
              local want = reference(op, dt, shape, layout)
              local ret = dist.all_reduce(t, op)
              assert(ret == t, "all_reduce returns its tensor")
              local ok, why = H.same(t, want)
              assert(ok, why)
            end)
          end
        end
      end
    end
    H.test(("all_reduce async sum %s %s"):format(dt, sh), function()
      local t = input(me, dt, shape)
      local w = dist.all_reduce(t, {async = true})
      assert(w:wait() == t)
      assert(w:is_completed())
      assert(H.same(t, reference("sum", dt, shape)))
    end)
    H.test(("broadcast %s %s from every root"):format(dt, sh), function()
      for root = 0, R - 1 do
        local t = input(me, dt, shape)
        dist.broadcast(t, root)
        assert(H.same(t, input(root, dt, shape)), "root " .. root)
      end
      if #shape == 2 then -- into a strided view
        local t = input(me, dt, {shape[2], shape[1]}):transpose(1, 2)
        dist.broadcast(t, R - 1, {async = true}):wait()
        assert(H.same(t, input(R - 1, dt, {shape[2], shape[1]}):transpose(1, 2)), "strided")
      end
    end)
    H.test(("all_gather %s %s"):format(dt, sh), function()
      local t = #shape == 2 and input(me, dt, {shape[2], shape[1]}):transpose(1, 2) or input(me, dt, shape)
      local g = dist.all_gather(t)
      assert(g.shape[1] == R and #g.shape == #shape + 1, "shape")
      for r = 0, R - 1 do
        local want = #shape == 2 and input(r, dt, {shape[2], shape[1]}):transpose(1, 2) or input(r, dt, shape)
        assert(H.same(g[r + 1], want), "row of rank " .. r)
      end
      local g2 = dist.all_gather(t, {async = true}):wait()
      assert(H.same(g2, g), "async")
    end)
    if #shape >= 1 then
      for _, op in ipairs({"sum", "max", "mean"}) do
        if op ~= "mean" or dt == "float32" or dt == "float64" or dt == "bfloat16" then
        H.test(("reduce_scatter %s %s %s"):format(op, dt, sh), function()
          local full = {R * shape[1]}
          for i = 2, #shape do full[i] = shape[i] end
          local out = dist.reduce_scatter(input(me, dt, full), op)
          local want = reference(op, dt, full):narrow(1, me * shape[1] + 1, shape[1])
          assert(H.same(out, want))
        end)
        end
      end
    end
  end
end

H.test("barrier, sync and async", function()
  dist.barrier()
  dist.barrier({async = true}):wait()
end)
H.test("all_gather_string", function()
  local all = dist.all_gather_string(("rank %d says %s"):format(me, string.rep("x", me)))
  assert(#all == R)
  for r = 0, R - 1 do assert(all[r + 1] == ("rank %d says %s"):format(r, string.rep("x", r)), all[r + 1]) end
end)
H.test("sum_numbers", function()
  local a, b = dist.sum_numbers(me, 1.5)
  assert(a == R * (R - 1) / 2 and b == 1.5 * R)
end)
H.test("many async all_reduces in flight, waited in reverse", function()
  local ts, ws = {}, {}
  for i = 1, 20 do
    ts[i] = ember.full({100}, i + me, {dtype = "float64"})
    ws[i] = dist.all_reduce(ts[i], "sum", {async = true})
  end
  for i = 20, 1, -1 do ws[i]:wait() end
  for i = 1, 20 do assert(ts[i][1]:item() == R * i + R * (R - 1) / 2, "tensor " .. i) end
end)
-- all_reduce's algorithms (core/distributed/comm_allreduce.c): recursive doubling
-- up to 32 KiB (1 MiB at 2 ranks over TCP, ctest's mpi.collectives.tcp),
-- then halving at a power of two ranks until the ring's chunk (bytes / R)
-- reaches 1 MiB, and the ring beyond; ctest also forces each one at every
-- size (EMBER_DIST_ALLREDUCE). Sizes on both sides of each limit, of the
-- 4000-byte pieces and of the 32 KiB pieces (messages up to 128 KiB), and uneven
-- chunks, with float32 values that rounding would show. Doubling and
-- halving add the ranks' parts left to right up to 3 ranks, so their result
-- is that float32 sum to the bit (at 2 ranks every algorithm is, as a + b
-- = b + a); every size agrees with the float64 sum to float32 rounding,
-- and every rank ends with the same bits.
local forced = os.getenv("EMBER_DIST_ALLREDUCE")
if forced == "" or forced == "auto" then forced = nil end
local function expected_algorithm(bytes)
  if forced then return forced end
  if bytes <= ((R == 2 and not dist.shared_memory()) and 2 ^ 20 or 32 * 1024) then return "doubling" end
  if R & (R - 1) == 0 and bytes // R < 2 ^ 20 then return "halving" end
  return "ring"
end
local function same_on_every_rank(t)
  local g = dist.all_gather(t)
  for r = 1, R do
    if (g[r]:double() - t:double()):abs():max():item() ~= 0 then return false, "rank " .. (r - 1) .. " differs" end
  end
  return true
end
H.test("all_reduce float32 on both sides of the algorithms' limits, sync and async", function()
  local function part(r, n) ember.manual_seed(100 + r) return ember.randn(n) end
  for _, n in ipairs({1, 2, 3, 999, 1000, 1001, 2001, 4096, 4097, 8192, 8193, 16384, 16385, 24577, 32768,
                      32769, 65536, 65537, 100003, 262144, 262147, 524287, 524288, 524289}) do
    local algo = dist.all_reduce_algorithm(part(me, n))
    assert(algo == expected_algorithm(4 * n), ("n=%d: %s, expected %s"):format(n, algo, expected_algorithm(4 * n)))
    local in_order, exact = part(0, n), part(0, n):double()
    for r = 1, R - 1 do in_order = in_order + part(r, n) exact = exact + part(r, n):double() end
    for _, async in ipairs({false, true}) do
      local t = part(me, n)
      if async then dist.all_reduce(t, {async = true}):wait() else dist.all_reduce(t) end
      local where = ("n=%d %s%s"):format(n, algo, async and " async" or "")
      if algo ~= "mpi" and (R == 2 or (R == 3 and algo ~= "ring")) then
        assert(H.same(t, in_order), where .. ": not the left-to-right float32 sum")
      end
      assert(H.max_rel_diff(t:double(), exact) < 1e-5, where .. ": off the float64 sum")
      assert(same_on_every_rank(t), where)
    end
  end
end)
-- max and min of NaN and signed zeros depend on the order of the operands:
-- still the same bits on every rank.
H.test("all_reduce max and min of NaN and signed zeros: the same bits on every rank", function()
  local nan = 0 / 0
  local values = {nan, -nan, 0.0, -0.0, 1.0, -1.0}
  for _, n in ipairs({7, 70001}) do
    local v = {}
    for i = 1, n do v[i] = values[(i + me) % #values + 1] end
    for _, op in ipairs({"max", "min"}) do
      local t = ember.tensor(v)
      dist.all_reduce(t, op)
      local g = dist.all_gather(t)
      local mine = t:totable()
      for r = 1, R do
        local theirs = g[r]:totable()
        for i = 1, n do
          if string.pack("<f", mine[i]) ~= string.pack("<f", theirs[i]) then
            error(("n=%d %s: element %d is %s here, %s on rank %d"):format(n, op, i, mine[i], theirs[i], r - 1))
          end
        end
      end
    end
  end
end)
-- mpirun --mca btl passes its choice on as OMPI_MCA_btl
H.test("shared_memory() says whether Open MPI's shared-memory transport links the ranks", function()
  local btl = os.getenv("OMPI_MCA_btl")
  assert(type(dist.shared_memory()) == "boolean")
  if btl == "self,tcp" then assert(dist.shared_memory() == false, "btl self,tcp is not shared memory") end
  if btl == nil or btl == "self,vader" then assert(dist.shared_memory() == true, "one machine, vader allowed") end
end)
H.raises("mean of int64 is an error", "mean.*floating", function()
  dist.all_reduce(ember.ones({2}, {dtype = "int64"}), "mean")
end)
H.raises("unknown op is an error", "all_reduce: unknown op 'prod' %(expected sum, mean, max or min%)",
  function() dist.all_reduce(ember.ones(2), "prod") end)
H.raises("reduce_scatter: unknown op", "reduce_scatter: unknown op 'avg'",
  function() dist.reduce_scatter(ember.ones(R), "avg") end)
H.raises("options that are not a table", "all_gather: options must be a table, got number",
  function() dist.all_gather(ember.ones(2), 5) end)
H.raises("bad root is an error", "root rank", function() dist.broadcast(ember.ones(2), R) end)
H.raises("reduce_scatter needs a divisible first dim", "divide by the world size",
         function() dist.reduce_scatter(ember.ones(R + 1)) end)
H.raises("not a tensor", "must be a tensor", function() dist.all_reduce({1, 2}) end)
-- Calls that differ across ranks (the last rank passes another count,
-- dtype, root or op): MPI compares none of it, and the result was silently
-- wrong on some ranks (bytes reinterpreted as another dtype, a tail left as
-- it was) or an error on others. Now every rank raises the same error, at
-- the user's line, naming both ranks' calls, and they go on working together.
local last = R - 1
local odd = me == last
local function differs(what, pattern, fn)
  H.raises(what .. ": an error on every rank, naming both calls",
           "^[^\n]*collectives%.lua:%d+: ember%.distributed: rank " .. me .. " %(of " .. R .. " ranks%): .-" .. pattern, fn)
end
local other = odd and "0" or tostring(last)
differs("broadcast of tensors whose sizes differ", ("broadcast: the tensors differ across ranks: this rank %%(%d%%) passes %d "
        .. "float32 elements from root 0, rank %s passes %d float32"):format(me, odd and 3 or 2, other, odd and 2 or 3),
        function() dist.broadcast(ember.ones(odd and 3 or 2), 0) end)
differs("broadcast of the same bytes in another dtype", ("passes %s elements from root 0, rank %s passes %s elements"):format(
        odd and "2 float64" or "4 float32", other, odd and "4 float32" or "2 float64"),
        function() dist.broadcast(odd and ember.ones(2, {dtype = "float64"}) or ember.ones(4), 0) end)
differs("broadcast from another root", ("from root %d, rank %s passes 2 float32 elements from root %d"):format(
        odd and 1 or 0, other, odd and 0 or 1), function() dist.broadcast(ember.ones(2), odd and 1 or 0) end)
differs("all_gather of tensors whose sizes differ", ("all_gather: the tensors differ across ranks: this rank %%(%d%%) passes %d "
        .. "int64 elements, rank %s passes %d int64 elements"):format(me, odd and 3 or 2, other, odd and 2 or 3),
        function() dist.all_gather(ember.ones(odd and 3 or 2, {dtype = "int64"})) end)
differs("reduce_scatter with another op", ("reduce_scatter: the tensors differ across ranks: .*, op %s, rank %s .*, op %s"):format(
        odd and "max" or "sum", other, odd and "sum" or "max"),
        function() dist.reduce_scatter(ember.ones(R), odd and "max" or "sum") end)
differs("reduce_scatter in another dtype", ("passes 1 %s elements, op sum, rank %s passes 1 %s elements"):format(
        odd and "bfloat16" or "float32", other, odd and "float32" or "bfloat16"),
        function() dist.reduce_scatter(ember.ones(R, {dtype = odd and "bfloat16" or "float32"})) end)
H.check("no rank is broken by calls that differ", dist.broken() == nil, dist.broken())
H.test("the process lives on after argument errors", function()
  local t = ember.ones(3)
  dist.all_reduce(t)
  assert(t[1]:item() == R)
end)
H.done()
