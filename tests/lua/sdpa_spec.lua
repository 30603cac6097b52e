-- ember.scaled_dot_product_attention: PyTorch's F.scaled_dot_product_attention
-- (2.x semantics: top-left is_causal, bool masks true = attend, enable_gqa)
-- against the same formula composed of core ops, in float64 through autograd.
local ember = require "ember"

local sdpa = ember.scaled_dot_product_attention
local F64 = { dtype = "float64" }

local function max_abs(a, b) return (a - b):abs():max():item() end

-- softmax(q k^T * scale + mask) v, heads of k/v repeated for GQA.
local function reference(q, k, v, o)
  o = o or {}
  local nd = q.ndim
  local Hq, Hk = nd >= 4 and q.shape[nd - 2] or 1, nd >= 4 and k.shape[nd - 2] or 1
  if Hq ~= Hk then
    k = k:repeat_interleave(Hq // Hk, nd - 2)
    v = v:repeat_interleave(Hq // Hk, nd - 2)
  end
  local scale = o.scale or 1 / math.sqrt(q.shape[nd])
  local s = q:matmul(k:transpose(-1, -2)) * scale
  local L, S = q.shape[nd - 1], k.shape[nd - 1]
  local mask = o.attn_mask
  if o.is_causal then
    mask = ember.arange(1, S + 1):view(1, S):le(ember.arange(1, L + 1):view(L, 1))
  end
  if mask ~= nil then
    if mask.dtype == "bool" then s = s:masked_fill(mask:logical_not(), -math.huge) else s = s + mask end
  end
  return s:softmax(-1):matmul(v)
end

local function grads(fn, ...)
  local ins = { ... }
  for i, t in ipairs(ins) do ins[i] = t:detach():clone():requires_grad_() end
  local out = fn(table.unpack(ins))
  local w = ember.randn(out.shape, F64)
  ;(out * w):sum():backward()
  local g = {}
  for i, t in ipairs(ins) do g[i] = t.grad end
  return out, g, w
end

describe("ember.scaled_dot_product_attention", function()
  it("is softmax(q k^T / sqrt(E) + mask) v with its gradients (float64, 4-d, 3-d and 5-d)", function()
    ember.manual_seed(1)
    for _, shapes in ipairs {
      { { 2, 3, 5, 8 }, { 2, 3, 7, 8 }, { 2, 3, 7, 4 } },
      { { 3, 5, 8 }, { 3, 6, 8 }, { 3, 6, 2 } },
      { { 2, 2, 2, 4, 6 }, { 2, 2, 2, 5, 6 }, { 2, 2, 2, 5, 6 } },
    } do
      local q, k, v = ember.randn(shapes[1], F64), ember.randn(shapes[2], F64), ember.randn(shapes[3], F64)
      ember.manual_seed(7)
      local out, g = grads(sdpa, q, k, v)
      ember.manual_seed(7)
      local want, gw = grads(reference, q, k, v)
      assert.are.same(want.shape, out.shape)
      assert.is_true(max_abs(out, want) < 1e-12)
      for i = 1, 3 do assert.is_true(max_abs(g[i], gw[i]) < 1e-12, "grad " .. i) end
    end
  end)

  it("takes PyTorch's options: top-left is_causal, bool and float masks, scale", function()
    ember.manual_seed(2)
    local q, k, v = ember.randn(2, 2, 4, 8, F64), ember.randn(2, 2, 6, 8, F64), ember.randn(2, 2, 6, 8, F64)
    -- L < S: query 1 sees key 1 only (PyTorch), not keys 1..3 (bottom-right)
    local out = sdpa(q, k, v, { is_causal = true })
    assert.is_true(max_abs(out, reference(q, k, v, { is_causal = true })) < 1e-12)
    local v1 = v:narrow(3, 1, 1):expand(2, 2, 4, 8)
    assert.is_true(max_abs(out:narrow(3, 1, 1), v1:narrow(3, 1, 1)) < 1e-12)
    -- L == S runs the kernel's own causal mask
    local q6 = ember.randn(2, 2, 6, 8, F64)
    assert.is_true(max_abs(sdpa(q6, k, v, { is_causal = true }), reference(q6, k, v, { is_causal = true })) < 1e-12)
    local bool = ember.rand(4, 6):gt(0.3)
    bool:narrow(2, 1, 1):fill_(true) -- every row attends somewhere
    assert.is_true(max_abs(sdpa(q, k, v, { attn_mask = bool }), reference(q, k, v, { attn_mask = bool })) < 1e-12)
    local float = ember.randn(2, 1, 4, 6, F64)
    local o = { attn_mask = float, scale = 0.3 }
    assert.is_true(max_abs(sdpa(q, k, v, o), reference(q, k, v, o)) < 1e-12)
  end)

  it("folds a mask over more leading dims into the batch", function()
    ember.manual_seed(3)
    local q, k, v = ember.randn(2, 2, 2, 3, 4, F64), ember.randn(2, 2, 2, 5, 4, F64), ember.randn(2, 2, 2, 5, 4, F64)
    local m = ember.randn(2, 1, 2, 3, 5, F64)
    assert.is_true(max_abs(sdpa(q, k, v, { attn_mask = m }), reference(q, k, v, { attn_mask = m })) < 1e-12)
  end)

  it("reads grouped kv heads in place with enable_gqa", function()
    ember.manual_seed(4)
    local q, k, v = ember.randn(1, 8, 5, 4, F64), ember.randn(1, 2, 5, 4, F64), ember.randn(1, 2, 5, 4, F64)
    ember.manual_seed(9)
    local out, g = grads(function(a, b, c) return sdpa(a, b, c, { enable_gqa = true, is_causal = true }) end, q, k, v)
    ember.manual_seed(9)
    local want, gw = grads(function(a, b, c) return reference(a, b, c, { is_causal = true }) end, q, k, v)
    assert.is_true(max_abs(out, want) < 1e-12)
    for i = 1, 3 do assert.is_true(max_abs(g[i], gw[i]) < 1e-12, "grad " .. i) end
  end)

  it("drops weights whenever dropout_p > 0, reproducibly under a seed", function()
    local q, k, v = ember.randn(1, 2, 16, 8), ember.randn(1, 2, 16, 8), ember.randn(1, 2, 16, 8)
    ember.manual_seed(5)
    local a = sdpa(q, k, v, { dropout_p = 0.5 })
    ember.manual_seed(5)
    local b = sdpa(q, k, v, { dropout_p = 0.5 })
    assert.is_true(ember.equal(a, b))
    assert.is_true(max_abs(a, sdpa(q, k, v)) > 1e-3)
  end)

  it("names itself and the problem in its errors, at the caller's line", function()
    local q, k, v = ember.randn(1, 4, 3, 8), ember.randn(1, 2, 3, 8), ember.randn(1, 2, 3, 8)
    local cases = {
      { function() sdpa(q, k, v) end, "grouped-query attention needs {enable_gqa = true}" },
      { function() sdpa(q, ember.randn(1, 3, 3, 8), ember.randn(1, 3, 3, 8), { enable_gqa = true }) end,
        "query's 4 heads must be a multiple of key/value's 3 heads" },
      { function() sdpa(q, q, q, { is_causal = true, attn_mask = ember.ones(3, 3) }) end,
        "attn_mask and is_causal cannot both be set" },
      { function() sdpa(q, q, q, { dropout = 0.1 }) end, "unknown option 'dropout'" },
      { function() sdpa(q, q, q, { dropout_p = 1 }) end, "dropout_p must be a number in [0, 1), got 1" },
      { function() sdpa(q, ember.randn(1, 4, 3, 5), ember.randn(1, 4, 3, 5)) end, "key must be [..., S, E=8]" },
      { function() sdpa(q, ember.randn(2, 4, 3, 8), ember.randn(2, 4, 3, 8)) end, "must be equal (no broadcasting)" },
      { function() sdpa(q, q, "v") end, "value must be a tensor, got string" },
      -- once reported by the inner module ("ember.Attention.forward: attention 'standard'"),
      -- with the folded shape [B, H, L, S] instead of the user's
      { function() sdpa(q, q, q, { attn_mask = ember.ones(3, 4, { dtype = "bool" }) }) end,
        "attn_mask [3, 4] does not broadcast to [1, 4, 3, 3]" },
      { function() sdpa(q, q, q, { attn_mask = ember.ones(3, 3, { dtype = "int64" }) }) end,
        "attn_mask must be bool (true = may attend) or float added to the scores in query's dtype float32, got int64" },
      { function() sdpa(q, q:double(), q) end,
        "query, key and value must share a float32, float64 or bfloat16 dtype, got float32, float64 and float32" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok)
      assert.truthy(err:find("ember.scaled_dot_product_attention: ", 1, true), err)
      assert.truthy(err:find(c[2], 1, true), err)
      assert.truthy(err:find("sdpa_spec.lua:%d+:"), err)
    end
  end)
end)
