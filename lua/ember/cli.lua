-- ember.cli: the command-line options every example script shares.
--
--   local opts = cli.parse(arg, {
--     script = "scripts/langid.lua",
--     about = "Language identification of single words.",
--     defaults = {epochs = 4, lr = 2e-3, batch = 64},        -- the shared options' defaults
--     options = {                                          -- the script's own
--       {"layers", 2, "encoder layers"},
--       {"predict", nil, "predict the language of one word", type = "string"},
--     },
--   })
--
-- Shared: --epochs --lr --batch --attention --seed --threads --device
-- --precision --smoke --out --help. A script runs its forward pass and loss
-- through cli.autocast(opts, fn, ...), which honours --precision. Values are given as "--name value" or "--name=value";
-- a boolean option is a flag ("--smoke") or takes true/false. An option's
-- type comes from its default (or `type` when the default is nil). After
-- parsing, cli.parse seeds the global generator and sets the thread count.
local M = {}

local SHARED = {
  {"epochs", 1, "passes over the training data"},
  {"lr", 1e-3, "learning rate"},
  {"batch", 64, "batch size"},
  {"attention", "standard", "attention variant (a plugin name, see ember.plugins())"},
  {"attention_options", nil, "the variant's options, e.g. window=8,causal_window=true", type = "string"},
  {"seed", 0, "random seed (data split, initialisation, shuffling, dropout)"},
  {"threads", nil, "CPU threads (default: the backend's choice)", type = "number"},
  {"device", "cpu", "device: cpu, cuda, cuda:1 ..."},
  {"smoke", false, "a few quick steps on a small subset; fails unless the loss fell"},
  {"precision", "fp32", "fp32, or bf16: products in bfloat16 under ember.autocast, float32 weights"},
  {"max_steps", nil, "stop after this many training steps (for timing runs)", type = "number"},
  {"out", nil, "folder for the checkpoint, metrics CSV and plots (default runs/<script>)", type = "string"},
}

local function kind_of(spec)
  return spec.type or (spec[2] ~= nil and type(spec[2])) or "string"
end

local function usage(conf, specs)
  local lines = {("usage: ember %s [options]"):format(conf.script or "script.lua")}
  if conf.about then lines[#lines + 1] = conf.about end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "options:"
  for _, s in ipairs(specs) do
    local k = kind_of(s)
    local arg = k == "boolean" and "" or (k == "number" and " N" or " S")
    local def = s[2] ~= nil and (" (default %s)"):format(tostring(s[2])) or ""
    lines[#lines + 1] = ("  --%-14s %s%s"):format(s[1] .. arg, s[3] or "", def)
  end
  lines[#lines + 1] = ("  --%-14s %s"):format("help", "print this help and exit")
  return table.concat(lines, "\n")
end
M.usage = usage

-- The merged option list: shared options (defaults replaced from
-- conf.defaults) then the script's own.
local function all_specs(conf)
  local specs, index = {}, {}
  for _, s in ipairs(SHARED) do
    local copy = {s[1], s[2], s[3], type = s.type}
    if conf.defaults and conf.defaults[s[1]] ~= nil then copy[2] = conf.defaults[s[1]] end
    specs[#specs + 1] = copy
    index[s[1]] = copy
  end
  for _, s in ipairs(conf.options or {}) do
    if index[s[1]] then error(("cli: option --%s is already a shared option"):format(s[1]), 3) end
    specs[#specs + 1] = s
    index[s[1]] = s
  end
  return specs, index
end

local function convert(name, kind, value)
  if kind == "number" then
    local n = tonumber(value)
    if not n then error(("option --%s needs a number, got '%s' (see --help)"):format(name, value), 0) end
    return n
  elseif kind == "boolean" then
    if value == "true" or value == "1" or value == "yes" then return true end
    if value == "false" or value == "0" or value == "no" then return false end
    error(("option --%s is true or false, got '%s' (see --help)"):format(name, value), 0)
  end
  return value
end

-- "a=1,b=true,c=x" -> {a = 1, b = true, c = "x"} (nil -> {}).
function M.parse_kv(text)
  local t = {}
  if text == nil or text == "" then return t end
  for item in text:gmatch("[^,]+") do
    local k, v = item:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if not k then error(("option --attention_options: expected name=value, got '%s'"):format(item), 0) end
    if v == "true" then t[k] = true
    elseif v == "false" then t[k] = false
    else t[k] = math.tointeger(tonumber(v)) or tonumber(v) or v end
  end
  return t
end

-- Parses argv (a list of strings) without side effects. Returns the
-- options table, or nil and the usage text when --help was given.
function M.parse_only(argv, conf)
  conf = conf or {}
  local specs, index = all_specs(conf)
  local o = {}
  for _, s in ipairs(specs) do o[s[1]] = s[2] end
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--help" or a == "-h" then return nil, usage(conf, specs) end
    local name, value = a:match("^%-%-([%w_%-]+)=(.*)$")
    if not name then name = a:match("^%-%-([%w_%-]+)$") end
    if not name then
      error(("unexpected argument '%s' (options start with --; see --help)"):format(a), 0)
    end
    name = name:gsub("%-", "_")
    local s = index[name]
    if not s then error(("unknown option --%s (see --help)"):format(name), 0) end
    local kind = kind_of(s)
    if value == nil then
      if kind == "boolean" and (argv[i + 1] == nil or argv[i + 1]:sub(1, 2) == "--"
                                or not (argv[i + 1] == "true" or argv[i + 1] == "false")) then
        value = "true"
      else
        value = argv[i + 1]
        if value == nil then error(("option --%s needs a value (see --help)"):format(name), 0) end
        i = i + 1
      end
    end
    o[name] = convert(name, kind, value)
    i = i + 1
  end
  for _, n in ipairs({"epochs", "batch"}) do
    if o[n] ~= nil and (o[n] < 1 or o[n] % 1 ~= 0) then
      error(("option --%s must be a positive integer, got %s"):format(n, tostring(o[n])), 0)
    end
  end
  if o.precision ~= "fp32" and o.precision ~= "bf16" then
    error(("option --precision must be fp32 or bf16, got %s"):format(tostring(o.precision)), 0)
  end
  o.attention_opts = M.parse_kv(o.attention_options)
  if not o.out then
    local base = (conf.script or "script"):match("([^/]+)%.lua$") or "script"
    o.out = "runs/" .. base
  end
  return o
end

-- Parses argv; prints the help and exits on --help; prints the error and
-- exits with status 2 on a bad option. Then seeds ember's generator, sets
-- the thread count and checks the device.
function M.parse(argv, conf)
  local ok, o, help = pcall(M.parse_only, argv or {}, conf)
  if not ok then
    io.stderr:write(("%s: %s\n"):format(conf and conf.script or "script", o))
    os.exit(2, true)
  end
  if not o then
    print(help)
    os.exit(0, true)
  end
  local ember = require "ember"
  ember.manual_seed(math.tointeger(o.seed) or error("option --seed must be an integer", 0))
  if o.threads then ember.set_num_threads(math.tointeger(o.threads)) end
  if o.device ~= "cpu" then
    -- a tiny tensor proves the device exists and its backend loaded
    local ok, err = pcall(ember.zeros, {1}, {device = o.device})
    if not ok then
      io.stderr:write(("%s: device '%s' is not usable here: %s (see ember.plugins())\n")
                      :format(conf.script or "script", o.device, tostring(err)))
      os.exit(2, true)
    end
  end
  return o
end

-- The dropout on attention weights for opts.attention: opts.dropout, or 0
-- (said once) when the variant cannot drop attention weights (e.g. linear).
function M.attention_dropout(o)
  local ember = require "ember"
  if (o.dropout or 0) == 0 or not ember.attention_variants then return o.dropout or 0 end
  for _, v in ipairs(ember.attention_variants()) do
    if v.name == o.attention and v.caps and v.caps.dropout == false then
      print(("note: attention '%s' has no dropout on attention weights; using 0 there"):format(o.attention))
      return 0
    end
  end
  return o.dropout
end

-- For --smoke runs: fails unless the mean of the last few losses is below
-- the mean of the first few. Prints both.
function M.check_smoke(losses, k)
  k = math.min(k or 5, #losses // 2)
  if k < 1 then error("smoke: too few steps to compare the loss", 0) end
  local first, last = 0, 0
  for i = 1, k do first, last = first + losses[i] / k, last + losses[#losses - i + 1] / k end
  print(("smoke: loss %.4f -> %.4f over %d steps"):format(first, last, #losses))
  if not (last < first) then error(("smoke: the loss did not fall (%.4f -> %.4f)"):format(first, last), 0) end
  return first, last
end

-- The options named in keys as checkpoint metadata (strings), so that a
-- later run can rebuild the same model before loading its weights.
function M.config_metadata(o, keys)
  local meta = {}
  for _, k in ipairs(keys) do
    if o[k] ~= nil then meta["config." .. k] = tostring(o[k]) end
  end
  return meta
end

-- Copies the config.* metadata of a checkpoint back into options o.
function M.apply_metadata(o, meta, keys)
  for _, k in ipairs(keys) do
    local v = meta["config." .. k]
    if v ~= nil then
      if type(o[k]) == "number" then o[k] = tonumber(v) or o[k]
      elseif type(o[k]) == "boolean" then o[k] = v == "true"
      else o[k] = v end
    end
  end
  return o
end

-- A stopwatch over some functions (evaluation, say), so that the time a
-- script reports as training leaves them out:
--   local ev = cli.stopwatch(); evaluate = ev.wrap(evaluate); ... ev.total
function M.stopwatch()
  local clock = require("ember").clock
  local sw = {total = 0}
  function sw.wrap(f)
    return function(...)
      local t = clock()
      local r = table.pack(f(...))
      sw.total = sw.total + clock() - t
      return table.unpack(r, 1, r.n)
    end
  end
  return sw
end

-- Makes folder path (and its parents).
function M.mkdir(path)
  local ok = os.execute("mkdir -p '" .. path:gsub("'", "'\\''") .. "'")
  if not ok then error("cannot create folder " .. path, 2) end
  return path
end

-- fn(...) under ember.autocast("bfloat16") when --precision bf16, as is
-- otherwise. Wrap the forward pass and the loss, not backward() (see
-- ember.autocast). Checkpoints keep the float32 weights either way.
function M.autocast(opts, fn, ...)
  if opts.precision == "bf16" then return require("ember").autocast("bfloat16", fn, ...) end
  return fn(...)
end

return M
