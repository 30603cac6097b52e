-- Docs tested for what they say (issue 26): every usage example in the LDoc
-- comments and the READMEs runs, and where it shows a printed result (a
-- `--> value` comment after a print or an expression) the output is checked.
-- helpers/doc_examples.lua says what counts as an example, how one runs and
-- how its key (file and first line) is made.
-- NOT_RUN lists the examples that are not run, each with its reason; an
-- entry that names no example is itself a failure, so the list stays true.
local doc_examples = require "tests.lua.helpers.doc_examples"

local SRC = os.getenv("EMBER_SOURCE_DIR") or "."

-- key -> why it is not run
local NOT_RUN = {
  ["core/distributed/README.md: local dist = require \"ember.distributed\""] = "needs mpirun (ranks, a model, a data set)",
  ["lua/ember/distributed/init.lua: local dist = require \"ember.distributed\""] = "needs mpirun",
  ["lua/ember/distributed/World.lua: local world = opts.world"] = "needs mpirun",
  ["lua/ember/distributed/DistributedDataParallel.lua: local ddp = dist.DistributedDataParallel(model, {bucket_cap_mb = 25})"] =
    "needs mpirun",
  ["lua/ember/distributed/DistributedSampler.lua: local s = dist.DistributedSampler(ds, {shuffle = true, seed = 0})"] =
    "needs mpirun",
  ["lua/ember/_errors.lua: local error = require(\"ember._errors\").error"] = "a list of signatures, not a program",
  ["lua/ember/generate.lua: local ids = generate.generate(model, prompt, {max_new_tokens=50,"] =
    "a signature: strategy=\"greedy\"|\"sample\" lists the choices",
  ["lua/ember/cli.lua: local opts = cli.parse(arg, {"] = "parses a script's command line (arg)",
  ["lua/ember/models/llama.lua: local Llama = require(\"ember.models\").Llama"] =
    "reads model.safetensors, a Hugging Face checkpoint",
  ["lua/ember/data/fashion_mnist.lua: local x, y = fashion_mnist.load(\"train\")"] = "reads the Fashion-MNIST files",
  ["lua/ember/data/sort_of_clevr.lua: local ds = sort_of_clevr.generate{n_images = 9800, seed = 1}"] =
    "generates 9800 images (slow); idx of a batch",
}

local examples = doc_examples.collect(SRC)

describe("usage examples in the docs run", function()
  local seen = {}
  for _, ex in ipairs(examples) do
    local key = ex.key
    seen[key] = true
    local name = key .. " (" .. ex.file .. ":" .. ex.line .. ")"
    if NOT_RUN[key] then
      pending(name .. " (not run: " .. NOT_RUN[key] .. ")")
    else
      it(name, function() doc_examples.run(ex) end)
    end
  end

  it("finds the examples, and every NOT_RUN entry names one", function()
    assert(#examples >= 40, "only " .. #examples .. " examples found")
    for key in pairs(NOT_RUN) do assert(seen[key], "NOT_RUN names no example: " .. key) end
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
