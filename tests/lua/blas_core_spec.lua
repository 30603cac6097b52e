-- The OpenBLAS core the CPU backend runs (issue 25, item 1): a core older
-- than the CPU that OpenBLAS chose on its own is replaced by one from
-- cpuid; a core the user set (OPENBLAS_CORETYPE) is kept and reported;
-- float32 products (sgemm, sgemv) and float64 ones (dgemm) agree with a
-- reference summed without BLAS under each. Each case
-- runs the ember program in a fresh process, because OpenBLAS chooses its
-- core when it loads. EMBER_TEST_OPENBLAS_GUESS=Prescott makes the backend
-- start from Prescott as if OpenBLAS had guessed it (what Debian's 0.3.21
-- does on a Xeon it does not know), also when a core's name is asked
-- that OpenBLAS does not take.
local run_child = require("tests.lua.helpers.child")

-- Runs a chunk in a child ember with `env` (a shell prefix) and the user's
-- OPENBLAS_CORETYPE removed unless env sets it; returns its output.
local function child(env)
  local out = run_child.run([[
    local info = ember.cpu_info()
    ember.manual_seed(1)
    -- 200 x 256 x 160: below oneDNN's 2^21 multiply-adds, so OpenBLAS's
    -- packed sgemm kernel (not the tiny-product loops) computes it
    local x, w = ember.randn(200, 256, "float64"), ember.randn(256, 160, "float64")
    -- the reference without BLAS: products summed by ember's own loops
    local ref = (x:unsqueeze(3) * w:unsqueeze(1)):sum(2)
    local function rel(got) return ((got:double() - ref):abs():max() / ref:abs():max()):item() end
    local rows = x:float():matmul(w:float())               -- sgemm
    local row = x:narrow(1, 1, 1):float():matmul(w:float()) -- sgemv (one row)
    local ref1 = ref:narrow(1, 1, 1)
    local err1 = ((row:double() - ref1):abs():max() / ref1:abs():max()):item()
    print("env=" .. tostring(os.getenv("OPENBLAS_CORETYPE")))
    print("err64=" .. rel(x:matmul(w)))                     -- dgemm
    print("blas=" .. tostring(info.blas))
    print("err=" .. math.max(rel(rows), err1))
  ]], env, -- (OPENBLAS_NUM_THREADS adds a note after the core's reason)
    {"OPENBLAS_CORETYPE", "EMBER_TEST_OPENBLAS_GUESS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS"})
  local blas, err = out:match("blas=([^\n]*)\nerr=([^\n]*)")
  assert.truthy(blas, out)
  -- float64 products under the same core, to float64's rounding
  local err64 = tonumber(out:match("err64=([^\n]*)"))
  assert.is_true(err64 ~= nil and err64 < 1e-13, blas .. ": float64 relative error " .. tostring(err64))
  return blas, tonumber(err), out
end

local function core_of(blas) return blas:match("core (%S+)") end

-- The cores ember may set from cpuid (AVX and newer), by the names
-- OpenBLAS gives them.
local NEWER = {Sandybridge = true, Haswell = true, SkylakeX = true, Cooperlake = true, SapphireRapids = true}

describe("the OpenBLAS core", function()
  local base = child("")
  local openblas = base:find("^openblas ") ~= nil
  -- a CPU with AVX or better has a core newer than Prescott's SSE3 ones
  local cpuinfo = io.open("/proc/cpuinfo")
  local flags = cpuinfo and cpuinfo:read("a") or ""
  local avx = flags:find("%savx%s") ~= nil
  local avx512bf16 = flags:find("%savx512f%s") ~= nil and flags:find("%savx512_bf16%s") ~= nil
  if cpuinfo then cpuinfo:close() end

  it("ember.cpu_info().blas names the library, the core and why", function()
    if not openblas then return pending("the CPU backend is not on OpenBLAS: " .. base) end
    assert.truthy(base:find("^openblas %d+%.%d+%.%d+, core %S+ %(.+%)$"), base)
    assert.truthy(ember.cpu_info().float32:find("; blas: openblas", 1, true))
    assert.truthy(ember.cpu_info().float64:find("; blas: openblas", 1, true))
  end)

  it("a core OpenBLAS guessed older than the CPU is replaced by one from cpuid", function()
    if not (openblas and avx) then return pending("needs OpenBLAS on a CPU with AVX") end
    local blas, err = child("EMBER_TEST_OPENBLAS_GUESS=Prescott")
    assert.are_not.equal("Prescott", core_of(blas), blas)
    assert.truthy(NEWER[core_of(blas)], blas)
    assert.truthy(blas:find("set by ember from cpuid", 1, true), blas)
    assert.truthy(blas:find("OpenBLAS chose Prescott", 1, true), blas)
    assert.is_true(err < 1e-5, blas .. ": relative error " .. err)
  end)

  it("a core OpenBLAS does not take by name leads to the next one it does", function()
    -- 0.3.21 has Cooperlake's kernels but not the name in its
    -- force_coretype: asked for it, it chooses from cpuid again, Prescott
    -- on the Xeon of issue 25. The guess stands in for that cpuid choice.
    if not (openblas and avx) then return pending("needs OpenBLAS on a CPU with AVX") end
    local blas, err, out = child("EMBER_TEST_OPENBLAS_GUESS=Prescott OPENBLAS_VERBOSE=2")
    assert.truthy(NEWER[core_of(blas)], blas)
    -- whatever it refused, the core it runs is one it took: no refusal of it
    assert.falsy(out:find("Core not found: " .. core_of(blas) .. "\n", 1, true), out)
    assert.is_true(err < 1e-5, blas .. ": relative error " .. err)
  end)

  it("an OPENBLAS_CORETYPE that OpenBLAS does not take is reported, and judged as OpenBLAS's own choice", function()
    if not openblas then return pending("the CPU backend is not on OpenBLAS") end
    local blas, err, out = child("OPENBLAS_CORETYPE=nonsense")
    assert.truthy(blas:find("OPENBLAS_CORETYPE=nonsense is not a core this OpenBLAS takes", 1, true), blas)
    assert.falsy(blas:find("set by the user", 1, true), blas)
    assert.truthy(out:find("env=nonsense\n", 1, true), out) -- the user's variable is left as it was
    assert.is_true(err < 1e-5, blas .. ": relative error " .. err)
    if not avx then return end
    local long = ("nonsense"):rep(10) -- longer than any core's name
    blas, err, out = child("OPENBLAS_CORETYPE=" .. long .. " EMBER_TEST_OPENBLAS_GUESS=Prescott")
    assert.truthy(NEWER[core_of(blas)], blas)
    assert.truthy(blas:find("is not a core this OpenBLAS takes; set by ember from cpuid", 1, true), blas)
    assert.truthy(out:find("env=" .. long .. "\n", 1, true), out)
    assert.is_true(err < 1e-5, blas .. ": relative error " .. err)
  end)

  it("the user's OPENBLAS_CORETYPE is kept, and reported as older than the CPU", function()
    if not (openblas and avx) then return pending("needs OpenBLAS on a CPU with AVX") end
    local blas, err = child("OPENBLAS_CORETYPE=Prescott EMBER_TEST_OPENBLAS_GUESS=Haswell")
    assert.are.equal("Prescott", core_of(blas), blas)
    assert.truthy(blas:find("set by the user (OPENBLAS_CORETYPE=Prescott)", 1, true), blas)
    assert.truthy(blas:find("older than this CPU's", 1, true), blas)
    assert.truthy(blas:find("unset it for ember's choice", 1, true), blas)
    local out = select(3, child("OPENBLAS_CORETYPE=Prescott EMBER_TEST_OPENBLAS_GUESS=Haswell"))
    assert.truthy(out:find("env=Prescott\n", 1, true), out)
    assert.is_true(err < 1e-5, blas .. ": relative error " .. err)
  end)

  it("an older core's name that OpenBLAS runs as another core is the user's choice, kept", function()
    -- 0.3.21 takes OPENBLAS_CORETYPE=Katmai (no "Core not found") and runs
    -- it as Prescott: the user asked for an SSE core, ember must not replace it
    if not (openblas and avx) then return pending("needs OpenBLAS on a CPU with AVX") end
    local blas, err, out = child("OPENBLAS_CORETYPE=Katmai OPENBLAS_VERBOSE=2")
    if out:find("Core not found: Katmai", 1, true) then return pending("this OpenBLAS does not take Katmai") end
    local ran = out:match("Core: (%S+)") -- what OpenBLAS ran for the name
    assert.are.equal(ran, core_of(blas), blas)
    assert.falsy(NEWER[core_of(blas)], blas)
    assert.truthy(blas:find("set by the user (OPENBLAS_CORETYPE=Katmai", 1, true), blas)
    assert.truthy(blas:find("kept as asked", 1, true), blas)
    assert.truthy(out:find("env=Katmai\n", 1, true), out)
    assert.is_true(err < 1e-5, blas .. ": relative error " .. err)
  end)

  it("an AVX-512 core is not older than an AVX512_BF16 CPU for float32 and float64 products", function()
    -- SkylakeX's and Cooperlake's sgemm are the same kernels (Cooperlake adds bfloat16 ones)
    if not (openblas and avx512bf16) then return pending("needs OpenBLAS on a CPU with AVX512_BF16") end
    local blas, err = child("OPENBLAS_CORETYPE=SkylakeX")
    assert.are.equal("SkylakeX", core_of(blas), blas)
    assert.are.equal("set by the user (OPENBLAS_CORETYPE=SkylakeX)", blas:match("%((.*)%)$"), blas)
    assert.is_true(err < 1e-5, blas .. ": relative error " .. err)
    blas = child("EMBER_TEST_OPENBLAS_GUESS=SkylakeX")
    assert.are.equal("SkylakeX", core_of(blas), blas)
    assert.truthy(blas:find("(chosen by OpenBLAS from cpuid)", 1, true), blas)
  end)

  it("float32 products agree with float64 under the core OpenBLAS chose", function()
    if not openblas then return pending("the CPU backend is not on OpenBLAS") end
    local blas, err = child("")
    assert.is_true(err < 1e-5, blas .. ": relative error " .. err)
  end)
end)
