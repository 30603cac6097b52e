-- One module protocol: fields that register themselves, registration order
-- everywhere, tied weights that stay tied, MultiHeadAttention built from
-- nn modules with every option on, cached RoPE tables, and checkpoints of
-- earlier ember versions (C MultiHeadAttention names) that still load.
local ember = require "ember"
local nn = require "ember.nn"

local function maxdiff(a, b) return (a:double() - b:double()):abs():max():item() end

describe("field assignment registers", function()
  local Net = nn.Module:extend("Net")
  function Net:__init()
    self.fc = nn.Linear(4, 3)
    self.scale = ember.ones(3):requires_grad_()
    self.note = "plain"
    self.table = ember.zeros(2) -- a tensor without requires_grad: a plain field
    self:register_buffer("count", ember.zeros(1))
    self.head = nn.Linear(3, 2)
  end
  function Net:forward(x) return self.head(self.fc(x) * self.scale) end

  it("modules and tensors with requires_grad, in assignment order", function()
    local m = Net()
    assert.are.same({ "scale", "fc.weight", "fc.bias", "head.weight", "head.bias" }, m:parameter_names())
    assert.are.same({ "scale", "count", "fc.weight", "fc.bias", "head.weight", "head.bias" },
      (function() local l = {}; m:_each_tensor(function(n) l[#l + 1] = n end); return l end)())
    assert.is_nil(m:state_dict().table)
    assert.are.equal("plain", m.note)
    assert.are.equal(2, #m:children())
    local opt = require("ember.optim").Adam(m:parameters(), { lr = 1e-2 })
    m(ember.randn(5, 4)):sum():backward()
    opt:step()
    assert.is_not_nil(m.scale.grad)
  end)

  it("nil unregisters; a new value for a registered name replaces it", function()
    local m = Net()
    m.head = nil
    assert.is_nil(m.head)
    assert.are.same({ "scale", "fc.weight", "fc.bias" }, m:parameter_names())
    m.head = nn.Linear(3, 5)
    assert.are.same({ "scale", "fc.weight", "fc.bias", "head.weight", "head.bias" }, m:parameter_names())
    assert.are.same({ 5, 3 }, m.head.weight.shape)
    m.count = ember.full({ 1 }, 7)
    assert.are.equal(7, m:state_dict().count:item())
    m.scale = nil
    assert.are.same({ "fc.weight", "fc.bias", "head.weight", "head.bias" }, m:parameter_names())
  end)

  it("refuses a value of the wrong kind for a registered name, naming it", function()
    local m = Net()
    local ok, err = pcall(function() m.fc = 3 end)
    assert.is_false(ok)
    assert.truthy(err:find("Net: 'fc' is a child module", 1, true), err)
    assert.truthy(err:find("module_protocol_spec.lua", 1, true), err) -- at the user's line
    ok, err = pcall(function() m.count = "x" end)
    assert.truthy(err:find("'count' is a buffer", 1, true), err)
  end)

  it("register_parameter / register_buffer / add_module keep working", function()
    local m = nn.Module()
    m:register_parameter("w", ember.zeros(2))
    m:add_module("lin", nn.Linear(2, 2))
    m:register_buffer("b", ember.zeros(1), false)
    assert.are.same({ "w", "lin.weight", "lin.bias" }, m:parameter_names())
    assert.is_nil(m:state_dict().b)
    assert.is_true(m.w.requires_grad)
  end)
end)

describe("registration order", function()
  it("a model mixing Lua modules and attention lists names as registered", function()
    local Model = nn.Module:extend("Model")
    function Model:__init()
      self.embed = nn.Embedding(10, 8)
      self.att = nn.MultiHeadAttention(8, 2, { attention = "relpos", max_relative_position = 2 })
      self.norm = nn.LayerNorm(8)
    end
    local m = Model()
    assert.are.same({ "embed.weight",
      "att.q_proj.weight", "att.q_proj.bias", "att.k_proj.weight", "att.k_proj.bias",
      "att.v_proj.weight", "att.v_proj.bias", "att.out_proj.weight", "att.out_proj.bias",
      "att.attn.rel_k", "att.attn.rel_v", "norm.weight", "norm.bias" }, m:parameter_names())
    local printed = tostring(m)
    local a, b, c = printed:find("(embed)", 1, true), printed:find("(att)", 1, true), printed:find("(norm)", 1, true)
    assert.is_true(a < b and b < c, printed)
    assert.truthy(printed:find("(q_proj): Linear(in_features=8, out_features=8", 1, true), printed)
  end)
end)

describe("tied weights", function()
  local LM = nn.Module:extend("LM")
  function LM:__init()
    self.embed = nn.Embedding(12, 8)
    self.att = nn.MultiHeadAttention(8, 2)
    self.out = nn.Linear(8, 12, { bias = false })
    self.out.weight = self.embed.weight -- tie the output projection to the embedding
    self.att.out_proj.weight = self.att.q_proj.weight -- a tie inside the attention module
  end

  it("are listed once and stay tied through :to('float64') and :double()", function()
    local m = LM()
    assert.are.equal(rawequal(m.out.weight, m.embed.weight), true)
    local n = #m:parameters()
    m:to("float64")
    assert.is_true(rawequal(m.out.weight, m.embed.weight))
    assert.is_true(rawequal(m.att.out_proj.weight, m.att.q_proj.weight))
    assert.are.equal("float64", m.embed.weight.dtype)
    assert.are.equal(n, #m:parameters())
    m:double()
    assert.is_true(rawequal(m.out.weight, m.embed.weight))
  end)

  it("stay tied through load_state_dict", function()
    local a, b = LM(), LM()
    b:load_state_dict(a:state_dict())
    assert.is_true(rawequal(b.out.weight, b.embed.weight))
    ember.no_grad(function() b.embed.weight:fill_(0.5) end)
    assert.are.equal(0.5, b.out.weight[1][1]:item())
    assert.is_true(maxdiff(a.att.q_proj.weight, b.att.out_proj.weight) == 0)
  end)
end)

describe("MultiHeadAttention", function()
  it("runs with every option on (RoPE, biases, masks, weights), forward and backward", function()
    ember.manual_seed(3)
    local m = nn.MultiHeadAttention{ d_model = 16, heads = 4, kdim = 12, vdim = 10, rope = true, dropout = 0.1,
      causal = true, dtype = "float64" }
    local q = ember.randn({ 2, 5, 16 }, { dtype = "float64" }):requires_grad_()
    local k = ember.randn({ 2, 7, 12 }, { dtype = "float64" }):requires_grad_()
    local v = ember.randn({ 2, 7, 10 }, { dtype = "float64" }):requires_grad_()
    local kpm = ember.zeros({ 2, 7 }, { dtype = "bool" })
    kpm[2][1] = true
    local allow = ember.ones({ 5, 7 }, { dtype = "bool" })
    allow[1][1] = false
    local y, w = m(q, k, v, { key_padding_mask = kpm, allow_mask = allow, need_weights = true })
    assert.are.same({ 2, 5, 16 }, y.shape)
    assert.are.same({ 2, 4, 5, 7 }, w.shape)
    y:sum():backward()
    for n, p in pairs(m:named_parameters()) do assert.is_not_nil(p.grad, n) end
    assert.is_not_nil(q.grad)
    assert.is_not_nil(k.grad)
    -- block_mask (true = masked) is the complement of allow_mask
    m:eval()
    local a = m(q, k, v, { allow_mask = allow })
    local b = m(q, k, v, { block_mask = allow:logical_not() })
    assert.are.equal(0, maxdiff(a, b))
    local additive = ember.zeros({ 5, 7 }, { dtype = "float64" }):masked_fill(allow:logical_not(), -math.huge)
    assert.is_true(maxdiff(a, m(q, k, v, { attn_mask = additive })) < 1e-12)
  end)

  it("builds its RoPE tables once per (dim, base, device, dtype) and reuses them", function()
    local m = nn.MultiHeadAttention{ d_model = 8, heads = 2, rope = true, rope_base = 777, dtype = "float64" }
    m:eval()
    local x = ember.randn({ 1, 6, 8 }, { dtype = "float64" })
    local y1 = m(x)
    local before = nn.MultiHeadAttention.rope_cache_info().builds
    for _ = 1, 3 do assert.are.equal(0, maxdiff(y1, m(x))) end
    -- decoding position by position narrows the same tables
    local cache, steps = {}, {}
    for t = 1, 6 do steps[t] = m:forward_cached(x:narrow(2, t, 1), cache) end
    local causal = m(x, { causal = true })
    assert.is_true(maxdiff(ember.cat(steps, 2), causal) < 1e-12)
    assert.are.equal(before, nn.MultiHeadAttention.rope_cache_info().builds)
  end)

  it("loads state dicts of the C module ember had before (w_q, ..., relpos.rel_k)", function()
    local m = nn.MultiHeadAttention(8, 2, { attention = "relpos", max_relative_position = 2 })
    local old = {}
    local map = m:legacy_names()
    local sd = m:state_dict()
    for o, n in pairs(map) do old[o] = sd[n]:clone():fill_(0.25) end
    local fresh = nn.MultiHeadAttention(8, 2, { attention = "relpos", max_relative_position = 2 })
    fresh:load_state_dict(old)
    assert.are.equal(0.25, fresh.q_proj.weight[1][1]:item())
    assert.are.equal(0.25, fresh.attn.rel_k[1][1]:item())
    -- and through a container's prefix
    local seq = nn.Sequential(nn.Linear(8, 8), nn.MultiHeadAttention(8, 2))
    local flat = {}
    for n, t in pairs(seq:state_dict()) do flat[n] = t end
    flat["2.w_q"], flat["2.q_proj.weight"] = flat["2.q_proj.weight"], nil
    seq:load_state_dict(flat)
  end)
end)

describe("checkpoints of earlier ember versions", function()
  it("load the model; their optimizer state is refused with the reason", function()
    local checkpoint, optim = require "ember.checkpoint", require "ember.optim"
    local m = nn.Sequential(nn.MultiHeadAttention(8, 2))
    local sd = m:state_dict()
    local old = {}
    for o, n in pairs(m[1]:legacy_names()) do old["1." .. o] = sd["1." .. n] end
    local path = os.tmpname() .. ".safetensors"
    checkpoint.save_tensors(path, old, { format = "ember", ["optimizer.type"] = "Adam" })
    local fresh = nn.Sequential(nn.MultiHeadAttention(8, 2))
    checkpoint.load(path, { model = fresh })
    assert.are.equal(0, maxdiff(fresh[1].q_proj.weight, m[1].q_proj.weight))
    local ok, err = pcall(checkpoint.load, path, { model = fresh, optimizer = optim.Adam(fresh:parameters()) })
    assert.is_false(ok)
    assert.truthy(err:find("earlier ember", 1, true), err)
    os.remove(path)
  end)
end)

describe("dtype names come from the core", function()
  it("ember.dtype_info knows every alias, and modules convert to floating dtypes only", function()
    assert.are.same({name = "float64", size = 8, floating = true}, ember.dtype_info("double"))
    assert.are.same({name = "bfloat16", size = 2, floating = true}, ember.dtype_info("bf16"))
    assert.is_false(ember.dtype_info("long").floating)
    local none, why = ember.dtype_info("float16")
    assert.is_nil(none)
    assert.truthy(why:find("unknown dtype 'float16'", 1, true), why)
    local m = nn.Sequential(nn.Linear(3, 2), nn.MultiHeadAttention{d_model = 4, heads = 2})
    m:to("f64")
    assert.are.equal("float64", m[1].weight.dtype)
    assert.are.equal("float64", m[2].attn.dtype)
    local ok, err = pcall(m.to, m, "int64")
    assert.is_false(ok)
    assert.truthy(err:find("Sequential.to: modules convert to floating-point dtypes", 1, true), err)
    assert.truthy(err:find("module_protocol_spec.lua:%d+:"), err) -- at the caller's line
  end)
end)

describe("parameter lists print readably", function()
  it("parameters(), named_parameters() and parameter_names() print their contents", function()
    local m = nn.Sequential(nn.Linear(3, 2))
    local s = tostring(m:parameters())
    assert.truthy(s:find("tensor(shape=[2, 3], dtype=float32, device=cpu)", 1, true), s)
    assert.truthy(tostring(m:named_parameters()):find('["1.bias"] = tensor(shape=[2]', 1, true))
    assert.are.equal('{"1.weight", "1.bias"}', tostring(m:parameter_names()))
    assert.are.equal(2, #m:parameters()) -- still a plain list
  end)
end)

describe("Hugging Face's and PyTorch's arguments of num_parameters and to", function()
  it("num_parameters(only_trainable, exclude_embeddings), positionally or by name (an unknown one is an error)", function()
    local Llama = require("ember.models").Llama
    local m = Llama { vocab_size = 40, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1,
      num_attention_heads = 2, tie_word_embeddings = true }
    local total, emb = 0, 40 * 16
    for _, p in ipairs(m:parameters()) do total = total + p:numel() end
    m.model.embed_tokens:requires_grad_(false)
    m.model.norm:requires_grad_(false)
    assert.are.equal(total, m:num_parameters())
    assert.are.equal(total - emb - 16, m:num_parameters(true)) -- the frozen ones left out (was: all of them)
    assert.are.equal(total - emb, m:num_parameters(false, true)) -- the tied embedding counted in neither
    assert.are.equal(total - emb - 16, m:num_parameters { only_trainable = true, exclude_embeddings = true })
    local ok, err = pcall(m.num_parameters, m, { trainable = true })
    assert.is_false(ok)
    assert.truthy(err:find("Llama.num_parameters: unknown option 'trainable'", 1, true), err)
    assert.truthy(err:find("module_protocol_spec.lua:%d+:"), err)
  end)

  it("to(dtype, non_blocking) and to{..., non_blocking =} convert, the flag ignored", function()
    local m = nn.Sequential(nn.Linear(3, 2), nn.MultiHeadAttention(4, 2))
    assert.are.equal(m, m:to("float64", true)) -- (was: an internal "attempt to index a boolean value")
    assert.are.equal("float64", m[1].weight.dtype)
    assert.are.equal("float64", m[2].dtype)
    m:to { dtype = "bfloat16", non_blocking = false }
    assert.are.equal("bfloat16", m[2].q_proj.weight.dtype)
    local ok, err = pcall(m.to, m, "float32", 3)
    assert.is_false(ok)
    assert.truthy(err:find("Sequential.to: the second argument must be a dtype or device name", 1, true), err)
    assert.truthy(err:find("module_protocol_spec.lua:%d+:"), err)
  end)
end)
