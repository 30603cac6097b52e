-- What a new user coming from PyTorch 1.13 / Hugging Face tries first with
-- ember's modern-model library (issue 27): ember.models, GQA and the KV
-- cache, generate, the convolution/pooling/normalisation modules, nn.init
-- and checkpointing. Each block is a defect found by probing ember as such
-- a user; the test fails without its fix.
local ember = require "ember"
local nn = require "ember.nn"
local raises_here = require("tests.lua.helpers.parity").raises_here

describe("a KV cache filled by one attention module is refused by another", function()
  local function mha()
    return nn.MultiHeadAttention{ d_model = 16, heads = 4, kv_heads = 2, causal = true }:eval()
  end

  it("self-attention: same shapes, other weights (it used the other model's keys silently)", function()
    local a, b = mha(), mha()
    local x = ember.randn(2, 5, 16)
    ember.no_grad(function()
      local cache = {}
      a:forward_cached(x, cache)
      raises_here(function() b:forward_cached(x:narrow(2, 1, 1), cache) end,
        "MultiHeadAttention.forward_cached: this cache was filled by another module")
      -- its own module goes on with it
      assert.are.equal(6, (a:forward_cached(x:narrow(2, 1, 1), cache) and cache.len))
    end)
  end)

  it("cross-attention: a memory cached by another module is not used as this one's keys", function()
    local a, b = mha(), mha()
    local x, mem = ember.randn(2, 1, 16), ember.randn(2, 3, 16)
    ember.no_grad(function()
      local cache = {}
      a:forward_cached(x, cache, { memory = mem })
      raises_here(function() b:forward_cached(x, cache, { memory = mem }) end,
        "this cache was filled by another module")
    end)
  end)

  it("a Llama's cache given to another Llama of the same config", function()
    local Llama = require("ember.models").Llama
    local cfg = { vocab_size = 11, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2,
                  num_attention_heads = 4, num_key_value_heads = 2 }
    local m1, m2 = Llama(cfg):eval(), Llama(cfg):eval()
    local ids = ember.tensor({ { 1, 2, 3 } }, { dtype = "int64" })
    ember.no_grad(function()
      local cache = {}
      m1(ids, { cache = cache })
      raises_here(function() m2(ids:narrow(2, 1, 1), { cache = cache }) end, "filled by another module")
    end)
  end)
end)

-- the PyTorch 1.13 numbers of the blocks below (tests/gen_nn_fixtures.py, probe_models_cases)
local fixtures = dofile("tests/fixtures/nn_probe_models.lua")
local parity = require "tests.lua.helpers.parity"

describe("pooling with ceil_mode (PyTorch's option; it was refused)", function()
  local F64 = "float64"
  local makers = {
    MaxPool2d = nn.MaxPool2d, AvgPool2d = nn.AvgPool2d, MaxPool1d = nn.MaxPool1d, AvgPool1d = nn.AvgPool1d,
  }
  for _, name in ipairs { "MaxPool2d_ceil", "MaxPool2d_ceil_pad_dilated", "MaxPool2d_ceil_window_past_input",
                          "AvgPool2d_ceil_pad", "AvgPool2d_ceil_exclude_pad", "AvgPool2d_ceil_divisor",
                          "MaxPool2d_ceil_last_window_dropped", "MaxPool1d_ceil", "AvgPool1d_ceil", "AvgPool1d_ceil_exclude_pad",
                          "AvgPool1d_ceil_last_window_dropped" } do
    it(name .. ": values and input gradient as PyTorch's, float64", function()
      local c = parity.case(fixtures, name)
      local m = makers[c.config.module](c.config.kernel_size, c.config.opts)
      parity.module(m, c)
      assert.are.equal(F64, m(parity.T(c.inputs.x)).dtype)
    end)
  end

  it("float64 gradcheck of the ceil_mode windows (the overhang's -inf / divisor)", function()
    local gradcheck = require "tests.lua.helpers.gradcheck"
    local x = ember.randn({ 1, 2, 6, 7 }, { dtype = "float64" })
    local avg = nn.AvgPool2d(3, { stride = 2, padding = 1, ceil_mode = true })
    local mx = nn.MaxPool2d(3, { stride = 2, ceil_mode = true })
    gradcheck.check(function(t) return avg(t) end, { x })
    gradcheck.check(function(t) return mx(t) end, { ember.randn({ 1, 2, 6, 7 }, { dtype = "float64" }) })
  end)

  it("prints as PyTorch's (ceil_mode shown when set); a non-boolean is refused", function()
    assert.are.equal("MaxPool2d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=true)",
      tostring(nn.MaxPool2d(3, { stride = 2, ceil_mode = true })))
    assert.are.equal("AvgPool1d(kernel_size=4, stride=3, padding=2, ceil_mode=true, count_include_pad=true)",
      tostring(nn.AvgPool1d(4, { stride = 3, padding = 2, ceil_mode = true })))
    raises_here(function() local _ = nn.MaxPool2d(2, { ceil_mode = 1 }) end, "MaxPool2d: ceil_mode must be a boolean")
  end)
end)

describe("Conv1d/Conv2d take padding_mode reflect, replicate and circular (PyTorch's; refused before)", function()
  for _, name in ipairs { "Conv2d_reflect", "Conv2d_replicate_groups_dilated", "Conv2d_circular",
                          "Conv2d_same_reflect", "Conv1d_circular_stride", "Conv1d_reflect_unbatched" } do
    it(name .. ": values and gradients as PyTorch's, float64 and float32", function()
      local c = parity.case(fixtures, name)
      local cfg = c.config
      local make = nn[cfg.module]
      local opts = {}
      for k, v in pairs(cfg.opts) do opts[k] = v end
      opts.dtype = "float64"
      parity.module(make(cfg.in_channels, cfg.out_channels, cfg.kernel_size, opts), c)
      opts.dtype = nil
      parity.module_float32(make(cfg.in_channels, cfg.out_channels, cfg.kernel_size, opts), c, { tol = 1e-5 })
    end)
  end

  it("prints padding_mode as PyTorch; bad modes and too much reflect padding are errors naming the module", function()
    assert.are.equal("Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), padding_mode=circular)",
      tostring(nn.Conv2d(3, 4, 3, { padding = 1, padding_mode = "circular" })))
    raises_here(function() local _ = nn.Conv1d(3, 4, 3, { padding_mode = "mirror" }) end,
      'Conv1d: padding_mode must be "zeros", "reflect", "replicate" or "circular", got "mirror"')
    raises_here(function() local _ = nn.ConvTranspose2d(3, 4, 3, { padding_mode = "reflect" }) end,
      'ConvTranspose2d: only padding_mode "zeros" is supported')
    local conv = nn.Conv2d(3, 4, 3, { padding = 3, padding_mode = "reflect" })
    raises_here(function() conv(ember.randn(1, 3, 3, 8)) end,
      'Conv2d.forward: padding_mode="reflect" pads 3 and 3, more than the 3 elements along dim 3')
  end)
end)
