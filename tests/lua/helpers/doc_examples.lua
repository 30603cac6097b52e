-- tests/lua/helpers/doc_examples.lua -- the usage examples of the docs, found
-- and run (issue 26: docs tested for what they say). doc_examples_spec.lua
-- runs them; run_doc_examples.lua runs chosen ones in a process of their own
-- (under mpirun, or in a folder holding the files an example reads).
--
-- What counts as an example:
--   * a ```lua fenced block of any tracked *.md file;
--   * an LDoc `@usage` (the rest of its line and the comment lines after it,
--     up to the next @tag or the end of the comment block) in lua/ember/;
--   * an indented block in a doc comment of lua/ember/ (lines "--" then at
--     least three spaces) whose first line starts `local `, `ember.`,
--     `print(` or `require` (formulas and option lists do not).
-- An example's key is its file and its first line of code, without a
-- trailing comment ("lua/ember/cli.lua: local cli = require \"ember.cli\""),
-- with " #2", " #3" for a later example of the same file that starts the
-- same way: editing the doc above an example does not move its key, as a
-- line number would.
-- Each runs in a fresh environment (`ember`, `nn`, `optim` preloaded, `print`
-- captured, seed 0). `--> a ... b` matches the captured output of that line
-- with runs of whitespace collapsed, `...` standing for anything.
local M = {}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a"); f:close(); return s
end

local function lines(s)
  local t = {}
  for l in (s .. "\n"):gmatch("(.-)\r?\n") do t[#t + 1] = l end
  if t[#t] == "" then t[#t] = nil end
  return t
end

local function command_lines(cmd)
  local p = assert(io.popen(cmd))
  local t = {}
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  return t
end

-- (a) the ```lua blocks of a markdown file
local function md_examples(rel, ls, add)
  local i = 1
  while i <= #ls do
    if ls[i]:match("^%s*```lua%s*$") then
      local start, code = i + 1, {}
      i = i + 1
      while i <= #ls and not ls[i]:match("^%s*```") do code[#code + 1] = ls[i]; i = i + 1 end
      add(rel, start, code)
    end
    i = i + 1
  end
end

local function is_tag(text) return text:match("^%s*@%a") ~= nil end

local function is_code_start(first)
  return first:match("^local ") or first:match("^ember%.") or first:match("^print%(") or first:match("^require")
end

-- (b) the @usage and indented blocks of a Lua file's doc comments
local function lua_examples(rel, ls, add)
  local i = 1
  while i <= #ls do
    local l = ls[i]
    local rest = l:match("^%s*%-%-%-?%s*@usage%s?(.*)$")
    if rest then
      local start, code = i, {}
      if rest:match("%S") then code[1] = rest else start = i + 1 end
      i = i + 1
      while i <= #ls do
        local c = ls[i]:match("^%s*%-%-(.*)$")
        if not c or ls[i]:match("^%s*%-%-%-") or is_tag(c) then break end
        code[#code + 1] = c:gsub("^ ", "")
        i = i + 1
      end
      add(rel, start, code)
    elseif l:match("^%-%-   +%S") then
      local start, block = i, {}
      while i <= #ls and ls[i]:match("^%-%-   +%S") do block[#block + 1] = ls[i]:sub(3); i = i + 1 end
      local indent = #block[1]:match("^ *")
      if is_code_start(block[1]:sub(indent + 1)) then
        local code = {}
        for k, b in ipairs(block) do code[k] = b:sub(indent + 1) end
        add(rel, start, code)
      end
    else
      i = i + 1
    end
  end
end

--- The examples of one file (rel: its path from the source folder, text:
-- its contents): a list of {file, line, key, code}.
function M.examples_of(rel, text)
  local examples, count = {}, {}
  local function add(file, line, code_lines)
    local first = ""
    for _, c in ipairs(code_lines) do
      if c:match("%S") then first = c:gsub("^%s+", ""):gsub("%s+$", ""); break end
    end
    -- without a trailing comment (one with no quote in it: not inside a string)
    local code = first:gsub("%s+%-%-[^\"']*$", "")
    if code:match("%S") then first = code end
    local key = file .. ": " .. first
    count[key] = (count[key] or 0) + 1
    if count[key] > 1 then key = key .. " #" .. count[key] end
    examples[#examples + 1] = {file = file, line = line, key = key, code = table.concat(code_lines, "\n")}
  end
  if rel:match("%.md$") then md_examples(rel, lines(text), add) else lua_examples(rel, lines(text), add) end
  return examples
end

--- Every example under the source folder src: the tracked *.md files and
-- the doc comments of lua/ember/.
function M.collect(src)
  local files = command_lines("cd '" .. src .. "' && git ls-files '*.md' 2>/dev/null")
  if #files == 0 then files = {"README.md", "plugins/README.md", "core/distributed/README.md"} end
  for _, rel in ipairs(command_lines("cd '" .. src .. "' && find lua/ember -name '*.lua' -o -name '*.luadoc' | sort")) do
    if not rel:match("_doc%.lua$") then files[#files + 1] = rel end
  end
  local all = {}
  for _, rel in ipairs(files) do
    for _, ex in ipairs(M.examples_of(rel, read(src .. "/" .. rel))) do all[#all + 1] = ex end
  end
  return all
end

-- `code --> expected` lines: a print or an expression whose output is checked
local function split_expect(code)
  local out, expects = {}, {}
  for n, l in ipairs(lines(code)) do
    local src, want = l:match("^(.-)%s*%-%->%s*(.-)%s*$")
    if src and src:match("%S") and not src:match("^%s*%-%-") then
      if not src:match("^%s*print%(") then src = "print(" .. src .. ")" end
      expects[n] = want
      out[n] = src
    else
      out[n] = l
    end
  end
  return table.concat(out, "\n"), expects
end

local function norm(s) return (s:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")) end
M.norm = norm

--- Does the output `got` match `want`? Its pieces between "..." in order,
-- the first at the start and the last at the end unless want starts or ends
-- with "...".
function M.matches(want, got)
  want, got = norm(want), norm(got)
  local pieces, pos = {}, 1
  for p in (want .. "..."):gmatch("(.-)%.%.%.") do pieces[#pieces + 1] = norm(p) end
  local open_start, open_end = want:match("^%.%.%.") ~= nil, want:match("%.%.%.$") ~= nil
  for k, p in ipairs(pieces) do
    if p ~= "" then
      local s, e = got:find(p, pos, true)
      if not s or (k == 1 and not open_start and s ~= 1) then return false end
      pos = e + 1
    end
  end
  local last = pieces[#pieces]
  if not open_end and last ~= "" and got:sub(-#last) ~= last then return false end
  return true
end

--- Runs one example; raises an error naming it when it fails or prints
-- other than its `-->` lines say. globals: extra entries of its environment
-- (`arg`, say).
function M.run(ex, globals)
  local ember, nn, optim = require "ember", require "ember.nn", require "ember.optim"
  local code, expects = split_expect(ex.code)
  -- positions read "file example:n:" (n: the example's line), so that
  -- "file:line" never looks like a position with another line after it
  local chunkname = "=" .. ex.file .. " example"
  local printed = {}
  local env = setmetatable({ember = ember, nn = nn, optim = optim}, {__index = _G})
  for k, v in pairs(globals or {}) do env[k] = v end
  env.print = function(...)
    local t = table.pack(...)
    for k = 1, t.n do t[k] = tostring(t[k]) end
    local info = debug.getinfo(2, "Sl")
    local line = info and info.source == chunkname and info.currentline or 0
    printed[line] = (printed[line] and printed[line] .. "\n" or "") .. table.concat(t, "\t", 1, t.n)
  end
  local f, err = load(code, chunkname, "t", env)
  assert(f, err)
  ember.manual_seed(0)
  local ok, e = pcall(f)
  assert(ok, ("%s:%d: the example fails:\n%s\n-- error: %s"):format(ex.file, ex.line, ex.code, tostring(e)))
  for n, want in pairs(expects) do
    local got = printed[n]
    assert(got, ("%s:%d: nothing printed for `--> %s`"):format(ex.file, ex.line + n - 1, want))
    assert(M.matches(want, got), ("%s:%d: printed\n  %s\nbut the doc says\n  %s"):format(
      ex.file, ex.line + n - 1, norm(got), want))
  end
end

return M
