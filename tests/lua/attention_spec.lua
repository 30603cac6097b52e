-- The attention module API (core/lua/l_attention.c) and the variant
-- plugins seen from Lua. Numerical conformance of each variant is
-- scripts/check_plugin.lua's job (run by ctest per variant); PyTorch parity
-- is mha_parity_spec.lua's.
local ember = require "ember"

local function maxdiff(a, b) return (a:double() - b:double()):abs():max():item() end

describe("ember.MultiHeadAttention", function()
  it("maps [B, L, d_model] to [B, L, d_model], self-attention when key_value is nil", function()
    local m = ember.MultiHeadAttention{d_model = 16, heads = 4}
    local x = ember.randn(2, 5, 16)
    local y = m:forward(x)
    assert.are.same({2, 5, 16}, y.shape)
    assert.are.equal(0, maxdiff(y, m:forward(x, x)))
    assert.are.equal(0, maxdiff(y, m(x)))
  end)

  it("does cross-attention with Lq ~= Lk and kdim/vdim", function()
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2, kdim = 6, vdim = 5}
    local q, k, v = ember.randn(3, 4, 8), ember.randn(3, 7, 6), ember.randn(3, 7, 5)
    local y, w = m:forward(q, k, v, {need_weights = true})
    assert.are.same({3, 4, 8}, y.shape)
    assert.are.same({3, 2, 4, 7}, w.shape)
  end)

  it("returns per-head weights whose rows sum to 1", function()
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2, dtype = "float64"}
    local _, w = m:forward(ember.randn({2, 5, 8}, {dtype = "float64"}), nil, {need_weights = true, causal = true})
    assert.is_true(maxdiff(w:sum(-1), ember.ones({2, 2, 5}, {dtype = "float64"})) < 1e-12)
    assert.are.equal(0, w[1][1][1][2]:item()) -- causal: query 1 does not see key 2
  end)

  it("gives clear errors for bad construction", function()
    local ok, err = pcall(ember.MultiHeadAttention, {d_model = 10, heads = 3})
    assert.is_false(ok)
    assert.truthy(err:find("divisible", 1, true))
    ok, err = pcall(ember.MultiHeadAttention, {d_model = 8, heads = 2, attention = "nope"})
    assert.truthy(err:find("no variant named 'nope'", 1, true))
    assert.truthy(err:find("standard", 1, true) and err:find("linear", 1, true)) -- lists what exists
    ok, err = pcall(ember.MultiHeadAttention, {d_model = 8, heads = 2, attention = "local", windw = 3})
    assert.truthy(err:find("unknown option 'windw'", 1, true))
    assert.truthy(err:find("window_left", 1, true))
    ok, err = pcall(ember.MultiHeadAttention, {d_model = 8, heads = 2, attention = "local", window_left = -1})
    assert.truthy(err:find("window_left", 1, true))
    ok, err = pcall(ember.MultiHeadAttention, {d_model = 8, heads = 2, attention = "linear", feature_map = "relu"})
    assert.truthy(err:find("elu|favor", 1, true))
    ok, err = pcall(ember.MultiHeadAttention, {d_model = 6, heads = 2, rope = true})
    assert.truthy(err:find("even", 1, true))
  end)

  it("refuses an option the chosen mode does not read (it was silently ignored), at the user's line", function()
    local cases = {
      {{attention = "local", mode = "block", window_left = 8}, "'window_left' (= 8) is not used with mode=\"block\""},
      {{attention = "local", global_tokens = 2}, "'global_tokens' (= 2) is not used with mode=\"sliding\""},
      {{attention = "relpos", mode = "alibi", num_buckets = 8}, "'num_buckets' (= 8) is not used with mode=\"alibi\""},
      {{attention = "relpos", mode = "t5", max_relative_position = 4}, "'max_relative_position' (= 4) is not used"},
      {{attention = "relpos", bidirectional = false}, "'bidirectional' (= false) is not used with mode=\"shaw\""},
      {{attention = "linear", num_features = 16}, "'num_features' (= 16) is not used with feature_map=\"elu\""},
      {{attention = "linear", redraw = true}, "'redraw' (= true) is not used"},
    }
    for _, c in ipairs(cases) do
      local spec = {d_model = 8, heads = 2}
      for k, v in pairs(c[1]) do spec[k] = v end
      local ok, err = pcall(ember.MultiHeadAttention, spec)
      local here = "attention_spec.lua:" .. debug.getinfo(1, "l").currentline - 1 .. ":"
      assert.is_false(ok, c[2])
      assert.truthy(err:find("attention '" .. c[1].attention .. "': option " .. c[2], 1, true), err)
      assert.truthy(err:find(here, 1, true), err)
    end
    -- the same options with their own mode, or at their defaults, are taken
    for _, spec in ipairs {
      {attention = "local", mode = "block", block_size = 4, global_tokens = 1},
      {attention = "local", mode = "block", window_left = 64},
      {attention = "relpos", mode = "t5", num_buckets = 8, max_distance = 16, bidirectional = false},
      {attention = "linear", feature_map = "favor", num_features = 16, redraw = true},
    } do
      spec.d_model, spec.heads = 8, 2
      assert.truthy(ember.MultiHeadAttention(spec))
    end
  end)

  it("gives clear errors for bad inputs", function()
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2}
    local ok, err = pcall(m.forward, m, ember.randn(2, 5, 6))
    assert.truthy(err:find("d_model=8", 1, true))
    ok, err = pcall(m.forward, m, ember.randn(2, 5, 8), ember.randn(3, 5, 8))
    assert.truthy(err:find("key must be", 1, true))
    ok, err = pcall(m.forward, m, ember.randn({2, 5, 8}, {dtype = "float64"}))
    assert.truthy(err:find("float32", 1, true))
    ok, err = pcall(m.forward, m, ember.randn(2, 5, 8), nil, {key_padding_mask = ember.zeros({2, 4}, {dtype = "bool"})})
    assert.truthy(err:find("key_padding_mask", 1, true))
    ok, err = pcall(m.forward, m, ember.randn(2, 5, 8), nil, {bogus = 1})
    assert.truthy(err:find("bogus", 1, true))
    local lin = ember.MultiHeadAttention{d_model = 8, heads = 2, attention = "linear"}
    ok, err = pcall(lin.forward, lin, ember.randn(2, 5, 8), nil, {allow_mask = ember.ones({5, 5}, {dtype = "bool"})})
    assert.truthy(err:find("does not support", 1, true))
    -- a boolean attn_mask could follow either PyTorch convention: refused, naming both
    ok, err = pcall(m.forward, m, ember.randn(2, 5, 8), nil, {attn_mask = ember.ones({5, 5}, {dtype = "bool"})})
    assert.truthy(err:find("allow_mask", 1, true) and err:find("block_mask", 1, true), err)
  end)

  it("has the nn module methods and names its parameters in registration order", function()
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2, attention = "relpos", max_relative_position = 2}
    assert.are.same({"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight",
                     "v_proj.bias", "out_proj.weight", "out_proj.bias", "attn.rel_k", "attn.rel_v"},
                    m:parameter_names())
    assert.are.equal(10, #m:parameters())
    assert.are.same({5, 4}, m:named_parameters()["attn.rel_k"].shape)
    assert.are.equal(m, m:eval())
    assert.is_false(m.training)
    assert.are.equal(m, m:train())
    assert.is_true(m.training)
    assert.truthy(tostring(m):find("relpos", 1, true))
    local nobias = ember.MultiHeadAttention{d_model = 8, heads = 2, bias = false}
    assert.are.equal(4, #nobias:parameters())
  end)

  it("learns: every parameter gets a gradient, zero_grad clears them", function()
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2, attention = "relpos", mode = "t5", num_buckets = 8}
    m:forward(ember.randn(2, 5, 8)):sum():backward()
    for name, p in pairs(m:named_parameters()) do assert.is_not_nil(p.grad, name .. " has no grad") end
    m:zero_grad()
    for name, p in pairs(m:named_parameters()) do assert.is_nil(p.grad, name .. " kept its grad") end
  end)

  it("saves and loads its state (including variant tables and buffers)", function()
    local a = ember.MultiHeadAttention{d_model = 8, heads = 2, attention = "linear", feature_map = "favor", num_features = 6}
    local b = ember.MultiHeadAttention{d_model = 8, heads = 2, attention = "linear", feature_map = "favor", num_features = 6}
    local sd = a:state_dict()
    assert.is_not_nil(sd["attn.features"]) -- a buffer: in state_dict, not in parameters
    assert.is_nil(a:named_parameters()["attn.features"])
    b:load_state_dict(sd)
    a:eval(); b:eval()
    local x = ember.randn(2, 5, 8)
    assert.are.equal(0, maxdiff(a:forward(x), b:forward(x)))
    local ok, err = pcall(b.load_state_dict, b, {w_q = ember.zeros(8, 8)})
    assert.truthy(err:find("missing attn.features, k_proj.bias", 1, true), err)
    sd.extra = ember.zeros(1)
    ok, err = pcall(b.load_state_dict, b, sd)
    assert.truthy(err:find("unexpected extra", 1, true), err)
    b:load_state_dict(sd, false) -- non-strict ignores it
  end)

  it("switches variants with one word and keeps its projections", function()
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2, dtype = "float64"}
    local x = ember.randn({2, 6, 8}, {dtype = "float64"})
    local y1 = m:forward(x)
    m:set_attention("local", {window_left = 10, window_right = 10})
    assert.are.equal("local", m.attention)
    assert.is_true(maxdiff(y1, m:forward(x)) < 1e-12) -- a window >= L is exact
    m:set_attention("linear")
    assert.are.same({2, 6, 8}, m:forward(x).shape)
    local ok, err = pcall(m.set_attention, m, "linear", {bogus = 1})
    assert.truthy(err:find("bogus", 1, true))
    assert.are.equal("linear", m.attention) -- a failed swap changes nothing
  end)

  it("moves to another dtype", function()
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2}
    local x = ember.randn(1, 3, 8)
    local y32 = m:forward(x)
    m:to("float64")
    assert.are.equal("float64", m.dtype)
    local y64 = m:forward(x:double())
    assert.is_true(maxdiff(y32, y64) < 1e-5)
    for _, p in ipairs(m:parameters()) do assert.is_true(p.requires_grad) end
  end)

  it("applies RoPE (rotate-half) to queries and keys, bottom-right positions", function()
    ember.manual_seed(4)
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2, rope = true, dtype = "float64", kernel = "dense"}
    local q_in, kv_in = ember.randn({1, 3, 8}, {dtype = "float64"}), ember.randn({1, 5, 8}, {dtype = "float64"})
    local got = m:forward(q_in, kv_in, nil, {causal = true})
    -- reference, written out: positions of the 3 queries are 2, 3, 4 (Lk - Lq + i)
    local p = m:named_parameters()
    p.w_q, p.b_q, p.w_k, p.b_k = p["q_proj.weight"], p["q_proj.bias"], p["k_proj.weight"], p["k_proj.bias"]
    p.w_v, p.b_v, p.w_o, p.b_o = p["v_proj.weight"], p["v_proj.bias"], p["out_proj.weight"], p["out_proj.bias"]
    local function lin(x, w, b) return x:matmul(w:transpose(1, 2)) + b end
    local function heads(x) return x:reshape(1, x.shape[2], 2, 4):transpose(2, 3) end
    local function rope(x, first)
      local L = x.shape[3]
      local cs, sn = {}, {}
      for i = 1, L do
        cs[i], sn[i] = {}, {}
        for j = 1, 2 do
          local ang = (first + i - 1) * 10000 ^ (-2 * (j - 1) / 4)
          cs[i][j], sn[i][j] = math.cos(ang), math.sin(ang)
        end
      end
      local c, s = ember.tensor(cs, {dtype = "float64"}), ember.tensor(sn, {dtype = "float64"})
      local x1, x2 = x:narrow(4, 1, 2), x:narrow(4, 3, 2)
      return ember.cat({x1 * c - x2 * s, x2 * c + x1 * s}, 4)
    end
    local q = rope(heads(lin(q_in, p.w_q, p.b_q)), 2)
    local k = rope(heads(lin(kv_in, p.w_k, p.b_k)), 0)
    local v = heads(lin(kv_in, p.w_v, p.b_v))
    local att = ember.Attention{heads = 2, head_dim = 4, dtype = "float64"}
    local o = att:forward(q, k, v, {causal = true}):transpose(2, 3):reshape(1, 3, 8)
    local want = lin(o, p.w_o, p.b_o)
    assert.is_true(maxdiff(got, want) < 1e-12)
    local plain = ember.MultiHeadAttention{d_model = 8, heads = 2, dtype = "float64"}
    plain:load_state_dict(m:state_dict())
    assert.is_true(maxdiff(got, plain:forward(q_in, kv_in, nil, {causal = true})) > 1e-6)
  end)

  it("uses dropout on attention weights only in training, reproducibly under a seed", function()
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2, dropout = 0.5}
    local x = ember.randn(2, 6, 8)
    ember.manual_seed(1)
    local a = m:forward(x)
    ember.manual_seed(1)
    local b = m:forward(x)
    assert.are.equal(0, maxdiff(a, b))
    assert.is_true(maxdiff(a, m:forward(x)) > 0)
    m:eval()
    assert.are.equal(0, maxdiff(m:forward(x), m:forward(x)))
  end)

  it("is O(L) in memory for standard attention without weights", function()
    -- [1, 8, 2048, 2048] float32 scores would be 128 MiB; the fused path
    -- keeps live memory far below that.
    local m = ember.MultiHeadAttention{d_model = 64, heads = 8}
    local x = ember.randn(1, 2048, 64)
    local before = ember.live_bytes()
    local y = ember.no_grad(function() return m:forward(x, nil, {causal = true}) end)
    assert.are.same({1, 2048, 64}, y.shape)
    assert.is_true(ember.live_bytes() - before < 16 * 2^20)
  end)
end)

describe("attention heatmaps", function()
  it("writes one PNG per head with token labels, and checks the labels", function()
    local m = ember.MultiHeadAttention{d_model = 8, heads = 2}
    local toks = {"the", "cat", "sat", "down"}
    local _, w = m:forward(ember.randn(1, 4, 8), nil, {need_weights = true})
    local base = os.tmpname()
    local files = m:heatmap(w, base .. ".png", {tokens_q = toks, tokens_k = toks, title = "test"})
    assert.are.same({base .. "_head1.png", base .. "_head2.png"}, files)
    for _, f in ipairs(files) do
      local fh = assert(io.open(f, "rb"))
      assert.are.equal("\137PNG", fh:read(4))
      fh:close()
      os.remove(f)
    end
    local one = ember.attention_heatmap(w, base .. "_%d.png", {head = 2})
    assert.are.same({base .. "_2.png"}, one)
    os.remove(one[1])
    os.remove(base)
    local ok, err = pcall(ember.attention_heatmap, w, base .. ".png", {tokens_q = {"a"}})
    assert.truthy(err:find("tokens_q has 1 tokens", 1, true))
    ok, err = pcall(ember.attention_heatmap, w, base .. ".png", {head = 3})
    assert.truthy(err:find("head 3", 1, true))
  end)
end)

describe("ember.attention_variants", function()
  it("lists the shipped variants with options, defaults and capabilities", function()
    local by = {}
    for _, v in ipairs(ember.attention_variants()) do by[v.name] = v end
    for _, n in ipairs({"standard", "local", "relpos", "linear"}) do assert.is_not_nil(by[n], n) end
    assert.is_false(by.linear.caps.mask)
    assert.is_true(by.standard.caps.dropout)
    local opt
    for _, o in ipairs(by["local"].options) do if o.name == "window_left" then opt = o end end
    assert.are.equal("int", opt.type)
    assert.are.equal(64, opt.default)
    assert.are.equal(0, opt.min)
  end)
end)

describe("O(L) memory", function()
  -- [1, 8, 1024, 1024] float32 is 32 MiB: a variant that materialised an
  -- L x L matrix (or saved one for backward) would show it here.
  for _, spec in ipairs({{attention = "standard"}, {attention = "standard", kernel = "fused"},
                         {attention = "local", window_left = 16, window_right = 16},
                         {attention = "local", mode = "block", block_size = 32, global_tokens = 4},
                         {attention = "relpos", mode = "shaw"}, {attention = "relpos", mode = "t5"},
                         {attention = "relpos", mode = "alibi"},
                         {attention = "linear"}, {attention = "linear", feature_map = "favor", num_features = 32}}) do
    local label = spec.attention .. (spec.kernel and (" " .. spec.kernel) or "") .. ((spec.mode and spec.attention ~= "relpos") and (" " .. spec.mode) or "")
      .. (spec.feature_map and (" " .. spec.feature_map) or "") .. (spec.attention == "relpos" and (" " .. spec.mode) or "")
    it(label .. " keeps no L x L state through forward and backward", function()
      spec.heads, spec.head_dim = 8, 32
      local a = ember.Attention(spec)
      local q = ember.randn(1, 8, 1024, 32):requires_grad_()
      local k = ember.randn(1, 8, 1024, 32):requires_grad_()
      local v = ember.randn(1, 8, 1024, 32):requires_grad_()
      local before = ember.live_bytes()
      local out = a:forward(q, k, v, {causal = true})
      local saved = ember.live_bytes() - before
      assert.is_true(saved < 8 * 2^20, string.format("%.1f MiB live after forward", saved / 2^20))
      out:sum():backward()
      assert.are.same({1, 8, 1024, 32}, q.grad.shape)
    end)
  end
end)

describe("ember.Attention", function()
  it("runs a variant on [B, H, L, d] and exposes its tables", function()
    local a = ember.Attention{attention = "relpos", heads = 2, head_dim = 4, max_relative_position = 3}
    local q = ember.randn(1, 2, 5, 4)
    local out, w = a:forward(q, q, q, {need_weights = true, causal = true})
    assert.are.same({1, 2, 5, 4}, out.shape)
    assert.are.same({1, 2, 5, 5}, w.shape)
    assert.are.same({7, 4}, a:named_parameters()["rel_k"].shape)
    assert.is_true(a.caps.mask)
  end)
end)

describe("empty sequences", function()
  it("no queries give an empty output, no keys give zeros (as PyTorch), not a kernel's error", function()
    local nn = require "ember.nn"
    local m = nn.MultiHeadAttention(4, 2)
    assert.are.same({ 1, 0, 4 }, m(ember.zeros(1, 0, 4)).shape)
    local a = ember.Attention { heads = 2, head_dim = 2 }
    local o, w = a(ember.randn(1, 2, 3, 2), ember.zeros(1, 2, 0, 2), ember.zeros(1, 2, 0, 2), { need_weights = true })
    assert.are.same({ 1, 2, 3, 2 }, o.shape)
    assert.are.equal(0, o:abs():sum():item())
    assert.are.same({ 1, 2, 3, 0 }, w.shape)
    assert.are.same({ 2, 2, 0, 2 }, a(ember.zeros(2, 2, 0, 2), ember.randn(2, 2, 5, 2), ember.randn(2, 2, 5, 2)).shape)
  end)
end)

