-- What earlier new-user probes left over: ember.save/ember.load keeping
-- requires_grad and ember.Size (as torch.save/torch.load), dim range errors
-- in PyTorch's words and ember's 1-based terms, bool type promotion,
-- data.pack's padding id through nn.Embedding, per-call tensors for the
-- decoder's cross-attention, and the REPL. Each block is a defect found by
-- probing; values are PyTorch 1.13's, and the test fails without its fix.
local ember = require "ember"
local nn = require "ember.nn"
local checkpoint = require "ember.checkpoint"
local raises_here = require("tests.lua.helpers.parity").raises_here
local tmpdir = require "tests.lua.helpers.tmpdir"

describe("ember.save / ember.load keep requires_grad and ember.Size, as torch.save", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("a tensor that requires grad loads as a leaf that requires grad; one that does not, does not", function()
    local x = ember.randn(2, 3):requires_grad_()
    ember.save(x, dir .. "/x.safetensors")
    local back = ember.load(dir .. "/x.safetensors")
    assert.is_true(back.requires_grad)
    assert.is_true(back.is_leaf)
    assert.is_true(ember.equal(back:detach(), x:detach()))
    ember.save(ember.ones(2), dir .. "/y.safetensors")
    assert.is_false(ember.load(dir .. "/y.safetensors").requires_grad)
  end)

  it("inside a flat table of tensors and a nest, each tensor keeps its own flag", function()
    local w, b = ember.randn(2, 2):requires_grad_(), ember.zeros(2)
    ember.save({ w = w, b = b }, dir .. "/flat.safetensors")
    local flat = ember.load(dir .. "/flat.safetensors")
    assert.is_true(flat.w.requires_grad)
    assert.is_false(flat.b.requires_grad)
    ember.save({ params = { w = w, b = b }, list = { b, w }, epoch = 2 }, dir .. "/nest.safetensors")
    local nest = ember.load(dir .. "/nest.safetensors")
    assert.is_true(nest.params.w.requires_grad)
    assert.is_false(nest.params.b.requires_grad)
    assert.is_false(nest.list[1].requires_grad)
    assert.is_true(nest.list[2].requires_grad)
    assert.are.equal(2, nest.epoch)
  end)

  it("an ember.Size loads as an ember.Size, alone and in a nest (a 0-d one too)", function()
    local x = ember.zeros(2, 3)
    ember.save(x.shape, dir .. "/s.safetensors")
    local s = ember.load(dir .. "/s.safetensors")
    assert.are.equal(getmetatable(ember.Size { 1 }), getmetatable(s))
    assert.are.equal(ember.Size { 2, 3 }, s)
    assert.are.equal(6, s:numel())
    ember.save({ shape = x.shape, scalar = ember.tensor(1).shape, shapes = { x.shape } }, dir .. "/n.safetensors")
    local n = ember.load(dir .. "/n.safetensors")
    assert.are.equal("ember.Size{2, 3}", tostring(n.shape))
    assert.are.equal("ember.Size{}", tostring(n.scalar))
    assert.are.equal("ember.Size{2, 3}", tostring(n.shapes[1]))
  end)

  it("a number, boolean or string alone round-trips too, as torch.save(3) (exact: integers, floats, inf)", function()
    for _, v in ipairs { 3, -7, 0.1, 1 / 3, math.huge, -math.huge, true, false, "epoch 3", "" } do
      ember.save(v, dir .. "/v.safetensors")
      local back = ember.load(dir .. "/v.safetensors")
      assert.are.equal(v, back)
      assert.are.equal(math.type(v), math.type(back))
    end
    raises_here(function() ember.save(print, dir .. "/f.safetensors") end, "ember.save: can save a tensor, a table")
  end)

  it("a module's state dict is still a plain safetensors file (format pt, names as they are), no flags", function()
    local m = nn.Linear(2, 3)
    ember.save(m, dir .. "/m.safetensors")
    local tensors, meta = checkpoint.load_tensors(dir .. "/m.safetensors")
    assert.are.equal("pt", meta.format)
    assert.is_not_nil(tensors.weight)
    assert.is_not_nil(tensors.bias)
    for k in pairs(meta) do assert.is_nil(k:find("requires_grad", 1, true), k) end
    assert.is_false(ember.load(dir .. "/m.safetensors").weight.requires_grad) -- as torch's state_dict()
    m:load_state_dict(ember.load(dir .. "/m.safetensors"))
  end)
end)

describe("dim range errors name the tensor's own dims, in 1-based terms", function()
  -- PyTorch 1.13: torch.zeros(2, 3).unsqueeze(3) -> "Dimension out of range (expected to be
  -- in range of [-3, 2], but got 3)": a 2-d tensor has 3 places for a new dim
  it("unsqueeze and stack: a 2-d tensor, a new dim at 1..3 or -3..-1", function()
    local x = ember.zeros(2, 3)
    raises_here(function() return x:unsqueeze(4) end,
      "ember.unsqueeze: dim 4 is out of range for a 2-d tensor (dims are 1-based: a new dim goes at 1..3 or -3..-1)")
    raises_here(function() return x:unsqueeze(-4) end, "ember.unsqueeze: dim -4 is out of range for a 2-d tensor")
    raises_here(function() return ember.tensor(1):unsqueeze(2) end,
      "ember.unsqueeze: dim 2 is out of range for a 0-d tensor (dims are 1-based: a new dim goes at 1..1 or -1..-1)")
    raises_here(function() return ember.stack({ x, x }, 4) end,
      "ember.stack: dim 4 is out of range for a 2-d tensor (dims are 1-based: a new dim goes at 1..3 or -3..-1)")
    assert.are.equal(ember.Size { 2, 3, 1 }, x:unsqueeze(3).shape)
    assert.are.equal(ember.Size { 1, 2, 3 }, x:unsqueeze(-3).shape)
    assert.are.equal(ember.Size { 2, 3, 2 }, ember.stack({ x, x }, -1).shape)
    assert.are.equal(ember.Size { 2, 2, 3 }, ember.stack({ x, x }, -3).shape)
  end)
  it("the ops that take an existing dim say 1..2 or -2..-1 for a 2-d tensor", function()
    local x = ember.zeros(2, 3)
    for op, f in pairs {
      squeeze = function() return x:squeeze(3) end, transpose = function() return x:transpose(1, 3) end,
      narrow = function() return x:narrow(3, 1, 1) end, select = function() return x:select(-3, 1) end,
      cat = function() return ember.cat({ x, x }, 3) end, softmax = function() return x:softmax(3) end,
      log_softmax = function() return x:log_softmax(-3) end, flatten = function() return x:flatten(1, 3) end,
    } do
      raises_here(function() local _ = f() end, "ember." .. op .. ": dim ")
      raises_here(function() local _ = f() end, " is out of range for a 2-d tensor (dims are 1-based: 1..2 or -2..-1)")
    end
  end)
  it("a 0-d tensor takes dim 1 or -1 in squeeze and transpose, as torch's dim 0 (it stays 0-d)", function()
    -- torch: torch.tensor(5.).squeeze(0).shape == torch.Size([]); .transpose(0, -1) too
    local s = ember.tensor(5):requires_grad_()
    assert.are.equal(ember.Size {}, s:squeeze(1).shape)
    assert.are.equal(ember.Size {}, s:squeeze(-1).shape)
    assert.are.equal(ember.Size {}, s:transpose(1, -1).shape)
    s:transpose(1, 1):squeeze(1):backward()
    assert.are.equal(1, s.grad:item())
    raises_here(function() local _ = s:squeeze(2) end, "ember.squeeze: dim 2 is out of range for a 0-d tensor (dims 1 or -1)")
    raises_here(function() local _ = s:transpose(1, 2) end, "ember.transpose: dim 2 is out of range for a 0-d tensor")
  end)
  it("all, any, norm, std, nansum and nanmean name themselves, not the sum or var they run", function()
    local x = ember.zeros(2, 3)
    for op, f in pairs {
      all = function() return x:all(3) end, any = function() return x:any(-3) end,
      norm = function() return x:norm(2, 3) end, std = function() return x:std(3) end,
      nansum = function() return x:nansum({ 1, 3 }) end, nanmean = function() return x:nanmean(3) end,
    } do
      raises_here(function() local _ = f() end, "ember." .. op .. ": dim ")
    end
    assert.are.equal(ember.Size { 2 }, x:any(2).shape)
    assert.are.equal(ember.Size { 3 }, x:std(1).shape)
  end)
end)

describe("bool tensors in arithmetic promote as PyTorch 1.13's", function()
  local a, b = ember.tensor { true, false, true }, ember.tensor { true, true, false }
  it("bool + bool and bool * bool are bool (or, and), as are maximum and minimum", function()
    -- torch: a + b -> tensor([True, True, True]); a * b -> tensor([True, False, False])
    for _, case in ipairs {
      { a + b, { true, true, true } }, { a:add(b), { true, true, true } }, { a * b, { true, false, false } },
      { a:mul(b), { true, false, false } }, { ember.maximum(a, b), { true, true, true } },
      { ember.minimum(a, b), { true, false, false } }, { a + true, { true, true, true } },
      { false + a, { true, false, true } }, { a * false, { false, false, false } },
      { a + ember.tensor(false), { true, false, true } },
    } do
      assert.are.equal("bool", case[1].dtype)
      assert.are.same(case[2], case[1]:totable())
    end
    local c = a:clone()
    c:add_(b)
    assert.are.same({ true, true, true }, c:totable())
    c = a:clone()
    c:mul_(b)
    assert.are.same({ true, false, false }, c:totable())
  end)
  it("with numbers and other dtypes they count as 0 and 1", function()
    -- torch: a + 1 -> int64 [2, 1, 2]; a * 1.5 -> float32; a / b -> float32 [1, 0, inf]; a + int64 -> int64
    for _, case in ipairs {
      { a + 1, "int64", { 2, 1, 2 } }, { a * 1.5, "float32", { 1.5, 0, 1.5 } },
      { a / b, "float32", { 1, 0, math.huge } }, { a + ember.tensor({ 1, 2, 3 }, "int64"), "int64", { 2, 2, 4 } },
      { ember.tensor({ 1, 2, 3 }, "int64") + true, "int64", { 2, 3, 4 } }, { ember.ones(3) * b, "float32", { 1, 1, 0 } },
    } do
      assert.are.equal(case[2], case[1].dtype)
      assert.are.same(case[3], case[1]:totable())
    end
  end)
  it("subtraction and negation refuse bools in PyTorch's words", function()
    local two = "Subtraction, the `-` operator, with two bool tensors is not supported. Use logical_xor() instead"
    local one = "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use logical_not() instead"
    raises_here(function() local _ = a - b end, "ember.sub: " .. two)
    raises_here(function() local _ = a:sub(b) end, two)
    raises_here(function() local _ = a - true end, two)
    raises_here(function() local _ = a - 1 end, one)
    raises_here(function() local _ = 1 - a end, one)
    raises_here(function() local _ = ember.ones(3) - a end, one)
    raises_here(function() local _ = a - ember.tensor({ 1, 2, 3 }, "int64") end, one)
    raises_here(function() local _ = -a end,
      "ember.neg: Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use logical_not() instead")
    raises_here(function() a:clone():add_(1) end, "ember.add_: result type int64 can't be cast to the desired output type bool")
    raises_here(function() a:clone():mul_(2) end, "ember.mul_: result type int64 can't be cast to the desired output type bool")
  end)
  it("add's alpha keeps two bools bool (torch.add(a, b, alpha=2) is a or b)", function()
    local s = a:add(b, { alpha = 2 })
    assert.are.equal("bool", s.dtype)
    assert.are.same({ true, true, true }, s:totable())
    assert.are.same({ true, false, true }, a:add(b, { alpha = 0 }):totable())
  end)
end)

describe("data.pack -> nn.Embedding -> a Transformer layer, as its docs show", function()
  it("tokens and positions index Embedding tables as they are; packed equals each document alone", function()
    ember.manual_seed(7)
    local seqs = { { 3, 4, 5 }, { 6, 7 }, { 8, 9, 10, 11 } }
    local p = ember.data.pack(seqs, 6, { pad_id = 1 })
    assert.are.equal(1, p.pad_id)
    assert.are.same({ { 3, 4, 5, 6, 7, 1 }, { 8, 9, 10, 11, 1, 1 } }, p.tokens:totable())
    assert.are.same({ { 1, 2, 3, 1, 2, 1 }, { 1, 2, 3, 4, 1, 1 } }, p.pos:totable()) -- padding at position 1, not 0
    local tok = nn.Embedding(12, 8, { padding_idx = p.pad_id })
    local pos = nn.Embedding(6, 8)
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, attention = "document" })
    local x = tok(p.tokens) + pos(p.pos)
    local y = layer(x, { variant_inputs = { doc = p.doc }, key_padding_mask = p.padding, causal = true })
    assert.are.equal(ember.Size { 2, 6, 8 }, y.shape)
    -- each document alone (standard causal attention over its own tokens and positions)
    local ref = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 })
    ref:load_state_dict(layer:state_dict())
    local where = { { 1, 1 }, { 1, 4 }, { 2, 1 } }
    for i, s in ipairs(seqs) do
      local ids, ps = ember.tensor({ s }, "int64"), ember.arange(1, #s + 1, { dtype = "int64" }):unsqueeze(1)
      local alone = ref(tok(ids) + pos(ps), { causal = true })
      local packed = y:narrow(1, where[i][1], 1):narrow(2, where[i][2], #s)
      assert.is_true((alone - packed):abs():max():item() < 1e-5, "document " .. i)
    end
    -- a loss that skips the padding, and gradients for both tables
    local head = nn.Linear(8, 12)
    local loss = nn.CrossEntropyLoss { ignore_index = p.pad_id }(head(y):view(-1, 12), p.tokens:view(-1))
    loss:backward()
    assert.is_true(ember.isfinite(loss):item())
    assert.are.equal(0, tok.weight.grad[p.pad_id]:abs():sum():item())
    assert.is_true(pos.weight.grad:abs():sum():item() > 0)
  end)
end)

describe("per-call tensors for the cross-attention's variant (as variant_inputs for self-attention)", function()
  -- a per-call bias on the memory's keys: the same as a float memory mask on standard attention
  ember.attention_variant { name = "leftover_key_bias", inputs = { kbias = { ndim = 2, dtype = "float" } },
    score = function(s, b, h, q, k, ctx) return s + ctx.kbias[b][k] end }
  local function close(a, b) return (a - b):abs():max():item() < 1e-5 end

  it("TransformerDecoderLayer: memory_variant_inputs, in a batch and with a KV cache", function()
    ember.manual_seed(11)
    local layer = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, cross_attention = "leftover_key_bias" })
    local ref = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 })
    ref:load_state_dict(layer:state_dict())
    local x, mem, kb = ember.randn(2, 5, 8), ember.randn(2, 4, 8), ember.randn(2, 4)
    local y = layer(x, mem, { memory_variant_inputs = { kbias = kb } })
    assert.is_true(close(y, ref(x, mem, { memory_mask = kb:view(2, 1, 1, 4) })))
    local cache, steps = {}, {}
    for i = 1, 5 do steps[i] = layer(x:narrow(2, i, 1), mem, { cache = cache, memory_variant_inputs = { kbias = kb } }) end
    assert.is_true(close(ember.cat(steps, 2), y))
    raises_here(function() layer(x, mem) end, "needs the per-call tensor 'kbias' (memory_variant_inputs = {kbias = ...})")
  end)

  it("TransformerDecoder and nn.Transformer{cross_attention=} hand them to every layer", function()
    ember.manual_seed(12)
    local dec = nn.TransformerDecoder(8, 2, 2, { dim_feedforward = 16, dropout = 0, cross_attention = "leftover_key_bias" })
    local ref = nn.TransformerDecoder(8, 2, 2, { dim_feedforward = 16, dropout = 0 })
    ref:load_state_dict(dec:state_dict())
    local x, mem, kb = ember.randn(2, 3, 8), ember.randn(2, 4, 8), ember.randn(2, 4)
    assert.is_true(close(dec(x, mem, { memory_variant_inputs = { kbias = kb } }), ref(x, mem, { memory_mask = kb:view(2, 1, 1, 4) })))
    local t = nn.Transformer { d_model = 8, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 16,
      dropout = 0, cross_attention = "leftover_key_bias" }
    local tr = nn.Transformer { d_model = 8, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 16,
      dropout = 0 }
    tr:load_state_dict(t:state_dict())
    local src = ember.randn(2, 4, 8)
    assert.is_true(close(t(src, x, { memory_variant_inputs = { kbias = kb } }), tr(src, x, { memory_mask = kb:view(2, 1, 1, 4) })))
  end)

  it("CrossAttentionBlock: image_variant_inputs for the cross-attention, variant_inputs for the self-attention", function()
    ember.manual_seed(13)
    local blk = nn.CrossAttentionBlock(8, 2, { dropout = 0, attention = "leftover_key_bias" })
    local ref = nn.CrossAttentionBlock(8, 2, { dropout = 0 })
    ref:load_state_dict(blk:state_dict())
    local text, image, ib = ember.randn(2, 3, 8), ember.randn(2, 6, 8), ember.randn(2, 6)
    assert.is_true(close(blk(text, image, { image_variant_inputs = { kbias = ib } }),
      ref(text, image, { image_mask = ib:view(2, 1, 1, 6) })))
    local both = nn.CrossAttentionBlock(8, 2, { dropout = 0, attention = "leftover_key_bias", self_attention = true })
    local tb = ember.randn(2, 3)
    local y = both(text, image, { variant_inputs = { kbias = tb }, image_variant_inputs = { kbias = ib } })
    local y0 = both(text, image, { variant_inputs = { kbias = ember.zeros(2, 3) }, image_variant_inputs = { kbias = ib } })
    assert.is_false(close(y, y0)) -- the self-attention saw its own tensors
    raises_here(function() both(text, image, { image_variant_inputs = { kbias = ib } }) end, "needs the per-call tensor 'kbias' (variant_inputs = {kbias = ...})")
    raises_here(function() blk(text, image) end, "(image_variant_inputs = {kbias = ...})")
    raises_here(function() blk(text, image, { image_padding = ib }) end, "CrossAttentionBlock.forward: unknown option 'image_padding'")
  end)
end)

describe("the REPL's helpers: ember.load_plugin's errors and help of values", function()
  it("ember.load_plugin of a bad path, a non-plugin or no path raises at the caller's line, naming itself", function()
    raises_here(function() ember.load_plugin("/nonexistent/leftover.so") end,
      "ember.load_plugin: /nonexistent/leftover.so: cannot open")
    raises_here(function() ember.load_plugin() end,
      "ember.load_plugin: expected the path of a plugin (a .so file or a .lua variant), got nil")
    raises_here(function() ember.load_plugin("/nonexistent/leftover.lua") end, "ember.load_plugin: cannot open /nonexistent/leftover.lua")
    assert.is_true(#ember.plugins() > 0) -- nothing changed
  end)
  it("help of a module, an optimizer, a tensor or a Size shows its class's entry", function()
    local doc = require "ember._doc"
    local m = nn.Linear(2, 3)
    local opt = require("ember.optim").SGD(m:parameters(), { lr = 0.1 })
    assert.are.equal("nn.Linear", select(2, doc.lookup(m)))
    assert.are.equal("optim.SGD", select(2, doc.lookup(opt)))
    assert.are.equal("ember.Tensor", select(2, doc.lookup(ember.zeros(2))))
    assert.are.equal("ember.Size", select(2, doc.lookup(ember.zeros(2).shape)))
    assert.is_nil(select(2, doc.lookup({ 1, 2 })))
  end)
  it("help(nn), help(optim), help(\"data\") and help(ember) list what the namespace holds, by kind", function()
    local doc = require "ember._doc"
    local nn_text = doc.namespace_entry(nn)
    assert.truthy(nn_text:find("^nn: ember.nn; help%(nn.<name>%) shows one"), nn_text)
    assert.truthy(nn_text:find("classes: AbsCriterion, AdaptiveAvgPool1d,", 1, true), nn_text) -- sorted
    assert.truthy(nn_text:find(" Linear,", 1, true), nn_text)
    assert.truthy(nn_text:find("tables: functional, init", 1, true), nn_text)
    assert.truthy(doc.namespace_entry("optim"):find(" AdamW,", 1, true))
    assert.truthy(doc.namespace_entry(ember.data):find("functions: default_collate, pack, pad", 1, true))
    assert.truthy(doc.namespace_entry(ember):find(" zeros_like", 1, true))
    assert.is_nil(doc.namespace_entry({}))
    for line in nn_text:gmatch("[^\n]+") do assert.is_true(#line <= 100, line) end
    local printed = {}
    local print0 = _G.print
    _G.print = function(s) printed[#printed + 1] = s end
    local ok = pcall(ember.help, nn)
    _G.print = print0
    assert.is_true(ok)
    assert.are.equal(nn_text, printed[1])
  end)
  it("help of a function exported twice finds its entry; LDoc's @int/@string tags render as @tparam's", function()
    local doc = require "ember._doc"
    local text, name = doc.lookup(ember.data.pack) -- also data.packing.pack: the documented name, whatever pairs() gives
    assert.are.equal("data.packing.pack", name)
    assert.is_string(text)
    assert.are.equal("  len (int): positions per row", doc.render("@int len positions per row"))
    assert.are.equal("  path (string): where", doc.render("@string path where"))
  end)
end)

describe("the REPL prints a class as <class name>, not its methods", function()
  it("nn.Linear, optim.Adam, ember.Size alone and inside a table; instances and plain tables as before", function()
    local repr = require("ember._listing").repr
    local optim = require "ember.optim"
    assert.are.equal("<class nn.Linear>", repr(nn.Linear))
    assert.are.equal("<class optim.Adam>", repr(optim.Adam))
    assert.are.equal("<class ember.Size>", repr(ember.Size))
    assert.are.equal("{a = <class nn.ReLU>, b = 1}", repr({ a = nn.ReLU, b = 1 }))
    assert.are.equal("Linear(in_features=2, out_features=3, bias=true)", repr(nn.Linear(2, 3)))
    assert.are.equal("{1, 2, k = \"v\"}", repr({ 1, 2, k = "v" }))
    assert.are.equal("<class data.Vocab>", repr(ember.data.Vocab)) -- a class that indexes itself and prints its instances
    assert.are.equal("<function ember.zeros>", repr(ember.zeros))
    assert.are.equal("{f = <function nn.init.zeros_>}", repr({ f = require("ember.nn").init.zeros_ }))
    local mine = function() end
    assert.are.equal(tostring(mine), repr(mine))
  end)
  it("ember.attention_variants() keeps its columns for names longer than ten characters", function()
    ember.attention_variant { name = "leftover_long_variant_name", description = "a long name",
      score = function(s) return s end }
    local lines = {}
    for line in tostring(ember.attention_variants()):gmatch("[^\n]+") do lines[#lines + 1] = line end
    local col
    for _, line in ipairs(lines) do
      if not line:find("^%s") then
        local space = line:find("%s")
        local at = line:find("%S", space) -- where the version column starts
        assert.is_number(at, line)
        col = col or at
        assert.are.equal(col, at, line)
      end
    end
    assert.is_true(#lines > 3)
  end)
end)

describe("a script's command line (ember.cli)", function()
  local cli = require "ember.cli"
  local conf = { script = "x.lua", options = { { "shift", 0, "a signed number" }, { "name", "a", "a string" } } }
  it("takes a negative number as an option's value (--seed -3, --shift -1.5), as Python's argparse", function()
    local o = cli.parse_only({ "--seed", "-3", "--shift", "-1.5", "--name", "-" }, conf)
    assert.are.equal(-3, o.seed)
    assert.are.equal(-1.5, o.shift)
    assert.are.equal("-", o.name)
    assert.are.equal(-2, cli.parse_only({ "--shift=-2" }, conf).shift)
  end)
  it("refuses a non-positive --epochs/--threads/--max_steps and a negative --lr by name, before the script runs", function()
    for _, case in ipairs {
      { { "--epochs", "-1" }, "option --epochs must be a positive integer, got -1" },
      { { "--threads", "0" }, "option --threads must be a positive integer, got 0" },
      { { "--max_steps", "0" }, "option --max_steps must be a positive integer, got 0" },
      { { "--lr", "-1" }, "option --lr must be a number >= 0, got -1" },
    } do
      local ok, err = pcall(cli.parse_only, case[1], conf)
      assert.is_false(ok)
      assert.are.equal(case[2], err)
    end
  end)
end)

describe("--attention_options are checked when the command line is read", function()
  it("a misspelt or mistyped option of the variant is named before the script loads its data", function()
    local cli = require "ember.cli"
    local function check(...) return pcall(cli.check_attention_options, cli.parse_only({ ... }, { script = "x.lua" })) end
    local ok, err = check("--attention", "softcap", "--attention_options", "capp=3")
    assert.is_false(ok)
    assert.are.equal("option --attention_options: attention 'softcap': unknown option 'capp'; accepted options: cap (float, default 50)", err)
    ok, err = check("--attention", "softcap", "--attention_options", "cap=abc")
    assert.is_false(ok)
    assert.truthy(err:find("option 'cap' must be a number", 1, true), err)
    assert.is_true((check("--attention", "softcap", "--attention_options", "cap=20")))
    assert.is_true((check("--attention", "softcap")))
    -- cli.parse runs the check: the script stops with the message and status 2
    local ember_bin = (os.getenv("EMBER_BUILD_DIR") or "build") .. "/bin/ember" -- as script_help_spec runs it
    local f = io.popen(ember_bin .. " -e 'require(\"ember.cli\").parse({\"--attention\", "
      .. "\"softcap\", \"--attention_options\", \"capp=3\"}, {script = \"x.lua\"}) print(\"ran on\")' 2>&1; echo rc=$?")
    local out = f:read("a")
    f:close()
    assert.truthy(out:find("x.lua: option --attention_options: attention 'softcap': unknown option 'capp'", 1, true), out)
    assert.truthy(out:find("rc=2", 1, true), out)
    assert.is_nil(out:find("ran on", 1, true))
  end)
end)
