-- tests/lua/helpers/files.lua -- files a spec writes and reads: a file's
-- whole content, a file written in one go, whether one exists, and a file
-- cut short at several lengths (a truncated download or checkpoint).
--
--   local files = require "tests.lua.helpers.files"   -- from the source root
--   files.write(dir .. "/v.lua", "return {}")
--   files.each_cut(path, function(n) return { n // 2, 10 } end, function(cut) ... end)
local M = {}

--- The whole content of the file at `path` (bytes as they are).
function M.read(path)
  local f = assert(io.open(path, "rb"))
  local bytes = f:read("a")
  f:close()
  return bytes
end

--- Writes `bytes` to the file at `path`, replacing what it held.
function M.write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

--- Whether a file at `path` can be opened for reading.
function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- fn(cut) for each length in lengths(n) (n: the size of the file at `path`),
-- `cut` a temporary file holding the first that many bytes of it; the
-- temporary file is removed after the last.
function M.each_cut(path, lengths, fn)
  local bytes = M.read(path)
  local cut = os.tmpname()
  for _, keep in ipairs(lengths(#bytes)) do
    M.write(cut, bytes:sub(1, keep))
    fn(cut)
  end
  os.remove(cut)
end

return M
