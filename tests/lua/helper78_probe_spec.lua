-- ember's CNN and vision modules probed as a PyTorch user writes them
-- (helper 78): each case failed, or did something else than the user
-- meant, before its fix. Sizes are PyTorch 1.13's for the same call.
local ember = require "ember"
local nn = require "ember.nn"

-- the message of a failed call, or nil
local function err_of(f)
  local ok, e = pcall(f)
  return not ok and tostring(e) or nil
end

local function shape(t) return table.concat(t.shape, ",") end

describe("nn.Upsample in PyTorch's positional order (size, scale_factor, mode, align_corners)", function()
  it("nn.Upsample(nil, 2, \"bilinear\", true) is the scale_factor form", function()
    -- was: 'Upsample: give either size or scale_factor (one of them)'
    local x = ember.randn(1, 2, 3, 4)
    local a = nn.Upsample(nil, 2, "bilinear", true)
    local b = nn.Upsample({ scale_factor = 2, mode = "bilinear", align_corners = true })
    assert.are.equal("1,2,6,8", shape(a(x)))
    assert.is_true(a(x):equal(b(x)))
    assert.are.equal("1,2,6,8", shape(nn.Upsample(nil, 2)(x)))
    -- the rest by name after them
    local c = nn.Upsample(nil, 2.5, { mode = "bilinear", recompute_scale_factor = true })
    assert.is_true(c(x):equal(nn.Upsample({ scale_factor = 2.5, mode = "bilinear", recompute_scale_factor = true })(x)))
  end)

  it("nn.Upsample({5, 6}, nil, \"bicubic\") is the size {5, 6}, as torch.nn.Upsample((5, 6), None, 'bicubic')", function()
    local x = ember.randn(1, 2, 3, 4)
    local y = nn.Upsample({ 5, 6 }, nil, "bicubic")(x)
    assert.are.equal("1,2,5,6", shape(y))
    assert.is_true(y:equal(nn.Upsample({ size = { 5, 6 }, mode = "bicubic" })(x)))
  end)

  it("ember's one-argument form stays the scale factor; errors name Upsample at the user's line", function()
    assert.are.equal("1,2,6,8", shape(nn.Upsample(2)(ember.randn(1, 2, 3, 4))))
    assert.are.equal("1,2,6,8", shape(nn.Upsample(2, { mode = "bilinear" })(ember.randn(1, 2, 3, 4))))
    local e = err_of(function() local _ = nn.Upsample(3, 2) end)
    assert.truthy(e:find("helper78_probe_spec.lua:%d+: Upsample: give either size or scale_factor"), e)
    e = err_of(function() local _ = nn.Upsample(nil, 2, "bilinear", { mode = "nearest" }) end)
    assert.truthy(e:find("helper78_probe_spec.lua:%d+: Upsample: mode given twice"), e)
    e = err_of(function() local _ = nn.Upsample(nil, 2, "bilinear", true, false, 1) end)
    assert.truthy(e:find("helper78_probe_spec.lua:%d+: Upsample: takes at most 5 arguments"), e)
  end)
end)

describe("forward's output_size by name, as PyTorch's keyword", function()
  it("ConvTranspose1d/2d(x, {output_size = ...}) picks the output padding", function()
    -- was: 'output_size {} is not reachable from an input of shape [1, 2, 5, 5]'
    local x = ember.randn(1, 2, 5, 5)
    local m = nn.ConvTranspose2d(2, 2, 3, { stride = 2, padding = 1 })
    assert.are.equal("1,2,10,10", shape(m(x, { output_size = { 10, 10 } })))
    assert.are.equal("1,2,9,9", shape(m(x, { output_size = { 1, 2, 9, 9 } })))
    assert.is_true(m(x, { output_size = { 10, 10 } }):equal(m(x, { 10, 10 })))
    assert.are.equal("1,2,10", shape(nn.ConvTranspose1d(2, 2, 3, { stride = 2 })(ember.randn(1, 2, 4), { output_size = 10 })))
    local e = err_of(function() local y = m(x, { outputsize = { 10, 10 } }); return y end)
    assert.truthy(e:find("ConvTranspose2d.forward: unknown option 'outputsize'"), e)
  end)

  it("MaxUnpool1d/2d/3d(y, indices, {output_size = ...})", function()
    -- was: 'nn.functional.max_unpool2d: output_size must be 2 positive integers ..., got {}'
    local x = ember.randn(1, 2, 5, 5)
    local y, i = nn.MaxPool2d(2, { return_indices = true })(x)
    local u = nn.MaxUnpool2d(2)(y, i, { output_size = { 5, 5 } })
    assert.are.equal("1,2,5,5", shape(u))
    assert.is_true(u:equal(nn.MaxUnpool2d(2)(y, i, { 5, 5 })))
    local y1, i1 = nn.MaxPool1d(2, { return_indices = true })(ember.randn(1, 2, 5))
    assert.are.equal("1,2,5", shape(nn.MaxUnpool1d(2)(y1, i1, { output_size = { 5 } })))
    local y3, i3 = nn.MaxPool3d(2, { return_indices = true })(ember.randn(1, 2, 5, 5, 5))
    assert.are.equal("1,2,5,5,5", shape(nn.MaxUnpool3d(2)(y3, i3, { output_size = { 5, 5, 5 } })))
  end)
end)
