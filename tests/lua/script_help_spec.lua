-- Every program in scripts/ answers --help with exit status 0; the help of
-- the argparse-based scripts names only options that exist (every --name
-- anywhere in the text is one of the options it lists); and each example
-- in a help text runs, with --smoke (a few steps; the loss must fall), in
-- the order given and in one --out folder.
-- Also the ember program's own --help and --version.
local build = os.getenv("EMBER_BUILD_DIR") or "build"
local EMBER = build .. "/bin/ember"

local function sanitized() -- examples train: only in the normal build (see scripts_spec.lua)
  local f = io.open(build .. "/CMakeCache.txt", "r")
  if not f then return false end
  local cache = f:read("a")
  f:close()
  return cache:find("EMBER_SANITIZE:BOOL=ON", 1, true) ~= nil
end

local function run(cmd)
  local p = assert(io.popen("EMBER_PROGRESS_PLAIN=1 " .. cmd .. " 2>&1", "r"))
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

local function list(dir, pattern)
  local out = {}
  local p = assert(io.popen(("ls %s"):format(dir)))
  for name in p:lines() do
    if name:match(pattern) then out[#out + 1] = dir .. "/" .. name end
  end
  p:close()
  table.sort(out)
  return out
end

-- How each kind of program is started; torch_common.py is a module of the
-- torch_*.py peers, and a _name.lua one of the Lua benchmarks, not programs.
local PROGRAMS = {}
for _, dir in ipairs { "scripts", "scripts/bench" } do
  for _, f in ipairs(list(dir, "%.lua$")) do
    if not f:match("/_[^/]*$") then PROGRAMS[#PROGRAMS + 1] = { f, EMBER .. " " .. f } end
  end
  for _, f in ipairs(list(dir, "%.sh$")) do PROGRAMS[#PROGRAMS + 1] = { f, "bash " .. f } end
  for _, f in ipairs(list(dir, "%.py$")) do
    if not f:match("torch_common%.py$") then PROGRAMS[#PROGRAMS + 1] = { f, "/usr/bin/python3 " .. f } end
  end
end

-- The options an argparse help lists ("   --name ARG   text", "-h, --help").
local function listed_options(help)
  local names = {}
  local section = help:match("\nOptions:\n(.-)\n\n") or help:match("\nOptions:\n(.*)$") or ""
  for line in section:gmatch("[^\n]+") do
    local name = line:match("^%s+%-%-([%w_]+)") or line:match("^%s+%-%w, %-%-([%w_]+)")
    if name then names[name] = true end
  end
  return names
end

describe("scripts answer --help", function()
  assert(#PROGRAMS >= 15, "found only " .. #PROGRAMS .. " programs")
  for _, p in ipairs(PROGRAMS) do
    it(p[1], function()
      -- a program that ignores --help would start its real work: a bounded
      -- wait turns that into a failure that names it (timeout exits 124)
      local out, code = run("timeout 60 " .. p[2] .. " --help")
      assert(code ~= 124, p[1] .. " does not answer --help (it ran for 60 s)")
      assert.are.equal(0, code, out)
      assert(#out > 40, "a help text that says nothing: " .. out)
    end)
  end
end)

describe("help texts name only options that exist, and their examples run", function()
  for _, p in ipairs(PROGRAMS) do
    if p[1]:match("%.lua$") then
      local help = run(p[2] .. " --help")
      if help:find("\nOptions:\n", 1, true) then
        it(p[1] .. ": every --option in the help is a listed option", function()
          local listed = listed_options(help)
          assert(listed.help, "no --help among the options of " .. p[1])
          for name in help:gmatch("%-%-([%w_]+)") do
            assert(listed[name], ("%s's help mentions --%s, which it does not list"):format(p[1], name))
          end
        end)
        -- The examples run in order in one --out folder, as a user would
        -- run them: a --predict after a training run finds its model.
        local examples = help:match("\nExamples:\n(.*)$") or ""
        local out_dir = os.tmpname()
        os.remove(out_dir)
        local lines = {}
        for line in examples:gmatch("[^\n]+") do lines[#lines + 1] = line end
        for i, line in ipairs(lines) do
          local args = line:match("^%s*ember%s+" .. p[1]:gsub("%p", "%%%0") .. "%s*(.*)$")
          assert(args, p[1] .. ": an example that is not a command line of the script: " .. line)
          if not sanitized() then
            it(p[1] .. " example: " .. args, function()
              local listed = listed_options(help) -- a short run where the script can
              local smoke = (listed.smoke and " --smoke" or "") .. (listed.max_steps and " --max_steps 10" or "")
                .. (listed.out and (" --out " .. out_dir) or "")
              local out, code = run(("%s %s%s"):format(p[2], args, smoke))
              if i == #lines then os.execute("rm -rf '" .. out_dir .. "'") end
              assert.are.equal(0, code, out)
            end)
          end
        end
      end
    end
  end
end)

describe("the ember program", function()
  it("--help prints the options and exits 0", function()
    local out, code = run(EMBER .. " --help")
    assert.are.equal(0, code)
    for _, needle in ipairs { "usage:", "-e stat", "--version", "--help", "EMBER_PLUGIN_PATH" } do
      assert(out:find(needle, 1, true), needle)
    end
  end)

  it("--version prints the version and exits 0", function()
    local out, code = run(EMBER .. " --version")
    assert.are.equal(0, code)
    assert(out:match("^ember %d+%.%d+ %(Lua 5%.4"), out)
  end)

  it("an unknown long option is still an error", function()
    local out, code = run(EMBER .. " --nope")
    assert.are_not.equal(0, code)
    assert(out:find("unrecognized option '--nope'", 1, true), out)
  end)

  it("a script's bad option value ends it with the message and status 2, no traceback", function()
    -- and, before any data loads, a model that cannot be built (they were
    -- tracebacks from its constructor), a problem --predict cannot read,
    -- and train_fashion_mnist's own parser (argparse's exit status 1)
    for _, cmd in ipairs { "scripts/fashion_vit.lua --crop_prob 2", "scripts/langid.lua --seed 1.5",
                           "scripts/sort_of_clevr.lua --distance_slopes 1,2", "scripts/langid.lua --heads 3",
                           "scripts/addition.lua --dropout 1.5", "scripts/sort_of_clevr.lua --ffn 0",
                           "scripts/kjv_lm.lua --temperature 0", "scripts/addition.lua --predict 1234+1",
                           "scripts/train_fashion_mnist.lua --batch 0", "scripts/train_fashion_mnist.lua --epochs 1.5" } do
      local out, code = run(EMBER .. " " .. cmd)
      assert.are.equal(2, code, cmd .. ": " .. out)
      local script, flag = cmd:match("^(%S+) (%S+)")
      assert(out:find(script .. ": " .. flag, 1, true) or out:find(script .. ": option " .. flag, 1, true), out)
      assert.is_nil(out:find("stack traceback", 1, true), out)
    end
  end)

  it("a script's --help goes to the script", function()
    local out, code = run(EMBER .. " scripts/check_plugin.lua --help")
    assert.are.equal(0, code)
    assert(out:find("Usage: ember scripts/check_plugin.lua", 1, true), out)
  end)
end)
