-- What a PyTorch user reaches for that ember lacked (each was nil):
-- torch.utils.data's TensorDataset and DataLoader (ember.data), 
-- torch.inference_mode, torch.Generator with the generator= option of the
-- random functions, and torch.nn.utils (clip_grad_norm_, clip_grad_value_,
-- parameters_to_vector, vector_to_parameters, rnn.pad_sequence). PyTorch's
-- numbers come from tests/fixtures/nn_pytorch_user.lua (gen_nn_fixtures.py,
-- pytorch_user_cases); the rest holds by construction.
local ember = require "ember"
local nn, optim, data = require "ember.nn", require "ember.optim", require "ember.data"
local parity = require "tests.lua.helpers.parity"
local raises_here, T, check = parity.raises_here, parity.T, parity.check

local FX = dofile("tests/fixtures/nn_pytorch_user.lua")

local function rows_of(t) return t:totable() end

describe("data.TensorDataset", function()
  it("rows are tuples: ds[i] (1-based, negative from the end) and #ds", function()
    local x = ember.arange(12):view(4, 3)
    local y = ember.tensor({ 10, 20, 30, 40 }, { dtype = "int64" })
    local ds = data.TensorDataset(x, y)
    assert.are.equal(4, #ds)
    local xi, yi = table.unpack(ds[2])
    assert.are.same({ 3, 4, 5 }, xi:totable())
    assert.are.equal(20, yi:item())
    assert.are.equal(40, ds[-1][2]:item())
    assert.are.equal(2, #ds[1])
    assert.are.equal(x, ds.tensors[1])
    assert.are.equal(y, ds.tensors[2])
    assert.truthy(tostring(ds):find("TensorDataset(4 rows", 1, true))
  end)

  it("one tensor gives 1-tuples; it batches as a Dataset", function()
    local ds = data.TensorDataset(ember.arange(5))
    assert.are.equal(1, #ds[3])
    assert.are.equal(2, ds[3][1]:item())
    local sizes = {}
    for b in ds:batches(2) do sizes[#sizes + 1] = b[1]:size(1) end
    assert.are.same({ 2, 2, 1 }, sizes)
    local sub = ds:subset(2)
    assert.are.equal(2, #sub)
    assert.are.equal(1, sub[2][1]:item())
  end)

  it("refuses what torch refuses, at the caller's line", function()
    raises_here(function() data.TensorDataset(ember.zeros(3), ember.zeros(4)) end,
      "TensorDataset: size mismatch between tensors: tensor 1 has 3 rows, tensor 2 has 4")
    raises_here(function() data.TensorDataset(ember.zeros(3), { 1, 2, 3 }) end, "TensorDataset: argument 2 is a table")
    raises_here(function() data.TensorDataset() end, "TensorDataset: give at least one tensor")
    raises_here(function() data.TensorDataset(ember.tensor(1)) end, "TensorDataset: tensor 1 is 0-d")
    local ds = data.TensorDataset(ember.zeros(3))
    raises_here(function() return ds[4] end, "row 4 is out of range")
  end)
end)

describe("data.DataLoader", function()
  local x, y, ds
  before_each(function()
    x = ember.arange(20):view(10, 2)
    y = ember.arange(1, 11, "int64")
    ds = data.TensorDataset(x, y)
  end)

  local function epoch_ids(loader)
    local ids = {}
    for _, yb in loader:iter() do for _, v in ipairs(yb:totable()) do ids[#ids + 1] = v end end
    return ids
  end

  it("batches in order: `for x, y in loader:iter()` unpacks, `for batch, i in loader` gives the tuple", function()
    local loader = data.DataLoader(ds, { batch_size = 4 })
    assert.are.equal(3, #loader)
    local seen = {}
    for xb, yb in loader:iter() do seen[#seen + 1] = { xb:size(1), yb:totable() } end
    assert.are.same({ { 4, { 1, 2, 3, 4 } }, { 4, { 5, 6, 7, 8 } }, { 2, { 9, 10 } } }, seen)
    local n = 0
    for batch, i in loader do
      n = n + 1
      assert.are.equal(n, i)
      assert.are.equal(2, #batch)
      assert.are.same(x:index_select(1, batch[2]):totable(), batch[1]:totable())
    end
    assert.are.equal(3, n)
    -- torch's next(iter(loader))
    local it = loader:iter()
    local xb, yb = it()
    assert.are.same({ 1, 2, 3, 4 }, yb:totable())
    assert.are.same({ 4, 2 }, { xb:size(1), xb:size(2) })
  end)

  it("drop_last, the default batch size 1, and DataLoader(ds, batch_size)", function()
    assert.are.equal(2, #data.DataLoader(ds, { batch_size = 4, drop_last = true }))
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, epoch_ids(data.DataLoader(ds, { batch_size = 4, drop_last = true })))
    local one = data.DataLoader(ds)
    assert.are.equal(10, #one)
    assert.are.equal(1, one.batch_size)
    local l = data.DataLoader(ds, 3, { drop_last = true })
    assert.are.same({ 3, true }, { l.batch_size, l.drop_last })
    assert.are.equal(3, #l)
  end)

  it("shuffle: a new permutation each epoch, the same ones after ember.manual_seed", function()
    local loader = data.DataLoader(ds, { batch_size = 3, shuffle = true })
    ember.manual_seed(7)
    local e1, e2 = epoch_ids(loader), epoch_ids(loader)
    local sorted = { table.unpack(e1) }
    table.sort(sorted)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, sorted)
    assert.are_not.same(e1, e2)
    assert.are_not.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, e1)
    ember.manual_seed(7)
    assert.are.same(e1, epoch_ids(loader))
    assert.are.same(e2, epoch_ids(loader))
  end)

  it("generator = g (or seed = n) orders the epochs and leaves the global generator alone", function()
    local g = ember.Generator():manual_seed(3)
    local loader = data.DataLoader(ds, { batch_size = 5, shuffle = true, generator = g })
    local before = ember.get_rng_state()
    local e1, e2 = epoch_ids(loader), epoch_ids(loader)
    assert.are.same(before, ember.get_rng_state())
    assert.are_not.same(e1, e2)
    g:manual_seed(3)
    assert.are.same(e1, epoch_ids(loader))
    local seeded = data.DataLoader(ds, { batch_size = 5, shuffle = true, seed = 3 })
    assert.are.same(e1, epoch_ids(seeded))
    assert.are.same(e2, epoch_ids(seeded))
  end)

  it("each `for batch in loader` is an epoch; loops may nest or break", function()
    local loader = data.DataLoader(ds, { batch_size = 5 })
    local pairs_seen = 0
    for b1 in loader do
      for b2 in loader do pairs_seen = pairs_seen + 1; assert.truthy(b1 ~= b2) end
    end
    assert.are.equal(4, pairs_seen)
    for _ in loader do break end
    local firsts = {}
    for batch in loader do firsts[#firsts + 1] = batch[2]:totable()[1] end
    assert.are.same({ 1, 6 }, firsts)
  end)

  it("an ember.data.Dataset: its named batches, padding trimmed, as ds:batches gives them", function()
    local ids = ember.tensor({ { 5, 6, 1 }, { 7, 1, 1 }, { 8, 9, 1 } }, { dtype = "int64" })
    local named = data.Dataset({ x = ids, y = ember.tensor({ 1, 2, 1 }, { dtype = "int64" }) }, { pad = { x = 1 } })
    local got = {}
    for b in data.DataLoader(named, { batch_size = 2 }) do got[#got + 1] = b end
    local want = {}
    for b in named:batches(2) do want[#want + 1] = b end
    assert.are.equal(2, #got)
    for i = 1, 2 do
      for _, k in ipairs { "x", "y", "x_mask" } do assert.are.same(want[i][k]:totable(), got[i][k]:totable()) end
    end
    assert.are.same({ 2, 2 }, { got[1].x:size(1), got[1].x:size(2) })
  end)

  it("any table with a length and rows ds[i] or ds:get(i), a plain list and a tensor", function()
    -- a plain list of (tensor, number) samples
    local list = {}
    for i = 1, 5 do list[i] = { ember.full({ 2 }, i), i } end
    local got = {}
    for xb, yb in data.DataLoader(list, { batch_size = 2 }):iter() do got[#got + 1] = { xb:totable(), yb:totable(), yb.dtype } end
    assert.are.same({ { { 1, 1 }, { 2, 2 } }, { 1, 2 }, "int64" }, got[1])
    assert.are.same({ { { 5, 5 } }, { 5 }, "int64" }, got[3])
    -- __len and __index
    local squares = setmetatable({}, { __len = function() return 4 end,
      __index = function(_, i) return { v = i * i, name = "n" .. i } end })
    local batches = {}
    for b in data.DataLoader(squares, { batch_size = 3 }) do batches[#batches + 1] = b end
    assert.are.same({ 1, 4, 9 }, batches[1].v:totable())
    assert.are.same({ "n1", "n2", "n3" }, batches[1].name)
    assert.are.same({ 16 }, batches[2].v:totable())
    -- a class with get(i)
    local Src = {}
    Src.__index = Src
    Src.__len = function() return 3 end
    function Src:get(i) return ember.tensor({ i, -i }) end
    local b = data.DataLoader(setmetatable({}, Src), { batch_size = 3 }):iter()()
    assert.are.same({ { 1, -1 }, { 2, -2 }, { 3, -3 } }, b:totable())
    -- a get(i) that returns two values, as torch's `return img, label`: the row {img, label}
    -- (only img was kept: the labels were lost, and iter's second value was the batch number)
    local Pairs = { __len = function() return 3 end }
    Pairs.__index = Pairs
    function Pairs:get(i) return ember.full({ 2 }, i), 10 * i end
    local xb, yb = data.DataLoader(setmetatable({}, Pairs), { batch_size = 3 }):iter()()
    assert.are.same({ { 1, 1 }, { 2, 2 }, { 3, 3 } }, xb:totable())
    assert.are.same({ 10, 20, 30 }, yb:totable())
    local sub = data.Subset(setmetatable({}, Pairs), { 3, 1 })
    local sx, sy = data.DataLoader(sub, { batch_size = 2 }):iter()()
    assert.are.same({ 30, 10 }, sy:totable())
    assert.are.same({ { 3, 3 }, { 1, 1 } }, sx:totable())
    -- a tensor: its rows
    local t = ember.arange(6):view(3, 2)
    local first = data.DataLoader(t, { batch_size = 2 }):iter()()
    assert.are.same({ { 0, 1 }, { 2, 3 } }, first:totable())
  end)

  it("collate_fn gets the list of rows", function()
    local calls = {}
    local loader = data.DataLoader(ds, { batch_size = 4, collate_fn = function(rows)
      calls[#calls + 1] = #rows
      assert.are.equal(2, #rows[1])
      return rows[1][2]:item()
    end })
    local firsts = {}
    for v in loader do firsts[#firsts + 1] = v end
    assert.are.same({ 1, 5, 9 }, firsts)
    assert.are.same({ 4, 4, 2 }, calls)
  end)

  it("default_collate: torch's rules", function()
    local c = data.default_collate
    assert.are.equal("float64", c({ 1.5, 2 }).dtype)       -- a float first: float64
    assert.are.equal("int64", c({ 1, 2 }).dtype)
    assert.are.equal("float32", c({ 1, 2.5 }).dtype)       -- torch.tensor([1, 2.5])
    assert.are.equal("bool", c({ true, false }).dtype)
    assert.are.same({ "a", "b" }, c({ "a", "b" }))
    local nested = c({ { p = { ember.zeros(2), 1 } }, { p = { ember.ones(2), 2 } } })
    assert.are.same({ { 0, 0 }, { 1, 1 } }, nested.p[1]:totable())
    assert.are.same({ 1, 2 }, nested.p[2]:totable())
    raises_here(function() c({ ember.zeros(2), ember.zeros(3) }) end, "default_collate: item 2 is [3] float32, item 1 is [2] float32")
    raises_here(function() c({ { 1, 2 }, { 1 } }) end, "each element in list of batch should be of equal size")
    raises_here(function() c({ 1, "a" }) end, "default_collate: item 2 of the batch is a string, item 1 a number")
    raises_here(function() c({ print }) end, "found function")
    raises_here(function() c({}) end, "default_collate: the batch is empty")
  end)

  it("sampler: a list of rows, or anything with indices()", function()
    local l = data.DataLoader(ds, { batch_size = 2, sampler = { 10, 1, 5 } })
    assert.are.equal(2, #l)
    assert.are.same({ 10, 1, 5 }, epoch_ids(l))
    local s = { indices = function() return ember.tensor({ 3, 2 }, { dtype = "int64" }) end }
    assert.are.same({ 3, 2 }, epoch_ids(data.DataLoader(ds, { batch_size = 4, sampler = s })))
  end)

  it("refuses bad options and datasets at the caller's line", function()
    raises_here(function() data.DataLoader(ds, { batch_sz = 2 }) end, "DataLoader: unknown option 'batch_sz'")
    raises_here(function() data.DataLoader(ds, { batch_size = 0 }) end, "DataLoader: batch_size must be a positive integer, got 0")
    raises_here(function() data.DataLoader(ds, { shuffle = "yes" }) end, "DataLoader: shuffle must be a boolean")
    raises_here(function() data.DataLoader(ds, { shuffle = true, sampler = { 1 } }) end, "mutually exclusive with shuffle")
    raises_here(function() data.DataLoader(ds, { generator = 5 }) end, "DataLoader: generator must be an ember.Generator")
    raises_here(function() data.DataLoader(ds, { generator = ember.Generator(), seed = 1 }) end, "give generator or seed")
    raises_here(function() data.DataLoader(42) end, "DataLoader: the dataset must be")
    raises_here(function() data.DataLoader(ds, { collate_fn = 1 }) end, "collate_fn must be a function")
    local holes = setmetatable({}, { __len = function() return 2 end, __index = function() return nil end })
    local l = data.DataLoader(holes)
    raises_here(function() for _ in l do end end, "DataLoader: row 1 of the dataset is nil")
    -- num_workers / pin_memory: torch's, accepted, loading stays in this process
    assert.are.equal(10, #data.DataLoader(ds, { num_workers = 4, pin_memory = true }))
  end)
end)

describe("ember.inference_mode", function()
  local w
  before_each(function() w = ember.ones(2):requires_grad_() end)

  it("as a scope and around a function: what is made inside does not require grad", function()
    do
      local g <close> = ember.inference_mode()
      assert.is_false((w * 2).requires_grad)
      assert.is_true(ember.is_inference_mode_enabled())
      assert.is_false(ember.is_grad_enabled())
    end
    assert.is_true((w * 2).requires_grad)
    assert.is_false(ember.is_inference_mode_enabled())
    local r, extra = ember.inference_mode(function(a, b) return (w * a).requires_grad, b end, 3, "x")
    assert.is_false(r)
    assert.are.equal("x", extra)
    assert.is_true(ember.is_grad_enabled())
  end)

  it("inference_mode(false) turns recording on inside, as torch's; errors restore the mode", function()
    do
      local g <close> = ember.inference_mode(true)
      do
        local h <close> = ember.inference_mode(false)
        assert.is_true((w * 2).requires_grad)
        assert.is_false(ember.is_inference_mode_enabled())
      end
      assert.is_false((w * 2).requires_grad)
      assert.is_true(ember.is_inference_mode_enabled())
    end
    assert.is_false(pcall(ember.inference_mode, function() error("boom") end))
    assert.is_true(ember.is_grad_enabled())
    assert.is_false(ember.is_inference_mode_enabled())
    raises_here(function() ember.inference_mode(3) end, "ember.inference_mode: expected a function")
    raises_here(function() ember.inference_mode(true, print) end, "takes no function")
  end)
end)

describe("ember.Generator", function()
  it("leaves a bad call's error at the user's line, with and without a generator", function()
    raises_here(function() ember.randn(-1) end, "ember.randn: shape entries must be >= 0, got -1")
    raises_here(function() ember.rand(2, "x") end, "unknown dtype 'x'")
    raises_here(function() ember.randn(-2, { generator = ember.Generator() }) end,
      "ember.randn: shape entries must be >= 0, got -2")
  end)

  it("torch's methods: manual_seed returns g, initial_seed, seed, get_state/set_state", function()
    local g = ember.Generator()
    assert.are.equal(67280421310721, g:initial_seed())
    assert.are.equal(g, g:manual_seed(42))
    assert.are.equal(42, g:initial_seed())
    local s = g:get_state()
    local a = ember.rand(4, { generator = g })
    assert.are_not.same(s, g:get_state())
    assert.are.equal(g, g:set_state(s))
    assert.is_true(ember.equal(a, ember.rand(4, { generator = g })))
    local fresh = g:seed()
    assert.are.equal("integer", math.type(fresh))
    assert.is_true(fresh >= 0)
    assert.are.equal(fresh, g:initial_seed())
    assert.are.equal(fresh, g:get_state().seed)
    assert.are.equal("cpu", ember.Generator("cpu").device)
  end)

  -- name -> a draw taking {generator = g} where torch takes generator=
  local DRAWS = {
    rand = function(g) return ember.rand(2, 3, { generator = g, dtype = "float64" }) end,
    randn = function(g) return ember.randn({ 5 }, { generator = g }) end,
    randint = function(g) return ember.randint(0, 100, { 6 }, { generator = g }) end,
    randperm = function(g) return ember.randperm(8, { generator = g }) end,
    multinomial = function(g) return ember.multinomial(ember.ones(2, 6), 3, { generator = g }) end,
    method_multinomial = function(g) return ember.ones(6):multinomial(16, { replacement = true, generator = g }) end,
    bernoulli = function(g) return ember.bernoulli(ember.full({ 16 }, 0.5), { generator = g }) end,
    normal = function(g) return ember.normal(2, 3, { 4 }, { generator = g }) end,
    uniform_ = function(g) return ember.zeros(5):uniform_(-1, 1, { generator = g }) end,
    normal_ = function(g) return ember.zeros(5):normal_(0, 1, { generator = g }) end,
  }
  for name, draw in pairs(DRAWS) do
    it(name .. " draws from g: the same seed gives the same numbers, the global generator does not move", function()
      ember.manual_seed(123)
      local before = ember.get_rng_state()
      local g = ember.Generator():manual_seed(9)
      local a = draw(g)
      local after_one = g:get_state()
      local b = draw(g)
      assert.are.same(before, ember.get_rng_state())
      assert.is_true(after_one.offset > 0)
      g:manual_seed(9)
      assert.is_true(ember.equal(a, draw(g)))
      assert.is_true(ember.equal(b, draw(g)))
      -- and a different seed gives different numbers (16 fair coins alike: 2^-16)
      assert.is_false(ember.equal(a, draw(ember.Generator():manual_seed(10))))
      -- the default generator is the global one
      ember.manual_seed(5)
      local c = draw(ember.default_generator)
      ember.manual_seed(5)
      assert.is_true(ember.equal(c, draw(nil)))
    end)
  end

  it("a failing draw leaves both generators where they were; bad arguments are refused", function()
    local g = ember.Generator():manual_seed(1)
    ember.manual_seed(2)
    ember.rand(3)
    local global, mine = ember.get_rng_state(), g:get_state()
    assert.is_false(pcall(ember.multinomial, ember.zeros(3), 1, { generator = g }))
    assert.are.same(global, ember.get_rng_state())
    assert.are.same(mine.seed, g:get_state().seed)
    raises_here(function() ember.rand(3, { generator = 7 }) end, "ember.rand: generator must be an ember.Generator")
    raises_here(function() ember.Generator():manual_seed("x") end, "ember.Generator:manual_seed: seed must be an integer")
    raises_here(function() ember.Generator():set_state({ seed = 1 }) end, "ember.Generator:set_state: expected the table")
    raises_here(function() ember.Generator("cuda") end, "only the cpu generator")
    ember.default_generator:manual_seed(11)
    assert.are.equal(11, ember.initial_seed())
  end)
end)

describe("nn.utils", function()
  it("clip_grad_norm_ / clip_grad_value_ are optim's rules under torch's names, with torch's keywords", function()
    local function model()
      local m = nn.Linear(3, 2)
      m.weight.grad = ember.full({ 2, 3 }, 2)
      m.bias.grad = ember.full({ 2 }, -5)
      return m
    end
    local a, b = model(), model()
    nn.utils.clip_grad_value_(a:parameters(), 1)
    optim.clip_grad_value(b, 1)
    assert.are.same({ -1, -1 }, a.bias.grad:totable())
    assert.are.same(b.weight.grad:totable(), a.weight.grad:totable())
    a, b = model(), model()
    local norm = nn.utils.clip_grad_norm_(a, 0.5)
    assert.are.equal(optim.clip_grad_norm(b, 0.5), norm)
    assert.is_true(math.abs(norm - math.sqrt(74)) < 1e-6)
    assert.are.same(b.bias.grad:totable(), a.bias.grad:totable())
    -- norm_type positional or as torch's keyword; one tensor as parameters
    a, b = model(), model()
    assert.are.equal(optim.clip_grad_norm(b, 1, 1), nn.utils.clip_grad_norm_(a, 1, { norm_type = 1 }))
    assert.are.same(b.weight.grad:totable(), a.weight.grad:totable())
    local w = ember.zeros(2):requires_grad_()
    w.grad = ember.tensor({ 3, 4 })
    assert.are.equal(5, nn.utils.clip_grad_norm_(w, 10, 2))
    -- error_if_nonfinite: refused before any gradient changes
    a = model()
    a.bias.grad = ember.tensor({ 0 / 0, 1 })
    raises_here(function() nn.utils.clip_grad_norm_(a, 1, { error_if_nonfinite = true }) end,
      "nn.utils.clip_grad_norm_: the total norm of order 2 for gradients from `parameters` is non-finite")
    assert.are.same({ { 2, 2, 2 }, { 2, 2, 2 } }, a.weight.grad:totable())
    raises_here(function() nn.utils.clip_grad_norm_(a, 1, { norm = 2 }) end, "nn.utils.clip_grad_norm_: unknown option 'norm'")
    raises_here(function() nn.utils.clip_grad_norm_(a, -1) end, "nn.utils.clip_grad_norm_: max_norm must be a number >= 0")
    raises_here(function() nn.utils.clip_grad_value_(5, 1) end, "nn.utils.clip_grad_value_: parameters must be")
  end)

  it("parameters_to_vector: PyTorch's order and values", function()
    local fx = FX.vector
    local m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2), nn.GRU(2, 3, { num_layers = 2 }))
    m:to("float64")
    local sd = {}
    for k, v in pairs(fx.state) do
      local i, rest = k:match("^(%d+)%.(.+)$")
      sd[(tonumber(i) + 1) .. "." .. rest] = T(v)
    end
    m:load_state_dict(sd)
    local v = nn.utils.parameters_to_vector(m)
    check("parameters_to_vector", v, T(fx.vec), 0)
    check("list form", nn.utils.parameters_to_vector(m:parameters()), T(fx.vec), 0)
    -- differentiable
    v:sum():backward()
    assert.are.same({ 1, 1, 1 }, m[1].weight.grad:totable()[1])
  end)

  it("vector_to_parameters is its inverse, without recording", function()
    local m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    local n = nn.utils.parameters_to_vector(m):numel()
    local vec = ember.arange(n, { dtype = "float32" })
    nn.utils.vector_to_parameters(vec, m)
    assert.is_true(ember.equal(vec, nn.utils.parameters_to_vector(m):detach()))
    assert.are.same({ 0, 1, 2 }, m[1].weight:totable()[1])
    assert.are.equal(12, m[1].bias:totable()[1])
    assert.is_true(m[1].weight.is_leaf)
    local t = ember.zeros(2, 2)
    nn.utils.vector_to_parameters(ember.tensor({ 1, 2, 3, 4 }), t)
    assert.are.same({ { 1, 2 }, { 3, 4 } }, t:totable())
    raises_here(function() nn.utils.vector_to_parameters(ember.zeros(n + 1), m) end,
      ("nn.utils.vector_to_parameters: vec has %d elements, the parameters have %d"):format(n + 1, n))
    raises_here(function() nn.utils.vector_to_parameters(ember.zeros(2, 2), t) end, "vec must be 1-d")
    raises_here(function() nn.utils.vector_to_parameters({}, t) end, "expected vec to be a tensor")
    raises_here(function() nn.utils.parameters_to_vector({ 1 }) end, "nn.utils.parameters_to_vector: parameter 1 is a number")
    raises_here(function() nn.utils.parameters_to_vector({}) end, "nn.utils.parameters_to_vector: no parameters")
  end)

  for _, c in ipairs(FX.pad) do
    it("rnn.pad_sequence against PyTorch: " .. c.name, function()
      local seqs = {}
      for i, s in ipairs(c.seqs) do seqs[i] = T(s):requires_grad_() end
      local out = nn.utils.rnn.pad_sequence(seqs, { batch_first = c.batch_first, padding_value = c.padding_value })
      check("out", out, T(c.out), 0)
      local loss = (out * T(c.R)):sum()
      loss:backward()
      for i, s in ipairs(seqs) do
        if s:numel() > 0 then check("grad " .. i, s.grad, T(c.grads[i]), 0) end
      end
      -- torch's positional form pad_sequence(seqs, batch_first, padding_value)
      check("positional", nn.utils.rnn.pad_sequence(seqs, c.batch_first, c.padding_value), T(c.out), 0)
    end)
  end

  it("rnn.pad_sequence: the first sequence's dtype, and its errors", function()
    local p = nn.utils.rnn.pad_sequence({ ember.tensor({ 1, 2 }, { dtype = "int64" }), ember.tensor({ 3 }, { dtype = "int64" }) })
    assert.are.equal("int64", p.dtype)
    assert.are.same({ { 1, 3 }, { 2, 0 } }, rows_of(p))
    local ps = "nn.utils.rnn.pad_sequence: "
    raises_here(function() nn.utils.rnn.pad_sequence({}) end, ps .. "received an empty list of sequences")
    raises_here(function() nn.utils.rnn.pad_sequence({ ember.zeros(2, 3), ember.zeros(2, 2) }) end,
      ps .. "sequence 2 has shape [2, 2], sequence 1 [2, 3]")
    raises_here(function() nn.utils.rnn.pad_sequence({ ember.zeros(2), 3 }) end, ps .. "sequence 2 is a number")
    raises_here(function() nn.utils.rnn.pad_sequence({ ember.zeros(2) }, { batchfirst = true }) end, ps .. "unknown option 'batchfirst'")
    raises_here(function() nn.utils.rnn.pad_sequence(ember.zeros(2, 2)) end, ps .. "sequences must be a list of tensors, got a tensor")
  end)
end)

describe("nn.Module's lists in PyTorch's loops", function()
  it("for m in model:modules() do, for p in model:parameters() do (children, buffers too)", function()
    -- Python's `for m in self.modules():` (ResNet's init) and `for p in model.parameters(): p.requires_grad = False`
    -- (freezing a backbone): the lists were not callable ("attempt to call a ember.List value")
    local net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
    local names = {}
    for m in net:modules() do names[#names + 1] = m.__name end
    assert.are.same({ "Sequential", "Conv2d", "BatchNorm2d", "Sequential", "ReLU", "Linear" }, names)
    local n = 0
    for p in net:parameters() do
      n = n + 1
      p.requires_grad = false
    end
    assert.are.equal(6, n)
    for _, p in ipairs(net:parameters()) do assert.is_false(p.requires_grad) end
    local kids = {}
    for c in net:children() do kids[#kids + 1] = c end
    assert.are.same({ net[1], net[2], net[3] }, kids)
    local nb = 0
    for b in net:buffers() do nb = nb + 1; assert.is_true(ember.is_tensor(b)) end
    assert.are.equal(3, nb)
    for _ in nn.Sequential():parameters() do error("an empty model has no parameters") end
    assert.are.equal(6, #net:modules()) -- still a plain list for # and ipairs
  end)
end)
