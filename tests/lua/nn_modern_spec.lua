-- The modules of issue 27: SiLU, RMSNorm, FeedForward's gated activations
-- (SwiGLU, GeGLU), Identity, Flatten, ModuleList and ModuleDict. Values and
-- gradients are checked in float64 against PyTorch 1.13 through the committed
-- fixtures tests/fixtures/nn_modern.lua (tests/gen_nn_fixtures.py; PyTorch's
-- own parameter names, which are ember's for these modules), with float64
-- finite-difference gradchecks, errors that name the module at the caller's
-- line, printing, and RMSNorm under bfloat16 and autocast.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_modern.lua")
local F64 = { dtype = "float64" }
local max_rel, raises_here = compare.max_rel, compare.raises_here
local function case(name) return compare.case(fixtures, name) end

-- Loads the fixture's state (the names must be PyTorch's), runs
-- forward(module, inputs), backpropagates sum(out * R), compares the output
-- and every gradient, and checks that every parameter was compared.
local function parity(m, c, forward, tol)
  compare.module(m, c, { forward = forward, tol = tol })
end

local names_of = compare.sorted_keys

describe("issue 27 modules match PyTorch (float64)", function()
  it("SiLU", function()
    parity(nn.SiLU(), case("SiLU"), function(m, i) return m(i.x) end)
  end)

  it("RMSNorm over the last dim, eps = 1e-6", function()
    parity(nn.RMSNorm(6, { eps = 1e-6, dtype = "float64" }), case("RMSNorm"), function(m, i) return m(i.x) end)
  end)

  it("RMSNorm over the last two dims, default eps (float64's epsilon)", function()
    parity(nn.RMSNorm({ 3, 4 }, { dtype = "float64" }), case("RMSNorm_2d_default_eps"),
      function(m, i) return m(i.x) end)
  end)

  it("RMSNorm without a weight", function()
    local m = nn.RMSNorm(5, { eps = 1e-5, elementwise_affine = false })
    assert.are.same({}, names_of(m:state_dict()))
    parity(m, case("RMSNorm_no_affine"), function(mod, i) return mod(i.x) end)
  end)

  for _, act in ipairs { "swiglu", "geglu" } do
    for _, bias in ipairs { true, false } do
      local name = "FeedForward_" .. act .. (bias and "" or "_nobias")
      it(("FeedForward %s, bias=%s"):format(act, tostring(bias)), function()
        local m = nn.FeedForward(6, 10, { activation = act, bias = bias, dtype = "float64" })
        parity(m, case(name), function(mod, i) return mod(i.x) end)
      end)
    end
  end

  it("Flatten(2, 3) is PyTorch's Flatten(1, 2)", function()
    parity(nn.Flatten(2, 3), case("Flatten"), function(m, i) return m(i.x) end)
  end)

  it("ModuleList: PyTorch's state dict ('0.weight', '2.bias') loads strictly and computes the same", function()
    local l = nn.ModuleList { nn.Linear(4, 5, F64), nn.ReLU(), nn.Linear(5, 3, F64) }
    assert.are.same({ "0.bias", "0.weight", "2.bias", "2.weight" }, names_of(l:state_dict()))
    parity(l, case("ModuleList"), function(m, i)
      local x = i.x
      for _, layer in ipairs(m) do x = layer(x) end
      return x
    end)
  end)

  it("ModuleDict: PyTorch's state dict ('head_b.weight') loads strictly and computes the same", function()
    local d = nn.ModuleDict { { "head_b", nn.Linear(4, 2, F64) }, { "head_a", nn.Linear(4, 2, { bias = false, dtype = "float64" }) } }
    assert.are.same({ "head_a.weight", "head_b.bias", "head_b.weight" }, names_of(d:state_dict()))
    assert.are.same(case("ModuleDict").config.order, { table.unpack(d:keys()) })
    parity(d, case("ModuleDict"), function(m, i) return m.head_b(i.x) * m["head_a"](i.x):tanh() end)
  end)
end)

describe("issue 27 modules: float64 gradchecks", function()
  local function gc(name, f, inputs)
    ember.manual_seed(1234)
    gradcheck.check(f, inputs, { name = name })
  end

  it("SiLU", function()
    local m = nn.SiLU()
    gc("SiLU", function(x) return m(x) end, { ember.randn({ 3, 4 }, F64) })
  end)

  it("RMSNorm: input and weight, one and two normalised dims", function()
    local m = nn.RMSNorm(5, { eps = 1e-6, dtype = "float64" })
    gc("RMSNorm", function(x, w) m.weight = w; return m(x) end,
      { ember.randn({ 2, 3, 5 }, F64), ember.randn({ 5 }, F64) })
    local m2 = nn.RMSNorm({ 2, 3 }, { dtype = "float64" })
    gc("RMSNorm 2 dims", function(x, w) m2.weight = w; return m2(x) end,
      { ember.randn({ 4, 2, 3 }, F64), ember.randn({ 2, 3 }, F64) })
  end)

  it("RMSNorm on a non-contiguous input", function()
    local m = nn.RMSNorm(4, { elementwise_affine = false })
    local x = ember.randn({ 4, 3 }, F64):transpose(1, 2):detach()
    assert.is_false(x:is_contiguous())
    gc("RMSNorm nc", function(a) return m(a) end, { x })
  end)

  for _, act in ipairs { "swiglu", "geglu" } do
    it("FeedForward " .. act .. ": input and all three weights", function()
      local m = nn.FeedForward(3, 4, { activation = act, dtype = "float64" })
      gc("FeedForward " .. act, function(x, w1, w3, w2)
        m.linear1.weight, m.linear3.weight, m.linear2.weight = w1, w3, w2
        return m(x)
      end, { ember.randn({ 2, 3 }, F64), ember.randn({ 4, 3 }, F64), ember.randn({ 4, 3 }, F64),
        ember.randn({ 3, 4 }, F64) })
    end)
  end

  it("Flatten", function()
    local m = nn.Flatten(1, -2)
    gc("Flatten", function(x) return m(x):sin() end, { ember.randn({ 2, 3, 2 }, F64) })
  end)
end)

describe("nn.SiLU, nn.Identity, nn.Flatten", function()
  it("SiLU is x * sigmoid(x) and prints", function()
    local x = ember.randn(3, 4)
    assert.is_true(max_rel(nn.SiLU()(x), x * x:sigmoid()) < 1e-6)
    assert.are.equal("SiLU()", tostring(nn.SiLU()))
    raises_here(function() local _ = nn.SiLU()("x") end, "SiLU.forward: expected a tensor")
  end)

  it("Identity returns its arguments themselves and ignores its constructor's", function()
    local id = nn.Identity(54, { anything = true })
    local x, y = ember.randn(2), ember.randn(3)
    local a, b = id(x, y)
    assert.are.equal(x, a)
    assert.are.equal(y, b)
    assert.are.equal("Identity()", tostring(id))
    assert.are.equal(0, #id:parameters())
  end)

  it("Flatten: 1-based dims, PyTorch's default, negative dims, 0-d input", function()
    local x = ember.randn(2, 3, 4, 5)
    assert.are.same(ember.Size { 2, 60 }, nn.Flatten()(x).shape)
    assert.are.same(ember.Size { 6, 4, 5 }, nn.Flatten(1, 2)(x).shape)
    assert.are.same(ember.Size { 2, 3, 20 }, nn.Flatten(-2)(x).shape)
    assert.are.same(ember.Size { 2, 12, 5 }, nn.Flatten(2, -2)(x).shape)
    assert.are.same(ember.Size { 120 }, nn.Flatten(1)(x).shape)
    assert.are.same(ember.Size { 2, 3, 4, 5 }, nn.Flatten(3, 3)(x).shape)
    assert.are.same(ember.Size { 1 }, nn.Flatten(1)(ember.tensor(3.0)).shape)
    assert.are.equal("Flatten(start_dim=2, end_dim=-1)", tostring(nn.Flatten()))
  end)

  it("Flatten errors name the module and the dims, at the caller's line", function()
    raises_here(function() local _ = nn.Flatten(0) end, "Flatten: start_dim must be a nonzero integer")
    raises_here(function() local _ = nn.Flatten(2, 1.5) end, "Flatten: end_dim must be a nonzero integer")
    raises_here(function() local _ = nn.Flatten(3)(ember.randn(2, 3)) end,
      "Flatten.forward: start_dim=3, end_dim=-1 are out of range for a 2-d input of shape [2, 3]")
    raises_here(function() local _ = nn.Flatten(3, 2)(ember.randn(2, 3, 4)) end,
      "Flatten.forward: start_dim=3 comes after end_dim=2")
    raises_here(function() local _ = nn.Flatten()({}) end, "Flatten.forward: expected a tensor, got table")
  end)
end)

describe("nn.RMSNorm", function()
  it("is x / rms(x) * weight, with state dict 'weight' only, and prints", function()
    local m = nn.RMSNorm(8, { eps = 1e-6 })
    assert.are.same({ "weight" }, names_of(m:state_dict()))
    assert.are.same({ "weight" }, { table.unpack(m:parameter_names()) })
    local x = ember.randn(3, 8)
    local y = m(x)
    -- each row of y has a root mean square of 1 (weight is ones)
    local rms = (y * y):mean(-1):sqrt()
    assert.is_true((rms - 1):abs():max():item() < 1e-5)
    assert.are.equal("RMSNorm([8], eps=1e-06, elementwise_affine=true)", tostring(m))
    assert.are.equal("RMSNorm([2, 3], eps=None, elementwise_affine=false)",
      tostring(nn.RMSNorm({ 2, 3 }, { elementwise_affine = false })))
  end)

  it("default eps is the epsilon of the dtype it computes in", function()
    -- an all-zero row: x / sqrt(0 + eps) is 0 either way; a tiny row shows eps
    local x32 = ember.full({ 1, 4 }, 1e-4)
    local y32 = nn.RMSNorm(4)(x32)
    local want = 1e-4 / math.sqrt(1e-8 + 2 ^ -23)
    assert.is_true(math.abs(y32[1][1]:item() - want) < 1e-5 * want)
    local y64 = nn.RMSNorm(4, F64)(x32:double())
    local want64 = 1e-4 / math.sqrt(1e-8 + 2 ^ -52)
    assert.is_true(math.abs(y64[1][1]:item() - want64) < 1e-12 * want64)
  end)

  it("normalises bfloat16 in float32 and returns bfloat16; float32 under autocast", function()
    ember.manual_seed(7)
    local m = nn.RMSNorm(16)
    local x = ember.randn(4, 16):bfloat16()
    local y = m(x)
    assert.are.equal("bfloat16", y.dtype)
    local ref = m(x:float())
    -- one bfloat16 rounding of the result: 2^-8 relative
    assert.is_true(max_rel(y:float(), ref) < 2 ^ -8)
    local xa = ember.randn(4, 16):requires_grad_()
    local ya = ember.autocast("bfloat16", function()
      local h = nn.Linear(16, 16)(xa) -- bfloat16 under autocast
      assert.are.equal("bfloat16", h.dtype)
      return m(h)
    end)
    assert.are.equal("float32", ya.dtype)
    ya:sum():backward()
    assert.are.equal("float32", m.weight.grad.dtype)
    assert.are.equal("float32", xa.grad.dtype)
  end)

  it("runs the backend's fused kernel, which matches the formula in every dtype", function()
    -- the formula, written out with core ops and differentiated by autograd
    local function formula(x, w, eps, nd)
      local h = x.dtype == "bfloat16" and x:float() or x
      local flat = h:reshape(h:numel() // (h.shape[h.ndim] * (nd == 2 and h.shape[h.ndim - 1] or 1)), -1)
      local y = (flat / ((flat * flat):mean(-1, true) + eps):sqrt()):view(h.shape)
      return w and y * w or y
    end
    ember.manual_seed(3)
    for _, c in ipairs{ {"float64", 1e-12, 1e-12}, {"float32", 2e-6, 2e-5}, {"bfloat16", 2 ^ -7, 2 ^ -6} } do
      local dt, tol_y, tol_g = c[1], c[2], c[3]
      for _, shape in ipairs{ {7}, {2, 3} } do
        local m = nn.RMSNorm(shape, { eps = 1e-5, dtype = dt })
        ember.no_grad(function() m.weight:copy_(ember.randn(shape):to(dt)) end)
        -- over two dims a transposed (non-contiguous) input
        local x = #shape == 1 and ember.randn(4, 9, 7) or ember.randn(3, 5, 3, 2):transpose(3, 4)
        x = x:to(dt):requires_grad_()
        local gy = ember.randn(x.shape):to(dt)
        local y
        local prof = ember.profile(function() y = m(x); y:backward(gy) end)
        local ran = {}
        for _, r in ipairs(prof:stats()) do ran[r.name] = true end
        assert.is_true(ran.rms_norm == true, dt .. ": the fused rms_norm kernel ran")
        assert.are.equal(dt, y.dtype)
        local gx, gw = x.grad, m.weight.grad
        local xr = x:detach():to(dt == "float64" and "float64" or "float32"):requires_grad_()
        local wr = m.weight:detach():to(xr.dtype):requires_grad_()
        local yr = formula(xr, wr, 1e-5, #shape)
        yr:backward(gy:to(xr.dtype))
        assert.is_true(max_rel(y:to(xr.dtype), yr) < tol_y, dt .. " forward")
        assert.is_true(max_rel(gx:to(xr.dtype), xr.grad) < tol_g, dt .. " input gradient")
        assert.is_true(max_rel(gw:to(xr.dtype), wr.grad) < tol_g, dt .. " weight gradient")
      end
    end
  end)

  it("errors name RMSNorm at the caller's line", function()
    raises_here(function() local _ = nn.RMSNorm(0) end, "RMSNorm: normalized_shape entries must be positive integers, got 0")
    raises_here(function() local _ = nn.RMSNorm("x") end, "RMSNorm: normalized_shape must be a positive integer")
    raises_here(function() local _ = nn.RMSNorm(4, { eps = -1 }) end, "RMSNorm: eps must be a non-negative number")
    raises_here(function() local _ = nn.RMSNorm(4)(ember.randn(2, 5)) end,
      "RMSNorm.forward: input shape [2, 5] does not end with normalized_shape [4]")
    raises_here(function() local _ = nn.RMSNorm({ 2, 3 })(ember.randn(3)) end,
      "RMSNorm.forward: input shape [3] does not end with normalized_shape [2, 3]")
    raises_here(function() local _ = nn.RMSNorm(3)(ember.ones(2, 3, "int64")) end,
      "RMSNorm.forward: expected a floating-point input, got int64")
  end)
end)

describe("nn.FeedForward gated", function()
  it("has linear1, linear3, linear2 (Llama's w1/gate, w3/up, w2/down) and prints its activation", function()
    local m = nn.FeedForward(4, 6, { activation = "swiglu", bias = false })
    assert.are.same({ "linear1.weight", "linear2.weight", "linear3.weight" }, names_of(m:state_dict()))
    assert.are.same(ember.Size { 6, 4 }, m.linear3.weight.shape)
    assert.matches("activation=swiglu", tostring(m))
    assert.matches("%(activation%): SiLU%(%)", tostring(m))
    assert.matches("%(activation%): GELU%(%)", tostring(nn.FeedForward(4, 6, { activation = "geglu" })))
    -- the plain ones keep two projections and print as before
    local plain = nn.FeedForward(4, 6)
    assert.is_nil(plain.linear3)
    assert.are.equal(4 * 6 * 2 + 6 + 4, plain:num_parameters())
  end)

  it("computes w2(silu(w1 x) * w3 x) and its dropout draws from the seeded generator", function()
    local m = nn.FeedForward(4, 6, { activation = "swiglu", dropout = 0.5 })
    local x = ember.randn(3, 4)
    m:eval()
    local want = m.linear2(m.linear1(x):silu() * m.linear3(x))
    assert.is_true(max_rel(m(x), want) < 1e-6)
    m:train()
    ember.manual_seed(3); local a = m(x)
    ember.manual_seed(3); local b = m(x)
    assert.are.equal(0, (a - b):abs():max():item())
    assert.is_true((a - want):abs():max():item() > 0) -- dropout did something
  end)

  it("an unknown activation names FeedForward and the choices", function()
    raises_here(function() local _ = nn.FeedForward(4, 8, { activation = "swish" }) end,
      'FeedForward: activation must be "relu", "gelu", "silu", "swiglu" or "geglu", got swish')
  end)
end)

describe("nn.ModuleList", function()
  local function three() return nn.ModuleList { nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1) } end

  it("indexes 1-based, names children '0', '1', ... and prints as PyTorch", function()
    local l = three()
    assert.are.equal(3, #l)
    assert.are.equal("Linear", l[1].__name)
    assert.are.equal("ReLU", l[2].__name)
    assert.are.equal(l[3], l[-1])
    assert.is_nil(l[4])
    assert.is_false(pcall(function() return l[0] end)) -- 1-based: an error, not nil (probe_models_spec)
    assert.are.equal(
      "ModuleList(\n  (0): Linear(in_features=2, out_features=3, bias=true)\n  (1): ReLU()\n"
        .. "  (2): Linear(in_features=3, out_features=1, bias=true)\n)", tostring(l))
    assert.are.same({ "0.weight", "0.bias", "2.weight", "2.bias" }, { table.unpack(l:parameter_names()) })
  end)

  it("ipairs and pairs walk the modules in order", function()
    local l = three()
    local seen = {}
    for i, m in ipairs(l) do seen[#seen + 1] = i .. m.__name end
    assert.are.same({ "1Linear", "2ReLU", "3Linear" }, seen)
    seen = {}
    for i, m in pairs(l) do seen[#seen + 1] = i .. m.__name end
    assert.are.same({ "1Linear", "2ReLU", "3Linear" }, seen)
  end)

  it("append, extend, insert, pop and assignment keep PyTorch's numbering", function()
    local l = nn.ModuleList()
    assert.are.equal(0, #l)
    assert.are.equal(l, l:append(nn.Linear(1, 1)))
    l:extend { nn.ReLU(), nn.GELU() }
    l:insert(1, nn.Identity())
    assert.are.same({ "Identity", "Linear", "ReLU", "GELU" }, { l[1].__name, l[2].__name, l[3].__name, l[4].__name })
    assert.are.same({ "1.weight", "1.bias" }, { table.unpack(l:parameter_names()) })
    assert.matches("%(0%): Identity%(%)\n  %(1%): Linear", tostring(l))
    local popped = l:pop(1)
    assert.are.equal("Identity", popped.__name)
    assert.are.same({ "0.weight", "0.bias" }, { table.unpack(l:parameter_names()) })
    assert.are.equal("GELU", l:pop().__name)
    assert.are.equal(2, #l)
    l[2] = nn.SiLU()
    assert.are.equal("SiLU", l[2].__name)
    l[3] = nn.Tanh and nn.Tanh() or nn.Identity() -- #l + 1 appends
    assert.are.equal(3, #l)
    l:extend(l) -- itself: appends a copy of the list of references once
    assert.are.equal(6, #l)
    assert.are.equal(l[1], l[4])
    -- a module registered twice is one parameter set, as in PyTorch
    assert.are.equal(2, #l:parameters())
  end)

  it("moves, trains and zero_grads its modules as any container", function()
    local l = three():to("float64")
    assert.are.equal("float64", l[1].weight.dtype)
    l:eval()
    assert.is_false(l[3].training)
    local x = ember.randn({ 4, 2 }, F64)
    local y = x
    for _, m in ipairs(l) do y = m(y) end
    y:sum():backward()
    assert.is_not_nil(l[1].weight.grad)
    l:zero_grad()
    assert.is_nil(l[1].weight.grad)
  end)

  it("errors name ModuleList at the caller's line", function()
    raises_here(function() local _ = nn.ModuleList { nn.ReLU(), 3 } end, "ModuleList: entry 2 is a number, not a module")
    raises_here(function() local _ = nn.ModuleList(nn.ReLU()) end, "ModuleList: expected a table of modules (or a ModuleList or Sequential), got a module (ReLU)")
    raises_here(function() three():append("x") end, "ModuleList.append: expected a module, got string")
    raises_here(function() three():insert(9, nn.ReLU()) end, "ModuleList.insert: index 9 is out of range 1..4")
    raises_here(function() three():pop(4) end, "ModuleList.pop: index 4 is out of range for a list of 3 modules")
    raises_here(function() local l = three(); l[7] = nn.ReLU() end, "ModuleList: index 7 is out of range for a list of 3 modules")
    raises_here(function() local l = three(); l[1] = 5 end, "ModuleList: list[1] must be a module, got number")
    raises_here(function() local _ = three()(ember.ones(2)) end, "ModuleList.forward: a ModuleList is not callable")
  end)
end)

describe("nn.ModuleDict", function()
  it("keeps the order of {name, module} pairs; a plain table is sorted by name", function()
    local d = nn.ModuleDict { { "z", nn.ReLU() }, { "a", nn.Linear(2, 2) } }
    assert.are.same({ "z", "a" }, { table.unpack(d:keys()) })
    local s = nn.ModuleDict { z = nn.ReLU(), a = nn.Linear(2, 2), m = nn.GELU() }
    assert.are.same({ "a", "m", "z" }, { table.unpack(s:keys()) })
    assert.are.equal("ModuleDict(\n  (a): Linear(in_features=2, out_features=2, bias=true)\n  (m): GELU()\n  (z): ReLU()\n)",
      tostring(s))
  end)

  it("reads, adds, replaces and removes by name; #, pairs, values, items, contains, pop, update", function()
    local d = nn.ModuleDict()
    d.enc = nn.Linear(2, 3)
    d["act"] = nn.ReLU()
    assert.are.equal(2, #d)
    assert.are.equal("Linear", d.enc.__name)
    assert.is_true(d:contains("act"))
    assert.is_false(d:contains("nope"))
    local seen = {}
    for k, m in pairs(d) do seen[#seen + 1] = k .. "=" .. m.__name end
    assert.are.same({ "enc=Linear", "act=ReLU" }, seen)
    assert.are.equal(d.act, d:values()[2])
    assert.are.equal("enc", d:items()[1][1])
    d.act = nn.GELU() -- replaces in place: the order stays
    assert.are.same({ "enc", "act" }, { table.unpack(d:keys()) })
    assert.are.equal("GELU", d.act.__name)
    d:update { { "dec", nn.Linear(3, 2) } }
    assert.are.same({ "enc.weight", "enc.bias", "dec.weight", "dec.bias" }, { table.unpack(d:parameter_names()) })
    assert.are.equal("GELU", d:pop("act").__name)
    d.enc = nil
    assert.are.same({ "dec" }, { table.unpack(d:keys()) })
    local e = nn.ModuleDict():update(d)
    assert.are.equal(d.dec, e.dec)
  end)

  it("errors name ModuleDict at the caller's line", function()
    raises_here(function() local d = nn.ModuleDict(); d.train = nn.ReLU() end,
      "ModuleDict: the key 'train' would hide ModuleDict's own field or method of that name")
    raises_here(function() local _ = nn.ModuleDict { keys = nn.ReLU() } end, "ModuleDict.update: the key 'keys' would hide")
    raises_here(function() local d = nn.ModuleDict(); d["a.b"] = nn.ReLU() end, "ModuleDict: a key must be a non-empty string without '.'")
    raises_here(function() local d = nn.ModuleDict(); d.x = 3 end, "ModuleDict: 'x' must be a module, got number")
    raises_here(function() local _ = nn.ModuleDict { a = 3 } end, "ModuleDict.update: 'a' must be a module, got number")
    raises_here(function() nn.ModuleDict():pop("x") end, "ModuleDict.pop: no module named 'x'")
    raises_here(function() local _ = nn.ModuleDict()(ember.ones(1)) end, "ModuleDict.forward: a ModuleDict is not callable")
  end)
end)

describe("Transformer layers' batch_first (PyTorch's option)", function()
  it("false takes and gives [L, B, E]: the batch-first layer's values, masks unchanged", function()
    ember.manual_seed(1)
    local a = nn.TransformerEncoderLayer(16, 4, { dim_feedforward = 32, dropout = 0 })
    local b = nn.TransformerEncoderLayer(16, 4, { dim_feedforward = 32, dropout = 0, batch_first = false })
    b:load_state_dict(a:state_dict())
    local x = ember.randn(2, 5, 16)
    local pad = ember.tensor({ { false, false, false, true, true }, { false, false, false, false, false } })
    local yb = b(x:transpose(1, 2), { key_padding_mask = pad })
    assert.are.same({ 5, 2, 16 }, { yb.shape[1], yb.shape[2], yb.shape[3] })
    assert.are.equal(0, (a(x, { key_padding_mask = pad }) - yb:transpose(1, 2)):abs():max():item())
    assert.truthy(tostring(b):find("batch_first=false", 1, true))
    local d1 = nn.TransformerDecoderLayer(16, 4, { dim_feedforward = 32, dropout = 0 })
    local d2 = nn.TransformerDecoderLayer(16, 4, { dim_feedforward = 32, dropout = 0, batch_first = false })
    d2:load_state_dict(d1:state_dict())
    local m = ember.randn(2, 7, 16)
    assert.are.equal(0, (d1(x, m) - d2(x:transpose(1, 2), m:transpose(1, 2)):transpose(1, 2)):abs():max():item())
    local s = nn.TransformerEncoder(16, 4, 2, { dim_feedforward = 32, dropout = 0, batch_first = false })
    assert.are.equal(5, s(x:transpose(1, 2)).shape[1])
    -- true is ember's own layout: accepted, as PyTorch code passes it
    assert.are.equal(a(x).shape[1], nn.TransformerEncoderLayer(16, 4, { batch_first = true })(x).shape[1])
    assert.has_error(function() nn.TransformerEncoderLayer(16, 4, { batch_first = 1 }) end,
      "nn.TransformerEncoderLayer: batch_first must be a boolean, got number")
  end)
end)
