-- tests/lua/helpers/shell.lua -- shell commands from a spec: a command's
-- output and exit status, a string quoted for the shell, whether programs
-- are installed.
--
--   local shell = require "tests.lua.helpers.shell"   -- from the source root
--   local out, rc = shell.run("cc -o " .. shell.quote(path) .. " x.c")
--   if not shell.have("cc", "pkg-config") then pending("no C compiler") end
local M = {}

--- The output (stdout and stderr) of the shell command `cmd`, and its exit status.
function M.run(cmd)
  local p = assert(io.popen("(" .. cmd .. ") 2>&1; echo \"rc=$?\""))
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return (out:gsub("rc=%d+%s*$", "")), rc
end

--- s in single quotes, as one word of a shell command (its own quotes kept).
function M.quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

--- Whether every program named is on PATH.
function M.have(...)
  local checks = {}
  for i, name in ipairs { ... } do checks[i] = "command -v " .. name .. " >/dev/null 2>&1" end
  return os.execute(table.concat(checks, " && ")) == true
end

return M
