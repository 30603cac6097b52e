-- ember/_listing.lua: readable printing of the tables ember returns.
--
--   listing.repr(v)      -- a one-value string: {1, 2}, {name = "x", n = 3}, ...
--   listing.list(t)      -- gives a list a metatable whose __tostring is repr
--
-- The REPL prints any table without a __tostring and any function through
-- repr (core/cli/repl.c): a class as <class nn.Linear>, one of ember's
-- functions as <function ember.zeros>; and the listing functions (ember.attention_variants(),
-- ember.plugin_search_path(), ember.cpu_info(), ember.attention_routes(), ember.conv_routes(), ember.memory_stats(), t:split(), t:chunk(), t:stride()) return lists that print
-- the same way with print(). ember.plugins() has its own table printer in C.
local core = require "ember.core"
local guard = require("ember._helpers").guard -- C errors stay at the user's line

local M = {}

local MAX_ITEMS = 40 -- entries shown per table before "..."
local MAX_DEPTH = 4

local function key_repr(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then return k end
  if type(k) == "string" then return ("[%q]"):format(k) end
  return "[" .. tostring(k) .. "]"
end

local function has_tostring(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__tostring ~= nil
end

local repr

-- A tensor inside a table prints as its header only; print it on its own
-- for the values.
local function short_tensor(t)
  if t:is_closed() then return "tensor(<closed>)" end
  return ("tensor(shape=[%s], dtype=%s, device=%s)"):format(table.concat(t.shape, ", "), t.dtype, t.device)
end

-- A class (nn.Linear, optim.Adam, ember.Size, data.Vocab: its instances'
-- metatable, which names itself or indexes itself and prints them) prints
-- as <class nn.Linear>, as Python's <class '...'>, not as its methods and
-- internals.
local function class_repr(v)
  local name, index = rawget(v, "__name"), rawget(v, "__index")
  local named = type(name) == "string" and index ~= nil
  if not named and not (rawequal(index, v) and rawget(v, "__tostring") ~= nil) then return nil end
  local ok, doc = pcall(require, "ember._doc")
  local full = ok and doc.name_of(v) or nil
  if not (full or named) then return nil end
  return "<class " .. (full or name) .. ">"
end

-- One of ember's functions prints as <function ember.zeros> (help() takes
-- that name); any other as Lua prints it.
local function function_repr(f)
  local ok, doc = pcall(require, "ember._doc")
  local name = ok and doc.name_of(f) or nil
  return name and ("<function " .. name .. ">") or tostring(f)
end

repr = function(v, depth, seen, indent)
  depth, seen, indent = depth or 0, seen or {}, indent or ""
  local tv = type(v)
  if tv == "string" then return ("%q"):format(v) end
  if core.is_tensor(v) then return depth == 0 and tostring(v) or short_tensor(v) end
  if tv == "function" then return function_repr(v) end
  if tv ~= "table" then return tostring(v) end
  if has_tostring(v) and (depth > 0 or getmetatable(v).__tostring ~= M.tostring) then
    return tostring(v)
  end
  local class = class_repr(v)
  if class then return class end
  if seen[v] then return "<cycle>" end
  if depth >= MAX_DEPTH then return "{...}" end
  seen[v] = true
  local parts, n = {}, #v
  for i = 1, math.min(n, MAX_ITEMS) do parts[#parts + 1] = repr(v[i], depth + 1, seen, indent .. "  ") end
  if n > MAX_ITEMS then parts[#parts + 1] = ("... (%d in all)"):format(n) end
  local keys = {}
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == "string" or type(a) == "number") then return a < b end
    return type(a) < type(b)
  end)
  for i, k in ipairs(keys) do
    if i > MAX_ITEMS then parts[#parts + 1] = "..."; break end
    parts[#parts + 1] = key_repr(k) .. " = " .. repr(v[k], depth + 1, seen, indent .. "  ")
  end
  seen[v] = nil
  local one = "{" .. table.concat(parts, ", ") .. "}"
  if #one <= 100 and not one:find("\n") then return one end
  return "{\n" .. indent .. "  " .. table.concat(parts, ",\n" .. indent .. "  ") .. "\n" .. indent .. "}"
end

function M.repr(v) return repr(v) end

M.tostring = function(t) return repr(t) end
local LIST_MT = { __name = "ember.List", __tostring = M.tostring }

function M.list(t)
  return setmetatable(t, LIST_MT)
end

-- M.ordered(map, names): the map (name -> value), printing as M.list's, whose
-- pairs() gives the names in the order of the list `names` (PyTorch's
-- OrderedDict: named_parameters, state_dict), then any key added since.
local order_of = setmetatable({}, { __mode = "k" })
local function ordered_pairs(t)
  local names, i, known, last = order_of[t] or {}, 0, nil, nil
  return function()
    if not known then
      while i < #names do
        i = i + 1
        local v = rawget(t, names[i])
        if v ~= nil then return names[i], v end
      end
      known = {}
      for _, n in ipairs(names) do known[n] = true end
    end
    repeat
      local k, v = next(t, last)
      last = k
      if k == nil or not known[k] then return k, v end
    until false
  end, t, nil
end
local ORDERED_MT = { __name = "ember.List", __tostring = M.tostring, __pairs = ordered_pairs }

function M.ordered(map, names)
  order_of[map] = names
  return setmetatable(map, ORDERED_MT)
end

-- ember.attention_variants(): one line per variant, then its options.
local VARIANTS_MT = { __name = "ember.List", __tostring = function(list)
  local lines, width = {}, 10 -- the name column fits the longest name
  for _, v in ipairs(list) do width = math.max(width, #tostring(v.name)) end
  for _, v in ipairs(list) do
    local names = {}
    for _, o in ipairs(v.options or {}) do names[#names + 1] = o.name end
    lines[#lines + 1] = ("%-" .. width .. "s %-6s %s"):format(v.name, v.version or "", v.description or "")
    if #names > 0 then lines[#lines + 1] = (" "):rep(width + 1) .. "options: " .. table.concat(names, ", ") end
  end
  -- the files that did not give a variant, with the loader's reason (a
  -- file rejected before its kind was read is "unknown", not a backend)
  local ok, plugins = pcall(core.plugins)
  local rejected = {}
  for _, r in ipairs(ok and plugins or {}) do
    if not r.loaded and r.kind ~= "backend" then -- a .lua file's reason starts with its path already
      local why = r.reason:sub(1, #r.path) == r.path and r.reason or r.path .. ": " .. r.reason
      rejected[#rejected + 1] = "  rejected: " .. why -- indented: no variant's row
    end
  end
  if #lines == 0 then lines[1] = "(no attention variants loaded; see ember.plugins())" end
  for _, l in ipairs(rejected) do lines[#lines + 1] = l end
  return table.concat(lines, "\n")
end }

local function wrap_list(name, mt)
  local f = core[name]
  if type(f) ~= "function" then return end
  core[name] = guard(function(...)
    local r = f(...)
    if type(r) == "table" and getmetatable(r) == nil then setmetatable(r, mt or LIST_MT) end
    return r
  end)
end

wrap_list("plugin_search_path")
wrap_list("cpu_info")
wrap_list("attention_routes")
wrap_list("conv_routes")
wrap_list("memory_stats")
wrap_list("attention_variants", VARIANTS_MT)
-- attention_variants(name) gives one record: it prints through LIST_MT's repr
local variants = core.attention_variants
if variants then
  core.attention_variants = guard(function(name, ...)
    local r = variants(name, ...)
    if name ~= nil and getmetatable(r) == VARIANTS_MT then setmetatable(r, LIST_MT) end
    return r
  end)
end
for _, m in ipairs { "split", "chunk", "stride" } do
  local f = core.Tensor[m]
  if f then
    core.Tensor[m] = guard(function(...)
      local r = f(...)
      if type(r) == "table" and getmetatable(r) == nil then setmetatable(r, LIST_MT) end
      return r
    end)
    if core[m] then core[m] = core.Tensor[m] end
  end
end

return M
