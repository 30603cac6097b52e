-- nn.checkpoint (lua/ember/nn/activation_checkpoint.lua): activation
-- checkpointing. The gradients of a checkpointed model are bitwise those of
-- the same model without checkpoints (dropout on, so the recompute must
-- draw the same masks), the generator ends where the plain run leaves it,
-- the activations are not kept (live bytes), fn really runs again in the
-- backward, several outputs, non-tensor arguments, closures over
-- parameters, nesting, autocast, no_grad, the backward hooks (one pass
-- ends, not two), a float64 gradcheck, and errors
-- at the caller's line. Also ember.get_rng_state / set_rng_state, which it
-- is built on.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"
local raises_here = compare.raises_here

local F64 = { dtype = "float64" }

local bitwise_equal = compare.bitwise_equal

-- A stack of Transformer encoder layers with dropout, and a head.
local function make_model(seed)
  ember.manual_seed(seed)
  local layers = nn.ModuleList()
  for _ = 1, 3 do
    layers:append(nn.TransformerEncoderLayer(16, 2, { dim_feedforward = 32, dropout = 0.2, norm_first = true }))
  end
  local head = nn.Linear(16, 5)
  return layers, head
end

-- loss, input gradient, parameter gradients and the next draw of the
-- generator after one training step, with or without checkpoints.
local function step(layers, head, x0, mask, use_ckpt)
  ember.manual_seed(99)
  local x = x0:detach():requires_grad_()
  local h = x
  for _, layer in ipairs(layers) do
    if use_ckpt then
      h = nn.checkpoint(layer, h, { key_padding_mask = mask })
    else
      h = layer(h, { key_padding_mask = mask })
    end
  end
  local loss = head(h):tanh():sum()
  loss:backward()
  local grads = {}
  for n, p in pairs(layers:named_parameters()) do grads["layers." .. n] = p.grad end
  for n, p in pairs(head:named_parameters()) do grads["head." .. n] = p.grad end
  local after = ember.rand(4)
  layers:zero_grad()
  head:zero_grad()
  return loss, x.grad, grads, after
end

describe("ember.get_rng_state / set_rng_state", function()
  it("replays the same draws and leaves the seed as it was", function()
    ember.manual_seed(42)
    local _ = ember.rand(5)
    local s = ember.get_rng_state()
    assert.are.equal(42, s.seed)
    assert.are.equal("number", math.type(s.offset) and "number")
    local a = ember.randn(7)
    local d1 = ember.dropout(ember.ones(50), 0.5, true)
    ember.set_rng_state(s)
    local b = ember.randn(7)
    local d2 = ember.dropout(ember.ones(50), 0.5, true)
    bitwise_equal(a, b, "randn after set_rng_state")
    bitwise_equal(d1, d2, "dropout after set_rng_state")
    assert.are.equal(42, ember.initial_seed())
    -- and it can fail: without setting it back the draws differ
    assert.is_true((ember.randn(7) - a):abs():max():item() > 0)
  end)

  it("refuses what is not a state", function()
    raises_here(function() ember.set_rng_state(3) end, "ember.set_rng_state: expected the table get_rng_state returns")
    raises_here(function() ember.set_rng_state({ seed = 1 }) end, "ember.set_rng_state: state.offset must be an integer")
  end)
end)

describe("nn.checkpoint", function()
  it("gives bitwise the gradients of the run without checkpoints, dropout on", function()
    local layers, head = make_model(7)
    layers:train()
    ember.manual_seed(5)
    local x0 = ember.randn(2, 6, 16)
    local mask = ember.tensor({ { false, false, false, false, false, false }, { false, false, false, false, true, true } })
    local l1, gx1, g1, r1 = step(layers, head, x0, mask, false)
    local l2, gx2, g2, r2 = step(layers, head, x0, mask, true)
    bitwise_equal(l1, l2, "loss")
    bitwise_equal(gx1, gx2, "input gradient")
    local n = 0
    for k, g in pairs(g1) do
      n = n + 1
      bitwise_equal(g, g2[k], "grad " .. k)
    end
    assert.is_true(n >= 3 * 12 + 2)
    -- the generator continues where the plain run leaves it
    bitwise_equal(r1, r2, "the next draw after the step")
  end)

  it("draws the same dropout mask in the recompute (the gradient is that mask)", function()
    ember.manual_seed(3)
    local x = ember.ones({ 400 }, F64):requires_grad_()
    local calls = 0
    local y = nn.checkpoint(function(a)
      calls = calls + 1
      return ember.dropout(a, 0.5, true)
    end, x)
    assert.are.equal(1, calls)
    y:sum():backward()
    assert.are.equal(2, calls) -- recomputed in the backward
    -- dropout's gradient is its mask * 2: zero exactly where y is zero
    bitwise_equal(x.grad, y:detach(), "gradient vs the forward's mask")
    local kept = y:ne(0):double():sum():item()
    assert.is_true(kept > 100 and kept < 300)
  end)

  it("does not keep fn's activations", function()
    local d = 256
    local mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    local x = ember.randn(64, d):requires_grad_()
    collectgarbage(); collectgarbage()
    local base = ember.live_bytes()
    local y_plain = mlp(x)
    collectgarbage(); collectgarbage()
    local plain = ember.live_bytes() - base
    y_plain = nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    base = ember.live_bytes()
    local y_ckpt = nn.checkpoint(mlp, x)
    collectgarbage(); collectgarbage()
    local ckpt = ember.live_bytes() - base
    -- plain keeps 4 activations of [64, 1024] (and the output); checkpointed only the output
    assert(ckpt < plain / 3, ("checkpointed forward keeps %d bytes, plain %d"):format(ckpt, plain))
    y_ckpt:sum():backward()
    assert.is_not_nil(mlp[1].weight.grad)
  end)

  it("returns several outputs as fn does, with their gradients", function()
    local w = ember.randn({ 3, 3 }, F64):requires_grad_()
    local function f(a) return a:matmul(w), (a * 2):sin():sum(2) end
    local x = ember.randn({ 4, 3 }, F64):requires_grad_()
    local p, q = f(x)
    ;(p:sum() + (q * q):sum()):backward()
    local gx, gw = x.grad, w.grad
    x.grad, w.grad = nil, nil
    local p2, q2 = nn.checkpoint(f, x)
    assert.are.same(p.shape, p2.shape)
    assert.are.same(q.shape, q2.shape)
    ;(p2:sum() + (q2 * q2):sum()):backward()
    bitwise_equal(gx, x.grad, "x")
    bitwise_equal(gw, w.grad, "w")
  end)

  it("takes a module that returns trailing nils (MultiHeadAttention's (out, nil)), as PyTorch drops None", function()
    ember.manual_seed(7)
    local mha = nn.MultiHeadAttention { d_model = 8, heads = 2, dtype = "float64" }
    local x = ember.randn({ 2, 5, 8 }, F64):requires_grad_()
    local y = mha(x)
    y:sum():backward()
    local gx = x.grad
    x.grad = nil
    local y2, extra = nn.checkpoint(mha, x)
    assert.is_nil(extra)
    y2:sum():backward()
    bitwise_equal(y, y2, "out")
    bitwise_equal(gx, x.grad, "x")
  end)

  it("passes parameters' gradients when no argument requires grad", function()
    local lin = nn.Linear(3, 2)
    local y = nn.checkpoint(lin, ember.randn(4, 3))
    assert.is_true(y.requires_grad)
    y:sum():backward()
    assert.is_not_nil(lin.weight.grad)
    assert.is_not_nil(lin.bias.grad)
    -- nothing to differentiate: the backward runs and gives nothing
    local z = nn.checkpoint(function(a) return a * 2 end, ember.randn(3))
    z:sum():backward()
  end)

  it("nests", function()
    local a, b = nn.Linear(4, 4, F64), nn.Linear(4, 4, F64)
    local x = ember.randn({ 2, 4 }, F64):requires_grad_()
    local plain = b(a(x):tanh()):sum()
    plain:backward()
    local gx, ga = x.grad, a.weight.grad
    x.grad = nil; a:zero_grad(); b:zero_grad()
    local y = nn.checkpoint(function(h) return b(nn.checkpoint(function(u) return a(u):tanh() end, h)) end, x)
    y:sum():backward()
    bitwise_equal(gx, x.grad, "x")
    bitwise_equal(ga, a.weight.grad, "inner weight")
  end)

  it("recomputes under the forward's autocast state", function()
    local lin = nn.Linear(8, 8)
    local x = ember.randn(4, 8)
    local function run(ck)
      lin:zero_grad()
      local y = ember.autocast("bfloat16", function()
        return ck and nn.checkpoint(lin, x) or lin(x)
      end)
      assert.are.equal("bfloat16", y.dtype)
      y:float():sum():backward() -- outside autocast
      return lin.weight.grad
    end
    bitwise_equal(run(false), run(true), "weight gradient under autocast")
  end)

  it("is fn(...) itself under no_grad", function()
    local calls = 0
    local x = ember.randn(3):requires_grad_()
    local y = ember.no_grad(function()
      return nn.checkpoint(function(a) calls = calls + 1; return a * 2 end, x)
    end)
    assert.are.equal(1, calls)
    assert.is_false(y.requires_grad)
  end)

  it("ends one backward pass for the hooks (what DistributedDataParallel runs on)", function()
    -- the recompute's backward runs inside the outer one; only the outer may
    -- run the backward-end hooks, and a parameter's ready hook sees its final gradient
    local a, b = nn.Linear(4, 4, F64), nn.Linear(4, 1, F64)
    local ends, ready = 0, {}
    local h1 = ember.register_backward_end_hook(function() ends = ends + 1 end)
    local h2 = a.weight:register_grad_ready_hook(function(t) ready[#ready + 1] = t.grad:clone() end)
    local ok, err = pcall(function()
      local x = ember.randn({ 3, 4 }, F64):requires_grad_()
      local y = b(nn.checkpoint(function(u) return nn.checkpoint(a, u):tanh() end, x))
      y:sum():backward()
    end)
    h1.remove()
    h2.remove()
    assert(ok, err)
    assert.are.equal(1, ends)
    assert.are.equal(1, #ready)
    bitwise_equal(ready[1], a.weight.grad, "the gradient the ready hook saw")
  end)

  it("float64 gradcheck through a checkpointed function", function()
    ember.manual_seed(1)
    gradcheck.check(function(x, w)
      return nn.checkpoint(function(a) return a:matmul(w):tanh() * a:sum(2, true) end, x)
    end, { ember.randn({ 3, 4 }, F64), ember.randn({ 4, 2 }, F64) }, { name = "checkpoint" })
  end)

  it("errors name nn.checkpoint at the caller's line", function()
    raises_here(function() local _ = nn.checkpoint(3, ember.ones(2)) end,
      "nn.checkpoint: fn must be a function or a module, got number")
    local x = ember.ones(2):requires_grad_()
    raises_here(function() local _ = nn.checkpoint(function() return 1 end, x) end,
      "nn.checkpoint: fn's result 1 is a number; fn must return tensors only")
    raises_here(function() local _ = nn.checkpoint(function(a) return a, a:double() end, x) end,
      "nn.checkpoint: fn's results must share one dtype and device")
    raises_here(function() local _ = nn.checkpoint(function() end, x) end, "nn.checkpoint: fn returned nothing")
  end)
end)

describe("checkpoint = true on the Transformer layers", function()
  local nn_ = require "ember.nn"
  local function run(make, ck, with_memory)
    ember.manual_seed(31)
    local layer = make(ck)
    local x = ember.randn(2, 12, 16):requires_grad_()
    local mem = with_memory and ember.randn(2, 7, 16):requires_grad_() or nil
    ember.manual_seed(32)
    local y = with_memory and layer(x, mem) or layer(x)
    ;(y * y):sum():backward()
    local g = { y:detach(), x.grad }
    if mem then g[#g + 1] = mem.grad end
    for _, p in ipairs(layer:parameters()) do g[#g + 1] = p.grad end
    return g
  end
  local makers = {
    encoder = function(ck) return nn_.TransformerEncoderLayer(16, 2, { dim_feedforward = 24, dropout = 0.2, checkpoint = ck }) end,
    decoder = function(ck) return nn_.TransformerDecoderLayer(16, 2, { dim_feedforward = 24, dropout = 0.2, checkpoint = ck }) end,
  }
  for name, make in pairs(makers) do
    it(name .. ": outputs and every gradient bitwise equal to the plain layer, dropout on", function()
      local a, b = run(make, false, name == "decoder"), run(make, true, name == "decoder")
      assert.are.equal(#a, #b)
      for i = 1, #a do assert.are.equal(0, (a[i] - b[i]):abs():max():item(), "tensor " .. i) end
    end)
  end
  it("keeps only the layer's input: far fewer live bytes after the forward", function()
    local function kept(ck)
      ember.manual_seed(1)
      local layer = nn_.TransformerEncoderLayer(64, 4, { dim_feedforward = 256, dropout = 0.1, checkpoint = ck })
      local x = ember.randn(4, 128, 64):requires_grad_()
      collectgarbage(); collectgarbage()
      local base = ember.live_bytes()
      local y = layer(x)
      collectgarbage(); collectgarbage() -- the forward's temporaries go; what the graph keeps stays
      local n = ember.live_bytes() - base
      assert(y)
      return n
    end
    local plain, ck = kept(false), kept(true)
    assert(ck < 0.3 * plain, ("checkpointed %d bytes vs plain %d"):format(ck, plain))
  end)

  it("prints it", function()
    assert.matches("checkpoint=true", tostring(nn_.TransformerEncoderLayer(8, 2, { checkpoint = true })))
  end)
end)

-- Selective recompute: the first forward keeps each fused attention call's
-- out and lse, and the recompute takes them back instead of running the
-- attention kernel again (core/src/attention_reuse.c). The forward kernel's
-- span is "attention"; its backward's "attention_grad".
describe("nn.checkpoint keeps the fused attention's results for the recompute", function()
  local AC = require "ember.nn.activation_checkpoint"

  -- fn(...) with AC.reuse_attention set to `on`, set back even on errors
  local function with_reuse(on, fn, ...)
    local was = AC.reuse_attention
    AC.reuse_attention = on
    local r = table.pack(pcall(fn, ...))
    AC.reuse_attention = was
    assert(r[1], r[2])
    return table.unpack(r, 2, r.n)
  end

  -- the attention forward kernel's calls in each phase of fn's run
  local function kernel_calls(fn)
    local n = { forward = 0, backward = 0 }
    local prof = ember.profile(fn)
    for _, r in ipairs(prof:stats()) do
      if r.name == "attention" then n[r.phase] = n[r.phase] + r.calls end
    end
    return n
  end

  -- a causal stack with dropout and key padding: every gradient of a step
  local function stack_step(ck, opts)
    opts = opts or {}
    ember.manual_seed(5)
    local layers = {}
    for i = 1, 3 do
      layers[i] = nn.TransformerEncoderLayer(16, 2, { dim_feedforward = 24, dropout = 0.2, norm_first = true })
    end
    local x = ember.randn(2, 9, 16):requires_grad_()
    local pad = ember.tensor({ { false, false, false, false, false, false, false, true, true },
      { false, false, false, false, false, false, false, false, false } })
    ember.manual_seed(6)
    local h = x
    local calls = kernel_calls(function()
      local function body(u)
        for i = 1, 3 do
          local fi = function(v) return layers[i](v, { causal = true, key_padding_mask = pad }) end
          if ck == "nested" then u = nn.checkpoint(fi, u) else u = fi(u) end
        end
        return u
      end
      local function run()
        if ck then h = nn.checkpoint(body, h) else h = body(h) end
        ;(h * h):sum():backward()
      end
      if opts.autocast then ember.autocast("bfloat16", run) else run() end
    end)
    local g = { h:detach():float(), x.grad }
    for i = 1, 3 do
      for _, p in ipairs(layers[i]:parameters()) do g[#g + 1] = p.grad end
    end
    return g, calls
  end

  local function same_grads(a, b, what)
    assert.are.equal(#a, #b)
    for i = 1, #a do bitwise_equal(a[i], b[i], ("%s, tensor %d"):format(what, i)) end
  end

  it("runs no attention forward kernel in the backward; gradients bitwise those without checkpoints", function()
    local plain, c0 = stack_step(false)
    local reused, c1 = with_reuse(true, stack_step, true)
    local full, c2 = with_reuse(false, stack_step, true)
    same_grads(plain, reused, "kept attention results")
    same_grads(plain, full, "attention recomputed")
    assert.are.same({ forward = 3, backward = 0 }, c0)
    assert.are.same({ forward = 3, backward = 0 }, c1)
    -- and the test can tell: recomputing runs the kernel again in the backward
    assert.are.same({ forward = 3, backward = 3 }, c2)
    assert.are.equal(0, ember._attention_tapes())
  end)

  it("nests: an inner checkpoint records while the outer one replays", function()
    local plain = stack_step(false)
    local nested, calls = with_reuse(true, stack_step, "nested")
    same_grads(plain, nested, "nested checkpoints")
    assert.are.same({ forward = 3, backward = 0 }, calls)
    assert.are.equal(0, ember._attention_tapes())
  end)

  it("under autocast (bfloat16 attention)", function()
    local plain = stack_step(false, { autocast = true })
    local reused, calls = with_reuse(true, stack_step, true, { autocast = true })
    same_grads(plain, reused, "autocast")
    assert.are.same({ forward = 3, backward = 0 }, calls)
  end)

  it("computes again when the kept output was written in place", function()
    -- fn returns the attention output itself: the checkpoint's output is
    -- its storage, which the caller then changes
    ember.manual_seed(8)
    local q, k, v = ember.randn(1, 2, 6, 4), ember.randn(1, 2, 6, 4), ember.randn(1, 2, 6, 4)
    local w = ember.randn(1, 2, 6, 4)
    local function grads(ck)
      local a, b, c = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
      local calls = kernel_calls(function()
        local y
        if ck then
          y = nn.checkpoint(ember.scaled_dot_product_attention, a, b, c)
          ember.no_grad(function() y:add_(1) end)
        else
          y = ember.scaled_dot_product_attention(a, b, c)
        end
        ;(y * w):sum():backward()
      end)
      return { a.grad, b.grad, c.grad }, calls
    end
    local plain = grads(false)
    local ck, calls = with_reuse(true, grads, true)
    same_grads(plain, ck, "output written after the forward")
    assert.are.same({ forward = 1, backward = 1 }, calls)
  end)

  it("hands back only the same call: values decide, not the order", function()
    -- a fn whose recompute makes its two same-shaped calls in the other
    -- order: the first call of the recompute is the second of the forward
    ember.manual_seed(9)
    local q, k, v = ember.randn(1, 2, 6, 4), ember.randn(1, 2, 6, 4), ember.randn(1, 2, 6, 4)
    local sdpa = ember.scaled_dot_product_attention
    local function grads(ck)
      local a, b, c = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
      local runs = 0
      local function fn(x, y, z)
        runs = runs + 1
        local first, second
        if runs == 1 then
          first = sdpa(x, y, z); second = sdpa(y, x, z)
        else
          second = sdpa(y, x, z); first = sdpa(x, y, z)
        end
        return first * 2 + second
      end
      local calls = kernel_calls(function()
        local out = ck and nn.checkpoint(fn, a, b, c) or fn(a, b, c)
        out:sum():backward()
      end)
      return { a.grad, b.grad, c.grad }, calls
    end
    local plain = grads(false)
    local ck, calls = with_reuse(true, grads, true)
    same_grads(plain, ck, "calls in another order")
    -- the recompute's first call takes the forward's second; its second computes
    assert.are.same({ forward = 2, backward = 1 }, calls)
  end)

  for _, name in ipairs({ "relpos", "local", "sinks", "softcap", "alibi_lua" }) do
    it(name .. " attention (tables, programs, captures): kept and bitwise equal", function()
      local function step(ck)
        ember.manual_seed(3)
        local mha = nn.MultiHeadAttention(16, 2, { attention = name, dropout = 0.1 })
        local x = ember.randn(2, 9, 16):requires_grad_()
        ember.manual_seed(4)
        local calls = kernel_calls(function()
          local function fn(h) return (mha(h, { causal = true })) end
          local y = ck and nn.checkpoint(fn, x) or fn(x)
          ;(y * y):sum():backward()
        end)
        local g = { x.grad }
        for _, p in ipairs(mha:parameters()) do g[#g + 1] = p.grad end
        return g, calls
      end
      local plain = step(false)
      local ck, calls = with_reuse(true, step, true)
      same_grads(plain, ck, name)
      assert.are.same({ forward = 1, backward = 0 }, calls)
    end)
  end

  it("leaves no recording or replay behind when fn raises", function()
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 })
    local x = ember.randn(1, 5, 8):requires_grad_()
    -- in the forward, after an attention call
    local ok = pcall(nn.checkpoint, function(h) local _ = layer(h); error("boom") end, x)
    assert.is_false(ok)
    assert.are.equal(0, ember._attention_tapes())
    -- in the recompute only
    local runs = 0
    local y = nn.checkpoint(function(h)
      runs = runs + 1
      local out = layer(h)
      if runs == 2 then error("boom in the recompute") end
      return out
    end, x)
    local ok2, err = pcall(function() y:sum():backward() end)
    assert.is_false(ok2)
    assert.matches("boom in the recompute", tostring(err))
    assert.are.equal(0, ember._attention_tapes())
    -- and a later checkpoint works as before
    local y2 = nn.checkpoint(layer, x)
    y2:sum():backward()
    assert.are.equal(0, ember._attention_tapes())
  end)
end)

describe("nn.checkpoint_sequential", function()
  -- four modules with dropout; the gradients of running them in segments
  -- must be those of running them plainly, bit for bit
  local function chain(seed)
    ember.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.3), nn.GELU(), nn.Linear(16, 8))
  end
  local function grads(net, segments)
    ember.manual_seed(5)
    local x = ember.randn(4, 8, { requires_grad = true })
    local y = segments and nn.checkpoint_sequential(net, segments, x) or net(x)
    y:square():sum():backward()
    local g = { x = x.grad, next = ember.rand(3) }
    for name, p in pairs(net:named_parameters()) do g[name] = p.grad end
    net:zero_grad()
    return y, g
  end

  it("gives the plain run's outputs and gradients, bitwise, for every segment count", function()
    local net = chain(1)
    local y0, g0 = grads(net)
    for segments = 1, 4 do
      local y, g = grads(net, segments)
      bitwise_equal(y, y0, segments .. " segments: output")
      for k, v in pairs(g0) do bitwise_equal(g[k], v, segments .. " segments: " .. k) end
    end
  end)

  it("checkpoints all parts but the last, as PyTorch (#fns // segments each)", function()
    local calls = {}
    local fns = {}
    for i = 1, 5 do
      calls[i] = 0
      local lin = nn.Linear(4, 4)
      fns[i] = function(h) calls[i] = calls[i] + 1; return lin(h) end
    end
    local function count(segments)
      for i = 1, 5 do calls[i] = 0 end
      local x = ember.randn(2, 4, { requires_grad = true })
      nn.checkpoint_sequential(fns, segments, x):sum():backward()
      return table.concat(calls, ",")
    end
    -- a checkpointed function runs twice (forward, then the backward's recompute)
    assert.are.equal("1,1,1,1,1", count(1))
    assert.are.equal("2,2,1,1,1", count(2)) -- parts {1,2} and {3,4,5}
    assert.are.equal("2,2,1,1,1", count(3)) -- {1}, {2}, then {3,4,5} plainly
    assert.are.equal("2,2,2,2,1", count(5))
  end)

  it("names itself and what was wrong, at the caller's line", function()
    local net = chain(1)
    local x = ember.randn(4, 8)
    raises_here(function() nn.checkpoint_sequential(net, 0, x) end, "nn.checkpoint_sequential: segments must be an integer from 1 to 4")
    raises_here(function() nn.checkpoint_sequential(net, 5, x) end, "from 1 to 4")
    raises_here(function() nn.checkpoint_sequential({ net, 3 }, 1, x) end, "functions[2] must be a module or a function, got number")
    raises_here(function() nn.checkpoint_sequential("net", 1, x) end, "functions must be an nn.Sequential")
    raises_here(function() nn.checkpoint_sequential({}, 1, x) end, "no functions to run")
  end)
end)
