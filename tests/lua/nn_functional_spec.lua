-- nn.functional (lua/ember/nn/functional.lua): torch.nn.functional under
-- its names. Values and gradients against PyTorch 1.13 through the
-- committed fixtures tests/fixtures/nn_functional.lua
-- (tests/gen_nn_fixtures.py, functional_cases) in float64: convolutions,
-- transposed convolutions, the pools, the norms with their running
-- statistics, interpolate in every mode, unfold/fold, embedding; the
-- modules equal to the functions they call; ember's own functions
-- re-exported as the same values; torch's positional arguments and the
-- options table agree; float64 gradchecks of what is new (interpolate's
-- modes, fold, unfold, embedding's padding row); errors naming the
-- function at the caller's line.
local ember = require "ember"
local nn = require "ember.nn"
local F = require "ember.nn.functional"
local gradcheck = require "tests.lua.helpers.gradcheck"
local parity = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_functional.lua")
local T, check, raises_here = parity.T, parity.check, parity.raises_here
local F64 = { dtype = "float64" }

local function same(a, b) return a.shape == b.shape and (a - b):abs():max():item() == 0 end

-- The F call each fixture case names (i: its inputs as ember tensors; c: the case).
local CALLS = {
  conv2d_all_options = function(i) return F.conv2d(i.x, i.w, i.b, { stride = { 2, 1 }, padding = { 1, 2 },
    dilation = { 1, 2 }, groups = 2 }) end,
  conv2d_same = function(i) return F.conv2d(i.x, i.w, { padding = "same" }) end,
  conv1d = function(i) return F.conv1d(i.x, i.w, i.b, 2, 1) end,
  conv_transpose2d = function(i) return F.conv_transpose2d(i.x, i.w, i.b, { stride = { 2, 3 }, padding = { 1, 0 },
    output_padding = { 1, 2 }, groups = 2 }) end,
  conv_transpose1d = function(i) return F.conv_transpose1d(i.x, i.w, i.b, { stride = 3, padding = 1,
    output_padding = 1, dilation = 2 }) end,
  max_pool2d = function(i) return F.max_pool2d(i.x, { 3, 2 }, { stride = 2, padding = 1, dilation = { 1, 2 },
    ceil_mode = true }) end,
  avg_pool2d = function(i) return F.avg_pool2d(i.x, 3, { stride = 2, padding = 1, ceil_mode = true,
    count_include_pad = false }) end,
  avg_pool2d_divisor = function(i) return F.avg_pool2d(i.x, { 2, 3 }, { divisor_override = 4 }) end,
  max_pool1d = function(i) return F.max_pool1d(i.x, 3, 2, 1) end,
  avg_pool1d = function(i) return F.avg_pool1d(i.x, 4, { stride = 3, padding = 2, count_include_pad = false }) end,
  adaptive_avg_pool2d = function(i) return F.adaptive_avg_pool2d(i.x, { 3, 4 }) end,
  adaptive_max_pool2d = function(i) return F.adaptive_max_pool2d(i.x, { 2, 3 }) end,
  adaptive_avg_pool1d = function(i) return F.adaptive_avg_pool1d(i.x, 4) end,
  adaptive_max_pool1d = function(i) return F.adaptive_max_pool1d(i.x, 3) end,
  batch_norm_training = function(i, c)
    c.rm, c.rv = T(c.running_mean_in), T(c.running_var_in)
    return F.batch_norm(i.x, c.rm, c.rv, i.w, i.b, { training = true, momentum = 0.2, eps = 1e-3 })
  end,
  batch_norm_eval = function(i, c)
    return F.batch_norm(i.x, T(c.running_mean_in), T(c.running_var_in), { weight = i.w, bias = i.b })
  end,
  instance_norm_stats = function(i, c)
    c.rm, c.rv = T(c.running_mean_in), T(c.running_var_in)
    return F.instance_norm(i.x, { running_mean = c.rm, running_var = c.rv, weight = i.w, bias = i.b,
      momentum = 0.3, eps = 1e-4 })
  end,
  instance_norm_plain = function(i) return F.instance_norm(i.x) end,
  group_norm = function(i) return F.group_norm(i.x, 3, i.w, i.b, 1e-3) end,
  layer_norm = function(i) return F.layer_norm(i.x, { 4, 5 }, { weight = i.w, bias = i.b, eps = 1e-4 }) end,
  rms_norm = function(i) return F.rms_norm(i.x, 8, i.w, 1e-6) end,
  unfold = function(i) return F.unfold(i.x, { 2, 3 }, { dilation = { 1, 2 }, padding = 1, stride = { 2, 1 } }) end,
  fold = function(i) return F.fold(i.x, { 6, 7 }, { 2, 3 }, { dilation = { 1, 2 }, padding = 1, stride = { 2, 1 } }) end,
  embedding_padding = function(i) return F.embedding(i.ids, i.w, { padding_idx = 1 }) end,
  softsign = function(i) return F.softsign(i.x) end,
  prelu = function(i) return F.prelu(i.x, i.w) end,
  pixel_shuffle = function(i) return F.pixel_shuffle(i.x, 2) end,
  pixel_unshuffle = function(i) return F.pixel_unshuffle(i.x, 3) end,
  pairwise_distance = function(i) return F.pairwise_distance(i.a, i.b, 1.5, 1e-3, true) end,
  triplet_margin_loss = function(i) return F.triplet_margin_loss(i.a, i.p, i.n, { margin = 2, p = 1, swap = true,
    reduction = "none" }) end,
  margin_ranking_loss = function(i) return F.margin_ranking_loss(i.a, i.b, i.y, 0.3, { reduction = "sum" }) end,
  bilinear = function(i) return F.bilinear(i.a, i.b, i.w, i.bias) end,
  logsigmoid = function(i) return F.logsigmoid(i.x) end,
  softmin = function(i) return F.softmin(i.x, 2) end, -- torch's dim=1, 1-based
  selu = function(i) return F.selu(i.x) end,
  celu = function(i) return F.celu(i.x, { alpha = 0.7 }) end,
  tanhshrink = function(i) return F.tanhshrink(i.x) end,
  threshold = function(i) return F.threshold(i.x, 0.1, -2) end,
  hardshrink = function(i) return F.hardshrink(i.x, 0.3) end,
  softshrink = function(i) return F.softshrink(i.x, { lambd = 0.3 }) end,
  normalize_default_dim = function(i) return F.normalize(i.x) end,
  normalize_p1_dim0 = function(i) return F.normalize(i.x, 1, 1) end,
  cosine_similarity_default_dim = function(i) return F.cosine_similarity(i.a, i.b) end,
  max_pool2d_indices = function(i, c)
    local y, idx = F.max_pool2d(i.x, { 3, 2 }, { stride = 2, padding = 1, dilation = { 1, 2 }, ceil_mode = true,
      return_indices = true })
    c.got_indices = idx
    return y
  end,
  max_pool1d_indices = function(i, c)
    local y, idx = F.max_pool1d(i.x, 3, 2, 1, 1, false, true)
    c.got_indices = idx
    return y
  end,
  max_unpool2d = function(i, c)
    return F.max_unpool2d(i.x, T(c.indices), 2, { stride = 2, padding = 1, output_size = { 7, 8 } })
  end,
  max_unpool1d = function(i, c) return F.max_unpool1d(i.x, T(c.indices), 2) end,
  affine_grid = function(i) return F.affine_grid(i.t, { 2, 3, 4, 5 }) end,
  affine_grid_align = function(i) return F.affine_grid(i.t, { 2, 3, 4, 1 }, { align_corners = true }) end,
  embedding_bag_mean = function(i, c) return F.embedding_bag(T(c.ids), i.w, T(c.offsets)) end,
  embedding_bag_sum_psw_last = function(i, c)
    return F.embedding_bag(T(c.ids), i.w, T(c.offsets), { mode = "sum", per_sample_weights = i.psw,
      include_last_offset = true })
  end,
  embedding_bag_max_padding = function(i, c) return F.embedding_bag(T(c.ids), i.w, { mode = "max", padding_idx = 1 }) end,
  lp_pool2d = function(i) return F.lp_pool2d(i.x, 2, { 2, 3 }, 2) end,
  lp_pool1d = function(i) return F.lp_pool1d(i.x, 3, 3, { ceil_mode = true }) end,
  local_response_norm = function(i) return F.local_response_norm(i.x, 3, { alpha = 0.1, beta = 0.6, k = 2 }) end,
  local_response_norm_3d = function(i) return F.local_response_norm(i.x, 4) end,
  channel_shuffle = function(i) return F.channel_shuffle(i.x, 3) end,
  pdist = function(i) return F.pdist(i.x) end,
  ["pdist_p1.5"] = function(i) return F.pdist(i.x, 1.5) end,
  gaussian_nll_loss = function(i) return F.gaussian_nll_loss(i.x, i.t, i.v, { full = true, eps = 1e-4 }) end,
  gaussian_nll_loss_var_1d = function(i) return F.gaussian_nll_loss(i.x, i.t, i.v, { reduction = "sum" }) end,
  gaussian_nll_loss_var_last1 = function(i) return F.gaussian_nll_loss(i.x, i.t, i.v, { reduction = "none" }) end,
  triplet_margin_with_distance_loss = function(i)
    return F.triplet_margin_with_distance_loss(i.a, i.p, i.n, { margin = 1.5, swap = true, reduction = "none" })
  end,
  rrelu_eval = function(i) return F.rrelu(i.x, 0.1, 0.3) end,
  conv3d = function(i) return F.conv3d(i.x, i.w, i.b, { 1, 2, 1 }, { 1, 0, 1 }, { 2, 1, 1 }, 2) end,
  conv3d_same_unbatched = function(i) return F.conv3d(i.x, i.w, { padding = "same" }) end,
  max_pool3d = function(i) return F.max_pool3d(i.x, { 2, 3, 2 }, { stride = 2, padding = 1, dilation = { 1, 1, 2 },
    ceil_mode = true }) end,
  avg_pool3d = function(i) return F.avg_pool3d(i.x, 3, { stride = 2, padding = 1, ceil_mode = true,
    count_include_pad = false }) end,
  avg_pool3d_include_pad = function(i) return F.avg_pool3d(i.x, { 2, 3, 3 }, { 1, 2, 2 }, { 1, 1, 0 }) end,
  avg_pool3d_ceil_include_pad = function(i) return F.avg_pool3d(i.x, 3, 2, 1, true) end,
  avg_pool3d_divisor = function(i) return F.avg_pool3d(i.x, 2, { divisor_override = 3 }) end,
  adaptive_avg_pool3d = function(i) return F.adaptive_avg_pool3d(i.x, { 2, 3, 4 }) end,
  adaptive_max_pool3d = function(i) return F.adaptive_max_pool3d(i.x, { 3, 2, 4 }) end,
  ctc_loss_mean = function(i, c)
    return F.ctc_loss(ember.log_softmax(i.z, 3), T(c.targets), c.input_lengths, c.target_lengths)
  end,
  ctc_loss_none = function(i, c)
    return F.ctc_loss(ember.log_softmax(i.z, 3), T(c.targets), ember.tensor(c.input_lengths, { dtype = "int64" }),
      c.target_lengths, { reduction = "none" })
  end,
  ctc_loss_concat_blank_last = function(i, c)
    return F.ctc_loss(ember.log_softmax(i.z, 3), T(c.targets), c.input_lengths, c.target_lengths,
      { blank = 4, reduction = "sum" })
  end,
  ctc_loss_zero_infinity = function(i, c)
    return F.ctc_loss(ember.log_softmax(i.z, 3), T(c.targets), c.input_lengths, c.target_lengths,
      { reduction = "sum", zero_infinity = true })
  end,
  soft_margin_loss = function(i) return F.soft_margin_loss(i.x, i.y:double(), { reduction = "sum" }) end,
  hinge_embedding_loss = function(i) return F.hinge_embedding_loss(i.x, i.y:double(), 0.8, { reduction = "none" }) end,
  cosine_embedding_loss = function(i) return F.cosine_embedding_loss(i.a, i.b, i.y:double(), { margin = 0.2 }) end,
  cosine_embedding_loss_1d = function(i)
    return F.cosine_embedding_loss(i.a, i.b, i.y:double(), { reduction = "sum" })
  end,
  poisson_nll_loss = function(i) return F.poisson_nll_loss(i.x, i.t, false, true) end,
  poisson_nll_loss_log = function(i) return F.poisson_nll_loss(i.x, i.t, { reduction = "sum" }) end,
  multilabel_soft_margin_loss = function(i) return F.multilabel_soft_margin_loss(i.x, i.y, i.w) end,
  multi_margin_loss = function(i, c)
    return F.multi_margin_loss(i.x, i.target, { p = 2, margin = 0.7, weight = T(c.weight), reduction = "none" })
  end,
}

-- PyTorch 1.13's celu backward takes 1 / alpha in float32 (derivatives.yaml:
-- elu_backward(..., 1.0/alpha.toFloat(), ...)): its float64 gradient is off
-- by ~1e-8 relative; ember's is exp(x / alpha) in float64 (the gradcheck
-- below holds it to finite differences).
local GRAD_TOL = { celu = 1e-7 }

describe("nn.functional against PyTorch 1.13 (float64)", function()
  for _, c in ipairs(fixtures.cases) do
    it(c.name, function()
      local i = {}
      for k, v in pairs(c.inputs) do
        i[k] = T(v)
        if i[k].dtype == "float64" then i[k]:requires_grad_() end
      end
      local call = CALLS[c.name]
      if c.name:find("^interpolate_") then call = function(inp) return F.interpolate(inp.x, c.kw) end end
      if c.name:find("^grid_sample_") then call = function(inp) return F.grid_sample(inp.x, inp.g, c.kw) end end
      assert(call, "no call for fixture " .. c.name)
      local out = call(i, c)
      check("out", out, T(c.out), 1e-12)
      local loss = (out * T(c.R)):sum()
      loss:backward()
      for k, g in pairs(c.grad_inputs) do
        -- (grid_sample's nearest mode: no gradient reaches the grid, PyTorch's is zeros)
        local got = i[k].grad or (c.name:find("^grid_sample_nearest") and k == "g" and ember.zeros_like(i[k]))
        check("grad " .. k, got, T(g), GRAD_TOL[c.name] or 1e-12)
      end
      if c.got_indices then assert.are.same(T(c.indices):totable(), c.got_indices:totable()) end
      if c.running_mean then
        check("running_mean", c.rm, T(c.running_mean), 1e-12)
        check("running_var", c.rv, T(c.running_var), 1e-12)
      end
    end)
  end

  it("every case has a call and every call a case", function()
    local seen = {}
    for _, c in ipairs(fixtures.cases) do seen[c.name] = true end
    for name in pairs(CALLS) do assert(seen[name], "no fixture for " .. name) end
  end)
end)

describe("nn.functional is torch.nn.functional's place", function()
  it("is ember.nn.functional and require 'ember.nn.functional'", function()
    assert.are.equal(F, nn.functional)
    assert.are.equal(F, ember.nn.functional)
  end)

  it("re-exports ember's own functions as the same values", function()
    -- (not cross_entropy: F's also takes torch's weight and class probabilities, nn_functional_losses_spec;
    -- nor the other losses: F's take torch's positional order too, nn_functional_losses_spec)
    for _, name in ipairs { "relu", "gelu", "silu", "softmax", "log_softmax", "linear", "pad",
      "scaled_dot_product_attention", "leaky_relu", "elu", "softplus", "hardtanh", "glu" } do
      assert(F[name] ~= nil, "no F." .. name)
      assert.are.equal(ember[name], F[name], "F." .. name .. " is not ember." .. name)
    end
  end)

  it("torch's positional arguments and the options table agree", function()
    ember.manual_seed(1)
    local x, w, b = ember.randn(2, 4, 7, 7, F64), ember.randn(6, 2, 3, 3, F64), ember.randn(6, F64)
    assert(same(F.conv2d(x, w, b, 2, 1, 2, 2), F.conv2d(x, w, b, { stride = 2, padding = 1, dilation = 2, groups = 2 })))
    assert(same(F.conv2d(x, w, b, 2, { padding = 1, groups = 2 }), F.conv2d(x, w, b, { stride = 2, padding = 1, groups = 2 })))
    local wt = ember.randn(4, 3, 3, 3, F64)
    assert(same(F.conv_transpose2d(x, wt, nil, 3, 2, 1), F.conv_transpose2d(x, wt, { stride = 3, padding = 2,
      output_padding = 1 })))
    assert(same(F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 3, { stride = 2, padding = 1 })))
    assert(same(F.avg_pool2d(x, 3, 2, 1, false, false), F.avg_pool2d(x, 3, { stride = 2, padding = 1,
      count_include_pad = false })))
    local rm, rv = ember.zeros(4, F64), ember.ones(4, F64)
    assert(same(F.batch_norm(x, rm, rv, nil, nil, false, 0.1, 1e-3), F.batch_norm(x, rm, rv, { eps = 1e-3 })))
    assert(same(F.interpolate(x, nil, 2, "bilinear"), F.interpolate(x, { scale_factor = 2, mode = "bilinear" })))
    assert(same(F.interpolate(x, { 9, 5 }), F.interpolate(x, { size = { 9, 5 } })))
    assert(same(F.mse_loss(x, x * 2, "sum"), F.mse_loss(x, x * 2, { reduction = "sum" })))
    local labels = ember.tensor({ { 2, 5 }, { 1, 3 } }, { dtype = "int64" })
    assert(same(F.one_hot(labels), ember.one_hot(labels, 5)) and same(F.one_hot(labels, -1), ember.one_hot(labels, 5)))
    assert(same(F.one_hot(labels, 7), ember.one_hot(labels, 7)))
    assert(same(F.leaky_relu(x, 0.2), F.leaky_relu(x, { negative_slope = 0.2 })))
    assert(same(F.glu(x, 2), F.glu(x, { dim = 2 })))
    assert(same(F.dropout(x, 0.3, false), F.dropout(x, { p = 0.3, training = false })))
    ember.manual_seed(5)
    local d1 = F.dropout(x, { p = 0.3 })
    ember.manual_seed(5)
    assert(same(d1, ember.dropout(x, 0.3, true)))
    assert(same(F.celu(x, 0.5), F.celu(x, { alpha = 0.5 })))
  end)
end)

describe("the modules are their functions with their parameters", function()
  ember.manual_seed(2)
  local x4 = ember.randn(2, 4, 9, 8, F64)
  local x3 = ember.randn(2, 4, 11, F64)

  it("convolutions", function()
    local c2 = nn.Conv2d(4, 6, { 3, 2 }, { stride = 2, padding = 1, dilation = { 2, 1 }, groups = 2, dtype = "float64" })
    assert(same(c2(x4), F.conv2d(x4, c2.weight, c2.bias, { stride = 2, padding = 1, dilation = { 2, 1 }, groups = 2 })))
    local c1 = nn.Conv1d(4, 3, 4, { padding = "same", bias = false, dtype = "float64" })
    assert(same(c1(x3), F.conv1d(x3, c1.weight, nil, { padding = "same" })))
    local t2 = nn.ConvTranspose2d(4, 6, 3, { stride = 2, padding = 1, output_padding = 1, groups = 2, dtype = "float64" })
    assert(same(t2(x4), F.conv_transpose2d(x4, t2.weight, t2.bias, { stride = 2, padding = 1, output_padding = 1,
      groups = 2 })))
    local t1 = nn.ConvTranspose1d(4, 2, 3, { stride = 3, dtype = "float64" })
    assert(same(t1(x3), F.conv_transpose1d(x3, t1.weight, t1.bias, 3)))
  end)

  it("pools", function()
    assert(same(nn.MaxPool2d(3, { stride = 2, ceil_mode = true })(x4), F.max_pool2d(x4, 3, { stride = 2, ceil_mode = true })))
    assert(same(nn.AvgPool2d(2, { padding = 1 })(x4), F.avg_pool2d(x4, 2, { padding = 1 })))
    assert(same(nn.MaxPool1d(3, { padding = 1 })(x3), F.max_pool1d(x3, 3, { padding = 1 })))
    assert(same(nn.AvgPool1d(3)(x3), F.avg_pool1d(x3, 3)))
    assert(same(nn.AdaptiveAvgPool2d({ 4, 3 })(x4), F.adaptive_avg_pool2d(x4, { 4, 3 })))
    assert(same(nn.AdaptiveMaxPool2d(3)(x4), F.adaptive_max_pool2d(x4, 3)))
    assert(same(nn.AdaptiveAvgPool1d(5)(x3), F.adaptive_avg_pool1d(x3, 5)))
  end)

  it("norms, running statistics included", function()
    local bn = nn.BatchNorm2d(4, { momentum = 0.3, dtype = "float64" })
    ember.no_grad(function() bn.weight:copy_(ember.randn(4, F64)); bn.bias:copy_(ember.randn(4, F64)) end)
    local rm, rv = ember.zeros(4, F64), ember.ones(4, F64)
    assert(same(bn(x4), F.batch_norm(x4, rm, rv, bn.weight, bn.bias, true, 0.3)))
    assert(same(bn.running_mean, rm) and same(bn.running_var, rv))
    bn:eval()
    assert(same(bn(x4), F.batch_norm(x4, rm, rv, bn.weight, bn.bias)))
    local inorm = nn.InstanceNorm1d(4, { affine = true, track_running_stats = true, dtype = "float64" })
    local irm, irv = ember.zeros(4, F64), ember.ones(4, F64)
    assert(same(inorm(x3), F.instance_norm(x3, irm, irv, inorm.weight, inorm.bias)))
    assert(same(inorm.running_mean, irm) and same(inorm.running_var, irv))
    local gn = nn.GroupNorm(2, 4, { eps = 1e-3, dtype = "float64" })
    assert(same(gn(x4), F.group_norm(x4, 2, gn.weight, gn.bias, 1e-3)))
    local ln = nn.LayerNorm({ 9, 8 }, { dtype = "float64" })
    assert(same(ln(x4), F.layer_norm(x4, { 9, 8 }, ln.weight, ln.bias)))
    local rms = nn.RMSNorm(8, { eps = 1e-6, dtype = "float64" })
    assert(same(rms(x4), F.rms_norm(x4, 8, rms.weight, 1e-6)))
  end)

  it("the activations, losses and rearrangements whose rule moved into a function", function()
    local x = ember.randn(2, 4, 4, 6, F64)
    assert(same(nn.Softsign()(x), F.softsign(x)))
    local pr = nn.PReLU(4, { init = 0.1, dtype = "float64" })
    assert(same(pr(x), F.prelu(x, pr.weight)))
    assert(same(nn.PixelShuffle(2)(x), F.pixel_shuffle(x, 2)))
    assert(same(nn.PixelUnshuffle(2)(x), F.pixel_unshuffle(x, 2)))
    local a, p, n = ember.randn(3, 5, F64), ember.randn(3, 5, F64), ember.randn(3, 5, F64)
    assert(same(nn.PairwiseDistance({ p = 3, keepdim = true })(a, p), F.pairwise_distance(a, p, { p = 3, keepdim = true })))
    assert(same(nn.TripletMarginLoss({ margin = 0.5, swap = true })(a, p, n), F.triplet_margin_loss(a, p, n, 0.5, { swap = true })))
    local y = ember.tensor({ 1, -1, 1 }, F64)
    assert(same(nn.MarginRankingLoss({ margin = 0.2 })(a[1]:narrow(1, 1, 3), p[1]:narrow(1, 1, 3), y),
      F.margin_ranking_loss(a[1]:narrow(1, 1, 3), p[1]:narrow(1, 1, 3), y, 0.2)))
    local bl = nn.Bilinear(5, 5, 2, { dtype = "float64" })
    assert(same(bl(a, p), F.bilinear(a, p, bl.weight, bl.bias)))
    local d2 = nn.Dropout2d(0.5)
    ember.manual_seed(7)
    local want = d2(x)
    ember.manual_seed(7)
    assert(same(want, F.dropout2d(x, 0.5)))
    assert(same(d2:eval()(x), F.dropout2d(x, 0.5, false)))
  end)

  it("EmbeddingBag", function()
    local bag = nn.EmbeddingBag(7, 3, { mode = "sum", padding_idx = 2, dtype = "float64" })
    local ids = ember.tensor({ 1, 2, 5, 7, 2, 3 }, { dtype = "int64" })
    local offsets = ember.tensor({ 1, 3, 3 }, { dtype = "int64" })
    assert(same(bag(ids, offsets), F.embedding_bag(ids, bag.weight, offsets, { mode = "sum", padding_idx = 2 })))
    assert(same(bag(ids, offsets), F.embedding_bag(ids, bag.weight, { 1, 3, 3 }, { mode = "sum", padding_idx = 2 })))
  end)

  it("Upsample and Embedding", function()
    assert(same(nn.Upsample({ 1.5, 2 })(x4), F.interpolate(x4, { scale_factor = { 1.5, 2 } })))
    assert(same(nn.Upsample({ size = { 4, 11 } })(x4), F.interpolate(x4, { size = { 4, 11 } })))
    -- the max pools' indices, module == function
    local mp = nn.MaxPool2d(3, { stride = 2, padding = 1, return_indices = true })
    local y, i = mp(x4)
    local fy, fi = F.max_pool2d(x4, 3, { stride = 2, padding = 1, return_indices = true })
    assert(same(y, fy) and i.dtype == "int64" and ember.equal(i, fi))
    local x3p = ember.randn(2, 3, 9, F64)
    local y1, i1 = nn.MaxPool1d(2, { return_indices = true })(x3p)
    local fy1, fi1 = F.max_pool1d(x3p, 2, { return_indices = true })
    assert(same(y1, fy1) and ember.equal(i1, fi1))
    assert.is_truthy(tostring(mp):find("return_indices=true", 1, true))
    -- every mode of interpolate, as torch.nn.Upsample: 1-d, 2-d and 3-d inputs, align_corners
    assert(same(nn.Upsample(2, { mode = "bilinear", align_corners = true })(x4),
      F.interpolate(x4, { scale_factor = 2, mode = "bilinear", align_corners = true })))
    assert(same(nn.Upsample({ size = { 5, 6 }, mode = "bicubic" })(x4), F.interpolate(x4, { size = { 5, 6 }, mode = "bicubic" })))
    local x3, x5 = ember.randn(2, 3, 4, { dtype = "float64" }), ember.randn(1, 2, 2, 3, 2, { dtype = "float64" })
    assert(same(nn.Upsample(3, { mode = "linear" })(x3), F.interpolate(x3, { scale_factor = 3, mode = "linear" })))
    assert(same(nn.Upsample(2, { mode = "trilinear" })(x5), F.interpolate(x5, { scale_factor = 2, mode = "trilinear" })))
    assert(same(nn.Upsample({ size = { 3, 1 }, mode = "area" })(x4), F.interpolate(x4, { size = { 3, 1 }, mode = "area" })))
    local emb = nn.Embedding(5, 3, { padding_idx = 2, dtype = "float64" })
    local ids = ember.tensor({ { 1, 2 }, { 5, 2 } }, { dtype = "int64" })
    assert(same(emb(ids), F.embedding(ids, emb.weight, { padding_idx = 2 })))
  end)
end)

describe("float64 gradchecks", function()
  ember.manual_seed(3)
  for _, mode in ipairs { { "nearest", 4, { scale_factor = 1.7 } }, { "nearest-exact", 3, { size = 7 } },
    { "linear", 3, { scale_factor = 2.5 } }, { "linear", 3, { size = 2, align_corners = true } },
    { "bilinear", 4, { size = { 5, 3 } } }, { "bilinear", 4, { scale_factor = 1.5, align_corners = true } },
    { "bicubic", 4, { size = { 6, 2 } } }, { "trilinear", 5, { scale_factor = { 1.5, 0.7, 2 } } },
    { "area", 4, { size = { 2, 3 } } } } do
    local name, nd, opts = mode[1], mode[2], mode[3]
    it("interpolate " .. name .. " " .. (opts.align_corners and "align_corners" or ""), function()
      local shape = ({ [3] = { 2, 2, 4 }, [4] = { 1, 2, 4, 5 }, [5] = { 1, 1, 3, 4, 3 } })[nd]
      local o = { mode = name }
      for k, v in pairs(opts) do o[k] = v end
      gradcheck.check(function(x) return F.interpolate(x, o) end, { ember.randn(shape, F64) }, { name = name })
    end)
  end

  it("the activations ember had not, prelu and bilinear", function()
    local x = ember.tensor({ -2.5, -0.9, -0.1, 0.05, 0.7, 1.9 }, F64)
    for _, f in ipairs { F.softsign, F.logsigmoid, F.selu, F.tanhshrink, function(t) return F.softmin(t, 1) end,
      function(t) return F.celu(t, 0.7) end, function(t) return F.threshold(t, 0.3, -1) end,
      function(t) return F.hardshrink(t, 0.5) end, function(t) return F.softshrink(t, 0.5) end } do
      gradcheck.check(f, { x:clone() })
    end
    gradcheck.check(function(t, w) return F.prelu(t, w) end, { ember.randn(2, 3, 4, F64), ember.randn(3, F64) })
    gradcheck.check(function(a, b, w, bias) return F.bilinear(a, b, w, bias) end,
      { ember.randn(2, 3, F64), ember.randn(2, 4, F64), ember.randn(5, 3, 4, F64), ember.randn(5, F64) })
  end)

  it("the losses ember had no module for", function()
    local x, y = ember.tensor({ -1.3, -0.4, 0.2, 0.9, 1.6 }, F64), ember.tensor({ 1, -1, -1, 1, -1 }, F64)
    gradcheck.check(function(t) return F.soft_margin_loss(t, y) end, { x:clone() })
    gradcheck.check(function(t) return F.hinge_embedding_loss(t, y, 0.5, { reduction = "sum" }) end, { x:clone() })
    gradcheck.check(function(a, b) return F.cosine_embedding_loss(a, b, ember.tensor({ 1, -1, -1 }, F64), -0.5) end,
      { ember.randn(3, 4, F64), ember.randn(3, 4, F64) })
    gradcheck.check(function(t, target) return F.poisson_nll_loss(t, target, false, true) end,
      { ember.rand(2, 3, F64) + 0.5, ember.tensor({ { 0.5, 1.5, 2 }, { 3, 4.5, 1.2 } }, F64) })
    gradcheck.check(function(t) return F.multilabel_soft_margin_loss(t, ember.tensor({ { 1, 0, 1 } }, F64)) end,
      { ember.randn(1, 3, F64) })
    gradcheck.check(function(t) return F.multi_margin_loss(t, ember.tensor({ 2, 1 }, { dtype = "int64" }), 2, 2) end,
      { ember.tensor({ { 0.3, 1.1, -0.4 }, { 0.8, 0.1, 1.4 } }, F64) })
  end)

  it("grid_sample (bilinear, each padding mode) and affine_grid", function()
    -- points away from the pixel lattice, where the corners are constant
    local g = ember.tensor({ { { { -0.93, 0.41 }, { 1.37, -1.21 }, { 0.13, 0.77 } },
      { { -1.61, -0.33 }, { 0.58, 1.12 }, { 0.29, -0.52 } } } }, F64)
    for _, pad in ipairs { "zeros", "border", "reflection" } do
      for _, align in ipairs { false, true } do
        gradcheck.check(function(x, grid) return F.grid_sample(x, grid, "bilinear", pad, align) end,
          { ember.randn(1, 2, 3, 4, F64), g:clone() }, { name = pad })
      end
    end
    gradcheck.check(function(t) return F.affine_grid(t, { 1, 1, 3, 4 }) end, { ember.randn(1, 2, 3, F64) })
  end)

  it("grid_sample's nearest rounds half to even, as PyTorch's nearbyint", function()
    -- x at 0.5, 1.5, 2.5 (exact): PyTorch 1.13 gives 10, 30, 30
    local x = ember.tensor({ { { { 10, 20, 30, 40 } } } })
    local g = ember.tensor({ { { { -0.5, 0 }, { 0, 0 }, { 0.5, 0 } } } })
    assert.are.same({ 10, 30, 30 }, F.grid_sample(x, g, { mode = "nearest" }):reshape({ -1 }):totable())
  end)

  it("3-d convolution and pools", function()
    gradcheck.check(function(t, w, b) return F.conv3d(t, w, b, { stride = { 2, 1, 1 }, padding = 1, groups = 2 }) end,
      { ember.randn(1, 2, 3, 3, 2, F64), ember.randn(2, 1, 2, 2, 2, F64), ember.randn(2, F64) })
    gradcheck.check(function(t) return F.avg_pool3d(t, 2, { stride = 1, padding = 1, count_include_pad = false }) end,
      { ember.randn(1, 1, 2, 3, 3, F64) })
    gradcheck.check(function(t) return F.max_pool3d(t, 2, { stride = 1 }) end, { ember.randn(1, 1, 2, 3, 3, F64) })
  end)

  it("ctc_loss", function()
    local tg = ember.tensor({ { 2, 2, 3 }, { 3, 1, 1 } }, { dtype = "int64" })
    gradcheck.check(function(z) return F.ctc_loss(ember.log_softmax(z, 3), tg, { 7, 5 }, { 3, 1 }) end,
      { ember.randn(7, 2, 3, F64) })
  end)

  it("max_unpool2d", function()
    local _, idx = F.max_pool2d(ember.randn(1, 2, 5, 6, F64), 2, { return_indices = true })
    gradcheck.check(function(t) return F.max_unpool2d(t, idx, 2, { output_size = { 5, 6 } }) end,
      { ember.randn(1, 2, 2, 3, F64) })
  end)

  it("unfold and fold", function()
    gradcheck.check(function(x) return F.unfold(x, { 2, 3 }, { padding = 1, stride = { 2, 1 }, dilation = { 1, 2 } }) end,
      { ember.randn(1, 2, 5, 6, F64) })
    gradcheck.check(function(x) return F.fold(x, { 5, 6 }, 2, { padding = 1, stride = 2 }) end,
      { ember.randn(1, 8, 12, F64) })
  end)

  it("embedding; the padding row's values come out, its gradient is zero (PyTorch's)", function()
    local ids = ember.tensor({ 2, 1, 2, 4 }, { dtype = "int64" })
    gradcheck.check(function(weight) return F.embedding(ids, weight) end, { ember.randn(4, 3, F64) })
    local w = ember.randn(4, 3, F64):requires_grad_()
    local y = F.embedding(ids, w, { padding_idx = 1 })
    assert(same(y[2], w[1]:detach()))
    y:sum():backward()
    assert.are.same({ 0, 0, 0 }, w.grad[1]:totable())
    assert.are.same({ 2, 2, 2 }, w.grad[2]:totable())
  end)
end)

describe("in-place variants and *_with_indices", function()
  it("overwrite x with the out-of-place result, return x, and backpropagate", function()
    local x0 = ember.tensor({ -2, -0.5, 0.3, 1.7 }, F64)
    for _, c in ipairs {
      { F.relu_, F.relu }, { F.elu_, F.elu, 0.7 }, { F.leaky_relu_, F.leaky_relu, 0.2 }, { F.hardtanh_, F.hardtanh, -1, 1 },
      { F.selu_, F.selu }, { F.celu_, F.celu, 0.5 }, { F.threshold_, F.threshold, 0, -3 }, { F.rrelu_, F.rrelu, 0.1, 0.3 },
    } do
      local x = x0:clone()
      local y = c[1](x, table.unpack(c, 3))
      assert(rawequal(y, x) or y == x)
      assert(same(x, c[2](x0, table.unpack(c, 3))))
    end
    local leaf = x0:clone():requires_grad_()
    local h = leaf * 1
    F.celu_(h, 0.5)
    h:sum():backward()
    local want = ember.where(x0:gt(0), ember.ones_like(x0), (x0 / 0.5):exp())
    assert((leaf.grad - want):abs():max():item() < 1e-12)
    assert(not pcall(F.relu_, x0:clone():requires_grad_()))
  end)

  it("max_pool*_with_indices are the pools with return_indices", function()
    local x = ember.randn(2, 3, 7, 6)
    local y1, i1 = F.max_pool2d_with_indices(x, 3, { stride = 2, padding = 1 })
    local y2, i2 = F.max_pool2d(x, 3, 2, 1, 1, false, true)
    assert(same(y1, y2) and same(i1, i2))
    local z1, j1 = F.max_pool1d_with_indices(x[1], 2)
    local z2, j2 = F.max_pool1d(x[1], 2, { return_indices = true })
    assert(same(z1, z2) and same(j1, j2))
    raises_here(function() F.max_pool2d_with_indices(x, 2, { return_indices = false }) end,
      "nn.functional.max_pool2d_with_indices: return_indices is always true here")
  end)
end)

describe("the random ones", function()
  it("dropout1d/3d drop whole channels and scale the rest; identity when not training", function()
    ember.manual_seed(11)
    local y = F.dropout1d(ember.ones(8, 16, 5), 0.5)
    local per_channel = y:amax(3) - y:amin(3)
    assert.are.equal(0, per_channel:abs():max():item())      -- a channel is all 0 or all 2
    local kept = y:amax(3):gt(0):sum():item()
    assert(kept > 30 and kept < 98, "kept " .. kept .. " of 128 channels")
    assert.are.equal(2, y:max():item())
    local z = F.dropout3d(ember.ones(2, 8, 2, 2, 2), { p = 0.25 })
    assert.are.equal(0, (z:amax({ 3, 4, 5 }) - z:amin({ 3, 4, 5 })):abs():max():item())
    local x = ember.randn(2, 3, 4)
    assert(same(F.dropout1d(x, 0.5, false), x))
  end)

  it("alpha_dropout keeps the mean and variance of unit-normal input", function()
    ember.manual_seed(12)
    local x = ember.randn({ 200000 }, F64)
    local y = F.alpha_dropout(x, 0.3)
    assert(math.abs(y:mean():item()) < 0.02 and math.abs(y:var():item() - 1) < 0.02)
    -- the dropped are all one value: SELU's saturation -1.7581, mapped
    local a = 1 / math.sqrt((1.7580993408473766 ^ 2 * 0.3 + 1) * 0.7)
    local dropped = -1.7580993408473766 * a + 1.7580993408473766 * a * 0.3
    local n = (y - dropped):abs():lt(1e-12):sum():item()
    assert(n > 0.28 * 200000 and n < 0.32 * 200000, n)
    local f = F.feature_alpha_dropout(ember.randn(64, 8, 50, F64), 0.5)
    local d = (f - dropped):abs():lt(1e-12):to("int64"):sum(3)   -- per channel: 0 or all 50
    assert(d:eq(0):logical_or(d:eq(50)):all():item())
    assert(same(F.alpha_dropout(x, 0.3, false), x))
  end)

  it("gumbel_softmax: soft samples sum to 1, hard ones are one-hot with the soft gradient", function()
    ember.manual_seed(13)
    local logits = ember.randn(6, 5, F64):requires_grad_()
    local soft = F.gumbel_softmax(logits, { tau = 0.7 })
    assert(((soft:sum(2) - 1):abs():max():item()) < 1e-12)
    local hard = F.gumbel_softmax(logits, { hard = true })
    assert.are.same({ 1, 1, 1, 1, 1, 1 }, hard:sum(2):totable())
    assert.are.equal(6, hard:eq(1):sum():item())
    local w = ember.randn(6, 5, F64)
    local loss = (hard * w):sum()
    loss:backward()
    assert(logits.grad:abs():sum():item() > 0)
    -- a large logit wins almost always
    local big = ember.tensor({ { 0, 0, 20 } })
    assert.are.equal(3, F.gumbel_softmax(big, { hard = true }):argmax(2):item())
  end)

  it("rrelu: while training, each negative slope lies in [lower, upper]", function()
    ember.manual_seed(14)
    local x = -ember.rand(1000):add(0.1)
    local y = F.rrelu(x, 0.1, 0.3, true)
    local slope = y / x
    assert(slope:min():item() >= 0.1 - 1e-6 and slope:max():item() <= 0.3 + 1e-6)
    assert(slope:std():item() > 0.03)
    local pos = ember.rand(10)
    assert(same(F.rrelu(pos, { training = true }), pos))
  end)
end)

describe("errors name the function at the caller's line", function()
  local x = ember.randn(2, 3, 8, 8)
  local w = ember.randn(4, 3, 3, 3)
  it("convolutions", function()
    raises_here(function() F.conv2d(x, ember.randn(4, 2, 3, 3)) end,
      "nn.functional.conv2d: expected 2 input channels (the weight [4, 2, 3, 3] times groups=1), got 3")
    raises_here(function() F.conv2d(x, w, nil, { strides = 2 }) end, "nn.functional.conv2d: unknown option 'strides'")
    raises_here(function() F.conv2d(x, ember.randn(3, 3, 3, 3), nil, { groups = 2 }) end,
      "nn.functional.conv2d: the weight's 3 output channels (dim 1 of [3, 3, 3, 3]) must be divisible by groups=2")
    raises_here(function() F.conv2d(x, ember.randn(4, 3, 3)) end, "nn.functional.conv2d: weight must be 4-d")
    raises_here(function() F.conv2d(x, w, ember.randn(3)) end, "nn.functional.conv2d: bias must have shape [4], got [3]")
    raises_here(function() F.conv2d(x, w, nil, 1, 0, 1, 1, 1) end, "nn.functional.conv2d: too many arguments")
    raises_here(function() F.conv2d(x, w, nil, { padding = "same", stride = 2 }) end,
      'nn.functional.conv2d: padding="same" needs stride 1')
    raises_here(function() F.conv2d(ember.randn(3, 2, 2), w) end, "nn.functional.conv2d: the kernel (size 3, dilation 1: 3) "
      .. "is larger than the padded input")
    raises_here(function() F.conv2d(x, w, nil, 2, { stride = 1 }) end, "nn.functional.conv2d: stride is given twice")
    raises_here(function() F.conv1d(x, w) end, "nn.functional.conv1d: weight must be 3-d")
    raises_here(function() F.conv_transpose2d(x, ember.randn(3, 2, 3, 3), nil, { padding = "same" }) end,
      "nn.functional.conv_transpose2d: padding must be a non-negative integer or a pair of them")
    raises_here(function() F.conv_transpose2d(x, ember.randn(3, 2, 3, 3), nil, { output_padding = 1 }) end,
      "nn.functional.conv_transpose2d: output_padding must be smaller than either stride or dilation")
  end)

  it("pools", function()
    raises_here(function() F.max_pool2d(x, 0) end, "nn.functional.max_pool2d: kernel_size must be a positive integer")
    raises_here(function() F.max_pool2d(x, 2, { return_indices = 1 }) end,
      "nn.functional.max_pool2d: return_indices must be true or false, got 1")
    local y, idx = F.max_pool2d(x, 2, { return_indices = true })
    raises_here(function() F.max_unpool2d(y, idx:to("float32"), 2) end,
      "nn.functional.max_unpool2d: indices must be int64 (1-based), got float32")
    raises_here(function() F.max_unpool2d(y, idx:narrow(4, 1, 2), 2) end,
      "nn.functional.max_unpool2d: indices must have the input's shape [2, 3, 4, 4], got [2, 3, 4, 2]")
    raises_here(function() F.max_unpool2d(y, idx, 2, { output_size = { 4, 4 } }) end,
      "nn.functional.max_unpool2d: indices must lie in 1..16 (the output's 4 x 4 plane), got 1..")
    raises_here(function() F.max_unpool1d(ember.randn(1, 2, 3), ember.ones({ 1, 2, 3 }, { dtype = "int64" }), 0) end,
      "nn.functional.max_unpool1d: kernel_size must be a positive integer, got 0")
    raises_here(function() F.adaptive_max_pool2d(x, 2, { return_index = true }) end,
      "nn.functional.adaptive_max_pool2d: unknown option 'return_index'")
    raises_here(function() F.max_pool2d(x, 4, { padding = 3 }) end, "nn.functional.max_pool2d: padding 3 is more than half")
    raises_here(function() F.avg_pool2d(x, 2, { dilation = 2 }) end, "nn.functional.avg_pool2d: unknown option 'dilation'")
    raises_here(function() F.max_pool2d(ember.randn(8), 2) end, "nn.functional.max_pool2d: expected an input [N, C, H, W]")
    raises_here(function() F.max_pool1d(x, 2) end, "nn.functional.max_pool1d: expected an input [N, C, L] or [C, L]")
    raises_here(function() F.avg_pool1d(ember.randn(1, 2, 3), 5) end, "nn.functional.avg_pool1d: the window (kernel 5")
    raises_here(function() F.adaptive_avg_pool2d(x, 0) end, "nn.functional.adaptive_avg_pool2d: output_size must be")
    raises_here(function() F.adaptive_max_pool1d(x, 2) end, "nn.functional.adaptive_max_pool1d: expected an input [N, C, L]")
    raises_here(function() F.max_pool2d(x:to("int64"), 2) end, "nn.functional.max_pool2d: input must be floating-point")
  end)

  it("norms", function()
    raises_here(function() F.batch_norm(x, nil, nil) end,
      "nn.functional.batch_norm: running_mean and running_var are needed when training is false")
    raises_here(function() F.batch_norm(x, ember.zeros(4), ember.ones(4)) end,
      "nn.functional.batch_norm: running_mean must have shape [3], got [4]")
    raises_here(function() F.batch_norm(x, ember.zeros(3), nil, { training = true }) end,
      "nn.functional.batch_norm: give both running_mean and running_var, or neither")
    raises_here(function() F.batch_norm(ember.randn(1, 3), nil, nil, { training = true }) end,
      "nn.functional.batch_norm: expected more than 1 value per channel when training")
    raises_here(function() F.batch_norm(x, nil, nil, { training = true, momentum = 2 }) end,
      "nn.functional.batch_norm: momentum must be a number in [0, 1]")
    raises_here(function() F.instance_norm(ember.randn(2, 3, 1)) end,
      "nn.functional.instance_norm: expected more than 1 spatial element")
    raises_here(function() F.group_norm(x, 2) end,
      "nn.functional.group_norm: the input's 3 channels (dim 2 of [2, 3, 8, 8]) must be divisible by num_groups=2")
    raises_here(function() F.layer_norm(x, { 4, 8 }) end,
      "nn.functional.layer_norm: input shape [2, 3, 8, 8] does not end with normalized_shape [4, 8]")
    raises_here(function() F.layer_norm(x, 8, ember.ones(7)) end,
      "nn.functional.layer_norm: weight must have shape [8] (normalized_shape), got [7]")
    raises_here(function() F.rms_norm(x, 0) end, "nn.functional.rms_norm: normalized_shape must be a positive integer")
    raises_here(function() F.rms_norm(x, 8, { epsilon = 1 }) end, "nn.functional.rms_norm: unknown option 'epsilon'")
  end)

  it("the rest", function()
    raises_here(function() F.prelu(x, ember.ones(4)) end,
      "nn.functional.prelu: expected an input [N, C, *] with C = num_parameters = 4, got shape [2, 3, 8, 8]")
    raises_here(function() F.pixel_shuffle(x, 2) end,
      "nn.functional.pixel_shuffle: the channels (3, dim 2 of shape [2, 3, 8, 8]) must be divisible by upscale_factor^2 = 4")
    raises_here(function() F.pixel_unshuffle(x, 3) end,
      "nn.functional.pixel_unshuffle: the height and width (8, 8 of shape [2, 3, 8, 8]) must be divisible")
    raises_here(function() F.pixel_shuffle(x, 0) end, "nn.functional.pixel_shuffle: upscale_factor must be a positive integer")
    raises_here(function() F.dropout2d(ember.randn(3, 4), 0.5) end, "nn.functional.dropout2d: expected an input [N, C, H, W]")
    raises_here(function() F.dropout2d(x, 1.5) end, "nn.functional.dropout2d: p must be a number in [0, 1], got 1.5")
    raises_here(function() F.dropout3d(ember.randn(2, 3, 2, 2, 2), -0.1) end, "nn.functional.dropout3d: p must be a number in [0, 1], got -0.1")
    raises_here(function() F.triplet_margin_loss(ember.randn(2, 3), ember.randn(2, 3), ember.randn(2, 4)) end,
      "nn.functional.triplet_margin_loss: expected anchor, positive and negative of one shape [N, D] or [D], got [2, 3], [2, 3] and [2, 4]")
    raises_here(function() F.margin_ranking_loss(ember.randn(3), ember.randn(3), ember.ones(3), { reduction = "avg" }) end,
      'nn.functional.margin_ranking_loss: reduction must be "mean", "sum" or "none", got avg')
    raises_here(function() F.bilinear(ember.randn(4, 2), ember.randn(4, 3), ember.randn(5, 3, 3)) end,
      "nn.functional.bilinear: expected x1 [..., 3] and x2 [..., 3] with the same leading dims (the weight [5, 3, 3]), got [4, 2] and [4, 3]")
    raises_here(function() F.hardshrink(x, -1) end, "nn.functional.hardshrink: lambd must be a number >= 0, got -1")
    raises_here(function() F.threshold(x, 0) end, "nn.functional.threshold: value must be a number, got nil")
    raises_here(function() F.celu(x, { alpha = 0 }) end, "nn.functional.celu: alpha must be a nonzero number")
    raises_here(function() F.softsign(ember.tensor({ 1 }, { dtype = "int64" })) end,
      "nn.functional.softsign: input must be floating-point, got int64")
    raises_here(function() F.dropout(x, { p = 0.5, in_place = true }) end, "nn.functional.dropout: unknown option 'in_place'")
    raises_here(function() F.leaky_relu(x, { slope = 0.2 }) end, "ember.leaky_relu: unknown option 'slope'")
  end)

  it("the losses", function()
    raises_here(function() F.soft_margin_loss(ember.randn(3), ember.randn(4)) end,
      "nn.functional.soft_margin_loss: expected input and target of one shape, got [3], [4]")
    raises_here(function() F.hinge_embedding_loss(ember.randn(3), ember.randn(3), { margin = "1" }) end,
      "nn.functional.hinge_embedding_loss: margin must be a number")
    raises_here(function() F.cosine_embedding_loss(ember.randn(3, 4), ember.randn(3, 4), ember.ones(4)) end,
      "nn.functional.cosine_embedding_loss: expected x1, x2 [N, D] with y [N], or [D] with a 0-d y, got [3, 4], [3, 4] and [4]")
    raises_here(function() F.poisson_nll_loss(ember.randn(3), ember.randn(3), { full = 1 }) end,
      "nn.functional.poisson_nll_loss: full must be true or false, got 1")
    raises_here(function() F.multilabel_soft_margin_loss(ember.randn(2, 3), ember.ones(2, 3), ember.ones(2)) end,
      "nn.functional.multilabel_soft_margin_loss: weight must have shape [3], got [2]")
    local ids = ember.tensor({ 1, 4 }, { dtype = "int64" })
    raises_here(function() F.multi_margin_loss(ember.randn(2, 3), ids) end,
      "nn.functional.multi_margin_loss: target ids must lie in 1..3 (1-based), got 1..4")
    raises_here(function() F.multi_margin_loss(ember.randn(2, 3), ids:to("float32")) end,
      "nn.functional.multi_margin_loss: target must be int64 class ids (1-based), got float32")
    raises_here(function() F.multi_margin_loss(ember.randn(2, 4), ids, 3) end, "nn.functional.multi_margin_loss: p must be 1 or 2, got 3")
    raises_here(function() F.multi_margin_loss(ember.randn(2, 4), ids, { reduction = "batchmean" }) end,
      'nn.functional.multi_margin_loss: reduction must be "mean", "sum" or "none", got batchmean')
  end)

  it("more of torch.nn.functional", function()
    local w = ember.randn(5, 2)
    local ids = ember.tensor({ 1, 2, 3 }, { dtype = "int64" })
    raises_here(function() F.embedding_bag(ids, w, { 1 }, { mode = "median" }) end,
      'nn.functional.embedding_bag: mode must be "sum", "mean" or "max", got "median"')
    raises_here(function() F.embedding_bag(ids, w, { 1 }, { max_norm = 1 }) end,
      "nn.functional.embedding_bag: max_norm is not supported")
    raises_here(function() F.embedding_bag(ids, w, { 2 }) end,
      "nn.functional.embedding_bag: the first offset must be 1")
    raises_here(function() F.embedding_bag(ids, w) end, "nn.functional.embedding_bag: a 1-d input needs offsets")
    raises_here(function() F.lp_pool2d(x, -1, 2) end, "nn.functional.lp_pool2d: norm_type must be a number > 0, got -1")
    raises_here(function() F.local_response_norm(x, 0) end, "nn.functional.local_response_norm: size must be a positive integer")
    raises_here(function() F.channel_shuffle(x, 2) end,
      "nn.functional.channel_shuffle: the channels (3, dim 2 of [2, 3, 8, 8]) must be divisible by groups=2")
    raises_here(function() F.pdist(ember.randn(2, 3, 4)) end, "nn.functional.pdist: expected an input [N, M]")
    raises_here(function() F.gaussian_nll_loss(ember.randn(3, 4), ember.randn(3, 4), ember.ones(4)) end,
      "nn.functional.gaussian_nll_loss: var must have the input's shape [3, 4], or it with the last dim 1 or dropped, got [4]")
    raises_here(function() F.gaussian_nll_loss(ember.randn(3), ember.randn(3), -ember.ones(3)) end,
      "nn.functional.gaussian_nll_loss: var has negative entries")
    raises_here(function() F.gumbel_softmax(x, { tau = 0 }) end, "nn.functional.gumbel_softmax: tau must be a number > 0")
    raises_here(function() F.triplet_margin_with_distance_loss(x, x, x, { distance_function = 2 }) end,
      "nn.functional.triplet_margin_with_distance_loss: distance_function must be a function")
    raises_here(function() F.rrelu(x, 0.5, 0.1) end, "nn.functional.rrelu: lower (0.5) must not exceed upper (0.1)")
    raises_here(function() F.dropout3d(ember.randn(2, 3, 4)) end,
      "nn.functional.dropout3d: expected an input [N, C, D, H, W] or [C, D, H, W], got shape [2, 3, 4]")
    raises_here(function() F.alpha_dropout(x, 2) end, "nn.functional.alpha_dropout: p must be a number in [0, 1], got 2")
  end)

  it("3-d", function()
    local v = ember.randn(1, 2, 4, 5, 6)
    raises_here(function() F.conv3d(ember.randn(3, 8, 8), ember.randn(2, 3, 1, 1, 1)) end,
      "nn.functional.conv3d: expected an input [N, C, D, H, W] or [C, D, H, W], got shape [3, 8, 8]")
    raises_here(function() F.conv3d(v, ember.randn(2, 3, 1, 1, 1)) end,
      "nn.functional.conv3d: expected 3 input channels (the weight [2, 3, 1, 1, 1] times groups=1), got 2")
    raises_here(function() F.conv3d(v, ember.randn(2, 2, 5, 1, 1)) end,
      "nn.functional.conv3d: the kernel (size 5, dilation 1) is larger than the padded input (4 + 0) along dim 3")
    raises_here(function() F.conv3d(v, ember.randn(2, 2, 1, 1)) end, "nn.functional.conv3d: weight must be 5-d")
    raises_here(function() F.conv3d(v, ember.randn(2, 2, 1, 1, 1), nil, { stride = { 1, 2 } }) end,
      "nn.functional.conv3d: stride must be a positive integer or a table of three, got {1, 2}")
    raises_here(function() F.max_pool3d(v, 2, { return_indices = 1 }) end,
      "nn.functional.max_pool3d: return_indices must be true or false, got 1")
    raises_here(function() F.max_pool3d(v, 2, { padding = 2 }) end, "nn.functional.max_pool3d: padding 2 is more than half")
    raises_here(function() F.avg_pool3d(v, 5) end, "nn.functional.avg_pool3d: the window (kernel 5, dilation 1) is larger")
    raises_here(function() F.avg_pool3d(v, 2, { dilation = 2 }) end, "nn.functional.avg_pool3d: unknown option 'dilation'")
    raises_here(function() F.adaptive_avg_pool3d(v, { 2, 2 }) end,
      "nn.functional.adaptive_avg_pool3d: output_size must be a positive integer or a table of three")
  end)

  it("ctc_loss", function()
    local lp = ember.log_softmax(ember.randn(5, 2, 4), 3)
    local tg = ember.tensor({ { 2, 3 }, { 4, 1 } }, { dtype = "int64" })
    raises_here(function() F.ctc_loss(lp:view(5, 2, 2, 2), tg, { 5, 5 }, { 2, 1 }) end,
      "nn.functional.ctc_loss: log_probs must be [T, N, C] (log-softmax over C) or unbatched [T, C], got [5, 2, 2, 2]")
    raises_here(function() F.ctc_loss(lp:view(10, 4), tg, { 5, 5 }, { 2, 1 }) end,
      "nn.functional.ctc_loss: unbatched log_probs [T, C] take 1-d targets [S], got [2, 2]")
    raises_here(function() F.ctc_loss(lp, tg, { 5, 5 }, { 2, 2 }) end,
      "nn.functional.ctc_loss: labels must be class ids in 1..4 other than blank (1), got 1")
    raises_here(function() F.ctc_loss(lp, tg, { 6, 5 }, { 2, 1 }) end,
      "nn.functional.ctc_loss: input_lengths[1] = 6 is longer than log_probs' 5 steps")
    raises_here(function() F.ctc_loss(lp, tg, { 5 }, { 2, 1 }) end,
      "nn.functional.ctc_loss: input_lengths must be 2 integers (a tensor or a table), got 1")
    raises_here(function() F.ctc_loss(lp, tg, { 5, 5 }, { 2, 1 }, { blank = 0 }) end,
      "nn.functional.ctc_loss: blank must be a class id in 1..4 (1-based), got 0")
    local inf = F.ctc_loss(lp, ember.tensor({ { 2, 2, 2 } }, { dtype = "int64" }):expand(2, 3), { 5, 4 }, { 3, 3 },
      { reduction = "none" })
    assert.are.equal(math.huge, inf[2]:item())   -- 2 2 2 needs 5 steps
  end)

  it("grid_sample, affine_grid", function()
    local g = ember.zeros(2, 3, 3, 2)
    raises_here(function() F.grid_sample(ember.randn(2, 3, 4), g) end,
      "nn.functional.grid_sample: expected an input [N, C, H, W] or [N, C, D, H, W], got shape [2, 3, 4]")
    raises_here(function() F.grid_sample(x, ember.zeros(2, 3, 3)) end,
      "nn.functional.grid_sample: expected a grid [N, Ho, Wo, 2] with N = 2 (the input's), got shape [2, 3, 3]")
    raises_here(function() F.grid_sample(ember.zeros(2, 3, 2, 2, 2), ember.zeros(2, 1, 1, 1, 3), { mode = "bicubic" }) end,
      'nn.functional.grid_sample: mode must be "bilinear", "nearest" or (a 4-d input only) "bicubic", got "bicubic"')
    raises_here(function() F.grid_sample(x, g, { padding_mode = "reflect" }) end,
      'nn.functional.grid_sample: padding_mode must be "zeros", "border" or "reflection", got "reflect"')
    raises_here(function() F.grid_sample(x, g:double()) end,
      "nn.functional.grid_sample: the grid is float64 but the input is float32")
    raises_here(function() F.affine_grid(ember.zeros(2, 2, 3), { 2, 3, 4 }) end,
      "nn.functional.affine_grid: size must be the output's {N, C, H, W}")
    raises_here(function() F.affine_grid(ember.zeros(1, 2, 3), { 2, 3, 4, 4 }) end,
      "nn.functional.affine_grid: expected theta [N, 2, 3] with N = 2 (size's), got shape [1, 2, 3]")
  end)

  it("interpolate, unfold, fold, embedding", function()
    raises_here(function() F.interpolate(x, { scale_factor = 2, mode = "linear" }) end,
      'nn.functional.interpolate: mode "linear" needs a 3-d input [N, C, L], got shape [2, 3, 8, 8] (4-d)')
    raises_here(function() F.interpolate(x, { size = 4, scale_factor = 2 }) end,
      "nn.functional.interpolate: give either size or scale_factor (one of them)")
    raises_here(function() F.interpolate(x, { scale_factor = 2, mode = "cubic" }) end,
      'nn.functional.interpolate: mode must be "nearest"')
    raises_here(function() F.interpolate(x, { scale_factor = 2, align_corners = true }) end,
      'nn.functional.interpolate: align_corners goes only with the interpolating modes')
    raises_here(function() F.interpolate(x, { size = { 4, 4, 4 } }) end,
      "nn.functional.interpolate: size must be a positive integer or a table of 2 of them")
    raises_here(function() F.interpolate(x, { scale_factor = 0.1 }) end,
      "nn.functional.interpolate: scale_factor 0.1 gives an empty output from dim 3 of shape [2, 3, 8, 8]")
    raises_here(function() F.interpolate(ember.randn(4, 4), { scale_factor = 2 }) end,
      "nn.functional.interpolate: expected an input [N, C, *spatial] with 1 to 3 spatial dims")
    raises_here(function() F.unfold(x, 9) end, "nn.functional.unfold: the block (kernel 9, dilation 1) is larger")
    raises_here(function() F.fold(ember.randn(1, 8, 5), 4, 2) end, "nn.functional.fold: expected 9 blocks (dim 3)")
    raises_here(function() F.fold(ember.randn(1, 7, 9), 4, 2) end,
      "nn.functional.fold: dim 2 of the input (7) must be divisible by the kernel's size 2 x 2")
    raises_here(function() F.embedding(ember.tensor({ 1.0 }), ember.randn(3, 2)) end,
      "nn.functional.embedding: ids must be int64 (1-based), got float32")
    raises_here(function() F.embedding(ember.tensor({ 4 }, { dtype = "int64" }), ember.randn(3, 2)) end,
      "nn.functional.embedding:")
    raises_here(function() F.embedding(ember.tensor({ 1 }, { dtype = "int64" }), ember.randn(3, 2), { padding_idx = 0 }) end,
      "nn.functional.embedding: padding_idx must be an id in 1..3, got 0")
  end)
end)
