--- ember.autocast: mixed precision, as torch.autocast("cpu", dtype=torch.bfloat16).
--
--   local model, crit = nn.Linear(4, 3), nn.CrossEntropyLoss()
--   local x, y = ember.randn(8, 4), ember.tensor({1, 2, 3, 1, 2, 3, 1, 2}, {dtype = "int64"})
--   local loss
--   ember.autocast("bfloat16", function() loss = crit(model(x), y) end)   -- a function
--   do local ac <close> = ember.autocast("bfloat16"); loss = crit(model(x), y) end   -- a scope
--   loss:backward()                                                       -- outside the scope
--   print(model.weight.grad.dtype)                                        --> float32
--
-- Inside, matmul, bmm (so nn.Linear) run in bfloat16 and softmax,
-- log_softmax, layer_norm, the losses and sum/mean/var in float32; an
-- elementwise op given bfloat16 and float32 runs in float32. Parameters
-- stay float32 and their gradients arrive in float32 (the casts are
-- differentiable), so an optimizer needs no change; bfloat16 keeps
-- float32's exponent range, so no loss scaling is needed. Call backward()
-- outside the scope, as in PyTorch; called inside, it runs as outside
-- (autocast is off during the pass: its ops take the forward's dtypes). The op lists live in
-- core/src/autocast.c; ember.autocast("bfloat16", false) turns it off
-- inside a scope. The state is per thread and scopes nest.
local core = require "ember.core"

local M = {}

local function scope(dtype, enabled)
  if enabled == nil then enabled = true end
  local ok, was, was_dtype = pcall(core.set_autocast, enabled, dtype)
  if not ok then require("ember._errors").raise("%s", tostring(was)) end -- at the user's line
  local closed = false
  return setmetatable({}, {
    __close = function()
      if not closed then
        closed = true
        core.set_autocast(was, was_dtype)
      end
    end,
    __name = "ember.autocast scope",
  })
end

-- ember.autocast(dtype [, enabled]) -> a scope for `local x <close> = ...`;
-- ember.autocast(dtype, fn, ...) -> fn(...)'s results, run under autocast.
local function autocast(_, dtype, fn, ...)
  if type(dtype) ~= "string" then
    error(("ember.autocast: dtype must be a string such as \"bfloat16\", got %s"):format(type(dtype)), 2)
  end
  local info = core.dtype_info(dtype)
  local raise = require("ember._errors").raise -- at the user's line
  if (info and info.name ~= "bfloat16") or dtype == "float16" or dtype == "half" then
    raise("ember.autocast: dtype %s is not supported: autocast runs products in bfloat16 "
      .. "(ember.autocast(\"bfloat16\", ...))", info and info.name or dtype)
  end
  if not info and (dtype == "cpu" or dtype:match("^cuda")) then
    raise("ember.autocast: takes the dtype, not torch.autocast's device type: ember.autocast(\"bfloat16\", ...), "
      .. "got \"%s\"", dtype)
  end
  if not info then
    raise("ember.autocast: unknown dtype \"%s\"; autocast runs products in bfloat16 (ember.autocast(\"bfloat16\", ...))",
      dtype)
  end
  if type(fn) ~= "function" then return scope(dtype, fn) end
  local ac <close> = scope(dtype, true)
  return fn(...)
end

--- Whether autocast is on in this thread, and its dtype.
-- @treturn boolean on
-- @treturn string|nil the dtype
function M.enabled()
  return core._autocast_state()
end

--- A tensor as autocast's products take it: cast to bfloat16 when autocast
-- is on and it is float32, else itself. With grad mode off (inference,
-- `ember.generate`) a parameter's cast is cached for the rest of the
-- outermost autocast region, as PyTorch caches it, and made again after an
-- in-place change (`copy_`, an optimizer step); with grad mode on it is an
-- ordinary differentiable cast. For modules that make a view of a weight
-- before the product (nn.Linear's transpose), which the products' own casts
-- would not find in the cache.
-- @tparam Tensor t
-- @treturn Tensor
-- @usage
-- local w = ember.randn(3, 4):requires_grad_()
-- ember.autocast("bfloat16", function() ember.no_grad(function()
--   print(ember.autocast.cast(w).dtype)   --> bfloat16
-- end) end)
-- print(ember.autocast.cast(w).dtype)     --> float32
function M.cast(t)
  return core._autocast_cast(t)
end

return setmetatable(M, { __call = autocast })
