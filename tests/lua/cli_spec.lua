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
      "option --precision must be fp32, bf16 or auto, got fp16")
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
    -- parse_only resolves auto on this machine's CPU, and says why
    local o = cli.parse_only({"--precision", "auto"}, conf)
    assert.are.equal((cli.auto_precision("cpu", ember.cpu_info().bfloat16)), o.precision)
    assert.truthy(o.precision_note:find("^precision: " .. o.precision .. " %(%-%-precision auto: "), o.precision_note)
    assert.is_nil(cli.parse_only({}, conf).precision_note)
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
