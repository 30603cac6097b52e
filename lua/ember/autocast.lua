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
-- Inside, matmul, bmm, addmm, baddbmm, conv (so nn.Linear, nn.Conv*) run in
-- bfloat16 and softmax, log_softmax, layer_norm, the losses and sum/mean/var
-- in float32; ember.linalg's factorizations (inv, solve, cholesky, qr, svd,
-- eigh, lstsq, det, ...) run in float32, bfloat16 inputs cast up; the batch,
-- instance and group norms and the pools return their input's dtype (a
-- bfloat16 conv's output stays bfloat16; the norms' statistics are float32);
-- an elementwise op given bfloat16 and float32 runs in float32. Parameters
-- stay float32 and their gradients arrive in float32 (the casts are
-- differentiable), so an optimizer needs no change; bfloat16 keeps
-- float32's exponent range, so no loss scaling is needed. Call backward()
-- outside the scope, as in PyTorch; called inside, it runs as outside
-- (autocast is off during the pass: its ops take the forward's dtypes). The op lists live in
-- core/src/autocast.c; ember.autocast("bfloat16", false) turns it off
-- inside a scope, and ember.autocast("bfloat16", enabled, fn, ...) runs fn
-- with it on or off (torch.autocast's enabled=); fn may be a module
-- (ember.autocast("bfloat16", model, x)); any other second argument
-- is an error. The state is per thread and scopes nest.
--
-- Where torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch 1.13) differs,
-- on purpose: softmax, log_softmax, layer_norm (and RMSNorm), sum, mean,
-- var, std, norm, logsumexp, cosine_similarity, normalize, dist and dot give
-- float32 for bfloat16 here (torch's CUDA lists; its CPU ones keep
-- bfloat16, and its layer_norm refuses bfloat16 beside float32 weights): the
-- range and precision matter there, and the next product casts back. The
-- transposed convs and mv run in bfloat16, as conv and matmul (torch 1.13:
-- float32); prod keeps bfloat16 (torch: float32); the 3-d pools keep their
-- input's dtype as the others (torch: float32); linalg's det, slogdet,
-- lu_factor, solve_triangular and pinv run in float32 where torch refuses
-- bfloat16, matrix_exp gives float32 (torch: bfloat16) and pinv of float32
-- float32 (torch: bfloat16, its product inside); local_response_norm keeps
-- bfloat16 (torch: float32, its avg_pool3d inside); nn.GroupNorm
-- takes a bfloat16 input beside float32 weights (torch: an error); the
-- recurrent layers give float32 for a bfloat16 input (torch: bfloat16).
--
-- ember.autocast("auto", ...) runs in bfloat16 only where it is faster for
-- this model on this CPU: fp32 where the CPU has no bfloat16 products in
-- hardware (ember.cli.auto_precision); elsewhere the first 8 calls at each
-- call site (the line that calls ember.autocast; its caller's for a tail
-- call, `return ember.autocast(...)`), and for each model the function
-- closes over (the nn modules among its upvalues), alternate fp32 and bf16 (one
-- warm-up each, then 3 timed each, from one call's start to the next at
-- that site, so a training step's backward and optimizer step are in the
-- time) and bf16 is kept only when its median is at least 2% faster
-- (ember.cli.precision_calibration, as --precision auto; under
-- ember.distributed the ranks sum their medians, so all keep the same). What it measures
-- and keeps is printed once per call site and model, and
-- ember.autocast.auto_choices() lists it; after that it does not change.
-- @module autocast
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

-- ember.autocast("auto"): one decision per call site, "source:line", and
-- per model the function closes over.
local auto_sites = {}
local module_ids, module_count = setmetatable({}, {__mode = "k"}), 0

-- " (model Sequential#1, crit CrossEntropyLoss#2)": the nn modules among
-- fn's upvalues, each numbered once per process; "" when none.
local function models_of(fn)
  local is_module, names = require("ember.nn.Module").is_module, {}
  if type(fn) ~= "function" then -- a callable table: a module itself (one decision per model)
    if not is_module(fn) then return "" end
    local id = module_ids[fn]
    if not id then module_count = module_count + 1; id = module_count; module_ids[fn] = id end
    return (" (%s#%d)"):format(fn.__name or "Module", id)
  end
  for i = 1, 255 do
    local name, v = debug.getupvalue(fn, i)
    if name == nil then break end
    if is_module(v) then
      local id = module_ids[v]
      if not id then module_count = module_count + 1; id = module_count; module_ids[v] = id end
      names[#names + 1] = ("%s %s#%d"):format(name, v.__name or "Module", id)
    end
  end
  return #names > 0 and " (" .. table.concat(names, ", ") .. ")" or ""
end

-- The precision of this call at `site` under "auto" ("fp32" or "bf16"):
-- the site's calibration's, made at its first call.
local function auto_precision(site)
  local s = auto_sites[site]
  if not s then
    local cli, conf = require "ember.cli", M._auto_conf or {}
    local report = conf.report or require("ember.progress").above
    local label = ('ember.autocast("auto") at %s'):format(site)
    local p, why = cli.auto_precision("cpu", conf.info)
    s = {}
    if p == "fp32" then
      s.choice, s.note = "fp32", ("%s: fp32 (%s)"):format(label, why)
      report(s.note)
    else
      -- under ember.distributed every rank keeps the same (their medians summed)
      local dist = package.loaded["ember.distributed"]
      local ranks = dist and dist.is_initialized() and dist.world_size() > 1
      s.calibration = cli.precision_calibration{clock = conf.clock, label = label,
        report = function(note) report(note) end, sum = ranks and dist.sum_numbers or nil}
      local cal = cli.CALIBRATION
      s.note = ("%s: measuring (%s; the first %d calls here time fp32 against bf16)")
        :format(label, why, 2 * (cal.warmup + cal.steps))
      report(s.note)
    end
    auto_sites[site] = s
  end
  if s.choice then return s.choice end
  local p = s.calibration:next()
  if s.calibration.choice then s.choice, s.note = s.calibration.choice, s.calibration.note end
  return p
end

--- What ember.autocast("auto") chose at each call site so far: a table of
-- "source:line" (followed by " (model Sequential#1)" when the function
-- closes over nn modules: one decision per model) -> {precision = "bf16"
-- or "fp32" (nil while it still measures), note = what it measured and why}.
-- @treturn table
-- @usage
-- local lin = ember.nn.Linear(4, 3)
-- ember.autocast("auto", function() return lin(ember.randn(2, 4)) end)
-- for site, c in pairs(ember.autocast.auto_choices()) do print(site, c.precision, c.note) end
function M.auto_choices()
  local t = {}
  for site, s in pairs(auto_sites) do t[site] = {precision = s.choice, note = s.note} end
  return t
end

-- What follows the dtype: (fn, ...) runs fn (a function, or a callable
-- table such as a module, as ember.profile takes) under autocast; (enabled, fn,
-- ...) runs fn with autocast on or off (torch.autocast's enabled=); (enabled)
-- or nothing is a scope. Returns enabled, fn (nil for a scope) and fn's
-- arguments' start; anything else is refused at the user's line (a scope
-- left open by a misread argument would leave autocast on for good).
local function callable(v)
  if type(v) == "function" then return true end
  local mt = type(v) == "table" and getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end
local function split_args(dtype, a, b)
  if callable(a) then return true, a, 2 end
  if a ~= nil and type(a) ~= "boolean" then
    require("ember._errors").raise("ember.autocast: expected a function or enabled (a boolean) after \"%s\", got %s",
      dtype, type(a))
  end
  if a == nil then return true, nil end
  if callable(b) then return a, b, 3 end
  if b ~= nil then
    require("ember._errors").raise("ember.autocast: expected a function after enabled (ember.autocast(\"%s\", %s, fn)), got %s",
      dtype, tostring(a), type(b))
  end
  return a, nil
end

-- ember.autocast(dtype [, enabled]) -> a scope for `local x <close> = ...`;
-- ember.autocast(dtype [, enabled], fn, ...) -> fn(...)'s results, run under autocast
-- (or without it when enabled is false).
local function autocast(_, dtype, ...)
  if type(dtype) ~= "string" then
    require("ember._errors").raise("ember.autocast: dtype must be a string such as \"bfloat16\", got %s", type(dtype))
  end
  if dtype == "auto" then
    local enabled, fn, at = split_args(dtype, ...)
    if not enabled then
      if not fn then return scope("bfloat16", false) end
      local ac <close> = scope("bfloat16", false)
      return fn(select(at, ...))
    end
    local level, info = 2, debug.getinfo(2, "Sl")
    while info and info.what == "C" do level = level + 1; info = debug.getinfo(level, "Sl") end -- pcall(ember.autocast, ...)
    local site = info and ("%s:%d"):format(info.short_src, info.currentline) or "?"
    local on = auto_precision(site .. (fn and models_of(fn) or "")) == "bf16"
    if not fn then return scope("bfloat16", on) end
    local ac <close> = scope("bfloat16", on)
    return fn(select(at, ...))
  end
  local info = core.dtype_info(dtype)
  local raise = require("ember._errors").raise -- at the user's line
  -- float16 (torch's name too: torch.float16, torch.half) is a dtype ember has no tensors of
  local half = ({ float16 = true, half = true, fp16 = true, f16 = true })[dtype:gsub("^torch%.", "")]
  if (info and info.name ~= "bfloat16") or half then
    raise("ember.autocast: dtype %s is not supported: autocast runs products in bfloat16 "
      .. "(ember.autocast(\"bfloat16\", ...))", info and info.name or half and "float16" or dtype)
  end
  if not info and (dtype == "cpu" or dtype:match("^cuda")) then
    raise("ember.autocast: takes the dtype, not torch.autocast's device type: ember.autocast(\"bfloat16\", ...), "
      .. "got \"%s\"", dtype)
  end
  if not info then
    raise("ember.autocast: unknown dtype \"%s\"; autocast runs products in bfloat16 (ember.autocast(\"bfloat16\", ...)), "
      .. "or in bfloat16 where that is faster (ember.autocast(\"auto\", ...))", dtype)
  end
  local enabled, fn, at = split_args(dtype, ...)
  if not fn then return scope(dtype, enabled) end
  local ac <close> = scope(dtype, enabled)
  return fn(select(at, ...))
end

--- Whether autocast is on in this thread, and its dtype.
-- @treturn boolean on
-- @treturn string|nil the dtype
function M.enabled()
  return core._autocast_state()
end

-- fn(...) as outside autocast, its region and cast cache kept (core's
-- em_autocast_pause; leaving the region would empty the cache): for the
-- parts of an op with their own rule under autocast. ember.linalg runs in
-- float32; the batch, instance and group norms and the 1-d/2-d average
-- pools return their input's dtype (torch's CPU autocast leaves them
-- alone), without the float32 copies of their input that autocast's
-- reductions would make. One C call when autocast is off.
local resume = setmetatable({}, { __close = function() core._autocast_pause(true) end })
function M._outside(fn, ...)
  if not core._autocast_pause(false) then return fn(...) end
  local r <close> = resume
  return fn(...)
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
