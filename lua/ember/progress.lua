--- ember.progress: a progress bar for training loops.
--
--   local progress = require "ember.progress"
--   local n = 1000
--   local bar = progress.new{total = n, label = "epoch 1", unit = "samples"}
--   for k = 100, n, 100 do bar:update(k, {loss = 0.41, acc = 0.87}) end   -- k items done so far
--   bar:finish()
--
-- On a terminal it redraws one line: a bar, the counts, the given metrics,
-- throughput and ETA. When output is not a terminal it prints a plain log
-- line every `log_every` seconds instead, so logs stay readable.
-- @module progress
local M = {}
M.__index = M

-- Is stdout a terminal? os.execute's child inherits our stdout (io.popen's
-- would see its own pipe and always say no).
local function isatty()
  local ok = os.execute("test -t 1")
  return ok == true
end

local tty
local function term_is_tty()
  if tty == nil then tty = os.getenv("EMBER_PROGRESS_PLAIN") == nil and isatty() end
  return tty
end

local function fmt_time(s)
  if s ~= s or s == math.huge then return "--:--" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return string.format("%d:%02d:%02d", s // 3600, s % 3600 // 60, s % 60) end
  return string.format("%02d:%02d", s // 60, s % 60)
end

--- A progress bar: `progress.new{total=, label="", unit="it", log_every=5, initial=0}` (total is required).
-- `initial` (tqdm's): the count already done when the bar starts -- a run
-- resumed at step k -- so the rate and the ETA count only what this run does.
-- @tparam table opts
function M.new(opts)
  local self = setmetatable({}, M)
  if type(opts) ~= "table" or type(opts.total) ~= "number" then
    error("progress.new: total is required (a number): progress.new{total = n}", 2)
  end
  local initial = opts.initial or 0
  if type(initial) ~= "number" or initial < 0 then
    error("progress.new: initial must be a number >= 0, got " .. tostring(opts.initial), 2)
  end
  self.total = opts.total
  self.initial = initial
  self.label = opts.label or ""
  self.unit = opts.unit or "it"
  self.width = opts.width or 24
  self.log_every = opts.log_every or 5
  self.start = M.now()
  self.last_log = self.start
  self.done = initial
  self.metrics = {}
  -- under mpirun only rank 0 draws (opts.all_ranks: every rank does)
  local dist = package.loaded["ember.distributed"]
  self.silent = not opts.all_ranks and dist ~= nil and dist.is_initialized() and dist.rank() ~= 0
  return self
end

--- Wall-clock seconds with sub-second resolution where the platform allows.
function M.now()
  local ok_core, core = pcall(require, "ember.core")
  if ok_core and core.clock then return core.clock() end
  local ok, p = pcall(io.popen, "date +%s.%N")
  if ok and p then
    local s = tonumber(p:read("l"))
    p:close()
    if s then return s end
  end
  return os.time()
end

-- Three significant digits: 1234, 56.7, 0.891 (a slow step rate stays readable).
local function fmt_rate(r)
  if r >= 100 then return string.format("%.0f", r) end
  if r >= 10 then return string.format("%.1f", r) end
  return string.format("%.2g", r)
end

local function metrics_str(metrics, order)
  local parts = {}
  for _, k in ipairs(order) do
    local v = metrics[k]
    local mt = getmetatable(v)
    if mt ~= nil and mt.__name == "ember.Tensor" and v:numel() == 1 then v = v:item() end -- a loss as a tensor
    if type(v) == "number" then
      parts[#parts + 1] = string.format("%s %.4g", k, v)
    elseif v ~= nil then
      parts[#parts + 1] = string.format("%s %s", k, tostring(v))
    end
  end
  return table.concat(parts, "  ")
end

--- The bar's current text (what is drawn or logged).
function M:line()
  local now = M.now()
  local elapsed = math.max(now - self.start, 1e-9)
  local rate = (self.done - self.initial) / elapsed
  local eta = rate > 0 and (self.total - self.done) / rate or math.huge
  local frac = self.total > 0 and math.min(self.done / self.total, 1) or 1
  local filled = math.floor(frac * self.width + 0.5)
  local bar = string.rep("#", filled) .. string.rep(".", self.width - filled)
  return string.format("%s [%s] %d/%d  %s  %s %s/s  eta %s", self.label, bar, self.done,
    self.total, metrics_str(self.metrics, self.order or {}), fmt_rate(rate), self.unit, fmt_time(eta)), now
end

--- metrics: a table of name -> number; the order of first appearance is kept.
function M:update(done, metrics)
  self.done = done
  self.order = self.order or {}
  for k, v in pairs(metrics or {}) do
    if self.metrics[k] == nil then self.order[#self.order + 1] = k end
    self.metrics[k] = v
  end
  table.sort(self.order)
  if self.silent then return end
  local text, now = self:line()
  if term_is_tty() then
    io.write("\r", text, "\27[K")
    io.flush()
  elseif now - self.last_log >= self.log_every then
    self.last_log = now
    print(text)
  end
end

--- Prints a line of text above the bar (plain: just the line).
function M:print(text)
  if self.silent then return end
  if term_is_tty() then
    io.write("\r\27[K", text, "\n", (self:line()), "\27[K")
    io.flush()
  else
    print(text)
  end
end

--- Prints a line of text where a bar may be drawing (one with no bar at
-- hand: `cli`'s precision calibration): on a terminal the bar's line is
-- cleared first, and the bar redraws at its next update; under mpirun
-- only rank 0 prints, as bars do.
-- @string text
function M.above(text)
  local dist = package.loaded["ember.distributed"]
  if dist ~= nil and dist.is_initialized() and dist.rank() ~= 0 then return end
  if term_is_tty() then
    io.write("\r\27[K", text, "\n")
    io.flush()
  else
    print(text)
  end
end

--- Draws the final state and ends the line.
function M:finish()
  if self.silent then return M.now() - self.start end
  local text = self:line()
  if term_is_tty() then io.write("\r", text, "\27[K\n") else print(text) end
  io.flush()
  return M.now() - self.start
end

return M
