-- nn/_backward_hooks.lua (internal): Module:register_full_backward_hook's
-- mechanism, as PyTorch's torch.utils.hooks.BackwardHook. A call of a
-- module with such hooks, in grad mode, passes its tensor arguments that
-- require grad through one identity ember.Function (their flat values
-- concatenated, each argument a view of that), and its tensor results the
-- same way. The outputs' identity runs first in the backward and records
-- grad_output; the inputs' identity gets every grad_input at once, calls
-- the hooks (a table a hook returns replaces grad_input) and hands the
-- gradients on. With no input that requires grad the hooks run at the
-- outputs' identity with grad_input all nil, as PyTorch's.
local ember = require "ember.nn._ember"
local errors = require "ember._errors"

local M = {}

local function is_tensor(v) return ember.is_tensor(v) end

-- The positions of `list` (a table.pack) holding tensors that require grad.
local function grad_positions(list)
  local pos = {}
  for i = 1, list.n do
    local v = list[i]
    if is_tensor(v) and v.requires_grad then pos[#pos + 1] = i end
  end
  return pos
end

-- One identity over the tensors at `pos` of `list`: a copy of list whose
-- tensors there are views of one concatenation. on_grad(grads) gets their
-- gradients in order (each view's share of the concatenation's gradient:
-- zeros for one the loss does not use) and returns those to pass on (nil:
-- zeros).
local function identity(who, list, pos, on_grad)
  local first = list[pos[1]]
  local flats, sizes, shapes = {}, {}, {}
  for k, i in ipairs(pos) do
    local t = list[i]
    if t.dtype ~= first.dtype or t.device ~= first.device then
      errors.raise("%s: a full backward hook needs the tensors that require grad of one dtype and device; "
        .. "tensor %d is %s on %s, tensor 1 %s on %s", who, i, t.dtype, t.device, first.dtype, first.device)
    end
    flats[k], sizes[k], shapes[k] = t, t:numel(), t.shape
  end
  local fn = ember.Function {
    name = "BackwardHookFunction",
    forward = function(_, ...)
      local ts = { ... }
      for k = 1, #ts do ts[k] = ts[k]:reshape(-1) end
      return ember.cat(ts, 1)
    end,
    backward = function(_, g)
      local grads, off = {}, 0
      for k = 1, #sizes do
        grads[k] = g:narrow(1, off + 1, sizes[k]):view(shapes[k])
        off = off + sizes[k]
      end
      grads = on_grad(grads)
      for k = 1, #sizes do
        local gk = grads[k]
        if gk == nil then grads[k] = ember.zeros(shapes[k], { dtype = first.dtype, device = first.device }) end
      end
      return table.unpack(grads, 1, #sizes)
    end,
  }
  local joined = fn(table.unpack(flats))
  local out = table.pack(table.unpack(list, 1, list.n))
  local off = 0
  for k, i in ipairs(pos) do
    out[i] = joined:narrow(1, off + 1, sizes[k]):view(shapes[k])
    off = off + sizes[k]
  end
  return out
end

-- Calls the hooks; a table one returns replaces grad_input (checked).
local function run_hooks(module, hooks, grad_input, n_in, grad_output)
  for _, h in ipairs(hooks) do
    local r = h(module, grad_input, grad_output)
    if r ~= nil then
      if type(r) ~= "table" or is_tensor(r) then
        errors.raise("%s: a full backward hook returned %s; return nil or a table of gradients, one per input",
          module.__name, is_tensor(r) and "a tensor" or type(r))
      end
      grad_input = r
    end
  end
  return grad_input
end

-- The arguments (a table.pack) with the tensors that require grad passed
-- through the inputs' identity; the state wrap_outputs takes.
function M.wrap_inputs(module, hooks, args)
  local state = { module = module, hooks = { table.unpack(hooks) }, n_in = args.n, in_pos = grad_positions(args) }
  if #state.in_pos == 0 then return args, state end
  local function on_grad(grads)
    local grad_input = {}
    for k, i in ipairs(state.in_pos) do grad_input[i] = grads[k] end
    grad_input = run_hooks(module, state.hooks, grad_input, args.n, state.grad_output or {})
    local out = {}
    for k, i in ipairs(state.in_pos) do out[k] = grad_input[i] end
    return out
  end
  return identity(module.__name .. " (full backward hook)", args, state.in_pos, on_grad), state
end

-- The results (a table.pack) with their tensors that require grad passed
-- through the outputs' identity.
function M.wrap_outputs(state, out)
  local pos = grad_positions(out)
  if #pos == 0 then return out end
  local function on_grad(grads)
    local grad_output = {}
    for k, i in ipairs(pos) do grad_output[i] = grads[k] end
    state.grad_output = grad_output
    if #state.in_pos == 0 then run_hooks(state.module, state.hooks, {}, state.n_in, grad_output) end
    return grads
  end
  return identity(state.module.__name .. " (full backward hook)", out, pos, on_grad)
end

return M
