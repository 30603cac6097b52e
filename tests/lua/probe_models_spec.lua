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
