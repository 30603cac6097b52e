--- ember.metrics: a training run's metrics as a CSV file, and their curves
-- as PNG line charts.
--
--   local metrics = require "ember.metrics"
--   local dir = "/tmp"                                  -- "runs/langid", say (it must exist)
--   local log = metrics.new(dir .. "/metrics.csv", {"epoch", "step", "loss", "acc", "test_acc"})
--   log:log{epoch = 1, step = 100, loss = 0.53}      -- absent columns stay empty
--   log:log{epoch = 1, step = 200, loss = 0.41}
--   log:plot(dir .. "/loss.png", {x = "step", y = {"loss"}, title = "training loss"})
--   log:close()
--
-- Every row is written and flushed at once, so a run that is stopped keeps
-- its log. The values are kept in memory too, for the plots.
-- @module metrics
local M = {}
local Log = {}
Log.__index = Log

local function csv_field(v)
  if v == nil then return "" end
  if type(v) == "number" then
    if math.type(v) == "integer" then return tostring(v) end
    return string.format("%.9g", v)
  end
  local s = tostring(v)
  if s:find('[,"\n\r]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- Under mpirun, is this a rank other than 0? Those keep their rows in
-- memory but write no file and no plot, so the ranks do not race on them.
local function other_rank()
  local dist = package.loaded["ember.distributed"]
  return dist ~= nil and dist.is_initialized() and dist.rank() ~= 0
end

local read_csv -- below

-- A resumed run's earlier rows: those of `path` (if it exists) that
-- opts.drop_after = {column = value} keeps (rows past the checkpoint's step
-- are logged again by the resumed run). Returns the kept rows and their
-- lines, or nil when there is no file.
local function earlier_rows(path, columns, drop_after)
  local f = io.open(path, "r")
  if not f then return nil end
  local lines = {}
  for line in f:lines() do lines[#lines + 1] = line end
  f:close()
  if #lines == 0 then return nil end
  local have, rows = read_csv(path)
  if table.concat(have, ",") ~= table.concat(columns, ",") then
    error(("metrics.new: cannot append to %s: its columns are %s, the log's %s"):format(path,
      table.concat(have, ", "), table.concat(columns, ", ")), 3)
  end
  local col, limit = next(drop_after or {})
  local kept, kept_lines = {}, {}
  for i, r in ipairs(rows) do
    if col == nil or not (type(r[col]) == "number" and r[col] > limit) then
      kept[#kept + 1], kept_lines[#kept_lines + 1] = r, lines[i + 1]
    end
  end
  return kept, kept_lines
end

--- path: the CSV file; columns: the list of column names; opts:
-- `{append = true}` keeps the rows a file at `path` already has (a resumed
-- run: its columns must be the same; they are in the plots too), and
-- `drop_after = {step = k}` drops those whose `step` is past k first (what
-- the stopped run logged after its last checkpoint). Without append the
-- file is replaced.
-- @usage local metrics = require "ember.metrics"
-- local path = os.tmpname()   -- "runs/x/metrics.csv", say
-- local log = metrics.new(path, {"step", "loss"})
-- for step = 100, 140, 20 do log:log{step = step, loss = 1 / step} end
-- log:close()                 -- the run stops; its last checkpoint was at step 120
-- log = metrics.new(path, {"step", "loss"}, {append = true, drop_after = {step = 120}})
-- print(#log.rows)            --> 2
-- log:close(); os.remove(path)
function M.new(path, columns, opts)
  if type(columns) ~= "table" or #columns == 0 then
    error("metrics.new: columns must be a non-empty list of names", 2)
  end
  opts = opts or {}
  if type(opts) ~= "table" then error("metrics.new: opts must be a table {append =, drop_after =}, got " .. type(opts), 2) end
  for k in pairs(opts) do
    if k ~= "append" and k ~= "drop_after" then
      error(("metrics.new: unknown option '%s' (append, drop_after)"):format(tostring(k)), 2)
    end
  end
  local known = {}
  for _, c in ipairs(columns) do known[c] = true end
  if opts.drop_after ~= nil then
    local col, v = next(opts.drop_after == nil and {} or opts.drop_after)
    if not opts.append or type(opts.drop_after) ~= "table" or not known[col] or type(v) ~= "number"
        or next(opts.drop_after, col) ~= nil then
      error("metrics.new: drop_after must be {column = number} (one of the columns) and needs append = true", 2)
    end
  end
  local self = setmetatable({path = path, columns = columns, known = known, rows = {}}, Log)
  local kept, lines
  if opts.append then kept, lines = earlier_rows(path, columns, opts.drop_after) end
  self.rows = kept or {}
  if other_rank() then return self end
  -- the header and the kept rows go to a new file that then replaces the
  -- old one (a crash here leaves the old log whole); rows are appended to it
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "w")
  if not f then error("metrics.new: " .. err, 2) end
  local head = {}
  for i, c in ipairs(columns) do head[i] = csv_field(c) end
  f:write(table.concat(head, ","), "\n")
  for _, line in ipairs(lines or {}) do f:write(line, "\n") end
  f:close()
  local ok, rerr = os.rename(tmp, path)
  if not ok then os.remove(tmp); error("metrics.new: " .. tostring(rerr), 2) end
  f, err = io.open(path, "a")
  if not f then error("metrics.new: " .. err, 2) end
  self.file = f
  return self
end

--- Appends one row (a table column -> value). Unknown columns are an error.
-- A one-element tensor (a loss, as torch's add_scalar takes it) is logged as its number.
function Log:log(row)
  local numbers
  for k, v in pairs(row) do
    if not self.known[k] then
      error(("metrics: column '%s' is not one of %s"):format(tostring(k), table.concat(self.columns, ", ")), 2)
    end
    local mt = getmetatable(v)
    if mt ~= nil and mt.__name == "ember.Tensor" then
      if v:numel() ~= 1 then
        error(("metrics: column '%s' is given a tensor of %d elements (a number or a one-element tensor is logged)")
          :format(tostring(k), v:numel()), 2)
      end
      numbers = numbers or {}
      numbers[k] = v:item()
    end
  end
  if numbers then
    local copy = {}
    for k, v in pairs(row) do copy[k] = numbers[k] or v end
    row = copy
  end
  local fields = {}
  for i, c in ipairs(self.columns) do fields[i] = csv_field(row[c]) end
  if self.file then
    self.file:write(table.concat(fields, ","), "\n")
    self.file:flush()
  end
  local copy = {}
  for k, v in pairs(row) do copy[k] = v end
  self.rows[#self.rows + 1] = copy
end

--- The (x, y) pairs of the rows that have both columns, as two lists.
function Log:series(x, y)
  local xs, ys = {}, {}
  for _, r in ipairs(self.rows) do
    if type(r[x]) == "number" and type(r[y]) == "number" then
      xs[#xs + 1], ys[#ys + 1] = r[x], r[y]
    end
  end
  return xs, ys
end

--- Closes the CSV file (the values stay in memory for plots).
function Log:close()
  if self.file then self.file:close() end
  self.file = nil
end

--- Reads a CSV file written by a Log: returns the columns and the rows
-- (numbers where a field parses as one).
function M.read_csv(path)
  local f, err = io.open(path, "r")
  if not f then error("metrics.read_csv: " .. err, 2) end
  return read_csv(path, f)
end

read_csv = function(path, f)
  f = f or assert(io.open(path, "r"))
  local function split(line)
    local out, pos = {}, 1
    while pos <= #line + 1 do
      if line:sub(pos, pos) == '"' then
        local buf, i = {}, pos + 1
        while true do
          local q = line:find('"', i, true)
          if not q then error("metrics.read_csv: unterminated quote in " .. path, 0) end
          buf[#buf + 1] = line:sub(i, q - 1)
          if line:sub(q + 1, q + 1) == '"' then
            buf[#buf + 1] = '"'
            i = q + 2
          else
            pos = q + 2
            break
          end
        end
        out[#out + 1] = table.concat(buf)
      else
        local c = line:find(",", pos, true) or (#line + 1)
        out[#out + 1] = line:sub(pos, c - 1)
        pos = c + 1
      end
    end
    return out
  end
  local columns = split(f:read("l") or "")
  local rows = {}
  for line in f:lines() do
    local fields, row = split(line), {}
    for i, c in ipairs(columns) do
      local v = fields[i]
      if v ~= nil and v ~= "" then row[c] = tonumber(v) or v end
    end
    rows[#rows + 1] = row
  end
  f:close()
  return columns, rows
end

--- Writes a PNG line chart. spec: {title=, xlabel=, ylabel=, series =
-- {{name=, x = {...}, y = {...}}, ...}}. Returns true, or false and why
-- (ember built without the cairo plotting binding).
function M.plot_lines(path, spec)
  if other_rank() then return false, "only rank 0 plots" end
  local ember = require "ember"
  if not ember.plot_lines then
    return false, "ember was built without cairo: no PNG plots (install libcairo2-dev and rebuild)"
  end
  ember.plot_lines(path, spec)
  return true
end

--- Plots columns opts.y (a name or a list) against opts.x as one PNG.
function Log:plot(path, opts)
  local ys = type(opts.y) == "table" and opts.y or {opts.y}
  local series = {}
  for _, y in ipairs(ys) do
    local xs, vs = self:series(opts.x, y)
    if #xs > 0 then series[#series + 1] = {name = y, x = xs, y = vs} end
  end
  if #series == 0 then return false, "no rows with " .. opts.x .. " and " .. table.concat(ys, "/") end
  return M.plot_lines(path, {title = opts.title, xlabel = opts.xlabel or opts.x,
                             ylabel = opts.ylabel or table.concat(ys, ", "), series = series,
                             ymin = opts.ymin, ymax = opts.ymax})
end

-- Running means of named quantities: training metrics per epoch (for the
-- progress bar) and per logging window (for the CSV), say.
--   local metrics, loss, n = require "ember.metrics", 0.41, 32
--   local win = metrics.Means()
--   win:add("loss", loss * n, n); win:mean("loss"); win:reset()
local Means = {}
Means.__index = Means

--- Running means of named values: `local m = metrics.Means(); m:add("loss", 0.5); m:mean("loss")`.
function M.Means() return setmetatable({sum = {}, count = {}}, Means) end

--- Adds `sum` over `count` items (count 1 when nil).
function Means:add(name, sum, count)
  self.sum[name] = (self.sum[name] or 0) + sum
  self.count[name] = (self.count[name] or 0) + (count or 1)
end

--- The mean so far (nil when nothing was added).
function Means:mean(name)
  local c = self.count[name]
  if not c or c == 0 then return nil end
  return self.sum[name] / c
end

--- Forgets all sums and counts.
function Means:reset()
  self.sum, self.count = {}, {}
end

--- Under mpirun: the sums and counts over every rank (in place), so the
-- means are the whole job's. The same names must have been added on every
-- rank. Without MPI nothing changes.
function Means:reduce()
  local dist = package.loaded["ember.distributed"]
  if not (dist and dist.is_initialized() and dist.world_size() > 1) then return self end
  local names = {}
  for k in pairs(self.sum) do names[#names + 1] = k end
  table.sort(names)
  local flat = {}
  for _, k in ipairs(names) do flat[#flat + 1] = self.sum[k]; flat[#flat + 1] = self.count[k] end
  local r = table.pack(dist.sum_numbers(table.unpack(flat)))
  for i, k in ipairs(names) do self.sum[k], self.count[k] = r[2 * i - 1], r[2 * i] end
  return self
end

M.Log = Log
return M
