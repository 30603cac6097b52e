--- optim.LBFGS(params, {lr=1, max_iter=20, max_eval=max_iter*5//4,
-- tolerance_grad=1e-7, tolerance_change=1e-9, history_size=100,
-- line_search_fn=nil}): torch.optim.LBFGS (limited-memory BFGS, after
-- minFunc), PyTorch's algorithm step for step: `opt:step(closure)` runs up
-- to max_iter iterations, each calling the closure (which zeroes the
-- gradients, computes the loss, calls backward and returns the loss) once,
-- or several times with line_search_fn = "strong_wolfe" (the strong Wolfe
-- conditions, cubic interpolation). The parameters are one group (no
-- per-group options, as PyTorch's); the state (d, t, old_dirs, old_stps,
-- ro, H_diag, prev_flat_grad, prev_loss, n_iter, func_evals: PyTorch's
-- names) is kept as parameter 1's. Returns the closure's first loss.
-- @usage local x = ember.tensor({1.5, -0.5}, {dtype = "float64"}):requires_grad_()
-- local opt = optim.LBFGS({x}, {line_search_fn = "strong_wolfe"})
-- opt:step(function()
--   opt:zero_grad()
--   local loss = ((x - 1) ^ 2):sum() + (x[1] * x[2] - 1) ^ 2 * 0.1
--   loss:backward()
--   return loss
-- end)
-- print(("%.4f %.4f"):format(x:tolist()[1], x:tolist()[2]), opt.state[1].n_iter)   --> 1.0000 1.0000	6
-- @classmod optim.LBFGS
local ember = require "ember.nn._ember"
local core = require "ember.core"
local Optimizer = require "ember.optim.Optimizer"

-- max_eval and line_search_fn are nil-able in PyTorch: false stands for nil here
local LBFGS = Optimizer:extend("LBFGS", {
  lr = 1, max_iter = 20, max_eval = false, tolerance_grad = 1e-7, tolerance_change = 1e-9, history_size = 100,
  line_search_fn = false,
})
LBFGS.POSITIONAL = { "max_iter", "max_eval", "tolerance_grad", "tolerance_change", "history_size", "line_search_fn" }

local function posint(v) return math.type(v) == "integer" and v >= 1 end

--- Checks the group's options; max_eval defaults to max_iter * 5 // 4, as PyTorch's.
function LBFGS:check_group(g)
  Optimizer.check_group(self, g)
  for _, k in ipairs { "max_iter", "history_size" } do
    if not posint(g[k]) then self:_error("%s must be a positive integer, got %s", k, tostring(g[k])) end
  end
  if g.max_eval == false then g.max_eval = g.max_iter * 5 // 4 end
  if not posint(g.max_eval) then self:_error("max_eval must be a positive integer, got %s", tostring(g.max_eval)) end
  for _, k in ipairs { "tolerance_grad", "tolerance_change" } do
    if not Optimizer.in_range(g[k], 0) then self:_error("%s must be a number >= 0, got %s", k, tostring(g[k])) end
  end
  if g.line_search_fn ~= false and g.line_search_fn ~= "strong_wolfe" then
    self:_error("line_search_fn must be nil or \"strong_wolfe\" (the only one PyTorch has), got %s",
      tostring(g.line_search_fn))
  end
end

local ONE_GROUP = "doesn't support per-parameter options (parameter groups), as PyTorch's"

function LBFGS:__init(...)
  Optimizer.__init(self, ...)
  if #self.param_groups ~= 1 then self:_error(ONE_GROUP) end
end

--- Refused: LBFGS has one parameter group, as PyTorch's.
function LBFGS:add_param_group() self:_error(ONE_GROUP) end

-- PyTorch's _cubic_interpolate: the minimiser of the cubic through (x1, f1,
-- g1) and (x2, f2, g2), within bounds (default: between x1 and x2).
local function cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds)
  local lo, hi
  if bounds then
    lo, hi = bounds[1], bounds[2]
  elseif x1 <= x2 then
    lo, hi = x1, x2
  else
    lo, hi = x2, x1
  end
  local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
  local d2_square = d1 ^ 2 - g1 * g2
  if d2_square >= 0 then
    local d2 = math.sqrt(d2_square)
    local min_pos
    if x1 <= x2 then
      min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else
      min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    end
    return math.min(math.max(min_pos, lo), hi)
  end
  return (lo + hi) / 2.
end

local function dot(a, b) return a:dot(b):item() end

-- PyTorch's _strong_wolfe: a step t along d meeting the strong Wolfe
-- conditions (bracketing, then zooming with cubic interpolation).
local function strong_wolfe(obj_func, x, t, d, f, g, gtd)
  local c1, c2, tolerance_change, max_ls = 1e-4, 0.9, 1e-9, 25
  local d_norm = d:abs():max():item()
  local f_new, g_new = obj_func(x, t, d)
  local ls_func_evals = 1
  local gtd_new = dot(g_new, d)
  local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
  local done, ls_iter = false, 0
  local bracket, bracket_f, bracket_g, bracket_gtd
  while ls_iter < max_ls do
    if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev) then
      bracket, bracket_f, bracket_g, bracket_gtd = { t_prev, t }, { f_prev, f_new }, { g_prev, g_new },
        { gtd_prev, gtd_new }
      break
    end
    if math.abs(gtd_new) <= -c2 * gtd then
      bracket, bracket_f, bracket_g = { t }, { f_new }, { g_new }
      done = true
      break
    end
    if gtd_new >= 0 then
      bracket, bracket_f, bracket_g, bracket_gtd = { t_prev, t }, { f_prev, f_new }, { g_prev, g_new },
        { gtd_prev, gtd_new }
      break
    end
    local min_step, max_step = t + 0.01 * (t - t_prev), t * 10
    local tmp = t
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, { min_step, max_step })
    t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
  end
  if ls_iter == max_ls then
    bracket, bracket_f, bracket_g = { 0, t }, { f, f_new }, { g, g_new }
  end
  -- zoom
  local insuf_progress = false
  local low_pos, high_pos = 1, 2
  if not (bracket_f[1] <= bracket_f[#bracket_f]) then low_pos, high_pos = 2, 1 end
  while not done and ls_iter < max_ls do
    if math.abs(bracket[2] - bracket[1]) * d_norm < tolerance_change then break end
    t = cubic_interpolate(bracket[1], bracket_f[1], bracket_gtd[1], bracket[2], bracket_f[2], bracket_gtd[2])
    local bmax, bmin = math.max(bracket[1], bracket[2]), math.min(bracket[1], bracket[2])
    local eps = 0.1 * (bmax - bmin)
    if math.min(bmax - t, t - bmin) < eps then
      if insuf_progress or t >= bmax or t <= bmin then
        if math.abs(t - bmax) < math.abs(t - bmin) then t = bmax - eps else t = bmin + eps end
        insuf_progress = false
      else
        insuf_progress = true
      end
    else
      insuf_progress = false
    end
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
    if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos] then
      bracket[high_pos], bracket_f[high_pos], bracket_g[high_pos], bracket_gtd[high_pos] = t, f_new, g_new, gtd_new
      if bracket_f[1] <= bracket_f[2] then low_pos, high_pos = 1, 2 else low_pos, high_pos = 2, 1 end
    else
      if math.abs(gtd_new) <= -c2 * gtd then
        done = true
      elseif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0 then
        bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
        bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
      end
      bracket[low_pos], bracket_f[low_pos], bracket_g[low_pos], bracket_gtd[low_pos] = t, f_new, g_new, gtd_new
    end
  end
  return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals
end

-- Every gradient flattened into one vector (zeros for a parameter without one).
function LBFGS:_gather_flat_grad()
  local views = {}
  for i, p in ipairs(self.param_groups[1].params) do
    local g = p.grad
    views[i] = g ~= nil and g:reshape(-1) or ember.zeros({ p:numel() }, { dtype = p.dtype, device = p.device })
  end
  return ember.cat(views, 1)
end

-- p += step_size * (p's slice of the flat update), for every parameter.
function LBFGS:_add_grad(step_size, update)
  local offset = 0
  for _, p in ipairs(self.param_groups[1].params) do
    local n = p:numel()
    p:add_(update:narrow(1, offset + 1, n):view(p.shape) * step_size)
    offset = offset + n
  end
end

-- The loss as a number (the closure's return: a number or a 1-element tensor).
function LBFGS:_number(loss)
  if type(loss) == "number" then return loss end
  if core.is_tensor(loss) then return loss:item() end
  self:_error("step: the closure must return the loss (a tensor or a number), got %s", type(loss))
end

--- Runs up to max_iter L-BFGS iterations; `closure` (required) zeroes the
-- gradients, computes the loss, calls backward and returns the loss.
-- @tparam function closure
-- @return the closure's loss before the step
function LBFGS:step(closure)
  if type(closure) ~= "function" then
    self:_error("step needs a closure that zeroes the gradients, computes the loss, calls backward and returns "
      .. "it (PyTorch's LBFGS.step(closure)), got %s", type(closure))
  end
  local function evaluate()
    local prev = ember.set_grad_enabled(true)
    local ok, r = pcall(closure)
    ember.set_grad_enabled(prev)
    if not ok then error(r, 0) end
    return r
  end
  local group = self.param_groups[1]
  local lr, max_iter, max_eval = group.lr, group.max_iter, group.max_eval
  local tolerance_grad, tolerance_change = group.tolerance_grad, group.tolerance_change
  local line_search, history_size = group.line_search_fn, group.history_size
  local state = self.state[1]
  if not state then
    state = { func_evals = 0, n_iter = 0 }
    self.state[1] = state
  end
  local orig_loss = evaluate()
  local loss = self:_number(orig_loss)
  local current_evals = 1
  state.func_evals = state.func_evals + 1
  ember.no_grad(function()
    local flat_grad = self:_gather_flat_grad()
    if flat_grad:abs():max():item() <= tolerance_grad then return end
    local d, t, old_dirs, old_stps = state.d, state.t, state.old_dirs, state.old_stps
    local ro, H_diag, prev_flat_grad, prev_loss = state.ro, state.H_diag, state.prev_flat_grad, state.prev_loss
    local n_iter = 0
    while n_iter < max_iter do
      n_iter = n_iter + 1
      state.n_iter = state.n_iter + 1
      if state.n_iter == 1 then
        d = -flat_grad
        old_dirs, old_stps, ro, H_diag = {}, {}, {}, 1
      else
        local y = flat_grad - prev_flat_grad
        local s = d * t
        local ys = dot(y, s)
        if ys > 1e-10 then
          if #old_dirs == history_size then
            table.remove(old_dirs, 1)
            table.remove(old_stps, 1)
            table.remove(ro, 1)
          end
          old_dirs[#old_dirs + 1], old_stps[#old_stps + 1], ro[#ro + 1] = y, s, 1. / ys
          H_diag = ys / dot(y, y)
        end
        local num_old, al = #old_dirs, {}
        local q = -flat_grad
        for i = num_old, 1, -1 do
          al[i] = dot(old_stps[i], q) * ro[i]
          q:add_(old_dirs[i] * -al[i])
        end
        d = q * H_diag
        for i = 1, num_old do
          local be_i = dot(old_dirs[i], d) * ro[i]
          d:add_(old_stps[i] * (al[i] - be_i))
        end
      end
      if prev_flat_grad == nil then prev_flat_grad = flat_grad:clone() else prev_flat_grad:copy_(flat_grad) end
      prev_loss = loss
      if state.n_iter == 1 then
        t = math.min(1., 1. / flat_grad:abs():sum():item()) * lr
      else
        t = lr
      end
      local gtd = dot(flat_grad, d)
      if gtd > -tolerance_change then break end
      local ls_func_evals, opt_cond = 0, false
      if line_search then
        local x_init = {}
        for i, p in ipairs(group.params) do x_init[i] = p:clone() end
        local function obj_func(x, step, dir)
          self:_add_grad(step, dir)
          local l = self:_number(evaluate())
          local fg = self:_gather_flat_grad()
          for i, p in ipairs(group.params) do p:copy_(x[i]) end
          return l, fg
        end
        loss, flat_grad, t, ls_func_evals = strong_wolfe(obj_func, x_init, t, d, loss, flat_grad, gtd)
        self:_add_grad(t, d)
        opt_cond = flat_grad:abs():max():item() <= tolerance_grad
      else
        self:_add_grad(t, d)
        if n_iter ~= max_iter then
          loss = self:_number(evaluate())
          flat_grad = self:_gather_flat_grad()
          opt_cond = flat_grad:abs():max():item() <= tolerance_grad
          ls_func_evals = 1
        end
      end
      current_evals = current_evals + ls_func_evals
      state.func_evals = state.func_evals + ls_func_evals
      if n_iter == max_iter or current_evals >= max_eval or opt_cond then break end
      if (d * t):abs():max():item() <= tolerance_change then break end
      if math.abs(loss - prev_loss) < tolerance_change then break end
    end
    state.d, state.t, state.old_dirs, state.old_stps = d, t, old_dirs, old_stps
    state.ro, state.H_diag, state.prev_flat_grad, state.prev_loss = ro, H_diag, prev_flat_grad, prev_loss
  end)
  return orig_loss
end

local function copy_state(st, clone)
  local out = {}
  for k, v in pairs(st) do
    if type(v) == "table" then
      local l = {}
      for i, x in ipairs(v) do l[i] = clone and core.is_tensor(x) and x:clone() or x end
      out[k] = l
    elseif clone and core.is_tensor(v) then
      out[k] = v:clone()
    else
      out[k] = v
    end
  end
  return out
end

--- As Optimizer's: {state = {[1] = {d =, old_dirs = {...}, ...}}, param_groups = {...}} (the
-- lists copied, so later steps do not change a saved state).
function LBFGS:state_dict()
  local sd = Optimizer.state_dict(self)
  if sd.state[1] then sd.state[1] = copy_state(sd.state[1], false) end
  return sd
end

--- Restores a state_dict() (tensors and lists copied).
-- @tparam table sd
function LBFGS:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd.state) ~= "table" or type(sd.param_groups) ~= "table"
    or #sd.param_groups ~= 1 then
    self:_error("load_state_dict: expected a table with state and one parameter group")
  end
  for name, v in pairs(sd.param_groups[1]) do
    if name ~= "params" and self.DEFAULTS[name] ~= nil then self.param_groups[1][name] = v end
  end
  self.state = self:_new_state()
  if sd.state[1] then ember.no_grad(function() self.state[1] = copy_state(sd.state[1], true) end) end
  return self
end

return LBFGS
