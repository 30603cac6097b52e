-- The nn modules of the PyTorch user's next reach: ConvTranspose1d/2d,
-- InstanceNorm1d/2d, EmbeddingBag, Transformer, Bilinear, TripletMarginLoss
-- and MarginRankingLoss. Values and gradients (inputs and parameters) are
-- checked against PyTorch 1.13 through the committed fixtures
-- tests/fixtures/nn_extra.lua (tests/gen_nn_fixtures.py, extra_cases) in
-- float64 (1e-12) and float32, with PyTorch's state dict keys (the
-- Transformer's through its documented name map), running statistics,
-- float64 gradchecks, printing, and errors that name the module at the
-- caller's line.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_extra.lua")
local F64 = { dtype = "float64" }
local T, check, raises_here = compare.T, compare.check, compare.raises_here
local names_of = compare.sorted_keys
local function case(name) return compare.case(fixtures, name) end

local function one(m, i) return m(i.x) end
local function pair(m, i) return m(i.x1, i.x2) end
local function bag(m, i) return m(i.input, i.offsets, i.per_sample_weights) end
local function triplet(m, i) return m(i.a, i.p, i.n) end
local function ranking(m, i) return m(i.x1, i.x2, i.y) end
local function seq2seq(m, i)
  local o = {}
  for _, k in ipairs { "src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask",
    "memory_key_padding_mask" } do o[k] = i[k] end
  return m(i.src, i.tgt, o)
end

local SMALL = { d_model = 8, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 1, dim_feedforward = 12,
  dropout = 0 }

-- name -> { make(dtype) -> module, forward }
local MODULES = {
  ConvTranspose2d = { function(dt) return nn.ConvTranspose2d(3, 4, 3, { dtype = dt }) end },
  ConvTranspose2d_s2p1op1 = { function(dt)
    return nn.ConvTranspose2d(3, 2, 3, { stride = 2, padding = 1, output_padding = 1, dtype = dt })
  end },
  ConvTranspose2d_groups_dilation = { function(dt)
    return nn.ConvTranspose2d(4, 6, { 2, 3 }, { stride = { 2, 1 }, padding = { 0, 1 }, dilation = { 2, 1 }, groups = 2,
      dtype = dt })
  end },
  ConvTranspose2d_crop_nobias_unbatched = { function(dt)
    return nn.ConvTranspose2d(2, 3, 3, { stride = 3, padding = 3, output_padding = { 2, 0 }, bias = false, dtype = dt })
  end },
  ConvTranspose2d_depthwise_output_size = { function(dt)
    return nn.ConvTranspose2d(3, 3, 3, { stride = 2, padding = 1, groups = 3, dtype = dt })
  end, function(m, i) return m(i.x, { 8, 7 }) end },
  ConvTranspose1d = { function(dt) return nn.ConvTranspose1d(3, 4, 3, { dtype = dt }) end },
  ConvTranspose1d_groups_stride_op = { function(dt)
    return nn.ConvTranspose1d(4, 6, 3, { stride = 3, padding = 1, output_padding = 2, dilation = 2, groups = 2, dtype = dt })
  end },
  ConvTranspose1d_unbatched_dilation_op = { function(dt)
    return nn.ConvTranspose1d(2, 2, 2, { dilation = 3, output_padding = 2, bias = false, dtype = dt })
  end },
  InstanceNorm1d = { function(dt) return nn.InstanceNorm1d(3, { dtype = dt }) end },
  InstanceNorm1d_affine_unbatched = { function(dt) return nn.InstanceNorm1d(3, { affine = true, eps = 1e-3, dtype = dt }) end },
  InstanceNorm2d_affine_track = { function(dt)
    return nn.InstanceNorm2d(4, { affine = true, track_running_stats = true, momentum = 0.3, dtype = dt })
  end },
  InstanceNorm2d_track_eval = { function(dt)
    return nn.InstanceNorm2d(3, { affine = true, track_running_stats = true, dtype = dt }):eval()
  end },
  InstanceNorm2d_unbatched = { function(dt) return nn.InstanceNorm2d(2, { dtype = dt }) end },
  EmbeddingBag_mean_offsets = { function(dt) return nn.EmbeddingBag(8, 3, { dtype = dt }) end, bag },
  EmbeddingBag_sum_offsets_psw = { function(dt) return nn.EmbeddingBag(8, 3, { mode = "sum", dtype = dt }) end, bag },
  EmbeddingBag_max_offsets = { function(dt) return nn.EmbeddingBag(8, 3, { mode = "max", dtype = dt }) end, bag },
  EmbeddingBag_mean_2d_padding = { function(dt) return nn.EmbeddingBag(6, 4, { padding_idx = 1, dtype = dt }) end, bag },
  EmbeddingBag_max_2d_padding = { function(dt)
    return nn.EmbeddingBag(6, 4, { mode = "max", padding_idx = 1, dtype = dt })
  end, bag },
  EmbeddingBag_sum_last_offset_padding = { function(dt)
    return nn.EmbeddingBag(7, 2, { mode = "sum", padding_idx = 4, include_last_offset = true, dtype = dt })
  end, bag },
  Transformer = { function(dt)
    local o = { dtype = dt }
    for k, v in pairs(SMALL) do o[k] = v end
    return nn.Transformer(o)
  end, seq2seq },
  Transformer_masks = { function(dt)
    local o = { dtype = dt }
    for k, v in pairs(SMALL) do o[k] = v end
    return nn.Transformer(o)
  end, seq2seq },
  Transformer_norm_first_gelu_float_masks = { function(dt)
    return nn.Transformer(8, 4, { num_encoder_layers = 1, num_decoder_layers = 2, dim_feedforward = 6, dropout = 0,
      norm_first = true, activation = "gelu", layer_norm_eps = 1e-4, dtype = dt })
  end, seq2seq },
  Bilinear = { function(dt) return nn.Bilinear(3, 4, 2, { dtype = dt }) end, pair },
  Bilinear_nobias_3d = { function(dt) return nn.Bilinear(2, 3, 4, { bias = false, dtype = dt }) end, pair },
  TripletMarginLoss = { function() return nn.TripletMarginLoss() end, triplet },
  TripletMarginLoss_p1_swap_sum = { function()
    return nn.TripletMarginLoss({ p = 1, swap = true, reduction = "sum" })
  end, triplet },
  TripletMarginLoss_margin2_none = { function()
    return nn.TripletMarginLoss({ margin = 2, reduction = "none", eps = 1e-3 })
  end, triplet },
  MarginRankingLoss = { function() return nn.MarginRankingLoss() end, ranking },
  MarginRankingLoss_margin_sum = { function() return nn.MarginRankingLoss({ margin = 0.5, reduction = "sum" }) end, ranking },
  MarginRankingLoss_none = { function() return nn.MarginRankingLoss({ margin = 0.2, reduction = "none" }) end, ranking },
}

local start_buffers = compare.start_buffers

-- The module's state dict keys under PyTorch's names: its own, except the
-- Transformer's, compared through the map its load_state_dict applies.
local function tensors(specs)
  local out = {}
  for k, v in pairs(specs) do out[k] = T(v) end
  return out
end

local function keys_match(name, m, c)
  if name:match("^Transformer") then
    assert.are.same(c.keys, names_of(c.state), name .. ": the fixture's state is the whole state dict")
    assert.are.same(names_of(m:state_dict()), names_of(nn.Transformer.from_torch_state_dict(tensors(c.state))),
      name .. ": PyTorch's keys map onto the module's")
  else
    assert.are.same(c.keys, names_of(m:state_dict()), name .. ": state dict keys are PyTorch's")
  end
end

-- A Transformer case with its state and gradients under ember's names
-- (compare.module reads the fixture's tables; the split of in_proj_* needs tensors).
local function ember_names(c)
  local function spec(t) return { shape = t.shape, data = t:reshape({ -1 }):totable() } end
  local out = {}
  for k, v in pairs(c) do out[k] = v end
  for _, f in ipairs { "state", "grads" } do
    out[f] = {}
    for k, v in pairs(nn.Transformer.from_torch_state_dict(tensors(c[f]))) do out[f][k] = spec(v) end
  end
  return out
end

local function float64_parity(name, make, forward)
  local c = case(name)
  local m = make("float64")
  keys_match(name, m, c)
  if name:match("^Transformer") then c = ember_names(c) end
  compare.module(m, c, { forward = forward or one, extra = start_buffers(m, c, "float64") })
  for k, v in pairs(c.buffers or {}) do check(name .. " buffer " .. k, m[k], T(v), 1e-12) end
end

-- float32: the module in float32 on the fixture's inputs rounded to float32,
-- against PyTorch's float64 numbers.
local function float32_parity(name, make, forward, tol)
  local c = case(name)
  local m = make("float32")
  if name:match("^Transformer") then c = ember_names(c) end
  compare.module_float32(m, c, { forward = forward or one, extra = start_buffers(m, c, "float32"), tol = tol })
end

local ORDER = {}
for _, c in ipairs(fixtures.cases) do if MODULES[c.name] then ORDER[#ORDER + 1] = c.name end end

describe("nn extra modules match PyTorch 1.13 (float64, 1e-12): outputs, input and parameter gradients, state dict keys", function()
  it("covers every fixture case", function()
    local missing = {}
    for _, c in ipairs(fixtures.cases) do
      if not MODULES[c.name] and c.name ~= "square_subsequent_mask" then missing[#missing + 1] = c.name end
    end
    assert.are.same({}, missing)
  end)
  for _, name in ipairs(ORDER) do
    it(name, function() float64_parity(name, MODULES[name][1], MODULES[name][2]) end)
  end
end)

describe("nn extra modules match PyTorch 1.13 in float32", function()
  for _, name in ipairs(ORDER) do
    it(name, function() float32_parity(name, MODULES[name][1], MODULES[name][2], 2e-5) end)
  end
end)

describe("float64 gradchecks", function()
  local function gc(name, f, inputs)
    ember.manual_seed(99)
    gradcheck.check(f, inputs, { name = name })
  end
  local function r(...) return ember.randn({ ... }, F64) end

  it("ConvTranspose2d: input, weight and bias (stride, crop, output_padding, groups, dilation)", function()
    for _, o in ipairs {
      { 4, 6, 3, { stride = 2, padding = 1, output_padding = 1, groups = 2 } },
      { 2, 2, { 2, 1 }, { stride = { 3, 2 }, padding = { 0, 1 }, output_padding = { 2, 1 } } }, -- phases without taps
      { 4, 2, { 2, 3 }, { stride = { 1, 3 }, padding = { 2, 0 }, dilation = { 2, 1 } } },
    } do
      local m = nn.ConvTranspose2d(o[1], o[2], o[3], { dtype = "float64", stride = o[4].stride, padding = o[4].padding,
        output_padding = o[4].output_padding, groups = o[4].groups, dilation = o[4].dilation })
      gc(tostring(m), function(x, w, b) m.weight, m.bias = w, b; return m(x) end,
        { r(2, o[1], 3, 4), m.weight:detach():clone(), m.bias:detach():clone() })
    end
  end)

  it("ConvTranspose1d: input, weight and bias", function()
    local m = nn.ConvTranspose1d(4, 6, 3, { stride = 3, padding = 1, output_padding = 2, dilation = 2, groups = 2,
      dtype = "float64" })
    gc("ConvTranspose1d", function(x, w, b) m.weight, m.bias = w, b; return m(x) end,
      { r(2, 4, 5), m.weight:detach():clone(), m.bias:detach():clone() })
  end)

  it("InstanceNorm1d/2d: input, weight and bias", function()
    local m2 = nn.InstanceNorm2d(3, { affine = true, dtype = "float64" })
    gc("InstanceNorm2d", function(x, w, b) m2.weight, m2.bias = w, b; return m2(x) end, { r(2, 3, 3, 4), r(3), r(3) })
    local m1 = nn.InstanceNorm1d(3, { affine = true, track_running_stats = true, dtype = "float64" }):eval()
    m1.running_var:fill_(0.7)
    gc("InstanceNorm1d eval", function(x, w, b) m1.weight, m1.bias = w, b; return m1(x) end, { r(2, 3, 5), r(3), r(3) })
    local plain = nn.InstanceNorm1d(4)
    gc("InstanceNorm1d unbatched", function(x) return plain(x) end, { r(4, 6) })
  end)

  it("EmbeddingBag: weight (every mode) and per_sample_weights", function()
    local ids = ember.tensor({ 2, 1, 5, 5, 7, 3, 4, 6 }, "int64")
    local off = ember.tensor({ 1, 4, 4, 7 }, "int64")
    for _, mode in ipairs { "sum", "mean", "max" } do
      local m = nn.EmbeddingBag(8, 3, { mode = mode, padding_idx = 3, dtype = "float64" })
      gc("EmbeddingBag " .. mode, function(w) m.weight = w; return m(ids, off) end, { r(8, 3) })
    end
    local m = nn.EmbeddingBag(8, 3, { mode = "sum", dtype = "float64" })
    gc("EmbeddingBag per_sample_weights", function(w, psw) m.weight = w; return m(ids, off, psw) end, { r(8, 3), r(8) })
  end)

  it("Transformer: src, tgt and a few parameters, with masks", function()
    ember.manual_seed(3)
    local m = nn.Transformer(4, 2, { num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 6, dropout = 0,
      dtype = "float64" })
    local pad = ember.tensor({ { false, false, false }, { false, false, true } })
    gc("Transformer", function(src, tgt, w)
      m.decoder.layers[1].cross_attn.k_proj.weight = w
      return m(src, tgt, { tgt_is_causal = true, src_key_padding_mask = pad, memory_key_padding_mask = pad })
    end, { r(2, 3, 4), r(2, 2, 4), m.decoder.layers[1].cross_attn.k_proj.weight:detach():clone() })
  end)

  it("Bilinear, TripletMarginLoss and MarginRankingLoss", function()
    local bil = nn.Bilinear(2, 3, 2, F64)
    gc("Bilinear", function(a, b, w, bias) bil.weight, bil.bias = w, bias; return bil(a, b) end,
      { r(4, 2), r(4, 3), r(2, 2, 3), r(2) })
    -- margins large enough that no triplet sits at the hinge
    local trip = nn.TripletMarginLoss({ margin = 10, swap = true, p = 3 })
    gc("TripletMarginLoss", function(a, p, n) return trip(a, p, n) end, { r(3, 4), r(3, 4), r(3, 4) })
    local rank = nn.MarginRankingLoss({ margin = 10, reduction = "sum" })
    gc("MarginRankingLoss", function(a, b) return rank(a, b, ember.tensor({ 1, -1, 1 }, F64)) end, { r(3), r(3) })
  end)
end)

describe("nn.ConvTranspose2d / ConvTranspose1d", function()
  it("is the adjoint of nn.Conv2d with the same weight: <conv(x), y> = <x, convT(y)>, groups and all", function()
    ember.manual_seed(7)
    local opts = { stride = { 2, 3 }, padding = { 1, 2 }, dilation = { 2, 1 }, groups = 2, bias = false, dtype = "float64" }
    local conv = nn.Conv2d(4, 6, { 3, 2 }, opts)
    local tconv = nn.ConvTranspose2d(6, 4, { 3, 2 }, opts)
    tconv.weight = conv.weight:detach():clone()
    local x = ember.randn(2, 4, 9, 11, F64)
    local cx = conv(x)
    local y = ember.randn(cx.shape, F64)
    local tx = tconv(y, x.shape)
    assert.are.same(x.shape, tx.shape)
    local lhs, rhs = (cx * y):sum():item(), (x * tx):sum():item()
    assert(math.abs(lhs - rhs) <= 1e-10 * math.abs(lhs), ("%.17g vs %.17g"):format(lhs, rhs))
  end)

  it("the adjoint identity over strides, dilations, kernels and paddings (phases without taps, gcd(s, d) > 1, crops)", function()
    ember.manual_seed(9)
    local n = 0
    for _, st in ipairs { 1, 2, 3, 4 } do
      for _, dl in ipairs { 1, 2, 3 } do
        for _, ks in ipairs { 1, 2, 3, 5 } do
          for _, pd in ipairs { 0, 1, 4 } do
            local H, W = 9, 6
            if H + 2 * pd >= dl * (ks - 1) + 1 and W + 2 * pd >= 2 * (3 - 1) + 1 then
              local opts = { stride = { st, 2 }, padding = { pd, pd }, dilation = { dl, 2 }, bias = false, dtype = "float64",
                groups = 2 }
              local conv = nn.Conv2d(2, 4, { ks, 3 }, opts)
              local tconv = nn.ConvTranspose2d(4, 2, { ks, 3 }, opts)
              tconv.weight = conv.weight:detach():clone()
              local x = ember.randn(1, 2, H, W, F64)
              local cx = conv(x)
              local y = ember.randn(cx.shape, F64)
              local tx = tconv(y, x.shape)
              local lhs, rhs = (cx * y):sum():item(), (x * tx):sum():item()
              assert(math.abs(lhs - rhs) <= 1e-10 * (1 + math.abs(lhs)),
                ("s=%d d=%d k=%d p=%d: %.17g vs %.17g"):format(st, dl, ks, pd, lhs, rhs))
              n = n + 1
            end
          end
        end
      end
    end
    assert.is_true(n > 100)
  end)

  it("float32: the backend's kernel and the composed route agree", function()
    ember.manual_seed(8)
    local a = nn.ConvTranspose2d(6, 4, 3, { stride = 2, padding = 1, output_padding = 1, groups = 2 })
    local b = nn.ConvTranspose2d(6, 4, 3, { stride = 2, padding = 1, output_padding = 1, groups = 2, route = "composed" })
    b:load_state_dict(a:state_dict())
    local x = ember.randn(2, 6, 5, 4)
    local before = ember.conv_routes()
    local ya = a(x)
    local after = ember.conv_routes()
    assert.are.equal(before.kernel + 4, after.kernel, "one kernel call per output phase (stride 2 x 2)")
    check("kernel vs composed", ya, b(x):double(), 1e-5)
    -- under autocast: bfloat16 products, the bias joined to them
    local yb = ember.autocast("bfloat16", function() return a(x) end)
    assert.are.equal("bfloat16", yb.dtype)
    check("autocast bfloat16", yb:float(), ya:double(), 2e-2)
  end)

  it("output sizes follow PyTorch's formula; output_size picks output_padding", function()
    local m = nn.ConvTranspose2d(2, 3, { 3, 4 }, { stride = { 2, 3 }, padding = { 1, 0 }, dilation = { 1, 2 } })
    -- (H - 1) s - 2 p + d (k - 1) + op + 1
    assert.are.same(ember.Size { 1, 3, 9, 19 }, m(ember.randn(1, 2, 5, 5)).shape)
    assert.are.same(ember.Size { 3, 10, 21 }, m(ember.randn(2, 5, 5), { 10, 21 }).shape)
    assert.are.same(ember.Size { 1, 3, 10, 20 }, m(ember.randn(1, 2, 5, 5), ember.Size { 1, 3, 10, 20 }).shape)
    local m1 = nn.ConvTranspose1d(2, 3, 4, { stride = 2, padding = 1 })
    assert.are.same(ember.Size { 1, 3, 10 }, m1(ember.randn(1, 2, 5)).shape)
    assert.are.same(ember.Size { 1, 3, 11 }, m1(ember.randn(1, 2, 5), 11).shape)
  end)

  it("state dict, initialisation bounds and printing are PyTorch's", function()
    local m = nn.ConvTranspose2d(4, 6, 3, { groups = 2 })
    assert.are.same(ember.Size { 4, 3, 3, 3 }, m.weight.shape)
    assert.are.same(ember.Size { 6 }, m.bias.shape)
    assert.are.same({ "bias", "weight" }, names_of(m:state_dict()))
    local bound = 1 / math.sqrt(3 * 9) -- fan_in = out/groups * kh * kw
    assert.is_true(m.weight:abs():max():item() <= bound and m.bias:abs():max():item() <= bound)
    assert.is_true(m.weight:abs():max():item() > 0.7 * bound)
    assert.are.equal("ConvTranspose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), dilation=(2, 2), output_padding=(1, 1), "
      .. "groups=2, bias=false)", tostring(nn.ConvTranspose2d(2, 4, 3, { stride = 2, output_padding = 1, dilation = 2,
        groups = 2, bias = false })))
    assert.are.equal("ConvTranspose1d(4, 6, kernel_size=(3,), stride=(3,), padding=(4,), dilation=(2,))",
      tostring(nn.ConvTranspose1d(4, 6, 3, { stride = 3, padding = 4, dilation = 2 })))
  end)

  it("errors name the module at the caller's line", function()
    raises_here(function() local _ = nn.ConvTranspose2d(3, 4, 3, { output_padding = 2, stride = 2 }) end,
      "ConvTranspose2d: output_padding must be smaller than either stride or dilation (as PyTorch), got output_padding={2, 2}")
    raises_here(function() local _ = nn.ConvTranspose1d(3, 4, 3, { output_padding = 1 }) end,
      "ConvTranspose1d: output_padding must be smaller than either stride or dilation")
    -- PyTorch: "negative output_padding is not supported" (at the forward)
    raises_here(function() local _ = nn.ConvTranspose1d(3, 4, 3, { output_padding = -1, stride = 2 }) end,
      "ConvTranspose1d: output_padding must be a non-negative integer or a table of one, got -1")
    raises_here(function() local _ = nn.ConvTranspose2d(3, 4, 3, { groups = 2 }) end,
      "ConvTranspose2d: in_channels=3 must be divisible by groups=2")
    raises_here(function() local _ = nn.ConvTranspose2d(4, 3, 3, { groups = 2 }) end,
      "ConvTranspose2d: out_channels=3 must be divisible by groups=2")
    raises_here(function() local _ = nn.ConvTranspose2d(0, 3, 3) end, "ConvTranspose2d: in_channels must be a positive integer, got 0")
    raises_here(function() local _ = nn.ConvTranspose2d(3, 3, 3, { padding = "same" }) end,
      "ConvTranspose2d: padding must be a non-negative integer or a pair of them")
    raises_here(function() local _ = nn.ConvTranspose2d(3, 3, 3, { stide = 2 }) end,
      "nn.ConvTranspose2d: unknown option 'stide'")
    raises_here(function() local _ = nn.ConvTranspose2d(3, 3, 0) end, "ConvTranspose2d: kernel_size must be a positive integer")
    raises_here(function() local _ = nn.ConvTranspose2d(3, 4, 3)(ember.randn(2, 4, 5, 5)) end,
      "ConvTranspose2d.forward: expected 3 input channels (in_channels), got 4")
    raises_here(function() local _ = nn.ConvTranspose1d(3, 4, 3)(ember.randn(2, 3, 4, 5)) end,
      "ConvTranspose1d.forward: expected an input [N, C, L] or [C, L], got shape [2, 3, 4, 5]")
    raises_here(function() local _ = nn.ConvTranspose2d(3, 4, 3, { stride = 2 })(ember.randn(1, 3, 4, 4), { 12, 9 }) end,
      "ConvTranspose2d.forward: output_size {12, 9} is not reachable from an input of shape [1, 3, 4, 4]: each size must be between {9, 9} and {10, 10}")
    raises_here(function() local _ = nn.ConvTranspose2d(3, 4, 1, { padding = 1 })(ember.randn(1, 3, 2, 2)) end,
      "ConvTranspose2d.forward: the output would be empty (size 0 along dim 3)")
  end)
end)

describe("nn.InstanceNorm1d / InstanceNorm2d", function()
  it("state dicts and printing are PyTorch's; running stats move in training and are used in eval", function()
    assert.are.same({}, nn.InstanceNorm2d(3):state_dict())
    local m = nn.InstanceNorm1d(3, { affine = true, track_running_stats = true })
    assert.are.same({ "bias", "num_batches_tracked", "running_mean", "running_var", "weight" }, names_of(m:state_dict()))
    assert.are.equal("InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=false, track_running_stats=false)",
      tostring(nn.InstanceNorm2d(3)))
    local x = ember.randn(4, 3, 7) * 3 + 2
    m(x)
    assert.is_true(m.running_mean:abs():sum():item() > 0)
    assert.are.equal(0, m.num_batches_tracked:item()) -- as PyTorch's instance norms
    m:eval()
    local y = m(x)
    local want = (x - m.running_mean:view({ 1, 3, 1 })) / (m.running_var:view({ 1, 3, 1 }) + 1e-5):sqrt()
    check("eval uses running stats", y, want:double(), 1e-5)
    -- without affine or running stats any channel count is accepted (PyTorch warns only)
    assert.are.same(ember.Size { 2, 5, 4, 4 }, nn.InstanceNorm2d(3)(ember.randn(2, 5, 4, 4)).shape)
  end)

  it("errors name the module at the caller's line", function()
    raises_here(function() local _ = nn.InstanceNorm2d(0) end, "InstanceNorm2d: num_features must be a positive integer, got 0")
    raises_here(function() local _ = nn.InstanceNorm1d(3, { momentum = false }) end,
      "InstanceNorm1d: momentum must be a number in [0, 1]")
    raises_here(function() local _ = nn.InstanceNorm1d(3, { afine = true }) end, "nn.InstanceNorm1d: unknown option 'afine'")
    raises_here(function() local _ = nn.InstanceNorm2d(3, { affine = true })(ember.randn(2, 4, 3, 3)) end,
      "InstanceNorm2d.forward: expected 3 channels (num_features) at dim 2, got shape [2, 4, 3, 3]")
    raises_here(function() local _ = nn.InstanceNorm1d(3)(ember.randn(2, 3, 4, 4)) end,
      "InstanceNorm1d.forward: expected a 2-d or 3-d input [N, C, L] or [C, L], got shape [2, 3, 4, 4]")
    raises_here(function() local _ = nn.InstanceNorm2d(3)(ember.randn(2, 3, 1, 1)) end,
      "InstanceNorm2d.forward: expected more than 1 spatial element when training")
  end)
end)

describe("nn.EmbeddingBag", function()
  it("the 2-d form equals the offsets form; empty bags give zeros; padding rows get no gradient", function()
    ember.manual_seed(4)
    local m = nn.EmbeddingBag(10, 4, { mode = "mean", padding_idx = 2 })
    local x2 = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, "int64")
    local a = m(x2)
    local b = m(x2:reshape({ -1 }), ember.tensor({ 1, 4 }, "int64"))
    check("2-d vs offsets", a, b:double(), 1e-7)
    check("offsets as a Lua list", m(x2:reshape({ -1 }), { 1, 4 }), b:double(), 0)
    local e = m(ember.tensor({ 3, 4 }, "int64"), { offsets = ember.tensor({ 1, 1, 3 }, "int64") })
    assert.are.same(ember.Size { 3, 4 }, e.shape)
    assert.are.equal(0, e[1]:abs():sum():item())
    assert.are.equal(0, e[3]:abs():sum():item())
    m(ember.tensor({ 2, 2, 5 }, "int64"), ember.tensor({ 1 }, "int64")):sum():backward()
    assert.are.equal(0, m.weight.grad[2]:abs():sum():item())
    assert.is_true(m.weight.grad[5]:abs():sum():item() > 0)
    assert.are.same({ "weight" }, names_of(m:state_dict()))
    assert.are.equal("EmbeddingBag(10, 4, mode=mean, padding_idx=2)", tostring(m))
  end)

  it("errors name the module at the caller's line", function()
    local m = nn.EmbeddingBag(5, 2, { mode = "sum" })
    local ids = ember.tensor({ 1, 2, 3 }, "int64")
    raises_here(function() local _ = nn.EmbeddingBag(5, 2, { mode = "median" }) end,
      "EmbeddingBag: mode must be \"sum\", \"mean\" or \"max\", got median")
    raises_here(function() local _ = nn.EmbeddingBag(5, 2, { padding_idx = 0 }) end,
      "EmbeddingBag: padding_idx must be an id in 1..5, got 0")
    raises_here(function() local _ = nn.EmbeddingBag(5, 0) end, "EmbeddingBag: embedding_dim must be a positive integer, got 0")
    -- the same rules (one helper) for nn.Embedding, named as it
    raises_here(function() local _ = nn.Embedding(5, 2, { padding_idx = 6 }) end,
      "Embedding: padding_idx must be an id in 1..5, got 6")
    raises_here(function() local _ = nn.Embedding(5, 2.5) end, "Embedding: embedding_dim must be a positive integer, got 2.5")
    raises_here(function() local _ = nn.EmbeddingBag(5, 2, { sparse = true }) end,
      "nn.EmbeddingBag: sparse gradients are not supported (sparse = true)")
    raises_here(function() local _ = nn.EmbeddingBag(5, 2, { sparce = true }) end, "nn.EmbeddingBag: unknown option 'sparce'")
    raises_here(function() local _ = m(ids) end, "EmbeddingBag.forward: a 1-d input needs offsets")
    raises_here(function() local _ = m(ids:float(), ember.tensor({ 1 }, "int64")) end,
      "EmbeddingBag.forward: input must be int64 ids (1-based)")
    raises_here(function() local _ = m(ids, { 1, 2.5 }) end,
      "EmbeddingBag.forward: offsets must be integers (1-based positions), got 2.5 at 2")
    raises_here(function() local _ = m(ids, { ofsets = ember.tensor({ 1 }, "int64") }) end,
      "EmbeddingBag.forward: unknown option 'ofsets'")
    raises_here(function() local _ = m(ids, ember.tensor({ 0, 2 }, "int64")) end,
      "EmbeddingBag.forward: the first offset must be 1")
    raises_here(function() local _ = m(ids, ember.tensor({ 1, 3, 2 }, "int64")) end,
      "EmbeddingBag.forward: offsets must not decrease and stay within 1..4")
    raises_here(function() local _ = m(ember.tensor({ 1, 6 }, "int64"), ember.tensor({ 1 }, "int64")) end,
      "EmbeddingBag.forward: ids must be in 1..5 (1-based), got 6")
    raises_here(function() local _ = m(ids:view({ 1, 3 }), ember.tensor({ 1 }, "int64")) end,
      "EmbeddingBag.forward: offsets must be nil for a 2-d input [1, 3]")
    raises_here(function() local _ = m(ids, ember.tensor({ 1 }, "int64"), ember.ones(2)) end,
      "EmbeddingBag.forward: per_sample_weights must be a tensor of the input's shape [3], got [2]")
    raises_here(function() local _ = nn.EmbeddingBag(5, 2)(ids, ember.tensor({ 1 }, "int64"), ember.ones(3)) end,
      "EmbeddingBag.forward: per_sample_weights is only supported for mode \"sum\"")
  end)
end)

describe("nn.Transformer", function()
  local function small(extra)
    local o = { dtype = "float64" }
    for k, v in pairs(SMALL) do o[k] = v end
    for k, v in pairs(extra or {}) do o[k] = v end
    return nn.Transformer(o)
  end

  it("loads PyTorch's state dict as it is, and generate_square_subsequent_mask is PyTorch's", function()
    local c = case("Transformer_masks")
    local m = small()
    m:load_state_dict(tensors(c.state)) -- PyTorch's names
    local i = tensors(c.inputs)
    check("out", seq2seq(m, i), T(c.out), 1e-12)
    local mask = nn.Transformer.generate_square_subsequent_mask(4, F64)
    assert.are.same(T(case("square_subsequent_mask").out):totable(), mask:totable())
    assert.are.same(mask:totable(), m:generate_square_subsequent_mask(4, F64):totable())
    assert.are.equal("float32", nn.Transformer.generate_square_subsequent_mask(3).dtype)
  end)

  it("tgt_is_causal is the square subsequent mask; without either the target attends everywhere", function()
    ember.manual_seed(5)
    local m = small()
    local src, tgt = ember.randn(2, 5, 8, F64), ember.randn(2, 4, 8, F64)
    local causal = m(src, tgt, { tgt_is_causal = true })
    check("tgt_is_causal", causal, m(src, tgt, { tgt_mask = nn.Transformer.generate_square_subsequent_mask(4, F64) }), 1e-12)
    local full = m(src, tgt)
    assert.is_true((full - causal):abs():max():item() > 1e-3)
    check("block mask", causal, m(src, tgt, { tgt_block_mask = ember.ones(4, 4):triu(1):bool() }), 1e-12)
  end)

  it("batch_first = false takes and returns [L, B, d_model]", function()
    ember.manual_seed(6)
    local a = small()
    local b = small({ batch_first = false })
    b:load_state_dict(a:state_dict())
    local src, tgt = ember.randn(2, 5, 8, F64), ember.randn(2, 3, 8, F64)
    check("seq-first", b(src:transpose(1, 2), tgt:transpose(1, 2)):transpose(1, 2), a(src, tgt), 1e-12)
  end)

  it("unbatched [L, d_model] inputs (1-d key padding masks) are one batch of one", function()
    ember.manual_seed(7)
    local m = small()
    local src, tgt = ember.randn(5, 8, F64), ember.randn(3, 8, F64)
    local pad = ember.tensor({ false, false, false, true, false })
    local one = m(src, tgt, { src_key_padding_mask = pad, memory_key_padding_mask = pad, tgt_is_causal = true })
    assert.are.same(ember.Size { 3, 8 }, one.shape)
    local batched = m(src:unsqueeze(1), tgt:unsqueeze(1), { src_key_padding_mask = pad:unsqueeze(1),
      memory_key_padding_mask = pad:unsqueeze(1), tgt_is_causal = true })
    check("unbatched", one, batched:squeeze(1), 1e-12)
    raises_here(function() local _ = m(src, tgt:unsqueeze(1)) end,
      "Transformer.forward: tgt must be [B, L, d_model] (or both unbatched [L, d_model]) with d_model = 8, got [1, 3, 8]")
  end)

  it("defaults and printing are PyTorch's (final norms; the decoder's self-attention not causal)", function()
    -- each default on its own (the whole default model is 44M parameters)
    local m = nn.Transformer(8, 2, { dim_feedforward = 4 })
    assert.are.equal(6, #m.encoder.layers)
    assert.are.equal(6, #m.decoder.layers)
    assert.is_truthy(m.encoder.norm and m.decoder.norm)
    assert.are.equal(2048, nn.Transformer(8, 2, { num_encoder_layers = 1, num_decoder_layers = 1 })
      .encoder.layers[1].ff.linear1.out_features)
    local big = nn.Transformer(nil, nil, { num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 4 })
    assert.are.equal(512, big.d_model)
    assert.are.equal(8, big.nhead)
    assert.are.equal(0.1, big.encoder.layers[1].dropout1.p)
    local s = tostring(nn.Transformer(8, 2, { num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 4 }))
    assert.is_truthy(s:find("Transformer(\n  d_model=8, nhead=2, batch_first=true", 1, true))
    assert.is_falsy(s:find("causal=true", 1, true))
  end)

  it("errors name the module at the caller's line", function()
    local m = small()
    local src, tgt = ember.randn(2, 5, 8, F64), ember.randn(2, 4, 8, F64)
    raises_here(function() local _ = nn.Transformer(8, 3) end,
      "MultiHeadAttention: d_model (8) must be divisible by heads (3)")
    raises_here(function() local _ = nn.Transformer(8, 2, { num_encoder_layer = 1 }) end,
      "nn.Transformer: unknown option 'num_encoder_layer'")
    raises_here(function() local _ = nn.Transformer(8, 2, { num_decoder_layers = 0 }) end,
      "nn.Transformer: num_decoder_layers must be a positive integer, got 0")
    raises_here(function() local _ = m(src, ember.randn(3, 4, 8, F64)) end,
      "Transformer.forward: src and tgt must have the same batch size, got 2 and 3")
    raises_here(function() local _ = m(src, ember.randn(2, 4, 6, F64)) end,
      "Transformer.forward: tgt must be [B, L, d_model] (or both unbatched [L, d_model]) with d_model = 8, got [2, 4, 6]")
    raises_here(function() local _ = m(src, tgt, { tgt_mask = ember.ones(4, 4):bool() }) end,
      "a boolean tgt_mask is ambiguous")
    raises_here(function() local _ = m(src, tgt, { tgt_mask = nn.Transformer.generate_square_subsequent_mask(4) }) end,
      "Transformer.forward: tgt_mask must be a float mask of the inputs' dtype float64 (added to the scores; "
      .. "generate_square_subsequent_mask(n, {dtype = \"float64\"}) makes one), got float32")
    raises_here(function() local _ = m(src, tgt, { src_key_padding_mak = ember.ones(2, 5):bool() }) end,
      "Transformer.forward: unknown option 'src_key_padding_mak'")
    raises_here(function() local _ = m(src, tgt, { tgt_is_causal = 1 }) end,
      "Transformer.forward: tgt_is_causal must be a boolean, got number")
  end)
end)

describe("nn.Bilinear, nn.TripletMarginLoss, nn.MarginRankingLoss", function()
  it("state dicts and printing are PyTorch's", function()
    assert.are.same({ "bias", "weight" }, names_of(nn.Bilinear(2, 3, 4):state_dict()))
    assert.are.equal("Bilinear(in1_features=2, in2_features=3, out_features=4, bias=true)", tostring(nn.Bilinear(2, 3, 4)))
    assert.are.equal("TripletMarginLoss(margin=1, p=2, eps=1e-06, swap=false, reduction=mean)",
      tostring(nn.TripletMarginLoss()))
    assert.are.equal("MarginRankingLoss(margin=0, reduction=mean)", tostring(nn.MarginRankingLoss()))
  end)

  it("errors name the module at the caller's line", function()
    raises_here(function() local _ = nn.Bilinear(2, 0, 4) end, "Bilinear: in2_features must be a positive integer, got 0")
    raises_here(function() local _ = nn.Bilinear(2, 3, 4)(ember.randn(5, 2), ember.randn(4, 3)) end,
      "Bilinear.forward: expected x1 [..., 2] and x2 [..., 3] with the same leading dims, got [5, 2] and [4, 3]")
    raises_here(function() local _ = nn.TripletMarginLoss({ p = 0 }) end, "TripletMarginLoss: p must be a number > 0, got 0")
    raises_here(function() local _ = nn.TripletMarginLoss({ reduction = "avg" }) end,
      "TripletMarginLoss: reduction must be \"mean\", \"sum\" or \"none\", got avg")
    raises_here(function() local _ = nn.TripletMarginLoss()(ember.randn(3, 4), ember.randn(3, 4), ember.randn(3, 5)) end,
      "TripletMarginLoss.forward: expected anchor, positive and negative of one shape [N, D] or [D], got [3, 4], [3, 4] and [3, 5]")
    raises_here(function() local _ = nn.MarginRankingLoss({ marginn = 1 }) end, "nn.MarginRankingLoss: unknown option 'marginn'")
    raises_here(function() local _ = nn.MarginRankingLoss()(ember.randn(3), ember.randn(3), ember.ones(4)) end,
      "MarginRankingLoss.forward: expected x1, x2 and y (1 or -1) of one shape, got [3], [3] and [4]")
    raises_here(function() local _ = nn.MarginRankingLoss()(ember.randn(3), 1, ember.ones(3)) end,
      "MarginRankingLoss.forward: expected x1, x2 and y (1 or -1) of one shape, got [3], number and [3]")
    local x = ember.randn(2, 3, 4)
    raises_here(function() local _ = nn.TripletMarginLoss()(x, x, x) end,
      "TripletMarginLoss.forward: expected anchor, positive and negative of one shape [N, D] or [D], got [2, 3, 4], "
      .. "[2, 3, 4] and [2, 3, 4]")
    -- the reduction rule every loss shares (nn/_loss.lua)
    raises_here(function() local _ = nn.MSELoss("avg") end, "MSELoss: reduction must be \"mean\", \"sum\" or \"none\", got avg")
    raises_here(function() local _ = nn.MSELoss({ reductoin = "sum" }) end, "nn.MSELoss: unknown option 'reductoin'")
  end)
end)

describe("nn.Transformer initialisation", function()
  it("is PyTorch's xavier_uniform_ on every matrix (q, k, v with in_proj_weight's bound)", function()
    ember.manual_seed(11)
    local d = 64
    local m = nn.Transformer(d, 4, { num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 96 })
    local l = m.decoder.layers[1]
    for _, c in ipairs {
      { l.self_attn.q_proj.weight, math.sqrt(6 / (4 * d)) }, { l.cross_attn.v_proj.weight, math.sqrt(6 / (4 * d)) },
      { l.self_attn.out_proj.weight, math.sqrt(6 / (2 * d)) }, { l.ff.linear1.weight, math.sqrt(6 / (d + 96)) },
    } do
      local top = c[1]:abs():max():item()
      assert(top <= c[2] and top > 0.95 * c[2], ("max |w| %.4f, bound %.4f"):format(top, c[2]))
    end
  end)
end)
