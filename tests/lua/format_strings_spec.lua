-- Every format given to lua_pushfstring / luaL_error / lua_pushvfstring uses
-- only the conversions Lua 5.4 knows (%% %s %f %I %p %d %c %U, no flags or
-- widths). Anything else ("%lld", "%zu", "%.3f") makes Lua raise "invalid
-- option '%l' to 'lua_pushfstring'" in place of the real message (issue 11,
-- repro 4), so the check runs over every C file of the tree.
local src = os.getenv("EMBER_SOURCE_DIR") or "."

local FUNCS = { "luaL_error", "lua_pushfstring", "lua_pushvfstring" }
local OK = { ["%"] = true, s = true, f = true, I = true, p = true, d = true, c = true, U = true }

-- The string literals that start the format argument of a call beginning
-- at `from` in `text` (adjacent literals are joined, as C does).
local function format_literal(text, from)
  local i = text:find("(", from, true)
  -- skip the first argument (the lua_State) up to its comma
  local comma = text:find(",", i, true)
  if not comma then return nil end
  local j = comma + 1
  local parts = {}
  while true do
    local ws = text:match("^[%s]*", j)
    j = j + #ws
    if text:sub(j, j) ~= '"' then break end
    local k = j + 1
    while true do
      local c = text:sub(k, k)
      if c == "\\" then k = k + 2
      elseif c == '"' or c == "" then break
      else k = k + 1 end
    end
    parts[#parts + 1] = text:sub(j + 1, k - 1)
    j = k + 1
  end
  if #parts == 0 then return nil end -- a format held in a variable
  return table.concat(parts)
end

-- The bad conversions of one format, as a list of strings like "%lld".
local function bad_conversions(fmt)
  local bad = {}
  local i = 1
  while true do
    local p = fmt:find("%", i, true)
    if not p then break end
    local c = fmt:sub(p + 1, p + 1)
    if OK[c] then
      i = p + 2
    else
      bad[#bad + 1] = fmt:match("^%%[-+ #0-9.]*[a-zA-Z]*", p) or ("%" .. c)
      i = p + 1 + math.max(1, #bad[#bad] - 1)
    end
  end
  return bad
end

local function c_files()
  local files = {}
  local p = assert(io.popen(("find '%s/core' '%s/plugins' '%s/backends' '%s/tests' -name '*.c'"):format(src, src, src, src)))
  for line in p:lines() do files[#files + 1] = line end
  p:close()
  return files
end

local function scan(text)
  local found = {}
  for _, fn in ipairs(FUNCS) do
    local from = 1
    while true do
      local s, e = text:find(fn .. "%s*%(", from)
      if not s then break end
      local before = text:sub(s - 1, s - 1)
      if not before:match("[%w_]") then
        local fmt = format_literal(text, s)
        if fmt then
          local line = select(2, text:sub(1, s):gsub("\n", "")) + 1
          for _, b in ipairs(bad_conversions(fmt)) do found[#found + 1] = ("line %d: %s in \"%s\""):format(line, b, fmt) end
        end
      end
      from = e + 1
    end
  end
  return found
end

describe("Lua format strings", function()
  it("the checker finds bad conversions (it can fail)", function()
    local bad = scan('x = luaL_error(L, "a %lld b %zu" "c %.3f %s %I %%", 1);')
    assert.are.equal(3, #bad)
    assert.truthy(bad[1]:find("%lld", 1, true))
    assert.are.equal(0, #scan('lua_pushfstring(L, "%s: %d of %I (%f) %p %c %U %%", a);'))
  end)

  it("every format in the tree uses only Lua's conversions", function()
    local files = c_files()
    assert.is_true(#files > 20, "found the C sources")
    local problems = {}
    for _, path in ipairs(files) do
      local f = assert(io.open(path))
      local text = f:read("a")
      f:close()
      for _, p in ipairs(scan(text)) do problems[#problems + 1] = path .. ": " .. p end
    end
    assert.are.same({}, problems)
  end)

  it("the repros give their real messages", function()
    local ember = require "ember"
    local ok, err = pcall(ember.from_bytes, "abc", { 2, 2 })
    assert.is_false(ok)
    assert.truthy(err:find("ember.from_bytes: shape needs 4 bytes", 1, true), err)
    ok, err = pcall(ember.randperm, -1)
    assert.is_false(ok)
    assert.truthy(err:find("ember.randperm: n must be in [0, 2^31], got -1", 1, true), err)
  end)
end)
