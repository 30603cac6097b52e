-- The nn modules that are thin layers over nn.functional's rules (or ember.pad), checked
-- against PyTorch 1.13 (tests/gen_nn_wrappers.py writes tests/fixtures/nn_wrappers.lua) and
-- against the function they call, bit for bit:
--   * ConstantPad3d, ReflectionPad3d, ReplicationPad3d, ZeroPad1d, ZeroPad3d: torch's output,
--     input gradient and repr; module(x) == F.pad(x, ...) and the same gradient; each option
--     reaches the function; the keyword form; float64 gradcheck; errors at the caller's line;
--   * ParameterList and ParameterDict: torch's state dict names and order, a torch state dict
--     loads and gives torch's output and gradients; 1-based indexing; printing; an optimizer
--     sees them; errors.
local ember = require "ember"
local nn = ember.nn
local F = nn.functional
local parity = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local T, check, raises_here = parity.T, parity.check, parity.raises_here
local fx = dofile("tests/fixtures/nn_wrappers.lua")

-- the module a fixture's Lua text builds
local function build(ctor) return assert(load("return " .. ctor, ctor, "t", { nn = nn, ember = ember }))() end

-- out and the gradient of sum(out * w) for x, through f
local function run(f, x, w)
  x = x:detach():requires_grad_(true)
  local out = f(x)
  local loss = (out * w):sum()
  loss:backward()
  return out, x.grad
end

local function same_bits(what, a, b)
  assert.are.same(b.shape, a.shape, what .. " shape")
  assert.are.same(parity.values(b), parity.values(a), what)
end

describe("nn padding modules against torch and ember.pad", function()
  local modes = { ConstantPad3d = "constant", ReflectionPad3d = "reflect", ReplicationPad3d = "replicate",
    ZeroPad1d = "constant", ZeroPad3d = "constant" }
  for _, c in ipairs(fx.pads) do
    it(c.name .. ": torch's output, gradient and repr; ember.pad's bits", function()
      local m = build(c.ctor)
      local x, w = T(c.x), T(c.w)
      local out, gx = run(m, x, w)
      check(c.name .. " out", out, T(c.out), 1e-15)
      check(c.name .. " grad", gx, T(c.grad_x), 1e-15)
      assert.are.equal(c.repr, tostring(m))
      local mode = modes[c.name:match("^%w+")]
      local fout, fgx = run(function(t) return F.pad(t, m.padding, mode, m.value) end, x, w)
      same_bits(c.name .. " out vs F.pad", out, fout)
      same_bits(c.name .. " grad vs F.pad", gx, fgx)
    end)
  end

  it("each option reaches ember.pad: the padding's every side and the value", function()
    local x = ember.randn(1, 2, 3, 3, 3, { dtype = "float64" })
    local base = nn.ConstantPad3d({ 1, 0, 0, 0, 0, 0 }, 0.5)(x)
    for side = 1, 6 do
      local p = { 0, 0, 0, 0, 0, 0 }
      p[side] = 2
      local y = nn.ConstantPad3d(p, 0.5)(x)
      local dim = 5 - (side - 1) // 2
      assert.are.equal(5, y.shape[dim], "side " .. side)
      -- the padded slab is the value, on the side named
      local slab = y:narrow(dim, side % 2 == 1 and 1 or 4, 2)
      assert.are.equal(0.5, slab:min():item())
      assert.are.equal(0.5, slab:max():item())
    end
    assert.are.equal(-3, nn.ConstantPad3d({ 1, 0, 0, 0, 0, 0 }, -3)(x):min():item())
    assert.are.equal(0.5, base[1][1][1][1][1]:item())
    for _, name in ipairs({ "ReflectionPad3d", "ReplicationPad3d" }) do
      local a = nn[name]({ 1, 0, 0, 0, 0, 0 })(x)
      local b = nn[name]({ 0, 1, 0, 0, 0, 0 })(x)
      assert.are.same({ 1, 2, 3, 3, 4 }, a.shape)
      assert.is_false(ember.equal(a, b), name .. ": left and right padding differ")
      local mode = name == "ReflectionPad3d" and "reflect" or "replicate"
      same_bits(name, a, F.pad(x, { 1, 0, 0, 0, 0, 0 }, mode))
    end
    local z = nn.ZeroPad1d({ 2, 1 })(x:reshape(2, 3, 9))
    assert.are.same({ 2, 3, 12 }, z.shape)
    same_bits("ZeroPad1d", z, F.pad(x:reshape(2, 3, 9), { 2, 1 }))
  end)

  it("the keyword form is the positional one", function()
    local x = ember.randn(2, 2, 3, 3, 3)
    same_bits("ConstantPad3d", nn.ConstantPad3d{ padding = { 1, 2, 0, 1, 1, 0 }, value = 1.5 }(x),
      nn.ConstantPad3d({ 1, 2, 0, 1, 1, 0 }, 1.5)(x))
    same_bits("ReflectionPad3d", nn.ReflectionPad3d{ padding = 1 }(x), nn.ReflectionPad3d(1)(x))
    same_bits("ReplicationPad3d", nn.ReplicationPad3d{ padding = 2 }(x), nn.ReplicationPad3d(2)(x))
    same_bits("ZeroPad3d", nn.ZeroPad3d{ padding = 1 }(x), nn.ConstantPad3d(1, 0)(x))
    same_bits("ZeroPad1d", nn.ZeroPad1d{ padding = 3 }(x[1][1]), nn.ConstantPad1d(3, 0)(x[1][1]))
  end)

  it("float64 gradcheck of each 3-d padding", function()
    local x = ember.randn(1, 2, 3, 3, 2, { dtype = "float64" })
    gradcheck.check(function(t) return nn.ReflectionPad3d({ 1, 1, 2, 0, 1, 2 })(t) end, { x })
    gradcheck.check(function(t) return nn.ReplicationPad3d({ 2, 0, 1, 1, 0, 1 })(t) end, { x })
    gradcheck.check(function(t) return nn.ConstantPad3d({ -1, 1, 1, 0, 1, 1 }, 0.25)(t) end, { x })
  end)

  it("refuses bad options and inputs naming the module at the caller's line", function()
    raises_here(function() nn.ConstantPad3d({ 1, 2 }, 0) end,
      "ConstantPad3d: padding must be an integer or a list of six {left, right, top, bottom, front, back}, got {1, 2}")
    raises_here(function() nn.ConstantPad3d(1, "x") end, "ConstantPad3d: value must be a number, got string")
    raises_here(function() nn.ReflectionPad3d(-1) end, "ReflectionPad3d: padding must be a non-negative integer")
    raises_here(function() nn.ReplicationPad3d({ 1, 1, 1, 1, 1, 1.5 }) end, "ReplicationPad3d: padding must be")
    raises_here(function() nn.ZeroPad1d({ 1, 1, 1, 1 }) end, "ZeroPad1d: padding must be an integer or a list of two")
    raises_here(function() nn.ZeroPad3d{ padding = 1, value = 2 } end, "nn.ZeroPad3d: unknown option 'value'")
    raises_here(function() nn.ConstantPad3d{ pading = 1 } end, "nn.ConstantPad3d: unknown option 'pading'")
    raises_here(function() nn.ReflectionPad3d(1)(ember.randn(2, 3, 4)) end,
      "ReflectionPad3d.forward: expected an input [N, C, D, H, W] or [C, D, H, W], got shape [2, 3, 4]")
    raises_here(function() nn.ReflectionPad3d({ 0, 0, 0, 0, 2, 0 })(ember.randn(1, 1, 2, 3, 3)) end,
      "ReflectionPad3d.forward: padding (0, 0, 0, 0, 2, 0) is too large for an input of shape [1, 1, 2, 3, 3]")
    raises_here(function() nn.ConstantPad3d(-2, 0)(ember.randn(1, 1, 3, 3, 3)) end,
      "ConstantPad3d.forward: padding (-2, -2, -2, -2, -2, -2) is too large")
    raises_here(function() nn.ZeroPad1d(1)("x") end, "ZeroPad1d.forward: expected an input [N, C, L] or [C, L], got string")
  end)
end)

describe("nn.ParameterList and nn.ParameterDict", function()
  local c = fx.containers

  -- torch's Holder: x times each gain, then x @ heads.image + (x * x) @ heads.text
  local Holder = nn.Module:extend("Holder")
  function Holder:__init()
    self.gains = nn.ParameterList()
    for _ = 1, 3 do self.gains:append(ember.randn(4, { dtype = "float64" })) end
    self.heads = nn.ParameterDict{ text = ember.randn(4, 2, { dtype = "float64" }),
      image = ember.randn(4, 2, { dtype = "float64" }) }
  end
  function Holder:forward(x)
    for _, g in ipairs(self.gains) do x = x * g end
    return x:matmul(self.heads.image) + (x * x):matmul(self.heads.text)
  end

  it("torch's state dict names in torch's order; torch's state loads and gives its output and gradients", function()
    local m = Holder()
    assert.are.same(c.names, { table.unpack(m:parameter_names()) })
    local sd = {}
    for i, n in ipairs(c.names) do sd[n] = T(c.state[i]) end
    for n, t in pairs(m:state_dict()) do assert.are.same(sd[n].shape, t.shape, n) end
    m:load_state_dict(sd)
    local out = m(T(c.x))
    check("out", out, T(c.out), 1e-14)
    out:sum():backward()
    local params = m:named_parameters()
    for i, n in ipairs(c.names) do check("grad " .. n, params[n].grad, T(c.grads[i]), 1e-14) end
  end)

  it("an optimizer steps every parameter of both", function()
    local m = Holder()
    assert.are.equal(5, #m:parameters())
    local before = {}
    for i, p in ipairs(m:parameters()) do before[i] = p:clone() end
    local opt = ember.optim.SGD(m:parameters(), { lr = 0.1 })
    m(ember.randn(3, 4, { dtype = "float64" })):sum():backward()
    opt:step()
    for i, p in ipairs(m:parameters()) do assert.is_false(ember.equal(p, before[i]), "parameter " .. i) end
  end)

  it("ParameterList: 1-based indexing, PyTorch's names and printing, tensors made parameters", function()
    local t = ember.ones(3)
    local list = nn.ParameterList({ t, ember.zeros(2, 5) })
    assert.are.equal(2, #list)
    assert.is_true(list[1].requires_grad)
    assert.is_nil(list[3])
    assert.are.same({ 2, 5 }, list[-1].shape)
    list[1]:detach():add_(1) -- the parameter shares t's storage, as torch.nn.Parameter(t)
    assert.are.equal(2, t[1]:item())
    local p = nn.Parameter(ember.randn(4))
    list:append(p)
    assert.is_true(rawequal(p, list[3]), "a parameter is kept, the same tensor")
    list[2] = ember.randn(7)
    assert.are.same({ 7 }, list[2].shape)
    local keys = {}
    for k, v in pairs(list:state_dict()) do keys[#keys + 1] = k .. ":" .. #v.shape end
    table.sort(keys)
    assert.are.same({ "0:1", "1:1", "2:1" }, keys)
    local seen = {}
    for i, q in ipairs(list) do seen[i] = q.shape[1] end
    assert.are.same({ 3, 7, 4 }, seen)
    assert.are.equal("ParameterList(\n    (0): Parameter containing: [float32 of size 3]\n"
      .. "    (1): Parameter containing: [float32 of size 7]\n    (2): Parameter containing: [float32 of size 4]\n)",
      tostring(list))
    assert.are.equal("ParameterList()", tostring(nn.ParameterList()))
    list:extend({ ember.randn(2, 2) })
    assert.are.equal(4, #list:parameters())
  end)

  it("ParameterDict: order, sorted plain tables, keys/values/items/get/pop/update, printing", function()
    local d = nn.ParameterDict{ { "b", ember.randn(3) }, { "a", ember.randn(2, 2) } }
    assert.are.same({ "b", "a" }, { table.unpack(d:keys()) })
    assert.are.same({ "a", "b" }, { table.unpack(nn.ParameterDict{ b = ember.randn(1), a = ember.randn(1) }:keys()) })
    assert.is_true(d.a.requires_grad)
    assert.are.equal(d.a, d["a"])
    assert.are.equal(d.a, d:get("a"))
    assert.are.equal("none", d:get("zzz", "none"))
    d.c = ember.randn(5)
    assert.are.equal(3, #d)
    assert.are.same({ 5 }, d:values()[3].shape)
    assert.are.equal("c", d:items()[3][1])
    assert.are.same({ 5 }, d:pop("c").shape)
    assert.is_false(d:contains("c"))
    d:update({ { "a", ember.randn(6) } }) -- replaces
    assert.are.same({ 6 }, d.a.shape)
    assert.are.equal("ParameterDict(\n    (b): Parameter containing: [float32 of size 3]\n"
      .. "    (a): Parameter containing: [float32 of size 6]\n)", tostring(d))
    local names = {}
    for n in pairs(d) do names[#names + 1] = n end
    assert.are.same({ "b", "a" }, names)
    d.b = nil
    assert.are.equal(1, #d:parameters())
  end)

  it("refuse what torch refuses, and Lua's pitfalls, naming the container at the caller's line", function()
    local list = nn.ParameterList({ ember.randn(2) })
    raises_here(function() return list[0] end, "ParameterList: index 0: indices are 1-based")
    raises_here(function() list[5] = ember.randn(2) end, "ParameterList: index 5 is out of range for a list of 1 parameters")
    raises_here(function() list:append("x") end, "ParameterList.append: the value must be a tensor, got string")
    raises_here(function() list:append(ember.tensor({ 1, 2 }, "int64")) end,
      "ParameterList.append: the value must be a floating-point tensor (a parameter requires grad), got int64")
    raises_here(function() nn.ParameterList(ember.randn(2)) end, "ParameterList: expected a table of tensors, got a tensor")
    raises_here(function() nn.ParameterList({ ember.randn(2), 3 }) end, "ParameterList: entry 2 must be a tensor, got number")
    raises_here(function() list(ember.randn(2)) end, "ParameterList.forward: a ParameterList is not callable")
    local d = nn.ParameterDict()
    raises_here(function() d.keys = ember.randn(2) end, "ParameterDict: the key 'keys' would hide ParameterDict's own")
    raises_here(function() d["a.b"] = ember.randn(2) end, "ParameterDict: a key must be a non-empty string without '.'")
    raises_here(function() d.w = 3 end, "ParameterDict: 'w' must be a tensor, got number")
    raises_here(function() d:pop("nope") end, "ParameterDict.pop: no parameter named 'nope'")
    raises_here(function() d:update({ { "x" } }) end, "ParameterDict.update: entry 1 must be a {name, tensor} pair")
    raises_here(function() nn.ParameterDict{ w = ember.tensor({ 1 }, "int64") } end,
      "ParameterDict.update: 'w' must be a floating-point tensor")
  end)
end)
