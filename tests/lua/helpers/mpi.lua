-- tests/lua/helpers/mpi.lua -- a script on 2 ranks under mpirun, launched
-- as the MPI tests are (tests/distributed/run_mpi.sh); specs skip what
-- needs it where ready() is false.
--
--   local mpi = require "tests.lua.helpers.mpi"   -- from the source root
--   if not mpi.ready() then pending("no mpirun or no MPI module") return end
--   local out = mpi.run(script, "dtype", 4)
local M = {}

local build = os.getenv("EMBER_BUILD_DIR") or "build"

--- Whether this build can run ember.distributed on ranks (what run_mpi.sh
-- checks): mpirun on PATH and the build's MPI module.
function M.ready()
  local f = io.open(build .. "/lua/ember/distributed_mpi.so", "r")
  if f then f:close() end
  return f ~= nil and os.execute("command -v mpirun >/dev/null 2>&1") == true
end

--- The output (stdout and stderr of both ranks) of the ember script
-- `script` run with the arguments `...` on 2 ranks, each collective
-- given up after 60 seconds (EMBER_DIST_TIMEOUT).
function M.run(script, ...)
  local args = {}
  for i = 1, select("#", ...) do args[i] = tostring((select(i, ...))) end
  local p = assert(io.popen(("EMBER_DIST_TIMEOUT=60 bash tests/distributed/run_mpi.sh %s/bin/ember 2 %s %s 2>&1")
    :format(build, script, table.concat(args, " "))))
  local out = p:read("a")
  p:close()
  return out
end

return M
