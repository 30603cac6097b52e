-- Constructors take PyTorch's positional order and Lua's table of names
-- as well as ember's own (sizes, then an options table): the three forms
-- make the same module (nn/_module_args.lua, each class's SIGNATURE).
local ember = require "ember"
local nn = require "ember.nn"

-- Same printed configuration and the same parameter shapes.
local function same_module(a, b)
  assert.are.equal(tostring(b), tostring(a))
  local pa, pb = a:named_parameters(), b:named_parameters()
  local na = 0
  for name, p in pairs(pa) do
    na = na + 1
    assert.is_truthy(pb[name], name)
    assert.are.same(p.shape, pb[name].shape)
  end
  local nb = 0
  for _ in pairs(pb) do nb = nb + 1 end
  assert.are.equal(na, nb)
end

-- the message of a failed call (nil when it ran, which no assert.matches accepts)
local err_of = require("tests.lua.helpers.parity").error_of

describe("constructors: PyTorch's positional options", function()
  it("Conv2d(3, 16, 3, 2, 1) is Conv2d(3, 16, 3, {stride = 2, padding = 1})", function()
    same_module(nn.Conv2d(3, 16, 3, 2, 1), nn.Conv2d(3, 16, 3, { stride = 2, padding = 1 }))
    local c = nn.Conv2d(3, 16, 3, 2, 1)
    assert.are.same({ 2, 16, 4, 4 }, c(ember.randn(2, 3, 8, 8)).shape)
  end)

  it("tuples are lists, and an options table may follow the positions", function()
    same_module(nn.Conv2d(3, 8, { 3, 5 }, { 2, 1 }, { 1, 2 }),
      nn.Conv2d(3, 8, { 3, 5 }, { stride = { 2, 1 }, padding = { 1, 2 } }))
    same_module(nn.Conv2d(3, 8, 3, 1, 1, 1, 1, false), nn.Conv2d(3, 8, 3, { padding = 1, bias = false }))
    same_module(nn.Conv2d(3, 8, 3, 2, { padding = 1, bias = false }),
      nn.Conv2d(3, 8, 3, { stride = 2, padding = 1, bias = false }))
  end)

  it("the layers a PyTorch model is written with", function()
    same_module(nn.Linear(3, 4, false), nn.Linear(3, 4, { bias = false }))
    same_module(nn.LayerNorm(8, 1e-6), nn.LayerNorm(8, { eps = 1e-6 }))
    same_module(nn.LayerNorm({ 8, 4 }, 1e-6, false), nn.LayerNorm({ 8, 4 }, { eps = 1e-6, elementwise_affine = false }))
    same_module(nn.RMSNorm(8, 1e-6), nn.RMSNorm(8, { eps = 1e-6 }))
    same_module(nn.GroupNorm(2, 4, 1e-6, false), nn.GroupNorm(2, 4, { eps = 1e-6, affine = false }))
    same_module(nn.BatchNorm2d(4, 1e-3, 0.01), nn.BatchNorm2d(4, { eps = 1e-3, momentum = 0.01 }))
    same_module(nn.MaxPool2d(3, 2, 1), nn.MaxPool2d(3, { stride = 2, padding = 1 }))
    same_module(nn.AvgPool2d(2, 2, 0, true), nn.AvgPool2d(2, { stride = 2, padding = 0, ceil_mode = true }))
    same_module(nn.Embedding(10, 4, 1), nn.Embedding(10, 4, { padding_idx = 1 }))
    same_module(nn.LSTM(8, 16, 2, true, true), nn.LSTM(8, 16, { num_layers = 2, batch_first = true }))
    same_module(nn.ConvTranspose2d(4, 2, 3, 2, 1, 1), nn.ConvTranspose2d(4, 2, 3, { stride = 2, padding = 1, output_padding = 1 }))
    ember.manual_seed(3)
    local a = nn.TransformerEncoderLayer(32, 4, 64, 0.0, "gelu", 1e-6, true, true)
    ember.manual_seed(3)
    local b = nn.TransformerEncoderLayer(32, 4, { dim_feedforward = 64, dropout = 0.0, activation = "gelu",
      layer_norm_eps = 1e-6, batch_first = true, norm_first = true })
    same_module(a, b)
    local x = ember.randn(2, 5, 32)
    assert.are.equal(0, (a(x) - b(x)):abs():max():item()) -- same seed, same weights
  end)

  it("refuses an option given twice and too many arguments, naming the class at the user's line", function()
    local e = err_of(function() nn.Conv2d(3, 16, 3, 2, { stride = 1 }) end)
    assert.matches("nn_constructor_args_spec.lua:%d+: Conv2d: stride given twice", e)
    e = err_of(function() nn.Linear(3, 4, true, false) end)
    assert.matches("nn_constructor_args_spec.lua:%d+: Linear: takes at most 3 arguments before the options table "
      .. "%(in_features, out_features, bias%), got 4", e)
    e = err_of(function() nn.AdaptiveAvgPool2d(1, 2) end)
    assert.matches("AdaptiveAvgPool2d: takes at most 1 arguments before the options table %(output_size%), got 2", e)
    -- a value of the wrong kind is the class's own error, as ember's form gives it
    e = err_of(function() nn.Conv2d(3, 16, 3, 0) end)
    assert.matches("nn_constructor_args_spec.lua:%d+: .*Conv2d.*stride", e)
  end)
end)

describe("constructors: one table of names", function()
  it("nn.Linear{in_features =, out_features =, bias =} and nn.Conv2d{...}", function()
    same_module(nn.Linear { in_features = 3, out_features = 4, bias = false }, nn.Linear(3, 4, { bias = false }))
    same_module(nn.Conv2d { in_channels = 3, out_channels = 16, kernel_size = 3, stride = 2 },
      nn.Conv2d(3, 16, 3, { stride = 2 }))
    same_module(nn.RMSNorm { normalized_shape = 8, eps = 1e-6 }, nn.RMSNorm(8, { eps = 1e-6 }))
  end)

  it("PyTorch's nhead names a Transformer layer's heads", function()
    local m = nn.TransformerEncoderLayer { d_model = 32, nhead = 4, dim_feedforward = 64, kv_heads = 2 }
    assert.are.same({ 2, 5, 32 }, m(ember.randn(2, 5, 32)).shape)
    assert.are.equal(2, m.self_attn.kv_heads)
    local e = err_of(function() nn.TransformerEncoderLayer { d_model = 32, nhead = 4, heads = 4 } end)
    assert.matches("nn_constructor_args_spec.lua:%d+: TransformerEncoderLayer: heads given twice", e)
  end)

  it("a size left out is the class's own error; a list is still a size (LayerNorm{8, 4})", function()
    local e = err_of(function() nn.Conv2d { in_channels = 3, kernel_size = 3 } end)
    assert.matches("nn_constructor_args_spec.lua:%d+: Conv2d: out_channels must be a positive integer, got nil", e)
    same_module(nn.LayerNorm({ 8, 4 }), nn.LayerNorm { normalized_shape = { 8, 4 } })
    e = err_of(function() nn.Linear { in_features = 3, out_features = 4, bais = false } end)
    assert.matches("unknown option 'bais'", e)
  end)
end)

describe("constructors: every declared signature", function()
  it("names as many sizes as the class's __init takes before its options", function()
    local checked = 0
    for name, cls in pairs(nn) do
      local sig = type(cls) == "table" and rawget(cls, "SIGNATURE")
      if sig then
        local info = debug.getinfo(cls.__init, "u")
        local target = name:match("^Lazy(.+)$") and rawget(nn[name:match("^Lazy(.+)$")], "SIGNATURE")
        if target then
          -- a lazy module (nn/_lazy.lua) passes its arguments on to its target's __init, less the first size
          assert.are.same({ table.unpack(target.sizes, 2) }, sig.sizes, name)
          assert.are.equal(target.options, sig.options, name)
        else
          -- self, the sizes, the options table (none where the class takes no options)
          local want = #sig.sizes + (#sig.options > 0 and 2 or 1)
          if cls.__init == nn.Module.__init or sig.closed then
            -- nothing reads the options (nn.ReLU's inplace): the signature must refuse every other name
            assert.is_true(sig.closed or #sig.options == 0, name)
            assert.is_true(info.nparams <= want, name)
          elseif info.isvararg then
            -- Module.keyword_args unpacks what it is given (nn.LeakyReLU(...))
            assert.is_true(info.nparams <= want, name)
          else
            assert.are.equal(want, info.nparams, name)
          end
        end
        for _, o in ipairs(sig.options) do assert.are.equal("string", type(o), name) end
        checked = checked + 1
      end
    end
    assert.is_true(checked >= 40, "signatures found: " .. checked)
  end)
end)
