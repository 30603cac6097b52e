-- helper-93's probe: the nn modules of current models beside PyTorch 1.13
-- (nn.MoE against a dense reference of its routing rules, RMSNorm,
-- LayerNorm without bias, Bilinear, Fold/Unfold, PReLU, Softplus,
-- Hardtanh, Embedding's max_norm, the sinusoidal table), with the numbers
-- from tests/fixtures/helper93_modules.lua (tests/gen_helper93_fixtures.py,
-- float64), and the constructor forms and container APIs a porting user writes.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local fx = dofile("tests/fixtures/helper93_modules.lua")
local T = function(spec) return parity.T(spec, "float64") end
local raises_here = parity.raises_here

local function case(name) return parity.case(fx, name) end

describe("nn.MoE against a dense reference", function()
  local function run(c, m)
    local sd = {}
    for k, v in pairs(c.state) do sd[k] = T(v) end
    m:load_state_dict(sd)
    local x = T(c.inputs.x):requires_grad_()
    local y = m(x, c.mask and { attention_mask = T(c.mask) } or nil)
    parity.check(c.name .. " out", y, T(c.out), 1e-12)
    parity.check(c.name .. " aux_loss", m.aux_loss, T(c.aux_loss), 1e-12)
    parity.check(c.name .. " z_loss", m.z_loss, T(c.z_loss), 1e-12)
    assert.are.same(T(c.tokens_per_expert):totable(), m.tokens_per_expert:totable())
    ;((y * T(c.R)):sum() + 3 * m.aux_loss + 5 * m.z_loss):backward()
    parity.check(c.name .. " grad x", x.grad, T(c.grad_inputs.x), 1e-10)
    local params = m:named_parameters()
    local n = 0
    for k, g in pairs(m:upgrade_state_dict(c.grads)) do
      n = n + 1
      assert(params[k], c.name .. ": no parameter " .. k)
      parity.check(c.name .. " grad " .. k, params[k].grad, T(g), 1e-10)
    end
    local count = 0
    for _ in pairs(params) do count = count + 1 end
    assert.are.equal(count, n)
  end

  it("Mixtral's top-k softmax, the load-balancing and z losses, their gradients", function()
    run(case("moe_mixtral"), nn.MoE(6, 5, 4, 2, { dtype = "float64" }))
  end)

  it("Qwen2-MoE's softmax then top-k without renormalising, a gated shared expert", function()
    run(case("moe_qwen"), nn.MoE(6, 5, 4, 2, { router = "softmax_topk", shared_experts = 1, shared_d_ff = 8,
      shared_expert_gate = true, dtype = "float64" }))
  end)

  it("the losses over the attention_mask's tokens only", function()
    run(case("moe_masked"), nn.MoE(6, 5, 4, 2, { dtype = "float64" }))
  end)
end)

describe("norms, Bilinear, Fold/Unfold and the parametrised activations against PyTorch", function()
  it("RMSNorm: eps inside the root (Llama's), with and without a weight", function()
    parity.module(nn.RMSNorm(7, { eps = 1e-5, dtype = "float64" }), case("rms_eps"))
    parity.module(nn.RMSNorm(5, { eps = 1e-6, elementwise_affine = false, dtype = "float64" }), case("rms_plain"))
  end)

  it("LayerNorm(bias = false) has a weight and no bias", function()
    local m = nn.LayerNorm({ 2, 4 }, { bias = false, dtype = "float64" })
    assert.are.same({ "weight" }, parity.sorted_keys(m:state_dict()))
    parity.module(m, case("ln_nobias"))
  end)

  it("Bilinear", function()
    parity.module(nn.Bilinear(3, 4, 5, { dtype = "float64" }), case("bilinear"),
      { forward = function(m, i) return m(i.x1, i.x2) end })
  end)

  it("Unfold and Fold with dilation, padding and stride", function()
    parity.module(nn.Unfold { kernel_size = { 2, 3 }, dilation = { 1, 2 }, padding = 1, stride = { 2, 1 } }, case("unfold"))
    parity.module(nn.Fold { output_size = { 5, 6 }, kernel_size = { 2, 3 }, dilation = { 1, 2 }, padding = 1,
      stride = { 2, 1 } }, case("fold"))
  end)

  it("PReLU(3), Softplus(beta, threshold), Hardtanh(min, max) in PyTorch's positional forms", function()
    parity.module(nn.PReLU(3, { dtype = "float64" }), case("prelu"))
    parity.module(nn.Softplus(2, 1.5), case("softplus"))
    parity.module(nn.Hardtanh(-0.5, 2), case("hardtanh"))
  end)

  it("Embedding's max_norm renormalises the looked-up rows in place; the padding row gets no gradient", function()
    local c = case("embedding_maxnorm")
    local m = nn.Embedding.from_pretrained(T(c.weight0), { freeze = false, max_norm = 1.2, padding_idx = 2 })
    local y = m(T(c.ids))
    parity.check("out", y, T(c.out), 1e-12)
    parity.check("weight after", m.weight, T(c.weight1), 1e-12)
    ;(y * T(c.R)):sum():backward()
    parity.check("grad", m.weight.grad, T(c.grad), 1e-12)
  end)

  it("GroupNorm, PixelShuffle / PixelUnshuffle with extra leading dims, ChannelShuffle", function()
    parity.module(nn.GroupNorm(2, 6, { eps = 1e-3, dtype = "float64" }), case("groupnorm"))
    parity.module(nn.PixelShuffle(3), case("pixel_shuffle"))
    parity.module(nn.PixelUnshuffle(2), case("pixel_unshuffle"))
    parity.module(nn.ChannelShuffle(3), case("channel_shuffle"))
  end)

  it("Embedding's scale_grad_by_freq with a padding row", function()
    local c = case("embedding_freq")
    local m = nn.Embedding.from_pretrained(T(c.weight0), { freeze = false, padding_idx = 4, scale_grad_by_freq = true })
    local y = m(T(c.ids))
    parity.check("out", y, T(c.out), 1e-12)
    ;(y * T(c.R)):sum():backward()
    parity.check("grad", m.weight.grad, T(c.grad), 1e-12)
  end)

  it("the sinusoidal table from a later start (a cached decode)", function()
    local c = case("sinusoidal")
    local pe = nn.SinusoidalPositionalEncoding(6, { dtype = "float64" })
    local x = ember.zeros(1, 4, 6, { dtype = "float64" })
    parity.check("pe", pe(x, c.start):squeeze(1), T(c.pe), 1e-14)
  end)
end)

describe("PyTorch's constructor forms", function()
  -- were: 'options must be a table' (positional) and 'num_parameters must be a positive integer, got table'
  it("Softplus(beta, threshold), CosineSimilarity(dim, eps), PairwiseDistance(p, eps, keepdim) positionally", function()
    local sp = nn.Softplus(2, 5)
    assert.are.same({ 2, 5 }, { sp.beta, sp.threshold })
    assert.are.same({ 2, 20 }, { nn.Softplus{ beta = 2 }.beta, nn.Softplus{ beta = 2 }.threshold })
    local cos = nn.CosineSimilarity(1, 1e-6)
    assert.are.same({ 1, 1e-6 }, { cos.dim, cos.eps })
    local a, b = ember.randn(3, 2, { dtype = "float64" }), ember.randn(3, 2, { dtype = "float64" })
    assert.is_true(ember.allclose(cos(a, b), ember.cosine_similarity(a, b, { dim = 1, eps = 1e-6 })))
    local pd = nn.PairwiseDistance(1, 1e-3, true)
    assert.are.same({ 3, 1 }, { pd(a, b).shape[1], pd(a, b).shape[2] })
    assert.is_true(ember.allclose(pd(a, b):squeeze(2), (a - b + 1e-3):abs():sum(2)))
  end)

  it("PReLU{num_parameters =, init =} by name", function()
    local m = nn.PReLU { num_parameters = 3, init = 0.1, dtype = "float64" }
    assert.are.same({ 0.1, 0.1, 0.1 }, m.weight:totable())
    raises_here(function() nn.PReLU { num_params = 3 } end, "nn.PReLU: unknown option 'num_params'")
  end)

  it("errors name the module and the argument at the user's line", function()
    raises_here(function() nn.Softplus(0) end, "Softplus: beta must be a number > 0, got 0")
    raises_here(function() nn.Softplus(1, "x") end, "Softplus: threshold must be a number, got string")
    raises_here(function() nn.Softplus(1, 2, 3) end, "Softplus: takes at most 2 arguments before the options table (beta, threshold), got 3")
    raises_here(function() nn.CosineSimilarity { dimm = 1 } end, "nn.CosineSimilarity: unknown option 'dimm'")
    raises_here(function() nn.PairwiseDistance(0) end, "PairwiseDistance: p must be a number > 0, got 0")
  end)
end)

describe("nn.Sequential's list methods (PyTorch 1.13's append, insert, extend, pop)", function()
  local function names(s)
    local t = {}
    for i = 1, #s do t[i] = s[i].__name end
    return t
  end

  -- were: seq:append / insert / pop 'attempt to call a nil value'; seq:extend{...} made a class (Module.extend)
  -- and left seq unchanged
  it("append, extend and insert change the list and rename the children 1..n", function()
    local s = nn.Sequential(nn.Linear(1, 2))
    assert.are.equal(s, s:append(nn.ReLU()))
    assert.are.equal(s, s:extend { nn.Linear(2, 3), nn.Tanh() })
    assert.are.same({ "Linear", "ReLU", "Linear", "Tanh" }, names(s))
    s:insert(1, nn.Identity())
    assert.are.same({ "Identity", "Linear", "ReLU", "Linear", "Tanh" }, names(s))
    assert.are.same({ "2.bias", "2.weight", "4.bias", "4.weight" }, parity.sorted_keys(s:state_dict()))
    assert.are.same({ 3, 3 }, { s(ember.ones(3, 1)).shape[1], s(ember.ones(3, 1)).shape[2] })
    s:extend(nn.Sequential(nn.Sigmoid()))
    assert.are.equal("Sigmoid", s[-1].__name)
  end)

  -- was (ModuleList): insert(-1, m) appended
  it("insert(-1, m) puts m before the last module, as PyTorch's seq.insert and Python's list.insert", function()
    local s = nn.Sequential(nn.ReLU(), nn.Tanh())
    s:insert(-1, nn.Sigmoid())
    assert.are.same({ "ReLU", "Sigmoid", "Tanh" }, names(s))
    s:insert(-3, nn.Identity())
    assert.are.same({ "Identity", "ReLU", "Sigmoid", "Tanh" }, names(s))
    local l = nn.ModuleList { nn.ReLU(), nn.Tanh() }
    l:insert(-1, nn.Sigmoid())
    assert.are.same({ "ReLU", "Sigmoid", "Tanh" }, names(l))
    assert.are.same({ "Sigmoid" }, { l[2].__name })
    raises_here(function() s:insert(-5, nn.ReLU()) end, "Sequential.insert: index -5 is out of range 1..5 (or -4..-1)")
    raises_here(function() l:insert(0, nn.ReLU()) end, "ModuleList.insert: index 0 is out of range 1..4 (or -3..-1)")
  end)

  it("pop removes the last or the i-th module and returns it", function()
    local s = nn.Sequential(nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 3))
    assert.are.equal("Linear", s:pop().__name)
    assert.are.equal("Linear", s:pop(1).__name)
    assert.are.same({ "ReLU" }, names(s))
    raises_here(function() s:pop(3) end, "Sequential.pop: index 3 is out of range for a Sequential of 1 modules")
  end)

  it("the class's extend still makes a subclass", function()
    local Stack = nn.Sequential:extend("Stack")
    assert.are.equal("Stack", Stack.__name)
    assert.are.equal(1, #Stack(nn.ReLU()))
    assert.are.equal("Pile", nn.ModuleList:extend("Pile").__name)
  end)

  -- was: an empty Sequential, the named modules dropped without a word
  it("refuses named modules (a Lua table has no order), at the user's line", function()
    raises_here(function() nn.Sequential { fc1 = nn.Linear(1, 1) } end, "Sequential: got a module named 'fc1'")
    raises_here(function() nn.Sequential(nn.ReLU()):extend { 1 } end, "Sequential.extend: entry 1 is a number")
  end)
end)

describe("ModuleDict and ParameterDict items() in a Python-style loop", function()
  -- was: 'attempt to call a table value (for iterator)'; ipairs over the pairs as before
  it("for name, v in d:items() gives the names and values in order", function()
    local d = nn.ModuleDict { a = nn.ReLU() }
    d:update { b = nn.Tanh() }
    local got = {}
    for name, m in d:items() do got[#got + 1] = name .. "=" .. m.__name end
    assert.are.same({ "a=ReLU", "b=Tanh" }, got)
    assert.are.same({ "a", "ReLU" }, { d:items()[1][1], d:items()[1][2].__name })
    local p = nn.ParameterDict { w = ember.ones(2) }
    p.b = ember.zeros(3)
    got = {}
    for name, t in p:items() do got[#got + 1] = name .. "=" .. t:numel() end
    assert.are.same({ "w=2", "b=3" }, got)
    for _, pair in ipairs(p:items()) do assert.is_true(pair[2].requires_grad) end
  end)

  -- was: 'attempt to call a nil value (method 'clear')'
  it("clear() removes every entry, from the state dict and the parameters too", function()
    local d = nn.ModuleDict { { "a", nn.Linear(1, 1) }, { "b", nn.Linear(1, 2) } }
    assert.are.equal(d, d:clear())
    assert.are.same({ 0, 0 }, { #d, #d:parameters() })
    assert.is_nil(next(d:state_dict()))
    d.c = nn.ReLU()
    assert.are.same({ "c" }, d:keys())
    local p = nn.ParameterDict { { "w", ember.ones(2) }, { "b", ember.ones(1) } }
    assert.are.equal(p, p:clear())
    assert.are.same({ 0, 0 }, { #p, #p:parameters() })
    assert.is_nil(p.w)
  end)
end)
