-- The attention variants written in Lua (plugins/flex) against PyTorch:
-- softcap, document mask (padded rows, a KV-cached step), prefix-LM, learned
-- sinks, example_lua's learned distance table and sliding_sinks, from the
-- committed fixtures tests/fixtures/attention_flex.lua (made by
-- tests/gen_flex_fixtures.py, which writes each rule densely in PyTorch
-- float64 and differentiates it by autograd). On the fused CPU kernel and on
-- the composed route (kernel = "composed"), in float64: the output and the
-- gradients of q, k, v and of the learned table within 1e-10 of the fixture,
-- relative to the largest magnitude of the reference tensor; rows that see no
-- key are exactly 0. The case "ties" holds the derivatives at ties to
-- PyTorch's rules: a table whose two rows are equal, read through
-- ember.maximum (torch.maximum splits the gradient in halves) and ember.clamp
-- with the other row as the bound (torch.clamp gives the value all of it);
-- "neginf_rows" a score of -inf over whole rows (output and gradients 0);
-- "scalar_table" a 0-d learned table.
local ember = require "ember"

local fixtures = dofile("tests/fixtures/attention_flex.lua")
local TOL = 1e-10

ember.attention_variant { name = "fixture_ties",
  params = function(o, d) return { { name = "t", tensor = ember.zeros(2, d.heads), learned = true } } end,
  score = function(s, b, h, q, k, ctx)
    local t1, t2 = ctx.t[1][h], ctx.t[2][h]
    return s + ember.maximum(t1, t2) * (k - q) * 0.1 + ember.clamp(t1, t2) * (k - q) * 0.05
  end }
-- a 0-d learned table: a temperature, also every head's sink
ember.attention_variant { name = "fixture_scalar",
  params = function(o, d) return { { name = "temp", tensor = ember.tensor(0.0), learned = true } } end,
  score = function(s, b, h, q, k, ctx) return s * ctx.temp + ctx.temp * ctx.temp end,
  sink = function(b, h, q, ctx) return ctx.temp end }
-- FlexAttention's way to mask: a score of -inf; rows with nothing left give 0
ember.attention_variant { name = "fixture_neginf",
  score = function(s, b, h, q, k, ctx) return ember.where(k:le(q - 3), s, -math.huge) end }

local function T(spec)
  local dtype = spec.dtype or "float64"
  return ember.tensor(spec.data, { dtype = dtype }):view(spec.shape)
end

-- max |got - want| / max |want|
local function check(what, got, want)
  assert.is_not_nil(got, what .. " is nil")
  assert.are.same(want.shape, got.shape, what .. " shape")
  local diff = (got:double() - want):abs():max():item()
  local e = diff / math.max(want:abs():max():item(), 1e-300)
  assert(e <= TOL, ("%s: relative error %.3g > %.0e (max abs difference %.3g)"):format(what, e, TOL, diff))
end

-- The rows [b, h, i] of out that PyTorch gives as all zeros (queries that see
-- no key): ember's must be exactly 0 there, and there must be c.empty_rows of them.
local function check_empty_rows(c, got, want)
  local zero_want = want:abs():amax(-1):eq(0)
  local n = zero_want:sum():item()
  assert.are.equal(c.empty_rows, n, "the fixture's empty rows")
  if n > 0 then
    local worst = ember.where(zero_want, got:abs():amax(-1), ember.zeros_like(zero_want, { dtype = "float64" })):max():item()
    assert.are.equal(0, worst, "a row that sees no key must give exactly 0")
  end
end

local inputs = {}
for name, spec in pairs(fixtures.inputs) do inputs[name] = T(spec) end

local function build(c)
  local spec = { attention = c.attention, heads = fixtures.H, head_dim = fixtures.d, dtype = "float64" }
  for k, v in pairs(c.options) do spec[k] = v end
  local att = ember.Attention(spec)
  local ps = att:parameters()
  if c.table then
    assert.are.equal(1, #ps, c.attention .. " should have one learned table")
    local t = T(c.table)
    assert.are.same(t.shape, ps[1].shape, "the table's shape")
    ember.no_grad(function() ps[1]:copy_(t) end)
  else
    assert.are.equal(0, #ps, c.attention .. " should have no learned table")
  end
  return att, ps
end

local function call_opts(c, kernel)
  local o = { causal = c.causal, kernel = kernel }
  if c.key_padding_mask then o.key_padding_mask = T(c.key_padding_mask) end
  if c.variant_inputs then
    o.variant_inputs = {}
    for name, spec in pairs(c.variant_inputs) do o.variant_inputs[name] = T(spec) end
  end
  return o
end

for _, route in ipairs { { "fused", nil }, { "composed", "composed" } } do
  local route_name, kernel = route[1], route[2]
  describe("Lua attention variants match PyTorch (float64, " .. route_name .. " route)", function()
    for _, c in ipairs(fixtures.cases) do
      it(c.name, function()
        local att, ps = build(c)
        local L, Lq = fixtures.L, c.Lq
        local q = inputs.q:narrow(3, L - Lq + 1, Lq):contiguous():requires_grad_()
        local k = inputs.k:clone():requires_grad_()
        local v = inputs.v:clone():requires_grad_()
        local grad_out = inputs.grad_out:narrow(3, L - Lq + 1, Lq)
        local before = ember.attention_routes()
        local out = att(q, k, v, call_opts(c, kernel))
        local after = ember.attention_routes()
        assert.are.equal(1, after[route_name] - before[route_name], "the call must take the " .. route_name .. " route")
        local want = T(c.out)
        check("out", out, want)
        check_empty_rows(c, out, want)
        local loss = (out * grad_out):sum()
        loss:backward()
        check("grad q", q.grad, T(c.grad.q))
        check("grad k", k.grad, T(c.grad.k))
        check("grad v", v.grad, T(c.grad.v))
        if c.table then check("grad table", ps[1].grad, T(c.grad.table)) end
      end)
    end
  end)
end
