-- ember's modern-model features probed as a PyTorch / Hugging Face user
-- writes them (helper 76): each case failed, or did something else than
-- the user meant, before its fix.
local ember = require "ember"
local nn = require "ember.nn"

-- the message of a failed call, or nil
local err_of = require("tests.lua.helpers.parity").error_of

describe("nn.FeedForward in Lua's table of names", function()
  it("nn.FeedForward{d_model =, d_ff =, gated = true} builds what the positional form builds", function()
    -- was: 'Linear: in_features must be a positive integer, got table' from inside FeedForward
    ember.manual_seed(3)
    local a = nn.FeedForward{ d_model = 6, d_ff = 10, gated = true, activation = "gelu", bias = false }
    ember.manual_seed(3)
    local b = nn.FeedForward(6, 10, { gated = true, activation = "gelu", bias = false })
    assert.are.equal("geglu", a.activation_name)
    assert.is_nil(a.linear1.bias)
    local x = ember.randn(2, 3, 6)
    assert.is_true(a(x):equal(b(x)))
    -- the Transformer layers' (PyTorch's) name of d_ff, and the options after the sizes
    local w = nn.FeedForward{ d_model = 4, dim_feedforward = 16 }.linear1.weight
    assert.are.same({ 16, 4 }, { w.shape[1], w.shape[2] })
    assert.are.equal("swiglu", nn.FeedForward(4, 8, "swiglu").activation_name)
  end)

  it("a missing size names FeedForward at the user's line", function()
    local e = err_of(function() nn.FeedForward{ d_model = 16 } end)
    assert.matches("helper76_probe_spec.lua:%d+: FeedForward: d_ff must be a positive integer, got nil", e)
    e = err_of(function() nn.FeedForward(16) end)
    assert.matches("FeedForward: d_ff must be a positive integer", e)
    assert.matches("unknown option 'act'", err_of(function() nn.FeedForward{ d_model = 4, d_ff = 8, act = "gelu" } end))
  end)
end)

describe("nn.checkpoint with torch.utils.checkpoint's keyword arguments", function()
  it("{use_reentrant = false} after fn's arguments is checkpoint's, not fn's", function()
    -- was: the table reached fn (a layer then refused 'use_reentrant', a function silently got it)
    ember.manual_seed(0)
    local layer = nn.TransformerEncoderLayer(8, 2)
    layer:eval()
    local x = ember.randn(2, 5, 8)
    local x1 = x:clone():requires_grad_()
    nn.checkpoint(layer, x1, { use_reentrant = false }):sum():backward()
    local x2 = x:clone():requires_grad_()
    layer(x2):sum():backward()
    assert.is_true(x1.grad:equal(x2.grad))
    local seen
    local function f(...)
      seen = select("#", ...)
      return (...) * 2
    end
    nn.checkpoint(f, x:clone():requires_grad_(), { use_reentrant = true, preserve_rng_state = true })
    assert.are.equal(1, seen)
    ember.no_grad(function() nn.checkpoint(f, x, { use_reentrant = false }) end)
    assert.are.equal(1, seen)
    nn.checkpoint(f, x:clone():requires_grad_(), { debug = true }) -- debug alone: fn's own option
    assert.are.equal(2, seen)
    -- an options table of fn's own still reaches it
    local pad = ember.tensor({ { false, false, false, true, true }, { false, false, false, false, false } })
    assert.is_true(nn.checkpoint(layer, x, { key_padding_mask = pad }):equal(layer(x, { key_padding_mask = pad })))
  end)

  it("checkpoint's options beside fn's, or bad values, are errors naming nn.checkpoint", function()
    local layer = nn.Linear(4, 4)
    local x = ember.randn(2, 4)
    assert.matches("helper76_probe_spec.lua:%d+: nn.checkpoint: the last argument mixes",
      err_of(function() nn.checkpoint(layer, x, { use_reentrant = false, key_padding_mask = 1 }) end))
    assert.matches("use_reentrant must be true or false, got no",
      err_of(function() nn.checkpoint(layer, x, { use_reentrant = "no" }) end))
    assert.matches("context_fn is not supported",
      err_of(function() nn.checkpoint(layer, x, { context_fn = function() end }) end))
  end)

  it("checkpoint_sequential takes them after input, and refuses anything else there", function()
    -- was: any argument after input silently ignored
    local net = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 4), nn.GELU())
    local x = ember.randn(3, 4)
    local a = x:clone():requires_grad_()
    nn.checkpoint_sequential(net, 2, a, { use_reentrant = false }):sum():backward()
    local b = x:clone():requires_grad_()
    net(b):sum():backward()
    assert.is_true(a.grad:equal(b.grad))
    assert.matches("helper76_probe_spec.lua:%d+: nn.checkpoint_sequential: expected %(functions, segments, input",
      err_of(function() nn.checkpoint_sequential(net, 2, x, { foo = 1 }) end))
  end)
end)

describe("nn.init as torch.nn.init", function()
  it("dirac_: a convolution weight that passes its channels through (was: no dirac_)", function()
    local w = nn.init.dirac_(ember.empty(4, 4, 3, 3))
    local x = ember.randn(1, 4, 5, 5)
    assert.is_true(ember.allclose(nn.functional.conv2d(x, w, nil, 1, 1), x))
    -- groups, and fewer in-channels than a group's out-channels (torch: w[g * 3 + d, d, 1] = 1)
    local g = nn.init.dirac_(ember.randn(6, 2, 3), 2)
    local want = ember.zeros(6, 2, 3)
    for _, at in ipairs { { 1, 1 }, { 2, 2 }, { 4, 1 }, { 5, 2 } } do want[at[1]][at[2]][2] = 1 end
    assert.is_true(g:equal(want))
    assert.matches("nn.init.dirac_: needs a convolution weight of 3, 4 or 5 dims",
      err_of(function() nn.init.dirac_(ember.empty(6, 2)) end))
    assert.matches("groups must be a positive integer dividing dim 1",
      err_of(function() nn.init.dirac_(ember.empty(6, 2, 3), 4) end))
  end)

  it("sparse_: ceil(sparsity * rows) zeros in every column, N(0, std^2) elsewhere (was: no sparse_)", function()
    ember.manual_seed(0)
    local w = nn.init.sparse_(ember.empty(10, 300), 0.25, 2)
    assert.is_true(w:eq(0):sum(1):eq(3):all():item())
    local kept = w:masked_select(w:ne(0))
    assert.is_true(math.abs(kept:std():item() - 2) < 0.1)
    -- the zeros fall on different rows from column to column
    assert.is_true(w:eq(0):sum(2):gt(0):all():item())
    assert.is_true(nn.init.sparse_(ember.empty(4, 3), { sparsity = 0.5 }):eq(0):sum(1):eq(2):all():item())
  end)

  it("kaiming on a zero-element tensor is a no-op, as PyTorch's (was: 'the fan_in ... is 0')", function()
    assert.are.equal(0, nn.init.kaiming_uniform_(ember.empty(3, 0)):numel())
    assert.are.equal(0, nn.init.kaiming_normal_(ember.empty(3, 0), 0, "fan_in", "relu"):numel())
  end)
end)

describe("nn.MultiHeadAttention.forward with torch.nn.MultiheadAttention's call", function()
  local mha = nn.MultiHeadAttention(8, 2)
  local x = ember.randn(2, 3, 8)

  it("is_causal and attention_mask say what ember's module takes", function()
    -- was: only 'unknown option' and the list (average_attn_weights is taken
    -- now: helper83_probe_spec)
    assert.matches("unknown option 'is_causal': PyTorch's is_causal is causal here",
      err_of(function() mha(x, x, x, { is_causal = true }) end))
    assert.matches("key_padding_mask = attention_mask:eq%(0%)",
      err_of(function() mha(x, { attention_mask = ember.ones(2, 3) }) end))
  end)

  it("a mask in PyTorch's [B * heads, Lq, Lk] layout is refused with the view that gives ember's", function()
    local mask = ember.randn(4, 3, 3)
    local e = err_of(function() mha(x, { attn_mask = mask }) end)
    assert.matches("helper76_probe_spec.lua:%d+: .*PyTorch's %[B %* heads, Lq, Lk%] layout: give attn_mask:view%(2, 2, 3, 3%)", e)
    -- the view it names computes PyTorch's mask
    local y = mha(x, { attn_mask = mask:view(2, 2, 3, 3) })
    local torch_style = nn.MultiheadAttention(8, 2, { batch_first = true })
    torch_style:load_state_dict(mha:state_dict())
    local want = torch_style(x, x, x, { attn_mask = mask, need_weights = false })
    assert.is_true(ember.allclose(y, want, 1e-5, 1e-6))
  end)
end)

describe("models.Llama with tie_word_embeddings", function()
  local Llama = require("ember.models").Llama
  local cfg = { vocab_size = 20, hidden_size = 8, intermediate_size = 16, num_hidden_layers = 1,
                num_attention_heads = 2, tie_word_embeddings = true }

  it("load_state_dict takes a state dict that lists the tied weight under lm_head.weight too", function()
    -- PyTorch's state_dict() of a tied LlamaForCausalLM holds both names; was:
    -- 'Llama.load_state_dict: names do not match the module: unexpected lm_head.weight'
    ember.manual_seed(1)
    local src = Llama(cfg)
    local sd = src:state_dict()
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]:clone()
    local m = Llama(cfg)
    m:load_state_dict(sd)
    local ids = ember.tensor({ { 3, 7, 2 } }, { dtype = "int64" })
    assert.is_true(m(ids):equal(src(ids)))
    assert.is_not_nil(sd["lm_head.weight"]) -- the caller's table is left as it was
  end)

  it("an lm_head.weight that differs from the embedding is an error naming both", function()
    local sd = Llama(cfg):state_dict()
    sd["lm_head.weight"] = ember.randn(20, 8)
    assert.matches("helper76_probe_spec.lua:%d+: Llama.load_state_dict: lm_head.weight differs from "
      .. "model.embed_tokens.weight, but tie_word_embeddings is set", err_of(function() Llama(cfg):load_state_dict(sd) end))
  end)
end)

describe("models.Llama save_pretrained", function()
  it("keeps config.json's bos_token_id (was dropped: transformers then read its own default)", function()
    local Llama = require("ember.models").Llama
    local m = Llama{ vocab_size = 20, hidden_size = 8, intermediate_size = 16, num_hidden_layers = 1,
                     num_attention_heads = 2, bos_token_id = 7, eos_token_id = 9 }
    local dir = os.tmpname()
    os.remove(dir)
    m:save_pretrained(dir)
    local f = io.open(dir .. "/config.json")
    local cfg = ember._json_decode(f:read("a"))
    f:close()
    os.remove(dir .. "/config.json")
    os.remove(dir .. "/model.safetensors")
    os.remove(dir)
    assert.are.equal(7, cfg.bos_token_id)
    assert.are.equal(9, cfg.eos_token_id)
    assert.matches("config.bos_token_id must be a token id >= 0", err_of(function()
      Llama{ vocab_size = 20, hidden_size = 8, intermediate_size = 16, num_hidden_layers = 1, num_attention_heads = 2,
             bos_token_id = -1 }
    end))
  end)
end)

describe("nn.MultiHeadAttention.forward_cached with kdim/vdim", function()
  it("refuses what it cannot compute naming forward_cached, not an inner Linear", function()
    -- was: 'Linear.forward: input's last dim is 10, expected in_features=6'
    local m = nn.MultiHeadAttention{ d_model = 16, heads = 4, kv_heads = 2, kdim = 10, vdim = 6 }:eval()
    assert.matches("helper76_probe_spec.lua:%d+: MultiHeadAttention.forward_cached: cross%-attention over a memory needs "
      .. "kdim = vdim", err_of(function() m:forward_cached(ember.randn(2, 1, 16), {}, { memory = ember.randn(2, 5, 10) }) end))
    local s = nn.MultiHeadAttention{ d_model = 16, heads = 4, kdim = 10, vdim = 10 }:eval()
    assert.matches("forward_cached: self%-attention projects the new tokens x into keys and values, so kdim and vdim "
      .. "must equal d_model=16", err_of(function() s:forward_cached(ember.randn(1, 2, 16), {}) end))
    -- a memory of kdim = vdim still decodes as forward computes
    local q, mem = ember.randn(1, 2, 16), ember.randn(1, 3, 10)
    assert.is_true(ember.allclose(s:forward_cached(q, {}, { memory = mem }), s(q, mem), 1e-5, 1e-6))
  end)
end)
