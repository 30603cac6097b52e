--- Errors that point at the user's line.
--
-- A check deep inside ember (a module's forward called through `__call`,
-- a layer calling its attention) would report its own file with
-- `error(msg, 2)`. `errors.raise` instead reports the first caller that is
-- not one of ember's Lua files, which is the line the user wrote.
-- @module ember.errors
local errors = {}

-- ember's Lua files live under one folder: the folder of this file.
local root = debug.getinfo(1, "S").source:match("^@(.*/)[^/]*$") or ""

local function is_library(source)
  return source:sub(1, 1) == "@" and source:sub(2, #root + 1) == root
end

--- Raises `msg` (formatted with `...` if given) at the user's line.
-- @string msg the message, naming the operation first ("Linear.forward: ...")
-- @param ... values for `msg:format(...)`
function errors.raise(msg, ...)
  if select("#", ...) > 0 then msg = msg:format(...) end
  for level = 2, 64 do
    local info = debug.getinfo(level, "S")
    if not info then break end
    if info.what ~= "C" and not is_library(info.source) then error(msg, level) end
  end
  error(msg, 2)
end

return errors
