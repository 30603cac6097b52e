--- ember.cli: the command-line options every example script shares.
--
--   local cli = require "ember.cli"
--   -- arg: the script's command line; here `ember scripts/langid.lua --layers 3 --lr=0.01`
--   local opts = cli.parse(arg, {
--     script = "scripts/langid.lua",
--     about = "Language identification of single words.",
--     defaults = {epochs = 4, lr = 2e-3, batch = 64},        -- the shared options' defaults
--     options = {                                          -- the script's own
--       {"layers", 2, "encoder layers"},
--       {"predict", nil, "predict the language of one word", type = "string"},
--     },
--   })
--   print(opts.layers, opts.lr, opts.epochs, opts.predict)   --> 3 0.01 4 nil
--
-- Shared: --epochs --lr --batch --attention --seed --threads --device
-- --precision --smoke --out --help. A script runs its forward pass and loss
-- through cli.autocast(opts, fn, ...), which honours --precision (and,
-- under --precision auto, times the first steps in each precision). Values are given as "--name value" or "--name=value";
-- a boolean option is a flag ("--smoke") or takes true/false. An option's
-- type comes from its default (or `type` when the default is nil); a
-- `choices` list limits a string option. conf.examples (argument strings)
-- are printed under "Examples:" in --help, and tests run each with --smoke.
-- An attention variant that needs per-call tensors (document's doc ids,
-- prefix_lm's prefix) is refused by --attention unless the script makes
-- them: conf.attention_inputs = "sequence" says it passes
-- cli.sequence_inputs (rows of one sequence each) to its layers; --help
-- says which variants the script runs.
-- opts.given[name] is true for the options the command line set (the
-- others hold their defaults).
-- After parsing, cli.parse seeds the global generator and sets the thread
-- count, and puts in opts.world an ember.distributed.World: under
-- `mpirun -np N` the N ranks share each global batch (see
-- lua/ember/distributed/World.lua).
--
-- The parsing is Debian's lua-argparse (0.7.1): it does everything the
-- scripts need (--name=value, flags, choices, usage errors, the help text);
-- booleans that also take true/false are options with an optional argument.
-- A number option's spec may bound it: `integer = true`, `min = x` (at
-- least), `above = x` (more than), `max = x` (at most), `below = x` (less
-- than); and a script with
-- both --d_model and --heads gets "--heads must divide --d_model": a model
-- that cannot be built is a usage error (status 2) before the data loads.
-- @module cli
local error = require("ember._errors").error -- raises at the user's line
local M = {}

local SHARED = {
  {"epochs", 1, "passes over the training data"},
  {"lr", 1e-3, "learning rate"},
  {"batch", 64, "batch size"},
  {"attention", "standard", "attention variant"},
  {"attention_options", nil, "the variant's options as name=value,... (each variant's: ember.attention_variants())",
   type = "string"},
  {"seed", 0, "random seed (data split, initialisation, shuffling, dropout)"},
  {"threads", nil, "CPU threads (default: the backend's choice)", type = "number"},
  {"device", "cpu", "device: cpu, cuda, cuda:1 ..."},
  {"smoke", false, "a few quick steps on a small subset; fails unless the loss fell"},
  {"precision", "fp32", "fp32 (or float32); bf16 (or bfloat16): products in bfloat16 under ember.autocast, float32 weights; auto: where"
   .. " the CPU multiplies bfloat16 in hardware (AVX512_BF16, AMX), the first training steps are timed in each"
   .. " and the faster is kept (bf16 only when measured faster); fp32 elsewhere"},
  {"max_steps", nil, "stop after this many training steps (for timing runs)", type = "number"},
  {"out", nil, "folder for the checkpoint, metrics CSV and plots (default runs/<script>)", type = "string"},
}

local function kind_of(spec)
  return spec.type or (spec[2] ~= nil and type(spec[2])) or "string"
end

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
    if index[s[1]] then error(("cli: option --%s is already a shared option"):format(s[1])) end
    specs[#specs + 1] = s
    index[s[1]] = s
  end
  return specs, index
end

local function to_number(name)
  return function(v)
    local n = tonumber(v)
    if n == nil then return nil, ("option --%s needs a number, got '%s'"):format(name, v) end
    -- "1e400" reads as inf: a learning rate of inf failed deep in the optimizer
    if n == math.huge or n == -math.huge then return nil, ("option --%s needs a finite number, got '%s'"):format(name, v) end
    return n
  end
end

local function to_boolean(name)
  return function(v)
    if v == "true" or v == "1" or v == "yes" then return true end
    if v == "false" or v == "0" or v == "no" then return false end
    return nil, ("option --%s is true or false, got '%s'"):format(name, v)
  end
end

-- The loaded attention variants, for --attention's choices (none when
-- ember is not loadable: then any name passes and the model says no).
local function attention_choices()
  local ok, ember = pcall(require, "ember")
  if not ok or not ember.attention_variants then return nil end
  local names = {}
  for _, v in ipairs(ember.attention_variants()) do names[#names + 1] = v.name end
  table.sort(names)
  return #names > 0 and names or nil
end

-- Which variants a script runs: those that need no per-call tensors, and
-- with conf.attention_inputs = "sequence" (the script passes
-- cli.sequence_inputs to its layers) those cli.sequence_inputs makes.
-- Returns the list it runs and the one it does not (names, sorted).
local function attention_support(conf)
  local runs, not_here = {}, {}
  local attn = require "ember.nn._attn_opts"
  for _, n in ipairs(attention_choices() or {}) do
    local made = conf.attention_inputs == "sequence" and attn.SEQUENCE_INPUTS[n]
    if #attn.input_names(n) == 0 or made then runs[#runs + 1] = n else not_here[#not_here + 1] = n end
  end
  return runs, not_here
end

-- --attention's help: the variants, and what the script does with those
-- that need per-call tensors.
local function attention_help(conf)
  local runs, not_here = attention_support(conf)
  local help = "attention variant: " .. table.concat(runs, ", ")
  if conf.attention_inputs == "sequence" then
    local attn, made = require "ember.nn._attn_opts", {}
    for n, what in pairs(attn.SEQUENCE_INPUTS) do made[#made + 1] = ("%s gets %s"):format(n, what) end
    table.sort(made)
    help = help .. "; " .. table.concat(made, ", ") .. " (as standard with key padding)"
  end
  if #not_here > 0 then
    help = help .. "; not here: " .. table.concat(not_here, ", ") .. " (they need per-call tensors this script does not make)"
  end
  return help
end

-- The argparse parser of a script (lua-argparse: usage errors, choices,
-- --help). Booleans are flags that also take true/false ("--smoke",
-- "--retrain false"); defaults are applied after parsing, so the help
-- shows them as the script sees them.
local function build_parser(conf, specs)
  local argparse = require "argparse"
  local script = conf.script or "script.lua"
  local epilog
  if conf.examples and #conf.examples > 0 then
    local lines = {"Examples:"}
    for _, e in ipairs(conf.examples) do lines[#lines + 1] = ("   ember %s %s"):format(script, e) end
    epilog = table.concat(lines, "\n")
  end
  local p = argparse("ember " .. script, conf.about, epilog):add_help(false)
  p:help_max_width(100)
  for _, s in ipairs(specs) do
    local name, k = s[1], kind_of(s)
    local def = s[2] ~= nil and (" (default %s)"):format(tostring(s[2])) or ""
    local choices = k == "string" and (s.choices or (name == "attention" and attention_choices())) or nil
    local help = (s[3] or "") .. (choices and (": " .. table.concat(choices, ", ")) or "") .. def
    if name == "attention" and choices and not s.choices then help = attention_help(conf) .. def end
    local o = p:option("--" .. name, help):target(name)
    if k == "boolean" then
      o:args("?"):argname("true|false"):convert(to_boolean(name))
    elseif k == "number" then
      o:argname("N"):convert(to_number(name))
    else
      o:argname("S")
      if choices then o:choices(choices) end
    end
  end
  p:flag("-h --help", "print this help and exit")
  return p
end

--- The usage text of a script's options (what --help prints).
function M.usage(conf)
  conf = conf or {}
  return build_parser(conf, (all_specs(conf))):get_help()
end

--- "a=1,b=true,c=x" -> {a = 1, b = true, c = "x"} (nil -> {}).
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

--- Whether --precision auto considers bf16 on `device`: "bf16" where the
-- CPU multiplies bfloat16 in hardware (AVX512_BF16's dot products or AMX
-- tiles, which oneDNN's implementation name says), and then the first
-- training steps decide (cli.precision_calibration); "fp32" elsewhere:
-- emulated bfloat16 products are slower than float32 ones, and on a GPU
-- the choice is the user's. `info` (for tests) stands for
-- ember.cpu_info().bfloat16.
-- @treturn string "bf16" or "fp32"
-- @treturn string why
function M.auto_precision(device, info)
  if device ~= "cpu" then return "fp32", "bf16 is picked on the CPU only" end
  info = info or require("ember").cpu_info().bfloat16 or ""
  local gemm = info:match("gemm: ([^;]*)") or info
  if gemm:find("bf16", 1, true) or gemm:find("amx", 1, true) then
    return "bf16", "bfloat16 products in hardware, " .. gemm
  end
  return "fp32", "no bfloat16 products in hardware, " .. gemm
end

--- Checks value v of an option against its spec's bounds (`integer`,
-- `min`, `above`, `max`, `below`); raises "option --name must be ..., got v".
-- Nothing to check for nil (an option without a default, not given).
function M.check_bounds(spec, v)
  if type(v) ~= "number" then return end
  local want = {}
  if spec.integer then want[#want + 1] = "an integer" end
  if spec.min then want[#want + 1] = (">= %s"):format(tostring(spec.min)) end
  if spec.above then want[#want + 1] = ("> %s"):format(tostring(spec.above)) end
  if spec.max then want[#want + 1] = ("<= %s"):format(tostring(spec.max)) end
  if spec.below then want[#want + 1] = ("< %s"):format(tostring(spec.below)) end
  if #want == 0 then return end
  local ok = v == v and not (spec.integer and v % 1 ~= 0) and not (spec.min and v < spec.min)
    and not (spec.above and v <= spec.above) and not (spec.max and v > spec.max) and not (spec.below and v >= spec.below)
  if not ok then
    error(("option --%s must be %s, got %s"):format(spec[1], table.concat(want, " and "), tostring(v)), 0)
  end
end

-- torch's names for the two precisions: what a PyTorch user types first
local PRECISION_ALIASES = {float32 = "fp32", float = "fp32", bfloat16 = "bf16"}

--- argv with each negative number that follows an option taking a value
-- joined to it ("--lr", "-1" -> "--lr=-1"): argparse reads "-1" as an
-- unknown option, where Python's argparse takes it as the value.
-- takes_value(name) says whether option --name takes one.
-- @tparam {string,...} argv
-- @tparam function takes_value
-- @treturn {string,...}
function M.negative_values(argv, takes_value)
  local args = {}
  for _, a in ipairs(argv) do
    local prev = args[#args]
    local prev_name = type(prev) == "string" and prev:match("^%-%-([%w_]+)$")
    if prev_name and takes_value(prev_name) and type(a) == "string" and tonumber(a) and a:sub(1, 1) == "-" then
      args[#args] = prev .. "=" .. a
    else
      args[#args + 1] = a
    end
  end
  return args
end

--- Parses argv (a list of strings) without side effects. Returns the
-- options table, or nil and the usage text when --help was given; raises
-- argparse's message for a bad command line.
function M.parse_only(argv, conf)
  conf = conf or {}
  local specs, index = all_specs(conf)
  local p = build_parser(conf, specs)
  local args = M.negative_values(argv, function(name)
    local spec = index[name]
    return spec ~= nil and kind_of(spec) ~= "boolean"
  end)
  local ok, r = p:pparse(args)
  if not ok then error(r .. " (see --help)", 0) end
  if r.help then return nil, p:get_help() end
  local o = {given = {}}
  for _, s in ipairs(specs) do
    local v = r[s[1]]
    if kind_of(s) == "boolean" and type(v) == "table" then v = v[1] == nil or v[1] end
    if v == nil then v = s[2] else o.given[s[1]] = true end
    o[s[1]] = v
  end
  for _, n in ipairs({"epochs", "batch", "threads", "max_steps"}) do
    if o[n] ~= nil and (o[n] < 1 or o[n] % 1 ~= 0) then
      error(("option --%s must be a positive integer, got %s"):format(n, tostring(o[n])), 0)
    end
  end
  if type(o.seed) == "number" and not math.tointeger(o.seed) then
    error(("option --seed must be an integer, got %s"):format(tostring(o.seed)), 0)
  end
  if type(o.lr) == "number" and not (o.lr >= 0) then -- NaN too
    error(("option --lr must be a number >= 0, got %s"):format(tostring(o.lr)), 0)
  end
  for _, s in ipairs(specs) do M.check_bounds(s, o[s[1]]) end
  -- whole numbers as Lua integers: "--batch 1e3" or "--d_model 64.0" read as
  -- floats, which passed the checks and then failed inside the library
  -- ("warmup_steps must be an integer ..., got 0.0")
  for _, s in ipairs(specs) do
    local n = s[1]
    if s.integer or n == "epochs" or n == "batch" or n == "threads" or n == "max_steps" or n == "seed" then
      o[n] = math.tointeger(o[n]) or o[n]
    end
  end
  if type(o.d_model) == "number" and type(o.heads) == "number" and o.heads >= 1 and o.d_model % o.heads ~= 0 then
    error(("option --heads (%s) must divide --d_model (%s): each head gets d_model/heads dims")
      :format(tostring(o.heads), tostring(o.d_model)), 0)
  end
  if o.smoke and o.max_steps and o.max_steps < 2 then
    error(("option --max_steps %d with --smoke: the smoke check compares the first and last losses, "
      .. "so it needs at least 2 steps"):format(o.max_steps), 0)
  end
  o.precision = PRECISION_ALIASES[o.precision] or o.precision
  if o.precision == "auto" then
    local p, why = M.auto_precision(o.device)
    if p == "bf16" then
      -- hardware bfloat16 is not faster on every such CPU (issue 25): the
      -- first training steps are timed in each precision (cli.autocast)
      o.precision_note = ("precision: auto (%s; the first %d training steps time fp32 against bf16)")
        :format(why, 2 * (M.CALIBRATION.warmup + M.CALIBRATION.steps))
      o.precision_note_deferred = true -- printed by the first training step (cli.autocast): a run that
                                       -- trains nothing (--predict, --sample) prints its answer alone
    else
      o.precision = p
      o.precision_note = ("precision: %s (--precision auto: %s)"):format(o.precision, why)
    end
  end
  if o.precision ~= "fp32" and o.precision ~= "bf16" and o.precision ~= "auto" then
    error(("option --precision must be fp32 (or float32), bf16 (or bfloat16) or auto, got %s")
      :format(tostring(o.precision)), 0)
  end
  o.attention_opts = M.parse_kv(o.attention_options)
  if o.attention and attention_choices() then
    local runs, not_here = attention_support(conf)
    for _, n in ipairs(not_here) do
      if n == o.attention then
        error(("option --attention %s: the variant needs per-call tensors (%s) that this script does not make; it runs %s")
          :format(n, table.concat(require("ember.nn._attn_opts").input_names(n), ", "), table.concat(runs, ", ")), 0)
      end
    end
  end
  if not o.out then
    local base = (conf.script or "script"):match("([^/]+)%.lua$") or "script"
    o.out = "runs/" .. base
  end
  return o
end

--- Checks parsed options' --attention_options against the variant's own
-- declaration (names, types, ranges) by making a tiny ember.Attention with
-- them, so that a misspelt option is named when the command line is read,
-- not when the script builds its model; raises "option --attention_options: ...".
-- @tparam table o cli.parse_only's result
function M.check_attention_options(o)
  if not (o.attention and next(o.attention_opts or {})) then return end
  local spec = { attention = o.attention, heads = 1, head_dim = 8 }
  for k, v in pairs(o.attention_opts) do spec[k] = v end
  local ok, err = pcall(require("ember").Attention, spec)
  if not ok then
    error("option --attention_options: " .. tostring(err):gsub("^[^\n]-:%d+: ", ""):gsub("^ember%.Attention: ", ""), 0)
  end
end

--- Parses argv; prints the help and exits on --help; prints the error and
-- exits with status 2 on a bad option (--attention_options too:
-- check_attention_options). Then seeds ember's generator, sets the thread
-- count and checks the device.
function M.parse(argv, conf)
  local ok, o, help = pcall(M.parse_only, argv or {}, conf)
  if ok and o then
    local checked, err = pcall(M.check_attention_options, o)
    if not checked then ok, o = false, err end
  end
  if not ok then
    io.stderr:write(("%s: %s\n"):format(conf and conf.script or "script", o))
    os.exit(2, true)
  end
  if not o then
    print(help)
    os.exit(0, true)
  end
  local ember = require "ember"
  -- Under mpirun: MPI starts, and only rank 0 prints (the others' print is
  -- silenced, as torchvision's reference scripts do; errors still reach stderr).
  o.world = require("ember.distributed.World").from_env()
  if not o.world.main then print = function() end end
  if o.world.distributed then
    if o.batch and o.batch % o.world.size ~= 0 then
      io.stderr:write(("%s: --batch %d (the global batch) does not split evenly over %d ranks\n")
                      :format(conf and conf.script or "script", o.batch, o.world.size))
      os.exit(2, true)
    end
    print(("%s, global batch split over them: --batch %d is %d per rank"):format(
      tostring(o.world), o.batch, o.batch // o.world.size))
  end
  if o.precision_note and not o.precision_note_deferred then print(o.precision_note) end
  ember.manual_seed(math.tointeger(o.seed) or M.option_error("option --seed must be an integer"))
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

--- Ends the script on an option it cannot use, as a bad command line
-- ends it: "<script>: message" on stderr (no traceback) and exit status 2.
function M.option_error(fmt, ...)
  if select("#", ...) > 0 then fmt = fmt:format(...) end
  io.stderr:write(("%s: %s\n"):format(arg and arg[0] or "script", fmt))
  os.exit(2, true)
end

--- The per-call tensors (variant_inputs) of attention variant `attention`
-- for a batch whose rows each hold one sequence (a classifier's, an
-- encoder's; nothing packed), for a script parsed with
-- `attention_inputs = "sequence"`: "document" gets doc ids (one document
-- per row, its padding another), "prefix_lm" a prefix of the whole row;
-- both then attend as standard attention with the key padding mask does.
-- nil for a variant that needs none.
-- @string attention the variant's name (opts.attention)
-- @tparam Tensor x the layer's input [B, L, d]
-- @tparam[opt] Tensor key_padding_mask bool [B, L], true = padding
-- @treturn table|nil variant_inputs for the layers' forward
-- @usage local ember, cli = require "ember", require "ember.cli"
-- local x = ember.randn(2, 3, 8)
-- local pad = ember.tensor({{false, false, true}, {false, false, false}})
-- print(cli.sequence_inputs("document", x, pad).doc:totable()[1][3]) --> 2
-- print(cli.sequence_inputs("prefix_lm", x, pad).prefix:totable()[1]) --> 3
-- print(cli.sequence_inputs("standard", x, pad))                      --> nil
function M.sequence_inputs(attention, x, key_padding_mask)
  return require("ember.nn._attn_opts").sequence_inputs(attention, x, key_padding_mask)
end

--- The dropout on attention weights for opts.attention: opts.dropout, or 0
-- (said once) when the variant cannot drop attention weights (e.g. linear).
function M.attention_dropout(o)
  local dropout, zeroed = require("ember.nn._attn_opts").default_attention_dropout(o.attention, o.dropout or 0)
  if zeroed then
    print(("note: attention '%s' has no dropout on attention weights; using 0 there"):format(o.attention))
  end
  return dropout
end

--- For --smoke runs: fails unless the mean of the last few losses is below
-- the mean of the first few. Prints both.
function M.check_smoke(losses, k)
  k = math.min(k or 5, #losses // 2)
  if k < 1 then error(("smoke: too few steps to compare the loss (%d; it needs at least 2)"):format(#losses), 0) end
  local first, last = 0, 0
  for i = 1, k do first, last = first + losses[i] / k, last + losses[#losses - i + 1] / k end
  print(("smoke: loss %.4f -> %.4f over %d steps"):format(first, last, #losses))
  if not (last < first) then error(("smoke: the loss did not fall (%.4f -> %.4f)"):format(first, last), 0) end
  return first, last
end

--- The options named in keys as checkpoint metadata (strings), so that a
-- later run can rebuild the same model before loading its weights.
function M.config_metadata(o, keys)
  local meta = {}
  for _, k in ipairs(keys) do
    if o[k] ~= nil then meta["config." .. k] = tostring(o[k]) end
  end
  return meta
end

--- Copies the config.* metadata of a checkpoint back into options o. An
-- option the command line set (o.given) to another value than the saved
-- model's is not used: a note on stderr names it and the saved value
-- ("note: the saved model was built with --d_model 32; --d_model 128 is not
-- used"), so that the run does not seem to have taken it.
-- Returns o and the list of such option names.
function M.apply_metadata(o, meta, keys)
  local ignored, saved = {}, {}
  for _, k in ipairs(keys) do
    local v = meta["config." .. k]
    if v ~= nil then
      local before = o[k]
      if type(o[k]) == "number" then
        local n = tonumber(v)
        if n and math.type(o[k]) == "integer" then n = math.tointeger(n) or n end
        o[k] = n or o[k]
      elseif type(o[k]) == "boolean" then o[k] = v == "true"
      else o[k] = v end
      if o.given and o.given[k] and tostring(before) ~= tostring(o[k]) then
        ignored[#ignored + 1] = ("--%s %s"):format(k, tostring(before))
        saved[#saved + 1] = ("--%s %s"):format(k, tostring(o[k]))
      end
    end
  end
  if #ignored > 0 then
    io.stderr:write(("note: the saved model was built with %s; %s %s not used\n"):format(
      table.concat(saved, " "), table.concat(ignored, " "), #ignored == 1 and "is" or "are"))
  end
  return o, ignored
end

--- Makes the output folder o.out (cli.mkdir) and proves it writable; ends
-- the script as a bad option does (one line naming --out, status 2) when
-- it is not. files: the names this run writes there; those an earlier run
-- left are named in a note ("this run replaces them"), as they are
-- overwritten. Call it before the data loads.
-- @tparam table o cli.parse's options
-- @tparam[opt] {string,...} files
function M.prepare_out(o, files)
  local dir = o.out
  local ok = os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "' 2>/dev/null")
  local probe = dir .. "/.ember_write_test"
  local f = ok and io.open(probe, "w")
  if not f then
    M.option_error("option --out %s: %s", dir, ok and "the folder is not writable" or "cannot create the folder")
  end
  f:close()
  os.remove(probe)
  local earlier = {}
  for _, name in ipairs(files or {}) do
    local g = io.open(dir .. "/" .. name, "rb")
    if g then g:close(); earlier[#earlier + 1] = name end
  end
  if #earlier > 0 then
    print(("note: %s holds an earlier run's %s: this run replaces %s"):format(dir, table.concat(earlier, ", "),
      #earlier == 1 and "it" or "them"))
  end
  return dir
end

--- For a --smoke run: a note naming the options the command line set that
-- the smoke run's own small configuration replaces (names: the options
-- the script overrides under --smoke), so that none seems taken.
function M.smoke_note(o, names)
  if not o.smoke then return end
  local over = {}
  for _, n in ipairs(names) do if o.given and o.given[n] then over[#over + 1] = "--" .. n end end
  if #over > 0 then
    print(("note: --smoke runs its own small configuration; %s %s not used"):format(table.concat(over, ", "),
      #over == 1 and "is" or "are"))
  end
end

--- A script's end of a --smoke run: cli.check_smoke, and when the check
-- fails one line on stderr ("<script>: smoke: the loss did not fall ...")
-- and exit status 1, no traceback.
function M.finish_smoke(losses, k)
  local ok, err = pcall(M.check_smoke, losses, k)
  if not ok then
    io.stderr:write(("%s: %s\n"):format(arg and arg[0] or "script", tostring(err)))
    os.exit(1, true)
  end
end

--- A stopwatch over some functions (evaluation, say), so that the time a
-- script reports as training leaves them out:
--   local cli = require "ember.cli"
--   local evaluate = function() return ember.randn(100, 100):sum():item() end
--   local ev = cli.stopwatch(); evaluate = ev.wrap(evaluate)
--   evaluate()
--   print(ev.total >= 0)   --> true
-- ev.total is wall seconds, ev.cpu_total the process's CPU seconds (every
-- thread's, os.clock), what stays comparable on a shared machine.
function M.stopwatch()
  local clock = require("ember").clock
  local sw = {total = 0, cpu_total = 0}
  function sw.wrap(f)
    return function(...)
      local t, c = clock(), os.clock()
      local r = table.pack(f(...))
      sw.total = sw.total + clock() - t
      sw.cpu_total = sw.cpu_total + os.clock() - c
      return table.unpack(r, 1, r.n)
    end
  end
  return sw
end

--- Makes folder path (and its parents).
function M.mkdir(path)
  local ok = os.execute("mkdir -p '" .. path:gsub("'", "'\\''") .. "'")
  if not ok then error("cannot create folder " .. path, 2) end
  return path
end


--- The machine a benchmark ran on, for the line above its table: the CPU,
-- the thread count, whether bfloat16 products have AMX tiles (and why not),
-- and the BLAS library with the core it runs, e.g.
-- "machine: AMD EPYC, 2 threads, AMX: no (no AMX-BF16 on this CPU), BLAS: openblas 0.3.21, core Cooperlake ...".
-- `info` (for tests) stands for ember.cpu_info().
-- @tparam[opt] table info
-- @treturn string
-- @usage print(require("ember.cli").machine())
function M.machine(info)
  info = info or require("ember").cpu_info()
  local bf16 = info.bfloat16 or ""
  local amx
  local why = bf16:match("no amx: ([^);]*)")
  if why then amx = "no (" .. why .. ")"
  elseif bf16:find("amx_emulated", 1, true) then amx = "emulated (a test path)"
  elseif bf16:lower():find("amx", 1, true) then amx = "yes"
  else amx = "no" end
  return ("machine: %s, %s threads, AMX: %s, BLAS: %s"):format(info.name or "unknown CPU",
    tostring(info.threads or "?"), amx, info.blas or "unknown")
end

--- For the scripts with positional arguments only (the benchmarks): when
-- argv holds --help or -h, prints the script's leading comment block (its
-- documentation) and exits with status 0.
function M.help_from_header(argv)
  argv = argv or {}
  local wants = false
  for _, a in ipairs(argv) do wants = wants or a == "--help" or a == "-h" end
  if not wants then return end
  local f = argv[0] and io.open(argv[0], "r")
  local lines = {}
  if f then
    for line in f:lines() do
      local text = line:match("^%-%- ?(.*)$")
      if not text then break end
      lines[#lines + 1] = text
    end
    f:close()
  end
  print(#lines > 0 and table.concat(lines, "\n") or ("usage: ember " .. tostring(argv[0])))
  os.exit(0, true)
end

--- How --precision auto's calibration runs: per precision, `warmup` steps
-- not timed (oneDNN builds its primitives then) and `steps` timed, the
-- two precisions alternating; bf16 is kept only when its median step is
-- `margin` (a fraction) faster than fp32's, since fp32 is the more exact.
M.CALIBRATION = {warmup = 1, steps = 3, margin = 0.02}

local Calibration = {}
Calibration.__index = Calibration

local function median(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  local n = #c
  if n == 0 then return 0 end
  return n % 2 == 1 and c[(n + 1) // 2] or (c[n // 2] + c[n // 2 + 1]) / 2
end

--- A calibration of --precision auto over a script's own training steps:
-- `c:next()` at the start of each step (cli.autocast calls it) says the
-- precision to run it in, and times the step before it, from one call to
-- the next, so backward and the optimizer are in the time. After the
-- schedule (M.CALIBRATION) it keeps the faster and says what it measured
-- and chose through `report`. conf (all optional, for tests and
-- ember.distributed): `clock` (seconds), `report` (a function of the
-- line; progress.above, which clears a bar being drawn), `sum` (a function of (fp32, bf16) returning them summed
-- over the ranks, so that every rank keeps the same), `label` (what the
-- note names instead of "precision", e.g. an ember.autocast("auto") call
-- site; it then counts calls, not steps), and the fields of M.CALIBRATION.
-- @tparam[opt] table conf
-- @treturn table the calibration; `choice` and `note` once decided
function M.precision_calibration(conf)
  conf = conf or {}
  local c = setmetatable({
    warmup = conf.warmup or M.CALIBRATION.warmup, steps = conf.steps or M.CALIBRATION.steps,
    margin = conf.margin or M.CALIBRATION.margin, clock = conf.clock or require("ember").clock,
    report = conf.report or require("ember.progress").above, sum = conf.sum, label = conf.label,
    times = {fp32 = {}, bf16 = {}}, schedule = {}, i = 0,
  }, Calibration)
  for k = 1, c.warmup + c.steps do
    for _, p in ipairs({"fp32", "bf16"}) do c.schedule[#c.schedule + 1] = {precision = p, timed = k > c.warmup} end
  end
  return c
end

--- The precision of the step about to run ("fp32" or "bf16"); times the
-- step before it; decides after the last one of the schedule.
-- @treturn string
function Calibration:next()
  if self.choice then return self.choice end
  local now = self.clock()
  local prev = self.schedule[self.i]
  if prev and prev.timed then table.insert(self.times[prev.precision], now - self.last) end
  self.i = self.i + 1
  if self.i > #self.schedule then return self:decide() end
  self.last = now
  return self.schedule[self.i].precision
end

--- Keeps the faster precision (bf16 only when at least `margin` faster)
-- and reports it; returns the choice.
-- @treturn string
function Calibration:decide()
  local f, b = median(self.times.fp32), median(self.times.bf16)
  if self.sum then f, b = self.sum(f, b) end
  self.choice = b < f * (1 - self.margin) and "bf16" or "fp32"
  local what = self.label and "calls" or "steps"
  -- a step under 1 ms in microseconds: "%.1f ms" showed a 30 us call as
  -- "0.0 ms" in both precisions, whichever it kept
  local function ms(t) return t < 1e-3 and ("%.1f us"):format(t * 1e6) or ("%.1f ms"):format(t * 1e3) end
  self.note = ("%s: %s (%s measured %d %s each: fp32 %s, bf16 %s per %s, "
    .. "median%s; bf16 is kept when at least %d%% faster)"):format(self.label or "precision", self.choice,
    self.label and "it" or "--precision auto", self.steps, what, ms(f), ms(b), what:sub(1, -2),
    self.sum and ", summed over the ranks" or "", math.floor(self.margin * 100 + 0.5))
  self.report(self.note)
  return self.choice
end

--- fn(...) under ember.autocast("bfloat16") when --precision bf16, as is
-- under fp32; under auto, each of the first training steps in the
-- precision the calibration (cli.precision_calibration) gives it, then in
-- the one it kept (opts.precision becomes it). opts.precision is
-- cli.parse's (fp32 when absent); torch's names float32 and bfloat16 are
-- taken too, and any other value is an error, not fp32. Call it once per training
-- step, wrapping the forward pass and the loss, not backward() (see
-- ember.autocast). Checkpoints keep the float32 weights either way.
function M.autocast(opts, fn, ...)
  if type(opts) ~= "table" then
    error(("ember.cli.autocast: expected the parsed options (cli.parse's table), got %s"):format(type(opts)))
  end
  local precision = PRECISION_ALIASES[opts.precision] or opts.precision or "fp32"
  if precision ~= "fp32" and precision ~= "bf16" and precision ~= "auto" then
    error(("ember.cli.autocast: precision must be fp32 (or float32), bf16 (or bfloat16) or auto, got %s")
      :format(tostring(precision)))
  end
  if precision == "auto" then
    local c = opts.precision_calibration
    if not c then
      if opts.precision_note_deferred then
        print(opts.precision_note)
        opts.precision_note_deferred = nil
      end
      local world = opts.world
      c = M.precision_calibration{
        sum = world and world.distributed and function(a, b) return world:sum(a, b) end or nil}
      opts.precision_calibration = c
    end
    precision = c:next()
    if c.choice then opts.precision, opts.precision_note = c.choice, c.note end
  end
  if precision == "bf16" then return require("ember").autocast("bfloat16", fn, ...) end
  return fn(...)
end

return M
