-- check_plugin.lua -- the conformance checker for attention variants.
--
--   ember scripts/check_plugin.lua NAME_OR_PATH [option=value ...] [--quick]
--   ember scripts/check_plugin.lua --help
--
-- NAME is a loaded variant ("local"); a PATH (with a '/' or ending in .so
-- or .lua) is loaded first with ember.load_plugin. The options are the
-- variant's own (window_left=8 mode=block ...), used for every check. A
-- plugin that does not load, or a NAME nothing defines, is one "not ok"
-- line with the loader's reason (exit status 1).
--
-- Every check follows from what the variant says about itself -- its caps,
-- its options and, for a variant that declares (ember_attention.h, the fused route),
-- its declaration (core:declaration()) -- never from its name, so a
-- dropped-in plugin gets exactly the checks a shipped one gets. On small
-- float64 problems:
--   options   unknown names, wrong types, values out of range or not among
--             the choices are refused with a clear message; every choice of
--             a "kernel" option agrees with the default;
--   shapes    wrong ranks, mismatched sizes, dtypes and unsupported inputs
--             are refused, naming what was wrong;
--   grads     central finite differences of q, k, v and the variant's own
--             learned parameters, with each mask kind the variant supports;
--   masks     the documented semantics (ember_attention.h): key padding,
--             boolean true = may attend, additive masks, bottom-right
--             causal alignment, fully masked rows give 0 and 0 gradients;
--   seed      determinism under ember.manual_seed, dropout only in training;
--   weights   shape, rows summing to 1, out = weights v where that holds;
--   declared  (declaring variants) the output equals standard attention with
--             the declared bias and block mask written out densely here
--             (ALiBi slopes, clipped / T5-bucketed tables); zero tables equal
--             standard; the fused route equals the composed route on
--             sequences of several kernel tiles, gradients of the tables
--             included; host float32 and float64 calls run fused (no silent
--             fallback to the composed route);
--   reference a variant's own references, from <name>_check.lua next to
--             its .so or plugins/<name>/check.lua in the source tree: a
--             function(ctx) adding checks, or a table of properties
--             (weights_sum_tol, approximate tolerance; hides_keys = true: a
--             variant of its own kernels hides some keys a query may see, a
--             dilated or strided pattern, so causal checks only that nothing leaks);
--   float32   agrees with float64 (within the variant's tolerance).
-- Prints "ok N - what" / "not ok N - what: why", then "N passed, M failed";
-- exits with status 1 if anything failed.
local ember = ember or require "ember"

-- The command line, parsed by lua-argparse (as ember.cli does for the
-- training scripts): NAME_OR_PATH, then the variant's options as
-- name=value words, and --quick.
local function parse_command_line(argv)
  local argparse = require "argparse"
  local p = argparse("ember scripts/check_plugin.lua",
    "The conformance checker for attention-variant plugins: options, shapes, gradients,\n"
    .. "masks, determinism, weights, exactness against the standard variant, float32.",
    "Examples:\n   ember scripts/check_plugin.lua local window_left=8 --quick\n"
    .. "   ember scripts/check_plugin.lua standard --quick")
  p:argument("target", "a loaded variant's name (see ember.attention_variants()), a plugin .so path or a variant's .lua file")
  p:argument("options", "the variant's options, e.g. window_left=8 mode=block"):args("*")
  p:flag("--quick", "fewer and smaller problems")
  local r = p:parse(argv)
  local opts = {}
  for _, a in ipairs(r.options) do
    local k, v = a:match("^([%w_]+)=(.*)$")
    if not k then p:error("bad option '" .. a .. "' (expected name=value)") end
    if v == "true" then v = true
    elseif v == "false" then v = false
    elseif tonumber(v) then v = math.tointeger(tonumber(v)) or tonumber(v) end
    opts[k] = v
  end
  return r.target, opts, r.quick
end
local target, user_opts, quick = parse_command_line(arg)

-- A plugin that does not load (or a name nothing defines) is one failed
-- check with the loader's reason, not a Lua traceback.
local name = target
local loaded, desc = pcall(function()
  if target:find("/") or target:match("%.so$") or target:match("%.lua$") then
    name = ember.load_plugin(target).name
  end
  return ember.attention_variants(name)
end)
if not loaded then
  print(string.format("not ok 1 - %s loads: %s", target, tostring(desc):gsub("^[^\n]-:%d+: ", "")))
  print("0 passed, 1 failed")
  os.exit(1)
end
local caps = desc.caps

-- The variant's own reference checks and properties (see the header).
local function script_dir() return (arg[0]:match("^(.*)/[^/]*$") or ".") end
local reference, props = nil, {}
local lua_check = (require("ember.variant").get(name) or {}).check -- a Lua variant's own properties
if type(lua_check) == "table" then props = lua_check reference = lua_check.checks end
for _, f in ipairs(lua_check and {} or {(desc.path:match("^(.*)/[^/]*$") or ".") .. "/" .. name .. "_check.lua",
                    script_dir() .. "/../plugins/" .. name .. "/check.lua"}) do
  local h = io.open(f)
  if h then
    h:close()
    local r = dofile(f)
    if type(r) == "table" then props = r reference = r.checks
    else reference = r end
    break
  end
end

-- ---------------------------------------------------------------- parts
-- What a check of attention can reuse (check_plugin_parts.lua): the
-- reporter, comparisons, problems and masks; the rest of this file is
-- the driver that walks the variant's caps.
local parts = dofile(script_dir() .. "/check_plugin_parts.lua")(ember)
local tap = parts.reporter()
local check, raises = tap.check, parts.raises
local randn, maxabs, maxdiff, finite, all_finite, close = parts.randn, parts.maxabs, parts.maxdiff,
  parts.finite, parts.all_finite, parts.close
local problem, kp_mask, bool_mask = parts.problem, parts.kp_mask, parts.bool_mask
local causal_allowed, additive_of = parts.causal_allowed, parts.additive_of

-- ---------------------------------------------------------------- helpers
local function merged(extra)
  local t = {}
  for k, v in pairs(user_opts) do t[k] = v end
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

-- A variant written in Lua (ember.attention_variant): its per-call tensors
-- are made for every call (ones: one document, a prefix of one, the first
-- row of any table: valid whatever they mean), each dim long enough for
-- any of b, h, q, k (a 4-d one [B, H, Lk, Lk], a 3-d one [max(B, H), Lk,
-- Lk]), and its reference is its own composition (the traced functions run
-- densely), which the fused route is held to below instead of a declaration.
local variant_mod = require "ember.variant"
local lua_def = variant_mod.get(name)

local function with_inputs(att)
  if not (lua_def and lua_def.inputs and next(lua_def.inputs)) then return att end
  local forward = att.forward
  att.forward = function(self, q, k, v, opts)
    local o, inputs = {}, {}
    for key, val in pairs(opts or {}) do o[key] = val end
    local B, H, Lk = q.shape[1], q.shape[2], k.shape[3]
    local any = math.max(B, H, Lk)
    local shapes = { { any }, { any, math.max(H, Lk) }, { math.max(B, H), Lk, Lk }, { B, H, Lk, Lk } }
    for _, c in ipairs(variant_mod.inputs_of(lua_def)) do -- in the dtype it declares
      inputs[c.name] = ember.ones(shapes[c.ndim], { dtype = c.kind == "float" and q.dtype or "int64" })
    end
    o.variant_inputs = o.variant_inputs or inputs
    return forward(self, q, k, v, o)
  end
  return att
end

local function make(extra, dims)
  local o = merged(extra)
  o.attention = name
  o.heads = dims and dims.H or 2
  o.head_dim = dims and dims.dk or 3
  o.v_head_dim = dims and dims.dv or 4
  o.dtype = dims and dims.dtype or "float64"
  -- eval mode: checks that want training (dropout, redraw) ask for it
  return with_inputs(ember.Attention(o):eval())
end

-- What the variant declares with the given options (nil: it does not). A
-- variant written in Lua declares nothing (what it changes is traced): it
-- gets the fused-route checks, against its own composition.
local decl = lua_def and {bias = "none", mask = lua_def.mask and "traced" or "none", rel = "none", route = "auto", traced = true}
  or make().core:declaration()
local positional = decl ~= nil and (decl.bias ~= "none" or decl.mask ~= "none")
if lua_def then -- a traced function that reads q or k depends on positions
  local inst, dep = make()._variant, require("ember._trace").DEP
  for _, g in ipairs { inst.score_graph or false, inst.mask_graph or false, inst.sink_graph or false } do
    if g and g.deps & (dep.Q | dep.K) ~= 0 then positional = true end
  end
end

-- ---------------------------------------------------------------- options
print(string.format("# %s %s: %s", desc.name, desc.version, desc.description))
if decl then
  print(string.format("# declares bias=%s rel=%s mask=%s route=%s", decl.bias, decl.rel, decl.mask, decl.route))
end
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
  if caps.cross and not positional then
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
          -- (a local pattern may hide visible keys too: only "no leak" applies;
          -- a variant with its own kernels says so by hides_keys = true)
          if visible and d < 1e-9 and not (decl and decl.mask ~= "none") and not props.hides_keys then
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
local out_is_wv = not (decl and decl.bias == "shaw" and decl.rel_v)
-- kernel = "fused" promises the fused kernel or an error: it never forms the
-- weights, so asking for them must fail, naming need_weights.
local fused_only = user_opts.kernel == "fused"
if caps.weights and fused_only then
  check("kernel=fused refuses need_weights with a clear error (no silent composition)", function()
    local a, p = make(), problem()
    return raises(function() return a:forward(p.q, p.k, p.v, {need_weights = true}) end, "need_weights")
  end)
end
if caps.weights and not fused_only then
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
    -- (linear attention: rows sum to den / (den + eps): its check.lua says so)
    local sum_tol = props.weights_sum_tol or 1e-10
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
-- block(a, p), when given, is an additive [H, Lq, Lk] mask that standard
-- also gets (a declared block mask written out densely), merged with the
-- call's own attn_mask.
local function equals_standard(what, extra, dims, setup, all_opts, block)
  check(what, function()
    local a = make(extra)
    if setup then setup(a) end
    local p = problem(dims)
    local list = all_opts or {{}}
    for _, opts in ipairs(list) do
      local sopts = opts
      if block then
        sopts = {}
        for k2, v2 in pairs(opts) do sopts[k2] = v2 end
        local b = block(a, p)
        if opts.attn_mask then b = ember.where(opts.attn_mask, b, -math.huge) end
        sopts.attn_mask = b
      end
      local o1, o2 = a:forward(p.q, p.k, p.v, opts), std:forward(p.q, p.k, p.v, sopts)
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

-- ---------------------------------------------------------------- declared
-- The declaration written out densely (check_plugin_decl.lua), for
-- standard attention to reproduce.
local dense_declaration = dofile(script_dir() .. "/check_plugin_decl.lua")(ember)

if decl then
  local function randomize(a)
    ember.no_grad(function() for _, t in ipairs(a:parameters()) do t:copy_(randn(t.shape) * 0.5) end end)
  end
  if decl.bias ~= "shaw" and not decl.traced then
    for _, sh in ipairs(caps.cross and {{7, 7}, {4, 9}} or {{7, 7}}) do
      check(string.format("declared %s bias and %s mask equal standard with them written out densely (Lq=%d, Lk=%d)",
                          decl.bias, decl.mask, sh[1], sh[2]), function()
        local H = 3
        local a = make({}, {H = H, dk = 3, dv = 4})
        randomize(a)
        local s = ember.Attention{attention = "standard", heads = H, head_dim = 3, v_head_dim = 4, dtype = "float64"}
        local p = problem({H = H, Lq = sh[1], Lk = sh[2]})
        local bias = dense_declaration(a, decl, H, sh[1], sh[2])
        for _, opts in ipairs({{}, caps.causal and {causal = true} or nil}) do
          local o = {causal = opts.causal, attn_mask = bias}
          local ok, why = close(a:forward(p.q, p.k, p.v, opts), s:forward(p.q, p.k, p.v, o), 1e-12, "vs dense")
          if not ok then return false, why end
        end
        return true
      end)
    end
  end
  if decl.table or decl.rel_k then
    -- a declared block mask stays: standard gets it written out densely
    local block = decl.mask ~= "none" and function(a, p) return dense_declaration(a, decl, p.H, p.Lq, p.Lk) end
    equals_standard("zero tables equal standard" .. (block and " with the declared " .. decl.mask .. " mask" or ""),
      {}, {}, function(a)
      ember.no_grad(function() for _, t in ipairs(a:parameters()) do t:zero_() end end)
    end, mask_sets, block or nil)
  end
  -- several kernel tiles (64 x 128 at these head dims): empty, full and
  -- partial tiles all occur; asking for weights sends a call to core ops
  local big = {B = 2, H = 2, Lq = quick and 70 or 150, Lk = quick and 140 or 200, dk = 3, dv = 4}
  if not caps.cross then big.Lk = big.Lq end
  local big_sets = {{}}
  if caps.causal then big_sets[#big_sets + 1] = {causal = true} end
  if caps.key_padding then
    local rows = {}
    for b = 1, 2 do rows[b] = {} for j = 1, big.Lk do rows[b][j] = b == 1 and j > big.Lk - 30 end end
    big_sets[#big_sets + 1] = {key_padding_mask = ember.tensor(rows)}
  end
  if caps.mask then big_sets[#big_sets + 1] = {attn_mask = bool_mask(big.Lq, big.Lk, 11), causal = caps.causal or nil} end
  if caps.weights and decl.route ~= "composed" and not fused_only then
    check("the fused route equals the composed route, outputs and gradients (tables too), several tiles", function()
      ember.manual_seed(21)
      local a = make({}, {H = big.H, dk = big.dk, dv = big.dv})
      randomize(a)
      local p = problem(big)
      local w = randn({big.B, big.H, big.Lq, big.dv})
      for _, opts in ipairs(big_sets) do
        local res = {}
        for r, weights in ipairs({false, true}) do
          local q, k, v = p.q:clone():requires_grad_(), p.k:clone():requires_grad_(), p.v:clone():requires_grad_()
          a:zero_grad()
          local o = {need_weights = weights}
          for key, val in pairs(opts) do o[key] = val end
          local out = a:forward(q, k, v, o)
          ;(out * w):sum():backward()
          res[r] = {out = out:detach(), q = q.grad, k = k.grad, v = v.grad}
          for i, t in ipairs(a:parameters()) do res[r]["table " .. i] = t.grad and t.grad:clone() end
        end
        for key, ref in pairs(res[2]) do
          local ok, why = close(res[1][key], ref, 1e-10, key)
          if not ok then return false, why end
        end
      end
      return true
    end)
  end
  if decl.route ~= "composed" and ember.attention_routes then
    check("host float32 and float64 calls run on the fused kernel (no silent fallback)", function()
      for _, dt in ipairs({"float32", "float64"}) do
        local a = make({}, {H = 2, dk = 3, dv = 4, dtype = dt})
        local p = problem({Lq = 5, Lk = 5, dtype = dt})
        for _, opts in ipairs(mask_sets) do
          local before = ember.attention_routes()
          local q = p.q:clone():requires_grad_()
          a:forward(q, p.k, p.v, opts):sum():backward()
          local after = ember.attention_routes()
          if after.fused ~= before.fused + 1 or after.composed ~= before.composed then
            return false, string.format("%s: fused +%d, composed +%d", dt, after.fused - before.fused,
                                        after.composed - before.composed)
          end
        end
      end
      return true
    end)
  end
end

-- Every choice of a "kernel" option agrees with the default path.
for _, o in ipairs(desc.options) do
  if o.name == "kernel" and o.choices and user_opts.kernel == nil then
    for kern in o.choices:gmatch("[^|]+") do
      check("kernel=" .. kern .. " agrees with the default path (every mask kind)", function()
        local a, b = make({kernel = kern}), make()
        b:load_state_dict(a:state_dict())
        local p = problem()
        for _, opts in ipairs(mask_sets) do
          local ok, why = close(a:forward(p.q, p.k, p.v, opts), b:forward(p.q, p.k, p.v, opts), props.tolerance or 1e-12)
          if not ok then return false, why end
        end
        return true
      end)
    end
  end
end

-- ---------------------------------------------------------------- reference
if reference then
  reference({ember = ember, check = check, make = make, problem = problem, std = std, close = close,
             maxdiff = maxdiff, randn = randn, user_opts = user_opts, caps = caps, mask_sets = mask_sets,
             equals_standard = equals_standard, bool_mask = bool_mask, kp_mask = kp_mask,
             causal_allowed = causal_allowed, decl = decl})
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

if tap.finish() > 0 then os.exit(1) end
