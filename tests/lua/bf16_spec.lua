-- bfloat16 as a compute dtype on the CPU: every op against its float32
-- result on the same (bf16-rounded) inputs.
--
-- Tolerance: bfloat16 keeps 8 significant bits, so one rounding of a
-- result computed in float32 is off by at most 2^-9 relative (half an ulp)
-- and 2^-8 covers it with room. The kernels compute in float32 and round
-- once, so a single op must stay within TOL = 2^-8 of the float32 result,
-- measured against the largest reference magnitude (a row of softmax
-- or a sum can cancel, where a relative bound per element means nothing).
-- Gradients pass through several bf16 ops, each rounding once: they get
-- 4 * TOL.
local ember = require "ember"
local nn = require "ember.nn"

local TOL = 2 ^ -8

local function bf(t) return t:to("bfloat16") end
local function f32(t) return t:to("float32") end

-- max |got - want| / max(|want|, tiny), got converted to float32
local function rel_err(got, want)
  local scale = math.max(want:abs():max():item(), 1e-6)
  return (f32(got) - want):abs():max():item() / scale
end

local function close(got, want, tol, what)
  assert.are.equal("bfloat16", got.dtype)
  local e = rel_err(got, want)
  assert(e <= (tol or TOL), string.format("%s: error %.3g > %.3g", what, e, tol or TOL))
end

-- inputs rounded to bf16 once; the reference runs in float32 on the same values
local function pair(...)
  local x = bf(ember.randn(...))
  return x, f32(x)
end

describe("bfloat16 compute on the CPU", function()
  before_each(function() ember.manual_seed(7) end)

  it("nn.Linear converted to bfloat16 runs (the issue's example)", function()
    local l = nn.Linear(8, 8):to("bfloat16")
    local x = bf(ember.randn(4, 8))
    local y = l(x)
    assert.are.equal("bfloat16", y.dtype)
    local ref = f32(x):matmul(f32(l.weight):transpose(1, 2)) + f32(l.bias)
    close(y, ref, 2 * TOL, "linear") -- two ops: the product and the bias add each round
  end)

  it("matmul and bmm, every transpose, odd sizes", function()
    for _, sz in ipairs { { 3, 5, 7 }, { 64, 48, 96 }, { 130, 70, 257 } } do
      local m, k, n = sz[1], sz[2], sz[3]
      local a, a32 = pair(m, k)
      local b, b32 = pair(k, n)
      close(a:matmul(b), a32:matmul(b32), TOL, "matmul")
      close(a:transpose(1, 2):contiguous():transpose(1, 2):matmul(b), a32:matmul(b32), TOL, "matmul ta")
      close(a:matmul(b:transpose(1, 2):contiguous():transpose(1, 2)), a32:matmul(b32), TOL, "matmul tb")
    end
    local a, a32 = pair(4, 33, 17)
    local b, b32 = pair(4, 17, 9)
    close(ember.bmm(a, b), ember.bmm(a32, b32), TOL, "bmm")
    local w, w32 = pair(17, 9) -- broadcast: one matrix for every batch
    close(a:matmul(w), a32:matmul(w32), TOL, "batched @ matrix")
  end)

  it("elementwise ops, broadcasting and comparisons", function()
    local x, x32 = pair(6, 5)
    local y, y32 = pair(1, 5)
    close(x + y, x32 + y32, TOL, "add")
    close(x - y, x32 - y32, TOL, "sub")
    close(x * y, x32 * y32, TOL, "mul")
    close(x / (y:abs() + 1), x32 / (y32:abs() + 1), TOL, "div")
    close(x * 3 + 1, x32 * 3 + 1, TOL, "scalar ops")
    assert.are.same(x:lt(y):to("int64"):sum():item(), x32:lt(y32):to("int64"):sum():item())
    for _, op in ipairs { "exp", "tanh", "sigmoid", "relu", "gelu", "neg", "abs", "sin", "cos" } do
      close(x[op](x), x32[op](x32), TOL, op)
    end
    close(x:abs():sqrt(), x32:abs():sqrt(), TOL, "sqrt")
    close((x:abs() + 0.5):log(), (x32:abs() + 0.5):log(), TOL, "log")
    close(x:pow(2), x32:pow(2), TOL, "pow")
    close(x:clamp(-0.5, 0.5), x32:clamp(-0.5, 0.5), TOL, "clamp")
  end)

  it("reductions, softmax, layer_norm, cross_entropy", function()
    local x, x32 = pair(7, 300)
    close(x:sum(2), x32:sum(2), TOL, "sum")
    close(x:mean(1), x32:mean(1), TOL, "mean")
    close(x:max(2), x32:max(2), TOL, "max")
    close(x:var(2), x32:var(2), TOL, "var")
    close(x:softmax(2), x32:softmax(2), TOL, "softmax")
    close(x:log_softmax(2), x32:log_softmax(2), TOL, "log_softmax")
    local w, w32 = pair(300)
    local b, b32 = pair(300)
    close(ember.layer_norm(x, 1, w, b), ember.layer_norm(x32, 1, w32, b32), TOL, "layer_norm")
    local target = ember.tensor({ 1, 5, 9, 300, 2, 3, 4 }, { dtype = "int64" })
    close(ember.cross_entropy(x, target), ember.cross_entropy(x32, target), TOL, "cross_entropy")
  end)

  it("embedding, gather, index_select, index ops", function()
    local w, w32 = pair(10, 4)
    local ids = ember.tensor({ { 1, 3 }, { 10, 3 } }, { dtype = "int64" })
    close(ember.embedding(w, ids), ember.embedding(w32, ids), 0, "embedding")
  end)

  it("gradients of a bf16 chain against float32", function()
    local x, x32 = pair(5, 16)
    local w, w32 = pair(16, 8)
    local b, b32 = pair(8)
    x:requires_grad_(); x32:requires_grad_()
    w:requires_grad_(); w32:requires_grad_()
    local ln_w, ln_w32 = pair(8)
    ln_w:requires_grad_(); ln_w32:requires_grad_()
    local target = ember.tensor({ 1, 2, 3, 4, 8 }, { dtype = "int64" })
    local function loss(xx, ww, bb, lw)
      local h = ember.layer_norm((xx:matmul(ww) + bb):gelu(), 1, lw)
      return ember.cross_entropy(h:softmax(2):log(), target)
    end
    loss(x, w, b, ln_w):backward()
    loss(x32, w32, b32, ln_w32):backward()
    close(x.grad, x32.grad, 4 * TOL, "dx")
    close(w.grad, w32.grad, 4 * TOL, "dw")
    close(ln_w.grad, ln_w32.grad, 4 * TOL, "d ln weight")
  end)

  it("ember.cpu_info says what computes each dtype", function()
    local info = ember.cpu_info()
    assert.is_true(math.type(info.threads) == "integer" and info.threads >= 1)
    assert.truthy(info.float64:find("openblas", 1, true), info.float64)
    assert.truthy(info.float32:find("openblas", 1, true) and info.float32:find("onednn", 1, true),
      info.float32)
    if os.getenv("ONEDNN_MAX_CPU_ISA") == "AVX2" then
      assert.truthy(info.bfloat16:find("widened", 1, true), info.bfloat16)
    else
      assert.truthy(info.bfloat16:find("onednn", 1, true), info.bfloat16)
    end
  end)

  it("a model converted to bfloat16 saves BF16 safetensors that PyTorch reads", function()
    local checkpoint = require "ember.checkpoint"
    local m = nn.Linear(4, 3):to("bfloat16")
    local path = os.tmpname()
    checkpoint.save(path, { model = m })
    local py = os.tmpname()
    local f = assert(io.open(py, "w"))
    f:write([==[
import json, struct, sys, torch
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
for name, v in sorted(header.items()):
    if name == "__metadata__":
        continue
    a, b = v["data_offsets"]
    dt = {"BF16": torch.bfloat16, "F32": torch.float32}[v["dtype"]]
    t = torch.frombuffer(bytearray(data[a:b]), dtype=dt).reshape(v["shape"])
    print(name, v["dtype"], repr(float(t.float().sum())))
]==])
    f:close()
    local h = io.popen(("/usr/bin/python3 %q %q 2>&1"):format(py, path))
    local out = h:read("a")
    h:close()
    os.remove(py)
    os.remove(path)
    for _, name in ipairs { "weight", "bias" } do
      local dt, sum = out:match(name .. " (%S+) (%S+)")
      assert.are.equal("BF16", dt, out)
      assert(math.abs(tonumber(sum) - f32(m[name]):sum():item()) < 1e-6, out)
    end
  end)

  it("dropout and random draws in bf16", function()
    local x = bf(ember.ones(10000))
    local y = ember.dropout(x, 0.25, true)
    assert.are.equal("bfloat16", y.dtype)
    local kept = f32(y):gt(0):to("float32"):mean():item()
    assert(math.abs(kept - 0.75) < 0.03, "kept " .. kept)
    assert(math.abs(f32(y):max():item() - 4 / 3) < 2 ^ -7)
  end)
end)
