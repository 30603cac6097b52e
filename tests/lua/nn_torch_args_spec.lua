-- Arguments a PyTorch user passes to ember.nn are taken or refused, never
-- dropped without a word. Every nn constructor with torch's signature
-- refuses an argument past torch's own and a name it does not take; torch's
-- inplace is accepted (and ignored: a module's result is a new tensor) where
-- torch has it, and must be a boolean; nn.functional's and ember's
-- activations refuse arguments past theirs, and F's dropouts, selu, celu,
-- threshold and rrelu take torch's inplace; the losses' modules take
-- torch's positional order (nn.L1Loss(nil, nil, "sum") ran with the mean);
-- modules print Lua's booleans (nn.Conv2d printed bias=False, nn.Linear
-- bias=false). The constructor forms PyTorch users write -- Softplus(beta,
-- threshold), nn.Upsample(nil, 2, "bilinear", true), the lazy modules in
-- torch's order, the vision modules by name, forward's output_size by name --
-- build what they build in PyTorch (sizes are PyTorch 1.13's for the same call).
local ember = require "ember"
local nn = require "ember.nn"
local F = require "ember.nn.functional"
local parity = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local raises_here = parity.raises_here

-- the message of a failed call, or nil
local err_of = parity.error_of

local function shape(t) return table.concat(t.shape, ",") end

-- torch 1.13's __init arguments of each class (less device and dtype), and
-- values of the ones without a default: torch.nn.X.__init's signature.
local TORCH = {
  AdaptiveAvgPool2d = { { 2 }, "output_size" },
  AdaptiveLogSoftmaxWithLoss = { { 8, 10, { 4 } }, "in_features n_classes cutoffs div_value head_bias" },
  AlphaDropout = { {}, "p inplace" }, FeatureAlphaDropout = { {}, "p inplace" },
  BCELoss = { {}, "weight size_average reduce reduction" },
  BCEWithLogitsLoss = { {}, "weight size_average reduce reduction pos_weight" },
  CELU = { {}, "alpha inplace" }, ELU = { {}, "alpha inplace" },
  CTCLoss = { {}, "blank reduction zero_infinity" },
  ConstantPad3d = { { 1, 0 }, "padding value" },
  CosineEmbeddingLoss = { {}, "margin size_average reduce reduction" },
  CosineSimilarity = { {}, "dim eps" },
  CrossEntropyLoss = { {}, "weight size_average ignore_index reduce reduction label_smoothing" },
  Dropout = { {}, "p inplace" }, Dropout1d = { {}, "p inplace" }, Dropout3d = { {}, "p inplace" },
  Flatten = { {}, "start_dim end_dim" }, GELU = { {}, "approximate" }, GLU = { {}, "dim" },
  GaussianNLLLoss = { {}, "full eps reduction" },
  Hardshrink = { {}, "lambd" }, Softshrink = { {}, "lambd" },
  Hardsigmoid = { {}, "inplace" }, Hardswish = { {}, "inplace" }, Mish = { {}, "inplace" }, ReLU = { {}, "inplace" },
  ReLU6 = { {}, "inplace" }, SELU = { {}, "inplace" }, SiLU = { {}, "inplace" },
  Hardtanh = { {}, "min_val max_val inplace min_value max_value" },
  HingeEmbeddingLoss = { {}, "margin size_average reduce reduction" },
  HuberLoss = { {}, "reduction delta" },
  KLDivLoss = { {}, "size_average reduce reduction log_target" },
  L1Loss = { {}, "size_average reduce reduction" }, MSELoss = { {}, "size_average reduce reduction" },
  LeakyReLU = { {}, "negative_slope inplace" },
  LogSigmoid = { {}, "" }, Sigmoid = { {}, "" }, Softmax2d = { {}, "" }, Softsign = { {}, "" }, Tanh = { {}, "" },
  Tanhshrink = { {}, "" },
  LogSoftmax = { {}, "dim" }, Softmax = { {}, "dim" }, Softmin = { {}, "dim" },
  MarginRankingLoss = { {}, "margin size_average reduce reduction" },
  ModuleList = { {}, "modules" }, ModuleDict = { {}, "modules" }, ParameterList = { {}, "values" },
  ParameterDict = { {}, "parameters" },
  MultiLabelMarginLoss = { {}, "size_average reduce reduction" },
  MultiLabelSoftMarginLoss = { {}, "weight size_average reduce reduction" },
  MultiMarginLoss = { {}, "p margin weight size_average reduce reduction" },
  NLLLoss = { {}, "weight size_average ignore_index reduce reduction" },
  NLLLoss2d = { {}, "weight size_average ignore_index reduce reduction" },
  PReLU = { {}, "num_parameters init" },
  PairwiseDistance = { {}, "p eps keepdim" },
  PoissonNLLLoss = { {}, "log_input full size_average eps reduce reduction" },
  RReLU = { {}, "lower upper inplace" },
  ReflectionPad3d = { { 1 }, "padding" }, ReplicationPad3d = { { 1 }, "padding" },
  SmoothL1Loss = { {}, "size_average reduce reduction beta" },
  SoftMarginLoss = { {}, "size_average reduce reduction" },
  Softplus = { {}, "beta threshold" },
  Threshold = { { 0.1, 0 }, "threshold value inplace" },
  TransformerDecoder = { function() return nn.TransformerDecoderLayer(8, 2), 2 end, "decoder_layer num_layers norm" },
  TransformerEncoder = { function() return nn.TransformerEncoderLayer(8, 2), 2 end,
    "encoder_layer num_layers norm enable_nested_tensor mask_check" },
  TripletMarginLoss = { {}, "margin p eps swap size_average reduce reduction" },
  TripletMarginWithDistanceLoss = { {}, "distance_function margin swap reduction" },
  Unflatten = { { 2, { 2, 2 } }, "dim unflattened_size" },
  UpsamplingBilinear2d = { { 4 }, "size scale_factor" }, UpsamplingNearest2d = { { 4 }, "size scale_factor" },
}

local function required(spec)
  if type(spec[1]) == "function" then return table.pack(spec[1]()) end
  return table.pack(table.unpack(spec[1]))
end

local function count(names)
  local n = 0
  for _ in names:gmatch("%S+") do n = n + 1 end
  return n
end

describe("nn constructors refuse what torch.nn would not take", function()
  for name, spec in pairs(TORCH) do
    it(name .. ": one argument past torch's, and an unknown name", function()
      local cls = nn[name]
      local args = required(spec)
      assert.is_truthy(cls(table.unpack(args, 1, args.n)), name) -- torch's required ones are enough
      local n = count(spec[2])
      args[n + 1] = 7 -- the ones between left nil
      raises_here(function() cls(table.unpack(args, 1, n + 1)) end, name)
      if name ~= "ModuleList" and name ~= "ModuleDict" and name ~= "ParameterList" and name ~= "ParameterDict"
        and type(spec[1]) ~= "function" then
        args = required(spec)
        args[args.n + 1] = { zz_unknown = 1 }
        local e = parity.error_of(function() cls(table.unpack(args, 1, args.n + 1)) end)
        assert.is_truthy(e, name .. " took zz_unknown")
        assert.matches("zz_unknown", e)
      end
    end)
  end

  it("torch's inplace is taken where torch has it, and must be a boolean", function()
    for _, name in ipairs { "ReLU", "ReLU6", "SiLU", "Mish", "Hardsigmoid", "Hardswish", "SELU" } do
      local x = ember.randn(2, 3)
      local m = nn[name](true)
      assert.are.equal(0, (m(x) - nn[name]()(x)):abs():max():item(), name)
      assert.is_truthy(nn[name] { inplace = false }, name)
      raises_here(function() nn[name](5) end, name .. ": inplace must be true or false, got 5")
      raises_here(function() nn[name] { inplace = "yes" } end, name .. ": inplace must be true or false")
    end
    raises_here(function() nn.LeakyReLU(0.2, 5) end, "LeakyReLU: inplace must be true or false, got 5")
    raises_here(function() nn.Dropout(0.2, 1) end, "Dropout: inplace must be true or false, got 1")
    assert.are.equal(0.2, nn.LeakyReLU(0.2, true).negative_slope)
    raises_here(function() nn.ReLU { inplace = true, implace = true } end, "ReLU: unknown option 'implace'")
  end)

  it("a module that torch builds without arguments takes none", function()
    for _, name in ipairs { "Tanh", "Sigmoid", "Softsign", "Tanhshrink", "LogSigmoid", "Softmax2d" } do
      raises_here(function() nn[name](true) end, name .. ": takes no arguments, got 1 more (argument 1 is a boolean)")
      raises_here(function() nn[name] { inplace = true } end, name .. ": unknown option 'inplace'")
      assert.is_truthy(nn[name]())
    end
  end)

  it("the losses take torch's positional order; size_average and reduce are refused by name", function()
    local x, y = ember.tensor { 1, 2, 3 }, ember.tensor { 0, 0, 0 }
    assert.are.equal(6, nn.L1Loss(nil, nil, "sum")(x, y):item()) -- it was the mean, 2
    assert.are.equal(6, nn.L1Loss("sum")(x, y):item()) -- ember's lone reduction
    local logits, t = ember.tensor { { 2.0, 0.0, 1.0 } }, ember.tensor({ 1 }, "int64")
    local w = ember.tensor { 0.5, 1, 1 }
    assert.are.equal(w, nn.CrossEntropyLoss(w).weight)
    assert.are.equal("sum", nn.CrossEntropyLoss(nil, nil, -100, nil, "sum").reduction)
    assert.are.equal(nn.CrossEntropyLoss(nil, nil, -100, nil, "sum")(logits, t):item(),
      nn.CrossEntropyLoss { reduction = "sum" }(logits, t):item())
    assert.are.equal(2.5, nn.HuberLoss("mean", 2.5).delta)
    raises_here(function() nn.MSELoss(false) end, "MSELoss: the option size_average is torch's size_average, deprecated")
    raises_here(function() nn.NLLLoss(nil, nil, -100, true) end, "NLLLoss: the option reduce is torch's reduce, deprecated")
  end)

  it("PyTorch's form of TransformerEncoder / Decoder and ember's count their arguments", function()
    local layer = nn.TransformerEncoderLayer(8, 2, { batch_first = true })
    assert.is_truthy(nn.TransformerEncoder(layer, 2, nil, true, false)) -- enable_nested_tensor, mask_check: ignored
    raises_here(function() nn.TransformerEncoder(layer, 2, nil, true, false, 1) end,
      "nn.TransformerEncoder: takes at most 5 arguments (encoder_layer, num_layers, norm, enable_nested_tensor, "
      .. "mask_check), got 6")
    raises_here(function() nn.TransformerEncoder(8, 2, 2, {}, 1) end, "nn.TransformerEncoder: takes at most 4 arguments")
    raises_here(function() nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2), 2, nil, true) end,
      "nn.TransformerDecoder: takes at most 3 arguments (decoder_layer, num_layers, norm), got 4")
    raises_here(function() nn.ModuleList({ nn.ReLU() }, nn.Tanh()) end, "nn.ModuleList: takes at most 1 argument (modules)")
    raises_here(function() nn.MultiHeadAttention(8, 2, {}, 1) end, "nn.MultiHeadAttention: takes at most 3 arguments")
  end)
end)

describe("nn.functional refuses arguments past torch's", function()
  local x = ember.randn(2, 4, 4, 4)
  it("the activations without options: F.relu6(x, 5), F.mish(x, true), ...", function()
    for _, name in ipairs { "relu6", "mish", "hardswish", "hardsigmoid" } do
      raises_here(function() F[name](x, true) end, "ember." .. name .. ": takes no arguments besides the tensor, got 1 more "
        .. "(argument 2 is a boolean)")
      raises_here(function() ember[name](x, 5) end, "ember." .. name .. ": takes no arguments besides the tensor")
      assert.are.equal(0, (F[name](x, nil) - F[name](x)):abs():max():item())
    end
    for _, name in ipairs { "softsign", "logsigmoid", "tanhshrink", "relu_", "selu_" } do
      raises_here(function() F[name](x:clone(), 5) end, "nn.functional." .. name .. ": takes no arguments besides the tensor")
    end
  end)

  it("and those with some: one past them", function()
    local cases = {
      { "leaky_relu", "ember.leaky_relu: takes at most 1 argument besides the tensor (negative_slope), got 2", 0.1, false },
      { "softplus", "ember.softplus: takes at most 2 arguments besides the tensor (beta, threshold), got 3", 1, 20, 5 },
      { "softplus", "ember.softplus: takes at most 1 argument besides the tensor (opts), got 2", { beta = 2 }, 20 },
      { "hardtanh", "ember.hardtanh: takes at most 2 arguments besides the tensor (min_val, max_val)", -1, 1, false },
      { "glu", "ember.glu: takes at most 1 argument besides the tensor (dim), got 2", -1, 5 },
      { "pad", "ember.pad: takes at most 3 arguments besides the tensor (pad, mode, value), got 4", { 1, 1 }, "constant", 0, 5 },
      { "threshold", "nn.functional.threshold: takes at most 3 arguments besides the tensor", 0.1, 0, false, 7 },
      { "threshold_", "nn.functional.threshold_: takes at most 2 arguments besides the tensor", 0.1, 0, false },
      { "pixel_shuffle", "nn.functional.pixel_shuffle: takes at most 1 argument besides the tensor (upscale_factor)", 2, 2 },
      { "pixel_unshuffle", "nn.functional.pixel_unshuffle: takes at most 1 argument", 2, 2 },
      { "channel_shuffle", "nn.functional.channel_shuffle: takes at most 1 argument besides the tensor (groups)", 2, 2 },
      { "adaptive_avg_pool2d", "nn.functional.adaptive_avg_pool2d: takes at most 1 argument", 2, 2 },
      { "prelu", "nn.functional.prelu: takes at most 1 argument besides the tensor (weight)", ember.tensor { 0.25 }, 1 },
      { "softmin", "nn.functional.softmin: takes at most 2 arguments besides the tensor (dim, opts)", -1, nil, 5 },
    }
    for _, c in ipairs(cases) do
      local args = { table.unpack(c, 3) }
      local n = #c - 2
      for i = 1, n do if c[i + 2] == nil then args[i] = nil end end
      raises_here(function() F[c[1]](x:clone(), table.unpack(args, 1, n)) end, c[2])
    end
    raises_here(function() F.one_hot(ember.tensor({ 1, 2 }, "int64"), 3, 1) end, "nn.functional.one_hot: takes at most 1 argument")
    raises_here(function() F.bilinear(ember.randn(2, 3), ember.randn(2, 3), ember.randn(4, 3, 3), nil, 1) end,
      "nn.functional.bilinear: takes at most 1 argument besides the 3 tensors (bias), got 2 (argument 5 is a number)")
    raises_here(function() x:leaky_relu(0.1, 5) end, "ember.leaky_relu: takes at most 1 argument")
  end)

  it("what they take still works: positions, options tables, trailing nils", function()
    local y = ember.tensor { -2, 0.5, 3 }
    assert.are.equal(F.softplus(y, 2, 10), F.softplus(y, { beta = 2, threshold = 10 }))
    assert.are.equal(F.hardtanh(y, 0, 1), F.hardtanh(y, { min_val = 0, max_val = 1 }))
    assert.are.equal(F.leaky_relu(y, 0.2), F.leaky_relu(y, { negative_slope = 0.2 }))
    assert.are.equal(F.pad(ember.ones(1, 2, 3), { 1, 1 }, "reflect"), F.pad(ember.ones(1, 2, 3), { 1, 1 }, { mode = "reflect" }))
    assert.are.equal(F.threshold(y, 0.1, 7), F.threshold(y, 0.1, 7, false, nil))
    assert.are.same({ 1, 3 }, F.glu(ember.randn(1, 6), -1, nil).shape)
  end)
end)

describe("modules print Lua's booleans", function()
  it("nn.Conv* as nn.Linear: bias=false", function()
    assert.matches("bias=false%)$", tostring(nn.Linear(2, 3, false)))
    for _, name in ipairs { "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d" } do
      local s = tostring(nn[name](2, 4, 3, { bias = false }))
      assert.matches("bias=false%)$", s)
      assert.is_nil(s:find("False", 1, true), s)
    end
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

describe("torch's inplace argument of the dropouts, selu, celu, threshold and rrelu", function()
  local x = ember.tensor({ { 0.1, 0.5, -0.3 }, { 1.2, -0.7, 0.4 } }, "float64")
  it("by position or by name; true puts the result into the input", function()
    local cases = {
      { function(y, ip) return F.dropout(y, 0.5, false, ip) end, function(y) return y end },
      { function(y, ip) return F.dropout(y, { p = 0.5, training = false, inplace = ip }) end, function(y) return y end },
      { function(y, ip) return F.dropout1d(y, 0.5, false, ip) end, function(y) return y end },
      { function(y, ip) return F.dropout2d(y:view(1, 2, 3), { training = false, inplace = ip }) end, function(y) return y end },
      { function(y, ip) return F.alpha_dropout(y, 0.5, false, ip) end, function(y) return y end },
      { function(y, ip) return F.feature_alpha_dropout(y, { training = false, inplace = ip }) end, function(y) return y end },
      { function(y, ip) return F.selu(y, ip) end, function(y) return ember.elu(y, 1.6732632423543772) * 1.0507009873554805 end },
      { function(y, ip) return F.celu(y, { alpha = 0.5, inplace = ip }) end, function(y) return ember.elu(y / 0.5) * 0.5 end },
      { function(y, ip) return F.threshold(y, 0.2, -1, ip) end,
        function(y) return ember.where(y:gt(0.2), y, ember.full_like(y, -1)) end },
      { function(y, ip) return F.rrelu(y, 0.1, 0.3, false, ip) end, function(y) return ember.leaky_relu(y, 0.2) end },
    }
    for i, c in ipairs(cases) do
      local want = c[2](x)
      local kept = x:clone()
      local out = c[1](kept, false)
      assert(ember.allclose(out:reshape(2, 3), want), "case " .. i .. " inplace=false")
      assert(ember.equal(kept, x), "case " .. i .. ": inplace=false changed the input")
      local y = x:clone()
      local got = c[1](y, true)
      assert(ember.allclose(y, want), "case " .. i .. ": inplace=true left the input")
      assert(ember.allclose(got:reshape(2, 3), want), "case " .. i .. " inplace=true result")
    end
  end)

  it("is differentiable through a non-leaf and refused on a leaf that requires grad", function()
    gradcheck.check(function(a) return F.celu(a * 1, { alpha = 0.7, inplace = true }) end, { x:clone() })
    gradcheck.check(function(a) return F.threshold(a * 1, 0.2, -1, true) end, { x:clone() })
    raises_here(function() F.dropout(ember.ones(2):requires_grad_(), 0.5, true, true) end, "in-place operation")
    raises_here(function() F.dropout(x, 0.5, true, 1) end, "nn.functional.dropout: inplace must be true or false, got 1")
  end)
end)

describe("nn.Upsample in PyTorch's positional order (size, scale_factor, mode, align_corners)", function()
  it("nn.Upsample(nil, 2, \"bilinear\", true) is the scale_factor form", function()
    -- was: 'Upsample: give either size or scale_factor (one of them)'
    local x = ember.randn(1, 2, 3, 4)
    local a = nn.Upsample(nil, 2, "bilinear", true)
    local b = nn.Upsample({ scale_factor = 2, mode = "bilinear", align_corners = true })
    assert.are.equal("1,2,6,8", shape(a(x)))
    assert.is_true(a(x):equal(b(x)))
    assert.are.equal("1,2,6,8", shape(nn.Upsample(nil, 2)(x)))
    -- the rest by name after them
    local c = nn.Upsample(nil, 2.5, { mode = "bilinear", recompute_scale_factor = true })
    assert.is_true(c(x):equal(nn.Upsample({ scale_factor = 2.5, mode = "bilinear", recompute_scale_factor = true })(x)))
  end)

  it("nn.Upsample({5, 6}, nil, \"bicubic\") is the size {5, 6}, as torch.nn.Upsample((5, 6), None, 'bicubic')", function()
    local x = ember.randn(1, 2, 3, 4)
    local y = nn.Upsample({ 5, 6 }, nil, "bicubic")(x)
    assert.are.equal("1,2,5,6", shape(y))
    assert.is_true(y:equal(nn.Upsample({ size = { 5, 6 }, mode = "bicubic" })(x)))
  end)

  it("ember's one-argument form stays the scale factor; errors name Upsample at the user's line", function()
    assert.are.equal("1,2,6,8", shape(nn.Upsample(2)(ember.randn(1, 2, 3, 4))))
    assert.are.equal("1,2,6,8", shape(nn.Upsample(2, { mode = "bilinear" })(ember.randn(1, 2, 3, 4))))
    local e = err_of(function() local _ = nn.Upsample(3, 2) end)
    assert.truthy(e:find("nn_torch_args_spec.lua:%d+: Upsample: give either size or scale_factor"), e)
    e = err_of(function() local _ = nn.Upsample(nil, 2, "bilinear", { mode = "nearest" }) end)
    assert.truthy(e:find("nn_torch_args_spec.lua:%d+: Upsample: mode given twice"), e)
    e = err_of(function() local _ = nn.Upsample(nil, 2, "bilinear", true, false, 1) end)
    assert.truthy(e:find("nn_torch_args_spec.lua:%d+: Upsample: takes at most 5 arguments"), e)
  end)
end)

describe("forward's output_size by name, as PyTorch's keyword", function()
  it("ConvTranspose1d/2d(x, {output_size = ...}) picks the output padding", function()
    -- was: 'output_size {} is not reachable from an input of shape [1, 2, 5, 5]'
    local x = ember.randn(1, 2, 5, 5)
    local m = nn.ConvTranspose2d(2, 2, 3, { stride = 2, padding = 1 })
    assert.are.equal("1,2,10,10", shape(m(x, { output_size = { 10, 10 } })))
    assert.are.equal("1,2,9,9", shape(m(x, { output_size = { 1, 2, 9, 9 } })))
    assert.is_true(m(x, { output_size = { 10, 10 } }):equal(m(x, { 10, 10 })))
    assert.are.equal("1,2,10", shape(nn.ConvTranspose1d(2, 2, 3, { stride = 2 })(ember.randn(1, 2, 4), { output_size = 10 })))
    local e = err_of(function() local y = m(x, { outputsize = { 10, 10 } }); return y end)
    assert.truthy(e:find("ConvTranspose2d.forward: unknown option 'outputsize'"), e)
  end)

  it("MaxUnpool1d/2d/3d(y, indices, {output_size = ...})", function()
    -- was: 'nn.functional.max_unpool2d: output_size must be 2 positive integers ..., got {}'
    local x = ember.randn(1, 2, 5, 5)
    local y, i = nn.MaxPool2d(2, { return_indices = true })(x)
    local u = nn.MaxUnpool2d(2)(y, i, { output_size = { 5, 5 } })
    assert.are.equal("1,2,5,5", shape(u))
    assert.is_true(u:equal(nn.MaxUnpool2d(2)(y, i, { 5, 5 })))
    local y1, i1 = nn.MaxPool1d(2, { return_indices = true })(ember.randn(1, 2, 5))
    assert.are.equal("1,2,5", shape(nn.MaxUnpool1d(2)(y1, i1, { output_size = { 5 } })))
    local y3, i3 = nn.MaxPool3d(2, { return_indices = true })(ember.randn(1, 2, 5, 5, 5))
    assert.are.equal("1,2,5,5,5", shape(nn.MaxUnpool3d(2)(y3, i3, { output_size = { 5, 5, 5 } })))
  end)
end)

describe("the lazy modules in PyTorch's positional order and Lua's table of names", function()
  it("nn.LazyConv2d(4, 3, 2, 1, 1, 1, false, \"reflect\") builds nn.Conv2d(C, 4, 3, 2, 1, 1, 1, false, \"reflect\")", function()
    -- was: it printed, then its first forward failed with 'Conv2d: options must be a table, got number'
    local x = ember.randn(2, 2, 5, 5)
    local m = nn.LazyConv2d(4, 3, 2, 1, 1, 1, false, "reflect")
    ember.manual_seed(1)
    local y = m(x)
    ember.manual_seed(1)
    local ref = nn.Conv2d(2, 4, 3, { stride = 2, padding = 1, bias = false, padding_mode = "reflect" })
    assert.are.equal("2,4,3,3", shape(y))
    assert.is_nil(m.bias)
    assert.are.equal("reflect", m.padding_mode)
    assert.is_true(m.weight:equal(ref.weight))
    -- was: 'Conv2d: out_channels must be a positive integer, got table'
    local n = nn.LazyConv2d{ out_channels = 4, kernel_size = 3, stride = 2, bias = false }
    assert.are.equal("2,4,2,2", shape(n(x)))
    assert.are.equal("2,4,10,10", shape(nn.LazyConvTranspose2d(4, 3, 2, 1, 1, 1, false)(x)))
    assert.are.equal("2,4,2,2,2", shape(nn.LazyConv3d{ out_channels = 4, kernel_size = 2 }(ember.randn(2, 3, 3, 3, 3))))
  end)

  it("nn.LazyBatchNorm2d(1e-3, 0.2, false) and nn.LazyLinear(3, false) take PyTorch's order", function()
    local bn = nn.LazyBatchNorm2d(1e-3, 0.2, false)
    bn(ember.randn(2, 2, 5, 5))
    assert.are.same({ 1e-3, 0.2, false }, { bn.eps, bn.momentum, bn.affine })
    local inorm = nn.LazyInstanceNorm2d{ eps = 1e-3 }
    inorm(ember.randn(2, 2, 5, 5))
    assert.are.same({ 1e-3, true, true }, { inorm.eps, inorm.affine, inorm.track_running_stats })
    local lin = nn.LazyLinear(3, false)
    assert.are.equal("2,3", shape(lin(ember.randn(2, 5))))
    assert.is_nil(lin.bias)
    local e = err_of(function() local _ = nn.LazyConv2d(4, 3, { strid = 2 }) end)
    assert.truthy(e:find("nn_torch_args_spec.lua:%d+: Conv2d: unknown option 'strid'"), e)
  end)
end)

describe("the vision modules' table of names and positional order, as torch's keywords", function()
  it("pads, shuffles, Dropout2d, MaxUnpool3d and FractionalMaxPool2d/3d by name", function()
    -- each was an error ('upscale_factor must be a positive integer, got table', 'padding must be ..., got {}',
    -- 'MaxUnpool3d: kernel_size must be ... got {}', FractionalMaxPool2d(2, {3, 3}): "unknown option '1'")
    local x = ember.randn(1, 8, 4, 6)
    assert.are.equal("1,2,8,12", shape(nn.PixelShuffle{ upscale_factor = 2 }(x)))
    assert.are.equal("1,32,2,3", shape(nn.PixelUnshuffle{ downscale_factor = 2 }(x)))
    assert.are.equal(4, nn.ChannelShuffle{ groups = 4 }.groups)
    assert.are.equal("1,8,5,9", shape(nn.ReflectionPad2d{ padding = { 1, 2, 0, 1 } }(x)))
    assert.are.equal("1,8,8,10", shape(nn.ReplicationPad2d{ padding = 2 }(x)))
    assert.are.equal("1,8,6,8", shape(nn.ZeroPad2d{ padding = 1 }(x)))
    assert.are.equal("8,10", shape(nn.ReflectionPad1d{ padding = 2 }(ember.randn(8, 6))))
    assert.are.equal("8,9", shape(nn.ReplicationPad1d{ padding = { 1, 2 } }(ember.randn(8, 6))))
    local c = nn.ConstantPad2d{ padding = { 1, 0, 0, 1 }, value = 2.5 }(x)
    assert.are.equal("1,8,5,7", shape(c))
    assert.are.equal(2.5, c[1][1][5][7]:item())
    assert.are.equal(1.5, nn.ConstantPad1d{ padding = 1, value = 1.5 }(ember.zeros(2, 3))[1][1]:item())
    assert.are.equal(0.3, nn.Dropout2d{ p = 0.3 }.p)
    local m = nn.MaxUnpool3d{ kernel_size = 2, stride = 2, padding = 1 }
    assert.are.same({ 2, 1 }, { m.stride, m.padding })
    assert.are.same(m.padding, nn.MaxUnpool3d(2, 2, 1).padding)
    local f = ember.randn(1, 2, 6, 6)
    assert.are.equal("1,2,3,3", shape(nn.FractionalMaxPool2d(2, { 3, 3 })(f)))
    assert.are.equal("1,2,3,3", shape(nn.FractionalMaxPool2d(2, nil, 0.5)(f)))
    assert.are.equal("1,2,3,3,3", shape(nn.FractionalMaxPool3d{ kernel_size = 2, output_size = 3 }(ember.randn(1, 2, 6, 6, 6))))
  end)
end)
