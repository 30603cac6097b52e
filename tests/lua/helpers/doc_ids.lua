-- tests/lua/helpers/doc_ids.lua -- per-position document ids for the
-- "document" attention variant (plugins/flex/document.lua):
--   doc_ids(B, L, lens) -> int64 [B, L], each row documents of the given
--   lengths in turn (the list repeats), ids counting from 1.
--   local doc_ids = require "tests.lua.helpers.doc_ids"   -- from the source root
local ember = require "ember"

return function(B, L, lens)
  local rows = {}
  for b = 1, B do
    local r, id, left, li = {}, 1, lens[1], 1
    for i = 1, L do
      if left == 0 then li = li % #lens + 1; left = lens[li]; id = id + 1 end
      r[i] = id
      left = left - 1
    end
    rows[b] = r
  end
  return ember.tensor(rows, { dtype = "int64" })
end
