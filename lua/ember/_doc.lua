-- ember/_doc.lua: the reference's doc comments, read at run time, for
-- help() in the REPL (help(ember.matmul), help(nn.MultiHeadAttention),
-- help("Tensor:sum")) and for the doc check (tests/lua/docs_spec.lua).
--
-- The doc comments are LDoc's (config.ld at the root builds the HTML
-- reference from the same text): a block of comment lines whose first line
-- starts with "---", directly above the definition it documents
--   --- Matrix product of a and b.        (summary: the first sentence)
--   -- @tparam Tensor a ...                (tags, free text, an example)
--   function M.matmul(a, b) ... end
-- or, for functions written in C, a block in lua/ember/doc/*.luadoc that
-- names its function with "@function name" ("Tensor:sum" for methods).
-- A file's first comment block documents what the file exports (a class
-- such as nn.Linear, or a module such as ember.checkpoint).
--
-- Entries are keyed by the name a user writes: "ember.matmul",
-- "Tensor:sum", "nn.Linear", "nn.Linear:forward", "optim.AdamW",
-- "checkpoint.save", "data.Dataset.new".
local M = {}

local DIR = debug.getinfo(1, "S").source:match("^@(.*[/\\])_doc%.lua$") or "./"

-- Namespaces with an init.lua that maps export names to files.
local NAMESPACES = { "nn", "optim", "data", "models", "distributions" }

local function read_lines(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local lines = {}
  for line in f:lines() do lines[#lines + 1] = line end
  f:close()
  return lines
end

-- the files of dir ending in ext, in name order (the plugin loader's own
-- listing: no shell); none when dir cannot be read
local function list_dir(dir, ext)
  return require("ember.core")._list_dir(dir, ext) or {}
end

-- A comment line's text without the dashes ("--- x" -> "x", "--   y" -> "  y").
local function comment_text(line)
  local t = line:match("^%s*%-%-%-? ?(.*)$")
  return t
end

local function is_doc_start(line) return line:match("^%s*%-%-%-%f[^%-]") ~= nil or line:match("^%s*%-%-%-$") ~= nil end
local function is_comment(line) return line:match("^%s*%-%-") ~= nil end

-- The defined name of a code line: "function A.b(" / "function A:b(" /
-- "A.b = function(" / "function b(" (global); nil for local functions.
local function defined_name(line)
  local n = line:match("^function%s+([%w_%.:]+)%s*%(")
  if n then return n end
  n = line:match("^([%w_]+[%.:][%w_%.]+)%s*=%s*function%s*%(")
  return n
end
M.defined_name = defined_name

-- Parses one file into { entries = {name -> text}, header = text or nil,
-- header_is_doc = bool, defs = { {name=, line=, doc=bool} } }. Names are
-- as written (the caller qualifies them).
function M.parse(lines)
  local r = { entries = {}, defs = {} }
  local i, n = 1, #lines
  local first_block = true
  while i <= n do
    local line = lines[i]
    if is_comment(line) and not line:match("^%s*%-%-%[%[") then
      local start, doc = i, is_doc_start(line)
      local text = {}
      while i <= n and is_comment(lines[i]) do
        text[#text + 1] = comment_text(lines[i]) or ""
        i = i + 1
      end
      local body = table.concat(text, "\n")
      local fname = body:match("@function%s+([%w_%.:]+)")
      if fname then
        r.entries[fname] = body:gsub("\n?[^\n]*@function[^\n]*", "")
      elseif first_block and start == 1 then
        r.header, r.header_is_doc = body, doc
      end
      first_block = false
      local nxt = lines[i]
      local name = nxt and defined_name(nxt)
      if name and not fname then
        if doc then r.entries[name] = body end
        r.defs[#r.defs + 1] = { name = name, line = i, doc = doc }
        i = i + 1 -- the definition line is taken
      end
    else
      local name = defined_name(line)
      if name then r.defs[#r.defs + 1] = { name = name, line = i, doc = false } end
      if line:match("%S") then first_block = false end
      i = i + 1
    end
  end
  return r
end

-- export name of each file of a namespace, from its init.lua
-- ("Dataset = require "ember.data.dataset"" -> dataset.lua is Dataset).
local function exports_of(ns)
  local map = {}
  for _, line in ipairs(read_lines(DIR .. ns .. "/init.lua") or {}) do
    local export, file = line:match('^%s*([%w_]+)%s*=%s*require%s*%(?%s*"ember%.' .. ns .. '%.([%w_]+)"%s*%)?%s*,?%s*$')
    if export then map[file] = export end
  end
  return map
end

-- "Linear:forward" in nn/Linear.lua exported as Linear -> "nn.Linear:forward".
local function qualify(prefix, written)
  local rest = written:match("^[%w_]+([%.:].*)$") or ""
  return prefix .. rest
end

local INDEX -- name -> text
local ALIASES = {} -- "ember.exp" where that is Tensor:exp itself, entry and all
local FILES -- list of { path=, public=, prefix=, parsed= }

-- Every documented source: the public Lua files (not _private ones) and
-- the .luadoc files of the functions written in C.
function M.files()
  if FILES then return FILES end
  FILES = {}
  local function add(path, prefix, public, ns)
    local lines = read_lines(path)
    if lines then
      local parsed = M.parse(lines)
      -- a file no init.lua exports may name itself (nn/parametrize.lua: @module nn.utils.parametrize)
      local declared = ns and parsed.header and parsed.header:match("@module%s+(" .. ns .. "%.[%w_.]+)")
      FILES[#FILES + 1] = { path = path, prefix = declared or prefix, public = public, parsed = parsed }
    end
  end
  for _, name in ipairs(list_dir(DIR, ".lua")) do
    local base = name:sub(1, -5)
    if base ~= "init" and base:sub(1, 1) ~= "_" then add(DIR .. name, base, true) end
  end
  for _, ns in ipairs(NAMESPACES) do
    local exports = exports_of(ns)
    for _, name in ipairs(list_dir(DIR .. ns, ".lua")) do
      local base = name:sub(1, -5)
      if base ~= "init" and base:sub(1, 1) ~= "_" then add(DIR .. ns .. "/" .. name, ns .. "." .. (exports[base] or base), true, not exports[base] and ns) end
    end
  end
  for _, name in ipairs(list_dir(DIR .. "doc", ".luadoc")) do add(DIR .. "doc/" .. name, nil, false) end
  return FILES
end

function M.index()
  if INDEX then return INDEX end
  ALIASES = {}
  INDEX = {}
  for _, f in ipairs(M.files()) do
    local p = f.parsed
    if f.prefix then
      if p.header then INDEX[f.prefix] = p.header end
      for name, text in pairs(p.entries) do INDEX[qualify(f.prefix, name)] = text end
    else -- a .luadoc of module ember: "matmul" is ember.matmul, "Tensor:sum" stays
      for name, text in pairs(p.entries) do INDEX[name:find("[.:]") and name or ("ember." .. name)] = text end
    end
  end
  -- ember.exp is Tensor.exp itself (_helpers.lua): the method's entry serves both
  local ember = require "ember"
  -- ember.tanh and friends also take traced values (ember/variant.lua wraps them)
  local wrapped = (package.loaded["ember.variant"] or {}).wrapped or {}
  for k, v in pairs(ember.Tensor) do
    local key = "ember." .. tostring(k)
    local mine = rawget(ember, k)
    if type(k) == "string" and (rawequal(mine, v) or rawequal(wrapped[mine], v)) and not INDEX[key]
        and INDEX["Tensor:" .. k] then
      INDEX[key] = INDEX["Tensor:" .. k]
      ALIASES[key] = true
    end
  end
  return INDEX
end

-- The name under which a value is documented, found by identity.
local function name_of(v, depth)
  local ember = require "ember"
  -- ember.exp and the other helpers that also take traced values are
  -- wrappers (ember/variant.lua): name the function they wrap
  local wrapped = (package.loaded["ember.variant"] or {}).wrapped
  local wrapper = v -- ember.load_plugin is a wrapper whose original is in no table: named as the wrapper
  if wrapped and wrapped[v] then v = wrapped[v] end
  M.index() -- fills ALIASES: a method offered as ember.<name> too is named as the method
  for k, x in pairs(ember) do
    if (rawequal(x, v) or rawequal(x, wrapper)) and type(k) == "string" and not ALIASES["ember." .. k] then
      return "ember." .. k
    end
  end
  for k, x in pairs(ember.Tensor) do if rawequal(x, v) and type(k) == "string" then return "Tensor:" .. k end end
  -- a function exported twice (data.pack is data.packing.pack) takes the
  -- name that has an entry, whatever order pairs() gives
  local idx, fallback = M.index(), nil
  local function documented(name)
    if idx[name] then return name end
    fallback = fallback or name
  end
  for _, ns in ipairs(NAMESPACES) do
    local mod = ember[ns]
    for export, t in pairs(mod) do
      if rawequal(t, v) and documented(ns .. "." .. export) then return ns .. "." .. export end
      if type(t) == "table" then
        for k, x in pairs(t) do
          if rawequal(x, v) and type(k) == "string" then
            local dot, colon = ns .. "." .. export .. "." .. k, ns .. "." .. export .. ":" .. k
            local name = idx[colon] and colon or dot
            if documented(name) then return name end
          end
          -- one level further: nn.utils.rnn.pad_sequence
          if type(x) == "table" and type(k) == "string" and getmetatable(x) == nil then
            for k2, y in pairs(x) do
              local name = ns .. "." .. export .. "." .. k .. "." .. tostring(k2)
              if rawequal(y, v) and type(k2) == "string" and documented(name) then return name end
            end
          end
        end
      end
    end
  end
  if fallback then return fallback end
  -- the modules of lua/ember/'s public files (ember.special, ember.checkpoint, ...)
  for _, f in ipairs(M.files()) do
    local modname = f.public and f.prefix and not f.prefix:find(".", 1, true) and f.prefix
    local ok, mod = false, nil
    if modname then ok, mod = pcall(require, "ember." .. modname) end
    if ok and type(mod) == "table" then
      if rawequal(mod, v) then return modname end
      for k, x in pairs(mod) do if rawequal(x, v) then return modname .. "." .. k end end
    end
  end
  -- a value made by ember: a tensor is ember.Tensor; a module, optimizer,
  -- scheduler or Size is its class (help(model), help(opt) at the REPL)
  if ember.is_tensor(v) then return "ember.Tensor" end
  local mt = type(v) == "table" and getmetatable(v) or nil
  if type(mt) == "table" and not rawequal(mt, v) and (depth or 0) < 4 then return name_of(mt, (depth or 0) + 1) end
  return nil
end
M.name_of = name_of

-- The reference text of a value or a name ("Tensor:sum", "ember.matmul").
function M.lookup(v)
  local idx = M.index()
  local name = type(v) == "string" and v or name_of(v)
  if name == nil then return nil end
  if idx[name] then return idx[name], name end
  -- a module's file is indexed by its name alone ("flex.and_masks" for ember.flex.and_masks)
  for _, alt in ipairs { "ember." .. name, "Tensor:" .. name, (name:gsub("^ember%.", "Tensor:")), (name:gsub("^ember%.", "")) } do
    if idx[alt] then return idx[alt], alt end
  end
  return nil, name
end

-- LDoc's type tags: "@int n d" is "@tparam int n d".
local TYPE_TAGS = { int = true, string = true, number = true, bool = true, tab = true, func = true }

--- Prints the reference entry of a function, class or name.
-- `help(ember.matmul)`, `help(nn.MultiHeadAttention)`, `help("Tensor:sum")`.
-- The text is the doc comment the HTML reference (the `docs` target) is
-- built from.
-- @param v a function, a class table or a name
-- @treturn string the text printed
-- LDoc tags as plain text: "@tparam T x d" -> "  x (T): d", "@usage" -> "Example:".
local function render(text)
  local out = {}
  local in_usage = false -- an example's lines are indented, all of them
  for line in (text .. "\n"):gmatch("(.-)\n") do
    local kind, rest = line:match("^@(%w+)%s*(.*)$")
    if kind then in_usage = kind == "usage" elseif in_usage and line ~= "" then line = "  " .. line end
    if TYPE_TAGS[kind] then kind, rest = "tparam", kind .. " " .. rest end -- LDoc's @int n: @tparam int n
    if kind == "tparam" or kind == "param" then
      local opt, r1 = rest:match("^%[(.-)%]%s*(.*)$")
      rest = r1 or rest
      local t, n, d = "", nil, nil
      if kind == "tparam" then t, n, d = rest:match("^(%S+)%s+(%S+)%s*(.*)$") else n, d = rest:match("^(%S+)%s*(.*)$") end
      local extra = {}
      if t ~= "" and t then extra[#extra + 1] = t end
      if opt then extra[#extra + 1] = opt:find("=") and ("optional, default " .. opt:match("=(.*)$")) or "optional" end
      line = ("  %s%s%s"):format(n or rest, #extra > 0 and (" (" .. table.concat(extra, ", ") .. ")") or "",
        (d and d ~= "") and (": " .. d) or "")
    elseif kind == "treturn" or kind == "return" then
      line = "  returns " .. rest
    elseif kind == "module" or kind == "classmod" or kind == "type" then
      line = nil
    elseif kind == "usage" then
      line = "Example:" .. (rest ~= "" and ("\n  " .. rest) or "")
    end
    if line then out[#out + 1] = line end
  end
  return (table.concat(out, "\n"):gsub("%s+$", ""))
end
M.render = render

-- An option's range from its declared min/max ("" when unbounded: the
-- core declares "no bound" as +-1e300).
local function range_of(o)
  local lo = o.min ~= nil and o.min > -1e299 and o.min or nil
  local hi = o.max ~= nil and o.max < 1e299 and o.max or nil
  local function num(x) return math.tointeger(x) and tostring(math.tointeger(x)) or tostring(x) end
  if lo and hi then return (", %s..%s"):format(num(lo), num(hi)) end
  if lo then return ", >= " .. num(lo) end
  if hi then return ", <= " .. num(hi) end
  return ""
end

-- The entry of an attention variant (a C plugin's or one written in Lua):
-- its description, options with defaults and help, per-call inputs and
-- what it supports, from what it declares. nil for no such variant.
function M.variant_entry(name)
  local ember = require "ember"
  local ok, v = pcall(ember.attention_variants, name)
  if not ok or type(v) ~= "table" or v.name ~= name then return nil end
  local def = require("ember.variant").get(name)
  local where = type(v.path) == "string" and not v.path:match("^%(") and (": " .. v.path) or ""
  local out = { ("attention variant %s (%s%s)"):format(name, def and "written in Lua" or "a C plugin", where), "",
    v.description or "" }
  -- a Lua variant's file opens with a comment that says more (plugins/flex/*.lua)
  local lines = def and type(v.path) == "string" and read_lines(v.path) or {}
  local header = {}
  for _, line in ipairs(lines) do
    local t = line:match("^%-%-+ ?(.*)$")
    if not t then break end
    header[#header + 1] = "  " .. t
  end
  if #header > 0 then out[#out + 1] = table.concat(header, "\n") end
  out[#out + 1] = ""
  if #(v.options or {}) == 0 then
    out[#out + 1] = "Options: none"
  else
    out[#out + 1] = "Options (ember.Attention and nn.MultiHeadAttention take them directly, the Transformer layers"
      .. " as attention_options = {...}):"
    for _, o in ipairs(v.options) do
      local extra = o.choices and (", one of " .. tostring(o.choices):gsub("|", ", ")) or range_of(o)
      out[#out + 1] = ("  %s (%s, default %s%s)%s"):format(o.name, o.type, tostring(o.default), extra,
        (o.help and o.help ~= "") and (": " .. o.help) or "")
    end
  end
  local inputs = def and require("ember.variant").inputs_of(def) or {}
  if #inputs > 0 then
    out[#out + 1] = "Per-call inputs (forward's variant_inputs = {name = tensor}):"
    for _, c in ipairs(inputs) do
      out[#out + 1] = ("  %s: %d-d, %s"):format(c.name, c.ndim, c.kind ~= "float" and "int64 (or bool, read as 0/1)" or
        "float")
    end
  end
  local caps = {}
  for _, k in ipairs { "key_padding", "mask", "causal", "dropout", "weights", "cross" } do
    if v.caps and v.caps[k] then caps[#caps + 1] = k end
  end
  out[#out + 1] = "Supports: " .. (#caps > 0 and table.concat(caps, ", ") or "none of key_padding, mask, causal, "
    .. "dropout, weights, cross")
  out[#out + 1] = ""
  out[#out + 1] = "Example:"
  local opt = v.options and v.options[1]
  local example = opt and (", %s = %s"):format(opt.name, type(opt.default) == "string" and ("%q"):format(opt.default)
    or tostring(opt.default)) or ""
  out[#out + 1] = ('  local mha = nn.MultiHeadAttention(64, 4, {attention = "%s"%s})'):format(name, example)
  if #inputs > 0 then
    local given = {}
    for i, c in ipairs(inputs) do given[i] = ("%s = ..."):format(c.name) end
    out[#out + 1] = ("  local y = mha(x, {variant_inputs = {%s}})"):format(table.concat(given, ", "))
  end
  out[#out + 1] = "  (ember.attention_variants(\"" .. name .. "\") lists the same as a table)"
  return table.concat(out, "\n")
end

-- help(nn), help(ember), help("optim"): what the namespace holds, by kind,
-- for help(nn.<name>) on one; nil when v is not one of ember's namespaces.
function M.namespace_entry(v)
  local ember = require "ember"
  local ns
  if rawequal(v, ember) or v == "ember" then ns, v = "ember", ember end
  for _, n in ipairs(NAMESPACES) do
    if rawequal(v, ember[n]) or v == n then ns, v = n, ember[n] end
  end
  if not ns then return nil end
  local kinds = { classes = {}, functions = {}, tables = {} }
  for k, x in pairs(v) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then
      local mt = type(x) == "table" and getmetatable(x)
      local index = type(x) == "table" and rawget(x, "__index")
      local class = type(x) == "table" and ((type(rawget(x, "__name")) == "string" and index ~= nil)
        or (rawequal(index, x) and rawget(x, "__tostring") ~= nil) or (type(mt) == "table" and mt.__call ~= nil))
      local kind = type(x) == "function" and "functions" or class and "classes" or type(x) == "table" and "tables"
      if kind then table.insert(kinds[kind], k) end
    end
  end
  local out = { ("%s: %s; help(%s.<name>) shows one"):format(ns, ns == "ember" and "the library" or "ember." .. ns, ns) }
  for _, kind in ipairs { "classes", "functions", "tables" } do
    local names = kinds[kind]
    table.sort(names)
    if #names > 0 then
      local line = "  " .. kind .. ":"
      for i, n in ipairs(names) do
        local item = " " .. n .. (i < #names and "," or "")
        if #line + #item > 100 then out[#out + 1], line = line, "   " end
        line = line .. item
      end
      out[#out + 1] = line
    end
  end
  return table.concat(out, "\n")
end

function M.help(v)
  local text, name = M.lookup(v)
  local out
  local variant = type(v) == "string" and M.variant_entry(v) or nil
  local namespace = not text and M.namespace_entry(v) or nil
  if variant and text then -- "linear" is ember.linear and an attention variant: both
    out = name .. "\n\n" .. render(text) .. "\n\n" .. variant
  elseif variant then
    out = variant
  elseif namespace then
    out = namespace
  elseif text then
    out = name .. "\n\n" .. render(text)
  elseif name then
    out = ("no reference entry for %s (see the reference: cmake --build build --target docs)"):format(name)
  else
    out = "help(x): x is a function, class or name of ember's API, e.g. help(ember.matmul), "
      .. "help(nn.MultiHeadAttention), help(\"Tensor:sum\"), a namespace: help(nn), or an attention variant's "
      .. "name: help(\"softcap\")"
  end
  print(out)
  return out
end

return M
