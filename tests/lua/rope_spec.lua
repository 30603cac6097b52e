-- The rotary kernel (ember._rope, core/src/ops_rope.c): what
-- nn.MultiHeadAttention{rope = true} and models.Llama run. It must give the
-- composed form's values ([x1 cos - x2 sin, x2 cos + x1 sin]; that form is
-- checked against PyTorch through the Llama and KJV fixtures), the same bits
-- in float32, one rounding in bfloat16, float64 gradients by finite
-- differences, and read strided heads (a projection's transposed view) and
-- hand their gradient back in the same layout.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"

-- cos and sin [L, h] for positions 0..L-1 (float64, then dt)
local function tables(L, d, dt)
  local h = d // 2
  local inv = {}
  for m = 0, h - 1 do inv[m + 1] = 10000 ^ (-2.0 * m / d) end
  local ang = ember.arange(0, L, { dtype = "float64" }):unsqueeze(2) * ember.tensor(inv, { dtype = "float64" }):unsqueeze(1)
  return ang:cos():to(dt), ang:sin():to(dt)
end

-- the composed form, as nn.MultiHeadAttention wrote it before the kernel
local function composed(x, c, s)
  local h = x.shape[x.ndim] // 2
  local nd = x.ndim
  local rotated = ember.cat({ x:narrow(nd, h + 1, h), x:narrow(nd, 1, h) }, nd)
  return x * ember.cat({ c, c }, 2) + rotated * ember.cat({ -s, s }, 2)
end

-- heads as a projection makes them: [B, L, H*dh] viewed as [B, H, L, dh]
local function heads(B, L, H, dh, dt)
  return ember.randn(B, L, H * dh, { dtype = dt }):reshape(B, L, H, dh):transpose(2, 3)
end

describe("rope kernel", function()
  it("float64: the composed form's values and float64 gradients, on strided heads", function()
    ember.manual_seed(1)
    local c, s = tables(5, 6, "float64")
    local x = heads(2, 5, 3, 6, "float64")
    assert.is_false(x:is_contiguous())
    assert.is_true(compare.max_rel(ember._rope(x, c, s), composed(x, c, s)) < 1e-15)
    gradcheck.check(function(t) return ember._rope(t, c, s) end, { x:detach() })
  end)

  it("hands the gradient back in the heads' layout: no copy in the views before it", function()
    local c, s = tables(5, 6, "float32")
    local base = ember.randn(2, 5, 18):requires_grad_()
    local y = ember._rope(base:reshape(2, 5, 3, 6):transpose(2, 3), c, s)
    local gy = ember.randn(2, 3, 5, 6)
    local prof = ember.profile(function() y:backward(gy) end)
    local copies, rope_grad = 0, nil
    for _, r in ipairs(prof:stats()) do
      if r.name == "copy" then copies = copies + r.calls end
      if r.name == "rope_grad" then rope_grad = r end
    end
    -- at most the leaf's .grad (a clone, unless the engine can hand it over); a contiguous gradient needs one more
    assert.is_true(copies <= 1, copies .. " copies")
    -- the profiler names the kernel, with the bytes it moves (x, out and the tables)
    assert.are.equal(1, rope_grad.calls)
    assert.are.equal((2 * 2 * 3 * 5 * 6 + 5 * 6) * 4, rope_grad.bytes)
  end)

  it("float64: the gradient of strided heads reaches the projection as the composed one does", function()
    ember.manual_seed(2)
    local c, s = tables(7, 8, "float64")
    local base = ember.randn(3, 7, 16, { dtype = "float64" }):requires_grad_()
    local w = ember.randn(3, 2, 7, 8, { dtype = "float64" })
    local function grad_of(f)
      base.grad = nil
      local x = base:reshape(3, 7, 2, 8):transpose(2, 3)
      local loss = (f(x, c, s) * w):sum()
      loss:backward()
      return base.grad:clone()
    end
    local g1, g2 = grad_of(ember._rope), grad_of(composed)
    assert.is_true(compare.max_rel(g1, g2) < 1e-15)
  end)

  it("float32: the same bits as the composed form, forward and backward", function()
    ember.manual_seed(3)
    local c, s = tables(33, 32, "float32")
    local base = ember.randn(2, 33, 4 * 32):requires_grad_()
    local gy = ember.randn(2, 4, 33, 32)
    local outs, grads = {}, {}
    for i, f in ipairs({ ember._rope, composed }) do
      base.grad = nil
      local y = f(base:reshape(2, 33, 4, 32):transpose(2, 3), c, s)
      y:backward(gy)
      outs[i], grads[i] = y, base.grad:clone()
    end
    assert.is_true(ember.equal(outs[1], outs[2]))
    assert.is_true(ember.equal(grads[1], grads[2]))
  end)

  it("bfloat16: computed in float32 and rounded once", function()
    ember.manual_seed(4)
    local c, s = tables(16, 64, "bfloat16")
    local x = heads(2, 16, 2, 64, "bfloat16")
    local want = composed(x:float(), c:float(), s:float()):to("bfloat16")
    assert.is_true(ember.equal(ember._rope(x, c, s), want))
    -- the backward is the rotation by minus the angles, rounded once
    local xl = x:detach():requires_grad_()
    local gy = ember.randn(2, 2, 16, 64):to("bfloat16")
    ember._rope(xl, c, s):backward(gy)
    assert.is_true(ember.equal(xl.grad, ember._rope(gy, c, -s)))
    assert.is_true(ember.equal(xl.grad, composed(gy:float(), c:float(), -s:float()):to("bfloat16")))
  end)

  it("bfloat16: one rounding at every head width, row stride and row count, special values too", function()
    -- The vector rows (backends/cpu/cpu_rope.c) take 16 pairs at a time: d = 32 is one
    -- vector, 64 two, 42 one and a tail of 5, 6 the tail alone. Heads of a projection
    -- [B, L, H*d] and of a fused q/k/v one [B, L, 3*H*d] (k's columns: a row stride of 3*H*d),
    -- 222 rows (64-row chunks and a part). NaN, inf, values whose products are denormal
    -- (they round as numbers: AVX512_BF16's instruction alone flushes them), huge ones.
    -- ctest runs this again with EMBER_CPU_BF16=avx512 and =plain (the other paths).
    math.randomseed(6)
    local special = { 0 / 0, math.huge, -math.huge, 1e-39, -3e-39, 2e-38, 3e38, -3e38, 0.0, -0.0 }
    local function same(a, b) -- NaN where the other has NaN, the same values elsewhere
      local an, bn = a:isnan(), b:isnan()
      return ember.equal(an, bn) and ember.equal(a:masked_fill(an, 0), b:masked_fill(bn, 0))
    end
    for _, d in ipairs({ 32, 64, 42, 6 }) do
      for _, fused in ipairs({ false, true }) do
        local B, L, H = 3, 37, 2
        local w = (fused and 3 or 1) * H * d
        local vals = {}
        for i = 1, B * L * w do
          vals[i] = i % 23 == 0 and special[(i // 23) % #special + 1] or (math.random() - 0.5) * 4
        end
        local base = ember.tensor(vals):reshape(B, L, w):to("bfloat16"):requires_grad_()
        local c, s = tables(L, d, "bfloat16")
        local first = fused and H * d + 1 or 1
        local x = base:narrow(3, first, H * d):reshape(B, L, H, d):transpose(2, 3)
        assert.are.equal(w, x:stride()[3])
        local y = ember._rope(x, c, s)
        local want = composed(x:detach():float(), c:float(), s:float()):to("bfloat16")
        assert.is_true(same(y:float(), want:float()), ("d = %d, fused %s"):format(d, fused))
        -- the backward: the rotation by minus the angles, into the projection's columns
        local gy = ember.randn(B, H, L, d):to("bfloat16")
        y:backward(gy)
        local gx = base.grad:narrow(3, first, H * d):reshape(B, L, H, d):transpose(2, 3)
        assert.is_true(ember.equal(gx, composed(gy:float(), c:float(), -s:float()):to("bfloat16")),
          ("backward, d = %d, fused %s"):format(d, fused))
        if fused then assert.are.equal(0, base.grad:narrow(3, 1, H * d):abs():sum():item()) end
      end
    end
    -- position 0 turns by no angle: denormals come out as they went in (the check above
    -- rounds its reference by the same cast, so it cannot see a rounding that flushes them)
    -- (made by a product, not a cast: the casts round by the same rule)
    local tiny = (ember.tensor({ 1, -3, 0.5, 11 }, { dtype = "bfloat16" }) * 2 ^ -130):expand(16, 4):reshape(1, 2, 32)
    local c, s = tables(2, 32, "bfloat16")
    local y = ember._rope(tiny, c, s)
    assert.are.equal(0, tiny:select(2, 1):eq(0):sum():item())
    assert.is_true(ember.equal(y:select(2, 1), tiny:select(2, 1)))
  end)

  it("nn.MultiHeadAttention{rope = true} runs the kernel: outputs as the composed form, float64", function()
    ember.manual_seed(5)
    local mha = nn.MultiHeadAttention{ d_model = 16, heads = 2, rope = true, dtype = "float64" }
    local x = ember.randn(2, 6, 16, { dtype = "float64" })
    local c, s = tables(6, 8, "float64")
    local q = mha.q_proj(x):reshape(2, 6, 2, 8):transpose(2, 3)
    assert.is_true(compare.max_rel(mha:_rope(q, 0), composed(q, c, s)) < 1e-15)
    -- positions from `first` on: the tables' rows first+1 ...
    local c2, s2 = tables(9, 8, "float64")
    assert.is_true(compare.max_rel(mha:_rope(q, 3), composed(q, c2:narrow(1, 4, 6), s2:narrow(1, 4, 6))) < 1e-15)
  end)

  it("refuses bad input, naming rope", function()
    local c, s = tables(4, 6, "float32")
    local function err(f)
      local ok, msg = pcall(f)
      assert.is_false(ok)
      return tostring(msg)
    end
    assert.matches("rope: input must be %[..., positions, d%] with an even d", err(function() ember._rope(ember.randn(4, 5), c, s) end))
    assert.matches("rope: cos has shape %[4, 3%], expected %[5, 3%]", err(function() ember._rope(ember.randn(2, 5, 6), c, s) end))
    assert.matches("rope: sin is float64 but input is float32", err(function() ember._rope(ember.randn(4, 6), c, s:double()) end))
    assert.matches("rope: cos requires grad", err(function() ember._rope(ember.randn(4, 6), c:clone():requires_grad_(), s) end))
    assert.matches("rope: input must be float32, float64 or bfloat16, got int64", err(function() ember._rope(ember.zeros(4, 6, { dtype = "int64" }), c, s) end))
  end)
end)
