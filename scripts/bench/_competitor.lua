-- _competitor.lua -- one CPU-bound competing process for the contention
-- benchmarks (contention.lua, contention_demos.lua): a shell busy loop in
-- its own process. They dofile it; it is not a program (script_help_spec
-- passes over _*.lua). Returns start() -> pid; os.execute("kill " .. pid)
-- stops it.
local function start()
  local p = io.popen("sh -c 'echo $$; exec sh -c \"while :; do :; done\"' & ", "r")
  local pid = tonumber(p:read("l"))
  p:close()
  return pid
end

return start
