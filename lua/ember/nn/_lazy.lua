-- nn/_lazy.lua (internal): torch.nn's lazy modules (LazyLinear, LazyConv1d/2d/3d,
-- LazyBatchNorm1d/2d/3d): the target module's first size (in_features, in_channels,
-- num_features) taken from the first input -- or from a state dict being loaded -- and then the
-- module becomes the target, as PyTorch's cls_to_become. Until then it has no parameters.
local errors = require "ember._errors"
local Module = require "ember.nn.Module"

local M = {}

-- A lazy class `name` for `Target`: Lazy(...) keeps the arguments after the first size and checks
-- them by building a Target with probe(...) as that size (so its errors name the target's class);
-- the first forward(x) calls Target.__init(self, from_input(x), ...) and Target's forward;
-- load_state_dict(sd) does the same with from_state(sd, ...) when that gives a size. It prints
-- as PyTorch's, the size 0.
-- The lazy convolutions' probe size: their groups option (the in_channels that any groups
-- divides), 1 when it is not a positive integer, so that the target's own check names groups.
function M.groups(_, _, opts)
  local g = type(opts) == "table" and opts.groups or 1
  return (math.type(g) == "integer" and g > 0) and g or 1
end

function M.class(name, Target, probe, from_input, from_state)
  local Lazy = Module:extend(name)
  -- PyTorch's positional order and the table of names (nn/_module_args.lua): the target's, less
  -- its first size (nn.LazyConv2d(16, 3, 2, 1) is nn.Conv2d(in, 16, 3, 2, 1)); the arguments are
  -- kept as the target's __init takes them (sizes, then one options table)
  local sig = rawget(Target, "SIGNATURE")
  if sig then
    Lazy.SIGNATURE = { sizes = { table.unpack(sig.sizes, 2) }, options = sig.options, aliases = sig.aliases }
  end

  function Lazy:__init(...)
    rawset(self, "_lazy_args", table.pack(...))
    -- the probe's printing with the first size 0, PyTorch's text for a lazy module; its draws
    -- are undone (a lazy module draws nothing until it has its sizes, as PyTorch's)
    local ember = require "ember"
    local state = ember.get_rng_state()
    rawset(self, "_lazy_repr", (Target(probe(...), ...):extra_repr():gsub("%d+", "0", 1)))
    ember.set_rng_state(state)
  end

  local function materialize(self, n)
    local args = rawget(self, "_lazy_args")
    rawset(self, "_lazy_args", nil)
    rawset(self, "_lazy_repr", nil)
    setmetatable(self, Target)
    Target.__init(self, n, table.unpack(args, 1, args.n))
  end

  -- The first call sizes the module from x, then it is the target's forward.
  -- @tparam Tensor x
  function Lazy:forward(x, ...)
    Module.check_float_input(name .. ".forward", x)
    materialize(self, from_input(name .. ".forward", x))
    return self:forward(x, ...)
  end

  -- Loads a state dict, first sizing the module from it (PyTorch's lazy load).
  -- @tparam table sd
  -- @bool[opt=true] strict
  function Lazy:load_state_dict(sd, strict)
    local args = rawget(self, "_lazy_args")
    local n = type(sd) == "table" and from_state(name .. ".load_state_dict", sd, table.unpack(args, 1, args.n))
    if n then
      materialize(self, n)
      return self:load_state_dict(sd, strict)
    end
    return Module.load_state_dict(self, sd, strict)
  end

  -- PyTorch's printing: the target's, its first size 0.
  function Lazy:extra_repr() return rawget(self, "_lazy_repr") end

  -- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
  Lazy.forward = errors.wrap(Lazy.forward)
  return Lazy
end

-- A channels-first input's channel count: x [N, C, *] (nd spatial dims) or unbatched [C, *].
function M.channels(nd)
  return function(who, x)
    if x.ndim ~= nd + 1 and x.ndim ~= nd + 2 then
      errors.raise("%s: expected an input with %d or %d dims ([N, C, ...] or [C, ...]), got %s", who, nd + 1, nd + 2,
        errors.shape_str(x))
    end
    return x.shape[x.ndim - nd]
  end
end

-- A norm's num_features from a state dict: the length of its running_mean or weight.
function M.norm_features(_, sd)
  local t = sd.running_mean or sd.weight
  if Module.is_tensor(t) and t.ndim == 1 then return t.shape[1] end
end

-- A batch norm's channel count: dim 2 of x [N, C, ...].
function M.batch_channels(who, x)
  if x.ndim < 2 then errors.raise("%s: expected an input [N, C, ...], got %s", who, errors.shape_str(x)) end
  return x.shape[2]
end

-- LazyBatchNorm<nd>d for Target (nn.BatchNorm1d/2d/3d).
function M.batch_norm(name, Target)
  return M.class(name, Target, function() return 1 end, M.batch_channels, M.norm_features)
end

-- LazyInstanceNorm<nd>d for Target: PyTorch 1.13's lazy instance norms default to affine and
-- track_running_stats true (nn.InstanceNorm*'s own are false).
function M.instance_norm(name, Target, nd)
  local Lazy = M.class(name, Target, function() return 1 end, M.channels(nd), M.norm_features)
  local init = Lazy.__init
  function Lazy:__init(opts)
    if opts ~= nil and type(opts) ~= "table" then return init(self, opts) end -- the target refuses it
    local o = { affine = true, track_running_stats = true }
    for k, v in pairs(opts or {}) do o[k] = v end
    return init(self, o)
  end
  return Lazy
end

return M
