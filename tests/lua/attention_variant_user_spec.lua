-- Attention variants written in Lua as a new user tries them (issue 24):
-- FlexAttention's idioms, the routes agreeing with each other and with the
-- documented rules, and bad input named at the user's line. One block per
-- defect found by probing; attention_variant_spec.lua holds the shipped
-- variants to their composed references.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"

local function randn(shape, dtype) return ember.randn(shape, { dtype = dtype or "float64" }) end

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
    assert(not b[i]:isnan():any():item(), "NaN in result " .. i)
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
