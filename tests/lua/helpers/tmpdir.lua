-- tests/lua/helpers/tmpdir.lua -- a fresh, empty temporary folder:
--   local tmpdir = require "tests.lua.helpers.tmpdir"
--   local dir = tmpdir()
return function()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -p '" .. p .. "'"))
  return p
end
