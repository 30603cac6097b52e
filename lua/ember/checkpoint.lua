--- ember.checkpoint: model, optimizer and scheduler state in safetensors
-- files (core/src/safetensors.c does the format: atomic writes, a cJSON
-- header, full validation on load).
--
--   checkpoint.save(path, {model=, optimizer=, scheduler=, metadata={k="v"}, rng={name=generator}})
--   local meta, raw, missing, unexpected = checkpoint.load(path, {model=, optimizer=, scheduler=, strict=true, rng=})
--   checkpoint.save_tensors(path, {name=tensor, ...} [, metadata])
--   ember.save(obj, path); local obj = ember.load(path)    -- a tensor, a state dict, a module's, a nest, a number, a Size ...
--   local tensors, metadata, names = checkpoint.load_tensors(path)
--
-- Layout of a file written by save():
--   model tensors under their state_dict names ("encoder.1.self_attn.q_proj.weight"),
--     so other tools read the weights directly;
--   optimizer tensors as "optimizer.state.<k>.<name>" (k: the parameter's
--     1-based position in the optimizer);
--   metadata (all strings): "format" = "ember", the user's metadata, and the
--     optimizer's and scheduler's other values flattened to dotted keys:
--     "optimizer.type" = "AdamW", "optimizer.param_groups.1.lr" = "0.001",
--     "optimizer.state.3.step" = "12", "scheduler.last_step" = "40", ...
--     Numbers are written with the fewest of 15-17 significant digits that read back exactly (0.8 as "0.8"),
--     strings as "s:<text>" ("optimizer.param_groups.1.line_search_fn" =
--     "s:strong_wolfe").
--
-- Files from PyTorch (safetensors.torch.save_file, Hugging Face) load as
-- they are: F32, F64, BF16, I64 and BOOL tensors keep their dtype; F16
-- (model.half()) reads as float32 and I32, I16, I8, U8, U16 and U32 as
-- int64, exactly, as ember has none of these dtypes. `model:load_state_dict(ember.load(path))` converts to the
-- model's dtypes and maps PyTorch's names (nn.Module.load_state_dict);
-- `ember.save(model:torch_state_dict(), path)` writes PyTorch's names for
-- torch's load_state_dict. `ember.load` also reads what torch.save wrote
-- (.pt, .pth, pytorch_model.bin), as torch.load(weights_only=True) does:
-- state dicts and checkpoints of tensors, dicts, lists and numbers
-- (ember/_torch_load.lua).
--
-- Resuming a run exactly (the same losses and weights, bit for bit, as the
-- run that was not stopped; training_e2e_spec checks it in a fresh
-- process): save the model, optimizer and schedule with save(), the step
-- and the batch within the epoch in its metadata, and the random states:
-- `rng = {global = ember.default_generator, loader = g_at_epoch_start}`,
-- where g is the DataLoader's `generator` (an ember.Generator) and
-- g_at_epoch_start = g:get_state() taken before the epoch's `for` loop drew
-- its order. To resume: build the same model, optimizer and schedule, and
-- load(path, {model =, optimizer =, scheduler =, rng = {global =
-- ember.default_generator, loader = g}}) (dropout's masks come from the
-- global one); then skip the epoch's first `batch` batches. A loader
-- without its own generator shuffles from the global one, which dropout
-- also draws from: give it one to resume mid-epoch.
-- @module checkpoint
local error = require("ember._errors").error -- raises at the user's line
local core = require "ember.core"
local Module = require "ember.nn.Module"

local checkpoint = {}

local is_tensor = Module.is_tensor
local OPT, SCHED, RNG = "optimizer.", "scheduler.", "rng."

local function fail(path, fmt, ...)
  error(("checkpoint '%s': " .. fmt):format(path, ...), 3)
end

-- An error message without its leading "file:line: " (fail() puts the user's line first).
local function unplaced(err)
  return (tostring(err):gsub("^[^:\n]*:%d+: ", ""))
end

-- The shortest of 15, 16 and 17 significant digits that reads back as v
-- (a metadata value 0.8 is "0.8", not "0.80000000000000004"): exact either way.
local function num_str(v)
  if math.type(v) == "integer" then return ("%d"):format(v) end
  for digits = 15, 16 do
    local s = ("%." .. digits .. "g"):format(v)
    if tonumber(s) == v then return s end
  end
  return ("%.17g"):format(v)
end

-- Flattens a tree of numbers, booleans, strings and tensors into
-- meta[prefix .. "a.b.1"] = "..." and tensors[...] = t. A string is
-- written "s:<text>" (an option such as LBFGS's line_search_fn =
-- "strong_wolfe" or Adafactor's eps = {"auto", 1e-3}), so that one that
-- looks like a number or a boolean reads back as the string.
local function flatten(path, tree, prefix, meta, tensors)
  for k, v in pairs(tree) do
    if type(k) == "string" and k:find(".", 1, true) then fail(path, "cannot save the key '%s' (contains '.')", k) end
    if type(k) ~= "string" and math.type(k) ~= "integer" then fail(path, "cannot save a %s key", type(k)) end
    local name = prefix .. tostring(k)
    if is_tensor(v) then tensors[name] = v
    elseif type(v) == "number" then meta[name] = num_str(v)
    elseif type(v) == "boolean" then meta[name] = tostring(v)
    elseif type(v) == "string" then meta[name] = "s:" .. v
    elseif type(v) == "table" then
      if next(v) == nil then meta[name] = "{}" else flatten(path, v, name .. ".", meta, tensors) end
    else
      fail(path, "cannot save '%s', a %s", name, type(v))
    end
  end
end

local function parse_value(s)
  if s:sub(1, 2) == "s:" then return s:sub(3) end -- a string (flatten's); no number or boolean starts so
  if s == "true" then return true elseif s == "false" then return false end
  if s == "{}" then return {} end
  return tonumber(s) or s
end

-- The inverse: every key of `flat` starting with prefix goes into a tree.
local function unflatten(flat, prefix, tree, convert)
  for key, v in pairs(flat) do
    if key:sub(1, #prefix) == prefix then
      local node, parts = tree, {}
      for part in key:sub(#prefix + 1):gmatch("[^.]+") do
        parts[#parts + 1] = part:match("^%d+$") and tonumber(part) or part
      end
      for i = 1, #parts - 1 do
        node[parts[i]] = node[parts[i]] or {}
        node = node[parts[i]]
      end
      -- not `convert and parse_value(v) or v`: a parsed false would fall
      -- through to the string "false", which Lua counts as true
      if convert then node[parts[#parts]] = parse_value(v) else node[parts[#parts]] = v end
    end
  end
  return tree
end

-- Tensor names in the model's own order where it has one.
local function model_names(model, sd)
  local names = {}
  if type(model) == "table" and model._each_tensor then
    model:_each_tensor(function(n, _, kind) if kind ~= "nonpersistent" then names[#names + 1] = n end end)
  else
    for n in pairs(sd) do names[#names + 1] = n end
    table.sort(names)
  end
  return names
end

--- Writes tensors (a table name -> tensor) and metadata (string -> string).
function checkpoint.save_tensors(path, tensors, metadata, order)
  if type(path) ~= "string" then error("checkpoint.save_tensors: path must be a string", 2) end
  local names, list, seen = {}, {}, {}
  for _, n in ipairs(order or {}) do
    if tensors[n] ~= nil and not seen[n] then names[#names + 1], seen[n] = n, true end
  end
  local rest = {}
  for n in pairs(tensors) do if not seen[n] then rest[#rest + 1] = n end end
  table.sort(rest, function(a, b) return tostring(a) < tostring(b) end)
  for _, n in ipairs(rest) do names[#names + 1] = n end
  for i, n in ipairs(names) do
    if type(n) ~= "string" then fail(path, "tensor names must be strings, got a %s", type(n)) end
    if not is_tensor(tensors[n]) then fail(path, "'%s' is a %s, not a tensor", n, type(tensors[n])) end
    list[i] = tensors[n]
  end
  local meta = {}
  for k, v in pairs(metadata or {}) do
    if type(k) ~= "string" then fail(path, "metadata keys must be strings, got a %s", type(k)) end
    meta[k] = type(v) == "number" and num_str(v) or tostring(v)
  end
  core.safetensors_save(path, names, list, meta)
end

--- Reads a safetensors file: `tensors, metadata, names = checkpoint.load_tensors(path)`.
-- @tparam string path
-- @return tensors (name -> tensor), metadata (string -> string), names (in file order)
function checkpoint.load_tensors(path)
  if type(path) ~= "string" then error("checkpoint.load_tensors: path must be a string", 2) end
  local names, tensors, meta = core.safetensors_load(path)
  return tensors, meta, names
end

-- fn(...) for ember.save / ember.load: an error of the core's file
-- binding (core_name: a folder that does not exist, a truncated file) is
-- named as what the user called, `op`, raised at `level` as the caller
-- counts levels (as error's own level argument, from the caller).
local function as_user(op, core_name, level, fn, ...)
  local res = table.pack(pcall(fn, ...))
  if not res[1] then error((tostring(res[2]):gsub("^.-ember%." .. core_name .. ": ", "ember." .. op .. ": ")), level + 1) end
  return table.unpack(res, 2, res.n)
end

-- What torch.save keeps beyond a tensor's values, in the metadata (which
-- safetensors readers that do not know it skip): "ember.requires_grad.<name>"
-- = "true" for a tensor that requires grad, and an ember.Size as "z:2,3"
-- (encode_value, below). ember.load gives both back.
local RG = "ember.requires_grad."
local Size = core.Size
local function is_size(v) return getmetatable(v) == Size end
local function size_str(s)
  local parts = {}
  for i = 1, #s do parts[i] = num_str(s[i]) end
  return table.concat(parts, ",")
end
local function size_parse(str)
  local dims = {}
  for d in str:gmatch("[^,]+") do dims[#dims + 1] = math.tointeger(tonumber(d)) end
  return Size(dims)
end

-- A value that is not a tensor or a table, as a typed metadata string:
-- "n:12" | "f:0.001" | "b:true" | "s:text" | "z:2,3" (an ember.Size); nil
-- for anything else. decode_value is the inverse.
local function encode_value(v)
  if math.type(v) == "integer" then return "n:" .. num_str(v) end
  if type(v) == "number" then return "f:" .. num_str(v) end
  if type(v) == "boolean" then return "b:" .. tostring(v) end
  if type(v) == "string" then return "s:" .. v end
  if is_size(v) then return "z:" .. size_str(v) end
  return nil
end
local function decode_value(s)
  local tag, rest = s:sub(1, 2), s:sub(3)
  if tag == "n:" then return math.tointeger(tonumber(rest)) end
  if tag == "f:" then -- %.17g writes inf, -inf and nan or -nan, which tonumber does not read
    -- and "-0" (-0.0) reads as the integer 0: its sign comes from the text
    local v = tonumber(rest) or (rest == "inf" and math.huge) or (rest == "-inf" and -math.huge) or (0 / 0)
    if v == 0 and rest:sub(1, 1) == "-" then return -0.0 end
    return v + 0.0
  end
  if tag == "b:" then return rest == "true" end
  if tag == "z:" then return size_parse(rest) end
  return rest
end

-- A nest's key as one part of a dotted name: an integer as "#<n>"; a
-- string with its '%' and '.' written %25 and %2E, and a leading '#' %23,
-- so a state dict's "1.weight" under "model" is "model.1%2Eweight" (files
-- that may hold such escapes say so: "ember.escaped" = "1"). key_of reads
-- a part back.
local function part_of(k)
  if math.type(k) == "integer" then return "#" .. k end
  local s = k:gsub("[%%.]", function(c) return ("%%%02X"):format(c:byte()) end)
  if s:sub(1, 1) == "#" then s = "%23" .. s:sub(2) end
  return s
end
local function key_of(part, escaped)
  if part:sub(1, 1) == "#" then return math.tointeger(tonumber(part:sub(2))) end
  if not escaped then return part end
  return (part:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- save_tensors for ember.save, at the user's line (ember.save tail-calls
-- save_object, which calls this).
local function save_named(path, tensors, meta)
  for name, t in pairs(tensors) do
    if t.requires_grad then meta[RG .. name] = "true" end
  end
  as_user("save", "safetensors_save", 3, checkpoint.save_tensors, path, tensors, meta)
end

-- A module, optimizer or schedule: an object (a table with a metatable) with a state_dict method.
local function has_state(v)
  return type(v) == "table" and getmetatable(v) ~= nil and not is_tensor(v) and type(v.state_dict) == "function"
end

--- ember.save(obj, path), as torch.save(obj, path) (Torch7's order,
-- torch.save(path, obj), works too): a tensor, a table of name -> tensor (a
-- state dict), a module (its state_dict()), or any nest of tables holding
-- tensors, numbers, booleans and strings -- an optimizer's or scheduler's
-- state_dict(), or PyTorch's usual `{model = m:state_dict(), optimizer =
-- opt:state_dict(), epoch = 3}` -- in a safetensors file, which ember.load
-- reads back (the tensors under dotted names, a key's own '.' escaped, so
-- a nested model's state dict, "1.weight", goes in a nest too; the rest in
-- the metadata).
-- An optimizer or a schedule, alone or inside the nest, and a module inside
-- the nest are saved as their state dicts too (torch.save would pickle the
-- object; ember.load gives back the state dict, for load_state_dict).
-- As torch.save, it keeps which tensors require grad, and an ember.Size
-- (alone or in a nest) loads back as one; a number, boolean or string
-- alone is saved too.
-- A state dict's file says "format": "pt" in its metadata, as PyTorch's
-- safetensors.torch.save_file writes (Hugging Face's loaders ask for it):
-- `ember.save(model:torch_state_dict(), path)` is a file for PyTorch.
-- For a model with its optimizer and schedule, checkpoint.save does the same.
-- @param obj a tensor, a table, a module, or a number, boolean, string or ember.Size
-- @tparam string path
-- @usage local p = os.tmpname()
-- local m = nn.Linear(2, 2)
-- local opt = optim.Adam(m, {lr = 1e-3})
-- m(ember.ones(1, 2)):sum():backward(); opt:step()
-- ember.save({model = m:state_dict(), optimizer = opt:state_dict(), epoch = 3}, p)
-- local ck = ember.load(p); os.remove(p)
-- local opt2 = optim.Adam(nn.Linear(2, 2), {lr = 1e-3})
-- opt2:load_state_dict(ck.optimizer)
-- print(ck.epoch, opt2.state[1].step, ck.model.weight.shape)   --> 3	1	ember.Size{2, 2}
function checkpoint.save_object(a, b)
  local obj, path = a, b
  if type(a) == "string" and type(b) ~= "string" then obj, path = b, a end
  if type(path) ~= "string" then error("ember.save: expected (object, path), got a " .. type(path) .. " as the path", 2) end
  if is_tensor(obj) then
    save_named(path, { tensor = obj }, { ["ember.object"] = "tensor" }) -- not a tail call: the level counts it
    return
  end
  local value = encode_value(obj) -- a number, boolean, string or ember.Size, as torch.save takes them
  if value then
    save_named(path, {}, { ["ember.object"] = "value", ["ember.value"] = value })
    return
  end
  local what = "a table of tensors"
  if Module.is_module(obj) then obj, what = obj:state_dict(), "a module's state dict"
  elseif has_state(obj) then obj = obj:state_dict() end
  if type(obj) ~= "table" then
    error("ember.save: can save a tensor, a table or a module, got a " .. type(obj)
      .. " (a number, boolean, string or ember.Size alone is saved too)", 2)
  end
  local flat = true
  for k, v in pairs(obj) do
    if type(k) ~= "string" or not is_tensor(v) then flat = false end
  end
  -- "format" = "pt", as safetensors.torch.save_file writes it: Hugging Face's
  -- loaders refuse a file whose metadata lacks it
  if flat then
    save_named(path, obj, { ["ember.object"] = what, format = "pt" })
    return
  end
  -- a nest: tensors under their dotted paths, every other value typed in
  -- the metadata ("tree.<path>" = encode_value's string, or "{}" for an empty table)
  local tensors, meta = {}, { ["ember.object"] = "tree", ["ember.escaped"] = "1" }
  local function walk(t, prefix, seen)
    if seen[t] then error(("ember.save: the table under '%s' contains itself"):format(prefix), 4) end
    seen[t] = true
    for k, v in pairs(t) do
      if math.type(k) ~= "integer" and (type(k) ~= "string" or k == "") then
        error(("ember.save: cannot save the key %s under '%s' (keys are integers or non-empty strings)"):format(
          type(k) == "string" and "''" or ("of type " .. type(k)), prefix == "" and "(top)" or prefix), 4)
      end
      local key = part_of(k)
      local name = prefix == "" and key or (prefix .. "." .. key)
      -- a module, optimizer or schedule in the nest ({model = m, optimizer = opt, epoch = 3})
      -- goes in as its state dict, as one alone does
      if has_state(v) then v = v:state_dict() end
      local value = encode_value(v)
      if is_tensor(v) then tensors[name] = v
      elseif value then meta["tree." .. name] = value
      elseif type(v) == "table" then
        if next(v) == nil then meta["tree." .. name] = "{}" else walk(v, name, seen) end
      else
        error(("ember.save: cannot save '%s', a %s"):format(name, type(v)), 4)
      end
    end
    seen[t] = nil
  end
  walk(obj, "", {})
  save_named(path, tensors, meta)
end

--- ember.load(path): what ember.save wrote (a tensor, a table of name
-- -> tensor for `model:load_state_dict(ember.load(path))`, an ember.Size, or
-- the nest of tables it was given), as torch.load: a tensor that required
-- grad requires it again, an ember.Size is one again; any other safetensors
-- file as a table of its tensors. A file torch.save wrote (.pt, .pth,
-- pytorch_model.bin: PyTorch >= 1.6's zip format) loads as
-- torch.load(path, map_location="cpu", weights_only=True) would: its
-- tensors on the CPU (float16 as float32, int32/16/8 and uint8 as int64),
-- dicts as tables (Python's integer keys kept), lists and tuples as lists,
-- torch.Size as ember.Size, None as absent; a pickled class of the user's
-- is refused by name, never run.
-- @tparam string path
function checkpoint.load_object(path)
  if type(path) ~= "string" then error("ember.load: path must be a string, got a " .. type(path), 2) end
  local torch_file = require "ember._torch_load"
  if torch_file.is_torch_file(path) then return torch_file.load(path) end
  local tensors, meta = as_user("load", "safetensors_load", 2, checkpoint.load_tensors, path)
  for name, t in pairs(tensors) do
    if meta[RG .. name] == "true" then t:requires_grad_(true) end
  end
  if meta["ember.object"] == "tensor" then return tensors.tensor end
  if meta["ember.object"] == "value" then return decode_value(meta["ember.value"] or "s:") end
  if meta["ember.object"] ~= "tree" then return tensors end
  local root = {}
  local escaped = meta["ember.escaped"] == "1"
  local function put(name, v)
    local node, parts = root, {}
    for part in name:gmatch("[^.]+") do parts[#parts + 1] = key_of(part, escaped) end
    for i = 1, #parts - 1 do
      node[parts[i]] = node[parts[i]] or {}
      node = node[parts[i]]
    end
    node[parts[#parts]] = v
  end
  for name, t in pairs(tensors) do put(name, t) end
  for key, s in pairs(meta) do
    if key:sub(1, 5) == "tree." then
      put(key:sub(6), s == "{}" and {} or decode_value(s))
    end
  end
  return root
end

local function optimizer_type(opt) return opt.__name or "Optimizer" end

-- The keys of save's and load's parts table: a misspelt one (optimzer =)
-- would otherwise be skipped without a word.
local function check_parts(op, parts, known, hint)
  for k in pairs(parts) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      error(("checkpoint.%s: unknown key '%s' (keys: %s%s)"):format(op, tostring(k), table.concat(names, ", "),
        hint or ""), 3)
    end
  end
end

-- parts.rng, `{name = g, ...}`: checked; save takes an ember.Generator
-- (ember.default_generator: ember.manual_seed's) or a state g:get_state()
-- returned (a DataLoader generator's at the epoch's start), load only
-- generators. Returns name -> state (load: name -> generator).
local function rng_states(path, rng, loading)
  local out = {}
  if rng == nil then return out end
  local gen = require "ember._generator"
  if type(rng) ~= "table" or gen.is_generator(rng) then
    fail(path, "rng must be a table {name = generator%s}, got %s", loading and "" or " or state",
      gen.is_generator(rng) and "a generator (give {global = ember.default_generator}, say)" or type(rng))
  end
  for name, g in pairs(rng) do
    if type(name) ~= "string" or name:find(".", 1, true) then
      fail(path, "rng: names must be strings without '.', got %s", tostring(name))
    end
    if gen.is_generator(g) then
      out[name] = loading and g or g:get_state()
    elseif not loading and type(g) == "table" and math.type(g.seed) == "integer" and math.type(g.offset) == "integer" then
      out[name] = { seed = g.seed, offset = g.offset }
    else
      fail(path, "rng.%s must be an ember.Generator%s, got %s", name,
        loading and " (its state is loaded into it)" or " or the {seed =, offset =} its get_state() returned",
        type(g) == "table" and "a table" or type(g))
    end
  end
  return out
end

--- Saves a model's, optimizer's and scheduler's state in one safetensors file (atomic write).
-- @tparam string path
-- @tparam table parts `{model=, optimizer=, scheduler=, metadata={key="value"}, rng={name=generator or state}}`
-- (any may be absent). metadata's values are stored as strings and come
-- back as strings from load (`{best_acc = 0.8}` -> "0.8": tonumber it).
-- rng: random states to resume with, each an
-- ember.Generator (`ember.default_generator`, what dropout draws from) or
-- a state `g:get_state()` returned (a DataLoader generator's, taken at
-- the epoch's start); `checkpoint.load(path, {rng = {name = generator}})`
-- puts them back.
-- @usage local checkpoint = require "ember.checkpoint"
-- local model = nn.Linear(4, 2)
-- local opt = optim.AdamW(model:parameters(), {lr = 1e-3})
-- local path = os.tmpname()   -- "runs/x.safetensors", say
-- checkpoint.save(path, {model = model, optimizer = opt, metadata = {epoch = "3"}})
-- os.remove(path)
function checkpoint.save(path, parts)
  if type(parts) ~= "table" then error("checkpoint.save: expected (path, {model=, optimizer=, scheduler=, metadata=})", 2) end
  check_parts("save", parts, { model = true, optimizer = true, scheduler = true, metadata = true, rng = true },
    "; put other values in metadata, or use ember.save for a table of your own")
  local tensors, meta, order = {}, { format = "ember" }, {}
  for k, v in pairs(parts.metadata or {}) do
    if type(k) ~= "string" then fail(path, "metadata keys must be strings, got a %s", type(k)) end
    if k:sub(1, #OPT) == OPT or k:sub(1, #SCHED) == SCHED or k:sub(1, #RNG) == RNG or k == "format" then
      fail(path, "metadata key '%s' is reserved", k)
    end
    meta[k] = type(v) == "number" and num_str(v) or tostring(v)
  end
  if parts.model then
    local sd = parts.model:state_dict()
    order = model_names(parts.model, sd)
    for n, t in pairs(sd) do
      if n:sub(1, #OPT) == OPT then fail(path, "model tensor '%s' clashes with the optimizer's names", n) end
      tensors[n] = t
    end
  end
  if parts.optimizer then
    meta[OPT .. "type"] = optimizer_type(parts.optimizer)
    flatten(path, parts.optimizer:state_dict(), OPT, meta, tensors)
  end
  if parts.scheduler then
    meta[SCHED .. "type"] = parts.scheduler.__name or "Scheduler"
    flatten(path, parts.scheduler:state_dict(), SCHED, meta, tensors)
  end
  for name, state in pairs(rng_states(path, parts.rng, false)) do
    meta[RNG .. name .. ".seed"], meta[RNG .. name .. ".offset"] = num_str(state.seed), num_str(state.offset)
  end
  checkpoint.save_tensors(path, tensors, meta, order)
end

--- Loads what `parts` asks for; returns the user's metadata (and the raw
-- metadata as a second result; with a model, the model's missing and
-- unexpected names -- Module:load_state_dict's, empty when strict -- as
-- third and fourth, what PyTorch's load_state_dict(strict=False) reports).
-- Checks that the file has what is asked for before changing anything.
function checkpoint.load(path, parts)
  parts = parts or {}
  if type(parts) ~= "table" then error("checkpoint.load: expected (path [, {model=, optimizer=, scheduler=, strict=}])", 2) end
  check_parts("load", parts, { model = true, optimizer = true, scheduler = true, strict = true, rng = true })
  local gens = rng_states(path, parts.rng, true)
  local tensors, meta = checkpoint.load_tensors(path)
  local rng = {}
  for name in pairs(gens) do
    local seed, offset = meta[RNG .. name .. ".seed"], meta[RNG .. name .. ".offset"]
    seed, offset = math.tointeger(tonumber(seed)), math.tointeger(tonumber(offset))
    if seed == nil or offset == nil then fail(path, "has no rng state '%s'", name) end
    rng[name] = { seed = seed, offset = offset }
  end
  local model_sd, opt_tensors = {}, {}
  for n, t in pairs(tensors) do
    if n:sub(1, #OPT) == OPT then opt_tensors[n] = t else model_sd[n] = t end
  end
  if parts.optimizer then
    local want, got = optimizer_type(parts.optimizer), meta[OPT .. "type"]
    if got == nil then fail(path, "has no optimizer state") end
    if got ~= want then fail(path, "holds %s state, the optimizer is %s", got, want) end
  end
  if parts.scheduler then
    local got = meta[SCHED .. "type"]
    if got == nil then fail(path, "has no scheduler state") end
    if got ~= parts.scheduler.__name then fail(path, "holds %s state, the scheduler is %s", got, parts.scheduler.__name) end
  end
  if parts.model and parts.optimizer and parts.model.upgrade_state_dict then
    -- Files written before MultiHeadAttention moved to Lua name its tensors
    -- w_q, b_q, ... (load_state_dict maps them). Their optimizer state is by
    -- parameter position, and the positions changed with the names.
    local _, renamed = parts.model:upgrade_state_dict(model_sd)
    if renamed > 0 then
      fail(path, "was written by an earlier ember (%d tensor names of MultiHeadAttention mapped to today's); "
        .. "its optimizer state follows the old parameter order and cannot be restored: load the model alone "
        .. "and make a new optimizer", renamed)
    end
  end
  local missing, unexpected
  if parts.model then
    local ok, err, m, u = pcall(parts.model.load_state_dict, parts.model, model_sd, parts.strict ~= false)
    if not ok then fail(path, "%s", unplaced(err)) end
    missing, unexpected = m, u
  end
  if parts.optimizer then
    local sd = unflatten(meta, OPT, {}, true)
    unflatten(opt_tensors, OPT, sd, false)
    sd.type = nil
    sd.state = sd.state or {}
    local ok, err = pcall(parts.optimizer.load_state_dict, parts.optimizer, sd)
    if not ok then fail(path, "%s", unplaced(err)) end
  end
  if parts.scheduler then
    local sd = unflatten(meta, SCHED, {}, true)
    sd.type = nil
    local ok, err = pcall(parts.scheduler.load_state_dict, parts.scheduler, sd)
    if not ok then fail(path, "%s", unplaced(err)) end
  end
  for name, g in pairs(gens) do g:set_state(rng[name]) end
  local user = {}
  for k, v in pairs(meta) do
    if k ~= "format" and k:sub(1, #OPT) ~= OPT and k:sub(1, #SCHED) ~= SCHED and k:sub(1, #RNG) ~= RNG then user[k] = v end
  end
  return user, meta, missing, unexpected
end

-- C errors (unreadable files, bad tensors) name the user's line, not this file's.
for k, f in pairs(checkpoint) do
  if type(f) == "function" then checkpoint[k] = require("ember._errors").wrap(f) end
end

return checkpoint
