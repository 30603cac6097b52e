-- The CPU backend's forced paths as a user meets them (issue 25): each
-- variable that picks a kernel path (EMBER_CPU_TILE_GEMM, EMBER_CPU_SGEMM,
-- EMBER_CPU_BF16, EMBER_CPU_BF16_DOT, EMBER_CPU_ATTENTION_ROWS,
-- ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE) gives the results of the default
-- path -- products, softmax, layer norm, attention forward and backward, a
-- convolution, in float32 and bfloat16 -- and ember.cpu_info() says which
-- path ran. Each case runs in a fresh process (the paths are chosen once,
-- when the backend loads or first asked).
local build = os.getenv("EMBER_BUILD_DIR") or "build"

local SCRIPT = [[
local F = ember.nn.functional
local out = {}
local function add(name, t) out[name] = t:detach():float():contiguous() end
for _, dt in ipairs({"float32", "bfloat16"}) do
  ember.manual_seed(7)
  -- below and above oneDNN's 2^21 multiply-adds, a gemv, odd sizes
  for _, s in ipairs({{1, 64, 96}, {37, 53, 29}, {200, 256, 160}, {130, 130, 130}}) do
    local a, b = ember.randn(s[1], s[2]):to(dt), ember.randn(s[2], s[3]):to(dt)
    add(dt .. " matmul " .. table.concat(s, "x"), a:matmul(b))
    add(dt .. " matmul^T " .. table.concat(s, "x"), b:t():matmul(a:t()))
  end
  local x = ember.randn(5, 33, 70):to(dt):requires_grad_()
  local w, bias = ember.randn(70):to(dt):requires_grad_(), ember.randn(70):to(dt):requires_grad_()
  local s, ln = F.softmax(x, -1), F.layer_norm(x, {70}, w, bias, 1e-5)
  add(dt .. " softmax", s)
  add(dt .. " layer_norm", ln)
  local g = ember.randn(5, 33, 70):to(dt)
  local gx, gw, gb = table.unpack(ember.autograd.grad({(s * g):sum() + (ln * g):sum()}, {x, w, bias}))
  add(dt .. " softmax+layer_norm grad x", gx)
  add(dt .. " layer_norm grad weight", gw)
  add(dt .. " layer_norm grad bias", gb)
  -- one query row (the rows path), two, a square causal block, uneven tiles
  for _, L in ipairs({{1, 128}, {2, 40}, {64, 64}, {77, 130}}) do
    for _, causal in ipairs({false, true}) do
      local q = ember.randn(2, 4, L[1], 32):to(dt):requires_grad_()
      local k = ember.randn(2, 4, L[2], 32):to(dt):requires_grad_()
      local v = ember.randn(2, 4, L[2], 32):to(dt):requires_grad_()
      local o = ember.scaled_dot_product_attention(q, k, v, nil, 0, causal)
      local go = ember.randn(2, 4, L[1], 32):to(dt)
      local gq, gk, gv = table.unpack(ember.autograd.grad({(o * go):sum()}, {q, k, v}))
      local tag = ("%s attention %dx%d%s"):format(dt, L[1], L[2], causal and " causal" or "")
      add(tag, o)
      -- (one query under PyTorch's top-left causal mask sees one key: its q
      -- and k gradients are 0, each path's rounding noise apart)
      if not (causal and L[1] == 1) then
        add(tag .. " grad q", gq)
        add(tag .. " grad k", gk)
      end
      add(tag .. " grad v", gv)
    end
  end
  local xi = ember.randn(2, 16, 12, 12):to(dt):requires_grad_()
  local wc = ember.randn(32, 16, 3, 3):to(dt):requires_grad_()
  local yc = F.conv2d(xi, wc, nil, 1, 1)
  add(dt .. " conv2d", yc)
  local gxi, gwc = table.unpack(ember.autograd.grad({(yc * ember.randn(2, 32, 12, 12):to(dt)):sum()}, {xi, wc}))
  add(dt .. " conv2d grad input", gxi)
  add(dt .. " conv2d grad weight", gwc)
end
ember.save(out, arg[1])
local info = ember.cpu_info()
print("float32=" .. info.float32)
print("bfloat16=" .. info.bfloat16)
print("blas=" .. info.blas)
-- what the profiler says computed a product (from the same line)
local a, b = ember.randn(300, 300), ember.randn(300, 300)
local prof <close> = ember.profiler.start()
a:matmul(b)
prof:stop()
for _, r in ipairs(prof:stats()) do if r.name == "gemm" then print("profiler=" .. tostring(r.impl)) end end
]]

local script = os.tmpname()
do
  local f = assert(io.open(script, "w"))
  f:write(SCRIPT)
  f:close()
end

-- The variables the cases set, removed from the children's environment
-- (the machine's OPENBLAS_CORETYPE, a ctest variant's path) unless a case
-- sets them.
local UNSET = {"OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "EMBER_TEST_OPENBLAS_GUESS",
  "EMBER_CPU_TILE_GEMM", "EMBER_CPU_SGEMM", "EMBER_CPU_BF16", "EMBER_CPU_BF16_DOT", "EMBER_CPU_ATTENTION_ROWS",
  "EMBER_TEST_AMX_SELFTEST",
  "ONEDNN_MAX_CPU_ISA"}

-- Runs SCRIPT with `env` (a shell prefix): its results and cpu_info's lines.
-- The convolutions run on oneDNN's layouts in every child: where a shape
-- has several candidates the first call times them (backends/cpu/cpu_conv.c),
-- and two processes may keep different ones, whose bits differ.
local function child(env)
  local path = os.tmpname()
  local cmd = ("env -u %s EMBER_CONV_LAYOUT=blocked %s '%s/bin/ember' '%s' '%s' 2>&1"):format(table.concat(UNSET, " -u "),
    env, build, script, path)
  local p = assert(io.popen(cmd))
  local text = p:read("a")
  local ok = p:close()
  assert.is_true(ok, env .. ": " .. text)
  local results = ember.load(path)
  os.remove(path)
  local info = {}
  for k, v in text:gmatch("(%w+)=([^\n]*)") do info[k] = v end
  return results, info
end

-- bfloat16 paths round at different points (the products' inputs, P and
-- dS in the attention), so they agree within a few bfloat16 steps of the
-- magnitudes; float32 paths within float32 sums' order. The roundings to
-- bfloat16 (EMBER_CPU_BF16) all give em_f32_to_bf16's bits: exact.
local function compare(env, got, want, exact)
  local names = {}
  for k in pairs(want) do names[#names + 1] = k end
  table.sort(names)
  assert.is_true(#names > 50, "results: " .. #names)
  for _, k in ipairs(names) do
    assert.truthy(got[k], env .. ": no " .. k)
    local tol = exact and 0 or k:find("^bfloat16") and 2 ^ -5 or 1e-5
    local x, y = got[k]:double(), want[k]:double()
    local err = ((x - y):abs():max() / math.max(y:abs():max():item(), 1e-12)):item()
    assert.is_true(err <= tol, ("%s: %s differs from the default path by %.3g (relative, allowed %.3g)")
      :format(env, k, err, tol))
  end
end

local flags = ""
do
  local f = io.open("/proc/cpuinfo")
  if f then flags = f:read("a"):match("\nflags%s*:([^\n]*)") or "" ; f:close() end
end
local function has(flag) return (" " .. flags .. " "):find(" " .. flag .. " ", 1, true) ~= nil end

-- env, the cpu_info line, what it must say, and the CPU flags the path needs
local CASES = {
  {"EMBER_CPU_TILE_GEMM=avx2", "float32", "attention: avx2 (ember's 6x16 FMA tiles, forced by EMBER_CPU_TILE_GEMM)",
    needs = {"avx2", "fma"}},
  {"EMBER_CPU_TILE_GEMM=plain", "float32", "attention: plain (GNU C vectors, 4x8 blocks, forced by EMBER_CPU_TILE_GEMM)"},
  {"EMBER_CPU_TILE_GEMM=blas", "float32", "attention: blas (OpenBLAS sgemm, forced by EMBER_CPU_TILE_GEMM)"},
  {"EMBER_CPU_SGEMM=openblas", "float32", "gemm: openblas, forced by EMBER_CPU_SGEMM; gemv: openblas sgemv",
    profiler = "^openblas sgemm %(openblas [%d.]+, core %w+%), forced by EMBER_CPU_SGEMM$"},
  -- one row or column goes to oneDNN too
  {"EMBER_CPU_SGEMM=onednn", "float32", "gemm: onednn (.-), forced by EMBER_CPU_SGEMM; gemv: onednn %1, forced by "
    .. "EMBER_CPU_SGEMM;", pattern = true, profiler = "^onednn .-, forced by EMBER_CPU_SGEMM$"},
  {"EMBER_CPU_BF16=plain", "bfloat16", "rounding to bfloat16: plain (the scalar rule in vector clones), EMBER_CPU_BF16=plain",
    exact = true},
  {"EMBER_CPU_BF16=avx512", "bfloat16", "rounding to bfloat16: avx512f (integer rounding), EMBER_CPU_BF16=avx512",
    needs = {"avx512f"}, exact = true},
  {"EMBER_CPU_BF16_DOT=plain", "bfloat16",
    "attention: plain (bfloat16 values, float32 tile gemm, EMBER_CPU_BF16_DOT=plain)", needs = {"avx512_bf16"}},
  {"EMBER_CPU_BF16_DOT=avx512_bf16", "bfloat16",
    "attention: avx512_bf16 (vdpbf16ps, no amx: EMBER_CPU_BF16_DOT=avx512_bf16)", needs = {"avx512_bf16"}},
  {"EMBER_CPU_BF16_DOT=amx_emulated", "bfloat16",
    "attention: amx emulated (tdpbf16ps tiles modelled in C, EMBER_CPU_BF16_DOT=amx_emulated)"},
  -- a decoding step's few query rows: the rows path, or the tiles
  {"EMBER_CPU_ATTENTION_ROWS=0", "float32", "tiles), no rows path (EMBER_CPU_ATTENTION_ROWS=0); "},
  {"EMBER_CPU_ATTENTION_ROWS=1000", "bfloat16", ", rows path up to 1000 query rows (EMBER_CPU_ATTENTION_ROWS=1000); "},
  {"ONEDNN_MAX_CPU_ISA=AVX2", "bfloat16", "rounding to bfloat16: plain (the scalar rule in vector clones), "
    .. "ONEDNN_MAX_CPU_ISA=AVX2", needs = {"avx512f"}},
  {"OPENBLAS_CORETYPE=Prescott", "blas", "core Prescott (set by the user (OPENBLAS_CORETYPE=Prescott)"},
  {"OPENBLAS_CORETYPE=Haswell", "blas", "core Haswell (set by the user (OPENBLAS_CORETYPE=Haswell)",
    needs = {"avx2"}},
  -- every float32 product (gemm, gemv, the attention's tiles) on OpenBLAS, under a core the user set
  -- and under one ember set
  {"OPENBLAS_CORETYPE=Prescott EMBER_CPU_SGEMM=openblas EMBER_CPU_TILE_GEMM=blas", "blas", "core Prescott (set by the user"},
  {"EMBER_TEST_OPENBLAS_GUESS=Prescott EMBER_CPU_SGEMM=openblas EMBER_CPU_TILE_GEMM=blas", "blas",
    "(set by ember from cpuid (", needs = {"avx"}},
}

describe("the CPU backend's forced paths", function()
  teardown(function() os.remove(script) end)
  local default, default_info = child("")
  local openblas = default_info.blas and default_info.blas:find("^openblas ") ~= nil

  it("the default path's cpu_info names its bfloat16 rounding and attention tiles", function()
    assert.truthy(default_info.bfloat16:find("; rounding to bfloat16: ", 1, true), default_info.bfloat16)
    assert.truthy(default_info.bfloat16:find("; attention: ", 1, true), default_info.bfloat16)
    assert.truthy(default_info.float32:find("; attention: ", 1, true), default_info.float32)
    assert.truthy(default_info.float32:find("attention: [^;]*, rows path up to %d+ query rows; "), default_info.float32)
  end)

  for _, c in ipairs(CASES) do
    it(c[1] .. " gives the default path's results, and cpu_info says so", function()
      for _, flag in ipairs(c.needs or {}) do
        if not has(flag) then return pending("this CPU has no " .. flag) end
      end
      if c[1]:find("^OPENBLAS") and not openblas then return pending("the CPU backend is not on OpenBLAS") end
      local got, info = child(c[1])
      assert.truthy(info[c[2]] and info[c[2]]:find(c[3], 1, not c.pattern), ("%s: cpu_info().%s is %s")
        :format(c[1], c[2], tostring(info[c[2]])))
      if c.profiler then assert.truthy(info.profiler:find(c.profiler), c[1] .. ": the profiler says " .. info.profiler) end
      compare(c[1], got, default, c.exact)
    end)
  end

  it("a variable's value that is not a path is named, and the default runs", function()
    local got, info = child("EMBER_CPU_BF16=fast EMBER_CPU_BF16_DOT=fast EMBER_CPU_TILE_GEMM=fast EMBER_CPU_SGEMM=fast")
    assert.truthy(info.float32:find("EMBER_CPU_SGEMM=fast is not openblas or onednn", 1, true), info.float32)
    assert.truthy(info.bfloat16:find("EMBER_CPU_BF16=fast is not plain or avx512", 1, true), info.bfloat16)
    assert.truthy(info.bfloat16:find("EMBER_CPU_BF16_DOT=fast is not plain, avx512_bf16, amx or amx_emulated", 1, true),
      info.bfloat16)
    assert.truthy(info.float32:find("EMBER_CPU_TILE_GEMM=fast is not avx512, avx2, plain or blas", 1, true),
      info.float32)
    compare("the unknown values", got, default)
  end)

  it("the AMX path checks itself before the attention trusts it: where it faults, avx512_bf16 runs, saying why", function()
    -- EMBER_TEST_AMX_SELFTEST=1 runs the self-check whatever the CPU: on one
    -- without AMX its first tile instruction is illegal (SIGILL), caught
    if not has("avx512_bf16") or has("amx_bf16") then return pending("needs AVX512_BF16 and no AMX") end
    local got, info = child("EMBER_TEST_AMX_SELFTEST=1")
    assert.truthy(info.bfloat16:find("attention: avx512_bf16 (vdpbf16ps, no amx: its self-check faulted (signal 4))",
      1, true), info.bfloat16)
    compare("the AMX self-check", got, default, true)
  end)

  it("OPENBLAS_NUM_THREADS is said not to be used: ember's team splits the products", function()
    if not openblas then return pending("the CPU backend is not on OpenBLAS") end
    local _, info = child("OPENBLAS_NUM_THREADS=3")
    assert.truthy(info.blas:find("OPENBLAS_NUM_THREADS=3 not used", 1, true), info.blas)
    assert.falsy(default_info.blas:find("not used", 1, true), default_info.blas)
  end)
end)
