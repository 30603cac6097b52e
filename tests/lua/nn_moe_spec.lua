-- nn.MoE (lua/ember/nn/MoE.lua): Hugging Face's Mixtral and Qwen2-MoE
-- blocks and a DeepSeek-style one in PyTorch float64 (tests/fixtures/nn_moe.lua,
-- tests/gen_moe_fixtures.py): outputs, the auxiliary losses, the tokens per
-- expert and every gradient, loaded from their own state dict names; a
-- float64 gradcheck; dropless routing that runs each expert on its own
-- tokens only; bfloat16 autocast; a toy task where 4 experts beat one;
-- errors at the user's line.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local parity = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local F = dofile("tests/fixtures/nn_moe.lua")

local T, check = parity.T, parity.check

local function build(c, extra)
  local opts = { dtype = "float64" }
  for k, v in pairs(c.opts) do opts[k] = v end
  for k, v in pairs(extra or {}) do opts[k] = v end
  return nn.MoE(opts)
end

local function sorted_names(sd)
  local out = {}
  for k in pairs(sd) do out[#out + 1] = k end
  table.sort(out)
  return out
end

describe("nn.MoE against PyTorch (Hugging Face's blocks, float64)", function()
  for _, c in ipairs(F.cases) do
    it(c.name .. ": output, aux/z losses, tokens per expert, every gradient", function()
      local m = build(c)
      local sd = {}
      for k, v in pairs(c.state) do sd[k] = T(v) end
      m:load_state_dict(sd) -- Hugging Face's names, as they are (strict)
      local x = T(c.x):requires_grad_()
      local out = m(x, c.attention_mask and { attention_mask = T(c.attention_mask) } or nil)
      check("out", out, T(c.out), 1e-12)
      assert.is_true(math.abs(m.aux_loss:item() - c.aux_loss) <= 1e-12 * math.abs(c.aux_loss), "aux_loss")
      assert.is_true(math.abs(m.z_loss:item() - c.z_loss) <= 1e-12 * math.abs(c.z_loss), "z_loss")
      assert.are.same(T(c.tokens_per_expert):tolist(), m.tokens_per_expert:tolist())
      assert.are.equal("int64", m.tokens_per_expert.dtype)
      local loss = (out * T(c.R)):sum() + F.aux_coef * m.aux_loss + F.z_coef * m.z_loss
      loss:backward()
      check("grad x", x.grad, T(c.grad_x), 1e-12)
      local want = {}
      for k, v in pairs(c.grads) do want[k] = T(v) end
      want = m:upgrade_state_dict(want) -- torch's names -> ember's
      local n = 0
      for name, p in pairs(m:named_parameters()) do
        assert(want[name], "no torch gradient for " .. name)
        check("grad " .. name, p.grad, want[name], 1e-11)
        n = n + 1
      end
      assert.are.equal(#sorted_names(c.grads), n)
    end)
  end

  it("torch_state_dict writes Mixtral's names, or Qwen's or DeepSeek's by hf_names", function()
    local mix = parity.case(F, "mixtral")
    assert.are.same(sorted_names(mix.state), sorted_names(build(mix):torch_state_dict()))
    local qwen = parity.case(F, "qwen2_shared_gate")
    local m = build(qwen, { hf_names = "qwen" })
    assert.are.same(sorted_names(qwen.state), sorted_names(m:torch_state_dict()))
    m:load_state_dict(m:torch_state_dict()) -- and back
    local ds = parity.case(F, "deepseek_shared")
    assert.are.same(sorted_names(ds.state), sorted_names(build(ds, { hf_names = "deepseek" }):torch_state_dict()))
    -- ember's own names: nn.FeedForward's
    local names = sorted_names(build(mix):state_dict())
    assert.are.same({ "experts.0.linear1.weight", "experts.0.linear2.weight", "experts.0.linear3.weight" },
      { names[1], names[2], names[3] })
    assert.are.equal("gate.weight", names[#names])
  end)
end)

describe("nn.MoE", function()
  -- inputs away from ties: the k-th and (k+1)-th router logits of every token
  -- differ by far more than gradcheck's steps
  local function min_gap(m, x, k)
    local logits = m.gate(x:reshape(-1, m.d_model)):detach()
    local v = logits:sort(-1, true)
    return (v:narrow(2, k, 1) - v:narrow(2, k + 1, 1)):min():item()
  end

  for _, router in ipairs({ "topk_softmax", "softmax_topk" }) do
    it("float64 gradcheck of the input, router and expert weights (" .. router .. ", shared expert)", function()
      ember.manual_seed(3)
      local m = nn.MoE(4, 3, 4, 2, { router = router, norm_topk_prob = router == "softmax_topk" or nil,
        shared_experts = 1, shared_expert_gate = true, dtype = "float64" })
      local x = ember.randn(2, 3, 4, { dtype = "float64" })
      assert.is_true(min_gap(m, x, 2) > 1e-3, "inputs too close to a tie")
      local e = m.experts[2]
      gradcheck.check(function(xx)
        local y = m(xx)
        return { y, m.aux_loss, m.z_loss }
      end, { x, m.gate.weight, e.linear1.weight, e.linear2.weight, e.linear3.weight, m.shared_expert_gate.weight })
    end)
  end

  it("runs each expert on its own tokens only (sorted dispatch), top_k rows per token in all", function()
    ember.manual_seed(5)
    local m = nn.MoE(8, 16, 4, 2)
    local seen = {}
    for i = 1, 4 do
      m.experts[i]:register_forward_hook(function(_, inputs) seen[i] = inputs[1]:size(1) end)
    end
    m(ember.randn(3, 7, 8))
    local counts = m.tokens_per_expert:tolist()
    local total = 0
    for i = 1, 4 do
      assert.are.equal(counts[i], seen[i] or 0)
      total = total + counts[i]
    end
    assert.are.equal(3 * 7 * 2, total)
  end)

  it("unbatched [L, d] and batched [B, L, d] agree; train and eval route alike", function()
    ember.manual_seed(6)
    local m = nn.MoE(8, 16, 4, 2, { dtype = "float64" })
    local x = ember.randn(2, 5, 8, { dtype = "float64" })
    local y = m(x)
    check("row 2", m(x[2]), y[2], 1e-14)
    m:eval()
    check("eval", m(x), y, 0)
    assert.are.same({ 2, 5, 8 }, { y:size(1), y:size(2), y:size(3) })
  end)

  it("an input of no token gives no rows and zero losses", function()
    local m = nn.MoE(8, 16, 4, 2)
    local x = ember.randn(0, 8):requires_grad_()
    local y = m(x)
    assert.are.same({ 0, 8 }, { y:size(1), y:size(2) })
    assert.are.same({ 0, 0, 0, 0 }, m.tokens_per_expert:tolist())
    assert.are.equal(0, m.aux_loss:item())
    assert.are.equal(0, m.z_loss:item())
    y:sum():backward()
    assert.are.same({ 0, 8 }, { x.grad:size(1), x.grad:size(2) })
  end)

  it("jitter_noise (Mixtral's router_jitter_noise) scales the input in training only", function()
    ember.manual_seed(9)
    local m = nn.MoE(8, 16, 4, 2, { dtype = "float64" })
    local j = nn.MoE(8, 16, 4, 2, { dtype = "float64", jitter_noise = 0.1 })
    j:load_state_dict(m:state_dict())
    local x = ember.randn(5, 8, { dtype = "float64" })
    local y = m(x)
    assert.is_true(parity.max_rel(j(x), y) > 1e-3) -- training: jittered
    j:eval()
    check("eval", j(x), y, 0)
    parity.raises_here(function() nn.MoE(8, 16, 4, 2, { jitter_noise = 1 }) end, "nn.MoE: jitter_noise must be")
  end)

  it("top_k = num_experts with the Mixtral rule is a softmax-weighted dense mixture", function()
    ember.manual_seed(7)
    local m = nn.MoE(6, 5, 3, 3, { dtype = "float64" })
    local x = ember.randn(4, 6, { dtype = "float64" })
    local p = m.gate(x):softmax(-1)
    local want = ember.zeros(4, 6, { dtype = "float64" })
    for e = 1, 3 do want = want + m.experts[e](x) * p:narrow(2, e, 1) end
    check("dense", m(x), want, 1e-13)
    -- every token on every expert: f_i = 1, so aux_loss = num_experts * sum P_i = num_experts
    assert.is_true(math.abs(m.aux_loss:item() - 3) < 1e-12)
  end)

  it("bfloat16 autocast stays close to float32, float32 gradients", function()
    ember.manual_seed(8)
    local m = nn.MoE(32, 64, 4, 2)
    local x = ember.randn(2, 16, 32)
    local y32 = m(x)
    local c32 = m.tokens_per_expert:tolist()
    local ybf = ember.autocast("bfloat16", function() return m(x) end)
    assert.are.equal("float32", ybf.dtype)
    -- the router's softmax, top-k weights and losses in float32, as Hugging Face's
    assert.are.equal("bfloat16", m.router_logits.dtype)
    assert.are.equal("float32", m.z_loss.dtype)
    assert.are.equal("float32", m.aux_loss.dtype)
    local cbf = m.tokens_per_expert:tolist()
    assert.are.same(c32, cbf) -- this seed routes alike in both (no near-tie)
    assert.is_true(parity.max_rel(ybf, y32) < 2e-2, "bf16 vs fp32: " .. parity.max_rel(ybf, y32))
    ybf:sum():backward()
    assert.are.equal("float32", m.gate.weight.grad.dtype)
    assert.are.equal("float32", m.experts[1].linear1.weight.grad.dtype)
    -- a bfloat16 model: bfloat16 out, the router's losses in float32 (Hugging Face's softmax dtype=float)
    m:bfloat16()
    local y16 = m(x:bfloat16())
    assert.are.equal("bfloat16", y16.dtype)
    assert.are.equal("float32", m.z_loss.dtype)
    assert.are.equal("float32", m.aux_loss.dtype)
  end)

  it("4 experts beat one of the same active size on a task of 4 regimes (deterministic)", function()
    -- y = A_c x where the regime c is told by the sign pattern of x's first two
    -- features: one small SwiGLU cannot hold four maps, four routed ones can
    local d, dff, n = 8, 8, 256
    local function train(moe_experts)
      ember.manual_seed(11)
      local A = ember.randn(4, d, d) * 0.5
      local x = ember.randn(n, d)
      local c = (x:narrow(2, 1, 1):gt(0):to("int64") * 2 + x:narrow(2, 2, 1):gt(0):to("int64")):reshape(n) + 1
      local y = ember.bmm(A:index_select(1, c), x:unsqueeze(3)):squeeze(3)
      local m = nn.MoE(d, dff, moe_experts, 1, { router = "softmax_topk" }) -- Switch's top-1
      local opt = optim.Adam(m:parameters(), { lr = 1e-2 })
      local loss
      for _ = 1, 300 do
        opt:zero_grad()
        loss = (m(x) - y):pow(2):mean()
        local total = loss + 0.01 * m.aux_loss
        total:backward()
        opt:step()
      end
      return loss:item(), (y:pow(2):mean()):item()
    end
    local one, var = train(1)
    local four = train(4)
    assert.is_true(four < 0.5 * one, ("4 experts %.4f vs one %.4f"):format(four, one))
    assert.is_true(four < 0.25 * var, ("4 experts %.4f vs target power %.4f"):format(four, var))
  end)

  it("refuses bad sizes and options naming nn.MoE at the user's line", function()
    parity.raises_here(function() nn.MoE(8, 16, 4, 5) end, "nn.MoE: top_k (5) must be at most num_experts (4)")
    parity.raises_here(function() nn.MoE(8, 16, 2.5, 1) end, "nn.MoE: num_experts must be a positive integer, got 2.5")
    parity.raises_here(function() nn.MoE(8, 16, 4, 0) end, "nn.MoE: top_k must be a positive integer")
    parity.raises_here(function() nn.MoE(8, 16, 4, 2, { routr = "x" }) end, "nn.MoE: unknown option 'routr'")
    parity.raises_here(function() nn.MoE(8, 16, 4, 2, { router = "mixtral" }) end, "nn.MoE: router must be")
    parity.raises_here(function() nn.MoE(8, 16, 4, 2, { norm_topk_prob = false }) end, "needs router = \"softmax_topk\"")
    parity.raises_here(function() nn.MoE{ d_model = 8, d_ff = 16, num_experts = 4 } end,
      "nn.MoE: top_k must be a positive integer, got nil")
    local m = nn.MoE(8, 16, 4, 2)
    parity.raises_here(function() m(ember.randn(3, 7)) end, "nn.MoE: expected an input [..., d_model = 8], got [3, 7]")
    parity.raises_here(function() m(ember.ones(3, 8, { dtype = "int64" })) end, "MoE.forward: expected a floating-point")
    parity.raises_here(function() m(ember.randn(2, 3, 8), { attention_mask = ember.ones(3, 2) }) end,
      "nn.MoE: attention_mask must be a tensor of the input's leading shape [2, 3] (1 = token, 0 = padding), got [3, 2]")
    parity.raises_here(function() m(ember.randn(2, 3, 8), { mask = ember.ones(2, 3) }) end,
      "MoE.forward: unknown option 'mask'")
  end)

  it("prints its sizes and routing rule", function()
    local s = tostring(nn.MoE(8, 16, 4, 2, { router = "softmax_topk" }))
    assert.truthy(s:find("MoE(\n  d_model=8, d_ff=16, num_experts=4, top_k=2, router=softmax_topk, norm_topk_prob=false", 1,
      true), s)
  end)
end)
