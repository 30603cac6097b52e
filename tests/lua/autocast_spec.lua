-- ember.autocast: products in bfloat16, the rest in float32, float32
-- parameters with float32 gradients, compared with the same model in float32.
--
-- Tolerances: under autocast a product's inputs are rounded to bfloat16
-- (2^-9 relative each) and the product accumulates in float32, so a
-- result is within about 2^-8 of the float32 one, relative to the
-- magnitudes involved; we allow 2^-6 for a layer (products, bias, an
-- activation) and 2^-5 for gradients, which pass through the rounded
-- products twice (forward and backward).
local ember = require "ember"
local nn = require "ember.nn"

local function rel_err(got, want)
  local scale = math.max(want:abs():max():item(), 1e-6)
  return (got:to("float32") - want):abs():max():item() / scale
end

local function model()
  ember.manual_seed(3)
  return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))
end

describe("ember.autocast", function()
  it("runs products in bfloat16 and softmax, norms, losses, reductions in float32", function()
    local a, b = ember.randn(4, 8), ember.randn(8, 3)
    ember.autocast("bfloat16", function()
      assert.are.equal("bfloat16", a:matmul(b).dtype)
      assert.are.equal("bfloat16", ember.bmm(a:unsqueeze(1), b:unsqueeze(1)).dtype)
      local h = a:matmul(b)
      assert.are.equal("float32", h:softmax(2).dtype)
      assert.are.equal("float32", h:log_softmax(2).dtype)
      assert.are.equal("float32", h:sum().dtype)
      assert.are.equal("float32", h:mean(1).dtype)
      assert.are.equal("float32", ember.layer_norm(h, 1).dtype)
      assert.are.equal("float32", ember.cross_entropy(h, ember.tensor({ 1, 2, 3, 1 }, { dtype = "int64" })).dtype)
      assert.are.equal("float32", (h + a:narrow(2, 1, 3)).dtype) -- bf16 with float32 promotes
      assert.are.equal("float64", a:double():matmul(b:double()).dtype) -- float64 is left alone
    end)
    assert.are.equal("float32", a:matmul(b).dtype) -- and it ends with the function
  end)

  it("nn.Linear with a bias returns bfloat16, as torch.autocast's linear, with float32 gradients", function()
    local l = nn.Linear(8, 4)
    local x = ember.randn(3, 8)
    local y = ember.autocast("bfloat16", function() return l(x) end)
    assert.are.equal("bfloat16", y.dtype)
    y:to("float32"):sum():backward()
    assert.are.equal("float32", l.bias.grad.dtype)
    assert.are.equal(3, l.bias.grad:to("float64"):min():item()) -- d sum / d b_j = rows
    assert.are.equal("float32", l(x).dtype) -- and float32 outside
    -- so a Linear can feed a float32 MultiHeadAttention under autocast
    local mha = ember.MultiHeadAttention({d_model = 4, heads = 2})
    local out = ember.autocast("bfloat16", function() return mha(l(x):unsqueeze(1)) end)
    assert.are.equal("bfloat16", out.dtype)
  end)

  it("a <close> scope restores the previous state, also on error, and nests", function()
    do
      local ac <close> = ember.autocast("bfloat16")
      assert.is_true((ember.autocast.enabled()))
      do
        local off <close> = ember.autocast("bfloat16", false)
        assert.is_false((ember.autocast.enabled()))
      end
      assert.is_true((ember.autocast.enabled()))
    end
    assert.is_false((ember.autocast.enabled()))
    local ok = pcall(ember.autocast, "bfloat16", function() error("boom") end)
    assert.is_false(ok)
    assert.is_false((ember.autocast.enabled()))
    local ok2, err = pcall(function() ember.autocast("float64", function() end) end)
    assert.is_false(ok2)
    assert.truthy(tostring(err):find("ember.autocast: dtype float64 is not supported", 1, true), err)
    assert.is_false((ember.autocast.enabled()))
  end)

  it("takes enabled before a function, as torch.autocast(enabled=), and refuses other arguments", function()
    local raises_here = require("tests.lua.helpers.parity").raises_here
    -- (dtype, enabled, fn, ...): fn runs, on or off, and its results come back
    local a, b, c = ember.autocast("bfloat16", false, function(x, y)
      return (ember.autocast.enabled()), x, y
    end, 1, 2)
    assert.are.same({false, 1, 2}, {a, b, c})
    local on, n = ember.autocast("bfloat16", true, function(x) return (ember.autocast.enabled()), x end, 7)
    assert.are.same({true, 7}, {on, n})
    local off = ember.autocast("auto", false, function() return (ember.autocast.enabled()) end)
    assert.is_false(off)
    assert.is_false((ember.autocast.enabled()))
    -- a value that is neither enabled nor a function is refused, not taken
    -- as enabled by a scope no one closes (autocast stayed on for good)
    raises_here(function() ember.autocast("bfloat16", 3) end,
      'ember.autocast: expected a function or enabled (a boolean) after "bfloat16", got number')
    raises_here(function() ember.autocast("bfloat16", "yes") end,
      'ember.autocast: expected a function or enabled (a boolean) after "bfloat16", got string')
    raises_here(function() ember.autocast("bfloat16", true, 5) end,
      'ember.autocast: expected a function after enabled (ember.autocast("bfloat16", true, fn)), got number')
    raises_here(function() ember.autocast(nil, function() end) end,
      'ember.autocast: dtype must be a string such as "bfloat16", got nil')
    assert.is_false((ember.autocast.enabled()))
  end)

  it("forward and gradients match float32, and the gradients are float32", function()
    local x = ember.randn(8, 16)
    local target = ember.tensor({ 1, 2, 3, 4, 5, 1, 2, 3 }, { dtype = "int64" })
    local m32, mbf = model(), model()
    local y32 = m32(x)
    local loss32 = ember.cross_entropy(y32, target)
    loss32:backward()
    local ybf, lossbf = ember.autocast("bfloat16", function()
      local y = mbf(x)
      return y, ember.cross_entropy(y, target)
    end)
    lossbf:backward()
    assert(rel_err(ybf, y32) < 2 ^ -6, "forward error " .. rel_err(ybf, y32))
    assert.are.equal("float32", lossbf.dtype)
    local p32, pbf = m32:parameters(), mbf:parameters()
    assert.are.equal(#p32, #pbf)
    for i = 1, #p32 do
      assert.are.equal("float32", pbf[i].dtype)
      assert.are.equal("float32", pbf[i].grad.dtype)
      local e = rel_err(pbf[i].grad, p32[i].grad)
      assert(e < 2 ^ -5, ("parameter %d: gradient error %.3g"):format(i, e))
    end
  end)
  describe("the cast cache (grad mode off: inference, decoding)", function()
    local nn = require "ember.nn"
    -- the "cast" kernels a call runs
    local function casts(fn)
      local n = 0
      local prof = ember.profile(fn)
      for _, r in ipairs(prof:stats()) do
        if r.name == "cast" then n = n + r.calls end
      end
      return n
    end

    it("casts a parameter once per region, and again after an in-place change", function()
      ember.manual_seed(3)
      local lin = nn.Linear(8, 5)
      local x = ember.randn(2, 8)
      local first, again, after, changed, expect
      ember.autocast("bfloat16", function()
        ember.no_grad(function()
          local y1
          first = casts(function() y1 = lin(x) end)
          local y2
          again = casts(function() y2 = lin(x) end)
          assert.are.same(y1:float():totable(), y2:float():totable())
          lin.weight:copy_(lin.weight * 2) -- in place, inside the region
          after = casts(function() changed = lin(x) end)
        end)
      end)
      -- the same as a fresh region with the changed weight
      ember.autocast("bfloat16", function() ember.no_grad(function() expect = lin(x) end) end)
      assert.are.equal(3, first)  -- the input, the weight and the bias
      assert.are.equal(1, again)  -- only the input: weight and bias come from the cache
      assert.are.equal(2, after)  -- the input and the changed weight
      assert.are.same(expect:float():totable(), changed:float():totable())
    end)

    it("sees an optimizer step taken inside the region", function()
      ember.manual_seed(4)
      local lin = nn.Linear(6, 3)
      local opt = require("ember.optim").SGD(lin:parameters(), { lr = 0.5 })
      local x = ember.randn(4, 6)
      local before, stepped, expect
      ember.autocast("bfloat16", function()
        ember.no_grad(function() before = lin(x) end)
        lin(x):float():sum():backward() -- grad mode on: nothing cached, the cast is differentiable
        opt:step()
        ember.no_grad(function() stepped = lin(x) end)
      end)
      ember.autocast("bfloat16", function() ember.no_grad(function() expect = lin(x) end) end)
      assert.are.equal("float32", lin.weight.grad.dtype)
      assert.are.same(expect:float():totable(), stepped:float():totable())
      assert.are_not.same(before:float():totable(), stepped:float():totable())
    end)

    it("keeps nothing under grad mode, and nothing once the outermost region ends", function()
      ember.manual_seed(5)
      local lin = nn.Linear(256, 256)
      local x = ember.randn(1, 256)
      local n1, n2
      ember.autocast("bfloat16", function()
        n1 = casts(function() lin(x) end)
        n2 = casts(function() lin(x) end)
      end)
      assert.are.equal(3, n1)
      assert.are.equal(3, n2)
      collectgarbage()
      collectgarbage()
      local base = ember.memory_stats().in_use
      ember.autocast("bfloat16", function()
        ember.no_grad(function()
          ember.autocast("bfloat16", function() lin(x) end) -- a nested region ends: the cache stays
          assert.are.equal(1, casts(function() lin(x) end))
        end)
      end)
      collectgarbage()
      collectgarbage()
      -- the bfloat16 weight (128 KiB) was released with the region
      assert.is_true(ember.memory_stats().in_use - base < 64 * 1024,
        ("%d bytes still held"):format(ember.memory_stats().in_use - base))
    end)

    it("ember.generate inside one region casts the weights once and caches K and V in bfloat16", function()
      local generate = require "ember.generate"
      ember.manual_seed(0)
      local model = require("ember.models").Llama { vocab_size = 50, hidden_size = 32, intermediate_size = 64,
        num_hidden_layers = 2, num_attention_heads = 4 }
      model:eval()
      local prompt = ember.tensor({ { 5, 9, 2, 7 } }, { dtype = "int64" })
      local first, again, cache_dtype
      ember.autocast("bfloat16", function()
        ember.no_grad(function()
          first = casts(function() generate.generate(model, prompt, { max_new_tokens = 8 }) end)
          again = casts(function() generate.generate(model, prompt, { max_new_tokens = 8 }) end)
          local cache = {}
          model:decode(prompt, { cache = cache, start = 1 })
          for _, t in pairs(cache[1].self or cache[1]) do
            if ember.is_tensor(t) then cache_dtype = t.dtype end
          end
        end)
      end)
      -- the second call finds at least the 15 matrices (7 a layer and the head) in the cache
      assert.is_true(first - again >= 15, ("%d casts, then %d"):format(first, again))
      assert.are.equal("bfloat16", cache_dtype)
      local _, l32 = generate.generate(model, prompt, { max_new_tokens = 4, return_logits = true })
      local _, lbf = ember.autocast("bfloat16", function()
        return generate.generate(model, prompt, { max_new_tokens = 4, return_logits = true })
      end)
      local err = (l32[1] - lbf[1]:float()):abs():max():item() / l32[1]:abs():max():item()
      assert.is_true(err < 2 ^ -5, "bfloat16 logits off by " .. err)
    end)

    it("ember.autocast.cast: bfloat16 inside a region, the tensor itself outside", function()
      local w = ember.randn(3, 4):requires_grad_()
      assert.are.equal(w, ember.autocast.cast(w))
      local c = ember.autocast("bfloat16", function() return ember.autocast.cast(w) end)
      assert.are.equal("bfloat16", c.dtype)
      c:float():sum():backward()
      assert.are.same(ember.ones(3, 4):totable(), w.grad:totable())
      local d = ember.randn(2, { dtype = "float64" })
      assert.are.equal(d, ember.autocast("bfloat16", function() return ember.autocast.cast(d) end))
      assert.has_error(function() ember.autocast.cast(3) end)
    end)
  end)
end)

describe('ember.autocast("auto")', function()
  local raises_here = require("tests.lua.helpers.parity").raises_here
  local lin = nn.Linear(8, 4)
  local x = ember.randn(3, 8)

  -- Calls the fake step `steps` times through `call` (a call site of its
  -- own: ember.autocast decides once per line of code; not a tail call,
  -- which Lua's stack does not keep), fp32 calls taking
  -- `f` and bf16 calls `b` seconds of the fake clock; returns whether each
  -- ran in bfloat16, the reports and the site's entry in auto_choices().
  local function run(steps, f, b, info, call)
    local now, notes, ran = 0, {}, {}
    ember.autocast._auto_conf = {clock = function() return now end, info = info,
      report = function(s) notes[#notes + 1] = s end}
    local site = debug.getinfo(call, "S")
    site = site.short_src .. ":" .. site.linedefined
    for i = 1, steps do
      local y = call(function()
        ran[i] = (ember.autocast.enabled())
        now = now + (ran[i] and b or f)
        return lin(x)
      end)
      assert.are.equal(ran[i] and "bfloat16" or "float32", y.dtype)
    end
    ember.autocast._auto_conf = nil
    for key, c in pairs(ember.autocast.auto_choices()) do -- "file:line (lin Linear#3)"
      if key == site or key:sub(1, #site + 1) == site .. " " then return ran, notes, c end
    end
    return ran, notes
  end
  local HW = "gemm: onednn brg:avx512_core_bf16; gemv: ..."

  it("times fp32 against bf16 at its first calls and keeps bf16 where it is faster, saying so", function()
    local ran, notes, choice = run(12, 0.010, 0.005, HW, function(fn) local y = ember.autocast("auto", fn); return y end)
    -- one warm-up each, then 3 timed each, alternating; then bf16 for good
    assert.are.same({false, true, false, true, false, true, false, true, true, true, true, true}, ran)
    assert.are.equal("bf16", choice.precision)
    assert.are.equal(2, #notes, table.concat(notes, "\n"))
    assert.truthy(notes[1]:find('ember.autocast("auto") at ', 1, true), notes[1])
    assert.truthy(notes[1]:find("the first 8 calls here time fp32 against bf16", 1, true), notes[1])
    assert.truthy(notes[2]:find(": bf16 (it measured 3 calls each: fp32 10.0 ms, bf16 5.0 ms per call", 1, true),
      notes[2])
    assert.are.equal(notes[2], choice.note)
  end)

  it("keeps fp32 where bf16 is not faster (by 2%), and never changes after", function()
    local ran, notes, choice = run(14, 0.010, 0.0099, HW, function(fn) local y = ember.autocast("auto", fn); return y end)
    assert.are.same({false, true, false, true, false, true, false, true, false, false, false, false, false, false},
      ran)
    assert.are.equal("fp32", choice.precision)
    assert.truthy(notes[2]:find(": fp32 (it measured 3 calls each: fp32 10.0 ms, bf16 9.9 ms", 1, true), notes[2])
  end)

  it("is fp32 at once, measuring nothing, where the CPU has no bfloat16 products in hardware", function()
    local ran, notes, choice = run(3, 0.010, 0.001, "gemm: widened to float32 (oneDNN has no bfloat16 kernel)",
      function(fn) local y = ember.autocast("auto", fn); return y end)
    assert.are.same({false, false, false}, ran)
    assert.are.equal("fp32", choice.precision)
    assert.are.equal(1, #notes)
    assert.truthy(notes[1]:find(": fp32 (no bfloat16 products in hardware", 1, true), notes[1])
  end)

  it("decides per call site", function()
    local now, seen = 0, {}
    ember.autocast._auto_conf = {clock = function() return now end, info = HW, report = function() end}
    -- (a site's time runs from one of its calls to the next, whatever runs
    -- between: two sites in one step measure the same step)
    for _ = 1, 9 do ember.autocast("auto", function() now = now + ((ember.autocast.enabled()) and 0.001 or 0.002) end) end
    for _ = 1, 9 do ember.autocast("auto", function() now = now + ((ember.autocast.enabled()) and 0.004 or 0.002) end) end
    ember.autocast._auto_conf = nil
    for site, c in pairs(ember.autocast.auto_choices()) do
      seen[tostring(c.precision) .. " " .. site:match(":(%d+)")] = true
    end
    local line = debug.getinfo(1, "l").currentline
    assert.truthy(seen["bf16 " .. (line - 6)], "site A")
    assert.truthy(seen["fp32 " .. (line - 5)], "site B")
  end)

  it("decides per model at one call site (a training function given each model in turn)", function()
    local now, notes = 0, {}
    ember.autocast._auto_conf = {clock = function() return now end, info = HW,
      report = function(s) notes[#notes + 1] = s end}
    local small, big = nn.Linear(2, 2), nn.Linear(64, 64)
    local function train(model, steps)
      local bf16 = model == big and 0.001 or 0.004 -- bf16 slower for the small model, faster for the big one
      for _ = 1, steps do
        ember.autocast("auto", function() model:zero_grad(); now = now + ((ember.autocast.enabled()) and bf16 or 0.002) end)
      end
    end
    train(small, 9)
    train(big, 9)
    ember.autocast._auto_conf = nil
    assert.are.equal(4, #notes, table.concat(notes, "\n"))
    local line = debug.getinfo(train, "S").linedefined + 3
    assert.truthy(notes[2]:find((":%d %%(model Linear#%%d+%%): fp32 %%("):format(line)), notes[2])
    assert.truthy(notes[4]:find((":%d %%(model Linear#%%d+%%): bf16 %%("):format(line)), notes[4])
    assert.are_not.equal(notes[2]:match("Linear#(%d+)"), notes[4]:match("Linear#(%d+)"))
  end)

  it("works as a scope, can be turned off, and names a wrong argument at the user's line", function()
    ember.autocast._auto_conf = {info = "gemm: widened to float32", report = function() end}
    do
      local ac <close> = ember.autocast("auto")
      assert.is_false((ember.autocast.enabled()))
    end
    ember.autocast._auto_conf = nil
    ember.autocast("bfloat16", function()
      local off <close> = ember.autocast("auto", false)
      assert.is_false((ember.autocast.enabled()))
    end)
    raises_here(function() ember.autocast("auto", 3) end,
      'ember.autocast: expected a function or enabled (a boolean) after "auto", got number')
  end)
end)

describe('ember.autocast("auto") under ember.distributed', function()
  it("sums the ranks' medians, so that every rank keeps the same", function()
    local was = package.loaded["ember.distributed"]
    local summed = 0
    -- this rank found bf16 faster; the other ranks, summed in, did not
    package.loaded["ember.distributed"] = {is_initialized = function() return true end,
      world_size = function() return 2 end,
      sum_numbers = function(f, b) summed = summed + 1; return f + 0.010, b + 0.030 end}
    local now, notes = 0, {}
    ember.autocast._auto_conf = {clock = function() return now end, info = "gemm: onednn brg:avx512_core_bf16",
      report = function(s) notes[#notes + 1] = s end}
    local ok, err = pcall(function()
      for _ = 1, 10 do ember.autocast("auto", function() now = now + ((ember.autocast.enabled()) and 0.005 or 0.010) end) end
    end)
    package.loaded["ember.distributed"], ember.autocast._auto_conf = was, nil
    assert(ok, err)
    assert.are.equal(1, summed)
    assert.truthy(notes[2]:find(": fp32 (it measured 3 calls each: fp32 20.0 ms, bf16 35.0 ms per call, median, "
      .. "summed over the ranks", 1, true), notes[2])
  end)
end)
