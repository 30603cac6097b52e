-- check_plugin.lua -- the conformance checker for attention variants.
--
--   ember scripts/check_plugin.lua NAME_OR_PATH [option=value ...] [--quick]
--
-- NAME is a loaded variant ("local"); a PATH (with a '/' or ending in .so)
-- is loaded first with ember.load_plugin. The options are the variant's own
-- (window_left=8 mode=block ...), used for every check.
--
-- It checks, on small float64 problems:
--   options   unknown names, wrong types, values out of range or not among
--             the choices are refused with a clear message;
--   shapes    wrong ranks, mismatched sizes, dtypes and unsupported inputs
--             are refused, naming what was wrong;
--   grads     central finite differences of q, k, v and the variant's own
--             learned parameters, with each mask kind the variant supports;
--   masks     the documented semantics (ember_attention.h): key padding,
--             boolean true = may attend, additive masks, bottom-right
--             causal alignment, fully masked rows give 0 and 0 gradients;
--   seed      determinism under ember.manual_seed, dropout only in training;
--   weights   shape, rows summing to 1, out = weights v where that holds;
--   exact     equality with the standard variant where the variant is exact
--             (local window >= L, block-sparse with every block on, relpos
--             with zero tables), with dense references written here
--             (linear, ALiBi, T5 buckets), and between a variant's own paths
--             (standard's kernels; relpos's host kernel vs core ops);
--   float32   agrees with float64.
-- Prints "ok N - what" / "not ok N - what: why", then "N passed, M failed";
-- exits with status 1 if anything failed.
local ember = ember or require "ember"

local target, user_opts, quick = nil, {}, false
for _, a in ipairs(arg) do
  if a == "--quick" then
    quick = true
  elseif a:find("=") then
    local k, v = a:match("^([%w_]+)=(.*)$")
    if not k then error("bad option '" .. a .. "' (expected name=value)") end
    if v == "true" then v = true
    elseif v == "false" then v = false
    elseif tonumber(v) then v = math.tointeger(tonumber(v)) or tonumber(v) end
    user_opts[k] = v
  elseif not target then
    target = a
  else
    error("unexpected argument '" .. a .. "'")
  end
end
if not target then
  io.stderr:write("usage: ember scripts/check_plugin.lua NAME_OR_PATH [option=value ...] [--quick]\n")
  os.exit(2)
end

local name = target
if target:find("/") or target:match("%.so$") then
  name = ember.load_plugin(target).name
end
local desc = ember.attention_variants(name)
local caps = desc.caps

-- ---------------------------------------------------------------- output
local passed, failed, n = 0, 0, 0
local function report(ok, what, why)
  n = n + 1
  if ok then
    passed = passed + 1
    print(string.format("ok %d - %s", n, what))
  else
    failed = failed + 1
    print(string.format("not ok %d - %s: %s", n, what, tostring(why)))
  end
end

-- check(what, fn): fn returns true, or false/nil and a reason, or raises.
local function check(what, fn)
  local ok, res, why = pcall(fn)
  if not ok then report(false, what, "raised: " .. tostring(res))
  else report(res, what, why) end
end

-- The call raises an error whose message contains every pattern (plain).
local function raises(fn, ...)
  local ok, err = pcall(fn)
  if ok then return false, "no error raised" end
  err = tostring(err)
  for _, p in ipairs({...}) do
    if not err:find(p, 1, true) then return false, "error lacks '" .. p .. "': " .. err end
  end
  return true
end

-- ---------------------------------------------------------------- helpers
local function merged(extra)
  local t = {}
  for k, v in pairs(user_opts) do t[k] = v end
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

local function make(extra, dims)
  local o = merged(extra)
  o.attention = name
  o.heads = dims and dims.H or 2
  o.head_dim = dims and dims.dk or 3
  o.v_head_dim = dims and dims.dv or 4
  o.dtype = dims and dims.dtype or "float64"
  -- eval mode: checks that want training (dropout, redraw) ask for it
  return ember.Attention(o):eval()
end

local function randn(shape, dtype) return ember.randn(shape, {dtype = dtype or "float64"}) end

local function maxabs(t) return t:double():abs():max():item() end
local function maxdiff(a, b) return (a:double() - b:double()):abs():max():item() end
local function finite(t) return t:double():ne(t:double()):logical_not():logical_and(t:double():abs():lt(math.huge)) end
local function all_finite(t) return finite(t):logical_not():double():sum():item() == 0 end

local function close(a, b, tol, what)
  if not a then return false, (what or "value") .. " is nil" end
  local d, s = maxdiff(a, b), maxabs(b)
  if d <= tol * math.max(s, 1) then return true end
  return false, string.format("%s differs by %.3g (scale %.3g, tol %.1g)", what or "value", d, s, tol)
end

-- A problem: q, k, v and the call options.
local function problem(p)
  p = p or {}
  local B, H, Lq, Lk, dk, dv = p.B or 2, p.H or 2, p.Lq or 5, p.Lk or p.Lq or 5, p.dk or 3, p.dv or 4
  local dt = p.dtype or "float64"
  return {q = randn({B, H, Lq, dk}, dt), k = randn({B, H, Lk, dk}, dt), v = randn({B, H, Lk, dv}, dt),
          B = B, H = H, Lq = Lq, Lk = Lk, dk = dk, dv = dv}
end

local function kp_mask(B, Lk) -- batch 1: last two keys padded; others none
  local rows = {}
  for b = 1, B do
    local r = {}
    for j = 1, Lk do r[j] = (b == 1 and j > Lk - 2) end
    rows[b] = r
  end
  return ember.tensor(rows)
end

local function bool_mask(Lq, Lk, seed) -- random, every row keeps its last key
  local rows, s = {}, seed or 7
  for i = 1, Lq do
    local r = {}
    for j = 1, Lk do
      s = (s * 1103515245 + 12345) % 2147483648
      r[j] = j == Lk or (s % 3 ~= 0)
    end
    rows[i] = r
  end
  return ember.tensor(rows)
end

local function causal_allowed(Lq, Lk) -- j <= i + Lk - Lq (1-based i, j: same rule)
  local rows = {}
  for i = 1, Lq do
    local r = {}
    for j = 1, Lk do r[j] = j <= i + Lk - Lq end
    rows[i] = r
  end
  return ember.tensor(rows)
end

local function additive_of(mask, dtype) -- bool (true = may attend) -> 0 / -inf
  return ember.zeros(mask.shape, {dtype = dtype or "float64"}):masked_fill(mask:logical_not(), -math.huge)
end

-- ---------------------------------------------------------------- options
print(string.format("# %s %s: %s", desc.name, desc.version, desc.description))
print("# " .. desc.path)
check("builds with the given options", function()
  local a = make()
  return a.attention == name, "wrong variant name " .. tostring(a.attention)
end)
check("an unknown option is refused, listing the accepted ones", function()
  local names = {}
  for _, o in ipairs(desc.options) do names[#names + 1] = o.name end
  return raises(function() make({no_such_option_xyz = 1}) end, "no_such_option_xyz",
                table.unpack(names))
end)
for _, o in ipairs(desc.options) do
  if user_opts[o.name] == nil then
    check("option " .. o.name .. ": a wrong type is refused", function()
      local bad = (o.type == "string") and 12 or "not-a-" .. o.type
      if o.type == "bool" then bad = 1 end
      return raises(function() make({[o.name] = bad}) end, o.name)
    end)
    if o.min then
      check("option " .. o.name .. ": a value below its range is refused", function()
        return raises(function() make({[o.name] = o.min - 1}) end, o.name)
      end)
    end
    if o.choices then
      check("option " .. o.name .. ": a value not among " .. o.choices .. " is refused", function()
        return raises(function() make({[o.name] = "no-such-choice"}) end, o.name, "no-such-choice")
      end)
    end
    if o.type == "int" then
      check("option " .. o.name .. ": a non-integer is refused", function()
        return raises(function() make({[o.name] = (o.min or 0) + 1.5}) end, o.name)
      end)
    end
  end
end

-- ---------------------------------------------------------------- shapes
do
  local a = make()
  local p = problem()
  check("forward gives out [B,H,Lq,dv] with dv ~= dk", function()
    local out = a:forward(p.q, p.k, p.v)
    local s = out.shape
    return s[1] == p.B and s[2] == p.H and s[3] == p.Lq and s[4] == p.dv and out.dtype == "float64",
           "got " .. table.concat(s, "x") .. " " .. out.dtype
  end)
  check("3-d q is refused naming the shapes", function()
    return raises(function() a:forward(p.q[1], p.k, p.v) end, "[2, 5, 3]")
  end)
  check("q and k with different head dims are refused", function()
    return raises(function() a:forward(p.q, randn({2, 2, 5, 2}), p.v) end, "k")
  end)
  check("k and v with different lengths are refused", function()
    return raises(function() a:forward(p.q, p.k, randn({2, 2, 4, 4})) end, "v")
  end)
  check("different batch sizes are refused", function()
    return raises(function() a:forward(p.q, randn({1, 2, 5, 3}), randn({1, 2, 5, 4})) end, "k")
  end)
  check("mixed dtypes are refused naming them", function()
    return raises(function() a:forward(p.q:float(), p.k, p.v) end, "float32", "float64")
  end)
  check("int64 inputs are refused", function()
    return raises(function() a:forward(p.q:long(), p.k:long(), p.v:long()) end, "int64")
  end)
  check("a key padding mask of the wrong shape is refused", function()
    if not caps.key_padding then return true end
    return raises(function() a:forward(p.q, p.k, p.v, {key_padding_mask = ember.zeros({2, 4}, {dtype = "bool"})}) end,
                  "key_padding_mask")
  end)
  check("a float key padding mask is refused", function()
    if not caps.key_padding then return true end
    return raises(function() a:forward(p.q, p.k, p.v, {key_padding_mask = ember.zeros({2, 5}, {dtype = "float64"})}) end,
                  "key_padding_mask")
  end)
  check("an attn mask that does not broadcast is refused", function()
    if not caps.mask then return true end
    return raises(function() a:forward(p.q, p.k, p.v, {attn_mask = ember.ones({3, 5}, {dtype = "bool"})}) end,
                  "attn_mask")
  end)
  local unsupported = {
    {"mask", function() a:forward(p.q, p.k, p.v, {attn_mask = ember.ones({5, 5}, {dtype = "bool"})}) end},
    {"key_padding", function() a:forward(p.q, p.k, p.v, {key_padding_mask = kp_mask(2, 5)}) end},
    {"causal", function() a:forward(p.q, p.k, p.v, {causal = true}) end},
    {"weights", function() a:forward(p.q, p.k, p.v, {need_weights = true}) end},
    {"dropout", function() a:train(); a:forward(p.q, p.k, p.v, {dropout = 0.5}) end},
  }
  for _, u in ipairs(unsupported) do
    if not caps[u[1]] then
      check("an undeclared capability (" .. u[1] .. ") is refused clearly", function()
        return raises(u[2], "does not support")
      end)
    end
  end
  a:eval()
  check("dropout outside [0, 1) is refused", function()
    return raises(function() a:forward(p.q, p.k, p.v, {dropout = 1.5}) end, "dropout")
  end)
end

-- ---------------------------------------------------------------- gradients
-- loss = sum(out * R); compares autograd with central differences for every
-- element of q, k, v and the learned parameters.
local function gradcheck(a, p, opts, tol)
  local q, k, v = p.q:clone():requires_grad_(), p.k:clone():requires_grad_(), p.v:clone():requires_grad_()
  a:zero_grad()
  local out = a:forward(q, k, v, opts)
  local R = randn(out.shape)
  out:backward(R)
  local function loss()
    return (a:forward(q, k, v, opts) * R):sum():item()
  end
  local targets = {{"q", q}, {"k", k}, {"v", v}}
  for pname, t in pairs(a:named_parameters()) do targets[#targets + 1] = {pname, t} end
  local worst, where = 0, ""
  ember.no_grad(function()
    for _, tt in ipairs(targets) do
      local label, t = tt[1], tt[2]
      local g = t.grad
      if not g then error("no gradient for " .. label) end
      local flat, gflat = t:view(-1), g:contiguous():view(-1)
      local nel = flat:numel()
      local step = (quick and nel > 40) and math.max(1, nel // 40) or 1
      for i = 1, nel, step do
        local x0 = flat[i]:item()
        local h = 1e-6
        flat[i] = x0 + h
        local lp = loss()
        flat[i] = x0 - h
        local lm = loss()
        flat[i] = x0
        local fd, an = (lp - lm) / (2 * h), gflat[i]:item()
        local e = math.abs(fd - an) / math.max(1, math.abs(fd), math.abs(an))
        if e ~= e then e = math.huge end
        if e > worst then worst, where = e, string.format("%s[%d]: numeric %.8g, autograd %.8g", label, i, fd, an) end
      end
    end
  end)
  if worst <= (tol or 1e-5) then return true end
  return false, string.format("error %.3g at %s", worst, where)
end

do
  local configs = {{"no mask", {}, {}}}
  if caps.causal then configs[#configs + 1] = {"causal", {}, {causal = true}} end
  if caps.key_padding then configs[#configs + 1] = {"key padding", {}, {key_padding_mask = kp_mask(2, 5)}} end
  if caps.mask then
    configs[#configs + 1] = {"boolean mask", {}, {attn_mask = bool_mask(5, 5)}}
    configs[#configs + 1] = {"additive mask [B,H,Lq,Lk]", {}, {attn_mask = randn({2, 2, 5, 5})}}
  end
  if caps.cross then
    configs[#configs + 1] = {"cross Lq=3 Lk=6", {Lq = 3, Lk = 6}, {}}
    if caps.causal then configs[#configs + 1] = {"cross Lq=4 Lk=6 causal", {Lq = 4, Lk = 6}, {causal = true}} end
    if caps.causal and caps.key_padding then
      configs[#configs + 1] = {"cross Lq=6 Lk=4 causal + key padding (rows with no key)", {Lq = 6, Lk = 4},
                               {causal = true, key_padding_mask = kp_mask(2, 4)}}
    end
  end
  if caps.causal and caps.key_padding and caps.mask then
    configs[#configs + 1] = {"causal + key padding + additive mask", {},
                             {causal = true, key_padding_mask = kp_mask(2, 5), attn_mask = randn({5, 5})}}
  end
  for _, c in ipairs(configs) do
    check("float64 gradients (q, k, v, parameters) match finite differences: " .. c[1], function()
      ember.manual_seed(11)
      local a = make()
      -- learned tables start small; make them O(1) so their effect is visible
      ember.no_grad(function()
        for _, t in pairs(a:named_parameters()) do t:copy_(randn(t.shape) * 0.5) end
      end)
      return gradcheck(a, problem(c[2]), c[3])
    end)
  end
end

-- ---------------------------------------------------------------- mask semantics
local function rows_equal(a, b, bi, rows, tol)
  for _, i in ipairs(rows) do
    local d = maxdiff(a[bi]:select(2, i), b[bi]:select(2, i))
    if d > (tol or 1e-12) then return false, string.format("batch %d row %d changed by %.3g", bi, i, d) end
  end
  return true
end

-- Changing k/v at key j (for batch bi) and seeing which rows move.
local function perturbed(p, bi, j)
  local k, v = p.k:clone(), p.v:clone()
  ember.no_grad(function()
    k[bi]:select(2, j):copy_(randn({p.H, p.dk}) * 3)
    v[bi]:select(2, j):copy_(randn({p.H, p.dv}) * 3)
  end)
  return k, v
end

if caps.key_padding then
  check("key padding (true = padding): padded keys do not affect the output", function()
    local a, p = make(), problem()
    local m = kp_mask(2, 5)
    local o1 = a:forward(p.q, p.k, p.v, {key_padding_mask = m})
    local k2, v2 = perturbed(p, 1, 5)
    local o2 = a:forward(p.q, k2, v2, {key_padding_mask = m})
    local ok, why = rows_equal(o1, o2, 1, {1, 2, 3, 4, 5})
    if not ok then return false, why end
    local o3 = a:forward(p.q, k2, v2)
    return maxdiff(o1, o3) > 1e-6, "without the mask the change should show"
  end)
  -- Only for variants without positions: dropping keys moves the others.
  if caps.cross and name ~= "local" and name ~= "relpos" then
    check("key padding equals dropping the padded keys", function()
      local a, p = make(), problem()
      local o1 = a:forward(p.q, p.k, p.v, {key_padding_mask = kp_mask(2, 5)})
      local o2 = a:forward(p.q[1]:unsqueeze(1), p.k[1]:narrow(2, 1, 3):unsqueeze(1), p.v[1]:narrow(2, 1, 3):unsqueeze(1))
      return close(o1[1], o2[1], 1e-12, "batch 1")
    end)
  end
end

if caps.causal then
  local shapes = {{5, 5}}
  if caps.cross then shapes = {{5, 5}, {3, 6}, {6, 4}} end
  for _, sh in ipairs(shapes) do
    local Lq, Lk = sh[1], sh[2]
    check(string.format("causal is bottom-right aligned (Lq=%d, Lk=%d): key j reaches query i iff j <= i + Lk - Lq", Lq, Lk), function()
      local a, p = make(), problem({Lq = Lq, Lk = Lk})
      local o1 = a:forward(p.q, p.k, p.v, {causal = true})
      for j = 1, Lk do
        local k2, v2 = perturbed(p, 2, j)
        local o2 = a:forward(p.q, k2, v2, {causal = true})
        for i = 1, Lq do
          local d = maxdiff(o1[2]:select(2, i), o2[2]:select(2, i))
          local visible = j <= i + Lk - Lq
          -- (a local pattern may hide visible keys too: only "no leak" applies)
          if visible and d < 1e-9 and name ~= "local" then
            return false, string.format("key %d should reach query %d", j, i)
          end
          if not visible and d > 1e-12 then return false, string.format("key %d leaks into query %d (%.3g)", j, i, d) end
        end
      end
      return true
    end)
  end
end

if caps.mask then
  check("boolean mask: true = may attend (equals the additive 0/-inf mask)", function()
    local a, p = make(), problem()
    local m = bool_mask(5, 5)
    local o1 = a:forward(p.q, p.k, p.v, {attn_mask = m})
    local o2 = a:forward(p.q, p.k, p.v, {attn_mask = additive_of(m)})
    local ok, why = close(o1, o2, 1e-12, "bool vs additive")
    if not ok then return false, why end
    local o3 = a:forward(p.q, p.k, p.v, {attn_mask = ember.ones({5, 5}, {dtype = "bool"})})
    return close(o3, a:forward(p.q, p.k, p.v), 1e-12, "all-true mask vs no mask")
  end)
  check("boolean mask: a key masked for a row does not reach that row", function()
    local a, p = make(), problem()
    local m = bool_mask(5, 5)
    local o1 = a:forward(p.q, p.k, p.v, {attn_mask = m})
    for j = 1, 5 do
      local k2, v2 = perturbed(p, 1, j)
      local o2 = a:forward(p.q, k2, v2, {attn_mask = m})
      for i = 1, 5 do
        local allowed = m[i][j]:item()
        local d = maxdiff(o1[1]:select(2, i), o2[1]:select(2, i))
        if (allowed == false or allowed == 0) and d > 1e-12 then
          return false, string.format("masked key %d reaches query %d", j, i)
        end
      end
    end
    return true
  end)
  check("additive mask broadcasts from [Lq,Lk] like an explicit [B,H,Lq,Lk]", function()
    local a, p = make(), problem()
    local m = randn({5, 5})
    local o1 = a:forward(p.q, p.k, p.v, {attn_mask = m})
    local o2 = a:forward(p.q, p.k, p.v, {attn_mask = m:expand(2, 2, 5, 5):contiguous()})
    return close(o1, o2, 1e-12)
  end)
end

-- Fully masked rows: zero output, zero (finite) gradients.
local function fully_masked(opts, pshape, rows_of)
  return function()
    ember.manual_seed(5)
    local a, p = make(), problem(pshape)
    local q, k, v = p.q:clone():requires_grad_(), p.k:clone():requires_grad_(), p.v:clone():requires_grad_()
    local out = a:forward(q, k, v, opts)
    if not all_finite(out) then return false, "output has NaN/inf" end
    out:backward(randn(out.shape))
    for _, g in ipairs({q.grad, k.grad, v.grad}) do
      if not all_finite(g) then return false, "a gradient has NaN/inf" end
    end
    for _, br in ipairs(rows_of) do
      local b, i = br[1], br[2]
      if maxabs(out[b]:select(2, i)) ~= 0 then return false, string.format("batch %d row %d is not 0", b, i) end
      if maxabs(q.grad[b]:select(2, i)) ~= 0 then return false, string.format("dq of batch %d row %d is not 0", b, i) end
    end
    return true
  end
end
if caps.key_padding then
  local all_pad = ember.tensor({{false, false, false, false, false}, {true, true, true, true, true}})
  check("fully masked rows (all keys padded) give 0 output and 0 gradients, no NaN",
        fully_masked({key_padding_mask = all_pad}, {}, {{2, 1}, {2, 3}, {2, 5}}))
end
if caps.mask then
  local m = bool_mask(5, 5)
  ember.no_grad(function() m[3]:fill_(false) end)
  check("a fully masked row (boolean mask) gives 0 output and 0 gradients, no NaN",
        fully_masked({attn_mask = m}, {}, {{1, 3}, {2, 3}}))
  local add = randn({5, 5})
  ember.no_grad(function() add[2]:fill_(-math.huge) end)
  check("a fully masked row (additive -inf) gives 0 output and 0 gradients, no NaN",
        fully_masked({attn_mask = add}, {}, {{1, 2}, {2, 2}}))
end
if caps.causal and caps.cross then
  check("causal with Lq > Lk: the first rows see no key and give 0, no NaN",
        fully_masked({causal = true}, {Lq = 6, Lk = 4}, {{1, 1}, {1, 2}, {2, 1}, {2, 2}}))
end

-- ---------------------------------------------------------------- determinism
check("same seed, same construction and output", function()
  local p = problem()
  ember.manual_seed(123)
  local o1 = make():forward(p.q, p.k, p.v)
  ember.manual_seed(123)
  local o2 = make():forward(p.q, p.k, p.v)
  return maxdiff(o1, o2) == 0, "outputs differ"
end)
if caps.dropout then
  check("dropout: deterministic under a seed, random across draws, off in eval", function()
    local a, p = make(), problem({Lq = 8, Lk = 8})
    a:train()
    ember.manual_seed(9)
    local o1 = a:forward(p.q, p.k, p.v, {dropout = 0.5})
    local o1b = a:forward(p.q, p.k, p.v, {dropout = 0.5})
    ember.manual_seed(9)
    local o2 = a:forward(p.q, p.k, p.v, {dropout = 0.5})
    if maxdiff(o1, o2) ~= 0 then return false, "same seed gave different outputs" end
    if maxdiff(o1, o1b) == 0 then return false, "two draws gave the same output" end
    local plain = a:forward(p.q, p.k, p.v)
    if maxdiff(o1, plain) < 1e-6 then return false, "dropout changed nothing" end
    a:eval()
    local oe = a:forward(p.q, p.k, p.v, {dropout = 0.5})
    return maxdiff(oe, plain) == 0, "eval mode still drops"
  end)
  check("float64 gradients with dropout match finite differences (same seed each call)", function()
    local a, p = make(), problem()
    a:train()
    -- reseeding before every forward makes the dropout mask fixed
    local q, k, v = p.q:clone():requires_grad_(), p.k:clone():requires_grad_(), p.v:clone():requires_grad_()
    ember.manual_seed(77)
    local out = a:forward(q, k, v, {dropout = 0.3})
    local R = randn(out.shape)
    out:backward(R)
    local worst = 0
    ember.no_grad(function()
      for _, t in ipairs({q, k, v}) do
        local flat, g = t:view(-1), t.grad:contiguous():view(-1)
        for i = 1, flat:numel() do
          local x0 = flat[i]:item()
          flat[i] = x0 + 1e-6
          ember.manual_seed(77)
          local lp = (a:forward(q, k, v, {dropout = 0.3}) * R):sum():item()
          flat[i] = x0 - 1e-6
          ember.manual_seed(77)
          local lm = (a:forward(q, k, v, {dropout = 0.3}) * R):sum():item()
          flat[i] = x0
          local fd = (lp - lm) / 2e-6
          worst = math.max(worst, math.abs(fd - g[i]:item()) / math.max(1, math.abs(fd)))
        end
      end
    end)
    a:eval()
    return worst < 1e-5, string.format("error %.3g", worst)
  end)
end

-- ---------------------------------------------------------------- weights
local out_is_wv = not (name == "relpos" and (user_opts.mode or "shaw") == "shaw")
if caps.weights then
  check("weights are [B,H,Lq,Lk], rows sum to 1 (0 when fully masked)", function()
    local a, p = make(), problem({Lq = 4, Lk = 6})
    local opts = {need_weights = true}
    if caps.key_padding then
      opts.key_padding_mask = ember.tensor({{false, false, false, false, true, true}, {true, true, true, true, true, true}})
    end
    if not caps.cross then p = problem(); opts.key_padding_mask = opts.key_padding_mask and kp_mask(2, 5) end
    local out, w = a:forward(p.q, p.k, p.v, opts)
    local s = w.shape
    if not (s[1] == p.B and s[2] == p.H and s[3] == p.Lq and s[4] == p.Lk) then
      return false, "weights shape " .. table.concat(s, "x")
    end
    -- linear attention: rows sum to den / (den + eps), eps in the denominator
    local sum_tol = name == "linear" and 1e-4 or 1e-10
    if out_is_wv then
      local ok, why = close(out, w:matmul(p.v), 1e-10, "out vs weights @ v")
      if not ok then return false, why end
    end
    -- every row sums to 1, or to 0 when it sees no key (then its output is 0);
    -- batch 2 has every key padded, so all its rows are 0
    local sums = w:sum(-1)
    for b = 1, p.B do
      for h = 1, p.H do
        for i = 1, p.Lq do
          local s = sums[b][h][i]:item()
          local zero_row = maxabs(out[b][h][i]) == 0
          if math.abs(s - 1) > sum_tol and not (math.abs(s) <= sum_tol and zero_row) then
            return false, string.format("row (%d,%d,%d) sums to %.12g", b, h, i, s)
          end
          if b == 2 and caps.key_padding and caps.cross and math.abs(s) > sum_tol then
            return false, string.format("row (%d,%d,%d) of an all-padded batch sums to %.12g", b, h, i, s)
          end
        end
      end
    end
    return true
  end)
  check("asking for weights does not change the output", function()
    local a, p = make(), problem()
    local o1 = a:forward(p.q, p.k, p.v, {causal = caps.causal or nil})
    local o2 = a:forward(p.q, p.k, p.v, {causal = caps.causal or nil, need_weights = true})
    return close(o1, o2, 1e-12)
  end)
end

-- ---------------------------------------------------------------- exactness
local std = ember.Attention{attention = "standard", heads = 2, head_dim = 3, v_head_dim = 4, dtype = "float64"}
local function equals_standard(what, extra, dims, setup, all_opts)
  check(what, function()
    local a = make(extra)
    if setup then setup(a) end
    local p = problem(dims)
    local list = all_opts or {{}}
    for _, opts in ipairs(list) do
      local o1, o2 = a:forward(p.q, p.k, p.v, opts), std:forward(p.q, p.k, p.v, opts)
      local ok, why = close(o1, o2, 1e-10, "vs standard")
      if not ok then return false, why end
    end
    return true
  end)
end
local mask_sets = {{}}
if caps.causal then mask_sets[#mask_sets + 1] = {causal = true} end
if caps.key_padding then mask_sets[#mask_sets + 1] = {key_padding_mask = kp_mask(2, 5)} end
if caps.mask then mask_sets[#mask_sets + 1] = {attn_mask = bool_mask(5, 5)} end

if name == "local" then
  equals_standard("sliding window >= L equals standard", {mode = "sliding", window_left = 8, window_right = 8}, {}, nil, mask_sets)
  equals_standard("block-sparse with every block on equals standard",
                  {mode = "block", block_size = 2, local_blocks = 3, global_blocks = 0, global_tokens = 0}, {}, nil, mask_sets)
  equals_standard("block-sparse with every token global equals standard",
                  {mode = "block", block_size = 1, local_blocks = 0, global_tokens = 5}, {}, nil, mask_sets)
  check("sliding window: query i sees exactly keys i-left..i+right (self included)", function()
    local a, p = make({mode = "sliding", window_left = 1, window_right = 2}), problem({Lq = 6, Lk = 6})
    local allowed = {}
    for i = 1, 6 do
      allowed[i] = {}
      for j = 1, 6 do allowed[i][j] = j >= i - 1 and j <= i + 2 end
    end
    local ref = std:forward(p.q, p.k, p.v, {attn_mask = ember.tensor(allowed)})
    return close(a:forward(p.q, p.k, p.v), ref, 1e-12, "vs masked standard")
  end)
  check("block-sparse pattern: local blocks + global tokens, as a dense mask", function()
    local a = make({mode = "block", block_size = 2, local_blocks = 0, global_tokens = 1, global_blocks = 0})
    local p = problem({Lq = 6, Lk = 6})
    local allowed = {}
    for i = 1, 6 do
      allowed[i] = {}
      for j = 1, 6 do
        allowed[i][j] = i == 1 or j == 1 or (i - 1) // 2 == (j - 1) // 2
      end
    end
    local ref = std:forward(p.q, p.k, p.v, {attn_mask = ember.tensor(allowed)})
    return close(a:forward(p.q, p.k, p.v), ref, 1e-12, "vs masked standard")
  end)
end

if name == "relpos" then
  local mode = user_opts.mode or "shaw"
  if mode ~= "alibi" then
    local function zero(a) ember.no_grad(function() for _, t in pairs(a:named_parameters()) do t:zero_() end end) end
    equals_standard("relpos (" .. mode .. ") with zero tables equals standard", {}, {}, zero, mask_sets)
  end
  if (user_opts.kernel or "auto") ~= "dense" then
    for _, opts in ipairs(mask_sets) do
      local label = next(opts) and next(opts) or "no mask"
      check("relpos (" .. mode .. ") host kernel equals the composed core ops, outputs and gradients: " .. label, function()
        ember.manual_seed(21)
        local a = make()
        ember.no_grad(function() for _, t in pairs(a:named_parameters()) do t:copy_(randn(t.shape)) end end)
        local b = make({kernel = "dense"})
        b:load_state_dict(a:state_dict())
        local p = problem({Lq = 4, Lk = 6})
        if opts.key_padding_mask then opts = {key_padding_mask = ember.tensor({{false, false, false, false, true, true}, {false, false, false, false, false, false}})} end
        if opts.attn_mask then opts = {attn_mask = bool_mask(4, 6)} end
        local grads = {}
        for n, m in ipairs({a, b}) do
          local q, k, v = p.q:clone():requires_grad_(), p.k:clone():requires_grad_(), p.v:clone():requires_grad_()
          local out = m:forward(q, k, v, opts)
          out:backward(ember.ones(out.shape, {dtype = "float64"}))
          grads[n] = {out = out, q = q.grad, k = k.grad, v = v.grad, params = m:named_parameters()}
        end
        for _, key in ipairs({"out", "q", "k", "v"}) do
          local ok, why = close(grads[1][key], grads[2][key], 1e-10, key)
          if not ok then return false, why end
        end
        for pname, t in pairs(grads[1].params) do
          local ok, why = close(t.grad, grads[2].params[pname].grad, 1e-10, "grad " .. pname)
          if not ok then return false, why end
        end
        return true
      end)
    end
  end
  if mode == "alibi" then
    local function alibi_ref(H)
      local function pow2(nh) local s = 2 ^ (-8 / nh); local t = {} for i = 1, nh do t[i] = s ^ i end return t end
      local p2 = 1
      while p2 * 2 <= H do p2 = p2 * 2 end
      local sl = pow2(p2)
      local extra = pow2(2 * p2)
      for i = 1, H - p2 do sl[#sl + 1] = extra[2 * i - 1] end
      return sl
    end
    for _, H in ipairs({2, 6}) do
      check("ALiBi (" .. H .. " heads) equals standard with the -slope*|i-j| bias, the paper's slopes", function()
        local a = make({}, {H = H, dk = 3, dv = 4})
        local s = ember.Attention{attention = "standard", heads = H, head_dim = 3, v_head_dim = 4, dtype = "float64"}
        local p = problem({H = H})
        local slopes = alibi_ref(H)
        local bias = {}
        for h = 1, H do
          bias[h] = {}
          for i = 1, 5 do
            bias[h][i] = {}
            for j = 1, 5 do bias[h][i][j] = -slopes[h] * math.abs(i - j) end
          end
        end
        local b = ember.tensor(bias, {dtype = "float64"})
        return close(a:forward(p.q, p.k, p.v, {causal = true}), s:forward(p.q, p.k, p.v, {causal = true, attn_mask = b}), 1e-12)
      end)
    end
  end
  if mode == "t5" then
    check("T5 bias = table[bucket(j - i), h] with the reference bucket function", function()
      local nb, md = user_opts.num_buckets or 32, user_opts.max_distance or 128
      local bi = user_opts.bidirectional ~= false
      local function bucket(rel)
        local ret, nbk, nn = 0, nb, nil
        if bi then
          nbk = nb // 2
          if rel > 0 then ret = ret + nbk end
          nn = math.abs(rel)
        else
          nn = rel < 0 and -rel or 0
        end
        local max_exact = nbk // 2
        if nn < max_exact then return ret + nn end
        local large = max_exact + math.floor(math.log(nn / max_exact) / math.log(md / max_exact) * (nbk - max_exact))
        return ret + math.min(large, nbk - 1)
      end
      local a, p = make(), problem({Lq = 7, Lk = 7})
      local tbl = a:named_parameters()["bias"]
      ember.no_grad(function() tbl:copy_(randn(tbl.shape)) end)
      local bias = {}
      for h = 1, 2 do
        bias[h] = {}
        for i = 1, 7 do
          bias[h][i] = {}
          for j = 1, 7 do bias[h][i][j] = tbl[bucket(j - i) + 1][h]:item() end
        end
      end
      return close(a:forward(p.q, p.k, p.v), std:forward(p.q, p.k, p.v, {attn_mask = ember.tensor(bias, {dtype = "float64"})}), 1e-12)
    end)
  end
end

if name == "standard" then
  for _, kern in ipairs({"dense", "fused"}) do
    check("kernel=" .. kern .. " agrees with the default path (every mask kind)", function()
      local a = make({kernel = kern})
      local p = problem()
      for _, opts in ipairs(mask_sets) do
        local ok, why = close(a:forward(p.q, p.k, p.v, opts), std:forward(p.q, p.k, p.v, opts), 1e-12)
        if not ok then return false, why end
      end
      return true
    end)
  end
end

if name == "linear" then
  check("linear equals the dense formula phi(q) phi(k)^T v / (rowsum + eps), causal and padded", function()
    local fm = (user_opts.feature_map or "elu")
    -- favor shifts features for range (exactly cancelling only without eps)
    local eps = fm == "favor" and 0 or (user_opts.eps or 1e-6)
    local a = make({eps = eps})
    local p = problem({Lq = 4, Lk = 6})
    local function phi(x)
      if fm == "elu" then return x:elu() + 1 end
      local w = a:state_dict()["features"]        -- [m, dk]
      local xs = x * math.sqrt(1 / math.sqrt(p.dk))
      local m = w.shape[1]
      return ((xs:matmul(w:transpose(1, 2))) - (xs * xs):sum(-1, true) * 0.5):exp() / math.sqrt(m)
    end
    for _, opts in ipairs({{}, {causal = true}, {key_padding_mask = ember.tensor({{false, false, false, false, true, true}, {false, false, false, false, false, false}})}}) do
      local A = phi(p.q):matmul(phi(p.k):transpose(3, 4))   -- [B,H,Lq,Lk]
      if opts.causal then A = A * causal_allowed(4, 6):double() end
      if opts.key_padding_mask then A = A * opts.key_padding_mask:logical_not():double():view(2, 1, 1, 6) end
      local ref = A:matmul(p.v) / (A:sum(-1, true) + eps)
      local ok, why = close(a:forward(p.q, p.k, p.v, opts), ref, 1e-10, "vs dense formula")
      if not ok then return false, why end
    end
    return true
  end)
  if (user_opts.feature_map or "elu") == "favor" then
    check("favor: redraw=true draws new features per training forward, redraw=false keeps them", function()
      local p = problem()
      local a = make({redraw = false})
      a:train()
      local o1, o2 = a:forward(p.q, p.k, p.v), a:forward(p.q, p.k, p.v)
      if maxdiff(o1, o2) ~= 0 then return false, "redraw=false changed between calls" end
      local b = make({redraw = true})
      b:train()
      local r1, r2 = b:forward(p.q, p.k, p.v), b:forward(p.q, p.k, p.v)
      if maxdiff(r1, r2) == 0 then return false, "redraw=true gave the same output twice" end
      b:eval()
      return maxdiff(b:forward(p.q, p.k, p.v), b:forward(p.q, p.k, p.v)) == 0, "eval should use the buffer"
    end)
  end
end

-- ---------------------------------------------------------------- float32
check("float32 agrees with float64", function()
  ember.manual_seed(3)
  local a64 = make()
  local a32 = make({}, {H = 2, dk = 3, dv = 4, dtype = "float32"})
  a32:load_state_dict((function()
    local sd = {}
    for k2, t in pairs(a64:state_dict()) do sd[k2] = t:float() end
    return sd
  end)())
  local p = problem()
  local opts = {causal = caps.causal or nil}
  local o64 = a64:forward(p.q, p.k, p.v, opts)
  local o32 = a32:forward(p.q:float(), p.k:float(), p.v:float(), opts)
  return close(o32, o64, 1e-4, "float32 vs float64")
end)

print(string.format("%d passed, %d failed", passed, failed))
if failed > 0 then os.exit(1) end
