--- ember.cuda: torch.cuda's namespace, thin wrappers on ember's device
-- functions (`ember.device_count`, `synchronize`, `memory_stats`,
-- `empty_cache`, `max_memory_allocated`, `reset_peak_memory_stats`,
-- `device_name`, `manual_seed`), so that a PyTorch script's
-- `if torch.cuda.is_available() then device = "cuda" end` reads the same.
--
--   local device = ember.cuda.is_available() and "cuda" or "cpu"
--   local x = ember.randn(2, 3):to(device)
--   print(ember.cuda.is_available() == (ember.cuda.device_count() > 0))   --> true
--
-- A CUDA device is available where the CUDA backend plugin loaded and
-- reports at least one device (`ember.plugins()` says why it did not).
-- Without one the queries answer as torch's do (`is_available`
-- and `is_bf16_supported` false, `device_count`, `memory_allocated`,
-- `max_memory_allocated` and `memory_reserved` 0, `empty_cache`,
-- `manual_seed` and `manual_seed_all` run), and the calls that need a device
-- fail with `ember.cuda.<fn>: no CUDA device is available: <why>` (no
-- backend plugin found, the plugin rejected and CUDA's reason, or no device)
-- at the caller's line.
--
-- Devices are 1-based, as every index in ember: a device argument is 1
-- (the first GPU, torch's 0), 2, ..., or a string "cuda" / "cuda:2";
-- omitted, the first GPU. ember has no current device: "cuda" always names
-- "cuda:1", so `current_device()` is 1 and `set_device(i)` takes only 1 (a
-- tensor goes to another GPU by its name, `x:to("cuda:2")`).
-- Not here: streams, events, graphs, `amp` (`ember.autocast` is
-- ember's), `get_rng_state`, and `get_device_capability` (the backend does
-- not report it: an error says so).
-- @module ember.cuda
local core = require "ember.core"
local errors = require "ember._errors"

local M = {}

local function fail(fn, fmt, ...) errors.raise("ember.cuda." .. fn .. ": " .. fmt, ...) end

-- Why no CUDA device can be used, from the plugin loader's records.
local function why_not()
  local rejected, loaded = {}, false
  for _, r in ipairs(core.plugins()) do
    if r.kind == "backend" and r.name == "cuda" then
      if r.loaded then loaded = true else rejected[#rejected + 1] = r.path .. ": " .. r.reason end
    end
  end
  if loaded then return "the CUDA backend is loaded but reports no device" end
  if #rejected > 0 then
    return "the CUDA backend plugin was rejected (" .. table.concat(rejected, "; ") .. ")"
  end
  return ("no CUDA backend plugin was found (searched %s; see ember.plugins())")
    :format(table.concat(core.plugin_search_path(), ":"))
end

--- Whether a CUDA device can be used: the CUDA backend is loaded and
-- reports at least one device (torch.cuda.is_available). False, not an
-- error, on a machine without one, whether or not the plugin is installed.
-- @treturn boolean
function M.is_available() return core.device_count("cuda") > 0 end

--- The number of CUDA devices, 0 without the backend (torch.cuda.device_count;
-- `ember.device_count("cuda")`).
-- @treturn integer
function M.device_count() return core.device_count("cuda") end

local function need(fn)
  if not M.is_available() then fail(fn, "no CUDA device is available: %s", why_not()) end
end

-- A device argument as ember names it: nil -> "cuda", 2 -> "cuda:2",
-- "cuda:2" as it is; the core's parser checks the number and the count.
local function device(fn, d)
  need(fn)
  if d == nil then return "cuda" end
  if type(d) == "number" then
    local i = math.tointeger(d)
    if not i then fail(fn, "device must be an integer (1 is the first GPU) or a string such as \"cuda:1\", got %s", d) end
    if i < 1 then fail(fn, "device %d: device numbers start at 1 (torch's cuda:0 is ember's 1)", i) end
    return "cuda:" .. i
  end
  if type(d) ~= "string" then
    fail(fn, "device must be an integer (1 is the first GPU) or a string such as \"cuda:1\", got %s", type(d))
  end
  if d ~= "cuda" and not d:find("^cuda:") then fail(fn, "device must be a CUDA device (\"cuda\", \"cuda:2\"), got '%s'", d) end
  return d
end

-- core[flat](...) with its error named ember.cuda.<fn>, at the caller's line.
local function call(fn, flat, ...)
  local ok, a = pcall(core[flat], ...)
  if ok then return a end
  local msg = errors.strip_library_position(a)
  if type(msg) == "string" then
    msg = msg:gsub("^[^\n:]*:%d+: ", "", 1):gsub("^ember%." .. flat .. ":", "ember.cuda." .. fn .. ":", 1)
  end
  errors.error(msg)
end

-- The device's name, which also checks that it exists.
local function name_of(fn, d) return call(fn, "device_name", device(fn, d)) end

--- The current device: 1, the first GPU, which "cuda" names
-- (torch.cuda.current_device, 1-based). An error without a CUDA device.
-- @treturn integer
function M.current_device()
  need("current_device")
  return 1
end

--- torch.cuda.set_device: ember has no current device ("cuda" always names
-- "cuda:1"), so only device 1 is taken; another is an error saying to name
-- the device where the tensors go (`x:to("cuda:2")`, `{device = "cuda:2"}`).
-- @tparam integer|string device 1 or "cuda:1"
function M.set_device(d)
  local dev = device("set_device", d)
  name_of("set_device", dev)
  local i = tonumber(dev:match("^cuda:(%d+)$") or 1)
  if i ~= 1 then
    fail("set_device", "ember has no current device: \"cuda\" always names cuda:1; give the device where "
      .. "tensors go instead (x:to(\"cuda:%d\"), {device = \"cuda:%d\"}, model:to(\"cuda:%d\"))", i, i, i)
  end
end

--- The GPU's name, "NVIDIA H100 80GB HBM3" (torch.cuda.get_device_name;
-- `ember.device_name`).
-- @tparam[opt=1] integer|string device 1-based, or "cuda:2"
-- @treturn string
function M.get_device_name(d) return name_of("get_device_name", d) end

--- torch.cuda.get_device_properties: a table with the device's `name`,
-- the one property the CUDA backend reports; reading another (`major`,
-- `total_memory`, ...) is an error saying so.
-- @tparam[opt=1] integer|string device
-- @treturn table
function M.get_device_properties(d)
  local name = name_of("get_device_properties", d)
  return setmetatable({ name = name }, {
    __index = function(_, k)
      errors.raise("ember.cuda.get_device_properties: the CUDA backend reports only the device's name, not '%s'",
        tostring(k))
    end,
    __tostring = function() return ("CudaDeviceProperties(name='%s')"):format(name) end,
  })
end

--- torch.cuda.get_device_capability: an error, since the CUDA backend does
-- not report the compute capability (its plugin interface has no such
-- query); `is_bf16_supported()` answers the usual question it is asked for.
-- @tparam[opt=1] integer|string device
function M.get_device_capability(d)
  name_of("get_device_capability", d)
  fail("get_device_capability", "the CUDA backend does not report the compute capability "
    .. "(use ember.cuda.is_bf16_supported() or ember.cuda.get_device_name())")
end

--- Whether bfloat16 tensors run on the GPU: true where a CUDA device is
-- available (the backend's kernels and cuBLAS products take bfloat16 on
-- every GPU it runs on, sm_80 and newer), false without one (torch 2's
-- answer; torch 1.13 raised).
-- @treturn boolean
function M.is_bf16_supported() return M.is_available() end

--- Waits for the device's queued work (torch.cuda.synchronize; `ember.synchronize`).
-- @tparam[opt=1] integer|string device
function M.synchronize(d)
  local dev = device("synchronize", d)
  call("synchronize", "synchronize", dev)
end

--- Gives every CUDA device's cached blocks back to the driver
-- (torch.cuda.empty_cache; `ember.empty_cache`); nothing to do without a device.
function M.empty_cache(...)
  errors.no_extra("ember.cuda.empty_cache", {}, 1, ...)
  for i = 1, M.device_count() do call("empty_cache", "empty_cache", "cuda:" .. i) end
end

local function stats(fn, d)
  return call(fn, "memory_stats", device(fn, d))
end

--- Bytes the device's live tensors hold, counted in the allocator's blocks
-- as torch's (torch.cuda.memory_allocated; `ember.memory_stats(dev).in_use`);
-- 0 without a device.
-- @tparam[opt=1] integer|string device
-- @treturn integer
function M.memory_allocated(d)
  if not M.is_available() then return 0 end
  return stats("memory_allocated", d).in_use
end

--- Bytes the device's allocator holds, live and cached
-- (torch.cuda.memory_reserved; `in_use + cached` of `ember.memory_stats(dev)`);
-- 0 without a device.
-- @tparam[opt=1] integer|string device
-- @treturn integer
function M.memory_reserved(d)
  if not M.is_available() then return 0 end
  local s = stats("memory_reserved", d)
  return s.in_use + s.cached
end

--- The peak of the tensor bytes since the last `reset_peak_memory_stats`
-- (torch.cuda.max_memory_allocated): `ember.max_memory_allocated()`, which
-- ember keeps for every device together (the CPU's tensors count too), so
-- it bounds torch's per-device number from above; 0 without a device.
-- @tparam[opt=1] integer|string device checked, not needed
-- @treturn integer
function M.max_memory_allocated(d)
  if not M.is_available() then return 0 end
  name_of("max_memory_allocated", d)
  return core.max_memory_allocated()
end

--- Sets the peak of `max_memory_allocated` to the bytes live now
-- (torch.cuda.reset_peak_memory_stats; `ember.reset_peak_memory_stats`,
-- every device's). An error without a device, as torch's.
-- @tparam[opt=1] integer|string device checked, not needed
function M.reset_peak_memory_stats(d)
  name_of("reset_peak_memory_stats", d)
  core.reset_peak_memory_stats()
end

--- Seeds the random numbers (torch.cuda.manual_seed): ember has one
-- generator for every device (a seed draws the same numbers on the CPU and
-- on a GPU), so this is `ember.manual_seed(seed)`, the CPU's draws
-- included; it runs with or without a device.
-- @tparam integer seed
function M.manual_seed(seed) call("manual_seed", "manual_seed", seed) end

--- torch.cuda.manual_seed_all: `manual_seed` (one generator for every device).
-- @tparam integer seed
function M.manual_seed_all(seed) call("manual_seed_all", "manual_seed", seed) end

return M
