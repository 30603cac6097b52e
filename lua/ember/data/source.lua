--- ember.data.source: opening the Debian-packaged data sets, with an error
-- that says which package to install when a file is missing.
-- @module data.source
local error = require("ember._errors").error -- raises at the user's line
local M = {}

--- Errors "<what>: cannot read <path>; install it with: apt-get install -y <pkg>".
function M.missing(what, path, pkg)
  error(("%s: cannot read %s; install the Debian package %s (apt-get install -y %s)")
        :format(what, path, pkg, pkg), 0)
end

--- Checks that path is readable, else the error above.
function M.require_file(what, path, pkg)
  local f = io.open(path, "rb")
  if not f then M.missing(what, path, pkg) end
  f:close()
  return path
end

--- The whole file as a string.
function M.read(what, path, pkg)
  local f = io.open(path, "rb")
  if not f then M.missing(what, path, pkg) end
  local s = f:read("a")
  f:close()
  return s
end

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
M.shell_quote = shell_quote

--- The output of a command (a list of words, quoted here) as a string;
-- errors when it fails.
function M.command_output(what, argv)
  local q = {}
  for i, a in ipairs(argv) do q[i] = shell_quote(a) end
  local cmd = table.concat(q, " ")
  local p = io.popen(cmd .. " 2>/dev/null", "r")
  if not p then error(("%s: cannot run %s"):format(what, cmd), 0) end
  local s = p:read("a")
  local ok, _, code = p:close()
  if not ok then error(("%s: %s failed (exit %s)"):format(what, cmd, tostring(code)), 0) end
  return s
end

--- A gzip'd file, decompressed with gzip(1).
function M.read_gz(what, path, pkg)
  M.require_file(what, path, pkg)
  return M.command_output(what, {"gzip", "-dc", path})
end

return M
