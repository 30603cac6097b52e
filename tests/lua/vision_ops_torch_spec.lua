-- ember's vision ops against PyTorch 1.13 as a PyTorch user calls them:
-- adaptive max pooling's return_indices, interpolate's antialias, and
-- grid_sample / affine_grid (volumes, the edge's gradient, pixel
-- coordinates' rounding, bicubic). Each case failed, or computed something
-- else than torch, before its fix; the values are torch 1.13's for the same
-- call (each block's comment holds it).
local ember = require "ember"
local nn = require "ember.nn"

-- the message of a failed call, or nil
local err_of = require("tests.lua.helpers.parity").error_of

local function shape(t) return table.concat(t.shape, ",") end

describe("adaptive max pooling's return_indices", function()
  -- was: 'AdaptiveMaxPool2d: return_indices is not supported' (and "unknown option 'return_indices'" for
  -- AdaptiveMaxPool3d). The values are torch 1.13's, 0-based there, for the same inputs:
  -- F.adaptive_max_pool2d(x, (3, 2), True), F.adaptive_max_pool1d(x1, 3, True),
  -- F.adaptive_max_pool3d(torch.arange(27.).remainder(7).view(1, 1, 3, 3, 3), (2, 2, 1), True)
  local x = ember.tensor({ { 3, 1, 4, 1, 5 }, { 9, 2, 6, 5, 3 }, { 5, 8, 9, 7, 9 }, { 3, 2, 3, 8, 4 } },
    { dtype = "float64" }):view({ 1, 1, 4, 5 })
  local function plus1(t) local o = {} for k, v in ipairs(t) do o[k] = v + 1 end return o end

  it("nn.AdaptiveMaxPool2d(size, true): the first largest of each bin, as torch's, ties included", function()
    local xr = x:clone():requires_grad_(true)
    local y, i = nn.AdaptiveMaxPool2d({ 3, 2 }, true)(xr)
    assert.are.same({ 9, 6, 9, 9, 9, 9 }, y:reshape({ -1 }):totable())
    assert.are.equal("int64", i.dtype)
    assert.are.same(plus1({ 5, 7, 5, 12, 12, 12 }), i:reshape({ -1 }):totable())
    y:sum():backward() -- the gradient goes where the indices say (torch's grad)
    assert.are.same({ 0, 0, 0, 0, 0, 2, 0, 1, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0 }, xr.grad:reshape({ -1 }):totable())
    -- the functional form, unbatched, and MaxUnpool2d-style gathering back
    local y2, i2 = nn.functional.adaptive_max_pool2d(x[1], { 3, 2 }, { return_indices = true })
    assert.is_true(y2:equal(y[1]) and i2:equal(i[1]))
    assert.is_true(x:reshape({ 1, 1, -1 }):gather(3, i:reshape({ 1, 1, -1 })):reshape(y.shape):equal(y))
  end)

  it("nn.AdaptiveMaxPool1d and nn.AdaptiveMaxPool3d with return_indices", function()
    local x1 = ember.tensor({ 2, 7, 1, 8, 2, 8, 1, 8 }, { dtype = "float64" }):view({ 1, 1, 8 })
    local y, i = nn.AdaptiveMaxPool1d{ output_size = 3, return_indices = true }(x1)
    assert.are.same({ 7, 8, 8 }, y:reshape({ -1 }):totable())
    assert.are.same(plus1({ 1, 3, 5 }), i:reshape({ -1 }):totable())
    local x3 = (ember.arange(27, { dtype = "float64" }) % 7):view({ 1, 1, 3, 3, 3 })
    local y3, i3 = nn.AdaptiveMaxPool3d({ 2, 2, 1 }, { return_indices = true })(x3)
    assert.are.same({ 6, 6, 6, 6 }, y3:reshape({ -1 }):totable())
    assert.are.same(plus1({ 13, 6, 13, 13 }), i3:reshape({ -1 }):totable())
    local y4, i4 = nn.functional.adaptive_max_pool3d(x3[1], { 2, 2, 1 }, true)
    assert.is_true(y4:equal(y3[1]) and i4:equal(i3[1]))
    -- without it, one result as before
    assert.are.equal(1, select("#", nn.AdaptiveMaxPool3d(2)(x3)))
  end)
end)

describe("nn.functional.interpolate's antialias", function()
  -- was: 'nn.functional.interpolate: antialias is not supported'. The values are torch 1.13's:
  -- x = (torch.arange(30.) ** 1.5).view(1, 1, 5, 6) (float64);
  -- F.interpolate(x, size=(2, 3), mode='bilinear', antialias=True) and size=(3, 2), mode='bicubic'
  local x = (ember.arange(30, { dtype = "float64" }) ^ 1.5):view({ 1, 1, 5, 6 })
  local function close(want, got, tol)
    local g = got:reshape({ -1 }):totable()
    assert.are.equal(#want, #g)
    for i = 1, #want do assert(math.abs(g[i] - want[i]) <= tol, ("%d: %.12g vs torch's %.12g"):format(i, g[i], want[i])) end
  end

  it("bilinear and bicubic downsampling average every input they cover, as torch's", function()
    local F = nn.functional
    close({ 21.408113256349, 28.280184893204, 36.101248869653, 83.350298912276, 95.115459604325, 107.380840872027 },
      F.interpolate(x, { size = { 2, 3 }, mode = "bilinear", antialias = true }), 1e-9)
    close({ 6.810950191087, 15.216089502921, 48.31496316998, 63.900166965164, 110.449298711972, 130.722774368945 },
      F.interpolate(x, { 3, 2 }, nil, "bicubic", nil, nil, true), 1e-9) -- torch's positional order
    -- its gradient: torch's x.grad of the bilinear output's sum, the first row
    local xr = x:clone():requires_grad_(true)
    F.interpolate(xr, { size = { 2, 3 }, mode = "bilinear", antialias = true }):sum():backward()
    close({ 0.136363636364, 0.176136363636, 0.164772727273, 0.164772727273, 0.176136363636, 0.136363636364 },
      xr.grad[1][1][1], 1e-11)
    -- without a reduction it is the ordinary bilinear's size, and antialias = false changes nothing
    assert.are.equal("1,1,10,12", shape(F.interpolate(x, { scale_factor = 2, mode = "bilinear", antialias = true })))
    assert.is_true(F.interpolate(x, { size = { 2, 3 }, mode = "bilinear", antialias = false })
      :equal(F.interpolate(x, { size = { 2, 3 }, mode = "bilinear" })))
  end)

  it("refuses antialias with the other modes, naming interpolate at the user's line", function()
    local ok, e = pcall(function() local y = nn.functional.interpolate(x, { size = 2, mode = "nearest", antialias = true }); return y end)
    assert.is_false(ok)
    assert.truthy(tostring(e):find("antialias goes only with the modes \"bilinear\" and \"bicubic\""), tostring(e))
  end)
end)

describe("grid_sample and affine_grid on volumes [N, C, D, H, W]", function()
  it("a spatial transformer in 3-d: values and theta's gradient as torch's", function()
    -- was: 'expected a 4-d input [N, C, H, W] (5-d volumes are not supported)' and 'size must be ... (4 positive
    -- integers; 5-d is not supported)'. torch 1.13, float64: x = (torch.arange(24.) ** 1.5).view(1, 1, 2, 3, 4),
    -- g = F.affine_grid(theta, (1, 1, 2, 2, 2), align_corners=False); F.grid_sample(x, g, 'bilinear', 'border',
    -- align_corners=False), then theta.grad of its sum
    local F = nn.functional
    local x = (ember.arange(24, { dtype = "float64" }) ^ 1.5):view({ 1, 1, 2, 3, 4 })
    local theta = ember.tensor({ { { 0.9, 0.1, 0.0, 0.05 }, { -0.1, 0.8, 0.2, 0.0 }, { 0.0, 0.3, 1.1, -0.1 } } },
      { dtype = "float64" }):requires_grad_(true)
    local g = F.affine_grid(theta, { 1, 1, 2, 2, 2 }, false)
    assert.are.equal("1,2,2,2,3", shape(g))
    local y = F.grid_sample(x, g, "bilinear", "border", false)
    assert.are.equal("1,1,2,2,2", shape(y))
    local want = { 3.625166278062, 5.954398406618, 18.724407942036, 23.571394652101, 48.536660492597, 54.898707473252,
      90.325539172557, 98.611740046686 }
    local got = y:reshape({ -1 }):totable()
    for i = 1, #want do assert(math.abs(got[i] - want[i]) < 1e-9, ("y %d: %.12g vs %.12g"):format(i, got[i], want[i])) end
    y:sum():backward()
    local gw = { 1.902371305478, 6.683708456292, 11.79112805613, 72.980031984538, 6.04226403506, 16.868705529029,
      30.324742007711, 225.313688888518, 1.931281988456, -54.580073281936, 54.580073281936, 109.160146563872 }
    local gg = theta.grad:reshape({ -1 }):totable()
    for i = 1, #gw do assert(math.abs(gg[i] - gw[i]) < 1e-8, ("theta.grad %d: %.12g vs %.12g"):format(i, gg[i], gw[i])) end
    -- the identity map reads the volume back (align_corners = true: the corner voxels' centres)
    local id = ember.tensor({ { { 1, 0, 0, 0 }, { 0, 1, 0, 0 }, { 0, 0, 1, 0 } } }, { dtype = "float64" })
    local back = F.grid_sample(x, F.affine_grid(id, { 1, 1, 2, 3, 4 }, true), { align_corners = true })
    assert(back:allclose(x, 1e-12, 1e-12))
    assert.is_true(F.grid_sample(x, F.affine_grid(id, { 1, 1, 2, 3, 4 }, true), "nearest", "zeros", true):equal(x))
  end)

  it("a grid of the wrong rank names grid_sample", function()
    local e = err_of(function() return nn.functional.grid_sample(ember.randn(1, 1, 2, 3, 4), ember.randn(1, 2, 2, 2)) end)
    assert.truthy(e:find("grid_sample: expected a grid %[N, Do, Ho, Wo, 3%] with N = 1"), e)
  end)
end)

describe("grid_sample's grid gradient on the image's edge (border, reflection)", function()
  it("an identity spatial transformer with align_corners: theta's gradient as torch's", function()
    -- was {-10.48, -22.85, -21.47, -0.455, 58.89, 74.36}: the points on the edge (all of an identity grid's
    -- outer ones with align_corners) passed the gradient through the clamp, where PyTorch's
    -- clip_coordinates_set_grad gives 0. torch 1.13, float64 (the same for 'reflection'): x = (torch.arange(12.) ** 1.5).view(1, 1, 3, 4),
    -- theta = [[[1, 0, 0], [0, 1, 0]]], y = F.grid_sample(x, F.affine_grid(theta, (1, 1, 3, 4), True), 'bilinear',
    -- 'border', True); theta.grad of (y * torch.arange(12.).view(1, 1, 3, 4).cos()).sum()
    local F = nn.functional
    local x = (ember.arange(12, { dtype = "float64" }) ^ 1.5):view({ 1, 1, 3, 4 })
    local R = ember.arange(12, { dtype = "float64" }):view({ 1, 1, 3, 4 }):cos()
    local want = { 0.417135764429, -12.438752871513, -5.428159392446, 27.024588468613, 0.0, 24.720063237785 }
    for _, padding in ipairs { "border", "reflection" } do
      local theta = ember.tensor({ { { 1, 0, 0 }, { 0, 1, 0 } } }, { dtype = "float64" }):requires_grad_(true)
      local y = F.grid_sample(x, F.affine_grid(theta, { 1, 1, 3, 4 }, true), "bilinear", padding, true)
      assert(y:allclose(x, 1e-12, 1e-12))
      ;(y * R):sum():backward()
      local got = theta.grad:reshape({ -1 }):totable()
      for i = 1, #want do
        assert(math.abs(got[i] - want[i]) < 1e-9, ("%s theta.grad %d: %.12g vs torch's %.12g"):format(padding, i, got[i], want[i]))
      end
    end
  end)
end)

describe("grid_sample's pixel coordinates round as torch's kernel", function()
  it("an identity grid without align_corners: the points' rows and theta's gradient as torch's", function()
    -- An identity grid's points fall on pixel centres, where the bilinear gradient is one-sided: the
    -- rounding of ((g + 1) * H - 1) / 2 picks the side. torch's 2-d CPU kernel computes it as
    -- fmadd(g + 1, H / 2, -0.5): rows 5.55e-17, 1, 1.9999999999999998 here; ember had 0, 1, 2 and a theta
    -- gradient of {..., -0.512, 58.89, 111.5} for torch's {..., 5.211, -26.04, -15.86}. torch 1.13, float64:
    -- F.grid_sample(rows or x, F.affine_grid(theta, (1, 1, 3, 4), False), 'bilinear', padding, False),
    -- x = (torch.arange(12.) ** 1.5).view(1, 1, 3, 4), theta.grad of (y * torch.arange(12.).view(1, 1, 3, 4).cos()).sum()
    local F = nn.functional
    local I = ember.tensor({ { { 1, 0, 0 }, { 0, 1, 0 } } }, { dtype = "float64" })
    local rows = ember.arange(3, { dtype = "float64" }):view({ 1, 1, 3, 1 }):expand({ 1, 1, 3, 4 }):contiguous()
    local r = F.grid_sample(rows, F.affine_grid(I, { 1, 1, 3, 4 }, false), "bilinear", "zeros", false)
    assert.are.same({ 5.5511151231257827e-17, 1, 1.9999999999999998 }, r[1][1]:select(2, 1):totable())
    local x = (ember.arange(12, { dtype = "float64" }) ^ 1.5):view({ 1, 1, 3, 4 })
    local R = ember.arange(12, { dtype = "float64" }):view({ 1, 1, 3, 4 }):cos()
    local want = {
      zeros = { -10.479997571435, -20.31243596656, -28.627136388154, 5.211414821329, -26.035204478999, -15.860755983863 },
      border = { 0.417135764429, -11.056669219123, -7.237545856595, 5.211414821329, -26.035204478999, -15.860755983863 },
    }
    for padding, w in pairs(want) do
      local theta = I:clone():requires_grad_(true)
      local y = F.grid_sample(x, F.affine_grid(theta, { 1, 1, 3, 4 }, false), "bilinear", padding, false)
      ;(y * R):sum():backward()
      local got = theta.grad:reshape({ -1 }):totable()
      for i = 1, #w do
        assert(math.abs(got[i] - w[i]) < 1e-9, ("%s theta.grad %d: %.12g vs torch's %.12g"):format(padding, i, got[i], w[i]))
      end
    end
  end)
end)

describe("grid_sample's bicubic mode", function()
  it("values and the grid's gradient as torch's, zeros and reflection padding", function()
    -- was: 'mode must be "bilinear" or "nearest" ("bicubic" is not supported)'. torch 1.13, float64:
    -- x = (torch.arange(12.) ** 1.5).view(1, 1, 3, 4), g = [[[[-0.9, -0.8], [0.35, 0.1], [1.2, 0.95]]]];
    -- F.grid_sample(x, g, 'bicubic', padding, align_corners=False), g.grad of its sum
    local F = nn.functional
    local x = (ember.arange(12, { dtype = "float64" }) ^ 1.5):view({ 1, 1, 3, 4 })
    local want = {
      zeros = { { -0.621497282631, 19.914504523782, 1.922711731769 },
        { -1.571297826066, 1.826221059865, 19.474507300542, 40.383808437525, -41.824687858219, -5.328665588135 } },
      reflection = { { -1.076291576126, 18.90419656638, 40.115965889006 },
        { 0.4430155281, 5.16820261571, 9.888181824817, 30.766795558721, -6.060141093934, 3.043000550368 } },
    }
    for padding, w in pairs(want) do
      local g = ember.tensor({ { { { -0.9, -0.8 }, { 0.35, 0.1 }, { 1.2, 0.95 } } } }, { dtype = "float64" })
        :requires_grad_(true)
      local y = F.grid_sample(x, g, "bicubic", padding, false)
      y:sum():backward()
      for k, got in ipairs { y:reshape({ -1 }):totable(), g.grad:reshape({ -1 }):totable() } do
        for i = 1, #w[k] do
          assert(math.abs(got[i] - w[k][i]) < 1e-9, ("%s %d.%d: %.12g vs torch's %.12g"):format(padding, k, i, got[i], w[k][i]))
        end
      end
    end
  end)
end)
