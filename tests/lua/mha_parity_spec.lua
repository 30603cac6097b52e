-- MultiHeadAttention against PyTorch's nn.MultiheadAttention (batch_first):
-- outputs, per-head weights and every gradient, from the committed fixtures
-- tests/fixtures/attention_mha.lua (made by tests/gen_attention_fixtures.py).
-- float64 within 1e-6 relative error, float32 within 1e-4.
local ember = require "ember"

local fixtures = dofile("tests/fixtures/attention_mha.lua")

local function T(spec, dtype)
  if spec.dtype == "bool" then
    return ember.tensor(spec.data, {dtype = "bool"}):view(spec.shape)
  end
  return ember.tensor(spec.data, {dtype = dtype}):view(spec.shape)
end

-- max |a - b| / max |b| (b the reference), in float64
local function rel_err(a, b)
  local ad, bd = a:double(), b:double()
  local diff = (ad - bd):abs():max():item()
  local scale = bd:abs():max():item()
  return diff / math.max(scale, 1e-300)
end

-- `floor` (optional) is a reference scale for gradients that are zero in
-- exact arithmetic: b_k's is (adding b_k adds q_i . b_k to every score of
-- row i, which softmax ignores), so PyTorch's 1e-17 and our 1e-9 are both
-- rounding noise, measured against the scale of the other gradients.
local function check(what, got, want, tol, floor)
  assert.is_not_nil(got, what .. " is nil")
  assert.are.same(want.shape, got.shape, what .. " shape")
  local e = rel_err(got, want)
  if floor then
    e = (got:double() - want:double()):abs():max():item() / math.max(want:double():abs():max():item(), floor)
  end
  assert(e <= tol, string.format("%s: relative error %.3g > %.1g", what, e, tol))
end

for _, dtype in ipairs({"float64", "float32"}) do
  local tol = dtype == "float64" and 1e-6 or 1e-4
  describe("MultiHeadAttention matches PyTorch in " .. dtype, function()
    for _, c in ipairs(fixtures.cases) do
      it(c.name, function()
        local mha = ember.MultiHeadAttention{d_model = c.E, heads = c.H, kdim = c.kdim, vdim = c.vdim,
                                             dtype = dtype, causal = c.causal}
        local state = {}
        for k, v in pairs(c.state) do state[k] = T(v, dtype) end
        mha:load_state_dict(state)
        local query = T(c.query, dtype):requires_grad_()
        local key, value
        if not c.self_attn then
          key = T(c.key, dtype):requires_grad_()
          value = T(c.value, dtype):requires_grad_()
        end
        local opts = {need_weights = true}
        if c.masks.key_padding_mask then opts.key_padding_mask = T(c.masks.key_padding_mask) end
        -- the fixtures' boolean masks are true = may attend
        local m = c.masks.attn_mask
        if m and m.dtype == "bool" then opts.allow_mask = T(m) elseif m then opts.attn_mask = T(m, dtype) end
        local out, weights = mha:forward(query, key, value, opts)
        check("out", out, T(c.out, "float64"), tol)
        check("weights", weights, T(c.weights, "float64"), tol)
        out:backward(T(c.R, dtype))
        check("grad query", query.grad, T(c.grad.query, "float64"), tol)
        if key then
          check("grad key", key.grad, T(c.grad.key, "float64"), tol)
          check("grad value", value.grad, T(c.grad.value, "float64"), tol)
        end
        -- the fixtures use ember's earlier names (w_q, b_q, ...)
        local params, new = mha:named_parameters(), mha:legacy_names()
        for _, name in ipairs({"w_q", "w_k", "w_v", "b_q", "b_v", "w_o", "b_o"}) do
          check("grad " .. name, params[new[name]].grad, T(c.grad[name], "float64"), tol)
        end
        local floor = T(c.grad.w_k, "float64"):abs():max():item()
        check("grad b_k", params["k_proj.bias"].grad, T(c.grad.b_k, "float64"), tol, floor)
      end)
    end
  end)
end

describe("MultiHeadAttention parity holds on every path of the standard variant", function()
  -- The fused kernel (no weights), the row kernel and dense core ops must
  -- all give PyTorch's output.
  for _, kernel in ipairs({"fused", "dense"}) do
    it(kernel, function()
      for _, c in ipairs(fixtures.cases) do
        local mha = ember.MultiHeadAttention{d_model = c.E, heads = c.H, kdim = c.kdim, vdim = c.vdim,
                                             dtype = "float64", causal = c.causal, kernel = kernel}
        local state = {}
        for k, v in pairs(c.state) do state[k] = T(v, "float64") end
        mha:load_state_dict(state)
        local query = T(c.query, "float64"):requires_grad_()
        local key = c.key and T(c.key, "float64") or nil
        local value = c.value and T(c.value, "float64") or nil
        local opts = {}
        if c.masks.key_padding_mask then opts.key_padding_mask = T(c.masks.key_padding_mask) end
        local m = c.masks.attn_mask
        if m and m.dtype == "bool" then opts.allow_mask = T(m) elseif m then opts.attn_mask = T(m, "float64") end
        local out = mha:forward(query, key, value, opts)
        check(c.name .. " out", out, T(c.out, "float64"), 1e-6)
        out:backward(T(c.R, "float64"))
        check(c.name .. " grad query", query.grad, T(c.grad.query, "float64"), 1e-6)
      end
    end)
  end
end)
