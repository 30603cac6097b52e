-- ember tests/lua/helpers/run_doc_examples.lua KEY...: runs the doc examples
-- with these keys (as doc_examples.lua makes them), in order, in this
-- process: for the examples that need one of their own (doc_examples_spec
-- starts it under mpirun, or in a folder holding the files an example reads).
-- Prints "ok - KEY" for each; the first failure prints "not ok - KEY" and
-- why, and exits 1 (so mpirun stops the other ranks rather than leave them
-- waiting in a collective). EMBER_SOURCE_DIR: the source folder.
local src = os.getenv("EMBER_SOURCE_DIR") or "."
package.path = src .. "/?.lua;" .. package.path
local doc_examples = require "tests.lua.helpers.doc_examples"

local by_key = {}
for _, ex in ipairs(doc_examples.collect(src)) do by_key[ex.key] = ex end
for _, key in ipairs(arg) do
  local ex = by_key[key]
  local ok, err = pcall(function()
    assert(ex, "no example has this key")
    doc_examples.run(ex)
  end)
  if not ok then
    print(("not ok - %s\n%s"):format(key, tostring(err)))
    io.stdout:flush()
    os.exit(1)
  end
  print("ok - " .. key)
end
