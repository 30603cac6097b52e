-- helper102: arguments a PyTorch user passes are taken or refused, never
-- dropped without a word. Every nn constructor with torch's signature
-- refuses an argument past torch's own and a name it does not take; torch's
-- inplace is accepted (and ignored: a module's result is a new tensor) where
-- torch has it, and must be a boolean; nn.functional's and ember's
-- activations refuse arguments past theirs; the losses' modules take
-- torch's positional order (nn.L1Loss(nil, nil, "sum") ran with the mean);
-- modules print Lua's booleans (nn.Conv2d printed bias=False, nn.Linear bias=false).
local ember = require "ember"
local nn = require "ember.nn"
local F = require "ember.nn.functional"
local parity = require "tests.lua.helpers.parity"
local raises_here = parity.raises_here

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

describe("helper102: nn constructors refuse what torch.nn would not take", function()
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

describe("helper102: nn.functional refuses arguments past torch's", function()
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

describe("helper102: modules print Lua's booleans", function()
  it("nn.Conv* as nn.Linear: bias=false", function()
    assert.matches("bias=false%)$", tostring(nn.Linear(2, 3, false)))
    for _, name in ipairs { "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d" } do
      local s = tostring(nn[name](2, 4, 3, { bias = false }))
      assert.matches("bias=false%)$", s)
      assert.is_nil(s:find("False", 1, true), s)
    end
  end)
end)
