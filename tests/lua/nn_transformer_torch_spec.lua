-- A PyTorch 1.13 user porting torch.nn.Transformer / torch.nn.MultiheadAttention
-- code: torch's state dicts load strictly, outputs and the gradients of the
-- inputs and of every parameter equal torch's in float64 (and within float32's
-- tolerance), 5 Adam steps end on torch's parameters, and what was found
-- while porting (one block each): float key padding masks, masks refused under
-- the name the user gave, nn.MultiheadAttention's shape errors in the user's
-- layout, torch's attribute names. PyTorch's numbers: tests/fixtures/nn_transformer_torch.lua
-- (tests/gen_nn_transformer_torch_fixtures.py).
local ember = require "ember"
local nn, optim = require "ember.nn", require "ember.optim"
local parity = require "tests.lua.helpers.parity"
local fx = dofile("tests/fixtures/nn_transformer_torch.lua")

local ACT = { relu = "relu", gelu = "gelu", tanh = function(x) return x:tanh() end }
local D, H, FF = 8, 2, 12

local function T(spec, dtype) return parity.T(spec, spec.dtype or dtype) end

local function transformer(c, dtype)
  local cf = c.config
  local m = nn.Transformer(D, H, { num_encoder_layers = cf.num_encoder_layers,
    num_decoder_layers = cf.num_decoder_layers, dim_feedforward = FF, dropout = 0, activation = ACT[cf.activation],
    batch_first = cf.batch_first, norm_first = cf.norm_first, layer_norm_eps = cf.layer_norm_eps, dtype = dtype })
  local sd = {}
  for k, v in pairs(c.state) do sd[k] = T(v, dtype) end
  m:load_state_dict(sd, true)
  return m
end

-- torch's masks under ember's names: a bool src_mask (true = masked) is src_block_mask
local function masks_of(c, dtype)
  local o = {}
  for k, v in pairs(c.masks) do
    local t = T(v, dtype)
    if t.dtype == "bool" and not k:match("padding") then k = k:gsub("_mask$", "_block_mask") end
    o[k] = t
  end
  return o
end

-- |got - want| <= tol * max(1, max |want|) for every element (a gradient
-- that is 0 in exact arithmetic, as k_proj's bias's, is rounding noise in both)
local function close(what, got, want, tol)
  assert(got ~= nil, what .. " is nil")
  assert.are.same(want.shape, got.shape, what .. " shape")
  local e = (got:double() - want:double()):abs():max():item() / math.max(1, want:abs():max():item())
  assert(e <= tol, ("%s: error %.3g > %.1g"):format(what, e, tol))
end

describe("nn.Transformer against torch.nn.Transformer (a torch state dict, strict)", function()
  for _, c in ipairs(fx.transformer) do
    for _, dtype in ipairs { "float64", "float32" } do
      it(c.name .. " in " .. dtype, function()
        local tol = dtype == "float64" and 1e-11 or 2e-5
        local m = transformer(c, dtype)
        local src, tgt = T(c.inputs[1], dtype):requires_grad_(), T(c.inputs[2], dtype):requires_grad_()
        local y = m(src, tgt, masks_of(c, dtype))
        close("out", y, T(c.out), tol)
        ;(y * T(c.R, dtype)):sum():backward()
        close("grad src", src.grad, T(c.grads[1]), 10 * tol)
        close("grad tgt", tgt.grad, T(c.grads[2]), 10 * tol)
        local want = {}
        for k, g in pairs(c.param_grads) do want[k] = T(g) end
        want = nn.Transformer.from_torch_state_dict(want)
        local n = 0
        for name, p in pairs(m:named_parameters()) do
          close("grad " .. name, p.grad, want[name], 10 * tol)
          n = n + 1
        end
        assert.are.equal(#parity.sorted_keys(want), n)
      end)
    end
  end

  it("torch_state_dict gives back torch's names exactly", function()
    for _, c in ipairs(fx.transformer) do
      assert.are.same(parity.sorted_keys(c.state), parity.sorted_keys(transformer(c, "float64"):torch_state_dict()))
    end
  end)
end)

describe("nn.MultiheadAttention against torch.nn.MultiheadAttention", function()
  for _, c in ipairs(fx.mha) do
    for _, dtype in ipairs { "float64", "float32" } do
      it(c.name .. " in " .. dtype, function()
        local tol = dtype == "float64" and 1e-12 or 2e-6
        local opts = { dtype = dtype }
        for k, v in pairs(c.opts) do opts[k] = v end
        local m = nn.MultiheadAttention(D, H, opts)
        local sd = {}
        for k, v in pairs(c.state) do sd[k] = T(v, dtype) end
        m:load_state_dict(sd, true)
        local x = {}
        for i, v in ipairs(c.inputs) do x[i] = T(v, dtype):requires_grad_() end
        local o = { need_weights = c.call.need_weights, average_attn_weights = c.call.average_attn_weights }
        for k, v in pairs(c.masks) do o[k] = T(v, dtype) end
        local y, w = m(x[1], x[2] or x[1], x[3] or x[2] or x[1], o)
        close("out", y, T(c.out), tol)
        close("weights", w, T(c.weights), tol)
        ;(y * T(c.R, dtype)):sum():backward()
        for i, g in ipairs(c.grads) do close("grad " .. i, x[i].grad, T(g), 10 * tol) end
        -- torch's names back, nothing of ember's own among them
        assert.are.same(parity.sorted_keys(c.state), parity.sorted_keys(m:torch_state_dict()))
      end)
    end
  end
end)

describe("5 Adam steps in float64, dropout 0", function()
  it("end on torch's parameters, with torch's losses", function()
    local c = fx.train
    local m = nn.Transformer(D, H, 1, 1, FF, 0, { batch_first = true, dtype = "float64" })
    local sd = {}
    for k, v in pairs(c.state) do sd[k] = T(v) end
    m:load_state_dict(sd, true)
    local opt = optim.Adam(m:parameters(), { lr = c.lr })
    local src, tgt, target = T(c.src), T(c.tgt), T(c.target)
    local mask = nn.Transformer.generate_square_subsequent_mask(c.tgt.shape[2], { dtype = "float64" })
    for i = 1, 5 do
      opt:zero_grad()
      local loss = ((m(src, tgt, { tgt_mask = mask }) - target) ^ 2):mean()
      loss:backward()
      opt:step()
      assert(math.abs(loss:item() - c.losses[i]) < 1e-12, "loss " .. i)
    end
    local after = m:torch_state_dict()
    for k, v in pairs(c.after) do close(k, after[k], T(v), 1e-10) end
  end)
end)

describe("found porting torch.nn.Transformer code", function()
  local function seq_first()
    return nn.Transformer(D, H, 1, 1, FF, 0, { batch_first = false, dtype = "float64" })
  end

  it("float key padding masks are added to the scores, as PyTorch's (were refused)", function()
    -- the numbers: tr_callable_floatkpm above; here the layers alone, against the bool form
    local m = seq_first()
    local src, tgt = ember.randn(5, 2, D, { dtype = "float64" }), ember.randn(4, 2, D, { dtype = "float64" })
    local pad = ember.zeros(2, 5, { dtype = "bool" })
    pad[2][5] = true
    local float = ember.zeros(2, 5, { dtype = "float64" }):masked_fill(pad, -math.huge)
    local a = m(src, tgt, { src_key_padding_mask = pad, memory_key_padding_mask = pad })
    local b = m(src, tgt, { src_key_padding_mask = float, memory_key_padding_mask = float })
    close("float == bool", b, a, 1e-14)
    local enc = nn.TransformerEncoderLayer(D, H, { dropout = 0, batch_first = false, dtype = "float64" })
    close("encoder layer", enc(src, { src_key_padding_mask = float }), enc(src, { src_key_padding_mask = pad }), 1e-14)
    parity.raises_here(function() m(src, tgt, { tgt_key_padding_mask = ember.zeros(2, 5, { dtype = "float64" }) }) end,
      "TransformerDecoderLayer.forward: tgt_key_padding_mask must be [B=2, S=4], bool (true = padding) or float")
  end)

  it("a boolean src_mask is refused by nn.Transformer naming src_block_mask (named MultiHeadAttention's allow_mask)",
    function()
      local m = seq_first()
      local src, tgt = ember.randn(5, 2, D, { dtype = "float64" }), ember.randn(4, 2, D, { dtype = "float64" })
      parity.raises_here(function() m(src, tgt, { src_mask = ember.zeros(5, 5, { dtype = "bool" }) }) end,
        "Transformer.forward: a boolean src_mask is ambiguous")
      parity.raises_here(function() m(src, tgt, { src_mask = ember.zeros(5, 5, { dtype = "bool" }) }) end,
        "Pass it as src_allow_mask (true = may attend) or src_block_mask (true = masked)")
    end)

  it("nn.MultiheadAttention's shape errors show the user's layout (were the batch-first transposes)", function()
    local m = nn.MultiheadAttention(D, H, { kdim = 6, vdim = 6 })
    local q, kv = ember.randn(3, 2, D), ember.randn(5, 2, 6)
    parity.raises_here(function() m(q, ember.randn(2, 5, 6), ember.randn(2, 5, 6)) end,
      "MultiheadAttention.forward: key must be [S, B=2, kdim=6] (batch_first = false), got [2, 5, 6]")
    parity.raises_here(function() m(q, kv, ember.randn(4, 2, 6)) end,
      "MultiheadAttention.forward: value must be [S=5, B=2, vdim=6] (batch_first = false), got [4, 2, 6]")
    parity.raises_here(function() m(q, kv, kv, { attn_mask = ember.zeros(5, 3) }) end,
      "MultiheadAttention.forward: attn_mask must be [L=3, S=5] or [batch * num_heads = 4, L, S], got [5, 3]")
    parity.raises_here(function() m(q, kv, kv, { attn_mask = ember.zeros(4, 5, 3) }) end,
      "a 3-d attn_mask is [batch * num_heads = 4, L, S], got [4, 5, 3] (L = 3, S = 5)")
    parity.raises_here(function() m(q, kv, kv, { key_padding_mask = ember.zeros(5, 2, { dtype = "bool" }) }) end,
      "MultiheadAttention.forward: key_padding_mask must be [B=2, S=5], bool (true = padding) or float")
    local bf = nn.MultiheadAttention(D, H, { batch_first = true })
    parity.raises_here(function() bf(ember.randn(2, 3, D), ember.randn(5, 2, D), ember.randn(5, 2, D)) end,
      "MultiheadAttention.forward: key must be [B=2, S, kdim=8] (batch_first = true), got [5, 2, 8]")
  end)

  it("nn.MultiheadAttention has torch's attribute names; ember's extras stay out of it", function()
    local m = nn.MultiheadAttention(D, H, { kdim = 6 })
    assert.are.same({ D, H, D // H, 6, D, false, false },
      { m.embed_dim, m.num_heads, m.head_dim, m.kdim, m.vdim, m.batch_first, m._qkv_same_embed_dim })
    assert.is_true(nn.MultiheadAttention(D, H)._qkv_same_embed_dim)
    parity.raises_here(function() nn.MultiheadAttention(D, H, { kv_heads = 1 }) end,
      "nn.MultiheadAttention: unknown option 'kv_heads'")
  end)
end)
