-- Runs a Lua chunk in a fresh `ember` process: what the CPU backend reads
-- once when it loads (OpenBLAS's core, the EMBER_* variables) differs per
-- process, so such a spec starts one per case.
local shell = require "tests.lua.helpers.shell"

local M = {}

local build = os.getenv("EMBER_BUILD_DIR") or "build"

--- The output (stdout and stderr) of `chunk` run by the ember program, and
-- its exit status. opts (all optional): env, a shell prefix such as
-- "A=1 B=2" to set; unset, names of variables to remove; plugins = true,
-- the build's own plugins only and one OpenMP thread (as specs are run);
-- seconds, a time limit (past it the status is timeout's 124).
function M.output(chunk, opts)
  opts = opts or {}
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(chunk)
  f:close()
  local u = {}
  for _, name in ipairs(opts.unset or {}) do u[#u + 1] = "-u " .. name end
  local plugins = opts.plugins and ("EMBER_PLUGIN_PATH='%s/plugins' EMBER_PLUGIN_PATH_ONLY=1 OMP_NUM_THREADS=1"):format(build) or ""
  local limit = opts.seconds and ("timeout %d"):format(opts.seconds) or ""
  local out, rc = shell.run(("env %s %s %s %s '%s/bin/ember' '%s'"):format(table.concat(u, " "), plugins,
    opts.env or "", limit, build, script))
  os.remove(script)
  return out, rc
end

--- The output (stdout and stderr) of `chunk` run by the ember program, with
-- the variables in `unset` removed and `env` (a shell prefix such as
-- "A=1 B=2") set; an error when the process failed.
function M.run(chunk, env, unset)
  local out, rc = M.output(chunk, { env = env, unset = unset })
  if rc ~= 0 then error("the child ember failed:\n" .. out, 2) end
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
