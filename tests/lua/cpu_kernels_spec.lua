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
end)
