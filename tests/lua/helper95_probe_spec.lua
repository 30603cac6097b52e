-- helper95: a torch.profiler / torch.backends user's probe of the CPU
-- performance features -- autocast's errors for operands it leaves alone,
-- ember.set_num_threads' bounds, what cpu_info says about a one-thread
-- team, and what ember.autocast("auto") reports for fast calls.
local ember = require "ember"
local nn = require "ember.nn"
local cli = require "ember.cli"

-- The error of fn, which must fail.
local function err_of(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("helper95: a product under autocast given a float64 or int64 operand", function()
  -- autocast casts the float32 operand to bfloat16 and leaves the other:
  -- the error named the cast's bfloat16, a dtype the user never had
  local function under_autocast(fn)
    return err_of(function() ember.autocast("bfloat16", fn) end)
  end

  it("names the dtypes the user gave (matmul, bmm, linear, conv2d)", function()
    local cases = {
      {"ember.matmul: dtype mismatch: float64 [2, 4] vs float32 [4, 3]",
       function() return ember.randn(2, 4):double():matmul(ember.randn(4, 3)) end},
      {"ember.matmul: dtype mismatch: int64 [2, 4] vs float32 [4, 3]",
       function() return ember.ones(2, 4, "int64"):matmul(ember.randn(4, 3)) end},
      {"ember.bmm: dtype mismatch: float32 [1, 2, 4] vs float64 [1, 4, 3]",
       function() return ember.bmm(ember.randn(1, 2, 4), ember.randn(1, 4, 3):double()) end},
      {"ember.linear: dtype mismatch: float64 [2, 4] vs float32 [3, 4]",
       function() return nn.functional.linear(ember.randn(2, 4):double(), ember.randn(3, 4)) end},
      {"ember.conv2d: dtype mismatch: float64 [1, 2, 5, 5] vs float32 [3, 2, 3, 3]",
       function() return nn.functional.conv2d(ember.randn(1, 2, 5, 5):double(), ember.randn(3, 2, 3, 3)) end},
    }
    for _, c in ipairs(cases) do
      local err = under_autocast(c[2])
      assert.truthy(err:find(c[1], 1, true), err)
      assert.truthy(err:find("leaves float64 and integer tensors as they are", 1, true), err)
      assert.falsy(err:find("bfloat16 [", 1, true), err)
      assert.truthy(err:find("helper95_probe_spec.lua:%d+:"), err) -- at the user's line
    end
  end)

  it("nn.Linear says the input is float64 and the weight float32, as outside autocast", function()
    local l = nn.Linear(4, 3)
    local x = ember.randn(2, 4):double()
    local outside = err_of(function() local y = l(x); return y end)
    local inside = under_autocast(function() local y = l(x); return y end)
    assert.truthy(inside:find("Linear.forward: the input is float64 but the weight is float32", 1, true), inside)
    assert.are.equal(outside:gsub("^[^:]*:%d+: ", ""), (inside:gsub("^[^:]*:%d+: ", "")))
    assert.truthy(inside:find("helper95_probe_spec.lua:%d+: Linear"), inside)
    -- float32 and bfloat16 still mix there, in bfloat16
    local y = ember.autocast("bfloat16", function() return l(ember.randn(2, 4):to("bfloat16")) end)
    assert.are.equal("bfloat16", y.dtype)
  end)

  it("still runs what autocast casts: a float32 product in bfloat16, a float64 one in float64", function()
    ember.autocast("bfloat16", function()
      assert.are.equal("bfloat16", ember.randn(2, 4):matmul(ember.randn(4, 3)).dtype)
      assert.are.equal("float64", ember.randn(2, 4):double():matmul(ember.randn(4, 3):double()).dtype)
      assert.are.equal("int64", ember.ones(2, 4, "int64"):matmul(ember.ones(4, 3, "int64")).dtype)
    end)
  end)
end)

describe("helper95: ember.set_num_threads", function()
  it("refuses a count past a C int (2^32 + 2 was taken as 2, 2^31 as 1, silently)", function()
    local before = ember.get_num_threads()
    for _, n in ipairs({2 ^ 31, 2 ^ 32 + 2, 2 ^ 40}) do
      local err = err_of(function() ember.set_num_threads(n) end)
      assert.truthy(err:find("ember.set_num_threads: n must be at most 2147483647", 1, true), err)
      assert.truthy(err:find("helper95_probe_spec.lua:%d+:"), err)
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

describe("helper95: ember.autocast(\"auto\")'s note", function()
  -- the calibration's note printed "%.1f ms": calls of 30 and 45 us both
  -- read "0.0 ms", so a user saw a choice between equal times
  local function calibrate(secs, label)
    local t, notes = 0, {}
    local c = cli.precision_calibration{clock = function() return t end, label = label,
      report = function(n) notes[#notes + 1] = n end}
    for _ = 1, 20 do
      local p = c:next()
      t = t + secs[p]
    end
    return c, notes
  end

  it("gives a call under a millisecond in microseconds", function()
    local c, notes = calibrate({fp32 = 45e-6, bf16 = 30e-6}, "ember.autocast(\"auto\") at x.lua:1")
    assert.are.equal("bf16", c.choice)
    assert.are.equal(1, #notes)
    assert.truthy(notes[1]:find("fp32 45.0 us, bf16 30.0 us per call", 1, true), notes[1])
    -- a step of a millisecond or more stays in milliseconds
    c, notes = calibrate({fp32 = 0.030, bf16 = 0.5e-3})
    assert.truthy(notes[1]:find("fp32 30.0 ms, bf16 500.0 us per step", 1, true), notes[1])
  end)
end)
