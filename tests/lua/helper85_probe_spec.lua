-- helper-85's probe of the autograd API and the Module/optimizer plumbing as
-- a PyTorch 1.13 user drives them: what it found wrong, each pinned here.
local ember = require "ember"
local nn, optim = require "ember.nn", require "ember.optim"

local function d(t) return ember.tensor(t, { dtype = "float64" }) end
local function names_of(pairs_list)
  local out = {}
  for name in pairs_list do out[#out + 1] = name end
  return out
end

describe("a module registered twice is walked once, as PyTorch's memo", function()
  it("Sequential(l, relu, l): named_modules, named_children, modules, children", function()
    local l = nn.Linear(2, 2)
    local m = nn.Sequential(l, nn.ReLU(), l)
    -- torch: ['', '0', '1'] and ['0', '1'] (ember's Sequential names from 1)
    assert.are.same({ "", "1", "2" }, names_of(m:named_modules()))
    assert.are.same({ "1", "2" }, names_of(m:named_children()))
    assert.are.equal(3, #m:modules())
    assert.are.equal(2, #m:children())
    assert.are.equal(2, #m:parameters())
  end)

  it("one child under two names: listed under its first, apply calls fn once per module", function()
    local m = nn.Module()
    m.a = nn.Linear(2, 2)
    m.b = m.a
    assert.are.same({ "", "a" }, names_of(m:named_modules()))
    assert.are.same({ "a" }, names_of(m:named_children()))
    local calls = 0
    m:apply(function() calls = calls + 1 end)
    assert.are.equal(2, calls) -- torch: a, then m
    -- the callback form too
    local seen = {}
    m:named_modules(function(prefix) seen[#seen + 1] = prefix end)
    assert.are.same({ "", "a." }, seen)
    -- the state dict keeps both names (torch's state_dict does not dedup)
    local sd = m:state_dict()
    assert.is_not_nil(sd["a.weight"])
    assert.is_not_nil(sd["b.weight"])
  end)

  it("a module shared by two containers: each container lists it, the root once (torch's apply: 5 calls)", function()
    local inner = nn.Linear(2, 2)
    local o = nn.Module()
    o.x = nn.Sequential(inner)
    o.y = nn.Sequential(inner)
    assert.are.same({ "", "x", "x.1", "y" }, names_of(o:named_modules()))
    local calls = 0
    o:apply(function() calls = calls + 1 end)
    assert.are.equal(5, calls)
  end)

  it("ModuleDict:values() keeps every value, as torch's values()", function()
    local l = nn.Linear(2, 2)
    local md = nn.ModuleDict { p = l, q = l }
    assert.are.equal(2, #md:values())
    assert.are.equal(1, #md:children())
  end)
end)

describe("zero_grad takes PyTorch's keyword as an options table", function()
  it("module and optimizer: zero_grad{set_to_none = false} zeroes in place", function()
    local m = nn.Linear(2, 1)
    local opt = optim.SGD(m:parameters(), { lr = 0.1 })
    m(ember.randn(1, 2)):sum():backward()
    m:zero_grad { set_to_none = false }
    assert.is_not_nil(m.weight.grad)
    assert.are.equal(0, m.weight.grad:abs():sum():item())
    m(ember.randn(1, 2)):sum():backward()
    opt:zero_grad { set_to_none = false }
    assert.is_not_nil(m.weight.grad)
    assert.are.equal(0, m.weight.grad:abs():sum():item())
    opt:zero_grad { set_to_none = true }
    assert.is_nil(m.weight.grad)
  end)

  it("an unknown key or a non-boolean is refused, naming it", function()
    local m = nn.Linear(2, 1)
    local opt = optim.SGD(m:parameters(), { lr = 0.1 })
    local ok, err = pcall(m.zero_grad, m, { set_to_nones = false })
    assert.is_false(ok)
    assert.matches("Linear.zero_grad: unknown option 'set_to_nones'", err, 1, true)
    ok, err = pcall(function() opt:zero_grad("no") end)
    assert.is_false(ok)
    assert.matches("SGD: zero_grad: set_to_none must be a boolean or nothing, got string", err, 1, true)
  end)
end)

describe("several outputs: each gradient must have its output's shape", function()
  it("autograd.backward refuses a gradient that would broadcast (it gave wrong numbers)", function()
    local a = d { 1, 2 }:requires_grad_()
    local ok, err = pcall(ember.autograd.backward, { a * 2, a * 3 }, { d { 1, 1 }, d { { 1 }, { 1 } } })
    assert.is_false(ok)
    assert.matches("ember.autograd.backward: grad_tensors[2] is [2, 1], but tensor 2 is [2]", err, 1, true)
    assert.is_nil(a.grad)
  end)

  it("ember.grad refuses one too, and more gradients than outputs", function()
    local a = d { 1, 2 }:requires_grad_()
    local ok, err = pcall(ember.autograd.grad, { a * 2, a * 3 }, { a },
      { grad_outputs = { d { 1, 1 }, d { { 1 }, { 1 } } } })
    assert.is_false(ok)
    assert.matches("ember.grad: grad_outputs[2] is [2, 1], but output 2 is [2]", err, 1, true)
    ok, err = pcall(ember.autograd.grad, { a * 2, a * 3 }, { a }, { grad_outputs = { d { 1, 1 }, d { 1, 1 }, d { 1, 1 } } })
    assert.is_false(ok)
    assert.matches("got 2 outputs and 3 grad_outputs", err, 1, true)
    ok, err = pcall(ember.autograd.grad, a * 2, a, { grad_outputs = { d { 1, 1 }, d { 1, 1 } } })
    assert.is_false(ok)
    assert.matches("got 1 outputs and 2 grad_outputs", err, 1, true)
  end)

  it("the right shapes still weight each output", function()
    local a = d { 1, 2 }:requires_grad_()
    local g = ember.autograd.grad({ a * a, a * 3 }, { a }, { grad_outputs = { d { 1, 2 }, d { 10, 1 } } })[1]
    -- 2a * [1, 2] + 3 * [10, 1]
    assert.is_true(ember.allclose(g, a:detach() * 2 * d { 1, 2 } + d { 30, 3 }))
    ember.autograd.backward({ a * a, a * 3 }, { d { 1, 2 }, d { 10, 1 } })
    assert.is_true(ember.allclose(a.grad, g))
  end)

  it("a gradient that requires grad is a constant: its own leaves get nothing (torch's)", function()
    local a = d { 1, 2 }:requires_grad_()
    local b = d { 1, 1 }:requires_grad_()
    ember.autograd.backward({ a * 2, a * 3 }, { b * 1, b * 2 })
    assert.is_nil(b.grad)
    assert.is_true(ember.allclose(a.grad, d { 8, 8 }))
  end)
end)

describe("ember.grad with respect to a non-leaf", function()
  it("does not leave the tensor retaining its gradient in later backwards", function()
    local x = d { 1, 2 }:requires_grad_()
    local h = x * 2
    local y = (h * h):sum()
    local g = ember.autograd.grad(y, h, { retain_graph = true })[1]
    assert.is_true(ember.allclose(g, h:detach() * 2))
    assert.is_nil(h.grad)
    y:backward()
    assert.is_nil(h.grad) -- torch: None (autograd.grad does not call retain_grad)
    assert.is_true(ember.allclose(x.grad, h:detach() * 4))
  end)

  it("sees what the tensor's own hooks made of the gradient, and keeps a retained .grad as it was", function()
    local x = d { 1, 2 }:requires_grad_()
    local h = (x * 1):retain_grad()
    h:register_hook(function(gr) return gr * 10 end)
    local y = (h * 3):sum()
    local g = ember.autograd.grad(y, h, { retain_graph = true })[1]
    assert.is_true(ember.allclose(g, d { 30, 30 }))
    assert.is_nil(h.grad)
    y:backward()
    assert.is_not_nil(h.grad) -- retain_grad the user asked for still holds
  end)

  it("a leaf and a non-leaf together, and an unused non-leaf", function()
    local x = d { 1, 2 }:requires_grad_()
    local h = x * 3
    local u = x * 5
    local gs = ember.autograd.grad((h * x):sum(), { x, h, u }, { allow_unused = true })
    assert.is_true(ember.allclose(gs[1], x:detach() * 6)) -- d(3x^2)/dx
    assert.is_true(ember.allclose(gs[2], x:detach()))
    assert.is_nil(gs[3])
    local ok, err = pcall(ember.autograd.grad, (x * 3 * x):sum(), { x, u })
    assert.is_false(ok)
    assert.matches("input 2 was not used", err, 1, true)
  end)
end)
