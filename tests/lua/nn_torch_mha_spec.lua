-- nn.MultiheadAttention (lua/ember/nn/MultiheadAttention.lua): PyTorch's
-- spelling and calling convention on ember's nn.MultiHeadAttention. Each
-- case of tests/fixtures/nn_torch_mha.lua (tests/gen_nn_fixtures.py
-- torch_mha_cases) is torch.nn.MultiheadAttention in float64 called as
-- PyTorch code calls it; ember loads its state dict (torch's names) and
-- must give the same output, weights and input gradients.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local fx = dofile("tests/fixtures/nn_torch_mha.lua")
local T = function(spec) return parity.T(spec, "float64") end

describe("nn.MultiheadAttention against torch.nn.MultiheadAttention", function()
  for _, c in ipairs(fx.cases) do
    it(c.name, function()
      local m = nn.MultiheadAttention(c.embed_dim, c.num_heads, { batch_first = c.batch_first, kdim = c.kdim,
        vdim = c.vdim, dtype = "float64" })
      local state = {}
      for k, v in pairs(c.state) do state[k] = T(v) end
      m:load_state_dict(state)
      local leaves = {}
      for i, x in ipairs(c.inputs) do leaves[i] = T(x):requires_grad_() end
      local q = leaves[1]
      local k, v = leaves[2] or q, leaves[3] or q
      local opts = { need_weights = c.need_weights, average_attn_weights = c.average }
      if c.key_padding_mask then opts.key_padding_mask = T(c.key_padding_mask) end
      if c.attn_mask then opts.attn_mask = T(c.attn_mask) end -- bool (true = masked) or float, by its dtype
      local out, w = m(q, k, v, opts)
      parity.check(c.name .. " out", out, T(c.out), 1e-12)
      if c.weights then parity.check(c.name .. " weights", w, T(c.weights), 1e-12) else assert.is_nil(w) end
      (out * T(c.R)):sum():backward()
      for i, g in ipairs(c.grads) do parity.check(c.name .. " grad " .. i, leaves[i].grad, T(g), 1e-10) end
    end)
  end

  it("refuses bad options and bad masks, at the caller's line", function()
    parity.raises_here(function() nn.MultiheadAttention(8, 2, { add_bias_kv = 1 }) end,
      "nn.MultiheadAttention: add_bias_kv must be a boolean, got number")
    local kv = nn.MultiheadAttention(8, 2, { add_zero_attn = true })
    local y = ember.randn(3, 2, 8)
    parity.raises_here(function() kv(y, y, y, { is_causal = true }) end,
      "MultiheadAttention.forward: is_causal with add_bias_kv or add_zero_attn: give the mask as attn_mask")
    local m = nn.MultiheadAttention(8, 2)
    local x = ember.randn(3, 2, 8)
    parity.raises_here(function() m(x, x, x, { attn_mask = ember.zeros(3, 3, 3) }) end,
      "MultiheadAttention.forward: a 3-d attn_mask is [batch * num_heads = 4, L, S], got [3, 3, 3]")
    parity.raises_here(function() m(x, x, x, { need_weight = false }) end, "unknown option 'need_weight'")
  end)
end)
