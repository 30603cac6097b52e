-- ember.profile / ember.profiler (issue 25, item 5): every kernel call of a
-- known small program is recorded, forward and backward, inside its
-- node's backward span; FLOPs and bytes where they are known; the Chrome
-- trace is valid JSON with those events; an error inside fn still stops
-- the profiler; nothing is recorded when no profile runs.
local ember = require "ember"

-- A tiny JSON reader, enough to check the trace is well formed: returns
-- the value, or raises at the first byte that is not JSON.
local function json_decode(s)
  local pos = 1
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local function fail(what) error(("JSON: %s at byte %d: %q"):format(what, pos, s:sub(pos, pos + 20)), 0) end
  local value
  local function str()
    local out, i = {}, pos + 1
    while true do
      local c = s:sub(i, i)
      if c == "" then fail("unterminated string") end
      if c == '"' then break end
      if c == "\\" then
        local e = s:sub(i + 1, i + 1)
        if e == "u" then
          local hex = s:sub(i + 2, i + 5)
          if not hex:match("^%x%x%x%x$") then fail("bad \\u escape") end
          out[#out + 1] = utf8.char(tonumber(hex, 16))
          i = i + 6
        else
          local map = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
          if not map[e] then fail("bad escape") end
          out[#out + 1] = map[e]
          i = i + 2
        end
      elseif c:byte() < 32 then
        fail("control character in a string")
      else
        out[#out + 1] = c
        i = i + 1
      end
    end
    pos = i + 1
    return table.concat(out)
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      local t = {}
      pos = pos + 1
      ws()
      if s:sub(pos, pos) == "}" then pos = pos + 1 return t end
      while true do
        ws()
        if s:sub(pos, pos) ~= '"' then fail("expected a key") end
        local k = str()
        ws()
        if s:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        t[k] = value()
        ws()
        local d = s:sub(pos, pos)
        pos = pos + 1
        if d == "}" then return t end
        if d ~= "," then fail("expected ',' or '}'") end
      end
    elseif c == "[" then
      local t = {}
      pos = pos + 1
      ws()
      if s:sub(pos, pos) == "]" then pos = pos + 1 return t end
      while true do
        t[#t + 1] = value()
        ws()
        local d = s:sub(pos, pos)
        pos = pos + 1
        if d == "]" then return t end
        if d ~= "," then fail("expected ',' or ']'") end
      end
    elseif c == '"' then
      return str()
    elseif s:find("^true", pos) then pos = pos + 4 return true
    elseif s:find("^false", pos) then pos = pos + 5 return false
    elseif s:find("^null", pos) then pos = pos + 4 return nil
    else
      local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or num == "" or not tonumber(num) then fail("unexpected byte") end
      pos = pos + #num
      return tonumber(num)
    end
  end
  local v = value()
  ws()
  if pos <= #s then fail("trailing bytes") end
  return v
end

-- x @ w -> relu -> sum, backward; only w wants a gradient
local function program()
  local x = ember.randn(4, 3)
  local w = ember.randn(3, 2):requires_grad_()
  return function()
    local y = x:matmul(w):relu():sum()
    y:backward()
  end, w
end

local function count(prof, name, phase)
  for _, r in ipairs(prof:stats()) do
    if r.name == name and r.phase == phase then return r.calls, r end
  end
  return 0
end

describe("ember.profile", function()
  it("records each kernel of a known program, forward and backward, with the right counts", function()
    local step, w = program()
    local prof = ember.profile(step)
    assert.is_false(ember.profiler.enabled())
    assert.truthy(w.grad)
    assert.are.equal(1, count(prof, "gemm", "forward"))
    assert.are.equal(1, count(prof, "relu", "forward"))
    assert.are.equal(1, count(prof, "sum", "forward"))
    assert.are.equal(1, count(prof, "backward", "backward"))
    assert.are.equal(1, count(prof, "sum backward", "backward"))
    assert.are.equal(1, count(prof, "relu backward", "backward"))
    assert.are.equal(1, count(prof, "matmul backward", "backward"))
    assert.are.equal(1, count(prof, "relu_grad", "backward"))
    -- x does not want a gradient: one product in the backward, dW = x^T dY
    assert.are.equal(1, count(prof, "gemm", "backward"))
  end)

  it("puts a node's kernels inside its backward span, and self time excludes children", function()
    local step = program()
    local prof = ember.profile(step)
    local ev = prof.events
    local found = false
    for _, e in ipairs(ev) do
      if e.name == "gemm" and e.backward then
        local parent = ev[e.parent]
        assert.are.equal("matmul backward", parent.name)
        assert.are.equal("backward", ev[parent.parent].name)
        assert.is_true(parent.dur >= e.dur)
        found = true
      end
    end
    assert.is_true(found)
    local _, r = count(prof, "matmul backward", "backward")
    assert.is_true(r.self <= r.total and r.self >= 0)
  end)

  it("counts FLOPs and bytes of a product, and names what computed it", function()
    local a, b = ember.randn(8, 5), ember.randn(5, 6)
    local prof = ember.profile(function() return a:matmul(b) end)
    local _, r = count(prof, "gemm", "forward")
    assert.are.equal(2 * 8 * 5 * 6, r.flops)
    assert.are.equal((8 * 5 + 5 * 6 + 8 * 6) * 4, r.bytes)
    assert.truthy(r.impl and #r.impl > 0)
  end)

  it("names a one-row product's own route (gemv) and a convolution's library, as cpu_info says them", function()
    local line = ember.cpu_info().float32
    local gemm_rule = line:match("gemm: ([^;]*)")
    local gemv, conv = line:match("gemv: ([^;]*)"), line:match("conv: ([^;]*)")
    assert.truthy(gemv and conv, line)
    local w = ember.randn(6, 5)
    local rowp = ember.profile(function() return ember.randn(1, 5):matmul(w:t()) end)
    local fullp = ember.profile(function() return ember.randn(4, 5):matmul(w:t()) end)
    local _, row = count(rowp, "gemm", "forward")
    local _, full = count(fullp, "gemm", "forward")
    assert.are.equal(gemv, row.impl:sub(1, #gemv))
    assert.are_not.equal(row.impl, full.impl)
    local c = require("ember.nn").Conv2d(2, 3, 3) -- "auto": the backend's kernel, on the CPU
    local convp = ember.profile(function() return c(ember.randn(1, 2, 5, 5)) end)
    local _, r = count(convp, "conv2d", "forward")
    assert.are.equal(conv, r.impl)
    assert.truthy(conv:find("onednn convolution", 1, true), conv)
  end)

  it("names the library that took each product, by the rule cpu_info states (2^21 multiply-adds)", function()
    if os.getenv("EMBER_CPU_SGEMM") then return end -- a forced library: probe_cpu_spec checks those
    local info = ember.cpu_info()
    local onednn = info.float32:match("%(onednn (%S+) or openblas by shape%)")
    local core = info.blas:match("core (%w+)")
    assert.truthy(onednn and core, info.float32 .. " | " .. info.blas)
    local function impl_of(m, n, k, dtype)
      local a, b = ember.randn(m, k, dtype), ember.randn(k, n, dtype)
      local _, r = count(ember.profile(function() return a:matmul(b) end), "gemm", "forward")
      return r.impl
    end
    assert.are.equal("onednn " .. onednn, impl_of(160, 160, 160)) -- 4.1M multiply-adds
    assert.truthy(impl_of(64, 64, 64):find("^openblas sgemm %(openblas [%d.]+, core " .. core .. "%)$")) -- 262k
    assert.truthy(impl_of(64, 64, 64, "float64"):find("^openblas dgemm %("))
    assert.truthy(impl_of(1, 64, 64):find("^openblas sgemv %("))
    assert.are.equal("ember's small-product loops", impl_of(2, 4, 8)) -- 64 multiply-adds
    -- a profile of products of several libraries: a row for each
    local a, b, c, d = ember.randn(160, 160), ember.randn(160, 160), ember.randn(64, 64), ember.randn(64, 64)
    local rows = 0
    for _, r in ipairs(ember.profile(function() a:matmul(b); c:matmul(d); a:matmul(b) end):stats()) do
      if r.name == "gemm" then
        rows = rows + 1
        assert.are.equal(r.impl:find("^onednn") and 2 or 1, r.calls)
      end
    end
    assert.are.equal(2, rows)
  end)

  it("returns fn's results after the profile", function()
    local prof, a, b = ember.profile(function(x, y) return x + 1, y .. "!" end, 1, "hi")
    assert.are.equal("ember.Profile", getmetatable(prof).__name)
    assert.are.equal(2, a)
    assert.are.equal("hi!", b)
  end)

  it("an error inside fn stops the profiler and goes on to the caller", function()
    local ok, err = pcall(ember.profile, function()
      ember.ones(3):exp()
      error("boom inside")
    end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("boom inside", 1, true))
    assert.is_false(ember.profiler.enabled())
    -- and a new one starts
    local prof = ember.profile(function() ember.ones(2):exp() end)
    assert.are.equal(1, count(prof, "exp", "forward"))
  end)

  it("records nothing when no profile runs, and refuses a second one at once", function()
    local prof = ember.profile(function() ember.ones(2):exp() end)
    local n = #ember._profiler_events()
    ember.ones(4):exp():sum()
    assert.are.equal(n, #ember._profiler_events())
    assert.are.equal(n, #prof.events)
    local p <close> = ember.profiler.start()
    assert.has_error(function() ember.profiler.start() end)
  end)

  it("works as a <close> scope with ranges of the user's own", function()
    local prof
    do
      local p <close> = ember.profiler.start()
      prof = p
      do
        local r <close> = ember.profiler.range("my block")
        ember.ones(3):neg()
      end
      assert.is_true(ember.profiler.enabled())
    end
    assert.is_false(ember.profiler.enabled())
    local ev = prof.events
    local neg
    for _, e in ipairs(ev) do if e.name == "neg" then neg = e end end
    assert.truthy(neg)
    assert.are.equal("my block", ev[neg.parent].name)
    assert.are.equal("range", ev[neg.parent].kind)
  end)

  it("prints a table sorted by self time", function()
    local step = program()
    local prof = ember.profile(step)
    local text = tostring(prof)
    assert.truthy(text:find("self ms", 1, true))
    assert.truthy(text:find("matmul backward", 1, true))
    local rows = prof:stats()
    for i = 2, #rows do assert.is_true(rows[i - 1].self >= rows[i].self) end
  end)

  it("reads as torch.profiler's chain: key_averages():table{sort_by=, row_limit=}", function()
    local prof = ember.profile(program())
    local p = ember.profiler.start()
    do
      local r <close> = ember.profiler.record_function("torch's name")
      program()()
    end
    p:stop()
    assert.are.equal(1, count(p, "torch's name", "forward"))
    local text = prof:key_averages():table { sort_by = "cpu_time_total", row_limit = 2 }
    assert.are.equal(prof:table { sort_by = "total", row_limit = 2 }, text)
    assert.truthy(text:find("more rows", 1, true))
  end)

  it("records the fused attention kernel with its FLOPs", function()
    local a = ember.Attention { heads = 2, head_dim = 8 }
    local q = ember.randn(1, 2, 16, 8):requires_grad_()
    local k, v = ember.randn(1, 2, 16, 8), ember.randn(1, 2, 16, 8)
    local prof = ember.profile(function() a:forward(q, k, v):sum():backward() end)
    local n, r = count(prof, "attention", "forward")
    if n == 0 then return pending("the attention call did not take the fused kernel") end
    assert.are.equal(2 * 2 * 16 * 16 * (8 + 8), r.flops)
    assert.are.equal(1, count(prof, "attention_grad", "backward"))
  end)

  it("writes a Chrome trace that is valid JSON with the recorded events", function()
    local step = program()
    local prof = ember.profile(step)
    local path = os.tmpname()
    prof:export_chrome_trace(path)
    local trace = json_decode(require("tests.lua.helpers.child").take_file(path))
    assert.are.equal("table", type(trace.traceEvents))
    local spans, names = 0, {}
    for _, e in ipairs(trace.traceEvents) do
      if e.ph == "X" then
        spans = spans + 1
        assert.are.equal("number", type(e.ts))
        assert.are.equal("number", type(e.dur))
        assert.are.equal("number", type(e.tid))
        names[e.name .. "/" .. e.args.phase] = (names[e.name .. "/" .. e.args.phase] or 0) + 1
      end
    end
    assert.are.equal(#prof.events, spans)
    assert.are.equal(1, names["gemm/forward"])
    assert.are.equal(1, names["matmul backward/backward"])
    assert.are.equal(1, names["gemm/backward"])
    -- names that need escaping survive
    local p2 = ember.profile(function()
      local r <close> = ember.profiler.range('quote " back \\ tab \t')
      ember.ones(2):neg()
    end)
    p2:export_chrome_trace(path)
    f = assert(io.open(path))
    local t2 = json_decode(f:read("a"))
    f:close()
    os.remove(path)
    local seen = false
    for _, e in ipairs(t2.traceEvents) do seen = seen or e.name == 'quote " back \\ tab \t' end
    assert.is_true(seen)
  end)
end)
