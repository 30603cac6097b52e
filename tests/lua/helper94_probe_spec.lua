-- helper-94's probe: what a PyTorch / Hugging Face user of 2026 writes and
-- ember had dropped without a word. F.scaled_dot_product_attention's
-- positional arguments in PyTorch's order (against tests/fixtures/
-- helper94_sdpa.lua, written by tests/gen_helper94_fixtures.py in float64);
-- Llama.from_pretrained's torch_dtype / dtype; nn.init's generator
-- (PyTorch 2.2's) and its arguments past a function's own.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local fx = dofile("tests/fixtures/helper94_sdpa.lua")
local T = function(spec) return parity.T(spec, "float64") end
local raises_here = parity.raises_here
local F = nn.functional

describe("F.scaled_dot_product_attention's positional arguments (PyTorch's order)", function()
  it("(q, k, v, nil, 0, true) is causal: PyTorch's top-left mask when L ~= S", function()
    local c = parity.case(fx, "causal_rect")
    local q, k, v = T(c.q), T(c.k), T(c.v)
    parity.check("positional is_causal", F.scaled_dot_product_attention(q, k, v, nil, 0, true), T(c.out), 1e-12)
    parity.check("ember's", ember.scaled_dot_product_attention(q, k, v, nil, 0.0, true), T(c.out), 1e-12)
    parity.check("by name", F.scaled_dot_product_attention(q, k, v, { is_causal = true }), T(c.out), 1e-12)
  end)

  it("(q, k, v, mask) and (q, k, v, mask, 0, false, scale)", function()
    local c = parity.case(fx, "mask_scale")
    local q, k, v, mask = T(c.q), T(c.k), T(c.v), T(c.mask)
    parity.check("mask and scale", F.scaled_dot_product_attention(q, k, v, mask, 0, false, c.scale), T(c.out), 1e-12)
    parity.check("mask, then a table", F.scaled_dot_product_attention(q, k, v, mask, { scale = c.scale }), T(c.out), 1e-12)
    local plain = F.scaled_dot_product_attention(q, k, v, { attn_mask = mask })
    parity.check("mask alone", F.scaled_dot_product_attention(q, k, v, mask), plain, 1e-15)
  end)

  it("enable_gqa last by position, causal", function()
    local c = parity.case(fx, "gqa_causal")
    local q, k, v = T(c.q), T(c.k), T(c.v)
    parity.check("gqa", F.scaled_dot_product_attention(q, k, v, nil, 0, true, nil, true), T(c.out), 1e-12)
  end)

  it("refuses too many arguments, a name given twice, a non-boolean flag, at the user's line", function()
    local q = ember.randn(1, 1, 2, 4)
    raises_here(function() F.scaled_dot_product_attention(q, q, q, nil, 0, false, nil, false, 1) end,
      "too many arguments (6 after query, key and value)")
    raises_here(function() F.scaled_dot_product_attention(q, q, q, nil, 0, true, { is_causal = true }) end,
      "is_causal is given twice")
    raises_here(function() F.scaled_dot_product_attention(q, q, q, nil, 0, 1) end, "is_causal must be true or false")
    raises_here(function() F.scaled_dot_product_attention(q, q, q, "causal") end, "attn_mask must be a tensor")
  end)
end)

describe("Llama.from_pretrained's torch_dtype (transformers' from_pretrained(dir, torch_dtype=...))", function()
  local Llama = require("ember.models").Llama
  local dir = "tests/fixtures/llama_family/llama31" -- config.json says torch_dtype float32
  local ids = ember.tensor({ { 3, 9, 27, 4 } }, { dtype = "int64" })

  it("loads the parameters in that dtype (it was read as a config key and ignored)", function()
    local want = Llama.from_pretrained(dir):to("bfloat16")
    for _, o in ipairs { { torch_dtype = "bfloat16" }, { dtype = "bfloat16" }, { torch_dtype = "torch.bfloat16" } } do
      local m = Llama.from_pretrained(dir, o)
      local n = 0
      for name, p in m:named_parameters() do
        n = n + 1
        assert.are.equal("bfloat16", p.dtype, name)
      end
      assert(n > 0)
      assert.is_true(rawequal(m:output_weight(), m.model.embed_tokens.weight), "tied embeddings stay tied")
      assert.is_true(m(ids):equal(want(ids)))
      assert.is_false(m.training)
    end
    assert.are.equal("float64", Llama.from_pretrained(dir, { torch_dtype = "float64" }).model.norm.weight.dtype)
    -- "auto": config.json's
    assert.are.equal("float32", Llama.from_pretrained(dir, { torch_dtype = "auto" }).model.norm.weight.dtype)
  end)

  it("refuses float16, another name and two that disagree, at the user's line", function()
    raises_here(function() Llama.from_pretrained(dir, { torch_dtype = "float16" }) end, "ember has no float16")
    raises_here(function() Llama.from_pretrained(dir, { torch_dtype = "int64" }) end,
      "torch_dtype must be \"bfloat16\", \"float32\", \"float64\" or \"auto\"")
    raises_here(function() Llama.from_pretrained(dir, { torch_dtype = "bfloat16", dtype = "float32" }) end, "disagree")
  end)
end)

describe("nn.init's generator (PyTorch 2.2's) and arguments past a function's own", function()
  local init = nn.init
  local CASES = {
    { "uniform_", { -1, 2 } }, { "normal_", { 0.5, 2 } }, { "trunc_normal_", { 0, 1, -1, 1 } },
    { "xavier_uniform_", { 1.5 } }, { "xavier_normal_", { 1.5 } }, { "kaiming_uniform_", { 0.1, "fan_out", "leaky_relu" } },
    { "kaiming_normal_", { 0, "fan_in", "relu" } }, { "orthogonal_", { 2 } }, { "sparse_", { 0.3, 0.1 } },
  }
  local function with(list, g)
    local r = { table.unpack(list) }
    r[#r + 1] = g
    return r
  end

  it("draws from the generator given last, leaving the global one as it is (it was dropped)", function()
    for _, c in ipairs(CASES) do
      local name, args = c[1], c[2]
      ember.manual_seed(5)
      local want = init[name](ember.empty(6, 4), table.unpack(args))
      ember.manual_seed(11)
      local next_draw = ember.rand(3)
      ember.manual_seed(11)
      local g = ember.Generator():manual_seed(5)
      local got = init[name](ember.empty(6, 4), table.unpack(with(args, g)))
      assert.is_true(got:equal(want), name .. ": the generator's draws")
      assert.is_true(ember.rand(3):equal(next_draw), name .. ": the global generator moved")
    end
  end)

  it("takes generator by name too", function()
    local g = ember.Generator():manual_seed(2)
    local a = init.kaiming_uniform_(ember.empty(4, 4), { mode = "fan_out", generator = g })
    local b = init.normal_(ember.empty(4), { std = 3, generator = g })
    ember.manual_seed(2)
    assert.is_true(a:equal(init.kaiming_uniform_(ember.empty(4, 4), { mode = "fan_out" })))
    assert.is_true(b:equal(init.normal_(ember.empty(4), 0, 3)))
  end)

  it("refuses arguments past a function's own and a generator that is not one, at the user's line", function()
    raises_here(function() init.normal_(ember.empty(4), 0, 1, nil, 5) end,
      "nn.init.normal_: takes at most 3 arguments after the tensor (the last a generator), got 4")
    raises_here(function() init.zeros_(ember.empty(4), 0) end, "nn.init.zeros_: takes at most 0 arguments")
    raises_here(function() init.xavier_uniform_(ember.empty(4, 4), 1, 7) end, "generator must be an ember.Generator")
    raises_here(function() init.normal_(ember.empty(4), { std = 1 }, 3) end, "the options table must be the last")
  end)
end)

describe("nn.functional's losses take torch's positional arguments (they were dropped)", function()
  local L = fx.losses
  local x, y, w = T(L.x), T(L.y), T(L.w)
  local a, b, logp, logq = T(L.a), T(L.b), T(L.logp), T(L.logq)
  local p, t, bw, pw = T(L.p), T(L.t), T(L.bw), T(L.pw)

  it("as torch.nn.functional's, each against PyTorch 1.13", function()
    local got = {
      cross_entropy = F.cross_entropy(x, y, w, nil, 2, nil, "sum", 0.1),
      nll_loss = F.nll_loss(F.log_softmax(x, -1), y, w, nil, 2, nil, "sum"),
      l1_loss = F.l1_loss(a, b, nil, nil, "sum"),
      smooth_l1_loss = F.smooth_l1_loss(a, b, nil, nil, "sum", 0.5),
      huber_loss = F.huber_loss(a, b, "sum", 0.7),
      kl_div = F.kl_div(logp, logq, nil, nil, "batchmean", true),
      binary_cross_entropy = F.binary_cross_entropy(p, t, bw, nil, nil, "sum"),
      binary_cross_entropy_with_logits = F.binary_cross_entropy_with_logits(a, t, bw, nil, nil, "mean", pw),
    }
    for name, v in pairs(got) do parity.check(name, v, T(L[name]), 1e-12) end
    -- positional, then an options table for the rest
    parity.check("weight, then options", F.cross_entropy(x, y, w, { ignore_index = 2, reduction = "sum",
      label_smoothing = 0.1 }), T(L.cross_entropy), 1e-12)
    parity.check("options alone", F.l1_loss(a, b, { reduction = "sum" }), T(L.l1_loss), 1e-12)
  end)

  it("refuses torch's deprecated size_average / reduce, too many arguments, a name given twice, at the user's line", function()
    raises_here(function() F.l1_loss(a, b, false) end,
      "nn.functional.l1_loss: argument 3 is torch's size_average, deprecated: give reduction")
    raises_here(function() F.cross_entropy(x, y, nil, nil, -100, true) end,
      "nn.functional.cross_entropy: argument 6 is torch's reduce, deprecated")
    raises_here(function() F.nll_loss(x, y, "sum") end,
      "nn.functional.nll_loss: options must be a table ({reduction = ...}), and weight (argument 3 by position) a tensor, "
      .. "got \"sum\"")
    raises_here(function() F.huber_loss(a, b, "sum", 0.7, 1) end, "too many arguments")
    raises_here(function() F.nll_loss(x, y, w, { weight = w }) end, "weight is given twice")
  end)
end)
