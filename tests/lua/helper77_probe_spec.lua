-- What a PyTorch user coming from torch.profiler / torch.autocast /
-- torch.backends found probing ember's CPU-performance features
-- (ember.profile, ember.autocast, ember.cpu_info, ember.cli). Each block is
-- a defect found that way; its test fails without the fix.
local ember = require "ember"
local raises_here = require("tests.lua.helpers.parity").raises_here

local F64 = { dtype = "float64" }

describe("addmm and baddbmm as torch's", function()
  -- torch.autocast's CPU policy lists addmm and baddbmm with the products
  -- (lower precision): the bias joins the bfloat16 product. ember's came
  -- back float32 (the bfloat16 product plus a float32 input promoted).
  it("run in bfloat16 under ember.autocast, float32 gradients for a float32 input", function()
    local input = ember.randn(3):requires_grad_()
    local m1, m2 = ember.randn(2, 4), ember.randn(4, 3)
    local out = ember.autocast("bfloat16", function() return ember.addmm(input, m1, m2) end)
    assert.are.equal("bfloat16", out.dtype)
    out:float():sum():backward()
    assert.are.equal("float32", input.grad.dtype)
    assert.are.same({ 2, 2, 2 }, input.grad:totable())
    local b = ember.autocast("bfloat16", function()
      return ember.baddbmm(ember.randn(1, 3), ember.randn(2, 2, 4), ember.randn(2, 4, 3))
    end)
    assert.are.equal("bfloat16", b.dtype)
    -- outside autocast nothing changes
    assert.are.equal("float32", ember.addmm(ember.randn(3), m1, m2).dtype)
  end)

  -- torch: "if beta is 0, input is ignored, and nan and inf in it are not
  -- propagated". ember computed input * 0, so a NaN input made the result NaN.
  it("ignore input when beta = 0 (its NaN and inf do not propagate; its gradient is zeros)", function()
    local input = ember.tensor({ { 0 / 0, math.huge }, { -math.huge, 1 } }, F64):requires_grad_()
    local a, b = ember.randn(2, 3, F64), ember.randn(3, 2, F64)
    local out = ember.addmm(input, a, b, { beta = 0 })
    assert.is_true((out - a:matmul(b)):abs():max():item() < 1e-12)
    out:sum():backward()
    assert.are.same({ { 0, 0 }, { 0, 0 } }, input.grad:totable())
    local bb = ember.baddbmm(ember.full({ 2, 2 }, 0 / 0, F64), ember.randn(3, 2, 4, F64), ember.randn(3, 4, 2, F64),
      { beta = 0, alpha = 2 })
    assert.is_false(bb:isnan():any():item())
  end)

  -- torch refuses an input larger than the product ([3, 2, 2] for a
  -- [2, 2] product); ember broadcast it silently to [3, 2, 2].
  it("refuse an input that does not broadcast to the product's shape, at the user's line", function()
    raises_here(function() local _ = ember.addmm(ember.randn(3, 2, 2), ember.randn(2, 3), ember.randn(3, 2)) end,
      "ember.addmm: input [3, 2, 2] does not broadcast to the product's shape [2, 2]")
    raises_here(function() local _ = ember.addmm(ember.randn(3), ember.randn(2, 3), ember.randn(3, 2)) end,
      "ember.addmm: input [3] does not broadcast")
    raises_here(function() local _ = ember.addmm(ember.randn(2), ember.randn(2, 3), 5) end, "mat2")
    assert.are.same({ 2, 2 }, ember.addmm(ember.randn(2, 1), ember.randn(2, 3), ember.randn(3, 2)).shape)
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

describe("ember.autocast's function form", function()
  -- ember.profile(model, x) runs a module; ember.autocast("bfloat16", model, x)
  -- refused it ("expected a function or enabled (a boolean) ..., got table").
  it("takes a module (a callable table) as ember.profile does", function()
    local lin = ember.nn.Linear(4, 3)
    local x = ember.randn(2, 4)
    assert.are.equal("bfloat16", ember.autocast("bfloat16", lin, x).dtype)
    assert.are.equal("float32", ember.autocast("bfloat16", false, lin, x).dtype)
    assert.is_false((ember.autocast.enabled()))
    raises_here(function() ember.autocast("bfloat16", { enabled = false }) end,
      'ember.autocast: expected a function or enabled (a boolean) after "bfloat16", got table')
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
    raises_here(function() p:export_chrome_trace("/tmp/ember_helper77_never_written.json") end,
      "ember.Profile:export_chrome_trace: the profile is still running")
  end)
end)

describe("ember.autocast's dtype", function()
  -- "float16" said "not supported", but torch's spellings of the same dtype
  -- (torch.float16, torch.half, fp16) said "unknown dtype"
  it("names float16 in any of torch's spellings as unsupported", function()
    for _, d in ipairs { "float16", "half", "torch.float16", "torch.half", "fp16" } do
      raises_here(function() ember.autocast(d, function() end) end,
        "ember.autocast: dtype float16 is not supported: autocast runs products in bfloat16")
    end
    assert.is_false((ember.autocast.enabled()))
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
