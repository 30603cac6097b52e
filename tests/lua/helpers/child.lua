-- Runs a Lua chunk in a fresh `ember` process: what the CPU backend reads
-- once when it loads (OpenBLAS's core, the EMBER_* variables) differs per
-- process, so such a spec starts one per case.
local M = {}

local build = os.getenv("EMBER_BUILD_DIR") or "build"

--- The output (stdout and stderr) of `chunk` run by the ember program, with
-- the variables in `unset` removed and `env` (a shell prefix such as
-- "A=1 B=2") set; an error when the process failed.
function M.run(chunk, env, unset)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(chunk)
  f:close()
  local u = {}
  for _, name in ipairs(unset or {}) do u[#u + 1] = "-u " .. name end
  local cmd = ("env %s %s '%s/bin/ember' '%s' 2>&1"):format(table.concat(u, " "), env or "", build, script)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  os.remove(script)
  if not ok then error("the child ember failed:\n" .. out, 2) end
  return out
end

--- The whole text of a file written at `path`, which is then removed.
function M.take_file(path)
  local f = assert(io.open(path))
  local text = f:read("a")
  f:close()
  os.remove(path)
  return text
end

return M
