-- ember.cli: the options every script shares.
local cli = require "ember.cli"

local conf = {script = "scripts/x.lua", defaults = {epochs = 3},
              options = {{"layers", 2, "layers"}, {"word", nil, "a word", type = "string"}}}

describe("ember.cli", function()
  it("has the shared options with the script's defaults", function()
    local o = cli.parse_only({}, conf)
    assert.are.equal(3, o.epochs)
    assert.are.equal("standard", o.attention)
    assert.are.equal(0, o.seed)
    assert.are.equal("cpu", o.device)
    assert.is_false(o.smoke)
    assert.are.equal("runs/x", o.out)
    assert.are.equal(2, o.layers)
  end)

  it("parses --k v, --k=v and flags", function()
    local o = cli.parse_only({"--epochs", "5", "--lr=0.01", "--smoke", "--word", "Wörterbuch", "--layers", "4"}, conf)
    assert.are.equal(5, o.epochs)
    assert.are.equal(0.01, o.lr)
    assert.is_true(o.smoke)
    assert.are.equal("Wörterbuch", o.word)
    assert.are.equal(4, o.layers)
    assert.is_false(cli.parse_only({"--smoke", "false"}, conf).smoke)
  end)

  it("takes --precision fp32|bf16 and runs cli.autocast accordingly", function()
    local ember = require "ember"
    assert.are.equal("fp32", cli.parse_only({}, conf).precision)
    local o = cli.parse_only({"--precision", "bf16"}, conf)
    assert.are.equal("bf16", o.precision)
    local a, b = ember.randn(2, 3), ember.randn(3, 2)
    assert.are.equal("bfloat16", cli.autocast(o, function() return a:matmul(b) end).dtype)
    assert.are.equal("float32", cli.autocast(cli.parse_only({}, conf), function() return a:matmul(b) end).dtype)
    assert.has_error(function() cli.parse_only({"--precision", "fp16"}, conf) end,
      "option --precision must be fp32 (or float32), bf16 (or bfloat16) or auto, got fp16")
    -- torch's names for the same two
    assert.are.equal("bf16", cli.parse_only({"--precision", "bfloat16"}, conf).precision)
    assert.are.equal("fp32", cli.parse_only({"--precision=float32"}, conf).precision)
  end)

  it("picks bf16 for --precision auto where the CPU multiplies bfloat16 in hardware", function()
    local ember = require "ember"
    local bf16 = "gemm: onednn brg:avx512_core_bf16; attention: avx512_bf16 (vdpbf16ps); kernels: avx2"
    assert.are.equal("bf16", (cli.auto_precision("cpu", bf16)))
    assert.are.equal("bf16", (cli.auto_precision("cpu", "gemm: onednn brg:avx512_core_amx_bf16; attention: plain")))
    local p, why = cli.auto_precision("cpu", "gemm: onednn brg:avx512_core; attention: plain (bfloat16 values)")
    assert.are.equal("fp32", p)
    assert.truthy(why:find("no bfloat16 products in hardware, onednn brg:avx512_core", 1, true), why)
    assert.are.equal("fp32", (cli.auto_precision("cuda", bf16)))
    -- parse_only: fp32 where this CPU has no bfloat16 products in hardware;
    -- where it has them, auto stays to be measured on the first steps
    local o = cli.parse_only({"--precision", "auto"}, conf)
    if cli.auto_precision("cpu", ember.cpu_info().bfloat16) == "bf16" then
      assert.are.equal("auto", o.precision)
      assert.truthy(o.precision_note:find("^precision: auto %(bfloat16 products in hardware"), o.precision_note)
      assert.truthy(o.precision_note:find("training steps time fp32 against bf16", 1, true), o.precision_note)
    else
      assert.are.equal("fp32", o.precision)
      assert.truthy(o.precision_note:find("^precision: fp32 %(%-%-precision auto: "), o.precision_note)
    end
    assert.is_nil(cli.parse_only({}, conf).precision_note)
  end)

  -- A calibration driven by a fake clock: each step takes ms[precision].
  local function calibrate(ms, conf2)
    local t, lines, order = 0, {}, {}
    local c = cli.precision_calibration{clock = function() return t end,
                                        report = function(l) lines[#lines + 1] = l end,
                                        sum = conf2 and conf2.sum}
    for _ = 1, 20 do
      local p = c:next()
      order[#order + 1] = p
      t = t + ms[p] / 1e3
    end
    return c, lines, order
  end

  it("--precision auto keeps bf16 only where its steps measured faster, and says what it measured", function()
    local s = cli.CALIBRATION
    local n = 2 * (s.warmup + s.steps)
    local c, lines, order = calibrate({fp32 = 30, bf16 = 20})
    assert.are.equal("bf16", c.choice)
    assert.are.same({"fp32", "bf16", "fp32", "bf16"}, {order[1], order[2], order[3], order[4]})
    for i = n + 1, 20 do assert.are.equal("bf16", order[i]) end
    assert.are.equal(1, #lines)
    assert.truthy(lines[1]:find("^precision: bf16 %(%-%-precision auto measured 3 steps each: fp32 30%.0 ms, bf16 20%.0 ms"), lines[1])
    -- bf16 slower (the Xeon of issue 25): fp32
    c, lines, order = calibrate({fp32 = 23.6, bf16 = 33.8})
    assert.are.equal("fp32", c.choice)
    for i = n + 1, 20 do assert.are.equal("fp32", order[i]) end
    assert.truthy(lines[1]:find("fp32 23.6 ms, bf16 33.8 ms", 1, true), lines[1])
    -- within the margin: fp32, the more exact
    assert.are.equal("fp32", (calibrate({fp32 = 100, bf16 = 99.5})).choice)
    -- ranks sum their medians, so every rank keeps the same
    c = calibrate({fp32 = 30, bf16 = 20}, {sum = function(f, b) return f + 10, b + 40 end})
    assert.are.equal("fp32", c.choice)
  end)

  it("reports through progress.above, a plain line when output is not a terminal", function()
    local lines, real_print = {}, _G.print
    _G.print = function(l) lines[#lines + 1] = l end
    local ok, err = pcall(function()
      local t = 0
      local c = cli.precision_calibration{clock = function() return t end}
      for _ = 1, 12 do
        local p = c:next()
        t = t + (p == "bf16" and 0.010 or 0.020)
      end
    end)
    _G.print = real_print
    assert(ok, err)
    assert.are.equal(1, #lines)
    assert.truthy(lines[1]:find("^precision: bf16 %(%-%-precision auto measured"), lines[1])
  end)

  it("the warm-up steps are not timed, and each step is timed from one call to the next", function()
    -- a slow first step in each precision (primitives being built) must not count
    local t = 0
    local c = cli.precision_calibration{clock = function() return t end, report = function() end}
    local first = {}
    for _ = 1, 2 * (cli.CALIBRATION.warmup + cli.CALIBRATION.steps) + 1 do
      local p = c:next()
      local ms = p == "bf16" and 20 or 30
      if not first[p] then first[p] = true ms = p == "bf16" and 500 or 31 end
      t = t + ms / 1e3
    end
    assert.are.equal("bf16", c.choice)
    assert.are.equal(cli.CALIBRATION.steps, #c.times.fp32)
    for _, v in ipairs(c.times.fp32) do assert.is_true(math.abs(v - 0.030) < 1e-9, tostring(v)) end
  end)

  it("cli.autocast under auto runs each calibration step in its precision, then the kept one", function()
    local ember = require "ember"
    local a, b = ember.randn(2, 3), ember.randn(3, 2)
    local t = 0
    local o = {precision = "auto", precision_calibration = cli.precision_calibration{
      clock = function() return t end, report = function() end}}
    local seen = {}
    for i = 1, 12 do
      local dt = cli.autocast(o, function() return a:matmul(b) end).dtype
      seen[i] = dt
      t = t + (dt == "bfloat16" and 0.010 or 0.020)
    end
    assert.are.same({"float32", "bfloat16", "float32", "bfloat16"}, {seen[1], seen[2], seen[3], seen[4]})
    assert.are.equal("bf16", o.precision)
    assert.truthy(o.precision_note:find("^precision: bf16 %(%-%-precision auto measured"))
    assert.are.equal("bfloat16", seen[12])
  end)

  it("times wrapped functions with cli.stopwatch, wall and CPU seconds, passing their results on", function()
    local sw = cli.stopwatch()
    local busy = sw.wrap(function(n)
      local x = 0
      for i = 1, n do x = x + i % 7 end
      return x, "done", nil, 4
    end)
    local a, b, c, d = busy(2e6)
    assert.are.same({a, b, c, d}, {busy(2e6)}) -- the same results, a nil inside included
    assert.are.equal("done", b)
    assert.is_nil(c)
    assert.are.equal(4, d)
    assert.is_true(sw.total > 0 and sw.cpu_total > 0)
    local wall, cpu = sw.total, sw.cpu_total
    busy(1)
    assert.is_true(sw.total >= wall and sw.cpu_total >= cpu) -- sums over calls
  end)

  it("returns the usage for --help", function()
    local o, help = cli.parse_only({"--help"}, conf)
    assert.is_nil(o)
    for _, name in ipairs({"epochs", "lr", "batch", "attention", "seed", "threads", "device", "smoke", "layers", "help"}) do
      assert.truthy(help:find("--" .. name, 1, true), name)
    end
  end)

  it("rejects unknown options, missing values and bad numbers", function()
    -- the messages are lua-argparse's, with a pointer to --help
    assert.has_error(function() cli.parse_only({"--nope"}, conf) end, "unknown option '--nope' (see --help)")
    assert.has_error(function() cli.parse_only({"--lr"}, conf) end, "option '--lr' requires an argument (see --help)")
    assert.has_error(function() cli.parse_only({"--lr", "fast"}, conf) end,
      "option --lr needs a number, got 'fast' (see --help)")
    assert.has_error(function() cli.parse_only({"--attention", "nope"}, conf) end)
    assert.has_error(function() cli.parse_only({"--smoke", "maybe"}, conf) end,
      "option --smoke is true or false, got 'maybe' (see --help)")
    assert.has_error(function() cli.parse_only({"--epochs", "0"}, conf) end)
    assert.has_error(function() cli.parse_only({"stray"}, conf) end)
    assert.has_error(function() cli.parse_only({}, {options = {{"seed", 1, "dup"}}}) end)
  end)

  it("checks an option's bounds, that --heads divides --d_model, and --smoke's steps, when parsing", function()
    -- they were tracebacks from the model's constructor after the data had loaded
    local c = {script = "scripts/x.lua", options = {
      {"d_model", 64, "width", integer = true, min = 1}, {"heads", 4, "heads", integer = true, min = 1},
      {"dropout", 0.1, "dropout", min = 0, below = 1}, {"temperature", 1, "t", above = 0},
      {"question", 11, "q", integer = true, min = 1, max = 20}, {"limit", nil, "n", type = "number", integer = true, min = 1}}}
    local o = cli.parse_only({"--d_model", "96", "--heads", "3", "--dropout", "0", "--question", "20"}, c)
    assert.are.same({96, 3, 0, 20}, {o.d_model, o.heads, o.dropout, o.question})
    assert.is_nil(o.limit) -- an option without a default, not given: nothing to check
    local cases = {
      {{"--d_model", "0"}, "option --d_model must be an integer and >= 1, got 0"},
      {{"--d_model", "64.5"}, "option --d_model must be an integer and >= 1, got 64.5"},
      {{"--dropout", "1"}, "option --dropout must be >= 0 and < 1, got 1"},
      {{"--dropout", "-0.1"}, "option --dropout must be >= 0 and < 1, got -0.1"},
      {{"--temperature", "0"}, "option --temperature must be > 0, got 0"},
      {{"--question", "21"}, "option --question must be an integer and >= 1 and <= 20, got 21"},
      {{"--limit", "0"}, "option --limit must be an integer and >= 1, got 0"},
      {{"--heads", "3"}, "option --heads (3) must divide --d_model (64): each head gets d_model/heads dims"},
      {{"--smoke", "--max_steps", "1"},
       "option --max_steps 1 with --smoke: the smoke check compares the first and last losses, so it needs at least 2 steps"},
    }
    for _, case in ipairs(cases) do
      assert.has_error(function() cli.parse_only(case[1], c) end, case[2])
    end
    assert.are.equal(2, cli.parse_only({"--smoke", "--max_steps", "2"}, c).max_steps)
    -- without bounds in the spec, any number passes (conf's --layers)
    assert.are.equal(-1, cli.parse_only({"--layers", "-1"}, conf).layers)
  end)

  it("names the machine a benchmark ran on: CPU, threads, AMX, the BLAS core", function()
    local no = cli.machine{name = "AMD EPYC", threads = 2, blas = "openblas 0.3.21, core Cooperlake",
      bfloat16 = "gemm: onednn brg:avx512_core_bf16; attention: avx512_bf16 (vdpbf16ps, no amx: no AMX-BF16 on this CPU), rows"}
    assert.are.equal("machine: AMD EPYC, 2 threads, AMX: no (no AMX-BF16 on this CPU), BLAS: openblas 0.3.21, core Cooperlake", no)
    local yes = cli.machine{name = "Intel Xeon", threads = 8, blas = "openblas 0.3.21, core SapphireRapids",
      bfloat16 = "gemm: onednn brg:avx512_core_amx; attention: amx (tdpbf16ps)"}
    assert.truthy(yes:find("AMX: yes, BLAS: openblas 0.3.21, core SapphireRapids", 1, true), yes)
    assert.truthy(cli.machine{name = "x", threads = 1, bfloat16 = "gemm: plain"}:find("AMX: no, BLAS: unknown", 1, true))
    -- this machine's, from ember.cpu_info()
    assert.truthy(cli.machine():match("^machine: .+, %d+ threads, AMX: .+, BLAS: "), cli.machine())
  end)

  it("parses attention variant options", function()
    local o = cli.parse_only({"--attention", "local", "--attention_options", "window_left=8, mode=sliding,x=true,y=0.5"}, conf)
    assert.are.same({window_left = 8, mode = "sliding", x = true, y = 0.5}, o.attention_opts)
    assert.are.equal(math.tointeger(8), o.attention_opts.window_left)
    assert.are.same({}, cli.parse_only({}, conf).attention_opts)
    assert.has_error(function() cli.parse_only({"--attention_options", "oops"}, conf) end)
  end)

  it("checks a smoke run's loss", function()
    assert.has_no.errors(function() cli.check_smoke({3, 3, 2, 1, 1}, 2) end)
    assert.has_error(function() cli.check_smoke({1, 1, 2, 3, 3}, 2) end)
    assert.has_error(function() cli.check_smoke({1}) end)
  end)

  it("round-trips model options through checkpoint metadata", function()
    local meta = cli.config_metadata({layers = 3, attention = "local", smoke = true}, {"layers", "attention", "smoke"})
    assert.are.same({["config.layers"] = "3", ["config.attention"] = "local", ["config.smoke"] = "true"}, meta)
    local o = cli.apply_metadata({layers = 1, attention = "standard", smoke = false}, meta, {"layers", "attention", "smoke"})
    assert.are.same({layers = 3, attention = "local", smoke = true}, o)
  end)
end)
