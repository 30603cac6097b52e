-- Attention variants written in Lua (ember.attention_variant, lua/ember/variant.lua):
-- every shipped Lua variant (plugins/flex) on the fused CPU kernel against its
-- composed reference (the same traced functions evaluated densely by core ops and
-- autograd): out, dq, dk, dv and the tables' gradients to 1e-10 in float64, and
-- within the documented bound in float32; float64 gradchecks of the fused route;
-- the block map skips; bad input named at the user's line.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"

local function randn(shape, dtype)
  return ember.randn(shape, { dtype = dtype or "float64" })
end

-- Runs att on q, k, v both ways; returns the largest difference of out and
-- of every gradient (q, k, v and the module's parameters).
local function fused_vs_composed(att, q, k, v, opts)
  local ps = att:parameters()
  local function run(kernel)
    local o = {}
    for a, b in pairs(opts or {}) do o[a] = b end
    o.kernel = kernel
    local qq, kk, vv = q:detach():requires_grad_(), k:detach():requires_grad_(), v:detach():requires_grad_()
    for _, p in ipairs(ps) do p.grad = nil end
    local before = ember.attention_routes()
    local out = att(qq, kk, vv, o)
    local after = ember.attention_routes()
    local w = ember.randn(out.shape, { dtype = out.dtype })
    ;(out:double() * w:double()):sum():backward()
    local g = { out, qq.grad, kk.grad, vv.grad }
    for _, p in ipairs(ps) do g[#g + 1] = p.grad and p.grad:clone() or ember.zeros_like(p) end
    return g, after.fused - before.fused
  end
  ember.manual_seed(11)
  local a, fused = run(nil)
  ember.manual_seed(11)
  local b = run("composed")
  local err = 0
  for i = 1, #a do
    local d = (a[i]:double() - b[i]:double()):abs():max():item() / math.max(1, b[i]:double():abs():max():item())
    if d ~= d then return math.huge end -- a NaN on either route (math.max would drop it)
    err = math.max(err, d)
  end
  return err, fused
end

local function qkv(B, H, Lq, Lk, d, dtype)
  return randn({ B, H, Lq, d }, dtype), randn({ B, H, Lk, d }, dtype), randn({ B, H, Lk, d }, dtype)
end

local doc_ids = require "tests.lua.helpers.doc_ids" -- [B, L] ids of documents of the given lengths
local variant_mod = require "ember.variant"

-- Each shipped variant with options, call options and per-call inputs.
local function cases(B, L)
  return {
    { "softcap", { cap = 2.5 }, { causal = true } },
    { "softcap", { cap = 0.7 }, {} },
    { "document", {}, { causal = true }, { doc = doc_ids(B, L, { 37, 90, 11 }) } },
    { "sliding_sinks", { window_left = 20, window_right = 5, sinks = 3 }, {} },
    { "sliding_sinks", { window_left = 33, window_right = 0, sinks = 1 }, { causal = true } },
    { "prefix_lm", {}, {}, { prefix = ember.tensor({ 17, 60 }, { dtype = "int64" }):narrow(1, 1, B) } },
    { "sinks", {}, { causal = true } },
    { "example_lua", { max_distance = 9 }, {} },
    { "alibi_lua", {}, { causal = true } },
    { "window_lua", { window_left = 16, window_right = 16 }, {} },
    { "t5_lua", { num_buckets = 16, max_distance = 40 }, { causal = true } },
  }
end

local function make(name, options, H, d, dtype)
  local spec = { attention = name, heads = H, head_dim = d, dtype = dtype }
  for k, v in pairs(options) do spec[k] = v end
  local att = ember.Attention(spec)
  -- nonzero tables so that their terms and gradients matter
  for _, p in ipairs(att:parameters()) do ember.no_grad(function() p:copy_(ember.randn(p.shape, { dtype = p.dtype }) * 0.5) end) end
  return att
end

describe("Lua attention variants: fused == composed", function()
  for _, c in ipairs(cases(2, 150)) do
    it(c[1] .. " in float64 to 1e-10, on the fused route", function()
      local att = make(c[1], c[2], 2, 8, "float64")
      local q, k, v = qkv(2, 2, 150, 150, 8)
      local o = {}
      for a, b in pairs(c[3]) do o[a] = b end
      o.variant_inputs = c[4]
      local err, fused = fused_vs_composed(att, q, k, v, o)
      assert.are.equal(1, fused, "the call must take the fused kernel")
      assert(err < 1e-10, ("%s: max difference %.3g"):format(c[1], err))
    end)
  end

  for _, c in ipairs(cases(2, 150)) do
    it(c[1] .. " in float32 within 2e-5 (relative to the largest value)", function()
      local att = make(c[1], c[2], 2, 16, "float32")
      local q, k, v = qkv(2, 2, 150, 150, 16, "float32")
      local o = {}
      for a, b in pairs(c[3]) do o[a] = b end
      o.variant_inputs = c[4]
      local err = fused_vs_composed(att, q, k, v, o)
      assert(err < 2e-5, ("%s: float32 max difference %.3g"):format(c[1], err))
    end)
  end

  -- a decoding step's 1-2 query rows take the CPU kernel's rows path in
  -- float32 (cpu_tile_rows: q.K^T and P.V from K's and V's rows), the full
  -- pass the packed tiles; the score and mask programs run on the same tiles
  for _, c in ipairs(cases(2, 150)) do
    it(c[1] .. " in float32: the last 1-4 query rows alone == the full pass's (bottom-right), forward and backward", function()
      local att = make(c[1], c[2], 2, 20, "float32") -- head dim 20: lane tails
      local q, k, v = qkv(2, 2, 150, 150, 20, "float32")
      local o = {}
      for a, b in pairs(c[3]) do o[a] = b end
      o.variant_inputs = c[4]
      local full = att(q, k, v, o)
      for n = 1, 4 do
        local part = att(q:narrow(3, 151 - n, n), k, v, o)
        local d = (part - full:narrow(3, 151 - n, n)):abs():max():item() / math.max(1, full:abs():max():item())
        assert(d < 2e-5, ("%s, %d rows: max difference %.3g"):format(c[1], n, d))
      end
      local err, fused = fused_vs_composed(att, q:narrow(3, 149, 2), k, v, o)
      assert.are.equal(1, fused, "the call must take the fused kernel")
      assert(err < 2e-5, ("%s: 2 rows, fused vs composed %.3g"):format(c[1], err))
    end)
  end

  it("cross-attention and a KV-cached step see bottom-right positions", function()
    local att = make("sliding_sinks", { window_left = 7, window_right = 0, sinks = 2 }, 2, 8, "float64")
    local q, k, v = qkv(1, 2, 90, 90, 8)
    local full = att(q, k, v, { causal = true })
    local last = att(q:narrow(3, 81, 10), k, v, { causal = true })
    assert((full:narrow(3, 81, 10) - last):abs():max():item() < 1e-12)
    local err = fused_vs_composed(att, q:narrow(3, 1, 30), k, v, {})
    assert(err < 1e-10)
  end)

  it("under bfloat16 autocast the fused route stays close to float32", function()
    local att = make("softcap", { cap = 3 }, 2, 16, "float32")
    local q, k, v = qkv(2, 2, 64, 64, 16, "float32")
    local ref = att(q, k, v, { causal = true })
    local low = ember.autocast("bfloat16", function() return att(q, k, v, { causal = true }) end)
    assert((low:float() - ref):abs():max():item() < 0.1)
  end)
end)

describe("Lua attention variants: gradients", function()
  for _, name in ipairs { "softcap", "example_lua", "sinks", "document" } do
    it(name .. ": float64 gradcheck of the fused route (q, k, v and tables)", function()
      ember.manual_seed(3)
      local opts = name == "softcap" and { cap = 1.5 } or name == "example_lua" and { max_distance = 3 } or {}
      local att = make(name, opts, 2, 4, "float64")
      local q, k, v = qkv(1, 2, 9, 9, 4)
      local inputs = name == "document" and { doc = doc_ids(1, 9, { 4, 5 }) } or nil
      local ps = att:parameters()
      local list = { q, k, v }
      for _, p in ipairs(ps) do list[#list + 1] = p end
      -- the tables are inputs too: the checker perturbs the module's own parameters in place
      gradcheck.check(function(qq, kk, vv)
        return att(qq, kk, vv, { causal = name ~= "document", variant_inputs = inputs })
      end, list, { name = name })
    end)
  end

  it("a learned table trains: its gradient is the composed one", function()
    local att = make("example_lua", { max_distance = 4 }, 2, 8, "float64")
    local q, k, v = qkv(2, 2, 40, 40, 8)
    local err = fused_vs_composed(att, q, k, v, { causal = true })
    assert(err < 1e-10)
    local p = att:parameters()[1]
    assert(p.grad and p.grad:abs():max():item() > 0, "the table got no gradient")
  end)
end)

describe("Lua attention variants: the block map", function()
  it("a document mask skips tiles across documents (same result, less time)", function()
    local B, L = 1, 1024
    local att = ember.Attention { attention = "document", heads = 2, head_dim = 16 }
    local std = ember.Attention { attention = "standard", heads = 2, head_dim = 16 }
    local q, k, v = qkv(B, 2, L, L, 16, "float32")
    local ids = doc_ids(B, L, { 128 })
    local function time(f)
      f()
      local t0 = os.clock()
      for _ = 1, 3 do f() end
      return os.clock() - t0
    end
    local td = time(function() return att(q, k, v, { variant_inputs = { doc = ids } }) end)
    local ts = time(function() return std(q, k, v) end)
    assert(td < ts, ("document mask %.3fs vs standard %.3fs: tiles were not skipped"):format(td, ts))
  end)
end)

describe("Lua re-expressions of the declared variants", function()
  for _, c in ipairs {
    { "relpos", { mode = "t5", num_buckets = 16, max_distance = 40, bidirectional = true }, "t5_lua", { num_buckets = 16, max_distance = 40, bidirectional = true } },
    { "relpos", { mode = "t5", num_buckets = 16, max_distance = 40, bidirectional = false }, "t5_lua", { num_buckets = 16, max_distance = 40, bidirectional = false } },
    { "relpos", { mode = "alibi" }, "alibi_lua", {} },
    { "local", { window_left = 11, window_right = 4 }, "window_lua", { window_left = 11, window_right = 4 } },
  } do
    it(c[3] .. " equals the built-in " .. c[1] .. " in float64, tables and gradients too", function()
      local a, b = make(c[1], c[2], 2, 8, "float64"), make(c[3], c[4], 2, 8, "float64")
      local pa, pb = a:parameters()[1], b:parameters()[1]
      if pa then ember.no_grad(function() pb:copy_(pa) end) end
      local q, k, v = qkv(2, 2, 120, 120, 8)
      local o = { causal = true }
      local qa, qb = q:detach():requires_grad_(), q:detach():requires_grad_()
      local oa, ob = a(qa, k, v, o), b(qb, k, v, o)
      assert((oa - ob):abs():max():item() < 1e-12)
      oa:sum():backward(); ob:sum():backward()
      assert((qa.grad - qb.grad):abs():max():item() < 1e-12)
      if pa then assert((pa.grad - pb.grad):abs():max():item() < 1e-12) end
    end)
  end
end)

describe("Lua attention variants: the block map cache", function()
  it("new document ids of the same shape get their own map (no stale cache)", function()
    local att = ember.Attention { attention = "document", heads = 2, head_dim = 8, dtype = "float64" }
    local q, k, v = qkv(1, 2, 96, 96, 8)
    for _, lens in ipairs { { 16 }, { 48 }, { 16 }, { 5, 80, 11 } } do
      local ids = doc_ids(1, 96, lens)
      local a = att(q, k, v, { variant_inputs = { doc = ids } })
      local b = att(q, k, v, { variant_inputs = { doc = ids }, kernel = "composed" })
      assert((a - b):abs():max():item() < 1e-12, "documents of " .. table.concat(lens, ","))
    end
  end)
end)

describe("Lua attention variants: definitions and errors", function()
  it("a variant defined at the prompt is listed and used by name from MultiHeadAttention", function()
    ember.attention_variant { name = "spec_scaled", options = { { name = "t", type = "float", default = 2 } },
      score = function(s, b, h, q, k, ctx) return s / ctx.options.t end }
    local found = false
    for _, v in ipairs(ember.attention_variants()) do if v.name == "spec_scaled" then found = true end end
    assert(found)
    local mha = nn.MultiHeadAttention(16, 2, { attention = "spec_scaled", t = 4 })
    local y = mha(ember.randn(2, 5, 16))
    assert.are.same({ 2, 5, 16 }, y.shape)
  end)

  it("per-call tensors reach the variant through MultiHeadAttention and the decoder layer, cached too", function()
    ember.manual_seed(5)
    local ids = doc_ids(2, 12, { 5, 7 })
    local mha = nn.MultiHeadAttention(16, 2, { attention = "document" })
    local x = ember.randn(2, 12, 16)
    local y = mha(x, { variant_inputs = { doc = ids }, causal = true })
    local first = mha(x:narrow(2, 1, 5), { variant_inputs = { doc = ids:narrow(2, 1, 5) }, causal = true })
    assert((y:narrow(2, 1, 5) - first):abs():max():item() < 1e-5, "document 1 must not see document 2")
    local layer = nn.TransformerDecoderLayer(16, 2, { dim_feedforward = 32, dropout = 0, cross = false, attention = "sliding_sinks",
      attention_options = { window_left = 3, window_right = 0, sinks = 1 } }):eval()
    local full = layer(x, nil, {})
    local cache, steps = {}, {}
    for t = 1, 12 do steps[t] = layer(x:narrow(2, t, 1), nil, { cache = cache }) end
    local inc = ember.cat(steps, 2)
    assert((full - inc):abs():max():item() < 1e-4, "cached decoding must equal the full pass")
  end)

  it("every script's --attention offers the Lua variants (scripts_spec runs the scripts)", function()
    local bin = (os.getenv("EMBER_BUILD_DIR") or "build") .. "/bin/ember"
    local h = io.popen(bin .. " scripts/langid.lua --help 2>&1")
    local help = h:read("a")
    h:close()
    assert.matches("softcap", help)
    assert.matches("sliding_sinks", help)
  end)

  it("options are checked by the core", function()
    local ok, err = pcall(ember.Attention, { attention = "softcap", heads = 1, head_dim = 4, cap = -1 })
    assert.is_false(ok)
    assert.matches("cap", tostring(err))
    ok, err = pcall(ember.Attention, { attention = "softcap", heads = 1, head_dim = 4, nope = 1 })
    assert.is_false(ok)
    assert.matches("nope", tostring(err))
  end)

  -- probe 24: choices as a table were ignored; bad or missing defaults were
  -- found only by the trial trace, or never
  it("option specs are checked at definition: choices as a table or 'a|b', defaults of the type, in range, present", function()
    ember.attention_variant { name = "opt_choices", options = { { name = "mode", type = "string", default = "a", choices = { "a", "b" } } },
      score = function(s, b, h, q, k, ctx) if ctx.options.mode == "a" then return s end return -s end }
    local ok, err = pcall(ember.Attention, { attention = "opt_choices", heads = 1, head_dim = 4, mode = "c" })
    assert.is_false(ok)
    assert.matches("attention_variant_spec.lua:%d+: .*option 'mode' must be one of a|b, got \"c\"", err)
    assert.is_true((pcall(ember.Attention, { attention = "opt_choices", heads = 1, head_dim = 4, mode = "b" })))
    local function bad(opt, want)
      local name = "opt_bad_" .. opt.name
      local ok2, err2 = pcall(ember.attention_variant, { name = name, options = { opt },
        score = function(s, b, h, q, k, ctx) return s end })
      assert.is_false(ok2, want)
      assert.matches("attention_variant_spec.lua:%d+: attention_variant '" .. name .. "': option '" .. opt.name .. "' " .. want, err2)
      assert.is_nil(variant_mod.get(name))
    end
    bad({ name = "w", type = "int", default = -1, min = 0 }, "has the default %-1 outside its range %[0, inf%]")
    bad({ name = "u", type = "float", default = 5, min = 0, max = 1 }, "has the default 5 outside its range %[0, 1%]")
    bad({ name = "t", type = "int", default = "big" }, "is an int but its default is big %(string%)")
    bad({ name = "f", type = "int", default = 1.5 }, "is an int but its default is 1.5")
    bad({ name = "g", type = "bool", default = 1 }, "is a bool but its default is 1")
    bad({ name = "c", type = "string", default = "z", choices = { "a", "b" } }, "has the default \"z\", not one of its choices a|b")
    bad({ name = "c2", type = "string", default = "z", choices = "a|b" }, "has the default \"z\", not one of its choices a|b")
    bad({ name = "n", type = "int", choices = { "a" }, default = 1 }, "is int: choices are for string options")
    bad({ name = "K", type = "int", min = 1 }, "needs a default: the variant is traced once at definition with the default options")
    bad({ name = "typo", type = "int", default = 1, minimum = 0 }, "has an unknown field 'minimum'")
    -- probe 24: named like a module's own option, it could never be set
    for _, n in ipairs { "dropout", "heads", "head_dim", "causal", "dtype", "bias" } do
      bad({ name = n, type = "float", default = 0 }, "has the name of one of ember.Attention's or MultiHeadAttention's own options")
    end
  end)

  -- probe 24: a bool buffer was accepted, then every forward failed
  it("a bool table or per-call tensor (a precomputed mask) reads as 0/1, on both routes", function()
    local allowed = ember.tril(ember.ones(7, 7)):bool()
    ember.attention_variant { name = "bool_buffer",
      params = function() return { { name = "allow", tensor = allowed, learned = false } } end,
      mask = function(b, h, q, k, ctx) return ctx.allow[q][k] end }
    ember.attention_variant { name = "bool_input", inputs = { allow = 2 },
      mask = function(b, h, q, k, ctx) return ctx.allow[q][k] end }
    local q, k, v = qkv(2, 2, 7, 7, 4, "float64")
    local want = ember.Attention { heads = 2, head_dim = 4, dtype = "float64" }(q, k, v, { causal = true })
    local buf = ember.Attention { attention = "bool_buffer", heads = 2, head_dim = 4, dtype = "float64" }
    local inp = ember.Attention { attention = "bool_input", heads = 2, head_dim = 4, dtype = "float64" }
    for _, kernel in ipairs { "fused", "composed" } do
      assert((buf(q, k, v, { kernel = kernel }) - want):abs():max():item() < 1e-12, kernel)
      local got = inp(q, k, v, { kernel = kernel, variant_inputs = { allow = allowed } })
      assert((got - want):abs():max():item() < 1e-12, kernel)
    end
  end)

  local function def_error(def)
    local ok, err = pcall(function()
      ember.attention_variant(def)
      return ember.Attention { attention = def.name, heads = 2, head_dim = 4 }
    end)
    assert.is_false(ok)
    return tostring(err)
  end

  it("comparisons with < and == say what to write instead, at the user's line", function()
    local err = def_error { name = "bad_lt", mask = function(b, h, q, k) return q < k end }
    assert.matches("'<' %(or '>'%) cannot be traced.*q:lt%(k%) for q < k, or k:gt%(q%) for k > q", err)
    assert.matches("attention_variant_spec.lua:%d+", err)
    assert.matches("bad_lt", err)
    err = def_error { name = "bad_eq", mask = function(b, h, q, k) if q == k then return 1 end return 0 end }
    assert.matches("'==' cannot be traced.*q:eq%(k%)", err)
    -- probe 24: `s > 0` is Lua's __lt(0, s): it was reported as '<' with a:lt(b)
    err = def_error { name = "bad_gt", score = function(s) if s > 0 then return s end return 0 end }
    assert.matches("attention_variant_spec.lua:%d+: attention variant 'bad_gt': '>' cannot be traced.*s:gt%(0%) for s > 0", err)
    err = def_error { name = "bad_le", mask = function(b, h, q, k) local rel = q - k; if rel <= 3 then return 1 end return 0 end }
    assert.matches("'<=' cannot be traced.*rel:le%(3%) for rel <= 3", err)
  end)

  it("limit errors name the variant and the function; composed-route errors name the user's line once", function()
    local ok, err = pcall(ember.attention_variant, { name = "too_long", score = function(s)
      for i = 1, 300 do s = ember.tanh(s) * (1 + i * 1e-3) end
      return s
    end })
    assert.is_false(ok)
    assert.matches("attention_variant_spec.lua:%d+: attention variant 'too_long': score traces to %d+ operations %(at most 512%)", err)
    ok, err = pcall(ember.attention_variant, { name = "too_many_loads",
      params = function(o, d) return { { name = "t", tensor = ember.zeros(16, d.heads), learned = true } } end,
      score = function(s, b, h, q, k, ctx)
        for i = 1, 9 do s = s + ctx.t[i][h] * (q - k) end
        return s
      end })
    assert.is_false(ok)
    assert.matches("attention variant 'too_many_loads': score has 9 loads of learned tables %(at most 8%)", err)
    local att = ember.Attention { attention = "document", heads = 1, head_dim = 4 }
    local x = randn({ 1, 1, 6, 4 }, "float32")
    ok, err = pcall(att, x, x, x, { variant_inputs = { doc = ember.ones(1, 4, { dtype = "int64" }) }, need_weights = true })
    assert.is_false(ok)
    local _, n = tostring(err):gsub("attention_variant_spec.lua:%d+:", "")
    assert.are.equal(1, n, tostring(err))
  end)

  -- probe 24: Lua's not / == / ~= with a number give plain booleans (Lua
  -- calls no metamethod), which were traced as constants: wrong masks
  it("Lua's not, == and ~= with a number are errors naming the variant at the user's line, saying what to write", function()
    local cases = {
      { "bool_not", function(b, h, q, k) return not k:le(q) end, "mask returned a plain Lua boolean" },
      { "bool_eq", function(b, h, q, k) return ember.logical_or(k:le(q), k == 1) end, "logical_or got a plain Lua boolean" },
      { "bool_ne", function(b, h, q, k) return ember.where(k ~= 1, k:le(q), 1) end, "where got a plain Lua boolean" },
      { "bool_arith", function(b, h, q, k) return (k + (k == 1)):le(q) end, "'%+' got a plain Lua boolean" },
      { "bool_lnot", function(b, h, q, k) return ember.logical_not(k == 1) end, "logical_not got a plain Lua boolean" },
      { "bool_meth", function(b, h, q, k) return k:le(q):logical_and(q ~= 2) end, "logical_and got a plain Lua boolean" },
    }
    for _, c in ipairs(cases) do
      local err = def_error { name = c[1], mask = c[2] }
      assert.matches("attention_variant_spec.lua:%d+: attention variant '" .. c[1] .. "': " .. c[3], err)
      assert.matches("x:eq%(1%)", err)
      assert.matches("ember.logical_not", err)
      assert.is_nil(variant_mod.get(c[1]), c[1] .. " was registered")
    end
    local err = def_error { name = "bool_score", score = function(s, b, h, q, k) return k == 3 end }
    assert.matches("score returned a plain Lua boolean", err)
    -- what stays legitimate: numbers, a constant score or mask, a bool option through if
    ember.attention_variant { name = "bool_ok", options = { { name = "full", type = "bool", default = false } },
      score = function(s, b, h, q, k, ctx) return ctx.options.full and 2 or s * 0.5 + 1 end,
      mask = function(b, h, q, k, ctx) if ctx.options.full then return 1 end return ember.where(k:eq(1), 1, k:le(q)) end }
    local q, k, v = qkv(1, 1, 6, 6, 4, "float64")
    local att = ember.Attention { attention = "bool_ok", heads = 1, head_dim = 4, dtype = "float64" }
    local a, b = att(q, k, v), att(q, k, v, { kernel = "composed" })
    assert((a - b):abs():max():item() < 1e-12)
    local full = ember.Attention { attention = "bool_ok", heads = 1, head_dim = 4, dtype = "float64", full = true }
    assert((full(q, k, v) - v:mean(3):expand(1, 1, 6, 4)):abs():max():item() < 1e-12)
  end)

  it("a captured tensor indexed with the wrong arity or a float is an error", function()
    local err = def_error { name = "bad_arity",
      params = function(o, d) return { { name = "t", tensor = ember.zeros(3, d.heads) } } end,
      score = function(s, b, h, q, k, ctx) return s + ctx.t[1] end }
    assert.matches("index it fully", err)
    err = def_error { name = "bad_arity2",
      params = function(o, d) return { { name = "t", tensor = ember.zeros(3) } } end,
      score = function(s, b, h, q, k, ctx) return s + ctx.t[1][h] end }
    assert.matches("too many indices", err)
    err = def_error { name = "bad_float_index",
      params = function(o, d) return { { name = "t", tensor = ember.zeros(3) } } end,
      score = function(s, b, h, q, k, ctx) return s + ctx.t[q / 2] end }
    assert.matches("non%-integer", err)
  end)

  it("an unknown function, a string and a bad return are errors naming the variant", function()
    local err = def_error { name = "bad_fn", score = function(s) return s:frobnicate() end }
    assert.matches("no field 'frobnicate'", err)
    err = def_error { name = "bad_ret", score = function(s) return "x" end }
    assert.matches("bad_ret", err)
    err = def_error { name = "bad_mask_s", mask = function(b, h, q, k) return nil end }
    assert.matches("returned nothing", err)
  end)

  -- where a Lua variant fails (issue 26): its trial trace at definition
  -- registers nothing; a failure later (some options, some sizes, a call)
  -- is a clear error at the user's line and the registries stay as they were
  local function listed(name)
    local in_core, in_plugins = false, nil
    for _, v in ipairs(ember.attention_variants()) do if v.name == name then in_core = true end end
    for _, p in ipairs(ember.plugins()) do if p.name == name then in_plugins = p.loaded end end
    return in_core, in_plugins, variant_mod.get(name) ~= nil
  end

  it("a variant that fails its trial trace registers nothing, and a failed redefinition keeps the old one", function()
    local ok, err = pcall(ember.attention_variant, { name = "fails_trace", score = function(s) error("not today") end })
    assert.is_false(ok)
    assert.matches("attention_variant_spec.lua:%d+: attention variant 'fails_trace': score failed: not today", err)
    assert.are.same({ false, nil, false }, { listed("fails_trace") })
    ember.attention_variant { name = "redefined", score = function(s) return s * 0.5 end }
    ok, err = pcall(ember.attention_variant, { name = "redefined", score = function(s) return s:nope() end })
    assert.is_false(ok)
    assert.matches("attention_variant_spec.lua:%d+: attention variant 'redefined': traced values have no field 'nope'", err)
    assert.are.same({ true, true, true }, { listed("redefined") })
    local q, k, v = qkv(1, 1, 5, 5, 4, "float64")
    local att = ember.Attention { attention = "redefined", heads = 1, head_dim = 4, dtype = "float64" }
    local want = ember.Attention { heads = 1, head_dim = 4, dtype = "float64" }(q * 0.5, k, v)
    assert((att(q, k, v) - want):abs():max():item() < 1e-12, "the old definition no longer runs")
  end)

  it("a variant that fails for some options or sizes: an error naming it at the user's line; it stays usable", function()
    ember.attention_variant { name = "picky", options = { { name = "p", type = "int", default = 1 } },
      params = function(o, d) if d.heads > 2 then error("at most 2 heads") end return {} end,
      score = function(s, b, h, q, k, ctx) if ctx.options.p == 2 then error("p = 2 is not written yet") end return s end }
    local ok, err = pcall(function() return ember.Attention { attention = "picky", heads = 1, head_dim = 4, p = 2 } end)
    assert.is_false(ok)
    assert.matches("^[^\n]*attention_variant_spec.lua:%d+: attention variant 'picky': score failed: [^\n]*p = 2 is not written yet", err)
    ok, err = pcall(function() return ember.Attention { attention = "picky", heads = 4, head_dim = 4 } end)
    assert.is_false(ok)
    assert.matches("attention variant 'picky': params failed: .*at most 2 heads", err)
    assert.is_nil(err:find("ember/variant.lua", 1, true), "the error names a library line: " .. err)
    ok, err = pcall(function() return ember.Attention { attention = "picky", heads = 1, head_dim = 4, bogus = 1 } end)
    assert.is_false(ok)
    assert.matches("^[^\n]*attention_variant_spec.lua:%d+: ember.Attention: attention 'picky': unknown option 'bogus'", err)
    assert.are.same({ true, true, true }, { listed("picky") })
    local q, k, v = qkv(1, 2, 5, 5, 4, "float32")
    assert.are.same({ 1, 2, 5, 4 }, ember.Attention { attention = "picky", heads = 2, head_dim = 4 }(q, k, v).shape)
  end)

  it("an index out of range at run time names the tensor and position; the process lives on", function()
    ember.attention_variant { name = "oob", params = function(o, d) return { { name = "t", tensor = ember.zeros(4, d.heads) } } end,
      score = function(s, b, h, q, k, ctx) return s + ctx.t[ember.abs(q - k) + 1][h] end }
    local att = ember.Attention { attention = "oob", heads = 2, head_dim = 4 }
    local q, k, v = qkv(1, 2, 10, 10, 4, "float32")
    local ok, err = pcall(att, q, k, v)
    assert.is_false(ok)
    assert.matches("out of range", tostring(err))
    assert.matches("'t'", tostring(err))
    local ok2 = pcall(att, q:narrow(3, 1, 3), k:narrow(3, 1, 3), v:narrow(3, 1, 3))
    assert.is_true(ok2)
    assert.are.same({ true, true, true }, { listed("oob") })
  end)

  -- probe 24: a mask's load out of range was NaN in the block map, a
  -- comparison made it false, every cell was classified empty and the kernel
  -- (whose index check would have fired) never ran: all-zero rows, no error
  it("a mask reading past its captured tensor is an index error on the fused route too, never zero rows", function()
    local att = ember.Attention { attention = "document", heads = 1, head_dim = 4 }
    local function fails(q, kv, doc, what)
      for _, kernel in ipairs { "fused", "composed" } do
        local ok, err = pcall(att, q, kv, kv, { variant_inputs = { doc = doc }, kernel = kernel })
        assert(not ok, what .. " on the " .. kernel .. " route gave no error")
        err = tostring(err)
        assert.matches("attention_variant_spec.lua:%d+:", err)
        assert.matches("document", err)
        assert.matches("'doc'", err)
        assert.matches("out of range", err)
      end
    end
    local ids = function(t) return ember.tensor(t, { dtype = "int64" }) end
    fails(randn({ 1, 1, 1, 4 }, "float32"), randn({ 1, 1, 5, 4 }, "float32"), ids { { 2 } }, "doc [1,1] for Lk = 5")
    local x = randn({ 2, 1, 6, 4 }, "float32")
    fails(x, x, ids { { 1, 1, 1, 2, 2, 2 } }, "doc [1,6] for B = 2")
    local y = randn({ 1, 1, 40, 4 }, "float32")
    fails(y, y, ids { { 1, 1, 1 } }, "doc [1,3] for L = 40")
    -- a KV-cached step given only the new position's id
    local mha = nn.MultiHeadAttention(8, 2, { attention = "document" }):eval()
    local cache = {}
    mha:forward_cached(ember.randn(1, 4, 8), cache, { variant_inputs = { doc = ids { { 1, 1, 2, 2 } } } })
    local ok, err = pcall(mha.forward_cached, mha, ember.randn(1, 1, 8), cache, { variant_inputs = { doc = ids { { 2 } } } })
    assert.is_false(ok)
    assert.matches("out of range.*'doc'", tostring(err))
    -- a mask whose intervals decide the cell (a buffer read by b alone)
    ember.attention_variant { name = "oob_mask_b", params = function() return { { name = "tb", tensor = ember.ones(1), learned = false } } end,
      mask = function(b, h, q, k, ctx) return ctx.tb[b]:gt(0) end }
    ok, err = pcall(ember.Attention { attention = "oob_mask_b", heads = 1, head_dim = 4 }, x, x, x)
    assert.is_false(ok)
    assert.matches("out of range.*'tb'", tostring(err))
    -- in range: the same map as before, cells across documents skipped
    local good = att(y, y, y, { variant_inputs = { doc = doc_ids(1, 40, { 17, 23 }) } })
    assert.are.same({ 1, 1, 40, 4 }, good.shape)
  end)

  -- probe 24: variant.dense called a missing ember.nn_dropout, so the
  -- composed route (kernel = "composed", need_weights) dropped nothing
  it("attention dropout on the composed route and need_weights: the fused route's weights dropped, under a seed", function()
    local att = ember.Attention { attention = "softcap", heads = 2, head_dim = 4, cap = 5 }:train()
    local q, k, v = qkv(2, 2, 7, 9, 4, "float32")
    local none = att(q, k, v)
    ember.manual_seed(4)
    local fused = att(q, k, v, { dropout = 0.4 })
    ember.manual_seed(4)
    local composed = att(q, k, v, { dropout = 0.4, kernel = "composed" })
    ember.manual_seed(4)
    local with_w = att(q, k, v, { dropout = 0.4, need_weights = true })
    assert((fused - none):abs():max():item() > 1e-2, "the fused route dropped nothing")
    assert((composed - none):abs():max():item() > 1e-2, "the composed route dropped nothing")
    assert((composed - fused):abs():max():item() < 1e-5, "the routes dropped different weights under one seed")
    assert((with_w - fused):abs():max():item() < 1e-5, "need_weights dropped different weights")
    -- in evaluation mode nothing is dropped
    att:eval()
    assert((att(q, k, v, { dropout = 0.4, kernel = "composed" }) - none):abs():max():item() < 1e-6)
    -- through MultiHeadAttention's own dropout, and the gradient flows through the kept weights
    local mha = nn.MultiHeadAttention(8, 2, { attention = "softcap", dropout = 0.5 }):train()
    local x = ember.randn(1, 6, 8):requires_grad_()
    ember.manual_seed(9)
    local y1 = mha(x)
    ember.manual_seed(9)
    local y2 = mha(x, { need_weights = true })
    assert((y1 - y2):abs():max():item() < 1e-5)
    y2:sum():backward()
    assert.is_not_nil(x.grad)
  end)

  -- probe 24: the fused kernel detached a float per-call input silently
  it("a float per-call input that requires grad gets the composed route's gradient; without grad it stays fused", function()
    ember.attention_variant { name = "ext_bias", inputs = { bias = { ndim = 2, dtype = "float" } },
      score = function(s, b, h, q, k, ctx) return s + ctx.bias[q][k] end }
    local att = ember.Attention { attention = "ext_bias", heads = 2, head_dim = 4, dtype = "float64" }
    local q, k, v = qkv(2, 2, 5, 6, 4, "float64")
    local bias = randn({ 6, 6 }):requires_grad_()
    local w = randn({ 2, 2, 5, 4 })
    local function grads(kernel)
      bias.grad = nil
      local qq = q:detach():requires_grad_()
      local out = att(qq, k, v, { variant_inputs = { bias = bias }, kernel = kernel })
      assert.is_true(out.requires_grad)
      ;(out * w):sum():backward()
      return out, bias.grad:clone(), qq.grad:clone()
    end
    local o1, gb1, gq1 = grads(nil)
    local o2, gb2, gq2 = grads("composed")
    assert((o1 - o2):abs():max():item() < 1e-12)
    assert(gb2:abs():max():item() > 1e-3)
    assert((gb1 - gb2):abs():max():item() < 1e-12, "the bias' gradient differs from the composed one")
    assert((gq1 - gq2):abs():max():item() < 1e-12)
    -- a bias that needs no gradient, or grad mode off: the fused kernel
    local before = ember.attention_routes().fused
    att(q, k, v, { variant_inputs = { bias = bias:detach() } })
    ember.no_grad(function() att(q, k, v, { variant_inputs = { bias = bias } }) end)
    assert.are.equal(before + 2, ember.attention_routes().fused)
  end)

  it("a score that yields NaN is an error", function()
    ember.attention_variant { name = "nan_score", score = function(s) return ember.log(s - 1e9) end }
    local att = ember.Attention { attention = "nan_score", heads = 1, head_dim = 4 }
    local q, k, v = qkv(1, 1, 8, 8, 4, "float32")
    local ok, err = pcall(att, q, k, v)
    assert.is_false(ok)
    assert.matches("NaN", tostring(err))
  end)

  it("a NaN in q is not the score function's: no error, the same NaN rows as standard attention", function()
    ember.attention_variant { name = "nan_bias", score = function(s, b, h, q, k) return s - 0.5 * ember.abs(q - k) end }
    local q, k, v = qkv(1, 1, 8, 8, 4, "float32")
    q = q:detach():clone()
    q[1][1][3][2] = 0 / 0
    local function nan_rows(spec)
      spec.heads, spec.head_dim = 1, 4
      local ok, out = pcall(ember.Attention(spec), q, k, v)
      assert.is_true(ok, spec.attention .. ": " .. tostring(out))
      local rows = {}
      for i = 1, 8 do rows[i] = out[1][1][i]:sum():item() ~= out[1][1][i]:sum():item() end
      return rows
    end
    local want = nan_rows { attention = "standard" }
    for _, spec in ipairs { { attention = "nan_bias" }, { attention = "relpos", mode = "alibi" },
                            { attention = "relpos", mode = "t5" } } do
      assert.are.same(want, nan_rows(spec), spec.attention)
    end
  end)

  it("a missing or misshapen per-call tensor is an error naming it", function()
    local att = ember.Attention { attention = "document", heads = 1, head_dim = 4 }
    local q, k, v = qkv(1, 1, 8, 8, 4, "float32")
    local ok, err = pcall(att, q, k, v)
    assert.is_false(ok)
    assert.matches("doc", tostring(err))
    ok, err = pcall(att, q, k, v, { variant_inputs = { doc = ember.zeros(8, { dtype = "int64" }) } })
    assert.is_false(ok)
    assert.matches("indexes 'doc' with 2 indices", tostring(err))
  end)

  it("kernel = fused with need_weights is an error, not a silent composition", function()
    local att = ember.Attention { attention = "standard", heads = 1, head_dim = 4, kernel = "fused" }
    local q, k, v = qkv(1, 1, 8, 8, 4, "float32")
    local ok, err = pcall(att, q, k, v, { need_weights = true })
    assert.is_false(ok)
    assert.matches("need_weights", tostring(err))
    local mha = nn.MultiHeadAttention(8, 2, { kernel = "fused" })
    ok, err = pcall(mha, ember.randn(1, 5, 8), { need_weights = true })
    assert.is_false(ok)
    assert.matches("need_weights", tostring(err))
  end)

  it("variant files load from a folder whose name has spaces, quotes and a $ (no shell lists it)", function()
    local base = os.tmpname()
    os.remove(base)
    local dir = base .. [[ it's "odd" $HOME `x`]]
    local function sh(str) return "'" .. str:gsub("'", "'\\''") .. "'" end
    assert(os.execute("mkdir -p " .. sh(dir)))
    local f = assert(io.open(dir .. "/odd_dir_variant.lua", "w"))
    f:write("return {name = 'odd_dir_variant', score = function(s) return s * 0.5 end}")
    f:close()
    assert(io.open(dir .. "/notes.txt", "w")):close()
    assert.are.same({ "notes.txt", "odd_dir_variant.lua" }, ember._list_dir(dir, ""))
    assert.are.same({ "odd_dir_variant.lua" }, ember._list_dir(dir, ".lua"))
    local none, why = ember._list_dir(dir .. "/missing", ".lua")
    assert.is_nil(none)
    assert.matches("cannot open folder", why)
    local variant = require "ember.variant"
    local path = ember.plugin_search_path
    ember.plugin_search_path = function() return { dir } end
    local ok, n = pcall(variant.load_path)
    ember.plugin_search_path = path
    os.execute("rm -rf " .. sh(base) .. "*")
    assert(ok, n)
    assert.are.equal(1, n)
    assert.is_not_nil(variant.get("odd_dir_variant"))
    local att = ember.Attention { attention = "odd_dir_variant", heads = 1, head_dim = 4, dtype = "float64" }
    local q = ember.randn({ 1, 1, 3, 4 }, { dtype = "float64" })
    assert.are.same({ 1, 1, 3, 4 }, att(q, q, q).shape)
  end)

  it("a broken variant file is listed with its reason", function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    local f = io.open(dir .. "/broken_variant.lua", "w")
    f:write("return {name = 'broken_variant', score = 3}")
    f:close()
    local variant = require "ember.variant"
    local path = ember.plugin_search_path
    ember.plugin_search_path = function() return { dir } end
    variant.load_path()
    ember.plugin_search_path = path
    local found
    for _, p in ipairs(ember.plugins()) do
      if p.name == "broken_variant.lua" or (p.path or ""):match("broken_variant") then found = p end
    end
    os.execute("rm -rf " .. dir)
    assert(found, "the broken file is not listed")
    assert.matches("score must be a function", tostring(found.reason))
  end)
end)
