-- DistributedDataParallel against one process: R ranks at per-rank batch
-- B/R must end where one process ends at batch B (the reference runs
-- here too, on every rank, on the whole batch), in float32 within 1e-5
-- relative and, with 2 ranks and one sample each, exactly in float64.
-- Also: several buckets, overlap off, no_sync accumulation, an unused
-- parameter, and the gradients every rank holds being the same.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local dist = require "ember.distributed"
local H = dofile((os.getenv("EMBER_SOURCE_DIR") or ".") .. "/tests/distributed/harness.lua")

dist.init{timeout = 60}
local R, me = dist.world_size(), dist.rank()

local function make_model(dtype, extra)
  ember.manual_seed(1234 + me * 0) -- same start on every rank (DDP broadcasts anyway)
  local m = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 3))
  if extra then
    local Holder = nn.Module:extend("Holder")
    function Holder:__init(inner)
      self:add_module("inner", inner)
      self:register_parameter("unused", ember.ones(5):requires_grad_())
    end
    function Holder:forward(x) return self.inner(x) end
    m = Holder(m)
  end
  return dtype == "float64" and m:double() or m
end

-- the same data on every rank
ember.manual_seed(99)
local N = 12 * R * 4
local X = ember.randn(N, 6)
local ys = {}
for i = 1, N do ys[i] = (i * 7) % 3 + 1 end
local Y = ember.tensor(ys, {dtype = "int64"})

-- Trains `steps` steps; world: nil (one process, batch B) or the DDP options.
-- extra: the model has a parameter forward never uses; prepare(model): runs
-- before the wrapper and the optimizer (freezes, reinitialises per rank).
local function train(dtype, B, steps, ddp_opts, opt_kind, extra, prepare)
  local model = make_model(dtype, extra or ddp_opts and ddp_opts.extra)
  if prepare then prepare(model) end
  local net = model
  if ddp_opts then
    local o = {}
    for k, v in pairs(ddp_opts) do if k ~= "extra" then o[k] = v end end
    net = dist.DistributedDataParallel(model, o)
  end
  local params = net:parameters()
  local opt = opt_kind == "sgd" and optim.SGD(params, {lr = 0.1}) or optim.AdamW(params, {lr = 1e-2})
  local sampler = dist.DistributedSampler(N, {num_replicas = ddp_opts and R or 1, rank = ddp_opts and me or 0,
                                              shuffle = true, seed = 7})
  local x, y = X:to(dtype), Y
  local ds = {gather = function(_, idx) return {x = x:index_select(1, idx), y = y:index_select(1, idx)} end}
  local per = ddp_opts and B // R or B
  local step = 0
  for epoch = 1, 100 do
    sampler:set_epoch(epoch)
    for b in sampler:batches(ds, per) do
      local loss = ember.cross_entropy(net(b.x), b.y)
      opt:zero_grad()
      loss:backward()
      opt:step()
      step = step + 1
      if step == steps then return model, net end
    end
  end
  return model, net
end

local function compare(a, b)
  local worst = 0
  local na, nb = a:parameter_names(), b:named_parameters()
  for _, n in ipairs(na) do
    local d = H.max_rel_diff(a:named_parameters()[n], nb[n])
    if d > worst then worst = d end
  end
  return worst
end

H.test(("float32, AdamW, 6 steps: %d ranks at batch 4 = one process at batch %d"):format(R, 4 * R), function()
  local ref = train("float32", 4 * R, 6, nil)
  local got = train("float32", 4 * R, 6, {})
  local d = compare(got, ref)
  assert(d <= 1e-5, "max relative difference " .. d)
end)

H.test("float32, many small buckets, overlap on and off agree with one process", function()
  local ref = train("float32", 4 * R, 4, nil)
  local m1, ddp1 = train("float32", 4 * R, 4, {bucket_cap_mb = 0.0001})
  assert(#ddp1:bucket_sizes() >= 4, "expected several buckets, got " .. #ddp1:bucket_sizes())
  local m2 = train("float32", 4 * R, 4, {bucket_cap_mb = 0.0001, overlap = false})
  assert(compare(m1, ref) <= 1e-5, "overlap " .. compare(m1, ref))
  assert(compare(m2, ref) <= 1e-5, "no overlap " .. compare(m2, ref))
  ddp1:remove_hooks()
end)

H.test("bucket order: reverse registration, default 25 MiB holds this model in one bucket", function()
  local m = make_model("float32")
  local ddp = dist.DistributedDataParallel(m)
  assert(#ddp:bucket_sizes() == 1, "buckets " .. #ddp:bucket_sizes())
  ddp:remove_hooks()
  local ddp2 = dist.DistributedDataParallel(m, {bucket_cap_mb = 16 * 3 * 4 / 2 ^ 20})
  -- the last Linear's weight (16x3) fills the first bucket alone
  assert(ddp2:bucket_sizes()[1] == 3, "first bucket holds the last bias first: " .. ddp2:bucket_sizes()[1])
  ddp2:remove_hooks()
end)

-- float64 exactly: a model whose gradients reduce over the batch by plain
-- sums (an elementwise scale and shift, then tanh and a squared error), so
-- that with one sample per rank, one process's sum of two terms is the
-- ranks' sum of the same two terms, and every scaling is by a power of two.
-- (A Linear layer's gradient goes through gemm, whose fused multiply-adds
-- round a two-term sum differently from two rounded products; float64
-- training with Linear layers is checked within 1e-12 below.)
local function train_affine(B, steps, use_ddp)
  local Affine = nn.Module:extend("Affine")
  function Affine:__init(n)
    self:register_parameter("w", ember.ones(n, {dtype = "float64"}):requires_grad_())
    self:register_parameter("b", ember.zeros(n, {dtype = "float64"}):requires_grad_())
  end
  function Affine:forward(x) return (x * self.w + self.b):tanh() end
  local model = Affine(6)
  local net = use_ddp and dist.DistributedDataParallel(model) or model
  local opt = optim.SGD(net:parameters(), {lr = 0.5})
  local x, t = X:double(), X:double():sin()
  local per = use_ddp and B // R or B
  for step = 1, steps do
    local start = (step - 1) * B + (use_ddp and me * per or 0)
    local xb, tb = x:narrow(1, start + 1, per), t:narrow(1, start + 1, per)
    local d = net(xb) - tb
    local loss = (d * d):mean()
    opt:zero_grad()
    loss:backward()
    opt:step()
  end
  if use_ddp then net:remove_hooks() end
  return model
end

if R == 2 then
  H.test("float64, SGD, 2 ranks at batch 1 = one process at batch 2, exactly", function()
    local d = compare(train_affine(2, 8, true), train_affine(2, 8, false))
    assert(d == 0, "max relative difference " .. d)
  end)
end
H.test(("float64, SGD, Linear layers: %d ranks within 1e-12 of one process"):format(R), function()
  local ref = train("float64", R, 6, nil, "sgd")
  local got = train("float64", R, 6, {}, "sgd")
  local d = compare(got, ref)
  assert(d <= 1e-12, "max relative difference " .. d)
end)

H.test("every rank holds the same averaged gradient", function()
  local m = make_model("float32")
  local ddp = dist.DistributedDataParallel(m)
  local x = X:narrow(1, me * 4 + 1, 4) -- different data per rank
  ember.cross_entropy(ddp(x), Y:narrow(1, me * 4 + 1, 4)):backward()
  for _, p in ipairs(ddp:parameters()) do
    local g = dist.all_gather(p.grad)
    for r = 2, R do assert(H.same(g[r], g[1]), "rank " .. (r - 1) .. " differs") end
  end
  ddp:remove_hooks()
end)

H.test("no_sync: two accumulated micro-batches = one process's two backward passes", function()
  local per = 3
  local function micro(k, rank, world) -- micro-batch k's rows of `rank` among `world`
    local start = (k - 1) * per * R + rank * (per * R // world)
    return X:narrow(1, start + 1, per * R // world), Y:narrow(1, start + 1, per * R // world)
  end
  local ref = make_model("float32")
  for k = 1, 2 do
    local x, y = micro(k, 0, 1)
    ember.cross_entropy(ref(x), y):backward()
  end
  local m = make_model("float32")
  local ddp = dist.DistributedDataParallel(m)
  local x1, y1 = micro(1, me, R)
  ddp:no_sync(function() ember.cross_entropy(ddp(x1), y1):backward() end)
  -- after no_sync the gradient is still local: it differs across ranks
  local x2, y2 = micro(2, me, R)
  ember.cross_entropy(ddp(x2), y2):backward()
  local worst = 0
  local rn = ref:named_parameters()
  for n, p in pairs(m:named_parameters()) do worst = math.max(worst, H.max_rel_diff(p.grad, rn[n].grad)) end
  assert(worst <= 1e-5, "max relative difference " .. worst)
  ddp:remove_hooks()
end)

H.test("a parameter forward never uses: backward ends, its gradient stays nil, AdamW = one process", function()
  -- AdamW's weight decay moved the unused parameter when DDP gave it a zero gradient
  local ref = train("float32", 4 * R, 3, nil, nil, true)
  local m, ddp = train("float32", 4 * R, 3, {extra = true})
  assert(m.unused.grad == nil, "unused grad " .. tostring(m.unused.grad))
  local d = compare(m, ref)
  assert(d <= 1e-5, "max relative difference " .. d)
  ddp:remove_hooks()
end)

H.test("frozen parameters: rank 0's values, no gradient, training = one process", function()
  local function freeze(model) -- the first Linear frozen, with values that differ per rank
    local l1 = model[1] or model.inner[1]
    ember.no_grad(function() l1.weight:add_(me) end)
    l1.weight:requires_grad_(false)
    l1.bias:requires_grad_(false)
  end
  local ref = train("float32", 4 * R, 3, nil, nil, nil, function(model)
    local l1 = model[1]
    l1.weight:requires_grad_(false)
    l1.bias:requires_grad_(false)
  end)
  local m, ddp = train("float32", 4 * R, 3, {}, nil, nil, freeze)
  assert(m[1].weight.grad == nil and m[1].bias.grad == nil, "a frozen parameter got a gradient")
  assert(#ddp:bucket_sizes() == 1 and ddp:bucket_sizes()[1] == 16 * 3 + 3 + 16 + 16,
         "frozen parameters in a bucket: " .. table.concat(ddp:bucket_sizes(), ","))
  local d = compare(m, ref)
  assert(d <= 1e-5, "max relative difference " .. d)
  ddp:remove_hooks()
end)

H.test("the wrapper forwards the module API", function()
  local m = make_model("float32")
  local ddp = dist.DistributedDataParallel(m)
  assert(#ddp:parameters() == #m:parameters())
  assert(ddp.module == m)
  ddp:eval()
  assert(m.training == false)
  assert(tostring(ddp):find("DistributedDataParallel"))
  ddp:remove_hooks()
end)

H.raises("unknown option", "unknown option 'bucket_size'", function()
  dist.DistributedDataParallel(make_model("float32"), {bucket_size = 3})
end)
H.done()
