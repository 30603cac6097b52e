-- nn/_iterable.lua (internal): the named_* results of nn.Module as
-- PyTorch's loops use them. `for name, p in model:named_parameters() do`
-- (Python's `for name, p in model.named_parameters():`) calls the result as
-- a generic-for iterator: the maps (named_parameters, named_buffers) and
-- the lists of {name, module} pairs (named_children, named_modules) get a
-- __call that gives (name, value) in registration order. pairs() on the
-- maps and ipairs() on the lists work as before. The plain lists
-- (parameters, buffers, children, modules) get one too: `for m in
-- model:modules() do` (Python's `for m in self.modules():`) gives each value.
local listing = require "ember._listing"
local ordered = listing.ordered -- maps that pairs() walks in registration order

local M = {}

-- The __call of both: the keys and values are taken at the loop's first
-- call (last == nil), then each call gives the pair after `last`.
local loop_keys = setmetatable({}, { __mode = "k" }) -- the iterated table -> {keys, pos, values}
local function loop(get)
  return function(t, _, last)
    local st = loop_keys[t]
    if last == nil or st == nil then
      st = { keys = {}, pos = {}, values = {} }
      for k, v in get(t) do
        local i = #st.keys + 1
        st.keys[i], st.values[i], st.pos[k] = k, v, i
      end
      loop_keys[t] = st
    end
    local i = last == nil and 1 or (st.pos[last] or #st.keys) + 1
    if st.keys[i] == nil then return nil end
    return st.keys[i], st.values[i]
  end
end
-- map (name -> value) in the order of `names`, as _listing.ordered's, callable
local ITERABLE_MAP -- ordered()'s metatable with __call
function M.map(map, names)
  ordered(map, names)
  if not ITERABLE_MAP then
    ITERABLE_MAP = {}
    for k, v in pairs(getmetatable(map)) do ITERABLE_MAP[k] = v end
    ITERABLE_MAP.__call = loop(pairs)
  end
  return setmetatable(map, ITERABLE_MAP)
end
local function each_pair(list)
  local i = 0
  return function()
    i = i + 1
    local p = list[i]
    if p then return p[1], p[2] end
  end
end
-- a list of distinct values, printing as _listing.list's, callable: each
-- call gives the value after `last` (found by value: the values are
-- distinct tensors or modules), taken at the loop's first call
local VALUE_LIST = { __name = "ember.List", __tostring = listing.tostring,
  __call = function(t, _, last)
    local st = loop_keys[t]
    if last == nil or st == nil then
      st = { values = {}, pos = {} }
      for i, v in ipairs(t) do st.values[i], st.pos[v] = v, i end
      loop_keys[t] = st
    end
    return st.values[last == nil and 1 or (st.pos[last] or #st.values) + 1]
  end }
function M.list(list) return setmetatable(list, VALUE_LIST) end

-- a list of {name, value} pairs, printing as _listing.list's, callable
local PAIR_LIST = { __name = "ember.List", __tostring = listing.tostring, __call = loop(each_pair) }
function M.pair_list(list) return setmetatable(list, PAIR_LIST) end

return M
