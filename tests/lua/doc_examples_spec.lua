-- Docs tested for what they say (issue 26): every usage example in the LDoc
-- comments and the READMEs runs, and where it shows a printed result (a
-- `--> value` comment after a print or an expression) the output is checked.
-- helpers/doc_examples.lua says what counts as an example, how one runs and
-- how its key (file and first line) is made.
--
-- Most run here, in this process. Those that need a process of their own run
-- through helpers/run_doc_examples.lua: the distributed ones on 2 ranks under
-- mpirun (tests/distributed/run_mpi.sh, as the MPI tests: skipped without
-- mpirun or the MPI module), and those that read files in a folder that
-- this spec fills with small synthetic stand-ins (a Hugging Face checkpoint,
-- Fashion-MNIST's idx files).
-- NOT_RUN lists the examples that are not run, each with its reason; an
-- entry (of NOT_RUN, ON_RANKS, IN_FOLDER or GLOBALS) that names no example is
-- itself a failure, so the lists stay true.
local ember = require "ember"
local doc_examples = require "tests.lua.helpers.doc_examples"
local tmpdir = require "tests.lua.helpers.tmpdir"

local shell_quote = require("tests.lua.helpers.shell").quote
local write = require("tests.lua.helpers.files").write
local mpi_ready = require("tests.lua.helpers.mpi").ready -- can this build run ember.distributed on ranks?

local function absolute(path)
  if path:sub(1, 1) == "/" then return path end
  local p = assert(io.popen("pwd"))
  local cwd = p:read("l"); p:close()
  return cwd .. "/" .. path
end

local SRC = absolute(os.getenv("EMBER_SOURCE_DIR") or ".")
local BUILD = absolute(os.getenv("EMBER_BUILD_DIR") or "build")
local EMBER = BUILD .. "/bin/ember"
local RUNNER = SRC .. "/tests/lua/helpers/run_doc_examples.lua"
-- the plugin folders, absolute: an example may run in another folder
local PLUGINS = {}
for d in (os.getenv("EMBER_PLUGIN_PATH") or BUILD .. "/plugins"):gmatch("[^:]+") do PLUGINS[#PLUGINS + 1] = absolute(d) end
PLUGINS = table.concat(PLUGINS, ":")

-- key -> why it is not run (only what is outside this project's power)
local NOT_RUN = {}

-- Run on 2 ranks under mpirun, all in one launch (in this order).
local ON_RANKS = {
  "core/distributed/README.md: local dist = require \"ember.distributed\"",
  "lua/ember/distributed/init.lua: local dist = require \"ember.distributed\"",
  "lua/ember/distributed/World.lua: local world = require(\"ember.distributed.World\").from_env()",
  "lua/ember/distributed/DistributedDataParallel.lua: local dist = require \"ember.distributed\"",
  "lua/ember/distributed/DistributedSampler.lua: local dist = require \"ember.distributed\"",
}

local function be32(n) return string.pack(">I4", n) end

-- Run in a process of their own, in a fresh folder that fill(dir) prepares;
-- fill returns the environment the process gets ("NAME=value" strings).
local IN_FOLDER = {
  -- a tiny Hugging Face Llama checkpoint: LlamaForCausalLM's tensor names,
  -- 32 heads of dim 2, 8 key/value heads, one layer, 61 tokens
  ["lua/ember/models/llama.lua: local Llama = require(\"ember.models\").Llama"] = function(dir)
    local V, E, KV, F = 61, 64, 16, 96
    local function w(...) return ember.randn(...) * 0.1 end
    local t = {["model.embed_tokens.weight"] = w(V, E), ["model.norm.weight"] = ember.ones(E),
               ["lm_head.weight"] = w(V, E)}
    local l = "model.layers.0."
    t[l .. "self_attn.q_proj.weight"], t[l .. "self_attn.o_proj.weight"] = w(E, E), w(E, E)
    t[l .. "self_attn.k_proj.weight"], t[l .. "self_attn.v_proj.weight"] = w(KV, E), w(KV, E)
    t[l .. "mlp.gate_proj.weight"], t[l .. "mlp.up_proj.weight"] = w(F, E), w(F, E)
    t[l .. "mlp.down_proj.weight"] = w(E, F)
    t[l .. "input_layernorm.weight"], t[l .. "post_attention_layernorm.weight"] = ember.ones(E), ember.ones(E)
    require("ember.checkpoint").save_tensors(dir .. "/model.safetensors", t)
    return {}
  end,
  -- Fashion-MNIST's four gzip'd idx files, 120 training and 20 test images
  ["lua/ember/data/fashion_mnist.lua: local fashion_mnist = require \"ember.data.fashion_mnist\""] = function(dir)
    for prefix, n in pairs({train = 120, t10k = 20}) do
      local pixels, labels = {}, {}
      for i = 1, n do
        pixels[i] = string.rep(string.char(i % 256), 28 * 28)
        labels[i] = string.char((i - 1) % 10)
      end
      local img = dir .. "/" .. prefix .. "-images-idx3-ubyte"
      local lab = dir .. "/" .. prefix .. "-labels-idx1-ubyte"
      write(img, be32(2051) .. be32(n) .. be32(28) .. be32(28) .. table.concat(pixels))
      write(lab, be32(2049) .. be32(n) .. table.concat(labels))
      assert(os.execute("gzip " .. shell_quote(img) .. " " .. shell_quote(lab)))
    end
    return {"EMBER_FASHION_MNIST=" .. dir}
  end,
}

-- Extra globals of an example run here: the command line a script is given
-- (cli.lua's header example; a later one there starts the same way: " #2").
local GLOBALS = {
  ["lua/ember/cli.lua: local cli = require \"ember.cli\""] =
    {arg = {[0] = "scripts/langid.lua", "--layers", "3", "--lr=0.01"}},
}

-- `cmd` with its output and whether it succeeded.
local function run_command(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  return out, ok == true
end

local function runner_command(keys)
  local q = {}
  for i, k in ipairs(keys) do q[i] = shell_quote(k) end
  return shell_quote(RUNNER) .. " " .. table.concat(q, " ")
end

-- The output of the ON_RANKS examples under mpirun, run once, when first asked.
local ranks_output
local function on_ranks()
  if not ranks_output then
    local out, ok = run_command(("cd %s && EMBER_SOURCE_DIR=%s EMBER_BUILD_DIR=%s EMBER_DIST_TIMEOUT=60 "
      .. "bash tests/distributed/run_mpi.sh %s 2 %s"):format(shell_quote(SRC), shell_quote(SRC), shell_quote(BUILD),
      shell_quote(EMBER), runner_command(ON_RANKS)))
    ranks_output = {out = out, ok = ok}
  end
  return ranks_output
end

-- How many lines of s are exactly line?
local function count_lines(s, line)
  local n = 0
  for l in s:gmatch("[^\n]+") do if l == line then n = n + 1 end end
  return n
end

local examples = doc_examples.collect(SRC)

describe("usage examples in the docs run", function()
  local seen, rank_key = {}, {}
  for _, k in ipairs(ON_RANKS) do rank_key[k] = true end
  local MPI = mpi_ready()
  for _, ex in ipairs(examples) do
    local key = ex.key
    seen[key] = true
    local name = key .. " (" .. ex.file .. ":" .. ex.line .. ")"
    if NOT_RUN[key] then
      pending(name .. " (not run: " .. NOT_RUN[key] .. ")")
    elseif rank_key[key] and not MPI then
      pending(name .. " (on 2 ranks: skipped, no mpirun or no MPI module in this build)")
    elseif rank_key[key] then
      it(name .. ", on 2 ranks", function()
        -- each rank prints "ok - key" for each example that passed on it
        local r = on_ranks()
        assert(count_lines(r.out, "ok - " .. key) == 2, "on 2 ranks under mpirun:\n" .. r.out)
      end)
    elseif IN_FOLDER[key] then
      it(name .. ", in a folder of its own", function()
        local dir = tmpdir()
        finally(function() os.execute("rm -rf " .. shell_quote(dir)) end)
        local env = IN_FOLDER[key](dir)
        for i, e in ipairs(env) do env[i] = shell_quote(e) end
        local out, ok = run_command(("cd %s && env EMBER_SOURCE_DIR=%s EMBER_PLUGIN_PATH=%s %s %s %s"):format(
          shell_quote(dir), shell_quote(SRC), shell_quote(PLUGINS), table.concat(env, " "), shell_quote(EMBER),
          runner_command({key})))
        assert(ok and count_lines(out, "ok - " .. key) == 1, out)
      end)
    else
      it(name, function() doc_examples.run(ex, GLOBALS[key]) end)
    end
  end

  if MPI then
    it("the distributed examples' mpirun exits with 0", function()
      local r = on_ranks()
      assert(r.ok, "on 2 ranks under mpirun:\n" .. r.out)
    end)
  end

  it("finds the examples, and every entry of NOT_RUN, ON_RANKS, IN_FOLDER and GLOBALS names one", function()
    assert(#examples >= 40, "only " .. #examples .. " examples found")
    for key in pairs(NOT_RUN) do assert(seen[key], "NOT_RUN names no example: " .. key) end
    for _, key in ipairs(ON_RANKS) do assert(seen[key], "ON_RANKS names no example: " .. key) end
    for key in pairs(IN_FOLDER) do assert(seen[key], "IN_FOLDER names no example: " .. key) end
    for key in pairs(GLOBALS) do assert(seen[key], "GLOBALS names no example: " .. key) end
  end)

  it("keys an example by its file and first line: a doc edited above it does not move the key", function()
    local doc = "```lua\nprint(1)\n```\n```lua\n\nprint(1)   --> 1\n```\n"
    local a = doc_examples.examples_of("x.md", doc)
    local b = doc_examples.examples_of("x.md", "# Title\n\nMore text.\n" .. doc)
    assert.are.same({"x.md: print(1)", "x.md: print(1) #2"}, {a[1].key, a[2].key})
    assert.are.same({a[1].key, a[2].key}, {b[1].key, b[2].key})
    assert.are.same({2, 5}, {a[1].line, a[2].line})
    assert.are.same({5, 8}, {b[1].line, b[2].line})
    local l = doc_examples.examples_of("y.lua",
      "--- A module.\n--\n--   local y = 1   -- one\n--   print(y)\n-- @usage print(\"-- 2\")  -- \"two\"\n")
    assert.are.same({"y.lua: local y = 1", "y.lua: print(\"-- 2\")  -- \"two\""}, {l[1].key, l[2].key})
  end)

  it("checks `-->` (a wrong printed value fails)", function()
    local matches = doc_examples.matches
    assert.is_true(matches("ember.Size{2, 3}", "ember.Size{2, 3}"))
    assert.is_false(matches("ember.Size{2, 4}", "ember.Size{2, 3}"))
    assert.is_true(matches("... ember.Size{2, 3}", "tensor\n 1 2\n ember.Size{2, 3}"))
    assert.is_false((pcall(doc_examples.run, {file = "x", line = 1, code = "print(1 + 1)   --> 3"})))
  end)
end)
