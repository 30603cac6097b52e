-- The training scripts and ember.cli as a new user runs them: odd but
-- plausible command lines end with a right result or one line naming the
-- option or file, never a traceback, and nothing given is dropped silently.
-- Short runs only (parse-time errors, a few steps of addition's smoke run).
-- ember.cli's parts: autocast's precision names, parse_only's seed, and the
-- note of ember.autocast("auto")'s calibration.
local ember = require "ember"
local raises_here = require("tests.lua.helpers.parity").raises_here
local build = os.getenv("EMBER_BUILD_DIR") or "build"
local EMBER = build .. "/bin/ember"
local tmpdir = require "tests.lua.helpers.tmpdir"
local cli = require "ember.cli"

-- Runs `ember script args`; returns stdout+stderr, the exit status, and
-- stderr alone.
local function run(script, args)
  local errfile = os.tmpname()
  local cmd = ("EMBER_PROGRESS_PLAIN=1 OMP_NUM_THREADS=1 '%s' scripts/%s.lua %s 2>'%s'"):format(EMBER, script,
    args or "", errfile)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local _, _, code = p:close()
  local f = io.open(errfile, "r")
  local err = f and f:read("a") or ""
  if f then f:close() end
  os.remove(errfile)
  return out .. err, code, err
end

local function no_traceback(out)
  assert.is_nil(out:find("traceback", 1, true), out)
end

-- addition's smallest model: a smoke run of 3 steps takes well under a second
local SMALL = "--d_model 16 --heads 2 --enc_layers 1 --dec_layers 1 --ffn 16"

describe("the scripts' command lines", function()
  it("refuse a number that reads as inf, naming the option, before any data loads", function()
    for _, script in ipairs({"langid", "addition"}) do
      local out, code = run(script, "--lr 1e400")
      assert.are.equal(2, code, out)
      assert.truthy(out:find("option --lr needs a finite number, got '1e400'", 1, true), out)
      no_traceback(out)
    end
    local out, code = run("addition", "--weight_decay=-1e999")
    assert.are.equal(2, code, out)
    assert.truthy(out:find("option --weight_decay needs a finite number", 1, true), out)
  end)

  it("read whole numbers written as floats (1e3, 64.0) as integers", function()
    local conf = {script = "x.lua", options = {{"d_model", 64, "width", integer = true, min = 1}, {"lr2", 0.5, "x"}}}
    local o = cli.parse_only({"--batch", "1e3", "--d_model", "64.0", "--epochs=2.0", "--seed", "-3.0"}, conf)
    assert.are.equal("integer", math.type(o.batch))
    assert.are.equal(1000, o.batch)
    assert.are.equal("integer", math.type(o.d_model))
    assert.are.equal("integer", math.type(o.epochs))
    assert.are.equal("integer", math.type(o.seed))
    assert.are.equal(-3, o.seed)
    assert.are.equal("float", math.type(o.lr2)) -- not an integer option: left alone
    -- which options the command line set
    assert.is_true(o.given.batch and o.given.d_model and o.given.epochs and o.given.seed)
    assert.is_nil(o.given.lr)
    assert.is_nil(o.given.lr2)
    -- the scripts ran into the library with them: "warmup_steps must be an integer ..., got 0.0"
    local dir = tmpdir()
    local out, code = run("addition", "--smoke --max_steps 3 --batch 1.6e1 --d_model 16.0 --heads 2 --ffn 16 "
      .. "--enc_layers 1 --dec_layers 1 --out " .. dir)
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal(0, code, out)
    assert.truthy(out:find("smoke: loss", 1, true), out)
  end)

  it("refuse an --out that cannot be made or written, in one line, before any data loads", function()
    local dir = tmpdir()
    local file = dir .. "/a_file"
    io.open(file, "w"):close()
    for _, script in ipairs({"langid", "addition", "fashion_vit", "kjv_lm", "sort_of_clevr"}) do
      for _, bad in ipairs({file, file .. "/sub"}) do
        local out, code = run(script, "--smoke --out " .. bad)
        assert.are.equal(2, code, out)
        assert.truthy(out:find(("scripts/%s.lua: option --out %s: cannot create the folder"):format(script, bad), 1, true), out)
        assert.is_nil(out:find("data:", 1, true), out)
        no_traceback(out)
      end
    end
    local p = io.popen("id -u")
    local root = p:read("l") == "0"
    p:close()
    if not root then -- root writes anywhere
      os.execute("mkdir '" .. dir .. "/ro' && chmod 555 '" .. dir .. "/ro'")
      local out, code = run("addition", "--smoke --out " .. dir .. "/ro")
      assert.are.equal(2, code, out)
      assert.truthy(out:find("option --out " .. dir .. "/ro: the folder is not writable", 1, true), out)
      os.execute("chmod 755 '" .. dir .. "/ro'")
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("say which files of an earlier run they replace, and which options --smoke and --predict do not use", function()
    local dir = tmpdir() .. "/nested/new"
    local out, code = run("addition", "--smoke --max_steps 3 " .. SMALL .. " --out " .. dir)
    assert.are.equal(0, code, out)
    assert.is_nil(out:find("earlier run", 1, true), out)
    assert.is_nil(out:find("note: --smoke", 1, true), out)
    -- the second run into the same folder, with options the smoke run replaces
    out, code = run("addition", "--smoke --max_steps 3 --epochs 5 --n_train 900 " .. SMALL .. " --out " .. dir)
    assert.are.equal(0, code, out)
    assert.truthy(out:find("note: " .. dir .. " holds an earlier run's addition.safetensors, metrics.csv, loss.png, "
      .. "accuracy.png: this run replaces them", 1, true), out)
    assert.truthy(out:find("note: --smoke runs its own small configuration; --epochs, --n_train are not used", 1, true), out)
    -- --predict uses the saved model's configuration: a different one given is named, on stderr
    local err
    out, code, err = run("addition", "--predict 2+2 --d_model 32 --heads 2 --out " .. dir)
    assert.are.equal(0, code, out)
    assert.truthy(err:find("note: the saved model was built with --d_model 16; --d_model 32 is not used", 1, true), err)
    assert.matches("^2%+2 = [^\n]*\nnote:", out) -- the answer alone on stdout (an untrained model's digits or ?)
    -- the same values as saved: no note
    out, code, err = run("addition", "--predict 2+2 --d_model 16 --out " .. dir)
    assert.are.equal(0, code, out)
    assert.are.equal("", err)
    os.execute("rm -rf '" .. dir:match("^(.*)/nested/new$") .. "'")
  end)

  it("ends a failed smoke check with one line and status 1", function()
    local dir = tmpdir()
    local out, code = run("fashion_vit", "--smoke --limit 10 " .. "--out " .. dir) -- one batch: one step
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal(1, code, out)
    assert.truthy(out:find("scripts/fashion_vit.lua: smoke: too few steps to compare the loss (1; it needs at least 2)",
      1, true), out)
    no_traceback(out)
  end)

  it("refuse the options of a part the model does not have (fashion_vit), not ignore them", function()
    for args, msg in pairs({
      ["--patch 5"] = "--patch is an option of the linear patch embedding (--convs 0)",
      ["--convs 0 --stem_width 8"] = "--stem_width is an option of the convolutional stem (--convs 1..3)",
      ["--augment flip --crop_prob 0.3"] = "--crop_prob is an option of --augment crop+flip",
    }) do
      local out, code = run("fashion_vit", args)
      assert.are.equal(2, code, out)
      assert.truthy(out:find(msg, 1, true), out)
    end
    -- the defaults themselves are no error: --help lists them and a run takes them
    local out, code = run("fashion_vit", "--convs 0 --patch 7 --augment crop+flip --crop_prob 0.5 --epochs 0")
    assert.are.equal(2, code, out) -- stopped by --epochs 0, after the checks above
    assert.truthy(out:find("option --epochs must be a positive integer", 1, true), out)
  end)

  it("train_fashion_mnist: a negative number is the option's value, and inf is no learning rate", function()
    for args, msg in pairs({
      ["--lr -1"] = "option --lr must be a finite number >= 0, got -1",
      ["--lr 1e400"] = "option --lr must be a finite number >= 0, got inf", -- it trained to NaN losses, status 0
      ["--batch -1"] = "option --batch must be a positive integer, got -1", -- was "unknown option '-1'"
      ["--seed -2 --epochs 0"] = "option --epochs must be a positive integer, got 0", -- --seed -2 itself is fine
    }) do
      local out, code = run("train_fashion_mnist", args)
      assert.are.equal(2, code, out)
      assert.truthy(out:find("scripts/train_fashion_mnist.lua: " .. msg, 1, true), out)
    end
  end)

  it("reads sort_of_clevr's lists before making the data", function()
    for args, msg in pairs({
      ["--stem_channels 24,x"] = '--stem_channels: "x" is not a positive integer',
      ["--model given --subject_slopes 1,2"] = "--subject_slopes: 2 slopes for 4 heads",
    }) do
      local out, code = run("sort_of_clevr", args)
      assert.are.equal(2, code, out)
      assert.truthy(out:find(msg, 1, true), out)
      assert.is_nil(out:find("data:", 1, true), out)
    end
  end)
end)

describe("ember.cli.autocast", function()
  -- opts.precision = "bfloat16" (torch's name, which --precision takes)
  -- or a misspelt one ran in float32 without a word: only "bf16" was bf16.
  it("takes torch's precision names and refuses an unknown one, at the user's line", function()
    local cli = require "ember.cli"
    local lin = ember.nn.Linear(3, 2)
    local function dtype_under(p) return cli.autocast({ precision = p }, function() return lin(ember.randn(1, 3)).dtype end) end
    assert.are.equal("bfloat16", dtype_under("bfloat16"))
    assert.are.equal("bfloat16", dtype_under("bf16"))
    assert.are.equal("float32", dtype_under("float32"))
    assert.are.equal("float32", dtype_under(nil))
    raises_here(function() local _ = dtype_under("bf61") end,
      "ember.cli.autocast: precision must be fp32 (or float32), bf16 (or bfloat16) or auto, got bf61")
    raises_here(function() local _ = cli.autocast(nil, function() end) end, "ember.cli.autocast: expected the parsed options")
  end)
end)

describe("ember.cli.parse_only", function()
  -- --seed 1.5 passed parse_only and failed later in cli.parse, after the
  -- precision line was printed, saying "must be an integer" without the value
  it("refuses a seed that is not an integer with the value given", function()
    local cli = require "ember.cli"
    local ok, err = pcall(cli.parse_only, { "--seed", "1.5" }, {})
    assert.is_false(ok)
    assert.are.equal("option --seed must be an integer, got 1.5", err)
    assert.are.equal(-3, cli.parse_only({ "--seed", "-3" }, {}).seed)
  end)
end)

describe("ember.autocast(\"auto\")'s note", function()
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
