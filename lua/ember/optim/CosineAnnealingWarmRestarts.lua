--- optim.CosineAnnealingWarmRestarts(optimizer, T_0 [, T_mult = 1 [, eta_min = 0]]), or
-- optim.CosineAnnealingWarmRestarts(optimizer, {T_0 =, T_mult =, eta_min =}):
-- torch.optim.lr_scheduler.CosineAnnealingWarmRestarts (SGDR): a half cosine
-- from the base lr down towards eta_min (an lr) over T_i steps, then a
-- restart at the base lr; T_i is T_0, then T_0 * T_mult, T_0 * T_mult^2, ...
--   lr = eta_min + (base - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2
-- `sched:step()` advances one step; `sched:step(epoch)` jumps to an epoch,
-- which may be fractional (`step(epoch + i / iters)` within an epoch), as
-- PyTorch's.
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.CosineAnnealingWarmRestarts(opt, {T_0 = 10, T_mult = 2, eta_min = 1e-4})
-- @classmod optim.CosineAnnealingWarmRestarts
local Scheduler = require "ember.optim.Scheduler"

local CAWR = Scheduler:extend("CosineAnnealingWarmRestarts")

function CAWR:__init(optimizer, ...)
  local o = self:_torch_opts({ "T_0", "T_mult", "eta_min" }, ...)
  local t0, m, e = o.T_0, o.T_mult or 1, o.eta_min or 0
  if math.type(t0) ~= "integer" or t0 < 1 then self:_error("T_0 must be a positive integer, got %s", tostring(t0)) end
  if math.type(m) ~= "integer" or m < 1 then self:_error("T_mult must be an integer >= 1, got %s", tostring(m)) end
  if type(e) ~= "number" or not (e >= 0) then self:_error("eta_min must be a number >= 0, got %s", tostring(e)) end
  self.T_0, self.T_mult, self.eta_min = t0, m, e
  self.T_i, self.T_cur = t0, o.last_epoch or -1 -- PyTorch's: resuming at last_epoch starts T_cur there
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- eta_min + (base - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2, at the current T_cur and T_i
-- @number base the group's base lr
function CAWR:lr_at(base)
  return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
end

--- Cosine position T_cur / T_i (the share of the current cycle done)
-- @tparam integer s ignored: the position is the scheduler's state
function CAWR:factor(s) return self.T_cur / self.T_i end

--- One step, or to `epoch` (a number >= 0, may be fractional), as PyTorch's step(epoch).
-- @number[opt] epoch
function CAWR:step(epoch)
  self._step_count = (self._step_count or 0) + 1
  if epoch == nil and self.last_step < 0 then epoch = 0 end -- the initial step
  if epoch == nil then
    self.last_step = self.last_step + 1
    self.T_cur = self.T_cur + 1
    if self.T_cur >= self.T_i then
      self.T_cur = self.T_cur - self.T_i
      self.T_i = self.T_i * self.T_mult
    end
  else
    if type(epoch) ~= "number" or not (epoch >= 0 and epoch < math.huge) then
      self:_error("step(epoch): epoch must be a number >= 0, got %s", tostring(epoch))
    end
    local t0, m = self.T_0, self.T_mult
    if epoch >= t0 then
      if m == 1 then
        self.T_cur, self.T_i = epoch % t0, t0
      else
        -- Python's int(math.log(x, T_mult)): log(x) / log(T_mult), truncated
        local n = math.floor(math.log(epoch / t0 * (m - 1) + 1) / math.log(m))
        local mn = 1
        for _ = 1, n do mn = mn * m end
        self.T_cur = epoch - t0 * (mn - 1) / (m - 1)
        self.T_i = t0 * mn
      end
    else
      self.T_i, self.T_cur = t0, epoch
    end
    self.last_step = math.floor(epoch)
  end
  self:_apply()
  self:_record(epoch)
end

function CAWR:_restart() self:step(0) end

--- {last_step=, base_lrs=, T_cur=, T_i=}, for checkpoints.
function CAWR:state_dict()
  local sd = Scheduler.state_dict(self)
  sd.T_cur, sd.T_i = self.T_cur, self.T_i
  return sd
end

--- Restores a state_dict(), the position in the current cycle included.
-- @tparam table sd
function CAWR:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd.T_cur) ~= "number" or math.type(sd.T_i) ~= "integer" then
    self:_error("load_state_dict: expected {last_step =, base_lrs =, T_cur = number, T_i = integer}")
  end
  Scheduler.load_state_dict(self, sd)
  self.T_cur, self.T_i = sd.T_cur, sd.T_i
  self:_apply()
  return self
end

return CAWR
