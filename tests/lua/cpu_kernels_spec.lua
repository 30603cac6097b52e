-- The CPU backend's own row kernels after issue 25, item 4: softmax,
-- log_softmax, layer norm and cross entropy in float32 sum in 16 lanes and
-- take e^x from cpu_exp_f32 (backends/cpu/cpu_vmath.h), with an AVX-512
-- build where the CPU has AVX-512F. Each is checked against the same op
-- in float64 at row lengths around the lanes (16) and the exp chunk (256),
-- forward and backward; and ember.cpu_info() names the instruction set
-- they run.
local ember = require "ember"

local function rel(a, b)
  local d = (a:double() - b):abs():max():item()
  return d / math.max(b:abs():max():item(), 1e-30)
end

local lengths = { 1, 5, 15, 16, 17, 100, 255, 256, 257, 1000, 1027 }

local function cpu_flag(flag)
  local f = io.open("/proc/cpuinfo")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text:find("%s" .. flag .. "%s") ~= nil
end

describe("CPU row kernels in float32", function()
  it("softmax and log_softmax agree with float64, forward and backward", function()
    ember.manual_seed(3)
    for _, n in ipairs(lengths) do
      local x64 = ember.randn({ 7, n }, "float64") * 4
      local g64 = ember.randn({ 7, n }, "float64")
      for _, f in ipairs({ "softmax", "log_softmax" }) do
        local x32 = x64:float():requires_grad_()
        local y32 = x32[f](x32, 2)
        ;(y32 * g64:float()):sum():backward()
        local x = x64:clone():requires_grad_()
        local y = x[f](x, 2)
        ;(y * g64):sum():backward()
        assert.is_true(rel(y32, y) < 2e-6, ("%s n=%d: %g"):format(f, n, rel(y32, y)))
        assert.is_true(rel(x32.grad, x.grad) < 2e-5, ("%s grad n=%d: %g"):format(f, n, rel(x32.grad, x.grad)))
      end
    end
  end)

  it("softmax keeps -inf entries at 0 and a row of one value uniform", function()
    local x = ember.tensor({ { 0, -math.huge, 1, -math.huge }, { 2, 2, 2, 2 } })
    local y = x:softmax(2)
    assert.are.equal(0, y[1][2]:item())
    assert.are.equal(0, y[1][4]:item())
    assert.is_true(math.abs(y[2][3]:item() - 0.25) < 1e-7)
  end)

  it("layer norm agrees with float64, forward and backward", function()
    ember.manual_seed(4)
    for _, n in ipairs(lengths) do
      if n > 1 then
        local x64 = ember.randn({ 5, n }, "float64") * 3 + 1
        local w64, b64 = ember.randn({ n }, "float64"), ember.randn({ n }, "float64")
        local g64 = ember.randn({ 5, n }, "float64")
        local x32, w32 = x64:float():requires_grad_(), w64:float():requires_grad_()
        local y32 = ember.layer_norm(x32, { n }, w32, b64:float())
        ;(y32 * g64:float()):sum():backward()
        local x, w = x64:clone():requires_grad_(), w64:clone():requires_grad_()
        local y = ember.layer_norm(x, { n }, w, b64)
        ;(y * g64):sum():backward()
        assert.is_true(rel(y32, y) < 2e-6, ("layer_norm n=%d: %g"):format(n, rel(y32, y)))
        assert.is_true(rel(x32.grad, x.grad) < 1e-5, ("layer_norm dx n=%d: %g"):format(n, rel(x32.grad, x.grad)))
        assert.is_true(rel(w32.grad, w.grad) < 1e-5, ("layer_norm dw n=%d: %g"):format(n, rel(w32.grad, w.grad)))
      end
    end
  end)

  it("cross entropy agrees with float64, with label smoothing, forward and backward", function()
    ember.manual_seed(5)
    for _, n in ipairs(lengths) do
      local x64 = ember.randn({ 6, n }, "float64") * 3
      local y = (ember.rand(6) * (n - 0.001)):long() + 1
      local x32 = x64:float():requires_grad_()
      local l32 = ember.cross_entropy(x32, y, { label_smoothing = 0.1 })
      l32:backward()
      local x = x64:clone():requires_grad_()
      local l = ember.cross_entropy(x, y, { label_smoothing = 0.1 })
      l:backward()
      assert.is_true(rel(l32, l) < 2e-6, ("cross_entropy n=%d: %g"):format(n, rel(l32, l)))
      assert.is_true(rel(x32.grad, x.grad) < 2e-5, ("cross_entropy grad n=%d: %g"):format(n, rel(x32.grad, x.grad)))
    end
  end)

  it("ember.cpu_info() names the instruction set our own kernels run", function()
    local line = ember.cpu_info().float32
    local kernels = line:match("kernels: ([^;]*)")
    assert.truthy(kernels, line)
    if cpu_flag("avx512f") then
      assert.truthy(kernels:find("^avx512f %(softmax, layer norm"), kernels)
      assert.truthy(kernels:find("avx2 (casts", 1, true), kernels)
    elseif cpu_flag("avx2") then
      assert.truthy(kernels:find("^avx2 "), kernels)
    elseif cpu_flag("avx512f") == nil then
      return pending("no /proc/cpuinfo")
    else
      assert.truthy(kernels:find("^x86%-64"), kernels)
    end
  end)

  it("ember.cpu_info().team says how the thread team is used (backends/cpu/cpu_team.c)", function()
    local info = ember.cpu_info()
    assert.truthy(info.float32:find("; team: " .. info.team, 1, true), info.float32)
    if os.getenv("EMBER_CPU_TEAM") == "always" then
      assert.are.equal("always (EMBER_CPU_TEAM=always)", info.team)
    else
      assert.truthy(info.team:find("^adaptive, now [ps][ae]r[ai][la][l:]"), info.team)
      assert.truthy(info.team:find("%d+ switches to serial, %d+ regions and %d+ convolutions run serially%)$"), info.team)
    end
    local build = os.getenv("EMBER_BUILD_DIR") or "build"
    local p = io.popen(("EMBER_CPU_TEAM=always EMBER_PLUGIN_PATH='%s/plugins' EMBER_PLUGIN_PATH_ONLY=1 '%s/bin/ember' "
      .. "-e 'io.write(ember.cpu_info().team)' 2>&1"):format(build, build))
    local always = p:read("a")
    p:close()
    assert.are.equal("always (EMBER_CPU_TEAM=always)", always)
  end)

  it("ember.cpu_info().tile_gemm names the path of the attention's float32 tiles", function()
    local info = ember.cpu_info()
    local part = info.float32:match("attention: ([^;]*)")
    assert.truthy(part, info.float32)
    assert.are.equal(part:match("^(%S+)"), info.tile_gemm)
    local forced, cap = os.getenv("EMBER_CPU_TILE_GEMM"), os.getenv("ONEDNN_MAX_CPU_ISA")
    local known = { avx512 = true, avx2 = true, plain = true, blas = true }
    if forced and known[forced] and (forced ~= "avx512" or cpu_flag("avx512f"))
       and (forced ~= "avx2" or cpu_flag("avx2")) then
      assert.are.equal(forced, info.tile_gemm)
      assert.truthy(part:find("forced by EMBER_CPU_TILE_GEMM", 1, true), part)
    elseif forced or cap then
      assert.truthy(known[info.tile_gemm], part)
    elseif cpu_flag("avx512f") then
      assert.are.equal("avx512", info.tile_gemm)
    elseif cpu_flag("avx2") and cpu_flag("fma") then
      assert.are.equal("avx2", info.tile_gemm)
    elseif cpu_flag("avx512f") == nil then
      return pending("no /proc/cpuinfo")
    else -- no kernel of ours beats OpenBLAS there (cpu_tile_gemm.c, tg_best)
      assert.are.equal("blas", info.tile_gemm)
    end
  end)

  it("EMBER_CPU_TILE_GEMM forces a path; one the CPU lacks or an unknown name falls back, saying so", function()
    -- the path is chosen once per process: each case runs a child ember
    local build = os.getenv("EMBER_BUILD_DIR") or "build"
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write("local i = ember.cpu_info() print(i.tile_gemm .. '|' .. i.float32:match('attention: ([^;]*)'))")
    f:close()
    local function info_with(v)
      local p = assert(io.popen(("env -u ONEDNN_MAX_CPU_ISA EMBER_CPU_TILE_GEMM=%s '%s/bin/ember' '%s' 2>&1")
        :format(v, build, script)))
      local out = p:read("a")
      p:close()
      local got, part = out:match("^(%S+)|([^\n]*)")
      assert.truthy(got, out)
      return got, part
    end
    for _, path in ipairs({ "plain", "blas" }) do
      local got, part = info_with(path)
      assert.are.equal(path, got, part)
    end
    local got, part = info_with("amx")
    assert.truthy(got and got ~= "amx", part)
    assert.truthy(part:find("EMBER_CPU_TILE_GEMM=amx is not", 1, true), part)
    if cpu_flag("avx512f") == false then
      got, part = info_with("avx512")
      assert.truthy(part:find("does not run on this CPU", 1, true), part)
    end
    os.remove(script)
  end)
end)
