-- lua/ember/_compat.lua: sampling, order statistics, constructors, products,
-- index writes and ember.grad, against PyTorch 1.13's semantics (the values
-- torch gives are in comments where they are fixed, properties where the
-- generator differs).
local ember = require "ember"

local I64 = { dtype = "int64" }
local F64 = { dtype = "float64" }

local function fails(fn, text)
  local ok, err = pcall(fn)
  assert.is_false(ok)
  assert.truthy(tostring(err):find(text, 1, true), tostring(err))
  assert.truthy(tostring(err):find("compat_spec.lua:%d+:"), tostring(err))
end

describe("sampling", function()
  it("multinomial draws in proportion, never a zero weight, distinct ids without replacement", function()
    ember.manual_seed(0)
    local p = ember.tensor { 0.1, 0, 0.6, 0.3 }
    local counts = ember.bincount(ember.multinomial(p, 20000, { replacement = true }) - 1):totable()
    assert.are.equal(0, counts[2])
    for i, want in ipairs { 0.1, 0, 0.6, 0.3 } do assert.is_true(math.abs(counts[i] / 20000 - want) < 0.02, i) end
    for _ = 1, 20 do
      local s = ember.multinomial(p, 3):totable()
      table.sort(s)
      assert.are.same({ 1, 3, 4 }, s) -- the three non-zero classes, each once
    end
    local rows = ember.multinomial(ember.tensor { { 1, 1, 0 }, { 0, 1, 1 } }, 2)
    assert.are.same({ 2, 2 }, rows.shape)
    -- sequential draws without replacement: the first draw follows p
    local first = ember.zeros(3)
    for _ = 1, 3000 do
      local i = ember.multinomial(ember.tensor { 0.7, 0.2, 0.1 }, 2)[1]:item()
      first[i] = first[i]:item() + 1
    end
    assert.is_true(math.abs(first[1]:item() / 3000 - 0.7) < 0.04)
    fails(function() ember.multinomial(p, 4) end, "ember.multinomial: cannot draw 4 samples without replacement")
    fails(function() ember.multinomial(ember.tensor { -1, 2 }, 1) end, "ember.multinomial: probs must be finite and >= 0")
  end)

  it("bernoulli gives 0s and 1s with probability p", function()
    ember.manual_seed(1)
    local x = ember.bernoulli(ember.full({ 20000 }, 0.3))
    assert.is_true(math.abs(x:mean():item() - 0.3) < 0.02)
    assert.is_true(x:eq(0):logical_or(x:eq(1)):all():item())
    fails(function() ember.bernoulli(ember.tensor { 1.5 }) end, "ember.bernoulli: p must be in [0, 1]")
  end)
end)

describe("order statistics", function()
  it("median is torch's lower median; kthvalue its k-th smallest with 1-based indices", function()
    assert.are.equal(3, ember.median(ember.tensor { 3, 1, 4, 1, 5, 9 }):item()) -- torch.median: 3
    local v, i = ember.median(ember.tensor { { 3, 1, 4 }, { 1, 5, 9 } }, 2)
    assert.are.same({ 3, 5 }, v:totable())
    assert.are.same({ 1, 2 }, i:totable()) -- torch: [0, 1]
    v, i = ember.kthvalue(ember.tensor { 5, 2, 8, 1 }, 2)
    assert.are.equal(2, v:item())
    assert.are.equal(2, i:item())
    fails(function() ember.kthvalue(ember.tensor { 1, 2 }, 3) end, "ember.kthvalue: k must be in 1..2, got 3")
  end)
end)

describe("constructors", function()
  it("logspace, meshgrid (ij and xy), empty_like and the new_* methods", function()
    local ls = ember.logspace(0, 2, 3, F64):totable()
    for i, want in ipairs { 1, 10, 100 } do assert.are.near(want, ls[i], 1e-12 * want) end
    ls = ember.logspace(0, 2, 3, 2, F64):totable()
    for i, want in ipairs { 1, 2, 4 } do assert.are.near(want, ls[i], 1e-12 * want) end
    local X, Y = ember.meshgrid(ember.tensor { 1, 2 }, ember.tensor { 3, 4, 5 })
    assert.are.same({ { 1, 1, 1 }, { 2, 2, 2 } }, X:totable())
    assert.are.same({ { 3, 4, 5 }, { 3, 4, 5 } }, Y:totable())
    X, Y = ember.meshgrid(ember.tensor { 1, 2 }, ember.tensor { 3, 4, 5 }, { indexing = "xy" })
    assert.are.same({ 3, 2 }, X.shape)
    assert.are.same({ { 3, 3 }, { 4, 4 }, { 5, 5 } }, Y:totable())
    local x = ember.zeros(2, 3, F64)
    assert.are.equal("float64", x:new_ones(2).dtype)
    assert.are.same({ 7, 7 }, x:new_full({ 2 }, 7):totable())
    assert.are.same({ 2, 3 }, ember.empty_like(x).shape)
    assert.are.equal("float64", x:new_tensor({ 1, 2 }).dtype)
    fails(function() ember.meshgrid(ember.zeros(2, 2)) end, "ember.meshgrid: argument 1 must be 1-d")
  end)
end)

describe("products and index writes", function()
  it("addmm, baddbmm and cross are torch's, with gradients", function()
    local a = ember.randn(2, 3, F64):requires_grad_()
    local out = ember.addmm(ember.ones(2, 2, F64), a, a:transpose(1, 2), { beta = 0.5, alpha = 2 })
    local want = ember.ones(2, 2, F64) * 0.5 + a:matmul(a:transpose(1, 2)) * 2
    assert.is_true((out - want):abs():max():item() < 1e-12)
    local b = ember.baddbmm(ember.zeros(4, 2, 2, F64), ember.randn(4, 2, 3, F64), ember.randn(4, 3, 2, F64))
    assert.are.same({ 4, 2, 2 }, b.shape)
    assert.are.same({ 0, 0, 1 }, ember.cross(ember.tensor { 1, 0, 0 }, ember.tensor { 0, 1, 0 }):totable())
    local u = ember.tensor({ 1, 2, 3 }, F64):requires_grad_()
    ember.cross(u, ember.tensor({ 4, 5, 6 }, F64)):sum():backward()
    assert.are.same({ -1, 2, -1 }, u.grad:totable()) -- d/du sum(u x w) = w x (1, 1, 1)
  end)

  it("index_add, index_fill and scatter write at 1-based positions", function()
    local idx = ember.tensor({ 1, 3, 1 }, I64)
    assert.are.same({ { 2, 2 }, { 0, 0 }, { 1, 1 } }, ember.index_add(ember.zeros(3, 2), 1, idx, ember.ones(3, 2)):totable())
    local src = ember.ones(3, 2, F64):requires_grad_()
    ember.index_add(ember.zeros(3, 2, F64), 1, idx, src, { alpha = 2 }):sum():backward()
    assert.are.same({ { 2, 2 }, { 2, 2 }, { 2, 2 } }, src.grad:totable())
    assert.are.same({ { 0, 5 }, { 0, 5 } }, ember.index_fill(ember.zeros(2, 2), 2, ember.tensor({ 2 }, I64), 5):totable())
    local s = ember.scatter(ember.full({ 2, 3 }, 9), 2, ember.tensor({ { 3 }, { 1 } }, I64), ember.tensor { { 7 }, { 8 } })
    assert.are.same({ { 9, 9, 7 }, { 8, 9, 9 } }, s:totable()) -- torch.scatter: same
    fails(function() ember.index_add(ember.zeros(3, 2), 1, idx, ember.ones(2, 2)) end,
      "ember.index_add: source must be x's shape [3, 2] with dim 1 the index's length")
  end)
end)

describe("ember.grad", function()
  it("returns the gradients of leaves without touching .grad, as torch.autograd.grad", function()
    local w = ember.tensor({ 1, 2 }, { dtype = "float64", requires_grad = true })
    local v = ember.tensor({ 3 }, { dtype = "float64", requires_grad = true })
    w.grad = ember.tensor({ 10, 10 }, F64)
    local g = ember.grad((w * w):sum() + (v * w[1]):sum(), { w, v })
    assert.are.same({ 5, 4 }, g[1]:totable())
    assert.are.same({ 1 }, g[2]:totable())
    assert.are.same({ 10, 10 }, w.grad:totable())
    assert.is_nil(v.grad)
    local y = w * 3
    assert.are.same({ 3, 6 }, ember.grad(y, w, { grad_outputs = ember.tensor({ 1, 2 }, F64) })[1]:totable())
    fails(function() ember.grad((w * 2):sum(), { w, v }) end, "ember.grad: input 2 was not used")
    fails(function() ember.grad((w * 2):sum(), w * 2) end, "ember.grad: input 1 was not used") -- a new tensor, not in the graph
  end)
end)

describe("ember.where outside variants", function()
  it("where(cond) alone is nonzero(cond, as_tuple), as torch.where; a bad argument is named at the caller's line", function()
    local idx = ember.where(ember.tensor { { true, false }, { false, true } })
    assert.are.same({ 1, 2 }, idx[1]:totable())
    assert.are.same({ 1, 2 }, idx[2]:totable())
    local ok, err = pcall(function() return ember.where(ember.tensor { true }, "x", 1) end)
    assert.is_false(ok)
    assert.truthy(err:find("compat_spec.lua:%d+: ember.where: argument 2 %(input%) must be a tensor or a number, got string"), err)
  end)
end)

describe("PyTorch's keyword forms", function()
  it("sort, argsort and topk take an options table; split a list of sizes; squeeze several dims", function()
    local x = ember.tensor { 3, 1, 2 }
    local v, i = x:sort { descending = true }
    assert.are.same({ 3, 2, 1 }, v:totable())
    assert.are.same({ 1, 3, 2 }, i:totable())
    assert.are.same({ 2, 3, 1 }, x:argsort { dim = 1 }:totable())
    v, i = x:topk(2, { largest = false })
    assert.are.same({ 1, 2 }, v:totable())
    assert.are.same({ 2, 3 }, i:totable())
    local parts = ember.arange(0, 10):split({ 3, 7 })
    assert.are.equal(2, #parts)
    assert.are.same({ 3, 4, 5, 6, 7, 8, 9 }, parts[2]:totable())
    assert.are.same({ 2 }, ember.zeros(1, 2, 1):squeeze({ 1, 3 }).shape)
    fails(function() x:split({ 1, 1 }) end, "ember.split: sizes sum to 2, but dim 1 has size 3")
    fails(function() x:sort { descend = true } end, "ember.sort: unknown option 'descend'")
    -- the plain forms keep their errors at the caller's line through the wrappers
    fails(function() ember.zeros(2, 2):squeeze(5) end, "ember.squeeze: dim 5 is out of range")
    fails(function() x:split(0) end, "ember.split: piece size must be >= 1")
    fails(function() x:topk(9) end, "ember.topk: k must be an integer in 0..3")
  end)
end)

describe("operators", function()
  it("// and % are Python's floor division and remainder; & | ~ are logical on bool tensors", function()
    local a, b = ember.tensor { 7, -7, 5.5 }, ember.tensor { 2, 2, -2 }
    assert.are.same({ 3, -4, -3 }, (a // b):totable()) -- torch: tensor([ 3., -4., -3.])
    assert.are.same({ 1, 1, -0.5 }, (a % b):totable()) -- torch: tensor([ 1.,  1., -0.5])
    local m, n = ember.tensor { true, false, true }, ember.tensor { true, true, false }
    assert.are.same({ true, false, false }, (m & n):totable())
    assert.are.same({ true, true, true }, (m | n):totable())
    assert.are.same({ false, true, true }, (m ~ n):totable())
    assert.are.same({ false, true, false }, (~m):totable())
    fails(function() return ember.tensor { 1, 2 } & ember.tensor { 1, 2 } end,
      "& on a float32 tensor: only bool tensors (logical) take it")
  end)
end)
