-- Special values against PyTorch 1.13 (tests/gen_special_values_fixtures.py
-- writes tests/fixtures/special_values.lua): NaN and +-inf through
-- reductions, comparisons and sorting, empty tensors, 0-d tensors and
-- promotion, integer division and overflow, bfloat16 rounding and
-- accumulation, the numerically stable forms. Every case runs and ALL
-- mismatches are listed before the one assertion: dtypes and shapes
-- exactly, NaN and infinity positions exactly, the sign of zero unless the
-- case says anyzero, values to 2e-6 relative in float32 (1e-12 float64,
-- 2^-7 bfloat16; subnormals aside); a torch error must be an ember error
-- (a checked one, not a Lua error inside). Then the places
-- where ember differs from torch on purpose, each with its reason.
local ember = require "ember"
local F = require "ember.nn.functional"
local nn = require "ember.nn"
local fx = dofile("tests/fixtures/special_values.lua")

local nan, inf = 0 / 0, math.huge
local function T(t) return ember.tensor(t) end
local function I(t) return ember.tensor(t, { dtype = "int64" }) end
local function B(t) return ember.tensor(t, { dtype = "bfloat16" }) end
local function D(t) return ember.tensor(t, { dtype = "float64" }) end
local function E(...) return ember.zeros(...) end
local ENV = setmetatable({ ember = ember, F = F, nan = nan, inf = inf, T = T, I = I, B = B, D = D, E = E },
  { __index = _G })
local TOL = { float32 = 2e-6, float64 = 1e-12, bfloat16 = 2 ^ -7 }
-- below the smallest normal number a difference is noise (ember's sigmoid(-100)
-- is the subnormal 3.8e-44, torch's 0)
local TINY = { float32 = 2 ^ -126, float64 = 2 ^ -1022, bfloat16 = 2 ^ -126 }

local function flat(t, out)
  if type(t) ~= "table" then out[#out + 1] = t return out end
  for _, x in ipairs(t) do flat(x, out) end
  return out
end

local function show(v)
  if v ~= v then return "nan" end
  if v == 0 and 1 / v < 0 then return "-0" end
  return tostring(v)
end

-- nil when the tensor (or number, boolean) got matches torch's want, else why not
local function differs(got, want, anyzero)
  if want.num ~= nil or want.bool ~= nil then
    local w = want.num
    if want.bool ~= nil then w = want.bool end
    if type(got) ~= type(w) then return ("a %s, torch gives a %s"):format(type(got), type(w)) end
    if got ~= w and not (got ~= got and w ~= w) then return ("%s, torch %s"):format(show(got), show(w)) end
    return nil
  end
  if not ember.is_tensor(got) then return ("a %s, torch gives a tensor"):format(type(got)) end
  if got.dtype ~= want.dtype then return ("dtype %s, torch %s"):format(got.dtype, want.dtype) end
  local gs = {}
  for i = 1, got:dim() do gs[i] = got:size(i) end
  if table.concat(gs, ",") ~= table.concat(want.shape, ",") then
    return ("shape [%s], torch [%s]"):format(table.concat(gs, ","), table.concat(want.shape, ","))
  end
  local vals = flat(got:tolist(), {})
  local tol = TOL[got.dtype] or 0
  for i, w in ipairs(want.data) do
    local g = vals[i]
    if type(w) == "boolean" or type(g) == "boolean" then
      if g ~= w then return ("[%d] %s, torch %s"):format(i, tostring(g), tostring(w)) end
    elseif w ~= w or g ~= g then
      if (w ~= w) ~= (g ~= g) then return ("[%d] %s, torch %s"):format(i, show(g), show(w)) end
    elseif w == inf or w == -inf or g == inf or g == -inf then
      if g ~= w then return ("[%d] %s, torch %s"):format(i, show(g), show(w)) end
    elseif w == 0 and g == 0 then
      if not anyzero and (1 / g < 0) ~= (1 / w < 0) then
        return ("[%d] %s, torch %s"):format(i, show(g), show(w))
      end
    elseif math.abs(g - w) > tol * math.max(math.abs(g), math.abs(w)) + (TINY[got.dtype] or 0) then
      return ("[%d] %s, torch %s"):format(i, show(g), show(w))
    end
  end
  return nil
end

describe("special values against PyTorch 1.13", function()
  it("every case of tests/fixtures/special_values.lua agrees", function()
    local bad = {}
    for _, c in ipairs(fx) do
      local chunk = assert(load("return " .. c.lua, "=" .. c.name, "t", ENV))
      local res = table.pack(pcall(chunk))
      local why
      if c.torch_error then
        if res[1] then why = "returns a result; torch raises " .. c.torch_error
        elseif tostring(res[2]):find("attempt to", 1, true) then why = "fails inside: " .. tostring(res[2]) end
      elseif not res[1] then
        why = "raises " .. tostring(res[2])
      elseif res.n - 1 ~= #c.out then
        why = ("%d results, torch %d"):format(res.n - 1, #c.out)
      else
        for i, want in ipairs(c.out) do
          local d = differs(res[i + 1], want, c.anyzero)
          if d then why = ("result %d: %s"):format(i, d) break end
        end
      end
      if why then bad[#bad + 1] = ("%s  (%s): %s"):format(c.name, c.lua, why) end
    end
    assert(#fx > 350, "the fixture lost its cases")
    assert(#bad == 0, #bad .. " of " .. #fx .. " cases differ from PyTorch:\n" .. table.concat(bad, "\n"))
  end)
end)

describe("special values where ember is more exact than PyTorch's formula", function()
  it("log_softmax is (x - max) - log(sum), not x - (max + log(sum))", function()
    -- with |max| far above log(sum), max + log(sum) rounded to max: [1e8, 1e8] gave 0, 0
    for _, dt in ipairs { "float32", "float64", "bfloat16" } do
      local big = dt == "float64" and 1e20 or 1e8
      local y = ember.tensor({ big, big, big }, { dtype = dt }):log_softmax(1)
      for _, v in ipairs(y:tolist()) do
        assert(math.abs(v + math.log(3)) < (dt == "bfloat16" and 1e-2 or 1e-6), dt .. ": " .. tostring(v))
      end
      local two = ember.tensor({ { big, big } }, { dtype = dt })
      assert(math.abs(F.log_softmax(two, 2)[1][1]:item() + math.log(2)) < 1e-2, dt)
    end
  end)

  it("layer_norm's two-pass variance keeps the digits torch 1.13 loses on an offset row", function()
    local x = { 1e4, 1e4 + 1, 1e4 + 2 }
    local y = ember.layer_norm(T { x }, 1)[1]:tolist()
    local want = 1 / math.sqrt(2 / 3 + 1e-5) -- (x - mean) / sqrt(var + eps), var = 2/3
    assert(math.abs(y[1] + want) < 1e-6 and y[2] == 0 and math.abs(y[3] - want) < 1e-6,
      table.concat(y, " "))
  end)

  it("bfloat16 matmul and prod accumulate in float32 (torch 1.13's CPU matmul adds in bfloat16; it has no prod)", function()
    local o = ember.ones(1, 3000, { dtype = "bfloat16" }):matmul(ember.ones(3000, 1, { dtype = "bfloat16" }))
    assert.are.equal(3008, o:item()) -- 3000 rounded to bfloat16 (ties to even); torch 1.13 gives 256
    assert.are.equal(243, B { 3, 3, 3, 3, 3 }:prod():item())
  end)
end)

describe("special values where ember differs from PyTorch on purpose", function()
  it("cross_entropy's mean of no counted target is 0 (documented); nll_loss's is NaN, as torch's", function()
    assert.are.equal(0, F.cross_entropy(T { { 1, 2 } }, I { -100 }):item())
    assert.are.equal(0, F.cross_entropy(E(0, 3), I {}):item())
    local n = F.nll_loss(T { { -1, -2 } }, I { -100 }):item()
    assert(n ~= n, "nll_loss of targets all ignored: " .. tostring(n))
  end)

  it("binary_cross_entropy of a NaN probability is NaN (torch raises: NaN is not in [0, 1])", function()
    local l = F.binary_cross_entropy(T { nan }, T { 1 }):item()
    assert(l ~= l)
    assert.has_error(function() F.binary_cross_entropy(T { 1.5 }, T { 1 }) end)
  end)

  it("floor_divide(INT64_MIN, -1) wraps as int64 arithmetic (torch 1.13 dies with SIGFPE)", function()
    assert.are.equal(math.mininteger, ember.floor_divide(I { math.mininteger }, I { -1 })[1]:item())
  end)

  it("amax/amin over a dim of size 0 raise naming amax/amin (torch: Expected reduction dim to have non-zero size)", function()
    for _, op in ipairs { "amax", "amin" } do
      local ok, err = pcall(ember[op], E(2, 0), 2)
      assert(not ok and tostring(err):find("ember." .. op .. ": cannot reduce over dim 2 of size 0", 1, true),
        tostring(err))
      assert.are.same({ 0 }, { ember[op](E(2, 0), 1):size(1) }) -- over the dim of size 2: an empty result
    end
  end)

  it("a query that every mask hides gets 0 and gradient 0 (torch: NaN) in every attention entry", function()
    ember.manual_seed(7)
    local B_, H, L, S, Dh = 1, 2, 3, 4, 8
    local q, k, v = ember.randn(B_, H, L, Dh), ember.randn(B_, H, S, Dh), ember.randn(B_, H, S, Dh)
    local allow = ember.ones(L, S):bool()
    allow[2] = ember.zeros(S):bool()
    local fm = ember.zeros(L, S):masked_fill(allow:logical_not(), -inf)
    local function check(o, what)
      assert(not o:isnan():any():item(), what .. ": NaN")
      assert.are.equal(0, o:select(3, 2):abs():max():item(), what)
      assert(o:select(3, 1):abs():max():item() > 0, what)
    end
    local qq = q:clone():requires_grad_()
    local o = ember.scaled_dot_product_attention(qq, k, v, allow)
    check(o, "sdpa bool mask")
    o:sum():backward()
    assert.are.equal(0, qq.grad:select(3, 2):abs():max():item())
    check(ember.scaled_dot_product_attention(q, k, v, fm), "sdpa float mask")
    local m = fm:clone():requires_grad_()
    o = ember.scaled_dot_product_attention(q, k, v, m)
    check(o, "sdpa learned mask")
    o:sum():backward()
    assert(not m.grad:isnan():any():item())
    check(ember.scaled_dot_product_attention(q:bfloat16(), k:bfloat16(), v:bfloat16(), allow):float(), "sdpa bf16")
    local at = nn.Attention { attention = "standard", heads = H, head_dim = Dh }
    local ao, aw = at(q, k, v, { attn_mask = allow, need_weights = true })
    check(ao, "nn.Attention")
    check(aw, "nn.Attention weights")
    local mha = nn.MultiHeadAttention(H * Dh, H, { bias = false })
    local x, kv = ember.randn(B_, L, H * Dh), ember.randn(B_, S, H * Dh)
    local y, w = mha(x, kv, { allow_mask = allow, need_weights = true })
    check(y:view(B_, 1, L, H * Dh), "nn.MultiHeadAttention")
    check(w, "nn.MultiHeadAttention weights")
    local tm = nn.MultiheadAttention(H * Dh, H, { batch_first = true, bias = false })
    local ty, tw = tm(x, kv, kv, { attn_mask = allow:logical_not() })
    check(ty:view(B_, 1, L, H * Dh), "nn.MultiheadAttention")
    check(tw:view(B_, 1, L, S), "nn.MultiheadAttention weights")
  end)
end)
