--- ember.profiler: where a step's time goes, as torch.profiler shows it.
--
--   local model = nn.Linear(64, 64)
--   local function step() local l = model(ember.randn(32, 64)):sum(); l:backward(); return l end
--   local loss
--   local prof = ember.profile(function() loss = step() end)   -- a function
--   print(prof)                                                -- the sorted table
--   prof:export_chrome_trace("/tmp/trace.json")                -- open in ui.perfetto.dev
--
--   do local p <close> = ember.profile() ... end                -- a scope (ember.profiler.start())
--   local r <close> = ember.profiler.range("data")             -- a named span of your own
--
-- Every backend call an op makes is recorded (forward and backward), with
-- its bytes, its FLOPs for matmul and attention, and what computed it (the
-- library and instruction set `ember.cpu_info()` names; for each product
-- the one the backend's rule sent it to -- oneDNN, OpenBLAS's sgemm or
-- sgemv and its core, ember's small-product loops -- each a row of its own
-- in the table); an attention
-- variant plugin's forward, its own code, is a span ("attention linear");
-- the backward of
-- each autograd node is a span ("matmul backward") around its kernels, so
-- self time is a span's time less its children's. The recording lives in
-- core/src/profiler.c; when no profile runs, an op pays one branch.
-- Only one profile runs at a time (a second start names where the first
-- began); a running profile no one holds any more (`ember.profile()` at
-- the prompt) is stopped when collected, and a later start collects it. Recording costs about 0.06 us per span
-- (a tiny op 0.31 -> 0.36 us on one core); the seed classifier's training
-- step (B64 L64) makes about 150 spans in 26 ms (190 in 19 ms under
-- autocast), so well under 1%: on against off measures within the noise,
-- +-1.5% (`ember scripts/bench/precision.lua --profile` measures it per case).
-- @module profiler
local core = require "ember.core"

local M = {}

local raise = require("ember._errors").raise -- at the user's line

-- Counts the profiles started here: a range closes its span only in the
-- run that opened it (one left open past its profile, or opened before it
-- started, must not close a span of the next run).
local run_id, running_id = 0, nil

-- The running Profile (weakly held: one dropped while running is stopped
-- by its __gc) and where it was started, for the error of a second start.
local current = setmetatable({}, { __mode = "v" })
local current_site

local Profile = {}
Profile.__index = Profile
Profile.__name = "ember.Profile"

-- "file:line" of the first caller outside ember's Lua files and C.
local LIBRARY = debug.getinfo(1, "S").source:match("^(@.*[/\\])profiler%.lua$")
local function user_site()
  for level = 2, 40 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.what ~= "C" and info.currentline > 0
        and not (LIBRARY and info.source:sub(1, #LIBRARY) == LIBRARY) then
      return ("%s:%d"):format(info.short_src, info.currentline)
    end
  end
  return "?"
end

--- Starts a profile; returns it, to close (`<close>`, or `prof:stop()`).
-- Every op's FLOPs, bytes and what computed it are always recorded, so the
-- one option, torch.profiler's `with_flops`, changes nothing; others (torch's
-- record_shapes, profile_memory, with_stack) are refused, not ignored.
-- @tparam[opt] table opts `{with_flops = true}`
-- @treturn Profile
function M.start(opts)
  require("ember.nn.Module").check_options("ember.profiler.start", opts, { "with_flops" })
  if core._profiler_enabled() and running_id then
    -- (an error otherwise) the running one may be dropped but not yet
    -- collected: a full cycle runs its __gc, which stops it
    collectgarbage()
  end
  if core._profiler_enabled() and current.prof then
    raise("ember.profiler.start: a profile started at %s is still running; profiles do not nest: "
      .. "stop it first (prof:stop(), or end its `local prof <close> = ember.profile()` scope)", current_site)
  end
  local ok, err = pcall(core._profiler_start)
  if not ok then raise("%s", tostring(err)) end
  run_id = run_id + 1
  running_id = run_id
  local prof = setmetatable({ running = true, run = run_id }, Profile)
  current.prof, current_site = prof, user_site()
  return prof
end

--- Stops the profile (once; later calls do nothing) and keeps its events.
-- @treturn Profile self
function Profile:stop()
  if self.running then
    self.running = false
    running_id = nil
    current.prof, current_site = nil, nil
    core._profiler_stop()
    self.events, self.dropped = core._profiler_events()
  end
  return self
end

Profile.__close = Profile.stop

-- A running profile no one can reach any more (`ember.profile()` typed at
-- the prompt, a local without <close>) is stopped when collected, so that
-- it does not record for ever and block every later profile.
function Profile:__gc()
  if self.running and self.run == running_id then
    self.running = false
    running_id = nil
    pcall(core._profiler_stop)
  end
end

--- Runs `fn(...)` under a new profile, which stops even when fn raises (the
-- error then goes on, after the profiler stopped). Without a function (or
-- with `start`'s options table) it is `start`: a scope, as torch's
-- `with torch.profiler.profile() as prof:` reads
-- `local prof <close> = ember.profile()`.
-- @tparam[opt] function fn a function, or a callable table (a module)
-- @return the Profile, then fn's results
function M.profile(fn, ...)
  local mt = getmetatable(fn)
  if fn == nil or (type(fn) == "table" and not (type(mt) == "table" and mt.__call)) then return M.start(fn) end
  if type(fn) ~= "function" and not (type(mt) == "table" and mt.__call) then
    raise("ember.profile: expected a function (or nothing: a scope), got %s", type(fn))
  end
  -- a to-be-closed profile, not pcall: an error keeps its traceback
  -- through fn's frames, and the profile stops before it goes on
  local prof <close> = M.start()
  return prof, fn(...)
end

--- Opens a span named `name` that ends when the returned value closes
-- (`local r <close> = ember.profiler.range("data")`); nothing when no profile runs.
-- Spans nest per thread, so ranges close innermost first, as `<close>`
-- does; a range held open across a coroutine's yield takes in what runs
-- meanwhile, and closing it closes the thread's innermost span.
-- @string name
-- @return a value to close
function M.range(name)
  if type(name) ~= "string" and type(name) ~= "number" then
    raise("ember.profiler.range: name must be a string, got %s", type(name))
  end
  local run = running_id
  if run then core._profiler_push(tostring(name)) end
  return setmetatable({}, { __close = function()
    if run and run == running_id then core._profiler_pop() end
    run = nil
  end, __name = "ember.profiler range" })
end

--- torch.profiler.record_function's name for `range`:
-- `local r <close> = ember.profiler.record_function("data")`.
-- @string name
-- @return a value to close
function M.record_function(name) return M.range(name) end

--- Whether a profile is recording.
-- @treturn boolean
function M.enabled() return core._profiler_enabled() end

local function events(self, op)
  if self.running then
    raise("ember.Profile:%s: the profile is still running; stop the profile first (prof:stop(), or end its "
      .. "`local prof <close> = ember.profile()` scope)", op)
  end
  return self.events
end

-- The columns a table sorts by, and PyTorch's names for them
-- (key_averages().table(sort_by = "self_cpu_time_total", ...)).
local SORT_KEYS = {
  self = "self", total = "total", avg = "avg", calls = "calls", bytes = "bytes", flops = "flops",
  self_cpu_time_total = "self", cpu_time_total = "total", self_cuda_time_total = "self",
  cuda_time_total = "total", self_device_time_total = "self", device_time_total = "total", count = "calls",
  cpu_time = "avg", cuda_time = "avg", device_time = "avg",
}

-- Checks a stats/table options table: known keys (a list; nn.Module's
-- check_options names an unknown one), a known sort column.
local function check_opts(op, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then raise("Profile:%s: options must be a table, got %s", op, type(opts)) end
  require("ember.nn.Module").check_options("Profile:" .. op, opts, known)
  if opts.sort_by ~= nil and not SORT_KEYS[opts.sort_by] then
    local names = {}
    for n in pairs(SORT_KEYS) do names[#names + 1] = n end
    table.sort(names)
    raise("Profile:%s: sort_by must be one of %s, got %s", op, table.concat(names, ", "), tostring(opts.sort_by))
  end
  if opts.row_limit ~= nil and math.type(opts.row_limit) ~= "integer" then
    raise("Profile:%s: row_limit must be an integer (-1: every row), got %s", op, tostring(opts.row_limit))
  end
  return opts
end

--- The events summed by name, phase, device and what computed them (a
-- product oneDNN ran and one OpenBLAS ran are two rows): a list of `{name, phase
-- ("forward" or "backward"), kind, device, calls, total, self, avg (total
-- per call; the times in microseconds), bytes, flops, impl}`,
-- sorted by `sort_by` ("self" by default; "total", "avg", "calls", "bytes", "flops";
-- PyTorch's names "self_cpu_time_total", "cpu_time_total", "cpu_time" (the
-- average), "count" work too).
-- An unknown option or sort key is an error.
-- @tparam[opt] table opts `{sort_by = "self"}`
-- @treturn table
function Profile:stats(opts)
  opts = check_opts("stats", opts, { "sort_by" })
  local ev = events(self, "stats")
  local sort_by = SORT_KEYS[opts.sort_by or "self"]
  local child = {}
  for _, e in ipairs(ev) do
    if e.parent > 0 then child[e.parent] = (child[e.parent] or 0) + e.dur end
  end
  local rows, by = {}, {}
  for i, e in ipairs(ev) do
    local phase = e.backward and "backward" or "forward"
    local key = e.name .. "\0" .. phase .. "\0" .. (e.device or "") .. "\0" .. (e.impl or "")
    local r = by[key]
    if not r then
      r = { name = e.name, phase = phase, kind = e.kind, device = e.device, calls = 0, total = 0,
            self = 0, bytes = 0, flops = 0, impl = e.impl }
      by[key] = r
      rows[#rows + 1] = r
    end
    r.calls = r.calls + 1
    r.total = r.total + e.dur
    r.self = r.self + e.dur - (child[i] or 0)
    r.bytes = r.bytes + e.bytes
    r.flops = r.flops + e.flops
  end
  for _, r in ipairs(rows) do r.avg = r.total / r.calls end
  table.sort(rows, function(a, b)
    if a[sort_by] ~= b[sort_by] then return a[sort_by] > b[sort_by] end
    return a.name < b.name
  end)
  return rows
end

--- The wall time the profile's top-level spans cover, in microseconds.
-- @treturn number
function Profile:total()
  local t = 0
  for _, e in ipairs(events(self, "total")) do
    if e.parent == 0 then t = t + e.dur end
  end
  return t
end

local function human_bytes(b)
  if b >= 2 ^ 30 then return ("%.1f GB"):format(b / 2 ^ 30) end
  if b >= 2 ^ 20 then return ("%.1f MB"):format(b / 2 ^ 20) end
  if b >= 2 ^ 10 then return ("%.1f KB"):format(b / 2 ^ 10) end
  return ("%d B"):format(b)
end

--- The table `print(prof)` shows: one row per op and phase, sorted by self
-- time, with calls, total, average and self milliseconds, self's share, bytes,
-- GFLOP/s where FLOPs are known, and what computed it.
-- @tparam[opt] table opts `{sort_by = "self", row_limit = 30}` (sort_by as
-- `stats`; row_limit = -1 shows every row, as torch's)
-- @treturn string
function Profile:table(opts)
  opts = check_opts("table", opts, { "sort_by", "row_limit" })
  events(self, "table")
  local rows = self:stats({ sort_by = opts.sort_by })
  local total = 0
  for _, r in ipairs(rows) do total = total + r.self end
  local limit = opts.row_limit or 30
  if limit < 0 then limit = #rows end
  local out = {
    ("%-26s %-8s %7s %10s %9s %10s %6s %10s %8s  %s"):format("name", "phase", "calls", "total ms",
      "avg ms", "self ms", "self%", "bytes", "GFLOP/s", "computed by"),
  }
  out[2] = ("-"):rep(#out[1] + 20)
  for i, r in ipairs(rows) do
    if i > limit then
      out[#out + 1] = ("... %d more rows"):format(#rows - limit)
      break
    end
    local gflops = r.flops > 0 and r.total > 0 and ("%.1f"):format(r.flops / r.total * 1e-3) or ""
    local impl = r.impl or ""
    local name = r.name:gsub("%c", " ") -- a newline in a range's name would break the row
    if r.device and r.device ~= "cpu" then name = ("%s [%s]"):format(name, r.device) end
    if #impl > 60 then impl = impl:sub(1, 57) .. "..." end
    out[#out + 1] = ("%-26s %-8s %7d %10.3f %9.3f %10.3f %5.1f%% %10s %8s  %s"):format(
      #name > 26 and name:sub(1, 23) .. "..." or name, r.phase, r.calls, r.total / 1e3, r.avg / 1e3,
      r.self / 1e3, total > 0 and 100 * r.self / total or 0, human_bytes(r.bytes), gflops, impl)
  end
  out[#out + 1] = ("self time in all: %.3f ms over %d spans%s"):format(total / 1e3, #events(self, "table"),
    (self.dropped or 0) > 0
      and (", %d dropped past the buffer's limit or nested too deep"):format(self.dropped) or "")
  return table.concat(out, "\n")
end

--- The profile itself, so that torch.profiler's chain reads as written
-- there: `prof:key_averages():table{sort_by = "cpu_time_total", row_limit = 10}`
-- (ember's rows are already averaged by name, phase and device). torch's
-- group_by_input_shape and group_by_stack_n are refused: no shapes or
-- stacks are recorded.
-- @treturn Profile self
function Profile:key_averages(...)
  if select("#", ...) > 0 then
    local o = ...
    local what = type(o) == "table" and next(o) and ("option '" .. tostring(next(o)) .. "'") or type(o)
    raise("Profile:key_averages: ember records no input shapes or stacks, so it groups by name, phase "
      .. "and device only (takes no options), got %s", what)
  end
  return self
end

function Profile:__tostring()
  if self.running then return "ember.Profile (running)" end
  return self:table()
end

-- A Lua string as JSON text: the core's cJSON writer (core._json_encode),
-- the one JSON escaping rule of the library.
-- JSON text is UTF-8: a name that is not (a range named from bytes) has
-- each invalid byte replaced by U+FFFD, as a browser decodes it, so the
-- trace still loads.
local function utf8_text(s)
  if utf8.len(s) then return s end
  local out, i = {}, 1
  while i <= #s do
    local n, bad = utf8.len(s, i)
    if n then out[#out + 1] = s:sub(i); break end
    out[#out + 1] = s:sub(i, bad - 1) .. "\u{FFFD}"
    i = bad + 1
  end
  return table.concat(out)
end

local function json_string(s) return core._json_encode(utf8_text(s)) end

--- Writes the events as a Chrome trace (the JSON Trace Event Format):
-- open it in https://ui.perfetto.dev or chrome://tracing. Each span is a
-- complete event ("ph": "X") with its bytes, FLOPs and what computed it.
-- @string path
function Profile:export_chrome_trace(path)
  local ev = events(self, "export_chrome_trace")
  if type(path) ~= "string" then
    raise("ember.Profile:export_chrome_trace: path must be a string, got %s", type(path))
  end
  local f, err = io.open(path, "w")
  if f then
    -- written in pieces of 4096 spans (a long profile's text is hundreds of
    -- MB); a failed write stops there, and a full disk that only shows at
    -- close (a buffered write) is reported too; the file is closed either way
    local ok, out = true, { '{"displayTimeUnit": "ms", "traceEvents": [\n',
      '{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "ember"}}' }
    -- names, libraries and devices repeat: each is encoded once
    local quoted = setmetatable({}, { __index = function(t, k)
      local v = json_string(k)
      t[k] = v
      return v
    end })
    for i, e in ipairs(ev) do
      local args = ('"phase": "%s", "bytes": %d'):format(e.backward and "backward" or "forward", e.bytes)
      if e.flops > 0 then args = args .. (', "flops": %.0f'):format(e.flops) end
      if e.impl then args = args .. ', "computed_by": ' .. quoted[e.impl] end
      if e.device then args = args .. ', "device": ' .. quoted[e.device] end
      out[#out + 1] = (',\n{"name": %s, "cat": "%s", "ph": "X", "ts": %.3f, "dur": %.3f, "pid": 1, "tid": %d, "args": {%s}}')
        :format(quoted[e.name], e.kind, e.ts, e.dur, e.tid, args)
      if i % 4096 == 0 then
        ok, err = f:write(table.concat(out))
        out = {}
        if not ok then break end
      end
    end
    out[#out + 1] = "\n]}\n"
    if ok then ok, err = f:write(table.concat(out)) end
    local closed, cerr = f:close()
    if ok and not closed then ok, err = false, cerr end
    if ok then return end
  end
  err = tostring(err)
  if err:sub(1, #path + 1) ~= path .. ":" then err = path .. ": " .. err end -- write and close omit it
  raise("ember.Profile:export_chrome_trace: %s", err)
end

return M
