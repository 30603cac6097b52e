--- optim.CosineAnnealingLR(optimizer, T_max [, eta_min = 0]), or
-- optim.CosineAnnealingLR(optimizer, {T_max =, eta_min =}):
-- torch.optim.lr_scheduler.CosineAnnealingLR (its closed form, without
-- restarts): each group's lr goes from its base lr down to eta_min (an lr,
-- not a ratio) over T_max steps along a half cosine,
--   lr(s) = eta_min + (base - eta_min) * (1 + cos(pi * s / T_max)) / 2
-- and back up after T_max, as PyTorch's. For warm-up first, WarmupCosine.
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.CosineAnnealingLR(opt, 100, 1e-5)
-- @classmod optim.CosineAnnealingLR
local Scheduler = require "ember.optim.Scheduler"

local CosineAnnealingLR = Scheduler:extend("CosineAnnealingLR")

function CosineAnnealingLR:__init(optimizer, ...)
  local o = self:_torch_opts({ "T_max", "eta_min" }, ...)
  if math.type(o.T_max) ~= "integer" or o.T_max < 1 then
    self:_error("T_max must be a positive integer, got %s", tostring(o.T_max))
  end
  local e = o.eta_min or 0
  if type(e) ~= "number" or not (e >= 0) then self:_error("eta_min must be a number >= 0, got %s", tostring(e)) end
  self.T_max, self.eta_min = o.T_max, e
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- (1 + cos(pi * s / T_max)) / 2: the share of (base - eta_min) left at step s
-- @tparam integer s the step
function CosineAnnealingLR:factor(s) return (1 + math.cos(math.pi * s / self.T_max)) / 2 end

--- eta_min + (base - eta_min) * factor(s): the floor is an lr, so per group
-- @number base the group's base lr
-- @tparam integer s the step
function CosineAnnealingLR:lr_at(base, s) return self.eta_min + (base - self.eta_min) * self:factor(s) end

--- PyTorch's chainable form: (lr - eta_min) times the cosine's change, plus eta_min.
-- @number lr the group's lr
-- @tparam integer s the step
-- @tparam integer i the group
function CosineAnnealingLR:chain(lr, s, i)
  local T, e, base = self.T_max, self.eta_min, self.base_lrs[i]
  if s == 0 then return lr end
  -- these two use the base lr: a group added later is left out, as PyTorch's zip leaves it
  if self._step_count == 1 then return base and self:lr_at(base, s) end -- resumed (last_epoch)
  if (s - 1 - T) % (2 * T) == 0 then return base and lr + (base - e) * (1 - math.cos(math.pi / T)) / 2 end
  return (1 + math.cos(math.pi * s / T)) / (1 + math.cos(math.pi * (s - 1) / T)) * (lr - e) + e
end

return CosineAnnealingLR
