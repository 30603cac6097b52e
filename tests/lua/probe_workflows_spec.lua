-- The experiment scripts a researcher coming from PyTorch writes, trained a
-- few steps in ember and in PyTorch 1.13 from the same weights and data
-- (tests/fixtures/nn_probe_workflows.lua, gen_nn_fixtures.py's
-- probe_workflows_cases): losses, gradients and the weights after the steps
-- agree to ~1e-12 in float64 (the autocast block loosely, as bfloat16).
-- PyTorch idioms ember spells its own way are noted where they occur. Also
-- nn.utils.rnn.pack_padded_sequence / pad_packed_sequence through the RNNs
-- and Module:register_full_backward_hook.
local ember = require "ember"
local nn, optim = require "ember.nn", require "ember.optim"
local F = nn.functional
local parity = require "tests.lua.helpers.parity"
local T, raises_here = parity.T, parity.raises_here

local FX = dofile("tests/fixtures/nn_probe_workflows.lua")
local TOL = 1e-10

-- max |got - want| / max(max |want|, floor = 1e-6): a gradient that is zero in
-- exact arithmetic (a conv bias before BatchNorm) is rounding noise on both sides
local function close(what, got, want, tol, floor)
  want = want.shape and want.data and T(want, want.dtype) or want
  assert(got ~= nil, what .. " is nil")
  assert.are.same(want.shape, got.shape, what .. " shape")
  local wd = want:double()
  local e = (got:double() - wd):abs():max():item() / math.max(wd:abs():max():item(), floor or 1e-6)
  assert(e <= (tol or TOL), ("%s: error %.3g > %.1g"):format(what, e, tol or TOL))
end

local function scalar(what, got, want, tol)
  local w = type(want) == "number" and want or want.data[1]
  local g = type(got) == "number" and got or got:item()
  assert(math.abs(g - w) <= (tol or TOL) * math.max(1, math.abs(w)), ("%s: %.17g vs %.17g"):format(what, g, w))
end

local function sd_of(t)
  local o = {}
  for k, v in pairs(t) do o[k] = T(v, v.dtype) end
  return o
end

-- every name of `want` (a fixture state dict) against `got` (name -> tensor)
local function close_all(what, got, want, tol, floor)
  for _, k in ipairs(parity.sorted_keys(want)) do close(what .. " " .. k, got[k], want[k], tol, floor) end
end

local function grads_of(m)
  local g = {}
  for k, p in pairs(m:named_parameters()) do g[k] = p.grad end
  return g
end

describe("a CNN classifier: SGD momentum + weight decay, StepLR, train/eval", function()
  local function run(dtype, tol, floor)
    local c = FX.cnn
    local function X(spec) return T(spec):to(dtype) end
    local m = nn.Sequential(nn.Conv2d(2, 3, 3, { padding = 1 }), nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(12, 4)):to(dtype)
    m:load_state_dict(sd_of(c.state)) -- float64 values into the model's dtype
    local opt = optim.SGD(m:parameters(), { lr = 0.1, momentum = 0.9, weight_decay = 1e-2 })
    local sched = optim.StepLR(opt, { step_size = 2, gamma = 0.5 })
    for i, s in ipairs(c.steps) do
      m:train()
      opt:zero_grad()
      local loss = F.cross_entropy(m(X(s.x)), T(s.y, "int64"))
      loss:backward()
      scalar("loss " .. i, loss, s.loss, tol)
      scalar("lr " .. i, opt.param_groups[1].lr, s.lr)
      close_all("step " .. i .. " grad", grads_of(m), s.grads, tol, floor)
      opt:step()
      sched:step()
      m:eval() -- a validation pass between steps: running statistics, no update
      ember.no_grad(function() close("step " .. i .. " validation", m(X(s.val_x)), s.val_out, tol) end)
    end
    m:eval()
    close_all("final", m:state_dict(), c.final, tol)
    close("eval output", m(X(c.eval_x)), c.eval_out, tol)
  end

  it("follows PyTorch step by step, running statistics and eval output included (float64)", function()
    run("float64", TOL)
  end)

  it("in float32 (the default dtype) to float32's precision", function()
    run("float32", 1e-4, 1e-3) -- the conv bias's gradient (0 before BatchNorm) is float32 noise, ~1e-8
  end)
end)

describe("a GAN: two optimizers, fake:detach(), zero_grad", function()
  local c = FX.gan
  local function nets()
    local G = nn.Sequential(nn.Linear(2, 6), nn.ReLU(), nn.Linear(6, 3)):double()
    local D = nn.Sequential(nn.Linear(3, 6), nn.LeakyReLU(0.2), nn.Linear(6, 1)):double()
    G:load_state_dict(sd_of(c.G))
    D:load_state_dict(sd_of(c.D))
    return G, D
  end

  it("a discriminator and a generator step follow PyTorch", function()
    local G, D = nets()
    local optD = optim.Adam(D:parameters(), { lr = 1e-2, betas = { 0.5, 0.9 } })
    local optG = optim.Adam(G:parameters(), { lr = 2e-2, betas = { 0.5, 0.9 } })
    local bce = nn.BCEWithLogitsLoss()
    for i, s in ipairs(c.steps) do
      local real, z = T(s.real), T(s.z)
      local g_before = {}
      for k, p in pairs(grads_of(G)) do g_before[k] = p:clone() end
      optD:zero_grad()
      local fake = G(z)
      local d_real, d_fake = D(real), D(fake:detach())
      local loss_d = bce(d_real, ember.ones_like(d_real)) + bce(d_fake, ember.zeros_like(d_fake))
      loss_d:backward()
      scalar("loss_d " .. i, loss_d, s.loss_d)
      close_all("step " .. i .. " D grad", grads_of(D), s.d_grads)
      for k, p in pairs(grads_of(G)) do assert.is_true(p:equal(g_before[k]), "detach kept G out of D's backward") end
      optD:step()
      optG:zero_grad()
      local d_gen = D(fake)
      local loss_g = bce(d_gen, ember.ones_like(d_gen))
      loss_g:backward()
      scalar("loss_g " .. i, loss_g, s.loss_g)
      close_all("step " .. i .. " G grad", grads_of(G), s.g_grads)
      optG:step()
    end
    close_all("G final", G:state_dict(), c.G_final)
    close_all("D final", D:state_dict(), c.D_final)
  end)

  it("a gradient penalty: ember.grad's first-order gradient is PyTorch's; create_graph is refused clearly", function()
    local _, D = nets()
    D:load_state_dict(sd_of(c.D_final)) -- the penalty is taken after the steps above
    local g = c.gp
    local alpha = T(g.alpha)
    local xi = (alpha * T(g.real) + (1 - alpha) * T(g.fake)):requires_grad_()
    local out = D(xi)
    raises_here(function() ember.autograd.grad(out:sum(), xi, { create_graph = true }) end,
      "create_graph is not supported")
    local gi = ember.autograd.grad(out:sum(), xi)[1]
    close("dD/dx", gi, g.grad)
    for _, p in ipairs(D:parameters()) do assert.is_nil(p.grad, "ember.grad left D's weights alone") end
    local penalty = ((gi:norm(2, 2) - 1) ^ 2):mean()
    scalar("penalty value", penalty, g.penalty)
    -- the gradient is a constant: its penalty has nothing to backpropagate into D
    assert.is_false(penalty.requires_grad)
    raises_here(function() penalty:backward() end, "a gradient from ember.grad is a constant: ember has no double backward")
  end)
end)

describe("an LSTM classifier over padded sequences, clip_grad_norm_", function()
  local c = FX.rnn
  local function run(last_of, dtype, tol)
    dtype = dtype or "float64"
    local emb = nn.Embedding(7, 4, { padding_idx = c.padding_idx, dtype = dtype })
    local lstm = nn.LSTM(4, 5, { batch_first = true, dtype = dtype })
    local head = nn.Linear(5, 3, { dtype = dtype })
    local mods = { emb = emb, lstm = lstm, head = head }
    for name, m in pairs(mods) do m:load_state_dict(sd_of(c.state[name])) end
    local params = {}
    for _, name in ipairs({ "emb", "lstm", "head" }) do
      for _, p in ipairs(mods[name]:parameters()) do params[#params + 1] = p end
    end
    local opt = optim.SGD(params, { lr = 0.5 })
    local lengths = T(c.lengths, "int64")
    for i, s in ipairs(c.steps) do
      opt:zero_grad()
      local h = last_of(lstm, emb(T(s.ids, "int64")), lengths)
      local loss = F.cross_entropy(head(h), T(s.y, "int64"))
      loss:backward()
      local norm = nn.utils.clip_grad_norm_(params, 0.5)
      scalar("loss " .. i, loss, s.loss, tol)
      scalar("norm " .. i, norm, s.norm, tol)
      for name, m in pairs(mods) do
        close_all("step " .. i .. " " .. name .. " grad", grads_of(m), s.grads[name], tol)
      end
      opt:step()
    end
    for name, m in pairs(mods) do close_all(name .. " final", m:state_dict(), c.final[name], tol) end
  end

  local function packed_last(lstm, x, lengths)
    local packed = nn.utils.rnn.pack_padded_sequence(x, lengths, { batch_first = true, enforce_sorted = false })
    local _, state = lstm(packed)
    return state[1][-1]
  end

  it("through pack_padded_sequence (h_n[-1]) follows PyTorch's packed LSTM step by step", function()
    run(packed_last)
  end)

  it("in float32 to float32's precision", function()
    run(packed_last, "float32", 1e-4)
  end)

  it("over the padded batch, the output at each sequence's last valid step is the same", function()
    run(function(lstm, x, lengths)
      local out = lstm(x)
      return out:gather(2, lengths:view(4, 1, 1):expand(4, 1, 5)):squeeze(2)
    end)
  end)
end)

describe("nn.utils.rnn.pack_padded_sequence / pad_packed_sequence", function()
  it("a bidirectional 2-layer GRU and an LSTM with h0 over unsorted lengths: PyTorch's outputs and gradients", function()
    for _, c in ipairs(FX.packed) do
      local rnn = nn[c.kind](3, 4, { batch_first = true, num_layers = c.config.num_layers, bidirectional = true,
        dtype = "float64" })
      rnn:load_state_dict(sd_of(c.state))
      local x = T(c.x):requires_grad_()
      local pk = nn.utils.rnn.pack_padded_sequence(x, T(c.lengths, "int64"), { batch_first = true,
        enforce_sorted = false })
      local hx = c.kind == "LSTM" and { T(c.h0), T(c.c0) } or T(c.h0)
      local out_p, hn = rnn(pk, hx)
      if c.kind == "LSTM" then hn = hn[1] end
      local out, len = nn.utils.rnn.pad_packed_sequence(out_p, { batch_first = true, padding_value = -1,
        total_length = 6 })
      assert.are.same(c.lengths.data, len:totable())
      close(c.kind .. " output", out, c.out)
      close(c.kind .. " h_n", hn, c.h_n)
      ;((out * T(c.R)):sum() + (hn * T(c.R2)):sum()):backward()
      close(c.kind .. " input grad", x.grad, c.x_grad)
      close_all(c.kind .. " grad", grads_of(rnn), c.grads)
    end
  end)

  it("PyTorch's fields: data, batch_sizes, sorted_indices (1-based)", function()
    local x = ember.arange(1, 13, "float64"):view(3, 4, 1) -- [N, L, 1]: row b holds 4b-3 .. 4b
    local pk = nn.utils.rnn.pack_padded_sequence(x, { 2, 4, 1 }, { batch_first = true, enforce_sorted = false })
    assert.are.same({ 5, 1, 9, 6, 2, 7, 8 }, pk.data:view(7):totable())
    assert.are.same({ 3, 2, 1, 1 }, pk.batch_sizes:totable())
    assert.are.same({ 2, 1, 3 }, pk.sorted_indices:totable())
    assert.are.same({ 2, 1, 3 }, pk.unsorted_indices:totable())
    local y = nn.utils.rnn.pad_packed_sequence(pk, true) -- torch's positional batch_first
    assert.are.same({ { 1, 2, 0, 0 }, { 5, 6, 7, 8 }, { 9, 0, 0, 0 } }, y:view(3, 4):totable())
    local s = nn.utils.rnn.pack_padded_sequence(x:transpose(1, 2), { 3, 3, 1 })
    assert.is_nil(s.sorted_indices)
    assert.are.same({ 3, 2, 2 }, s.batch_sizes:totable())
  end)

  it("help() names nn.utils.rnn's functions (a namespace two tables deep)", function()
    local doc = require "ember._doc"
    for _, f in ipairs({ "pad_sequence", "pack_padded_sequence", "pad_packed_sequence" }) do
      assert.are.equal("nn.utils.rnn." .. f, doc.name_of(nn.utils.rnn[f]))
      assert.truthy(doc.lookup(nn.utils.rnn[f]), f)
    end
  end)

  it("refuses unsorted lengths with enforce_sorted, bad lengths and what is not packed, at the caller's line", function()
    local x = ember.randn(3, 4, 2)
    raises_here(function() nn.utils.rnn.pack_padded_sequence(x, { 1, 2, 4 }, true) end,
      "nn.utils.rnn.pack_padded_sequence: lengths must be sorted in decreasing order when enforce_sorted is true")
    raises_here(function() nn.utils.rnn.pack_padded_sequence(x, { 3, 0, 1 }, { batch_first = true }) end,
      "length 2 is 0")
    raises_here(function() nn.utils.rnn.pack_padded_sequence(x, { 5, 1, 1 }, { batch_first = true }) end,
      "length 1 is 5, longer than the input's 4 steps")
    raises_here(function() nn.utils.rnn.pack_padded_sequence(x, { 2, 1 }, { batch_first = true }) end,
      "expected 3 lengths")
    raises_here(function() nn.utils.rnn.pack_padded_sequence(x, { 2, 1, 1 }, { batch_frist = true }) end,
      "unknown option 'batch_frist'")
    raises_here(function() nn.utils.rnn.pad_packed_sequence(x) end, "expected a PackedSequence")
    local pk = nn.utils.rnn.pack_padded_sequence(x, { 3, 2, 1, 1 })
    raises_here(function() nn.utils.rnn.pad_packed_sequence(pk, { total_length = 2 }) end,
      "total_length is 2, shorter than the longest sequence (3 steps)")
  end)
end)

describe("a VAE: reparameterization, the KL term, Adam", function()
  it("follows PyTorch step by step (eps from the fixture, as randn would give it)", function()
    local c = FX.vae
    local enc = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 4)):double()
    local dec = nn.Sequential(nn.Linear(2, 6), nn.Tanh(), nn.Linear(6, 4)):double()
    enc:load_state_dict(sd_of(c.enc))
    dec:load_state_dict(sd_of(c.dec))
    local params = enc:parameters()
    for _, p in ipairs(dec:parameters()) do params[#params + 1] = p end
    local opt = optim.Adam(params, { lr = 1e-2 })
    for i, s in ipairs(c.steps) do
      local x, eps = T(s.x), T(s.eps)
      opt:zero_grad()
      local mu, logvar = table.unpack(enc(x):chunk(2, 2))
      local z = mu + eps * ember.exp(0.5 * logvar)
      local recon = F.mse_loss(dec(z), x, { reduction = "sum" })
      local kl = -0.5 * ember.sum(1 + logvar - mu:pow(2) - logvar:exp())
      local loss = (recon + kl) / x:size(1)
      loss:backward()
      scalar("recon " .. i, recon, s.recon)
      scalar("kl " .. i, kl, s.kl)
      scalar("loss " .. i, loss, s.loss)
      close_all("step " .. i .. " encoder grad", grads_of(enc), s.enc_grads)
      opt:step()
    end
    close_all("encoder final", enc:state_dict(), c.enc_final)
    close_all("decoder final", dec:state_dict(), c.dec_final)
  end)

  it("randn_like draws eps of mu's shape and dtype", function()
    local mu = ember.zeros(3, 2, { dtype = "float64" })
    local eps = ember.randn_like(mu)
    assert.are.same(mu.shape, eps.shape)
    assert.are.equal("float64", eps.dtype)
  end)
end)

describe("gradient accumulation, param groups, a frozen layer, tied weights", function()
  it("follows PyTorch step by step", function()
    local c = FX.accum
    local emb = nn.Embedding(8, 4, { dtype = "float64" })
    local body, mid = nn.Linear(4, 4, { dtype = "float64" }), nn.Linear(4, 4, { dtype = "float64" })
    local outl = nn.Linear(4, 8, { bias = false, dtype = "float64" })
    emb:load_state_dict({ weight = T(c.state.emb) })
    body:load_state_dict(sd_of(c.state.body))
    mid:load_state_dict(sd_of(c.state.mid))
    outl.weight = emb.weight -- tied: one tensor
    body:requires_grad_(false)
    local lm = nn.Sequential(emb, body, nn.Tanh(), mid, nn.Tanh(), outl)
    assert.are.equal(3, #lm:parameters() - #body:parameters(), "the tied weight counts once")
    local opt = optim.SGD({ { params = { emb.weight }, lr = 0.2 }, { params = mid:parameters() } },
      { lr = 0.05, momentum = 0.9 })
    assert.are.equal(0.05, opt.param_groups[2].lr)
    for i, s in ipairs(c.steps) do
      opt:zero_grad()
      for j, mb in ipairs(s.micro) do
        local logits = lm(T(mb.ids, "int64"))
        local loss = F.cross_entropy(logits:reshape(-1, 8), T(mb.tgt, "int64"):reshape(-1)) / 2
        loss:backward()
        scalar(("loss %d.%d"):format(i, j), loss, mb.loss)
      end
      close("step " .. i .. " tied grad", emb.weight.grad, s.emb_grad)
      close("step " .. i .. " mid grad", mid.weight.grad, s.mid_grad)
      assert.is_nil(body.weight.grad)
      opt:step()
    end
    close("tied final", emb.weight, c.emb_final)
    assert.are.equal(emb.weight, outl.weight)
    close_all("mid final", mid:state_dict(), c.mid_final)
    close_all("frozen layer", body:state_dict(), c.state.body, 0)
  end)
end)

describe("an EMA of the weights, a forward hook, model surgery", function()
  it("follows PyTorch: the EMA copies (mul_/add_ and lerp_), the hooked features, a new head", function()
    local c = FX.ema
    local net = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2)):double()
    net:load_state_dict(sd_of(c.state))
    local names = net:parameter_names()
    local ema, ema2 = {}, {}
    for i, p in ipairs(net:parameters()) do ema[i], ema2[i] = p:detach():clone(), p:detach():clone() end
    local opt = optim.SGD(net:parameters(), { lr = 0.1 })
    local feats = {}
    local hook = net[2]:register_forward_hook(function(_, _, out) feats[#feats + 1] = out:detach():clone() end)
    for i, s in ipairs(c.steps) do
      opt:zero_grad()
      local loss = F.mse_loss(net(T(s.x)), T(s.y))
      loss:backward()
      opt:step()
      ember.no_grad(function()
        for j, p in ipairs(net:parameters()) do
          ema[j]:mul_(0.9):add_(p, { alpha = 0.1 })
          ema2[j]:lerp_(p, 0.25)
        end
      end)
      scalar("loss " .. i, loss, s.loss)
      close("feature " .. i, feats[#feats], s.feature)
    end
    hook:remove()
    net(T(c.steps[1].x))
    assert.are.equal(#c.steps, #feats, "a removed hook no longer runs")
    local e, e2 = {}, {}
    for j, n in ipairs(names) do e[n], e2[n] = ema[j], ema2[j] end
    close_all("ema", e, c.ema)
    close_all("ema lerp", e2, c.ema_lerp)
    close_all("trained", net:state_dict(), c.trained)

    local head = nn.Linear(5, 3, { dtype = "float64" })
    head:load_state_dict(sd_of(c.head))
    net[3] = head -- PyTorch's net[2] = head
    assert.are.equal(head, net[3])
    assert.are.equal(head, net[-1])
    assert.truthy(tostring(net):find("(3): Linear(in_features=5, out_features=3", 1, true))
    local partial = {}
    for k, v in pairs(sd_of(c.state)) do if not k:find("^3%.") then partial[k] = v end end
    local _, missing, unexpected = net:load_state_dict(partial, { strict = false })
    assert.are.same({ "3.bias", "3.weight" }, missing)
    assert.are.same({}, unexpected)
    close("surgery output", net(T(c.surgery_x)), c.surgery_out)
    local sd = net:state_dict()
    assert.are.same({ 3, 5 }, { sd["3.weight"]:size(1), sd["3.weight"]:size(2) })
  end)

  it("surgery by name: named_children, get_submodule, parent[name] = m (PyTorch's setattr)", function()
    local enc = nn.TransformerEncoder(8, 2, 2, { dim_feedforward = 16, dropout = 0 })
    -- every ReLU of the feed-forward blocks becomes a GELU
    local swapped = 0
    for _, pair in ipairs(enc:named_modules()) do
      local name, mod = pair[1], pair[2]
      for _, nc in ipairs(mod:named_children()) do
        if nc[2].__name == "ReLU" then
          mod[nc[1]] = nn.GELU()
          swapped = swapped + 1
          assert.are.equal("GELU", enc:get_submodule((name == "" and "" or name .. ".") .. nc[1]).__name)
        end
      end
    end
    assert.are.equal(2, swapped)
    assert.are.equal(enc.layers[2].ff.linear1, enc:get_submodule("layers.2.ff.linear1"))
    assert.are.equal(enc, enc:get_submodule(""))
    local names = {}
    for _, nc in ipairs(enc.layers[1]:named_children()) do names[#names + 1] = nc[1] end
    assert.are.same({ "self_attn", "ff", "norm1", "norm2", "dropout1", "dropout2" }, names)
    local list = nn.ModuleList({ nn.Linear(1, 1), nn.ReLU() }) -- its names are PyTorch's, as in its state dict
    assert.are.equal(list[2], list:get_submodule("1"))
    assert.are.same({ "0", "1" }, { list:named_children()[1][1], list:named_children()[2][1] })
    raises_here(function() enc:get_submodule("layers.3.ff") end,
      "TransformerEncoder.get_submodule: 'layers' (Sequential) has no child module '3' (its children: 1, 2)")
    raises_here(function() enc:get_submodule("layers.1.norm1.weight") end,
      "'layers.1.norm1' (LayerNorm) has no child module 'weight'")
  end)

  it("seq[i] = x refuses what is no module, an index out of range and 0, at the caller's line", function()
    local net = nn.Sequential(nn.Linear(3, 5), nn.ReLU())
    raises_here(function() net[2] = ember.zeros(3) end, "Sequential: seq[2] must be a module, got userdata")
    raises_here(function() net[3] = nn.ReLU() end, "Sequential: index 3 is out of range for a Sequential of 2 modules")
    raises_here(function() net[-3] = nn.ReLU() end, "index -3 is out of range")
    raises_here(function() net[0] = nn.ReLU() end, "Sequential: index 0: indices are 1-based")
    net[-1] = nn.Tanh()
    assert.are.equal("Tanh", net[2].__name)
    assert.are.equal(2, #net)
  end)
end)

describe("mixed precision: ember.autocast('bfloat16') on a TransformerEncoderLayer", function()
  it("help(ember.autocast) and help(ember.profiler) print their entries (they printed the usage line)", function()
    local doc = require "ember._doc"
    assert.are.equal("autocast", doc.name_of(ember.autocast))
    assert.are.equal("autocast.cast", doc.name_of(ember.autocast.cast))
    assert.are.equal("profiler", doc.name_of(ember.profiler))
    assert.truthy(doc.lookup(ember.autocast):find("mixed precision", 1, true))
  end)

  it("is torch.autocast('cpu', dtype=torch.bfloat16)'s loss and gradients to bfloat16's precision", function()
    local c = FX.autocast
    local function layer_of()
      return nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 })
    end
    local layer = layer_of()
    local sd = {}
    for k, v in pairs(c.state) do sd[k] = T(v, "float32") end
    layer:load_state_dict(sd) -- PyTorch's names (in_proj_weight, linear1, ...) load as they are
    local x, R = T(c.x, "float32"), T(c.R, "float32")
    local y
    local loss = ember.autocast("bfloat16", function()
      y = layer(x)
      return (y:float() * R):sum()
    end)
    assert.are.equal(c.out_dtype, y.dtype)
    scalar("autocast loss", loss, c.loss, 1e-2)
    loss:backward()
    -- the gradients under PyTorch's names: loaded as the weights of a second layer
    local g = {}
    for k, p in pairs(layer:named_parameters()) do
      assert.are.equal("float32", p.grad.dtype, k)
      g[k] = p.grad
    end
    local tg = layer_of():load_state_dict(g):torch_state_dict()
    close_all("autocast grad", tg, c.grads, 3e-2)
    scalar("float32 loss outside autocast", (layer(x) * R):sum(), c.loss_fp32, 1e-5)
  end)
end)

describe("param groups: AdamW with a no-decay group, LambdaLR with a function per group", function()
  it("follows PyTorch step by step", function()
    local c = FX.groups
    local m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2)):double()
    m:load_state_dict(sd_of(c.state))
    local named, decay, rest = m:named_parameters(), {}, {}
    for _, n in ipairs(m:parameter_names()) do
      local list = (n == "1.weight" or n == "3.weight") and decay or rest
      list[#list + 1] = named[n]
    end
    local opt = optim.AdamW({ { params = decay, weight_decay = 0.1 }, { params = rest, weight_decay = 0.0, lr = 3e-2 } },
      { lr = 1e-2, betas = { 0.9, 0.95 }, eps = 1e-6, amsgrad = true })
    local sched = optim.LambdaLR(opt, { function(s) return 1 / (s + 1) end, function(s) return 0.9 ^ s end })
    local x, y = T(c.x), T(c.y)
    for i, s in ipairs(c.steps) do
      opt:zero_grad()
      local loss = F.mse_loss(m(x), y)
      loss:backward()
      opt:step()
      sched:step()
      scalar("loss " .. i, loss, s.loss)
      scalar("lr group 1 " .. i, opt.param_groups[1].lr, s.lrs[1])
      scalar("lr group 2 " .. i, opt.param_groups[2].lr, s.lrs[2])
    end
    close_all("final", m:state_dict(), c.final)
  end)

  it("LambdaLR refuses a list whose length is not the number of groups, or holding no function", function()
    local opt = optim.SGD({ { params = { ember.zeros(1):requires_grad_() } }, { params = { ember.zeros(1):requires_grad_() } } },
      { lr = 0.1 })
    raises_here(function() optim.LambdaLR(opt, { function() return 1 end }) end,
      "LambdaLR: expected 2 lr_lambdas (one per parameter group), got 1")
    raises_here(function() optim.LambdaLR(opt, { function() return 1 end, 3 }) end,
      "LambdaLR: lr_lambda[2] must be a function of the step, got number")
  end)
end)

describe("an attention classifier: a pre-norm TransformerEncoder with a key padding mask, AdamW", function()
  it("follows PyTorch step by step (PyTorch's state dict names load as they are)", function()
    local c = FX.encoder
    -- PyTorch's TransformerEncoder(layer, 2) without norm=: ember makes the layers from the options
    local function make()
      return nn.TransformerEncoder(8, 2, 2, { dim_feedforward = 16, dropout = 0, norm_first = true,
        activation = "gelu", final_norm = false, dtype = "float64" })
    end
    local enc, head = make(), nn.Linear(8, 3, { dtype = "float64" })
    enc:load_state_dict(sd_of(c.state.enc))
    head:load_state_dict(sd_of(c.state.head))
    local params = enc:parameters()
    for _, p in ipairs(head:parameters()) do params[#params + 1] = p end
    local opt = optim.AdamW(params, { lr = 1e-2 })
    local x, y, pad = T(c.x), T(c.y, "int64"), T(c.pad, "bool")
    for i, s in ipairs(c.steps) do
      opt:zero_grad()
      local h = enc(x, { key_padding_mask = pad })
      local keep = pad:logical_not():unsqueeze(-1):to(h.dtype)
      local loss = F.cross_entropy(head((h * keep):sum(2) / keep:sum(2)), y)
      loss:backward()
      scalar("loss " .. i, loss, s.loss)
      if s.grads then
        local g = {}
        for k, p in pairs(enc:named_parameters()) do g[k] = p.grad end
        close_all("step " .. i .. " grad", make():load_state_dict(g):torch_state_dict(), s.grads)
      end
      opt:step()
    end
    -- Adam divides by sqrt(v): rounding in the gradients shows at ~1e-11 after three steps
    close_all("final", enc:torch_state_dict(), c.final, 1e-9)
  end)
end)

describe("Module:register_full_backward_hook", function()
  it("gives PyTorch's grad_input and grad_output, and a returned grad_input replaces it", function()
    local c = FX.backward_hooks
    local net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)):double()
    net:load_state_dict(sd_of(c.state))
    local seen = {}
    local function keep(name) return function(_, gin, gout) seen[name] = { gin = gin, gout = gout } end end
    net[1]:register_full_backward_hook(keep("first"))
    local h = net[2]:register_full_backward_hook(keep("tanh"))
    net[3]:register_full_backward_hook(function(_, gin) return { gin[1] * 0.5 } end)
    ;(net(T(c.x)) * T(c.R)):sum():backward()
    assert.is_true(c.first_grad_input_is_none)
    assert.is_nil(seen.first.gin[1])
    close("first grad_output", seen.first.gout[1], c.first_grad_output)
    close("tanh grad_input", seen.tanh.gin[1], c.tanh_grad_input)
    close("tanh grad_output", seen.tanh.gout[1], c.tanh_grad_output)
    close_all("grad", grads_of(net), c.grads)
    -- removed: no longer called; no_grad: not wrapped
    h:remove()
    seen.tanh = nil
    net:zero_grad()
    net(T(c.x)):sum():backward()
    assert.is_nil(seen.tanh)
    local y = ember.no_grad(function() return net(T(c.x)) end)
    assert.is_false(y.requires_grad)
  end)

  it("refuses a hook that returns what is no table of gradients, naming the module", function()
    local lin = nn.Linear(3, 2)
    lin:register_full_backward_hook(function() return 1 end)
    local x = ember.randn(2, 3):requires_grad_()
    local ok, err = pcall(function() lin(x):sum():backward() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("Linear: a full backward hook returned number", 1, true), tostring(err))
  end)
end)

describe("optim.MultiplicativeLR", function()
  local function lrs_of(lambdas)
    local opt = optim.SGD({ { params = { ember.zeros(1):requires_grad_() } },
      { params = { ember.zeros(1):requires_grad_() }, lr = 0.5 } }, { lr = 0.1 })
    local sched = optim.lr_scheduler.MultiplicativeLR(opt, lambdas)
    local out = {}
    for i = 1, 5 do
      opt:step()
      sched:step()
      out[i] = { opt.param_groups[1].lr, opt.param_groups[2].lr }
    end
    return out, sched, opt
  end

  it("follows PyTorch's lrs, one function or one per group, and resumes from a state dict", function()
    local c = FX.multiplicative
    local function same(what, got, want)
      for i = 1, #want do
        for g = 1, 2 do scalar(("%s step %d group %d"):format(what, i, g), got[i][g], want[i][g], 1e-14) end
      end
    end
    local f1 = function(s) return s % 2 == 1 and 0.9 or 1.1 end
    same("one", lrs_of(f1), c.one)
    local per = { function() return 0.95 end, function(s) return 1 / (s + 1) end }
    local got, sched = lrs_of(per)
    same("per group", got, c.per_group)
    local opt2 = optim.SGD({ { params = { ember.zeros(1):requires_grad_() } },
      { params = { ember.zeros(1):requires_grad_() }, lr = 0.5 } }, { lr = 0.1 })
    local s2 = optim.MultiplicativeLR(opt2, per)
    s2:load_state_dict(sched:state_dict())
    scalar("resumed lr", opt2.param_groups[2].lr, c.per_group[5][2], 1e-14)
  end)

  it("refuses what LambdaLR refuses, under its own name", function()
    local opt = optim.SGD({ ember.zeros(1):requires_grad_() }, { lr = 0.1 })
    raises_here(function() optim.MultiplicativeLR(opt, 0.9) end,
      "MultiplicativeLR: lr_lambda must be a function of the step, got number")
  end)
end)
