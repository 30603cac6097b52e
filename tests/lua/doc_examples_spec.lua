-- Docs tested for what they say (issue 26): every usage example in the LDoc
-- comments and the READMEs runs, and where it shows a printed result (a
-- `--> value` comment after a print or an expression) the output is checked.
--
-- What counts as an example:
--   * a ```lua fenced block of any tracked *.md file;
--   * an LDoc `@usage` (the rest of its line and the comment lines after it,
--     up to the next @tag or the end of the comment block) in lua/ember/;
--   * an indented block in a doc comment of lua/ember/ (lines "--" then at
--     least three spaces) whose first line starts `local `, `ember.`,
--     `print(` or `require` (formulas and option lists do not).
-- Each runs in a fresh environment (`ember`, `nn`, `optim` preloaded, `print`
-- captured, seed 0). `--> a ... b` matches the captured output of that line
-- with runs of whitespace collapsed, `...` standing for anything.
-- NOT_RUN lists the examples that are not run, each with its reason; an entry
-- that no longer names an example is itself a failure, so the list stays true.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"

local SRC = os.getenv("EMBER_SOURCE_DIR") or "."

-- "file:line" of the example's first line -> why it is not run
local NOT_RUN = {
  ["core/distributed/README.md:43"] = "needs mpirun (ranks, a model, a data set)",
  ["lua/ember/distributed/init.lua:3"] = "needs mpirun",
  ["lua/ember/distributed/World.lua:4"] = "needs mpirun",
  ["lua/ember/distributed/DistributedDataParallel.lua:4"] = "needs mpirun",
  ["lua/ember/distributed/DistributedSampler.lua:5"] = "needs mpirun",
  ["lua/ember/_errors.lua:9"] = "a list of signatures, not a program",
  ["lua/ember/generate.lua:5"] = "a signature: strategy=\"greedy\"|\"sample\" lists the choices",
  ["lua/ember/cli.lua:3"] = "parses a script's command line (arg)",
  ["lua/ember/models/llama.lua:5"] = "reads model.safetensors, a Hugging Face checkpoint",
  ["lua/ember/data/fashion_mnist.lua:3"] = "reads the Fashion-MNIST files",
  ["lua/ember/data/sort_of_clevr.lua:12"] = "generates 9800 images (slow); idx of a batch",
}

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

local examples = {}
local function add(file, line, code_lines)
  examples[#examples + 1] = {file = file, line = line, code = table.concat(code_lines, "\n")}
end

-- (a) ```lua blocks of the tracked markdown files
local function md_files()
  local p = assert(io.popen("cd '" .. SRC .. "' && git ls-files '*.md' 2>/dev/null"))
  local t = {}
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  if #t == 0 then t = {"README.md", "plugins/README.md", "core/distributed/README.md"} end
  return t
end

for _, rel in ipairs(md_files()) do
  local ls = lines(read(SRC .. "/" .. rel))
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

-- (b) @usage and indented blocks of the doc comments in lua/ember/
local function lua_files()
  local p = assert(io.popen("cd '" .. SRC .. "' && find lua/ember -name '*.lua' -o -name '*.luadoc' | sort"))
  local t = {}
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  return t
end

local function is_tag(text) return text:match("^%s*@%a") ~= nil end

for _, rel in ipairs(lua_files()) do
  if not rel:match("_doc%.lua$") then
    local ls = lines(read(SRC .. "/" .. rel))
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
        local first = block[1]:sub(indent + 1)
        if first:match("^local ") or first:match("^ember%.") or first:match("^print%(") or first:match("^require") then
          local code = {}
          for k, b in ipairs(block) do code[k] = b:sub(indent + 1) end
          add(rel, start, code)
        end
      else
        i = i + 1
      end
    end
  end
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

-- `a ... b` against got: pieces in order, the first at the start and the last
-- at the end unless the pattern starts or ends with "..."
local function matches(want, got)
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

local function run(ex)
  local code, expects = split_expect(ex.code)
  local chunkname = "=" .. ex.file .. ":" .. ex.line
  local printed = {}
  local env = setmetatable({ember = ember, nn = nn, optim = optim}, {__index = _G})
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
    assert(matches(want, got), ("%s:%d: printed\n  %s\nbut the doc says\n  %s"):format(
      ex.file, ex.line + n - 1, norm(got), want))
  end
end

describe("usage examples in the docs run", function()
  local seen = {}
  for _, ex in ipairs(examples) do
    local key = ex.file .. ":" .. ex.line
    seen[key] = true
    if NOT_RUN[key] then
      pending(key .. " (not run: " .. NOT_RUN[key] .. ")")
    else
      it(key, function() run(ex) end)
    end
  end

  it("finds the examples, and every NOT_RUN entry names one", function()
    assert(#examples >= 40, "only " .. #examples .. " examples found")
    for key in pairs(NOT_RUN) do assert(seen[key], "NOT_RUN names no example: " .. key) end
  end)

  it("checks `-->` (a wrong printed value fails)", function()
    assert.is_true(matches("ember.Size{2, 3}", "ember.Size{2, 3}"))
    assert.is_false(matches("ember.Size{2, 4}", "ember.Size{2, 3}"))
    assert.is_true(matches("... ember.Size{2, 3}", "tensor\n 1 2\n ember.Size{2, 3}"))
    assert.is_false((pcall(run, {file = "x", line = 1, code = "print(1 + 1)   --> 3"})))
  end)
end)
