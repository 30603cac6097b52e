-- Attention variants written in Lua as a new user tries them (issue 24):
-- FlexAttention's idioms, the routes agreeing with each other and with the
-- documented rules, and bad input named at the user's line. One block per
-- defect found by probing; attention_variant_spec.lua holds the shipped
-- variants to their composed references.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"

local function randn(shape, dtype) return ember.randn(shape, { dtype = dtype or "float64" }) end

-- the build under test (ctest sets EMBER_BUILD_DIR: the sanitizer build too)
local BUILD = os.getenv("EMBER_BUILD_DIR") or "build"

-- out and the gradients of q, k, v (and the module's tables) for one call;
-- opts.kernel picks the route.
local function run(att, q, k, v, opts)
  local qq, kk, vv = q:detach():requires_grad_(), k:detach():requires_grad_(), v:detach():requires_grad_()
  for _, p in ipairs(att:parameters()) do p.grad = nil end
  local out = att(qq, kk, vv, opts)
  ;(out * ember.linspace(-1, 1, out:numel(), { dtype = out.dtype }):view(out.shape)):sum():backward()
  local g = { out:detach(), qq.grad or ember.zeros_like(qq), kk.grad or ember.zeros_like(kk), vv.grad or ember.zeros_like(vv) }
  for _, p in ipairs(att:parameters()) do g[#g + 1] = p.grad and p.grad:clone() or ember.zeros_like(p) end
  return g
end

local function max_diff(a, b)
  local m = 0
  for i = 1, #a do
    assert(not a[i]:isnan():any():item() and not b[i]:isnan():any():item(), "NaN in result " .. i)
    m = math.max(m, (a[i] - b[i]):abs():max():item())
  end
  return m
end

describe("Lua variants as a new user writes them", function()
  it("a score of -inf (FlexAttention's way to mask) over a whole row gives 0 on every route, never NaN", function()
    -- the documented rule (plugins/README.md): a row that can see no key gives
    -- output 0 and gradient 0; the fused route and standard's float -inf mask do
    ember.attention_variant { name = "user_neginf",
      score = function(s, b, h, q, k, ctx) return ember.where(k:le(q), s, -math.huge) end }
    ember.manual_seed(5)
    local att = ember.Attention { attention = "user_neginf", heads = 2, head_dim = 4, dtype = "float64" }
    -- 6 queries over 3 keys: the first three queries sit before key 1 (bottom-right)
    local q, k, v = randn { 2, 2, 6, 4 }, randn { 2, 2, 3, 4 }, randn { 2, 2, 3, 4 }
    local fused = run(att, q, k, v)
    local composed = run(att, q, k, v, { kernel = "composed" })
    assert(fused[1]:narrow(3, 1, 3):abs():max():item() == 0)
    assert(max_diff(fused, composed) < 1e-12)
    local _, w = att(q, k, v, { need_weights = true })
    assert(not w:isnan():any():item())
    assert(w:narrow(3, 1, 3):abs():max():item() == 0)
    -- with a sink of -inf too, the row has nothing at all
    ember.attention_variant { name = "user_neginf_sink",
      score = function(s, b, h, q, k, ctx) return ember.where(k:le(q), s, -math.huge) end,
      sink = function(b, h, q, ctx) return ember.where(q:ge(1), 0, -math.huge) end }
    local att2 = ember.Attention { attention = "user_neginf_sink", heads = 2, head_dim = 4, dtype = "float64" }
    local f2, c2 = run(att2, q, k, v), run(att2, q, k, v, { kernel = "composed" })
    assert(max_diff(f2, c2) < 1e-12)
  end)
end)

-- Loads the *.lua variants of a folder as the plugin path would; returns
-- ember.plugins()'s rows whose path lies in it.
local tmpdir = require "tests.lua.helpers.tmpdir"
local function load_folder(files)
  local dir = tmpdir()
  for name, text in pairs(files) do
    local f = assert(io.open(dir .. "/" .. name, "w"))
    f:write(text)
    f:close()
  end
  local variant = require "ember.variant"
  local path = ember.plugin_search_path
  ember.plugin_search_path = function() return { dir } end
  local ok, err = pcall(variant.load_path)
  ember.plugin_search_path = path
  assert(ok, err)
  local rows = {}
  for _, p in ipairs(ember.plugins()) do
    if (p.path or ""):sub(1, #dir) == dir then rows[p.path:sub(#dir + 2)] = p end
  end
  os.execute("rm -rf '" .. dir .. "'")
  return rows, dir
end

describe("Lua variant files on the plugin path", function()
  it("a definition error in a file names the file, not the line that first listed the plugins", function()
    local rows, dir = load_folder {
      ["user_nameless.lua"] = "return { score = function(s, b, h, q, k, ctx) return s end }",
      ["user_badopt.lua"] = "return { name = 'user_badopt', options = {{name = 'w', type = 'int', default = 1.5}},\n" ..
        "  score = function(s, b, h, q, k, ctx) return s end }",
    }
    local me = debug.getinfo(1, "S").short_src:match("[^/]+$")
    for file, want in pairs { ["user_nameless.lua"] = "name must be a string",
      ["user_badopt.lua"] = "option 'w' is an int but its default is 1.5" } do
      local row = assert(rows[file], file .. " is not listed")
      local reason = tostring(row.reason)
      assert.matches(want, reason, 1, true)
      assert(reason:sub(1, #dir + #file + 3) == dir .. "/" .. file .. ": ", "the reason does not start with the file: " .. reason)
      assert(not reason:find(me, 1, true), "the reason names the spec's line: " .. reason)
    end
  end)

  it("a file whose variant name is taken is listed as shadowed, as a .so is", function()
    local rows = load_folder {
      ["user_dup_a.lua"] = "return { name = 'user_dup', score = function(s, b, h, q, k, ctx) return s end }",
      ["user_dup_b.lua"] = "return { name = 'user_dup', score = function(s, b, h, q, k, ctx) return s * 2 end }",
    }
    local a, b = rows["user_dup_a.lua"], rows["user_dup_b.lua"]
    assert(a and a.loaded, "the first file is not loaded")
    assert(b, "the second file is not listed")
    assert.are.equal("user_dup", b.name)
    assert.matches("shadowed by .*user_dup_a%.lua", tostring(b.reason))
  end)
end)

describe("a Lua variant file given by its path", function()
  local function write(dir, name, text)
    local f = assert(io.open(dir .. "/" .. name, "w"))
    f:write(text)
    f:close()
    return dir .. "/" .. name
  end

  it("ember.load_plugin(path.lua) defines it, as a .so path loads one; a bad file is an error naming it", function()
    local dir = tmpdir()
    local path = write(dir, "user_file_variant.lua", "local ember = require 'ember'\n" ..
      "return { name = 'user_file_variant', score = function(s, b, h, q, k, ctx) return s * 0.5 end }")
    local rec = ember.load_plugin(path)
    assert.are.equal("user_file_variant", rec.name)
    assert.are.equal(path, rec.path)
    assert.is_true(rec.loaded)
    local att = ember.Attention { attention = "user_file_variant", heads = 1, head_dim = 4 }
    assert.are.same({ 1, 1, 3, 4 }, att(ember.randn(1, 1, 3, 4), ember.randn(1, 1, 3, 4), ember.randn(1, 1, 3, 4)).shape)
    local broken = write(dir, "user_broken_file.lua", "return { name = 'user_broken_file', score = function(s) return s + end }")
    parity.raises_here(function() ember.load_plugin(broken) end, "user_broken_file.lua:1:")
    local nothing = write(dir, "user_not_a_variant.lua", "return { add = function(a, b) return a + b end }")
    parity.raises_here(function() ember.load_plugin(nothing) end, "does not return an attention variant")
    local bad = write(dir, "user_bad_def.lua", "return { name = 'user_bad_def', score = 3 }")
    parity.raises_here(function() ember.load_plugin(bad) end, bad .. ": attention_variant 'user_bad_def': score must be a function")
    parity.raises_here(function() ember.load_plugin(dir .. "/missing.lua") end, "missing.lua")
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("a file that failed, fixed and loaded again, is listed as loaded only (its rejection was kept beside it)", function()
    local dir = tmpdir()
    local text = "local ember = require 'ember'\nreturn { name = 'user_fixed_file', score = function(s, b, h, q, k, ctx) " ..
      "return s + %s(q - k) end }"
    local path = write(dir, "user_fixed_file.lua", text:format("math.sin"))
    parity.raises_here(function() ember.load_plugin(path) end, "math.sin cannot be traced")
    write(dir, "user_fixed_file.lua", text:format("ember.tanh"))
    assert.is_true(ember.load_plugin(path).loaded)
    local rows = {}
    for _, r in ipairs(ember.plugins()) do if r.path == path then rows[#rows + 1] = r end end
    assert.are.equal(1, #rows, "rows of the file: " .. #rows)
    assert.is_true(rows[1].loaded)
    assert.is_nil(tostring(ember.attention_variants()):find("user_fixed_file.lua", 1, true))
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("scripts/check_plugin.lua checks a variant given as a .lua path", function()
    local dir = tmpdir()
    local path = write(dir, "user_checked.lua", "local ember = require 'ember'\n" ..
      "return { name = 'user_checked', mask = function(b, h, q, k, ctx) return k:le(q) end }")
    local p = io.popen(("EMBER_PLUGIN_PATH_ONLY=1 EMBER_PLUGIN_PATH='%s/plugins' '%s/bin/ember' scripts/check_plugin.lua '%s' --quick 2>&1; echo rc=$?")
      :format(BUILD, BUILD, path))
    local out = p:read("a")
    p:close()
    os.execute("rm -rf '" .. dir .. "'")
    assert(out:find("0 failed", 1, true) and out:find("rc=0", 1, true), out)
  end)

  it("scripts/check_plugin.lua makes per-call tensors that any index of a variant's inputs reaches", function()
    -- a 1-d input read by key (not by batch), a 3-d bias read [b][q][k], declared with a dtype name
    local dir = tmpdir()
    local path = write(dir, "user_checked_inputs.lua", "local ember = require 'ember'\n" ..
      "return { name = 'user_checked_inputs', inputs = { w = { ndim = 1, dtype = 'float32' }, bias = { ndim = 3, dtype = 'float' } },\n" ..
      "  score = function(s, b, h, q, k, ctx) return s + ctx.w[k] * 0.1 + ctx.bias[b][ember.maximum(q, 1)][k] end }")
    local p = io.popen(("EMBER_PLUGIN_PATH_ONLY=1 EMBER_PLUGIN_PATH='%s/plugins' '%s/bin/ember' scripts/check_plugin.lua '%s' --quick 2>&1; echo rc=$?")
      :format(BUILD, BUILD, path))
    local out = p:read("a")
    p:close()
    os.execute("rm -rf '" .. dir .. "'")
    assert(out:find(" 0 failed", 1, true) and out:find("rc=0", 1, true), out)
  end)
end)

describe("a Lua table indexed with a traced value", function()
  it("is refused at the user's line, naming the table (`tbl[k] or 0` was 0 at every position, silently)", function()
    local slopes = { 0.5, 0.25, 0.125, 0.0625 }
    local function slope(h) return slopes[h] or 1 end   -- through a helper too
    local cfg = { bias = { 1, 2, 3 } }                    -- a field of a table
    for name, score in pairs {
      user_tbl_upvalue = function(s, b, h, q, k, ctx) return s + (slopes[h] or 0) * (k - q) end,
      user_tbl_helper = function(s, b, h, q, k, ctx) return s + slope(h) * (k - q) end,
      user_tbl_field = function(s, b, h, q, k, ctx) return s + (cfg.bias[k] or 0) end } do
      parity.raises_here(function() ember.attention_variant { name = name, score = score } end,
        ("the Lua table '%s' was indexed with a traced value"):format(name == "user_tbl_field" and "cfg.bias" or "slopes"))
      assert.is_nil(require("ember.variant").get(name))
    end
    assert.is_nil(getmetatable(slopes)) -- the guards are gone after the trace
    assert.is_nil(getmetatable(cfg.bias))
    -- read with numbers, a table is a constant of the trace
    ember.attention_variant { name = "user_tbl_number", score = function(s, b, h, q, k, ctx) return s * slopes[2] end }
    local att = nn.Attention { attention = "user_tbl_number", heads = 2, head_dim = 4, dtype = "float64" }
    local q, k, v = randn { 1, 2, 5, 4 }, randn { 1, 2, 5, 4 }, randn { 1, 2, 5, 4 }
    parity.check("numbers", att(q, k, v), ember.scaled_dot_product_attention(q, k, v, { scale = 0.125 }), 1e-12)
  end)
end)

describe("a number a variant's function reads as an upvalue, changed after a module was made", function()
  it("is an error at the module's next call, naming it (the module computed with the old value, silently)", function()
    local W = 2
    local function window(q, k) return (q - k):le(W) end -- through a helper too
    ember.attention_variant { name = "user_upvalue_window", mask = function(b, h, q, k, ctx) return window(q, k) & k:le(q) end }
    local calls = 0 -- one the function writes while traced (a counter) is not a constant of the trace
    ember.attention_variant { name = "user_upvalue_counter", score = function(s, b, h, q, k, ctx) calls = calls + 1; return s end }
    local mha = nn.MultiHeadAttention(8, 2, { attention = "user_upvalue_window", dtype = "float64" })
    local counted = nn.MultiHeadAttention(8, 2, { attention = "user_upvalue_counter", dtype = "float64" })
    local x = randn { 1, 7, 8 }
    local before = mha(x)
    W = 5
    parity.raises_here(function() mha(x) end,
      "attention variant 'user_upvalue_window': its mask reads the upvalue 'W', which was 2 when this module traced it and is 5 now")
    parity.raises_here(function() mha:forward_cached(x, {}) end, "reads the upvalue 'W'")
    -- a module made now computes with 5; with 2 again, the first one runs as before
    local again = nn.MultiHeadAttention(8, 2, { attention = "user_upvalue_window", dtype = "float64" })
    again:load_state_dict(mha:state_dict())
    assert((again(x) - before):abs():max():item() > 1e-6, "W = 5 computes what W = 2 did")
    W = 2
    parity.check("W = 2 again", mha(x), before, 0)
    nn.MultiHeadAttention(8, 2, { attention = "user_upvalue_counter" }) -- traces again: calls moves
    assert.are.same({ 1, 7, 8 }, counted(x).shape)
  end)
end)

describe("a typo inside a variant's function", function()
  it("an option name that the variant does not have is named, with the options it has, at the user's line", function()
    local ok, err = pcall(ember.attention_variant, { name = "user_typo_opt",
      options = { { name = "cap", type = "float", default = 3 } },
      score = function(s, b, h, q, k, ctx) return ctx.options.capp * s end })
    assert.is_false(ok)
    local me = debug.getinfo(1, "S").short_src:match("[^/]+$")
    assert.matches(me .. ":%d+: attention variant 'user_typo_opt'", err)
    assert.matches("no option 'capp'", err, 1, true)
    assert.matches("its options: cap", err, 1, true)
    assert.is_nil(require("ember.variant").get("user_typo_opt"))
  end)

  it("a ctx field that does not exist (a table's name misspelled) is named, with what ctx holds", function()
    local ok, err = pcall(ember.attention_variant, { name = "user_typo_ctx",
      params = function(o, d) return { { name = "tab", tensor = ember.zeros(d.heads), learned = true } } end,
      score = function(s, b, h, q, k, ctx) return s + ctx.taab[h] end })
    assert.is_false(ok)
    local me = debug.getinfo(1, "S").short_src:match("[^/]+$")
    assert.matches(me .. ":%d+: attention variant 'user_typo_ctx'", err)
    assert.matches("ctx has no field 'taab'", err, 1, true)
    assert.matches("tab", err, 1, true)
    -- what ctx does hold reads as before: options (a bool option false too), sizes, tables
    ember.attention_variant { name = "user_ctx_fields",
      options = { { name = "flag", type = "bool", default = false } },
      params = function(o, d) return { { name = "tab", tensor = ember.zeros(d.heads), learned = true } } end,
      score = function(s, b, h, q, k, ctx)
        local n = 0
        for _ in pairs(ctx.options) do n = n + 1 end
        assert(n == 1 and ctx.options.flag == false and ctx.heads >= 1 and ctx.head_dim >= 1 and ctx.v_head_dim >= 1)
        if ctx.options.flag then return s end
        return s + ctx.tab[h]
      end }
  end)
end)

describe("data.pack's options, as a new user gives them", function()
  it("a pad_id that is not an integer is refused (1.5 was stored as 1), as is a rows that is not a count", function()
    parity.raises_here(function() ember.data.pack({ { 1, 2 } }, 3, { pad_id = 1.5 }) end,
      "data.pack: pad_id must be an integer token id, got 1.5")
    parity.raises_here(function() ember.data.pack({ { 1, 2 } }, 3, { pad_id = "3" }) end, "pad_id must be an integer token id, got \"3\"")
    parity.raises_here(function() ember.data.pack({ { 1, 2 } }, 3, { pad_id = 1, rows = "x" }) end,
      "data.pack: rows must be an integer >= 0 (pad to at least this many rows), got \"x\"")
    parity.raises_here(function() ember.data.pack({ { 1, 2 } }, 3, { pad_id = 1, rows = 1.5 }) end, "rows must be an integer")
    assert.are.same({ { 1, 2, 7 }, { 7, 7, 7 } }, ember.data.pack({ { 1, 2 } }, 3, { pad_id = 7, rows = 2 }).tokens:totable())
    assert.are.same({ { 1, 2, 7 } }, ember.data.pack({ { 1, 2 } }, 3, { pad_id = 7.0 }).tokens:totable())
  end)

  it("a 2-D tensor of sequences is refused saying what to give", function()
    parity.raises_here(function() ember.data.pack(ember.ones({ 2, 3 }, { dtype = "int64" }), 4, { pad_id = 1 }) end,
      "a list of 1-D tensors")
  end)
end)

describe("a 0-d table (a learned scalar, as torch.nn.Parameter(torch.tensor(1.0)))", function()
  it("reads as ctx.name, trains on the fused route, equals the composed route and passes a float64 gradcheck", function()
    ember.attention_variant { name = "user_scalar",
      params = function(o, d)
        return { { name = "temp", tensor = ember.tensor(1.5), learned = true },
          { name = "lim", tensor = ember.tensor(20, { dtype = "int64" }), learned = false } }
      end,
      score = function(s, b, h, q, k, ctx) return s * ctx.temp + ctx.temp * ctx.temp end,
      mask = function(b, h, q, k, ctx) return (q - k):le(ctx.lim) end,
      sink = function(b, h, q, ctx) return ctx.temp end }
    ember.manual_seed(8)
    local att = ember.Attention { attention = "user_scalar", heads = 2, head_dim = 4, dtype = "float64" }
    assert.are.same({}, att.temp.shape)
    local q, k, v = randn { 2, 2, 70, 4 }, randn { 2, 2, 70, 4 }, randn { 2, 2, 70, 4 }
    local fused, composed = run(att, q, k, v), run(att, q, k, v, { kernel = "composed" })
    assert(max_diff(fused, composed) < 1e-10)
    assert.are.same({}, fused[5].shape)
    assert(fused[5]:abs():item() > 0, "the scalar got no gradient")
    local gradcheck = require "tests.lua.helpers.gradcheck"
    local qs, ks, vs = randn { 1, 2, 5, 4 }, randn { 1, 2, 5, 4 }, randn { 1, 2, 5, 4 }
    gradcheck.check(function(a, b, c) return att(a, b, c) end, { qs, ks, vs, att.temp }, { name = "user_scalar" })
  end)
end)

-- The bounds plugins/README.md states for the Lua variants in bfloat16: those
-- attention_bf16_spec.lua derives for the declared ones (the same kernel,
-- the score, mask and sink programs run in float32 on bfloat16-rounded
-- inputs): output within 2^-8 max|v| of the float32 kernel on the same
-- rounded inputs and tables, every gradient (tables too) within 2^-5 of its
-- largest magnitude. Measured on these cases: output 1e-3 to 2e-3, gradients
-- 3e-3 to 6e-3.
describe("the shipped Lua variants in bfloat16", function()
  local doc_ids = require "tests.lua.helpers.doc_ids"
  local bf16_pair = require "tests.lua.helpers.bf16_pair"
  local bfround = bf16_pair.round
  local cases = {
    { "softcap", { cap = 2.5 }, { causal = true } },
    { "document", {}, { causal = true }, { doc = doc_ids(2, 150, { 37, 90, 11 }) } },
    { "sliding_sinks", { window_left = 20, window_right = 5, sinks = 3 }, {} },
    { "prefix_lm", {}, {}, { prefix = ember.tensor({ 17, 60 }, { dtype = "int64" }) } },
    { "sinks", {}, { causal = true } },
    { "example_lua", { max_distance = 9 }, {} },
    { "alibi_lua", {}, { causal = true } },
    { "window_lua", { window_left = 16, window_right = 16 }, {} },
    { "t5_lua", { num_buckets = 16, max_distance = 40 }, { causal = true } },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ": output within 2^-8 max|v| and gradients within 2^-5 of the float32 kernel", function()
      ember.manual_seed(1)
      local o = { attention = c[1], heads = 4, head_dim = 16 }
      for k, v in pairs(c[2]) do o[k] = v end
      local a32, abf = bf16_pair.make(o)
      local q, k, v = bfround(ember.randn(2, 4, 150, 16)), bfround(ember.randn(2, 4, 150, 16)), bfround(ember.randn(2, 4, 150, 16))
      local go = bfround(ember.randn(2, 4, 150, 16))
      local function grads(att, dt)
        local qq, kk, vv = q:to(dt):detach():requires_grad_(), k:to(dt):detach():requires_grad_(), v:to(dt):detach():requires_grad_()
        local o = { variant_inputs = c[4] }
        for a, b in pairs(c[3]) do o[a] = b end
        local before = ember.attention_routes().fused
        local out = att(qq, kk, vv, o)
        assert.are.equal(before + 1, ember.attention_routes().fused)
        ;(out:float() * go):sum():backward()
        local r = { out:float(), qq.grad:float(), kk.grad:float(), vv.grad:float() }
        for _, p in ipairs(att:parameters()) do r[#r + 1] = p.grad:float() end
        return r
      end
      local r32, rbf = grads(a32, "float32"), grads(abf, "bfloat16")
      local out_err = (r32[1] - rbf[1]):abs():max():item()
      assert(out_err <= 2 ^ -8 * v:abs():max():item(), ("output off by %.3g"):format(out_err))
      for i = 2, #r32 do
        local e = (r32[i] - rbf[i]):abs():max():item() / r32[i]:abs():max():item()
        assert(e <= 2 ^ -5, ("gradient %d off by %.3g of its largest magnitude"):format(i, e))
      end
    end)
  end
end)

describe("the docs' examples of ember.attention_variant", function()
  -- an example a user pastes at the prompt defines its variant there: one
  -- named like a shipped variant replaces it for the session (the module doc
  -- of ember.variant redefined "softcap" with another default, and
  -- docs_spec's help("softcap") failed after doc_examples_spec ran)
  it("never take the name of a shipped variant", function()
    local shipped = {}
    for _, p in ipairs(ember.plugins()) do if p.kind == "attention" then shipped[p.name] = true end end
    local examples = require("tests.lua.helpers.doc_examples").collect(".")
    local seen = 0
    for _, ex in ipairs(examples) do
      for name in ex.code:gmatch("attention_variant%s*{%s*name%s*=%s*[\"']([%w_%-]+)[\"']") do
        seen = seen + 1
        assert(not shipped[name], ("%s defines the shipped variant name '%s'"):format(ex.key, name))
      end
    end
    assert(seen >= 2, "no example found: the pattern is stale")
  end)
end)

describe("constants folded while tracing", function()
  -- ember.tanh(c) of a number inside score is folded in Lua: it must be the
  -- kernels' tanh (C's), not (e^2c - 1)/(e^2c + 1), which lost up to half the
  -- digits near 0 (5e-9 relative at 1e-8)
  it("tanh and sigmoid of a constant are C's to an ulp or two", function()
    local FOLD = require("ember._trace").FOLD
    for _, x in ipairs { 1e-300, 1e-12, -1e-8, 1e-5, 3e-3, -0.1, 0.5, 1, -3, 7.5, 19.9, 25, -40 } do
      local want = ember.tensor(x, { dtype = "float64" }):tanh():item()
      assert(math.abs(FOLD.TANH(x) - want) <= 4e-16 * math.abs(want), ("tanh(%g): %.17g, C's %.17g"):format(x, FOLD.TANH(x), want))
      want = ember.tensor(x, { dtype = "float64" }):sigmoid():item()
      assert(math.abs(FOLD.SIGMOID(x) - want) <= 4e-16 * math.abs(want), ("sigmoid(%g)"):format(x))
    end
  end)
end)

describe("derivatives where PyTorch has a rule for the tie", function()
  local function both_routes(name, Lq)
    local att = ember.Attention { attention = name, heads = 2, head_dim = 4, dtype = "float64" }
    ember.manual_seed(9)
    local q, k, v = randn { 1, 2, Lq, 4 }, randn { 1, 2, Lq, 4 }, randn { 1, 2, Lq, 4 }
    return att, run(att, q, k, v), run(att, q, k, v, { kernel = "composed" })
  end

  it("minimum and maximum of equal values split the gradient in halves (torch.minimum / maximum)", function()
    -- two learned tables that start equal (zeros): every score is a tie
    ember.attention_variant { name = "user_tie",
      params = function(o, d)
        return { { name = "a", tensor = ember.zeros(d.heads), learned = true },
          { name = "b", tensor = ember.zeros(d.heads), learned = true } }
      end,
      score = function(s, b, h, q, k, ctx)
        return s + ember.maximum(ctx.a[h], ctx.b[h]) * (q - k) * 0.1 + math.min(ctx.a[h], ctx.b[h]) * k * 0.05
      end }
    local _, fused, composed = both_routes("user_tie", 6)
    assert(max_diff(fused, composed) < 1e-12)
    assert((fused[5] - fused[6]):abs():max():item() < 1e-15, "the halves differ")
    assert(fused[5]:abs():max():item() > 0)
  end)

  it("clamp at its bound gives the whole gradient to the value (torch.clamp), none to the bound", function()
    ember.attention_variant { name = "user_clamp_tie",
      params = function(o, d)
        return { { name = "t", tensor = ember.zeros(d.heads), learned = true },
          { name = "lo", tensor = ember.zeros(d.heads), learned = true } }
      end,
      score = function(s, b, h, q, k, ctx) return s + ember.clamp(ctx.t[h], ctx.lo[h], 1) * (q - k) * 0.1 end }
    ember.attention_variant { name = "user_clamp_ref",
      params = function(o, d)
        return { { name = "t", tensor = ember.zeros(d.heads), learned = true },
          { name = "lo", tensor = ember.zeros(d.heads), learned = true } }
      end,
      score = function(s, b, h, q, k, ctx) return s + ctx.t[h] * (q - k) * 0.1 end }
    local _, fused, composed = both_routes("user_clamp_tie", 6)
    local _, ref = both_routes("user_clamp_ref", 6)
    assert(max_diff(fused, composed) < 1e-12)
    assert(max_diff(fused, ref) < 1e-12) -- t's gradient as if unclamped, lo's zero
  end)

  it("pow at 0 gives PyTorch's gradients (0, not NaN) for 0^0 and d/db of 0^b", function()
    ember.attention_variant { name = "user_pow0",
      params = function(o, d)
        return { { name = "a", tensor = ember.zeros(d.heads), learned = true },
          { name = "e", tensor = ember.tensor({ 0.0, 2.0 }), learned = true } }
      end,
      score = function(s, b, h, q, k, ctx) return s + ember.pow(ctx.a[h], ctx.e[h]) * (q - k) * 0.1 end }
    local _, fused, composed = both_routes("user_pow0", 6)
    assert(max_diff(fused, composed) < 1e-12)
  end)
end)

describe("a per-call input's declared dtype", function()
  it("takes ember's dtype names (float32 is a float input), and refuses an unknown dtype or field", function()
    ember.attention_variant { name = "user_in_f32", inputs = { w = { ndim = 1, dtype = "float32" } },
      score = function(s, b, h, q, k, ctx) return s + ctx.w[k] end }
    local att = ember.Attention { attention = "user_in_f32", heads = 1, head_dim = 4 }
    local q = ember.randn(1, 1, 3, 4)
    local w = ember.tensor { 0.5, -1, 2 }
    local got = att(q, q, q, { variant_inputs = { w = w } })
    local want = att(q, q, q, { variant_inputs = { w = w }, kernel = "composed" })
    assert((got - want):abs():max():item() < 1e-6)
    ember.attention_variant { name = "user_in_i64", inputs = { d = { ndim = 1, dtype = "int64" } },
      mask = function(b, h, q, k, ctx) return ctx.d[k]:eq(1) end }
    assert.are.equal("int", require("ember.variant").inputs_of(require("ember.variant").get("user_in_i64"))[1].kind)
    parity.raises_here(function()
      ember.attention_variant { name = "user_in_bad", inputs = { w = { ndim = 1, dtype = "double precision" } },
        score = function(s, b, h, q, k, ctx) return s + ctx.w[k] end }
    end, "input 'w' has dtype 'double precision'")
    parity.raises_here(function()
      ember.attention_variant { name = "user_in_bad2", inputs = { w = { ndim = 1, dtyp = "float" } },
        score = function(s, b, h, q, k, ctx) return s + ctx.w[k] end }
    end, "input 'w' has an unknown field 'dtyp'")
  end)
end)

describe("a params entry written the PyTorch way", function()
  it("requires_grad = true, or a tensor that requires grad without learned, is refused saying learned = true trains it", function()
    parity.raises_here(function()
      ember.attention_variant { name = "user_rg",
        params = function(o, d) return { { name = "t", tensor = ember.zeros(d.heads), requires_grad = true } } end,
        score = function(s, b, h, q, k, ctx) return s + ctx.t[h] end }
    end, "params entry 1 ('t') has an unknown field 'requires_grad' (fields: name, tensor, learned; learned = true")
    parity.raises_here(function()
      ember.attention_variant { name = "user_rg2",
        params = function(o, d) return { { name = "t", tensor = ember.zeros(d.heads):requires_grad_() } } end,
        score = function(s, b, h, q, k, ctx) return s + ctx.t[h] end }
    end, "table 't' requires grad but does not say learned = true")
    assert.is_nil(require("ember.variant").get("user_rg"))
    -- learned = false on a tensor that requires grad is a buffer, as said
    ember.attention_variant { name = "user_rg3",
      params = function(o, d) return { { name = "t", tensor = ember.zeros(d.heads):requires_grad_(), learned = false } } end,
      score = function(s, b, h, q, k, ctx) return s + ctx.t[h] end }
  end)
end)

describe("a definition's fields", function()
  it("caps, which a Lua variant cannot set (it supports every mask kind), is an unknown field, not silently dropped", function()
    parity.raises_here(function()
      ember.attention_variant { name = "user_caps", caps = { causal = false },
        score = function(s, b, h, q, k, ctx) return s end }
    end, "unknown field 'caps'")
  end)
end)

describe("nn.Transformer with a variant that takes per-call tensors", function()
  it("src_variant_inputs and tgt_variant_inputs reach the encoder's and the decoder's self-attention", function()
    ember.manual_seed(12)
    local t = nn.Transformer(16, 2, { num_encoder_layers = 1, num_decoder_layers = 1, attention = "document",
      dim_feedforward = 32, dropout = 0 })
    local src, tgt = ember.randn(2, 6, 16), ember.randn(2, 5, 16)
    local i64 = { dtype = "int64" }
    local sdoc = ember.tensor({ { 1, 1, 1, 2, 2, 2 }, { 1, 2, 2, 2, 3, 3 } }, i64)
    local tdoc = ember.tensor({ { 1, 1, 2, 2, 2 }, { 1, 1, 1, 1, 2 } }, i64)
    local got = t(src, tgt, { src_variant_inputs = { doc = sdoc }, tgt_variant_inputs = { doc = tdoc }, tgt_is_causal = true })
    local memory = t.encoder(src, { variant_inputs = { doc = sdoc } })
    local want = t.decoder(tgt, memory, { variant_inputs = { doc = tdoc }, causal = true })
    assert((got - want):abs():max():item() < 1e-6)
  end)
end)

describe("a variant file that calls ember.attention_variant itself", function()
  it("(the README's snippet saved as a file) is listed with the file's path", function()
    local rows = load_folder {
      ["user_selfdef.lua"] = "local ember = require 'ember'\n" ..
        "ember.attention_variant{name = 'user_selfdef', score = function(s, b, h, q, k, ctx) return s * 0.5 end}",
    }
    assert(rows["user_selfdef.lua"], "not listed under its file")
    assert.is_true(rows["user_selfdef.lua"].loaded)
    assert.are.equal("user_selfdef", rows["user_selfdef.lua"].name)
  end)
end)

describe("ember.load_plugin of a file that calls ember.attention_variant itself", function()
  it("returns the variant's row, with the file's path", function()
    local dir = tmpdir()
    local path = dir .. "/user_selfdef2.lua"
    local f = assert(io.open(path, "w"))
    f:write("local ember = require 'ember'\n" ..
      "ember.attention_variant{name = 'user_selfdef2', score = function(s, b, h, q, k, ctx) return s * 0.5 end}")
    f:close()
    local rec = ember.load_plugin(path)
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal("user_selfdef2", rec.name)
    assert.are.equal(path, rec.path)
  end)
end)

describe("a table with more dims than a load takes", function()
  it("is refused where the variant is defined, naming it and the limit (a 5-d table was read past its indices)", function()
    parity.raises_here(function()
      ember.attention_variant { name = "user_five",
        params = function(o, d) return { { name = "t5d", tensor = ember.zeros(2, 2, 2, 2, 2), learned = true } } end,
        score = function(s, b, h, q, k, ctx) return s + ctx.t5d[1][1][1][1][1] end }
    end, "attention variant 'user_five': table 't5d' is 5-d; a captured tensor has at most 4 dims")
    assert.is_nil(require("ember.variant").get("user_five"))
  end)

  it("a program naming a capture of a bad rank is refused by the core, not read out of bounds", function()
    local att = ember.Attention { attention = "softcap", heads = 1, head_dim = 4 }
    for _, nd in ipairs { 5, 9, -1 } do
      local ok, err = pcall(att.core.set_programs, att.core, { caps = { { name = "x", ndim = nd } },
        score = { ins = { { op = 33, cap = 0, args = { 0, 0, 0, 0, 0 }, k = 0 } }, out = { 0 } } })
      assert.is_false(ok)
      assert.matches("capture 0 .* dims", tostring(err))
    end
  end)
end)

describe("a typo inside params", function()
  it("an option or size that does not exist is named where the variant is defined, with what there is", function()
    parity.raises_here(function()
      ember.attention_variant { name = "user_params_typo",
        options = { { name = "max_distance", type = "int", default = 3 } },
        params = function(o, d) return { { name = "t", tensor = ember.zeros(o.max_distnace + 1, d.heads), learned = true } } end,
        score = function(s, b, h, q, k, ctx) return s end }
    end, "params has no option 'max_distnace' (its options: max_distance)")
    parity.raises_here(function()
      ember.attention_variant { name = "user_params_typo2",
        params = function(o, d) return { { name = "t", tensor = ember.zeros(d.head, 2), learned = true } } end,
        score = function(s, b, h, q, k, ctx) return s end }
    end, "params' dims have no field 'head' (dims: head_dim, heads, v_head_dim)")
  end)
end)

describe("a definition's other fields, mistyped", function()
  it("options or params keyed by name, a description or version not a string, a check not a table: refused", function()
    parity.raises_here(function()
      ember.attention_variant { name = "user_optmap", options = { cap = { type = "float", default = 1 } },
        score = function(s, b, h, q, k, ctx) return s end }
    end, "options must be a list of specs; it has the key 'cap' (write {name = \"cap\", type = ..., default = ...})")
    parity.raises_here(function()
      ember.attention_variant { name = "user_desc", description = 5, score = function(s, b, h, q, k, ctx) return s end }
    end, "attention_variant 'user_desc': description must be a string, got number")
    parity.raises_here(function()
      ember.attention_variant { name = "user_ver", version = {}, score = function(s, b, h, q, k, ctx) return s end }
    end, "version must be a string, got table")
    parity.raises_here(function()
      ember.attention_variant { name = "user_chk", check = 5, score = function(s, b, h, q, k, ctx) return s end }
    end, "check must be a table of properties for scripts/check_plugin.lua, got number")
    parity.raises_here(function()
      ember.attention_variant { name = "user_parmap",
        params = function(o, d) return { t = { tensor = ember.zeros(2), learned = true } } end,
        score = function(s, b, h, q, k, ctx) return s + ctx.t[h] end }
    end, "params must return a list of {name=, tensor=, learned=}; it has the key 't'")
  end)
end)

describe("ember.max and ember.min on traced values", function()
  it("are the elementwise maximum and minimum, as x:max(y) and math.max (they failed as \"bad argument #1 to '?'\")", function()
    ember.attention_variant { name = "user_emax",
      score = function(s, b, h, q, k, ctx) return s + ember.max(q, k) * 0.01 + ember.min(s, 1, 0.5) end }
    ember.attention_variant { name = "user_emax_ref",
      score = function(s, b, h, q, k, ctx) return s + q:max(k) * 0.01 + math.min(s, 1, 0.5) end }
    ember.manual_seed(2)
    local q, k, v = randn { 1, 2, 5, 4 }, randn { 1, 2, 5, 4 }, randn { 1, 2, 5, 4 }
    local a = ember.Attention { attention = "user_emax", heads = 2, head_dim = 4, dtype = "float64" }(q, k, v)
    local b = ember.Attention { attention = "user_emax_ref", heads = 2, head_dim = 4, dtype = "float64" }(q, k, v)
    assert.are.equal(0, (a - b):abs():max():item())
    -- outside a variant they are the tensor reductions, as before
    assert.are.equal(3, ember.max(ember.tensor { 1, 3, 2 }):item())
    local vals, idx = ember.min(ember.tensor { { 4, 1 }, { 0, 5 } }, 2)
    assert.are.same({ 1, 0 }, vals:totable())
    assert.are.same({ 2, 1 }, idx:totable())
  end)
end)

describe("a new user's whole path", function()
  it("a learned variant file on EMBER_PLUGIN_PATH is listed, used by name and trains (its table moves, the loss falls)", function()
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/user_reldist.lua", "w"))
    f:write([[
local ember = require "ember"
return {
  name = "user_reldist",
  options = { { name = "max_distance", type = "int", default = 4, min = 1 } },
  params = function(o, dims) return { { name = "bias", tensor = ember.zeros(2 * o.max_distance + 1, dims.heads), learned = true } } end,
  score = function(s, b, h, q, k, ctx)
    local K = ctx.options.max_distance
    return s + ctx.bias[ember.clamp(k - q, -K, K) + K + 1][h]
  end,
  mask = function(b, h, q, k, ctx) return k:le(q) end,
}
]])
    f:close()
    local script = [[
local nn, optim = require "ember.nn", require "ember.optim"
local row
for _, p in ipairs(ember.plugins()) do if p.name == "user_reldist" then row = p end end
assert(row and row.loaded, "not listed")
ember.manual_seed(1)
local m = nn.MultiHeadAttention(16, 2, {attention = "user_reldist", max_distance = 3})
local opt = optim.Adam(m:parameters(), {lr = 0.03})
local x, t = ember.randn(4, 12, 16), ember.randn(4, 12, 16)
local before = m.attn.bias:clone()
local first, last
for i = 1, 30 do
  opt:zero_grad()
  local loss = (m(x) - t):pow(2):mean()
  loss:backward()
  opt:step()
  first, last = first or loss:item(), loss:item()
end
print(("moved %.3g first %.4f last %.4f routes %s"):format((m.attn.bias - before):abs():max():item(), first, last,
  ember.attention_routes().fused))
]]
    local p = io.popen(("EMBER_PLUGIN_PATH='%s':'%s/plugins' EMBER_PLUGIN_PATH_ONLY=1 '%s/bin/ember' -e '%s' 2>&1"):format(
      dir, BUILD, BUILD, script:gsub("'", "'\\''")))
    local out = p:read("a")
    p:close()
    os.execute("rm -rf '" .. dir .. "'")
    local moved, first, last, fused = out:match("moved (%S+) first (%S+) last (%S+) routes (%d+)")
    assert(moved, out)
    assert(tonumber(moved) > 1e-3, out)
    assert(tonumber(last) < tonumber(first), out)
    assert(tonumber(fused) >= 30, "the fused kernel did not run: " .. out)
  end)
end)

describe("the gradient programs' size", function()
  it("pow's and clamp's derivative rules add no where to s ^ 2 (a constant condition picks its branch)", function()
    local variant = require "ember.variant"
    local trace = require "ember._trace"
    local def = { name = "user_pow_size", score = function(s, b, h, q, k, ctx) return s ^ 2 * 0.1 end }
    local r = variant.trace(def, {}, { heads = 1, head_dim = 4, v_head_dim = 4 }, {})
    for _, x in ipairs(r.score_grad.ins) do
      assert.are_not.equal(trace.OPNUM.WHERE, x.op, "a where in the gradient of s ^ 2")
    end
  end)
end)
