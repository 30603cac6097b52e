-- The example scripts: each --smoke run trains a few steps on a small
-- subset and fails unless the loss fell; --help and bad options behave.
-- The scripts run as child processes of the ember program.
local build = os.getenv("EMBER_BUILD_DIR") or "build"
local EMBER = build .. "/bin/ember"

-- A sanitizer build runs every script about 5x slower; there only the
-- demo (langid) trains, the others' smoke runs belong to the normal build.
local function sanitized()
  local f = io.open(build .. "/CMakeCache.txt", "r")
  if not f then return false end
  local cache = f:read("a")
  f:close()
  return cache:find("EMBER_SANITIZE:BOOL=ON", 1, true) ~= nil
end
local SANITIZED = sanitized()

local tmpdir = require "tests.lua.helpers.tmpdir"

-- Runs `ember script args` and returns the output and the exit status.
local function run(script, args)
  local cmd = ("EMBER_PROGRESS_PLAIN=1 '%s' %s %s 2>&1"):format(EMBER, script, args or "")
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

local exists = require("tests.lua.helpers.files").exists

-- The fourth field: the script makes the per-call tensors of document and
-- prefix_lm (rows of one sequence each: cli.sequence_inputs), or refuses
-- them when parsing its options.
local SCRIPTS = {
  {"scripts/langid.lua", "test accuracy", "langid.safetensors", true},
  {"scripts/fashion_vit.lua", "test accuracy", "fashion_vit.safetensors", true},
  {"scripts/addition.lua", "held%-out exact match", "addition.safetensors", false},
  {"scripts/kjv_lm.lua", "bits per character", "kjv_lm.safetensors", false},
  {"scripts/sort_of_clevr.lua", "relational", "sort_of_clevr.safetensors", false},
}

for _, s in ipairs(SCRIPTS) do
  local script, metric, ckpt, per_call = s[1], s[2], s[3], s[4]
  describe(script, function()
    -- they crashed at the first step ("needs the per-call tensor 'doc'")
    if per_call then
      local train_it = SANITIZED and pending or it
      train_it("trains with --attention document and prefix_lm, giving their per-call tensors", function()
        local out, code = run(script, "--help")
        assert.are.equal(0, code)
        assert.truthy(out:gsub("%s+", " "):find("document gets doc: one document per row", 1, true), out)
        for _, variant in ipairs { "document", "prefix_lm" } do
          local dir = tmpdir()
          out, code = run(script, "--smoke --attention " .. variant .. " --out " .. dir)
          os.execute("rm -rf '" .. dir .. "'")
          assert.are.equal(0, code, out)
          assert.truthy(out:find("attention variant " .. variant, 1, true), out)
          assert.matches("smoke: loss", out)
        end
      end)
    else
      it("refuses --attention document and prefix_lm when parsing, saying which variants it runs", function()
        local out, code = run(script, "--help")
        assert.are.equal(0, code)
        assert.truthy(out:gsub("%s+", " "):find("not here: document, prefix_lm (they need per-call tensors", 1, true), out)
        for variant, input in pairs { document = "doc", prefix_lm = "prefix" } do
          out, code = run(script, "--smoke --attention " .. variant)
          assert.are.equal(2, code, out)
          assert.truthy(out:find(("option --attention %s: the variant needs per-call tensors (%s) that this script does not make; it runs ")
            :format(variant, input), 1, true), out)
          assert.truthy(out:find("standard", 1, true) and not out:find("Traceback", 1, true), out)
        end
      end)
    end

    if script == "scripts/kjv_lm.lua" then
      -- --model llama (the default) refused every variant but standard
      local llama_it = SANITIZED and pending or it
      llama_it("runs an --attention variant on its default Llama (grouped-query heads)", function()
        local dir = tmpdir()
        local out, code = run(script, "--smoke --attention alibi_lua --out " .. dir)
        os.execute("rm -rf '" .. dir .. "'")
        assert.are.equal(0, code, out)
        assert.matches("smoke: loss", out)
        assert.truthy(out:find("alibi_lua", 1, true), out)
      end)
    end

    it("prints its options with --help", function()
      local out, code = run(script, "--help")
      assert.are.equal(0, code)
      for _, name in ipairs({"epochs", "lr", "batch", "attention", "seed", "threads", "device", "smoke"}) do
        assert.truthy(out:find("--" .. name, 1, true), name)
      end
    end)

    it("rejects an unknown option", function()
      local out, code = run(script, "--no-such-option 1")
      assert.are.equal(2, code)
      assert.matches("unknown option", out)
    end)

    local train_it = (SANITIZED and script ~= "scripts/langid.lua") and pending or it
    train_it("trains in --smoke mode: the loss falls, the metric is printed, a checkpoint is saved", function()
      local dir = tmpdir()
      local out, code = run(script, "--smoke --out " .. dir)
      if code ~= 0 then print(out) end
      assert.are.equal(0, code)
      local first, last = out:match("smoke: loss ([%d.]+) %-> ([%d.]+)")
      assert.truthy(first, "no smoke line")
      assert.is_true(tonumber(last) < tonumber(first))
      assert.matches(metric, out)
      assert.is_true(exists(dir .. "/" .. ckpt))
      assert.is_true(exists(dir .. "/metrics.csv"))
      assert.is_true(exists(dir .. "/loss.png"))
      if script == "scripts/langid.lua" then
        -- --predict uses the saved model, without training
        local p, c = run(script, "--predict Wörterbuch --out " .. dir)
        assert.are.equal(0, c)
        assert.matches("^Wörterbuch %-> %a+", p)
      end
      if script == "scripts/kjv_lm.lua" then
        -- --sample continues a prompt with the saved model (its context from the
        -- checkpoint: the smoke run's 64), without training
        local p, c = run(script, "--sample --prompt 'In the beginning' --sample_chars 20 --out " .. dir)
        assert.are.equal(0, c, p)
        assert.truthy(p:find("%-%-model llama, %d+ parameters, context 64"), p)
        assert.truthy(p:find("\nIn the beginning", 1, true), p)
        assert.truthy(not p:find("bits per character", 1, true) and not p:find("saved ", 1, true), p)
        -- a prompt the saved context cannot hold is refused before anything runs
        p, c = run(script, "--sample --prompt " .. ("x"):rep(64) .. " --out " .. dir)
        assert.are.equal(2, c, p)
        assert.truthy(p:find("must be shorter than the context (64)", 1, true), p)
      end
      if script == "scripts/addition.lua" then
        -- --predict reads the saved model; the problem is read as given, spaces aside
        local p, c = run(script, "--predict ' 535 + 61' --out " .. dir)
        assert.are.equal(0, c, p)
        assert.matches("^535%+61 = %d*\n$", p)
        -- no model there: a usage error that says how to make one, no traceback
        p, c = run(script, "--predict 535+61 --out " .. dir .. "/none")
        assert.are.equal(2, c, p)
        assert.truthy(p:find("no saved model at " .. dir .. "/none/addition.safetensors; train one first", 1, true), p)
        assert.is_nil(p:find("traceback", 1, true), p)
      end
      if script == "scripts/sort_of_clevr.lua" then assert.is_true(exists(dir .. "/attention.png")) end
      os.execute("rm -rf '" .. dir .. "'")
    end)

    if script == "scripts/addition.lua" then
      -- a run shorter than the logging interval (50 steps) logged no loss
      -- and drew no loss.png: the last window is logged too
      train_it("logs the last steps' loss of a short --max_steps run", function()
        local dir = tmpdir()
        local out, code = run(script, "--epochs 1 --max_steps 3 --n_train 500 --n_test 50 --out " .. dir)
        local f = io.open(dir .. "/metrics.csv")
        local csv = f and f:read("a") or ""
        if f then f:close() end
        local png = exists(dir .. "/loss.png")
        os.execute("rm -rf '" .. dir .. "'")
        assert.are.equal(0, code, out)
        assert.truthy(csv:find("\n1,3,[^,]*,[^,]*,[%d.]+,", 1), csv) -- epoch 1, step 3, a loss
        assert.is_true(png, out)
        assert.truthy(out:find("plots: " .. dir .. "/loss.png", 1, true), out)
      end)
    end
  end)
end
