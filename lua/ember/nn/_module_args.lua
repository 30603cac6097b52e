-- nn/_module_args.lua (internal): the two other ways PyTorch code and Lua
-- code give a constructor its arguments, turned into the one form every
-- `__init` takes (its sizes, then one options table):
--
--   nn.Conv2d(3, 16, 3, 2, 1)                       PyTorch's positional order
--   nn.Conv2d(3, 16, 3, 2, 1, {bias = false})       ... then options by name
--   nn.Conv2d{in_channels = 3, out_channels = 16, kernel_size = 3, stride = 2}
--                                                   one table of names (Lua's idiom)
--   nn.Conv2d(3, 16, 3, {stride = 2, padding = 1})  ember's own form, unchanged
--
-- A class opts in with its PyTorch signature, read with rawget so that a
-- subclass with other arguments (LazyConv2d under Conv2d) does not inherit it:
--
--   Conv2d.SIGNATURE = { sizes = { "in_channels", "out_channels", "kernel_size" },
--     options = { "stride", "padding", "dilation", "groups", "bias", "padding_mode" },
--     aliases = { ... } }           -- optional: other names of a size (nhead = heads)
--
-- `sizes` are the arguments before the options table of the class's
-- `__init`; `options` are PyTorch's positional arguments after them, in
-- PyTorch's order. A positional value may be a list (a tuple: stride
-- {2, 1}); the last argument is the options table when it is a table with
-- names (or empty). An option given both ways or too many arguments is an
-- error naming the class at the user's line (a size left out of the table
-- of names is nil, as left out positionally: __init checks it).
--
-- Every class of torch's takes one, so that no argument is dropped without
-- a word: `options = {}` for one that takes none (nn.Tanh(true) is an
-- error), `closed = true` where nothing else reads the options (nn.ReLU's
-- only one is inplace: {inplace = true, implace = 1} names implace), and
-- `string_option = "reduction"` where a lone string is that option (the
-- losses' nn.MSELoss("sum")). torch's `inplace`, where the class has it, is
-- accepted and ignored (a module's result is a new tensor either way), and
-- must be a boolean (nn.ReLU(5) is an error). `require(this)` gives the
-- function `normalize(cls, ...)`.
local errors = require "ember._errors"

local function is_plain_table(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  -- a tensor is userdata; a module or an ember.Size has a metatable
  return mt == nil
end

-- An options table: a plain table that is not a list (a tuple's {2, 1}).
local function is_options(v) return is_plain_table(v) and v[1] == nil end

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return out
end

-- The options every class checks the same way: torch's inplace a boolean,
-- and, for a closed class, no other name than its SIGNATURE's.
local function check_options(cls, sig, opts)
  if type(opts) ~= "table" then return end
  for k, v in pairs(opts) do
    local known = false
    for _, name in ipairs(sig.options) do known = known or name == k end
    if known and k == "inplace" and type(v) ~= "boolean" then
      errors.raise("%s: inplace must be true or false, got %s (torch's inplace: accepted and ignored, "
        .. "the result is a new tensor either way)", cls.__name, tostring(v))
    end
    if not known and sig.closed then
      errors.raise("%s: unknown option '%s' (options: %s)", cls.__name, tostring(k), table.concat(sig.options, ", "))
    end
  end
end

-- The table-of-names form: sizes by name, everything else an option.
local function from_names(cls, sig, named)
  local opts, out = copy(named), {}
  for i, name in ipairs(sig.sizes) do
    local v = opts[name]
    opts[name] = nil
    for alias, target in pairs(sig.aliases or {}) do
      if target == name and opts[alias] ~= nil then
        if v ~= nil then errors.raise("%s: %s given twice (as %s and %s)", cls.__name, name, name, alias) end
        v, opts[alias] = opts[alias], nil
      end
    end
    out[i] = v -- a missing one is nil, as when left out positionally: __init checks or defaults it
  end
  if #sig.options == 0 and next(opts) ~= nil then -- a class without options: a name it does not take
    errors.raise("%s: unknown argument '%s' (arguments: %s)", cls.__name, tostring(next(opts)),
      table.concat(sig.sizes, ", "))
  end
  out[#sig.sizes + 1] = opts
  check_options(cls, sig, opts)
  return table.unpack(out, 1, #sig.sizes + 1)
end

-- Whether a single table argument names the sizes (not a list that is the
-- first size itself, as LayerNorm's {8, 16}).
local function names_sizes(sig, t)
  if not is_options(t) then return false end
  for _, name in ipairs(sig.sizes) do
    if t[name] ~= nil then return true end
  end
  for alias in pairs(sig.aliases or {}) do
    if t[alias] ~= nil then return true end
  end
  return false
end

-- PyTorch's positional options after the sizes, into the options table.
local function from_positions(cls, sig, n, ...)
  local nsizes = #sig.sizes
  local last = select(n, ...)
  local opts_at = is_options(last) and n or nil
  local opts = opts_at and copy(last) or {}
  local upto = opts_at and n - 1 or n
  for i = nsizes + 1, upto do
    local name = sig.options[i - nsizes]
    if name == nil then
      if #sig.sizes + #sig.options == 0 then errors.no_extra(cls.__name, {}, 1, ...) end
      local names = { table.unpack(sig.sizes) }
      table.move(sig.options, 1, #sig.options, #names + 1, names)
      errors.raise("%s: takes at most %d arguments before the options table (%s), got %d", cls.__name,
        #names, table.concat(names, ", "), upto)
    end
    local v = select(i, ...)
    if v ~= nil then
      if opts[name] ~= nil then
        errors.raise("%s: %s given twice (argument %d and the options table)", cls.__name, name, i)
      end
      opts[name] = v
    end
  end
  check_options(cls, sig, opts)
  local out = table.pack(...)
  out[nsizes + 1] = opts
  return table.unpack(out, 1, nsizes + 1)
end

return function(cls, ...)
  local sig = rawget(cls, "SIGNATURE")
  if not sig then return ... end
  local n, nsizes = select("#", ...), #sig.sizes
  if n == 1 and nsizes == 0 and sig.string_option and type((...)) == "string" then -- nn.MSELoss("sum")
    return { [sig.string_option] = (...) }
  end
  if n == 1 and names_sizes(sig, (...)) then return from_names(cls, sig, (...)) end
  -- ember's own form (sizes, then at most an options table or nothing)
  if n <= nsizes or (n == nsizes + 1 and (select(n, ...) == nil or is_options(select(n, ...)))) then
    local last = n == nsizes + 1 and select(n, ...) or nil
    if last and #sig.options == 0 and next(last) ~= nil then -- a class without options
      errors.raise("%s: unknown option '%s' (it takes none)", cls.__name, tostring(next(last)))
    end
    check_options(cls, sig, last)
    return ...
  end
  return from_positions(cls, sig, n, ...)
end
