-- The fused CPU attention kernel on heads where they lie
-- (em_backend.attention_strided_heads): q, k, v as transposed views of
-- [B, L, H*d] projections (nn.MultiHeadAttention's split), of one fused
-- [B, L, 3*H*d] projection, or narrows of a longer buffer, read in place;
-- out and the gradients written as [B, L, H, d] and handed back as views.
-- Results and gradients are the same bits as the same call on contiguous
-- copies, in float32, float64 and bfloat16, for causal and full attention,
-- grouped heads, a padding mask, an additive mask, dropout under a seed, a
-- variant written in Lua (softcap), Shaw's tables (which read q and dout
-- rows themselves), cross-attention down to the kernel's few-rows path, on
-- one and four threads (the backward's per-head pass and its two passes);
-- float64 finite differences on strided inputs; and the profiler sees no
-- copy around attention in nn.MultiHeadAttention's forward and backward (nor
-- in the views before rope's backward, for a fused projection's heads).
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"

-- a and b hold the same values, bit for bit (bfloat16 and float32 widen to
-- float64 exactly; a NaN anywhere fails)
local function same_bits(a, b, what)
  assert.are.same(a.shape, b.shape, what)
  local d = (a:double() - b:double()):abs():max():item()
  assert(d == 0, ("%s differs by %.3g from the call on contiguous copies"):format(what, d))
end

-- Leaves laid out as `layout` says, and q, k, v [B, H, L, d] as views of
-- them (views(leaves) and, for the gradients, views of the leaves' grads).
--   mha:    three [B, L, H*d] projections, :view(B, L, H, d):transpose(2, 3)
--   fused:  one [B, L, (H + 2 Hkv) d] projection, narrowed into q, k, v
--   narrow: [B, H, L + 5, d] buffers narrowed along L (a KV cache's filled part)
local function layout_of(layout, s)
  local B, H, Hkv, Lq, Lk, dk, dv = s.B, s.H, s.Hkv, s.Lq, s.Lk, s.dk, s.dv
  local o = { dtype = s.dtype }
  local function split(x, heads, d) return x:view(B, x.shape[2], heads, d):transpose(2, 3) end
  if layout == "mha" then
    return { ember.randn({ B, Lq, H * dk }, o), ember.randn({ B, Lk, Hkv * dk }, o), ember.randn({ B, Lk, Hkv * dv }, o) },
      function(t) return split(t[1], H, dk), split(t[2], Hkv, dk), split(t[3], Hkv, dv) end
  elseif layout == "fused" then
    assert(Lq == Lk)
    local nq, nk = H * dk, Hkv * dk
    return { ember.randn({ B, Lq, nq + nk + Hkv * dv }, o) },
      function(t)
        local x = t[1]
        return split(x:narrow(3, 1, nq), H, dk), split(x:narrow(3, nq + 1, nk), Hkv, dk),
          split(x:narrow(3, nq + nk + 1, Hkv * dv), Hkv, dv)
      end
  else
    return { ember.randn({ B, H, Lq + 5, dk }, o), ember.randn({ B, Hkv, Lk + 5, dk }, o), ember.randn({ B, Hkv, Lk + 5, dv }, o) },
      function(t) return t[1]:narrow(3, 3, Lq), t[2]:narrow(3, 2, Lk), t[3]:narrow(3, 4, Lk) end
  end
end

local function attention(s)
  local spec = { heads = s.H, head_dim = s.dk, v_head_dim = s.dv, dtype = s.dtype }
  for k, v in pairs(s.variant or { attention = "standard" }) do spec[k] = v end
  local att = ember.Attention(spec)
  if s.opts.dropout then att:train() else att:eval() end
  -- learned tables start small: make them matter
  ember.no_grad(function()
    for _, p in ipairs(att:parameters()) do p:copy_(ember.randn(p.shape, { dtype = s.dtype }) * 0.5) end
  end)
  return att
end

local function maxdiff(a, b) return (a:double() - b:double()):abs():max():item() end

-- One call on the views and one on contiguous copies of them, under the same
-- seed and upstream gradient: the same bits out, in every gradient (the
-- leaves' gradients seen through the same views) and in the tables'. The
-- views' upstream gradient comes through MultiHeadAttention's merge of the
-- heads (so the kernel reads dout strided), the copies' as a contiguous
-- tensor of the same values. In float32 and float64 without dropout the
-- composed route (need_weights: core ops on contiguous copies) is the
-- reference the results must be near, so that a layout both calls got
-- wrong fails too. (That route draws dropout from the global generator, not
-- the kernel's stream; in bfloat16 it fails on a float32 attn_mask.)
local function check_case(layout, s, name)
  local leaves, views = layout_of(layout, s)
  for _, t in ipairs(leaves) do t:requires_grad_() end
  local q, k, v = views(leaves)
  assert.is_false(q:is_contiguous() and k:is_contiguous() and v:is_contiguous(), name .. ": the views are strided")
  local copies = {}
  for r = 1, 2 do
    copies[r] = { q:detach():contiguous():requires_grad_(), k:detach():contiguous():requires_grad_(),
                  v:detach():contiguous():requires_grad_() }
  end
  local att = attention(s)
  local B, H, Lq, dv = s.B, s.H, s.Lq, s.dv
  local w = ember.randn({ B, Lq, H * dv }, { dtype = s.dtype })
  local w_heads = w:view(B, Lq, H, dv):transpose(2, 3):contiguous()
  local before = ember.attention_routes().fused
  local res = {}
  local composed = s.dtype ~= "bfloat16" and not s.opts.dropout
  for r, inp in ipairs { { q, k, v }, copies[1], composed and copies[2] or nil } do
    att:zero_grad()
    ember.manual_seed(7)
    local opts = {}
    for key, val in pairs(s.opts) do opts[key] = val end
    opts.need_weights = r == 3 or nil
    local out = att(inp[1], inp[2], inp[3], opts)
    if r == 1 then
      if H > 1 and Lq > 1 then assert.is_false(out:is_contiguous(), name .. ": out is a view of [B, L, H, d]") end
      local merged = out:transpose(2, 3):reshape(B, Lq, H * dv)
      assert.is_true(merged:is_contiguous(), name .. ": merging the heads is a view")
      ;(merged * w):sum():backward()
    else
      ;(out * w_heads):sum():backward()
    end
    res[r] = { out = out:detach() }
    for i, p in ipairs(att:parameters()) do res[r]["table " .. i] = p.grad and p.grad:clone() end
  end
  assert.are.equal(before + 2, ember.attention_routes().fused, name .. ": two calls on the fused kernel")
  local grads = {}
  for i, t in ipairs(leaves) do grads[i] = t.grad end
  local gq, gk, gv = views(grads)
  same_bits(res[1].out, res[2].out, name .. ": out")
  same_bits(gq, copies[1][1].grad, name .. ": dq")
  same_bits(gk, copies[1][2].grad, name .. ": dk")
  same_bits(gv, copies[1][3].grad, name .. ": dv")
  for key, g in pairs(res[2]) do
    if key:match("^table") then same_bits(res[1][key], g, name .. ": " .. key) end
  end
  if composed then
    local tol = s.dtype == "float64" and 1e-10 or 1e-4
    local pairs_ = { { res[1].out, res[3].out, "out" }, { gq, copies[2][1].grad, "dq" },
                     { gk, copies[2][2].grad, "dk" }, { gv, copies[2][3].grad, "dv" } }
    for _, c in ipairs(pairs_) do
      local d = maxdiff(c[1], c[2])
      assert(d < tol * math.max(1, c[2]:double():abs():max():item()),
        ("%s: %s differs by %.3g from the composed route"):format(name, c[3], d))
    end
  end
  return res[1].out, { att, copies[1][1], copies[1][2], copies[1][3] }
end

local function padding(B, Lk)
  local rows = {}
  for b = 1, B do
    rows[b] = {}
    for j = 1, Lk do rows[b][j] = j > Lk - 3 * b end
  end
  return ember.tensor(rows)
end

-- B, H, L: two query tiles and two key tiles (64 x 128 at these head dims)
local B, H, L = 2, 4, 136
local CASES = {
  { "causal", {}, { causal = true } },
  { "full", {}, {} },
  { "grouped heads (Hkv = 2), causal", { Hkv = 2 }, { causal = true } },
  { "multi-query (Hkv = 1)", { Hkv = 1 }, {} },
  { "padding mask", {}, { key_padding_mask = padding(B, L) } },
  { "additive mask", {}, { attn_mask = ember.randn(L, L) } },
  { "dropout under a seed", {}, { dropout = 0.3, causal = true } },
  { "dv != dk", { dv = 8 }, { causal = true } },
  { "softcap (Lua variant)", { variant = { attention = "softcap", cap = 1.5 } }, { causal = true } },
  { "Shaw's tables", { variant = { attention = "relpos", mode = "shaw", max_relative_position = 8 } }, {} },
}

describe("fused attention on strided heads", function()
  for _, dtype in ipairs { "float32", "float64", "bfloat16" } do
    for _, case in ipairs(CASES) do
      for _, layout in ipairs { "mha", "fused", "narrow" } do
        local name = ("%s, %s, %s layout"):format(dtype, case[1], layout)
        it(name .. ": the same bits as on contiguous copies", function()
          ember.manual_seed(1)
          local s = { B = B, H = H, Hkv = case[2].Hkv or H, Lq = L, Lk = L, dk = 16, dv = case[2].dv or 16,
                      dtype = dtype, variant = case[2].variant, opts = {} }
          for k, v in pairs(case[3]) do
            -- masks in the call's dtype (a float mask of bfloat16 q is float32 or bfloat16)
            s.opts[k] = (k == "attn_mask" and dtype ~= "bfloat16") and v:to(dtype) or v
          end
          local out, inputs = check_case(layout, s, name)
          if case[3].dropout then -- and dropout dropped something: in eval mode the output differs
            local att, q, k, v = table.unpack(inputs)
            local kept = att:eval()(q:detach(), k:detach(), v:detach(), s.opts)
            assert.is_true((kept:double() - out:double()):abs():max():item() > 1e-3)
          end
        end)
      end
    end

    it(dtype .. ": cross-attention down to the few-rows path (Lq = 1, 2, 5), causal and not", function()
      for _, Lq in ipairs { 1, 2, 5 } do
        for _, causal in ipairs { false, true } do
          ember.manual_seed(Lq)
          local s = { B = 2, H = 4, Hkv = 2, Lq = Lq, Lk = 70, dk = 16, dv = 16, dtype = dtype, opts = { causal = causal } }
          for _, layout in ipairs { "mha", "narrow" } do
            check_case(layout, s, ("%s, Lq = %d, causal = %s, %s layout"):format(dtype, Lq, causal, layout))
          end
        end
      end
    end)
  end

  it("four threads: the backward's two passes (fewer heads than threads) and its per-head pass", function()
    local n = ember.get_num_threads()
    ember.set_num_threads(4)
    local ok, err = pcall(function()
      for _, dtype in ipairs { "float32", "bfloat16", "float64" } do
        for _, heads in ipairs { 1, 2, 8 } do
          ember.manual_seed(heads)
          local s = { B = 1, H = heads, Hkv = heads, Lq = L, Lk = L, dk = 32, dv = 32, dtype = dtype,
                      opts = { causal = true } }
          check_case("fused", s, ("%s, %d heads on four threads, fused layout"):format(dtype, heads))
          if heads > 1 then check_case("mha", s, ("%s, %d heads on four threads, mha layout"):format(dtype, heads)) end
        end
      end
    end)
    ember.set_num_threads(n)
    assert(ok, err)
  end)

  it("float64 finite differences on strided q, k, v (causal, grouped heads, padding, Shaw)", function()
    ember.manual_seed(5)
    local function leaf(shape, d, H_)
      return ember.randn(shape, { dtype = "float64" }):view(shape[1], shape[2], H_, d):transpose(2, 3):detach()
    end
    local q = leaf({ 2, 9, 4 * 3 }, 3, 4)
    local k = leaf({ 2, 9, 2 * 3 }, 3, 2)
    local v = leaf({ 2, 9, 2 * 2 }, 2, 2)
    assert.is_false(q:is_contiguous())
    local att = ember.Attention { heads = 4, head_dim = 3, v_head_dim = 2, dtype = "float64" }
    gradcheck.check(function(a, b, c) return att(a, b, c, { causal = true }) end, { q, k, v })
    gradcheck.check(function(a, b, c) return att(a, b, c, { key_padding_mask = padding(2, 9) }) end, { q, k, v })
    local shaw = ember.Attention { attention = "relpos", mode = "shaw", max_relative_position = 3, heads = 4,
                                   head_dim = 3, v_head_dim = 3, dtype = "float64" }
    local vs = leaf({ 2, 9, 4 * 3 }, 3, 4)
    local ks = leaf({ 2, 9, 4 * 3 }, 3, 4)
    gradcheck.check(function(a, b, c) return shaw(a, b, c, { causal = true }) end, { q, ks, vs })
  end)

  it("activation checkpoints keep strided calls' results, told apart by the values the views show", function()
    -- as checkpoint_activation_spec's "values decide": the recompute makes two
    -- calls in the other order, here on heads of one fused projection whose
    -- q and k parts are equal but for one element past the first
    ember.manual_seed(9)
    local base0 = ember.randn(1, 6, 24)
    base0:narrow(3, 9, 8):copy_(base0:narrow(3, 1, 8))
    base0:narrow(2, 6, 1):narrow(3, 16, 1):add_(1)
    local sdpa = ember.scaled_dot_product_attention
    local function heads(t) return t:view(1, 6, 2, 4):transpose(2, 3) end
    local function grads(ck)
      local base = base0:clone():requires_grad_()
      local runs = 0
      local function fn(b)
        runs = runs + 1
        local x, y, z = heads(b:narrow(3, 1, 8)), heads(b:narrow(3, 9, 8)), heads(b:narrow(3, 17, 8))
        local first, second
        if runs == 1 then
          first = sdpa(x, y, z); second = sdpa(y, x, z)
        else
          second = sdpa(y, x, z); first = sdpa(x, y, z)
        end
        return first * 2 + second
      end
      local n = 0
      local prof = ember.profile(function()
        local out = ck and nn.checkpoint(fn, base) or fn(base)
        out:sum():backward()
      end)
      for _, e in ipairs(prof.events) do n = n + (e.name == "attention" and e.backward and 1 or 0) end
      return base.grad, n
    end
    local plain = grads(false)
    local ck, recomputed = grads(true)
    same_bits(ck, plain, "the checkpointed gradient")
    -- the recompute's first call takes the forward's second; its second computes
    assert.are.equal(1, recomputed)
  end)

  -- rope (core/src/ops_rope.c) writes its gradient with x's dims in x's
  -- order, dense: for a fused projection's heads that is [B, L, H, dh], so
  -- the views in front of it need no copy either
  it("rope on the heads of a fused projection (a narrow of [B, L, 3*H*dh]) hands back a [B, L, H, dh] gradient", function()
    local ang = ember.arange(0, 5, { dtype = "float64" }):unsqueeze(2) * ember.tensor({ 1, 0.1, 0.01 }, { dtype = "float64" }):unsqueeze(1)
    local c, s = ang:cos():float(), ang:sin():float()
    local base = ember.randn(2, 5, 3 * 18):requires_grad_()
    local x = base:narrow(3, 19, 18):reshape(2, 5, 3, 6):transpose(2, 3) -- k of a q, k, v projection
    local gx
    local y = ember._rope(x, c, s)
    local gy = ember.randn(2, 3, 5, 6)
    x:register_hook(function(g) gx = g end) -- the gradient rope's backward hands to the views
    local prof = ember.profile(function() y:backward(gy) end)
    assert.are.same({ 2, 3, 5, 6 }, gx.shape)
    -- x's dims in x's order ([B, L, H, dh]), without the gaps of the other projections
    assert.are.same({ 90, 6, 18, 1 }, gx:stride())
    for _, e in ipairs(prof.events) do
      local parent = e.parent > 0 and prof.events[e.parent].name or ""
      assert(not (e.name == "copy" and (parent:match("reshape") or parent:match("transpose") or parent:match("view"))),
        "a copy in " .. parent)
    end
    assert.are.equal(0, (base.grad:narrow(3, 19, 18):reshape(2, 5, 3, 6):transpose(2, 3) - gx):abs():max():item())
    assert.are.equal(0, base.grad:narrow(3, 1, 18):abs():max():item())
  end)

  -- The layer's forward and backward as in training: the heads are split
  -- and merged by views, so no copy runs next to attention or inside its
  -- backward, nor in the reshape/transpose backwards around it.
  local function copies_near_attention(prof)
    local ev, found = prof.events, {}
    local near = { attention = true, attention_grad = true }
    for i, e in ipairs(ev) do
      if e.name == "copy" then
        local parent = e.parent > 0 and ev[e.parent].name or ""
        local prev, nxt = ev[i - 1] and ev[i - 1].name or "", ev[i + 1] and ev[i + 1].name or ""
        if parent:match("attention") or parent:match("reshape") or parent:match("transpose") or
            parent:match("view") or near[prev] or near[nxt] then
          found[#found + 1] = ("copy (%s, in '%s', after '%s', before '%s')"):format(
            e.backward and "backward" or "forward", parent, prev, nxt)
        end
      end
    end
    return found
  end

  for _, spec in ipairs { { rope = false }, { rope = true }, { rope = true, kv_heads = 2 } } do
    local name = ("rope = %s, kv_heads = %s"):format(spec.rope, spec.kv_heads or 4)
    it("nn.MultiHeadAttention (" .. name .. "): no copy around attention in the forward and backward", function()
      ember.manual_seed(2)
      local m = nn.MultiHeadAttention(32, 4, { rope = spec.rope, kv_heads = spec.kv_heads, bias = false })
      local x = ember.randn(2, 16, 32):requires_grad_()
      local g = ember.randn(2, 16, 32)
      for _, dtype in ipairs { "float32", "bfloat16" } do
        local function step()
          local y
          if dtype == "bfloat16" then ember.autocast("bfloat16", function() y = m(x, { causal = true }) end)
          else y = m(x, { causal = true }) end
          y:backward(g:to(y.dtype))
        end
        step() -- tables built, caches warm
        local prof = ember.profile(step)
        local n = 0
        for _, e in ipairs(prof.events) do n = n + (e.name == "attention" and 1 or 0) end
        assert.are.equal(1, n, "one fused attention call")
        local found = copies_near_attention(prof)
        assert(#found == 0, dtype .. ": " .. table.concat(found, "; "))
      end
    end)
  end
end)
