-- What a torch.profiler user tries with ember.profile / ember.profiler
-- (issue 25, item 5): a Transformer classifier's training step with and
-- without autocast, errors, ranges across runs, trace files that cannot be
-- written. Each block after the first is a defect found by probing; its
-- test fails without the fix.
local ember = require "ember"
local core = require "ember.core"
local nn = ember.nn
local raises_here = require("tests.lua.helpers.parity").raises_here

-- embedding + encoder layer + mean pool + Linear, cross-entropy, AdamW
local function classifier(bf16)
  ember.manual_seed(0)
  local V, D, H, L, B, C, FF = 50, 32, 4, 8, 4, 3, 64
  local emb = nn.Embedding(V, D)
  local enc = nn.TransformerEncoderLayer(D, H, { dim_feedforward = FF, dropout = 0.0 })
  local head = nn.Linear(D, C)
  local params = emb:parameters()
  for _, m in ipairs { enc, head } do
    for _, p in ipairs(m:parameters()) do params[#params + 1] = p end
  end
  local opt = ember.optim.AdamW(params, { lr = 1e-3 })
  local x = ember.randint(1, V + 1, { B, L })
  local y = ember.randint(1, C + 1, { B })
  local function loss_of() return nn.functional.cross_entropy(head(enc(emb(x)):mean(2)), y) end
  local function step()
    opt:zero_grad()
    local loss = bf16 and ember.autocast("bfloat16", loss_of) or loss_of()
    loss:backward()
    opt:step()
  end
  -- the hand count of the forward products: in_proj, out_proj, two FFN
  -- layers on B*L rows, the head on B rows
  local flops = 2 * B * L * D * 3 * D + 2 * B * L * D * D + 2 * 2 * B * L * D * FF + 2 * B * D * C
  return step, flops, #params
end

local function row(prof, name, phase)
  for _, r in ipairs(prof:stats()) do
    if r.name == name and r.phase == phase then return r end
  end
end

-- The trace's complete events, checked: fields, and spans nested per thread.
local function read_trace(prof)
  local path = os.tmpname()
  prof:export_chrome_trace(path)
  local f = assert(io.open(path))
  local trace = core._json_decode(f:read("a"))
  f:close()
  os.remove(path)
  local spans, by_tid = {}, {}
  for _, e in ipairs(trace.traceEvents) do
    if e.ph == "X" then
      for _, k in ipairs { "name", "ts", "dur", "pid", "tid" } do assert.truthy(e[k], k) end
      assert.is_true(e.dur >= 0)
      spans[#spans + 1] = e
      by_tid[e.tid] = by_tid[e.tid] or {}
      table.insert(by_tid[e.tid], e)
    end
  end
  for _, list in pairs(by_tid) do
    table.sort(list, function(a, b) return a.ts < b.ts or (a.ts == b.ts and a.dur > b.dur) end)
    local stack = {}
    for _, e in ipairs(list) do
      while #stack > 0 and stack[#stack].ts + stack[#stack].dur <= e.ts do stack[#stack] = nil end
      local top = stack[#stack]
      -- the writer keeps nanoseconds: 0.001 us of rounding
      if top then assert(e.ts + e.dur <= top.ts + top.dur + 0.0015, e.name .. " overlaps " .. top.name) end
      stack[#stack + 1] = e
    end
  end
  return spans
end

describe("ember.profile of a Transformer classifier's training step", function()
  for _, bf16 in ipairs { false, true } do
    it(bf16 and "under autocast(bfloat16)" or "in float32", function()
      local step, flops, nparams = classifier(bf16)
      step()
      local prof = ember.profile(step)
      local r = row(prof, "gemm", "forward")
      assert.are.equal(5, r.calls)
      assert.are.equal(flops, r.flops)
      assert.are.equal(2 * flops, row(prof, "gemm", "backward").flops)
      assert.truthy(row(prof, "attention", "forward"))
      assert.truthy(row(prof, "attention_grad", "backward"))
      assert.truthy(row(prof, "linear backward", "backward"))
      assert.are.equal(nparams, row(prof, "adamw_step", "forward").calls)
      if bf16 then assert.truthy(row(prof, "cast", "forward")) end
      for _, s in ipairs(prof:stats()) do
        assert(s.self >= 0 and s.total >= s.self, s.name)
      end
      local spans = read_trace(prof)
      assert.are.equal(#prof.events, #spans)
      local backward = 0
      for _, e in ipairs(spans) do
        if e.args.phase == "backward" then backward = backward + 1 end
      end
      assert.is_true(backward > 0)
    end)
  end

  it("records the same ops with one thread or two", function()
    local was = ember.get_num_threads()
    local counts = {}
    for _, n in ipairs { 1, 2 } do
      ember.set_num_threads(n)
      local step = classifier(false)
      step()
      counts[n] = #ember.profile(step).events
    end
    ember.set_num_threads(was)
    assert.are.equal(counts[1], counts[2])
  end)
end)

describe("export_chrome_trace reports a file it cannot write (it returned as if written)", function()
  local prof = ember.profile(function() ember.ones(2):exp() end)
  it("a full device", function()
    local f = io.open("/dev/full", "w")
    if not f then return pending("no /dev/full here") end
    f:close()
    raises_here(function() prof:export_chrome_trace("/dev/full") end, "export_chrome_trace: /dev/full:")
  end)
  it("a path that is not a string, at the user's line (it was io.open's error in profiler.lua)", function()
    raises_here(function() prof:export_chrome_trace() end, "export_chrome_trace: path must be a string, got nil")
    raises_here(function() prof:export_chrome_trace(42) end, "got number")
  end)
  it("a long profile, written in pieces: all of it, or the error", function()
    local x = ember.ones(2)
    local big = ember.profile(function() for _ = 1, 5000 do x:neg() end end)
    assert.are.equal(5000, #read_trace(big))
    if io.open("/dev/full", "w") then
      raises_here(function() big:export_chrome_trace("/dev/full") end, "/dev/full: No space left on device")
    end
  end)
  it("a missing folder", function()
    raises_here(function() prof:export_chrome_trace("/nonexistent-dir/trace.json") end,
      "export_chrome_trace: /nonexistent-dir/trace.json")
  end)
end)

describe("a running profile's report raises at the user's line (it named profiler.lua)", function()
  it("table, stats, total, export", function()
    local p <close> = ember.profiler.start()
    raises_here(function() local _ = p:table() end, "stop the profile first")
    raises_here(function() local _ = p:key_averages():table { row_limit = 3 } end, "stop the profile first")
    raises_here(function() local _ = p:stats() end, "stop the profile first")
    raises_here(function() local _ = p:total() end, "stop the profile first")
    raises_here(function() p:export_chrome_trace(os.tmpname()) end, "stop the profile first")
    assert.are.equal("ember.Profile (running)", tostring(p))
  end)
end)

describe("a range closes only its own span (one of an earlier run closed the new run's)", function()
  local function parent_of(prof, name)
    for _, e in ipairs(prof.events) do
      if e.name == name then return e.parent > 0 and prof.events[e.parent].name or nil end
    end
  end
  it("a range left open past its profile", function()
    local p1 = ember.profiler.start()
    local stale = ember.profiler.range("stale")
    p1:stop()
    local prof = ember.profile(function()
      local r <close> = ember.profiler.range("mine")
      getmetatable(stale).__close(stale) -- what `local stale <close>` does at its scope's end
      ember.ones(2):exp()
    end)
    assert.are.equal("mine", parent_of(prof, "exp"))
  end)
  it("a range opened before the profile started", function()
    local early = ember.profiler.range("early") -- no profile: nothing to record
    local prof = ember.profile(function()
      local r <close> = ember.profiler.range("mine")
      getmetatable(early).__close(early)
      ember.ones(2):exp()
    end)
    assert.are.equal("mine", parent_of(prof, "exp"))
  end)
  it("its name is a string (or a number), as record_function's", function()
    raises_here(function() local r <close> = ember.profiler.range() end, "name must be a string, got nil")
    raises_here(function() local r <close> = ember.profiler.record_function({}) end, "got table")
    local prof = ember.profile(function() local r <close> = ember.profiler.range(7) end)
    assert.are.equal("7", prof.events[1].name)
  end)
end)

describe("causal attention with fewer keys than queries counts the pairs it computes", function()
  it("bottom-right aligned: the last Lk queries see 1..Lk keys (it counted Lq x Lk)", function()
    local a = ember.Attention { heads = 2, head_dim = 8 }
    local q = ember.randn(1, 2, 8, 8)
    local k, v = ember.randn(1, 2, 4, 8), ember.randn(1, 2, 4, 8)
    local prof = ember.profile(function() return a:forward(q, k, v, { causal = true }) end)
    local r = row(prof, "attention", "forward")
    if not r then return pending("the call did not take the fused kernel") end
    local pairs_ = 2 * (4 * 5 / 2) -- heads x (1 + 2 + 3 + 4)
    assert.are.equal(2 * pairs_ * (8 + 8), r.flops)
  end)
end)

describe("ember.profile's argument", function()
  it("may be a callable table, as a module (it was refused as 'a table')", function()
    local lin = nn.Linear(3, 2)
    local x = ember.randn(4, 3)
    local prof, y = ember.profile(lin, x)
    assert.are.same({ 4, 2 }, y.shape)
    assert.truthy(row(prof, "gemm", "forward"))
    raises_here(function() ember.profile(42) end, "ember.profile: expected a function (or nothing: a scope), got number")
  end)
  it("without a function is a scope, as `with torch.profiler.profile() as prof` (it was an error)", function()
    local prof
    do
      local p <close> = ember.profile()
      prof = p
      ember.ones(2):exp()
      assert.is_true(ember.profiler.enabled())
    end
    assert.is_false(ember.profiler.enabled())
    assert.truthy(row(prof, "exp", "forward"))
    local q <close> = ember.profiler.profile { with_flops = true }
    assert.is_true(ember.profiler.enabled())
    q:stop()
    raises_here(function() ember.profile { record_shapes = true } end, "unknown option 'record_shapes'")
  end)
  it("key_averages refuses torch's grouping options rather than ignore them", function()
    local prof = ember.profile(function() ember.ones(2):exp() end)
    raises_here(function() prof:key_averages { group_by_input_shape = true } end,
      "Profile:key_averages: ember records no input shapes or stacks")
    raises_here(function() prof:key_averages(true) end, "got boolean")
    assert.are.equal(prof, prof:key_averages())
  end)
  it("ember.profiler.start refuses options it would ignore (torch's record_shapes was dropped silently)", function()
    raises_here(function() ember.profiler.start { record_shapes = true } end, "unknown option 'record_shapes'")
    assert.is_false(ember.profiler.enabled())
    local p = ember.profiler.start { with_flops = true } -- always recorded
    p:stop()
  end)
end)

describe("key_averages():table's torch options", function()
  local prof = ember.profile(function()
    for _ = 1, 3 do ember.ones(64):exp() end
    ember.randn(32, 32):matmul(ember.randn(32, 32))
  end)
  it("row_limit = -1 shows every row, as torch's (it was refused)", function()
    local text = prof:key_averages():table { row_limit = -1 }
    assert.falsy(text:find("more rows", 1, true))
    local n = 0
    for _ in text:gmatch("\n") do n = n + 1 end
    assert.are.equal(#prof:stats() + 3, n + 1) -- header, rule, rows, total line
  end)
  it("sort_by = 'cpu_time' sorts by the average per call, as torch's (it was refused)", function()
    local rows = prof:stats { sort_by = "cpu_time" }
    for i = 2, #rows do assert.is_true(rows[i - 1].avg >= rows[i].avg) end
    for _, r in ipairs(rows) do assert.are.equal(r.total / r.calls, r.avg) end
    assert.truthy(prof:table { sort_by = "cpu_time" }:find("avg ms", 1, true))
  end)
end)

describe("an error inside the profiled function", function()
  it("keeps its traceback through fn's frames (it was raised again from profiler.lua)", function()
    local function step()
      local x = ember.ones(2)
      return x + ember.ones(3) -- the line the traceback must show
    end
    local line = debug.getinfo(1, "l").currentline - 2
    local ok, tb = xpcall(ember.profile, debug.traceback, step)
    assert.is_false(ok)
    assert.truthy(tb:find("probe_profiler_spec.lua:" .. line .. ": in ", 1, true), tb)
    assert.is_false(ember.profiler.enabled())
    local prof = ember.profile(function() ember.ones(2):exp() end) -- a new one starts
    assert.truthy(row(prof, "exp", "forward"))
  end)
end)

describe("profiling does not change what runs", function()
  it("a checkpointed layer's recompute reuses its forward's attention when only the backward is profiled "
    .. "(the reuse key held the profiler's vtable, so it ran the kernel again)", function()
    ember.manual_seed(0)
    local enc = nn.TransformerEncoderLayer(32, 4, { dim_feedforward = 64, dropout = 0.0, checkpoint = true })
    local loss = enc(ember.randn(2, 16, 32)):sum() -- the forward, unprofiled
    local prof = ember.profile(function() loss:backward() end)
    if not row(prof, "attention_grad", "backward") then return pending("the layer did not take the fused kernel") end
    assert.is_nil(row(prof, "attention", "backward"))
    assert.truthy(row(prof, "layer_norm", "backward")) -- the rest of the recompute ran
  end)
end)

describe("copies between devices are recorded", function()
  it("host to device and device to device (they went through the destination's own vtable, unrecorded)", function()
    -- on the emulated CUDA backend (build/backends/cuda/emu), in a process of its own
    local build = os.getenv("EMBER_BUILD_DIR") or "build"
    local emu = build .. "/backends/cuda/emu"
    local so = io.open(emu .. "/ember_backend_cuda.so")
    if not so then return pending("no emulated CUDA backend in " .. emu) end
    so:close()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
local ember = require "ember"
local x = ember.randn(8, 8)
local prof = ember.profile(function() x:to("cuda"):to("cuda:2"):to("cpu") end)
for _, e in ipairs(prof.events) do io.write(e.name, "@", e.device, " ") end
]])
    f:close()
    local p = assert(io.popen(("env EMC_EMU_DEVICES=2 EMBER_PLUGIN_PATH='%s:%s/plugins' EMBER_PLUGIN_PATH_ONLY=1 "
      .. "OMP_NUM_THREADS=1 '%s/bin/ember' '%s' 2>&1"):format(emu, build, build, script)))
    local out = p:read("a")
    p:close()
    os.remove(script)
    assert.are.equal("copy_h2d@cuda copy_d2d@cuda copy_d2h@cuda ", out)
  end)
end)

describe("spans nested deeper than the profiler keeps per thread (64, now 256)", function()
  it("a backward run there ends its phase (later forward ops were marked backward)", function()
    local w = ember.randn(3):requires_grad_()
    local function nest(n)
      local r <close> = ember.profiler.range("level " .. n)
      if n == 0 then (w * 2):sum():backward() else nest(n - 1) end
    end
    local prof = ember.profile(function() nest(300); ember.ones(2):exp() end) -- the backward's spans dropped
    assert.are.equal("forward", row(prof, "exp", "forward") and "forward")
    assert.is_nil(row(prof, "exp", "backward"))
    prof = ember.profile(function() nest(60) end) -- within the limit, its kernels keep its phase
    assert.truthy(row(prof, "affine_grad", "backward"))
    assert.is_nil(row(prof, "affine_grad", "forward"))
  end)
  it("self time stays >= 0 (spans past the limit were all children of the deepest kept one, "
    .. "their nested times subtracted again and again)", function()
    local x = ember.ones(4)
    local function nest(n)
      local r <close> = ember.profiler.range("level " .. n)
      if n == 0 then x:exp() else nest(n - 1) end
    end
    local prof = ember.profile(function() nest(300) end)
    for _, r in ipairs(prof:stats()) do assert(r.self >= 0 and r.total >= r.self, r.name .. " " .. r.self) end
    assert.truthy(prof.dropped > 0)
    assert.truthy(prof:table():find("dropped", 1, true))
    local spans = read_trace(prof) -- nested properly
    assert.are.equal(#prof.events, #spans)
  end)
end)
