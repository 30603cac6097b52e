-- ember/_variant_lower.lua (internal): a traced variant function's graph
-- (lua/ember/_trace.lua's nodes) made into the programs the fused kernel
-- runs (core/include/ember_expr.h), for lua/ember/variant.lua's M.trace:
-- the symbolic derivatives (reverse mode over the graph) with respect to
-- the score and the learned tables' loads, and the lowering of value and
-- gradient graphs to numbered instructions (at most 512, at most 8 loads
-- of learned tables). Errors name the variant and the function.
local errors = require "ember._errors"
local trace = require "ember._trace"

local M = {}

-- ---------------------------------------------------------------------
-- Symbolic derivatives (reverse mode over the graph)
-- ---------------------------------------------------------------------

-- d out / d wrt for each wrt node reached (S and learned loads), as nodes.
local function derivatives(st, out, wants)
  return trace.with(st, function()
    local F, add, mul, sub, div, const, node = trace.F, trace.add, trace.mul, trace.sub, trace.div, trace.const, trace.node
    -- nodes on a path to a wanted leaf
    local order, seen, live = {}, {}, {}
    local function visit(n)
      if seen[n] then return live[n] end
      seen[n] = true
      local l = wants(n)
      for _, a in ipairs(n.args) do if n.op ~= "LOAD" and visit(a) then l = true end end
      live[n] = l
      order[#order + 1] = n
      return l
    end
    visit(out)
    table.sort(order, function(a, b) return a.id > b.id end)
    local adj = { [out] = const(1) }
    local function give(n, g) if live[n] then adj[n] = adj[n] and add(adj[n], g) or g end end
    for _, n in ipairs(order) do
      local g = adj[n]
      if g and live[n] and n.op ~= "LOAD" then
        local a, b, op = n.args[1], n.args[2], n.op
        if op == "ADD" then give(a, g); give(b, g)
        elseif op == "SUB" then give(a, g); give(b, node("NEG", { g }))
        elseif op == "MUL" then give(a, mul(g, b)); give(b, mul(g, a))
        elseif op == "DIV" then give(a, div(g, b)); give(b, node("NEG", { div(mul(g, n), b) }))
        elseif op == "POW" then -- with torch.pow's zeros: d/da where b = 0, d/db of 0^b (b >= 0)
          give(a, F.where(F.eq(b, 0), 0, mul(g, mul(b, node("POW", { a, sub(b, const(1)) })))))
          give(b, F.where(F.logical_and(F.eq(a, 0), F.le(0, b)), 0, mul(g, mul(n, F.log(a)))))
        elseif op == "MIN" or op == "MAX" then -- a tie splits the gradient in halves, as torch.minimum
          local first = op == "MIN" and F.lt(a, b) or F.lt(b, a)
          local second = op == "MIN" and F.lt(b, a) or F.lt(a, b)
          local half = F.where(F.eq(a, b), mul(g, const(0.5)), 0)
          give(a, F.where(first, g, half)); give(b, F.where(second, g, half))
        elseif op == "CLAMP_LO" then -- max(x, lo): at the bound x takes it all, as torch.clamp
          give(a, F.where(F.le(b, a), g, 0)); give(b, F.where(F.lt(a, b), g, 0))
        elseif op == "CLAMP_HI" then -- min(x, hi)
          give(a, F.where(F.le(a, b), g, 0)); give(b, F.where(F.lt(b, a), g, 0))
        elseif op == "MOD" then give(a, g); give(b, node("NEG", { mul(g, node("IDIV", { a, b })) }))
        elseif op == "NEG" then give(a, node("NEG", { g }))
        elseif op == "ABS" then give(a, mul(g, F.sign(a)))
        elseif op == "EXP" then give(a, mul(g, n))
        elseif op == "LOG" then give(a, div(g, a))
        elseif op == "TANH" then give(a, mul(g, sub(const(1), mul(n, n))))
        elseif op == "SQRT" then give(a, div(g, mul(const(2), n)))
        elseif op == "SIGMOID" then give(a, mul(g, mul(n, sub(const(1), n))))
        elseif op == "WHERE" then give(b, F.where(a, g, 0)); give(n.args[3], F.where(a, 0, g))
        end -- floor, ceil, sign, idiv, comparisons, logic: zero almost everywhere
      end
    end
    return adj
  end)
end

-- ---------------------------------------------------------------------
-- Lowering to the program format (core/include/ember_expr.h)
-- ---------------------------------------------------------------------

local function lower(outs, grad_loads, name)
  local set, list = {}, {}
  local function visit(n)
    if set[n] then return end
    set[n] = true
    for _, a in ipairs(n.args) do visit(a) end
    list[#list + 1] = n
  end
  for _, o in ipairs(outs) do visit(o) end
  for _, l in ipairs(grad_loads or {}) do visit(l) end
  table.sort(list, function(a, b) return a.id < b.id end) -- creation order is a topological order
  local reg, ins = {}, {}
  for i, n in ipairs(list) do
    reg[n] = i - 1
    local args = {}
    for j, a in ipairs(n.args) do args[j] = reg[a] end
    ins[i] = { op = trace.OPNUM[n.op], cap = rawget(n, "cap") or 0, args = args, k = rawget(n, "value") or 0 }
  end
  if #ins > 512 then
    errors.raise("attention variant '%s': %s traces to %d operations (at most 512)", name.variant, name.what, #ins)
  end
  local out = {}
  for i, o in ipairs(outs) do out[i] = reg[o] end
  local gl = {}
  for i, l in ipairs(grad_loads or {}) do gl[i] = reg[l] end
  return { ins = ins, out = out, grad_load = gl }
end

-- The loads of learned captures in a graph, in id order.
local function learned_loads(out, caps)
  local seen, loads = {}, {}
  local function visit(n)
    if seen[n] then return end
    seen[n] = true
    if n.op == "LOAD" and caps[n.cap + 1].learned then loads[#loads + 1] = n end
    for _, a in ipairs(n.args) do visit(a) end
  end
  visit(out)
  table.sort(loads, function(a, b) return a.id < b.id end)
  return loads
end

-- Value and gradient programs of a function whose derivative is wanted
-- with respect to s (when with_s) and the learned loads.
local function grad_programs(st, out, caps, with_s, name)
  local loads = learned_loads(out, caps)
  if #loads > 8 then
    errors.raise("attention variant '%s': %s has %d loads of learned tables (at most 8)", name.variant, name.what, #loads)
  end
  local is_load = {}
  for _, l in ipairs(loads) do is_load[l] = true end
  local adj = derivatives(st, out, function(n) return (with_s and n.op == "S") or is_load[n] end)
  local outs = { out }
  trace.with(st, function()
    local s_leaf = with_s and trace.leaf("S") or nil
    outs[2] = (s_leaf and adj[s_leaf]) or trace.const(0)
    for i, l in ipairs(loads) do outs[2 + i] = adj[l] or trace.const(0) end
  end)
  local grad = { variant = name.variant, what = name.what .. "'s gradient" }
  return lower({ out }, nil, name), lower(outs, loads, grad), loads
end

M.lower, M.grad_programs = lower, grad_programs

return M
