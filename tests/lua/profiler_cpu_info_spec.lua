-- The CPU-speed features as a user coming from torch.profiler /
-- torch.backends meets them: the profiler's lifetime, what it writes and what
-- its results say while it runs, ember.cpu_info()'s account of the EMBER_*
-- variables and of a one-thread team, ember.set_num_threads' bounds, and
-- what the profiler says computed an op of each dtype. Each describe names
-- what was wrong before its fix.
local ember = require "ember"
local raises_here = require("tests.lua.helpers.parity").raises_here
local run_child = require("tests.lua.helpers.child")

-- The ember program's output for a chunk, run with env (a shell prefix)
-- in a fresh process: the CPU backend reads its variables once.
local function child(env, chunk)
  return run_child.run(chunk, env, {"EMBER_CPU_TEAM", "EMBER_CPU_ATTENTION_ROWS", "EMBER_CONV_LAYOUT"})
end

local INFO = [[
local i = ember.cpu_info()
print("team=" .. i.team)
print("attention=" .. i.float32:match("attention: ([^;]*)"))
print("conv=" .. i.bfloat16:match("conv: ([^;]*)"))
-- a decoding step's one query row: the rows path and the tiles sum in
-- different orders, so equal bits to the tiles' say which path ran
ember.manual_seed(3)
local q, k, v = ember.randn(1, 2, 1, 32), ember.randn(1, 2, 200, 32), ember.randn(1, 2, 200, 32)
local o = ember.scaled_dot_product_attention(q, k, v)
print(("out=%.9g"):format(o:double():sum():item()))
]]

describe("ember.cpu_info names an EMBER_* value it does not take, and the default runs", function()
  local default = child("", INFO)

  it("EMBER_CPU_ATTENTION_ROWS that is not a row count keeps the rows path (it turned it off, read as 0)", function()
    assert.truthy(default:find("attention=[^\n]*, rows path up to 2 query rows\n"), default)
    for _, bad in ipairs({"junk", "-3", "2x"}) do
      local out = child("EMBER_CPU_ATTENTION_ROWS=" .. bad, INFO)
      assert.truthy(out:find(("rows path up to 2 query rows (EMBER_CPU_ATTENTION_ROWS=%s is not a number of rows >= 0)")
        :format(bad), 1, true), out)
      assert.are.equal(default:match("out=(%S+)"), out:match("out=(%S+)"))
    end
    -- 0 still turns it off, as documented
    local off = child("EMBER_CPU_ATTENTION_ROWS=0", INFO)
    assert.truthy(off:find("no rows path (EMBER_CPU_ATTENTION_ROWS=0)", 1, true), off)
  end)

  it("EMBER_CPU_TEAM other than always (it was silently ignored)", function()
    local out = child("EMBER_CPU_TEAM=fast", INFO)
    assert.truthy(out:find("team=adaptive, [^\n]*, EMBER_CPU_TEAM=fast is not always\n"), out)
    assert.falsy(default:find("EMBER_CPU_TEAM", 1, true), default)
    local always = child("EMBER_CPU_TEAM=always", INFO)
    assert.truthy(always:find("team=always (EMBER_CPU_TEAM=always)\n", 1, true), always)
  end)

  it("EMBER_CONV_LAYOUT: the layouts it forces, or that it is not one (it was not mentioned)", function()
    local out = child("EMBER_CONV_LAYOUT=fast", INFO)
    assert.truthy(out:find("conv=onednn convolution[^\n]*, EMBER_CONV_LAYOUT=fast is not blocked, plain or float32\n"), out)
    out = child("EMBER_CONV_LAYOUT=plain", INFO)
    assert.truthy(out:find("conv=onednn convolution[^\n]*, plain layouts %(EMBER_CONV_LAYOUT=plain%)\n"), out)
    assert.falsy(default:find("EMBER_CONV_LAYOUT", 1, true), default)
  end)
end)

describe("the profiler's 'computed by' for an int64 op", function()
  it("names the kernels' instruction sets as for float32 (it repeated one: 'avx512f, avx2, avx2 (casts, ...)')",
    function()
      local i64 = ember.tensor({1, 2, 3}, {dtype = "int64"})
      local f32 = ember.tensor({1, 2, 3})
      local function impl(t)
        local prof = ember.profile(function() return t + t end)
        for _, r in ipairs(prof:stats()) do if r.name == "add" then return r.impl end end
      end
      local a, b = impl(i64), impl(f32)
      assert.truthy(b, "no add row in float32")
      assert.are.equal(b, a)
      assert.falsy(a:find("(", 1, true), a)
    end)
end)

describe("a running profile", function()
  it("that no one can reach any more is stopped, and does not block the next (it recorded for ever)", function()
    (function() ember.profile() end)() -- as typed at the prompt, or a local without <close>
    local prof = ember.profile(function() ember.ones(3):neg() end)
    assert.is_false(ember.profiler.enabled())
    local names = {}
    for _, r in ipairs(prof:stats()) do names[#names + 1] = r.name end
    assert.truthy(table.concat(names, " "):find("neg", 1, true), table.concat(names, " "))
  end)

  it("makes a second start say where the first began (profiles do not nest)", function()
    local first <close> = ember.profile(); local line = debug.getinfo(1, "l").currentline
    local ok, err = pcall(function() return ember.profile(function() end) end)
    assert.is_false(ok)
    local where = ("profiler_cpu_info_spec.lua:%d"):format(line)
    assert.truthy(tostring(err):find("a profile started at [^ ]*" .. where:gsub("%.", "%%.") .. " is still running"), err)
    assert.truthy(tostring(err):find("profiler_cpu_info_spec.lua:%d+: ember.profiler.start"), err) -- at the caller's line
    first:stop()
    assert.is_false(ember.profiler.enabled())
  end)
end)

describe("a running profile's results", function()
  -- each said "ember.Profile: stop the profile first", naming no method
  it("name the method asked for", function()
    local p <close> = ember.profile()
    raises_here(function() local _ = p:key_averages():table { row_limit = 3 } end,
      "ember.Profile:table: the profile is still running; stop the profile first")
    raises_here(function() local _ = p:stats() end, "ember.Profile:stats: the profile is still running")
    raises_here(function() local _ = p:total() end, "ember.Profile:total: the profile is still running")
    raises_here(function() p:export_chrome_trace("/tmp/ember_running_profile_never_written.json") end,
      "ember.Profile:export_chrome_trace: the profile is still running")
  end)
end)

describe("export_chrome_trace of a range named with bytes that are not UTF-8", function()
  it("writes UTF-8 (JSON's encoding; Perfetto and Python's json refused the file)", function()
    local name = "data \255\254 batch é"
    local prof = ember.profile(function()
      local r <close> = ember.profiler.range(name)
      ember.ones(2):neg()
    end)
    local path = os.tmpname()
    prof:export_chrome_trace(path)
    local text = run_child.take_file(path)
    assert.truthy(utf8.len(text), "the trace is not UTF-8")
    assert.truthy(text:find('"data \u{FFFD}\u{FFFD} batch é"', 1, true), text:sub(1, 400))
    -- and the table keeps one row per line: a newline in a name is a space there
    local p2 = ember.profile(function()
      local r <close> = ember.profiler.range("two\nlines")
      ember.ones(2):neg()
    end)
    local tab = p2:table()
    assert.truthy(tab:find("\ntwo lines ", 1, true), tab)
  end)
end)

describe("a variant plugin's forward (its own code, not the backend's kernels)", function()
  it("is a span of its own in the profile (it was missing: its time was nowhere)", function()
    local nn = require "ember.nn"
    local ok, mha = pcall(nn.MultiHeadAttention, 32, 4, {attention = "linear"})
    if not ok then return pending("no linear attention plugin: " .. tostring(mha)) end
    local x = ember.randn(2, 8, 32)
    mha(x) -- built once outside the profile
    local prof = ember.profile(function() mha(x):sum():backward() end)
    local row
    for _, r in ipairs(prof:stats()) do
      if r.name == "attention linear" and r.phase == "forward" then row = r end
    end
    assert.truthy(row, prof:table{row_limit = -1})
    assert.are.equal(1, row.calls)
    assert.is_true(row.total > 0 and row.self >= 0 and row.self <= row.total)
  end)
end)

-- The error of fn, which must fail.
local err_of = require("tests.lua.helpers.parity").must_fail

describe("ember.set_num_threads", function()
  -- 2^32 + 2 was taken as 2 and 2^31 as 1 (a C int), silently; 1e9 was
  -- taken, and the next parallel op crashed in libgomp under ulimit -v
  it("refuses a count past 4096 threads", function()
    local before = ember.get_num_threads()
    for _, n in ipairs({4097, 1e9, 2 ^ 31, 2 ^ 32 + 2, 2 ^ 40}) do
      local err = err_of(function() ember.set_num_threads(n) end)
      assert.truthy(err:find("ember.set_num_threads: n must be at most 4096", 1, true), err)
      assert.truthy(err:find("profiler_cpu_info_spec.lua:%d+:"), err)
      assert.are.equal(before, ember.get_num_threads())
    end
  end)

  it("with one thread, cpu_info's team says it runs serially (it said 'now parallel')", function()
    local before = ember.get_num_threads()
    finally(function() ember.set_num_threads(before) end)
    if os.getenv("EMBER_CPU_TEAM") == "always" then return end -- that mode names itself only
    ember.set_num_threads(1)
    local info = ember.cpu_info()
    assert.are.equal(1, info.threads)
    assert.truthy(info.team:find("^adaptive, now serial: one thread %("), info.team)
    assert.truthy(info.float32:find("; team: " .. info.team, 1, true), info.float32)
    ember.set_num_threads(2)
    info = ember.cpu_info()
    assert.falsy(info.team:find("one thread", 1, true), info.team)
  end)
end)
