-- Torch7's tensor and module calls in ember. Torch7's names that have one
-- meaning here are aliases of ember's PyTorch-style ops (checked against
-- those ops, not against written-down values), in place where Torch7's were.
-- Where a Torch7 call means something else in ember (PyTorch's meaning), it
-- must be an error at the user's line, never a silently different result:
-- x:sub(i1, i2, j1, j2) (Torch7's slice) was x - i2 * i1 with the rest
-- dropped; ember.cat(a, b, dim) (Torch7's form) raised Lua's "bad argument
-- #1 to '?'"; seq:add(m, i) dropped i; Torch7's result-first res:mm(a, b)
-- was res @ a (b dropped), as fmod, atan2, lerp, masked_fill, dot, outer,
-- kron with one argument too many; and the ops that dropped Torch7's extra
-- arguments silently now refuse them.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local raises_here = parity.raises_here

local function same(a, b) assert.is_true(ember.equal(a, b), tostring(a) .. " vs " .. tostring(b)) end
-- f's arithmetic runs in Lua's doubles, rounded once to float32
local function close(a, b) assert.is_true(ember.allclose(a, b, 1e-6, 1e-7), tostring(a) .. " vs " .. tostring(b)) end

describe("Torch7's names as aliases of ember's ops", function()
  local x = ember.randn(3, 4)
  local idx = ember.tensor({ 3, 1 }, "int64")

  it("index, maskedSelect, viewAs and ger are the new-tensor ops", function()
    same(x:index(2, idx), x:index_select(2, idx))
    same(x:maskedSelect(x:gt(0)), x:masked_select(x:gt(0)))
    same(x:viewAs(ember.zeros(2, 6)), x:view(2, 6))
    local a, b = ember.randn(3), ember.randn(4)
    same(a:ger(b), a:outer(b))
    same(ember.ger(a, b), ember.outer(a, b))
    raises_here(function() local _ = x:index(3, idx) end, "ember.index: dim 3 is out of range")
    raises_here(function() local _ = x:ger(a, b) end, "ember.ger: takes at most 1 argument besides the tensor (vec2)")
  end)

  it("indexCopy, indexFill, indexAdd, maskedFill, maskedCopy, cmul, cdiv mutate x and return it", function()
    local src = ember.randn(3, 2)
    local cases = {
      { "indexCopy", { 2, idx, src }, x:index_copy(2, idx, src) },
      { "indexFill", { 2, idx, -1.5 }, x:index_fill(2, idx, -1.5) },
      { "indexAdd", { 2, idx, src }, x:index_add(2, idx, src) },
      { "maskedFill", { x:gt(0), 7 }, x:masked_fill(x:gt(0), 7) },
      { "maskedCopy", { x:gt(0), ember.randn(12) }, nil },
      { "cmul", { src:repeat_interleave(2, 2) }, x:mul(src:repeat_interleave(2, 2)) },
      { "cdiv", { x:abs() + 1 }, x:div(x:abs() + 1) },
    }
    cases[5][3] = x:masked_scatter(cases[5][2][1], cases[5][2][2])
    for _, c in ipairs(cases) do
      local y = x:clone()
      assert.are.equal(y, y[c[1]](y, table.unpack(c[2])), c[1] .. " returns x")
      same(y, c[3])
    end
  end)

  it("the in-place names refuse a leaf that requires grad, naming themselves", function()
    local w = ember.zeros(3, { requires_grad = true })
    raises_here(function() w:cmul(w) end, "ember.cmul: a leaf tensor that requires grad")
    raises_here(function() w:maskedFill(w:ge(0), 1) end, "ember.maskedFill: a leaf tensor that requires grad")
    raises_here(function() w:indexFill(1, idx:narrow(1, 2, 1), 1) end, "ember.indexFill: a leaf tensor")
    raises_here(function() w:copy(ember.ones(3)) end, "ember.copy: a leaf tensor that requires grad")
    raises_here(function() w:apply(function() return 1 end) end, "ember.apply: a leaf tensor that requires grad")
  end)

  it("copy writes in row-major order across shapes with as many elements, else broadcasts", function()
    local y = ember.zeros(2, 6)
    assert.are.equal(y, y:copy(x))
    same(y, x:reshape(2, 6))
    local r = ember.randn(4)
    same(ember.zeros(3, 4):copy(r), r:expand(3, 4))
    raises_here(function() ember.zeros(3, 4):copy(ember.ones(5)) end, "ember.copy: source of shape [5] cannot be broadcast")
  end)

  it("apply, map and map2 call f per element in place (nil keeps it)", function()
    local y = x:clone()
    assert.are.equal(y, y:apply(function(v) if v > 0 then return v * 2 end end))
    same(y, ember.where(x:gt(0), x * 2, x))
    local z = ember.randn(12)
    close(x:clone():map(z, function(a, b) return a - b end), x - z:view(3, 4))
    close(x:clone():map2(z, x, function(a, b, c) return a * b + c end), x * z:view(3, 4) + x)
    local n = ember.arange(1, 5, "int64")
    same(n:clone():apply(function(v) return v * v end), n * n)
    raises_here(function() x:clone():apply(function() return "a" end) end,
      "ember.apply: the function returned a string for element 1")
    raises_here(function() x:clone():map(ember.ones(3), math.max) end, "ember.map: argument 2 has 3 elements")
  end)

  it("uniform and normal fill in place as uniform_ and normal_ (same draws for the same seed)", function()
    ember.manual_seed(7)
    local a = ember.zeros(5):uniform_(2, 3)
    ember.manual_seed(7)
    local b = ember.zeros(5)
    assert.are.equal(b, b:uniform(2, 3))
    same(a, b)
    ember.manual_seed(8)
    a = ember.zeros(5):normal_(1, 0.5)
    ember.manual_seed(8)
    same(a, ember.zeros(5):normal(1, 0.5))
  end)

  it("bernoulli takes torch's p; bernoulli_ fills in place", function()
    ember.manual_seed(3)
    local p = ember.zeros(2000):bernoulli(0.25)
    ember.manual_seed(3)
    same(p, ember.rand(2000):lt(0.25):float())
    local y = ember.zeros(2000)
    ember.manual_seed(4)
    assert.are.equal(y, y:bernoulli_(0.75))
    ember.manual_seed(4)
    same(y, ember.rand(2000):lt(0.75):float())
    raises_here(function() local _ = ember.zeros(2):bernoulli(2) end, "ember.bernoulli: p must be a number in [0, 1], got 2")
  end)

  it("ember.Tensor(...) constructs as Torch7's (zeros here) and stays the methods table", function()
    same(ember.Tensor(2, 3), ember.zeros(2, 3))
    same(ember.Tensor(x.shape), ember.zeros(x.shape))
    same(ember.Tensor { { 1, 2 }, { 3, 4 } }, ember.tensor { { 1, 2 }, { 3, 4 } })
    assert.are.equal(0, ember.Tensor():numel())
    assert.are.equal(x.sum, ember.Tensor.sum)
    raises_here(function() local _ = ember.Tensor(x) end, "ember.Tensor: ember.Tensor(t) is not a constructor here")
  end)
end)

describe("ops refuse Torch7's extra arguments", function()
  local x = ember.randn(3, 4)
  local i = ember.tensor({ 1, 2 }, "int64")
  it("names the op and what it takes", function()
    local cases = {
      { function() local _ = x:sort(1, true, 5) end, "ember.sort: takes at most 2 arguments besides the tensor (dim, descending)" },
      { function() local _ = ember.sort(x, 1, true, 5) end, "ember.sort: takes at most 2 arguments" },
      { function() local _ = x:argsort(1, true, 5) end, "ember.argsort: takes at most 2 arguments" },
      { function() local _ = x:topk(2, 1, true, true, 5) end, "ember.topk: takes at most 4 arguments besides the tensor (k, dim, largest, sorted)" },
      { function() local _ = x:kthvalue(2, 1, true, 5) end, "ember.kthvalue: takes at most 3 arguments" },
      { function() local _ = x:norm(2, 1, true, 5) end, "ember.norm: takes at most 3 arguments besides the tensor (p, dim, keepdim)" },
      { function() local _ = x:index_select(1, i, 5) end, "ember.index_select: takes at most 2 arguments" },
      { function() local _ = x:gather(1, i:view(1, 2), 5) end, "ember.gather: takes at most 2 arguments" },
      { function() local _ = x:chunk(2, 1, 5) end, "ember.chunk: takes at most 2 arguments besides the tensor (chunks, dim)" },
      { function() local _ = x:split(2, 1, 5) end, "ember.split: takes at most 2 arguments" },
      { function() local _ = x:split({ 1, 2 }, 1, 5) end, "ember.split: takes at most 2 arguments" },
      { function() local _ = x:bernoulli(0.5, nil, 5) end, "ember.bernoulli: takes at most 2 arguments besides the tensor (p, options)" },
      { function() local _ = x:bernoulli(0.5, 5) end, "ember.bernoulli: options must be a table, got number" },
      { function() local _ = x:cmul(x, x) end, "ember.cmul: takes at most 1 argument" },
    }
    for _, c in ipairs(cases) do raises_here(c[1], c[2]) end
  end)
  it("trailing nils and the plain forms still work", function()
    local v = x:sort(1, true, nil)
    same(v, (x:sort(1, true)))
    same(x:topk(2, 1, true, true, nil), (x:topk(2, 1)))
    assert.are.equal(2, #x:chunk(2, 1, nil))
  end)
end)

describe("Torch7 calls that mean something else in ember", function()
  local x = ember.tensor { { 1, 2, 3 }, { 4, 5, 7 } }
  local y = ember.ones(2, 3)

  it("add, sub and div refuse arguments past the options (Torch7's x:sub slice)", function()
    raises_here(function() local _ = x:sub(1, 2, 2, 3) end,
      "ember.sub: takes at most 2 arguments besides the tensor (other, alpha), got 4")
    raises_here(function() local _ = x:clone():sub_(1, 2, 2, 3) end, "ember.sub: takes at most 2 arguments")
    raises_here(function() local _ = ember.sub(x, 1, 2, 2) end, "ember.sub: takes at most 2 arguments")
    raises_here(function() local _ = x:add(y, 2, 3) end,
      "ember.add: takes at most 2 arguments besides the tensor (other, alpha), got 3")
    raises_here(function() local _ = x:div(y, "floor", 3) end,
      "ember.div: takes at most 2 arguments besides the tensor (other, rounding_mode), got 3")
    -- the forms that stay: alpha and rounding_mode, trailing nils
    assert.are.same({ { -1, 0, 1 }, { 2, 3, 5 } }, x:sub(1, 2):tolist())
    assert.are.same({ { 3, 4, 5 }, { 6, 7, 9 } }, x:add(y, { alpha = 2 }):tolist())
    assert.are.same({ { 0, 1, 1 }, { 2, 2, 3 } }, x:div(2, "floor", nil):tolist())
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 6 } }, x:sub(y, nil, nil):tolist())
  end)

  it("cat and stack name themselves for Torch7's cat(a, b, dim) and extra arguments", function()
    raises_here(function() local _ = ember.cat(x, y, 2) end,
      "ember.cat: expected one list of tensors, got a tensor as argument 1 (ember.cat({a, b, ...} [, dim]))")
    raises_here(function() local _ = ember.stack(x, y) end, "ember.stack: expected one list of tensors")
    raises_here(function() local _ = ember.cat(5) end, "ember.cat: expected a list of tensors, got number")
    raises_here(function() local _ = ember.cat({ x, y }, 1, 2) end,
      "ember.cat: takes a list of tensors and a dim, got 3 arguments (argument 3 is a number)")
    raises_here(function() local _ = ember.stack({ x, y }, 1, {}) end, "ember.stack: takes a list of tensors and a dim")
    assert.is_true(ember.cat({ x, y }, 2, nil).shape == ember.Size { 2, 6 })
    assert.is_true(ember.stack({ x, y }).shape == ember.Size { 2, 2, 3 })
  end)

  it("Sequential.add names itself, says when it got a class, and refuses Torch7's add(m, i)", function()
    raises_here(function() local _ = nn.Sequential():add(5) end, "Sequential.add: expected a module, got number")
    raises_here(function() local _ = nn.Sequential():add(nn.Linear) end,
      "Sequential.add: expected a module, got the class nn.Linear (call it: nn.Linear(...))")
    raises_here(function() local _ = nn.ModuleList():append(nn.ReLU) end,
      "ModuleList.append: expected a module, got the class nn.ReLU")
    raises_here(function() local _ = nn.Sequential(nn.ReLU()):add(nn.Tanh(), 1) end,
      "Sequential.add: takes one module (seq:insert(i, m)")
    local s = nn.Sequential():add(nn.ReLU()):add(nn.Tanh())
    assert.are.equal(2, #s)
    assert.are.equal("Tanh", s[2].__name)
  end)

  it("two-operand ops refuse Torch7's result-first form res:op(a, b) (it was res op a, b dropped)", function()
    local r, a, b = ember.zeros(2, 2), ember.tensor { { 1, 2 }, { 3, 4 } }, ember.tensor { { 0, 1 }, { 1, 0 } }
    local u = ember.ones(2)
    raises_here(function() local _ = r:mm(a, b) end, "ember.mm: takes at most 1 argument besides the tensor (mat2), got 2")
    raises_here(function() local _ = r:matmul(a, b) end, "ember.matmul: takes at most 1 argument besides the tensor (other), got 2")
    raises_here(function() local _ = r:view(1, 2, 2):bmm(a:view(1, 2, 2), b:view(1, 2, 2)) end, "ember.bmm: takes at most 1 argument")
    raises_here(function() local _ = ember.zeros(2):dot(u, u) end, "ember.dot: takes at most 1 argument")
    raises_here(function() local _ = ember.zeros(2):outer(u, u) end, "ember.outer: takes at most 1 argument")
    raises_here(function() local _ = r:kron(a, b) end, "ember.kron: takes at most 1 argument")
    raises_here(function() local _ = r:atan2(a, b) end, "ember.atan2: takes at most 1 argument")
    raises_here(function() local _ = r:fmod(a, 2) end, "ember.fmod: takes at most 1 argument")
    raises_here(function() local _ = r:remainder(a, 2) end, "ember.remainder: takes at most 1 argument")
    raises_here(function() local _ = r:lerp(a, b, 0.5) end, "ember.lerp: takes at most 2 arguments besides the tensor (end, weight)")
    raises_here(function() local _ = r:masked_fill(a:gt(2), 1, 5) end,
      "ember.masked_fill: takes at most 2 arguments besides the tensor (mask, value), got 3")
    -- the two-operand forms, trailing nils included
    assert.are.same({ { 2, 1 }, { 4, 3 } }, a:mm(b, nil):tolist())
    assert.are.same({ { 2, 1 }, { 4, 3 } }, a:matmul(b):tolist())
    assert.are.equal(2, u:dot(u, nil):item())
    assert.are.same({ { 1, 0 }, { 1, 0 } }, a:fmod(2):tolist())
    assert.are.same({ { 0.5, 1.5 }, { 2, 2 } }, a:lerp(b, 0.5):tolist())
    assert.are.same({ { 1, 2 }, { 0, 0 } }, a:masked_fill(a:gt(2), 0):tolist())
  end)

  it("x:nelement() checks its tensor as the other Torch7 names do", function()
    assert.are.equal(6, x:nelement())
    local f = x.nelement
    raises_here(function() local _ = f(5) end, "ember.nelement: argument 1 must be a tensor, got number")
  end)
end)

describe("Tensor.repeat (x[\"repeat\"](x, ...), Torch7's repeatTensor)", function()
  -- was: absent (x:tile only, which also takes fewer repeats than dims)
  it("repeats along each dim, more repeats prepending dims; fewer than the dims are refused", function()
    local x = ember.tensor({ { 1, 2 } })
    local want = ember.tensor({ { { 1, 2, 1, 2 }, { 1, 2, 1, 2 } }, { { 1, 2, 1, 2 }, { 1, 2, 1, 2 } } })
    assert.is_true(ember.equal(x["repeat"](x, 2, 2, 2), want))
    assert.is_true(ember.equal(x:repeatTensor({ 2, 2, 2 }), want))
    assert.is_true(ember.equal(ember["repeat"](x:t(), 1, 2), ember.tensor({ { 1, 1 }, { 2, 2 } })))
    raises_here(function() x["repeat"](x, 2) end,
      "ember.repeat: the number of repeats (1) can not be smaller than the number of dims of the tensor (2)")
  end)
end)
