-- ember's modern-model features probed as a PyTorch / Hugging Face user
-- writes them (helper 76): each case failed, or did something else than
-- the user meant, before its fix.
local ember = require "ember"
local nn = require "ember.nn"

-- the message of a failed call, or nil
local function err_of(f)
  local ok, e = pcall(f)
  return not ok and tostring(e) or nil
end

describe("nn.FeedForward in Lua's table of names", function()
  it("nn.FeedForward{d_model =, d_ff =, gated = true} builds what the positional form builds", function()
    -- was: 'Linear: in_features must be a positive integer, got table' from inside FeedForward
    ember.manual_seed(3)
    local a = nn.FeedForward{ d_model = 6, d_ff = 10, gated = true, activation = "gelu", bias = false }
    ember.manual_seed(3)
    local b = nn.FeedForward(6, 10, { gated = true, activation = "gelu", bias = false })
    assert.are.equal("geglu", a.activation_name)
    assert.is_nil(a.linear1.bias)
    local x = ember.randn(2, 3, 6)
    assert.is_true(a(x):equal(b(x)))
    -- the Transformer layers' (PyTorch's) name of d_ff, and the options after the sizes
    local w = nn.FeedForward{ d_model = 4, dim_feedforward = 16 }.linear1.weight
    assert.are.same({ 16, 4 }, { w.shape[1], w.shape[2] })
    assert.are.equal("swiglu", nn.FeedForward(4, 8, "swiglu").activation_name)
  end)

  it("a missing size names FeedForward at the user's line", function()
    local e = err_of(function() nn.FeedForward{ d_model = 16 } end)
    assert.matches("helper76_probe_spec.lua:%d+: FeedForward: d_ff must be a positive integer, got nil", e)
    e = err_of(function() nn.FeedForward(16) end)
    assert.matches("FeedForward: d_ff must be a positive integer", e)
    assert.matches("unknown option 'act'", err_of(function() nn.FeedForward{ d_model = 4, d_ff = 8, act = "gelu" } end))
  end)
end)
