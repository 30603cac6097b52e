-- ember/_einsum.lua: ember.einsum(equation, ...), torch.einsum's sums of
-- products by subscripts, composed from core ops (permute, reshape, slice,
-- expand, sum, matmul), so that autograd, every dtype and every backend
-- come for free.
--
--   local q, k, a, b = ember.randn(1, 2, 5, 4), ember.randn(1, 2, 6, 4), ember.randn(3, 3), ember.randn(3, 3)
--   ember.einsum("bhqd,bhkd->bhqk", q, k)    -- attention scores
--   ember.einsum("ij,jk", a, b)              -- implicit output: the letters seen once, sorted
--   ember.einsum("...ij,...jk->...ik", a, b) -- "..." stands for broadcast leading dims
--   ember.einsum("ii->i", a)                 -- a repeated letter takes the diagonal
--   ember.einsum(a, {0, 1}, b, {1, 2}, {0, 2}) -- torch's sublist form: 0-25 A-Z, 26-51 a-z
--
-- How it runs: the diagonals of repeated letters are taken first; a letter
-- that one operand alone has and the output lacks is summed out there;
-- then operands are contracted two at a time, left to right, as torch
-- does: letters both share and something later needs are batch dims, the
-- ones nothing later needs are contracted, and one batched matmul does the
-- pair. Sizes of a letter must agree across operands, or be 1 (broadcast).
local core = require "ember.core"
local errors = require "ember._errors"

local function fail(fmt, ...)
  error(("ember.einsum: " .. fmt):format(...), 0)
end

-- The letters of one term as a list; "..." once, as the label "...".
local function parse_term(term, what)
  local labels, i, seen_ellipsis = {}, 1, false
  while i <= #term do
    local c = term:sub(i, i)
    if term:sub(i, i + 2) == "..." then
      if seen_ellipsis then fail("%s has '...' twice", what) end
      seen_ellipsis = true
      labels[#labels + 1] = "..."
      i = i + 3
    elseif c:match("^%a$") then
      labels[#labels + 1] = c
      i = i + 1
    else
      fail("%s: '%s' is not a subscript (letters a-z, A-Z and '...')", what, c)
    end
  end
  return labels, seen_ellipsis
end

-- Replaces "..." by the labels of the broadcast dims it covers: ".1" ..
-- ".E" for the E dims the widest operand's "..." covers, right-aligned.
local function expand_ellipsis(labels, count, E)
  local out = {}
  for _, l in ipairs(labels) do
    if l == "..." then
      for k = E - count + 1, E do out[#out + 1] = "." .. k end
    else
      out[#out + 1] = l
    end
  end
  return out
end

local function index_of(list, x)
  for i, v in ipairs(list) do if v == x then return i end end
  return nil
end

local function show(label) return label:sub(1, 1) == "." and "..." or label end

-- Operand t with labels ls: the diagonal of each repeated label.
local function take_diagonals(t, ls, k)
  local i = 1
  while i <= #ls do
    local j = index_of({ table.unpack(ls, i + 1) }, ls[i])
    if j then
      j = i + j
      local n = t:size(i)
      if t:size(j) ~= n then
        fail("subscript '%s' is repeated in operand %d over dims of sizes %d and %d", ls[i], k, n, t:size(j))
      end
      -- dims i and j to the end, merged, then every (n + 1)-th element: the diagonal
      local order, rest = {}, {}
      for d = 1, #ls do if d ~= i and d ~= j then order[#order + 1] = d rest[#rest + 1] = ls[d] end end
      order[#order + 1], order[#order + 2] = i, j
      local shape = {}
      for d = 1, #rest do shape[d] = t:size(order[d]) end
      shape[#shape + 1] = n * n
      t = t:permute(table.unpack(order)):reshape(shape)
      if n > 0 then t = t:slice(#shape, 1, n * n, n + 1) end
      rest[#rest + 1] = ls[i]
      ls = rest
      -- the diagonal's label is now last; look at position i again
    else
      i = i + 1
    end
  end
  return t, ls
end

-- Sums t over the labels in `drop` (a set); returns t and its labels left.
local function sum_out(t, ls, drop)
  local keep = {}
  for d = #ls, 1, -1 do
    if drop[ls[d]] then t = t:sum(d) end
  end
  for _, l in ipairs(ls) do if not drop[l] then keep[#keep + 1] = l end end
  return t, keep
end

-- The lists one after the other, as a new list.
local function concat(...)
  local r = {}
  for _, list in ipairs({ ... }) do table.move(list, 1, #list, #r + 1, r) end
  return r
end

local function product(sizes, labels)
  local p = 1
  for _, l in ipairs(labels) do p = p * sizes[l] end
  return p
end

-- t permuted to the order of `labels` (all of t's), expanded to every
-- letter's full size (a size-1 dim broadcasts, also one that only a later
-- operand has at full size), reshaped to dims.
local function arrange(t, ls, labels, sizes, dims)
  local order = {}
  for i, l in ipairs(labels) do order[i] = index_of(ls, l) end
  if #order > 0 then t = t:permute(table.unpack(order)) end
  local want, needs = {}, false
  for i, l in ipairs(labels) do
    want[i] = sizes[l]
    needs = needs or want[i] ~= t:size(i)
  end
  if needs then t = t:expand(want) end
  return t:reshape(dims)
end

-- Contracts a (labels la) with b (labels lb), keeping the labels in `later`.
local function contract(a, la, b, lb, later, sizes)
  local batch, ca, cb, sum_l = {}, {}, {}, {}
  local in_b = {}
  for _, l in ipairs(lb) do in_b[l] = true end
  for _, l in ipairs(la) do
    if in_b[l] then
      if later[l] then batch[#batch + 1] = l else sum_l[#sum_l + 1] = l end
    else
      ca[#ca + 1] = l
    end
  end
  local in_a = {}
  for _, l in ipairs(la) do in_a[l] = true end
  for _, l in ipairs(lb) do if not in_a[l] then cb[#cb + 1] = l end end
  local B, M, K, N = product(sizes, batch), product(sizes, ca), product(sizes, sum_l), product(sizes, cb)
  local a3 = arrange(a, la, concat(batch, ca, sum_l), sizes, { B, M, K })
  local b3 = arrange(b, lb, concat(batch, sum_l, cb), sizes, { B, K, N })
  local labels, shape = concat(batch, ca, cb), {}
  for i, l in ipairs(labels) do shape[i] = sizes[l] end
  return core.matmul(a3, b3):reshape(shape), labels
end

-- torch's sublist form einsum(a, {0, 1}, b, {1, 2}, [{0, 2}]): each
-- operand followed by its subscripts as integers in [0, 52) (0-25 the
-- letters A-Z, 26-51 a-z) or "..." -- written as the equation it stands for.
local function sublist_equation(args, n)
  if n < 2 or type(args[2]) ~= "table" or core.is_tensor(args[2]) then
    fail("the equation must be a string, got a tensor (in torch's sublist form each operand is followed by a table "
      .. "of its subscripts)")
  end
  local function term(list, what)
    if type(list) ~= "table" or core.is_tensor(list) then
      fail("%s must be a table of subscripts (integers in [0, 52) or '...'), got %s", what,
        core.is_tensor(list) and "a tensor" or type(list))
    end
    local s = {}
    for i, v in ipairs(list) do
      if v == "..." then
        s[i] = "..."
      elseif math.type(v) == "integer" and v >= 0 and v < 52 then
        s[i] = string.char(v < 26 and 65 + v or 97 + v - 26)
      else
        fail("%s: subscript %s must be an integer in [0, 52) or '...'", what, tostring(v))
      end
    end
    return table.concat(s)
  end
  local terms, operands = {}, {}
  local k = 1
  while k + 1 <= n and core.is_tensor(args[k]) do
    operands[#operands + 1] = args[k]
    terms[#terms + 1] = term(args[k + 1], ("operand %d's sublist"):format(#operands))
    k = k + 2
  end
  local eq = table.concat(terms, ",")
  if k == n and core.is_tensor(args[k]) then
    fail("operand %d has no sublist (torch's sublist form: each operand followed by a table of its subscripts)",
      #operands + 1)
  elseif k == n then
    eq = eq .. "->" .. term(args[k], "the output sublist")
  elseif k <= n then
    fail("argument %d: expected an operand (a tensor) or the output sublist last, got %s", k, type(args[k]))
  end
  return eq, operands
end

local function einsum(equation, ...)
  if core.is_tensor(equation) then
    return einsum(sublist_equation(table.pack(equation, ...), select("#", ...) + 1))
  end
  if type(equation) ~= "string" then fail("the equation must be a string, got %s", type(equation)) end
  local operands = { ... }
  if select("#", ...) == 1 and type(operands[1]) == "table" and not core.is_tensor(operands[1]) then
    operands = operands[1] -- ember.einsum(eq, {a, b}), as torch.einsum(eq, [a, b])
  end
  if #operands == 0 then fail("no operands") end
  for k, t in ipairs(operands) do
    if not core.is_tensor(t) then fail("operand %d must be a tensor, got %s", k, type(t)) end
    if t.dtype ~= operands[1].dtype then
      fail("operand %d is %s but operand 1 is %s (torch's einsum wants one dtype too: convert one)", k, t.dtype,
        operands[1].dtype)
    end
  end
  local eq = equation:gsub("%s", "")
  local lhs, rhs = eq:match("^(.-)%->(.*)$")
  if not lhs then lhs = eq end
  if rhs and rhs:find("->", 1, true) then fail("'%s' has '->' more than once", equation) end
  local terms = {}
  for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
  if #terms ~= #operands then
    fail("'%s' names %d operand%s, but %d %s given", equation, #terms, #terms == 1 and "" or "s", #operands,
      #operands == 1 and "was" or "were")
  end
  -- labels of every operand, "..." expanded
  local raw, E, counts = {}, 0, {}
  for k, term in ipairs(terms) do
    local ls, has = parse_term(term, ("operand %d's subscripts '%s'"):format(k, term))
    local letters = #ls - (has and 1 or 0)
    local nd = operands[k]:dim()
    if (has and nd < letters) or (not has and nd ~= letters) then
      fail("operand %d has %d dims (shape %s), but its subscripts '%s' name %d", k, nd,
        errors.shape_str(operands[k]), term, letters)
    end
    raw[k], counts[k] = ls, nd - letters
    if has and counts[k] > E then E = counts[k] end
  end
  local ts, lss = {}, {}
  for k = 1, #operands do
    local ls = expand_ellipsis(raw[k], counts[k], E)
    ts[k], lss[k] = take_diagonals(operands[k], ls, k)
  end
  -- sizes, each letter's the same everywhere (or 1)
  local sizes, where = {}, {}
  for k = 1, #ts do
    for d, l in ipairs(lss[k]) do
      local n = ts[k]:size(d)
      if sizes[l] == nil or sizes[l] == 1 then
        sizes[l], where[l] = n, k
      elseif n ~= 1 and n ~= sizes[l] then
        fail("subscript '%s' has size %d in operand %d but %d in operand %d", show(l), n, k, sizes[l], where[l])
      end
    end
  end
  -- the output's labels
  local out = {}
  if rhs then
    local ls, has = parse_term(rhs, ("the output '%s'"):format(rhs))
    out = expand_ellipsis(ls, has and E or 0, E)
    local seen = {}
    for _, l in ipairs(out) do
      if seen[l] then fail("the output names '%s' twice", show(l)) end
      if sizes[l] == nil then fail("the output's '%s' is in no operand", show(l)) end
      seen[l] = true
    end
  else -- implicit: the broadcast dims, then the letters seen once, in ASCII order
    local count = {}
    for k = 1, #raw do for _, l in ipairs(raw[k]) do count[l] = (count[l] or 0) + 1 end end
    for k = 1, E do out[#out + 1] = "." .. k end
    local once = {}
    for l, c in pairs(count) do if c == 1 and l ~= "..." then once[#once + 1] = l end end
    table.sort(once)
    for _, l in ipairs(once) do out[#out + 1] = l end
  end
  local in_out = {}
  for _, l in ipairs(out) do in_out[l] = true end
  -- a letter that one operand alone has and the output lacks: summed there
  local uses = {}
  for k = 1, #lss do
    local mine = {}
    for _, l in ipairs(lss[k]) do mine[l] = true end
    for l in pairs(mine) do uses[l] = (uses[l] or 0) + 1 end
  end
  for k = 1, #ts do
    local drop = {}
    for _, l in ipairs(lss[k]) do if uses[l] == 1 and not in_out[l] then drop[l] = true end end
    ts[k], lss[k] = sum_out(ts[k], lss[k], drop)
  end
  -- pairs, left to right
  local t, ls = ts[1], lss[1]
  for k = 2, #ts do
    local later = {}
    for l in pairs(in_out) do later[l] = true end
    for j = k + 1, #ts do for _, l in ipairs(lss[j]) do later[l] = true end end
    t, ls = contract(t, ls, ts[k], lss[k], later, sizes)
  end
  -- the output's order (t holds exactly the output's labels now)
  local order, identity = {}, true
  for i, l in ipairs(out) do
    order[i] = index_of(ls, l)
    identity = identity and order[i] == i
  end
  if not identity then t = t:permute(table.unpack(order)) end
  return t
end

local guarded = errors.wrap(einsum)
core.einsum = guarded
return guarded
