-- ember.cuda (lua/ember/cuda.lua): torch.cuda's namespace as a PyTorch
-- script reaches for it. Without a CUDA device (this spec's usual
-- machine): torch's answers (false, 0) and, for the calls that need a
-- device, an error naming ember.cuda.<fn> at the caller's line that says why
-- (no plugin found, the plugin rejected and CUDA's reason, no device).
-- With one: the wrappers agree with the flat functions they are built on
-- (ember.device_count, device_name, synchronize, memory_stats, ...).
local ember = require "ember"
local child = require "tests.lua.helpers.child"
local tmpdir = require "tests.lua.helpers.tmpdir"

local cuda = ember.cuda
local available = cuda.is_available()
local build = os.getenv("EMBER_BUILD_DIR") or "build"

-- The error of fn(...) called from this file, and the line of the call (the
-- user's line the message must name).
local function error_of(fn, ...)
  local line, ok, err = debug.getinfo(1, "l").currentline, pcall(fn, ...)
  assert(not ok, "no error")
  return tostring(err), line
end

-- The CUDA backend's rejection reasons in the loader's records ("" when none).
local function rejected_reasons()
  local out = {}
  for _, r in ipairs(ember.plugins()) do
    if r.kind == "backend" and r.name == "cuda" and not r.loaded then out[#out + 1] = r.reason end
  end
  return out
end

local NEEDS_DEVICE = { "synchronize", "current_device", "set_device", "get_device_name", "get_device_properties",
  "get_device_capability", "reset_peak_memory_stats" }

describe("ember.cuda", function()
  it("is the module the lazy loader finds, on ember", function()
    assert.are.equal(require("ember.cuda"), ember.cuda)
    assert.is_function(cuda.is_available)
  end)

  it("is_available is device_count > 0, as ember.device_count('cuda') says", function()
    assert.are.equal(ember.device_count("cuda"), cuda.device_count())
    assert.are.equal(cuda.device_count() > 0, cuda.is_available())
    assert.are.equal(cuda.is_available(), cuda.is_bf16_supported())
  end)

  it("seeds ember's one generator (manual_seed, manual_seed_all)", function()
    cuda.manual_seed(11)
    assert.are.equal(11, ember.initial_seed())
    local a = ember.randn(5)
    ember.manual_seed(11)
    assert.is_true(ember.equal(a, ember.randn(5)))
    cuda.manual_seed_all(12)
    assert.are.equal(12, ember.initial_seed())
    local err, line = error_of(cuda.manual_seed, 1.5)
    assert.truthy(err:find("cuda_namespace_spec.lua:" .. line .. ": ember.cuda.manual_seed: seed must be an integer", 1, true), err)
    err = error_of(cuda.manual_seed_all, "x")
    assert.truthy(err:find("ember.cuda.manual_seed_all: seed", 1, true), err)
  end)

  it("moves tensors by the PyTorch idiom", function()
    local device = cuda.is_available() and "cuda" or "cpu"
    local x = ember.randn(2, 3):to(device)
    assert.are.equal(available and "cuda:1" or "cpu", x.device)
  end)

  it("empty_cache takes no arguments", function()
    cuda.empty_cache()
    local err = error_of(cuda.empty_cache, 1)
    assert.truthy(err:find("ember.cuda.empty_cache: takes no arguments", 1, true), err)
  end)

  it("ember.device_name: the backend's name of a device", function()
    assert.are.equal(ember.cpu_info().name, ember.device_name("cpu"))
    assert.are.equal(ember.device_name("cpu"), ember.device_name())
    local err = error_of(ember.device_name, "tpu")
    assert.truthy(err:find("ember.device_name: unknown device 'tpu'", 1, true), err)
  end)

  describe("without a CUDA device", function()
    if available then
      it("(skipped: this machine has one)", function() pending("a CUDA device is available") end)
      return
    end

    it("answers as torch does", function()
      assert.is_false(cuda.is_available())
      assert.are.equal(0, cuda.device_count())
      assert.are.equal(0, cuda.memory_allocated())
      assert.are.equal(0, cuda.memory_allocated(1))
      assert.are.equal(0, cuda.max_memory_allocated())
      assert.are.equal(0, cuda.memory_reserved())
      assert.is_false(cuda.is_bf16_supported())
    end)

    it("fails the calls that need a device, naming them, at the caller's line, saying why", function()
      local reasons = rejected_reasons()
      for _, fn in ipairs(NEEDS_DEVICE) do
        local err, line = error_of(cuda[fn], 1)
        local want = ("cuda_namespace_spec.lua:%d: ember.cuda.%s: no CUDA device is available: "):format(line, fn)
        assert.truthy(err:find(want, 1, true), err)
        if #reasons > 0 then
          assert.truthy(err:find("the CUDA backend plugin was rejected", 1, true), err)
          for _, r in ipairs(reasons) do assert.truthy(err:find(r, 1, true), err) end
        else
          assert.truthy(err:find("no CUDA backend plugin was found", 1, true)
            or err:find("loaded but reports no device", 1, true), err)
        end
      end
    end)

    it("says where it searched when no CUDA plugin is installed", function()
      local dir = tmpdir()
      assert(os.execute(("cp '%s/plugins/ember_backend_cpu.so' '%s/'"):format(build, dir)))
      local out = child.run([[
        local ember = require "ember"
        print(ember.cuda.is_available(), ember.cuda.device_count(), ember.cuda.memory_allocated())
        local ok, err = pcall(ember.cuda.synchronize)
        print(err)
      ]], ("EMBER_PLUGIN_PATH='%s' EMBER_PLUGIN_PATH_ONLY=1"):format(dir))
      os.execute(("rm -rf '%s'"):format(dir))
      assert.truthy(out:find("false\t0\t0", 1, true), out)
      assert.truthy(out:find("ember.cuda.synchronize: no CUDA device is available: no CUDA backend plugin was found (searched "
        .. dir, 1, true), out)
    end)
  end)

  -- The with-a-device answers on a machine without a GPU: the CUDA backend
  -- built on the CPU emulator (backends/cuda/emu), with the CPU backend only.
  it("on the emulated CUDA plugin, agrees with the flat functions", function()
    local emu = build .. "/backends/cuda/emu/ember_backend_cuda.so"
    local f = io.open(emu)
    if not f then pending("the CUDA emulator plugin is not built (" .. emu .. ")") return end
    f:close()
    local dir = tmpdir()
    assert(os.execute(("cp '%s/plugins/ember_backend_cpu.so' '%s' '%s/'"):format(build, emu, dir)))
    local out = child.run([[
      local ember = require "ember"
      local c = ember.cuda
      assert(c.is_available() and c.device_count() == ember.device_count("cuda") and c.device_count() >= 1)
      assert(c.current_device() == 1 and c.is_bf16_supported())
      assert(c.get_device_name() == ember.device_name("cuda") and c.get_device_name(1) == ember.device_name("cuda:1"))
      collectgarbage()
      local x = ember.zeros({256, 256}, {device = "cuda"})
      c.synchronize(1)
      assert(c.memory_allocated() == ember.memory_stats("cuda").in_use and c.memory_allocated() >= 262144)
      assert(c.max_memory_allocated() == ember.max_memory_allocated())
      local ok, err = pcall(c.get_device_name, 0)
      assert(not ok and err:find("ember.cuda.get_device_name: device 0: device numbers start at 1", 1, true), err)
      ok, err = pcall(c.set_device, c.device_count() + 1)
      assert(not ok and err:find("ember.cuda.set_device: ", 1, true), err)
      x = nil
      collectgarbage()
      collectgarbage()
      c.empty_cache()
      assert(ember.memory_stats("cuda").cached == 0)
      print("emulated: ok", x)
    ]], ("EMBER_PLUGIN_PATH='%s' EMBER_PLUGIN_PATH_ONLY=1"):format(dir))
    os.execute(("rm -rf '%s'"):format(dir))
    assert.truthy(out:find("emulated: ok", 1, true), out)
  end)

  describe("with a CUDA device", function()
    if not available then
      it("(skipped: no CUDA device here)", function() pending("no CUDA device: " .. table.concat(rejected_reasons(), "; ")) end)
      return
    end

    it("names devices 1-based and has no current device but the first", function()
      assert.is_true(cuda.device_count() >= 1)
      assert.are.equal(1, cuda.current_device())
      cuda.set_device(1)
      cuda.set_device("cuda:1")
      local err = error_of(cuda.set_device, 2)
      if cuda.device_count() >= 2 then
        assert.truthy(err:find("ember.cuda.set_device: ember has no current device", 1, true), err)
      else
        assert.truthy(err:find("ember.cuda.set_device: unknown device 'cuda:2'", 1, true), err)
      end
      err = error_of(cuda.get_device_name, 0)
      assert.truthy(err:find("ember.cuda.get_device_name: device 0: device numbers start at 1", 1, true), err)
      err = error_of(cuda.get_device_name, "cpu")
      assert.truthy(err:find("ember.cuda.get_device_name: device must be a CUDA device", 1, true), err)
    end)

    it("gives the device's name and says what it cannot report", function()
      local name = cuda.get_device_name()
      assert.is_string(name)
      assert.are.equal(ember.device_name("cuda"), name)
      assert.are.equal(name, cuda.get_device_name(1))
      local props = cuda.get_device_properties(1)
      assert.are.equal(name, props.name)
      local err = error_of(function() return props.major end)
      assert.truthy(err:find("reports only the device's name, not 'major'", 1, true), err)
      err = error_of(cuda.get_device_capability)
      assert.truthy(err:find("ember.cuda.get_device_capability: the CUDA backend does not report", 1, true), err)
      assert.is_true(cuda.is_bf16_supported())
    end)

    it("agrees with the flat memory functions", function()
      collectgarbage()
      collectgarbage()
      cuda.synchronize()
      cuda.synchronize(1)
      local before = cuda.memory_allocated()
      assert.are.equal(ember.memory_stats("cuda").in_use, before)
      local x = ember.zeros({1024, 1024}, { device = "cuda" })
      assert.is_true(cuda.memory_allocated(1) >= before + 4 * 1024 * 1024)
      local s = ember.memory_stats("cuda:1")
      assert.are.equal(s.in_use + s.cached, cuda.memory_reserved())
      assert.are.equal(ember.max_memory_allocated(), cuda.max_memory_allocated())
      local peak = cuda.max_memory_allocated()
      cuda.reset_peak_memory_stats()
      assert.is_true(cuda.max_memory_allocated() >= ember.live_bytes())
      assert.is_true(cuda.max_memory_allocated() <= peak)
      x = nil
      collectgarbage()
      collectgarbage()
      cuda.empty_cache()
      assert.are.equal(0, ember.memory_stats("cuda").cached)
      assert.is_nil(x)
    end)
  end)
end)
