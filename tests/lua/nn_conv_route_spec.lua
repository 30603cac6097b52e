-- nn.Conv2d and nn.Conv1d on the backend's convolution kernel (the core op
-- core/src/ops_conv.c; oneDNN's primitives on the CPU) against the composed
-- route (nn/_conv.lua) and against PyTorch 1.13 (tests/fixtures/nn_conv.lua,
-- made in float64 by tests/gen_conv_fixtures.py): float32 forward and every
-- gradient, bfloat16 under autocast, the routes ember.conv_routes() counts,
-- and the core op's own errors. The float64 gradchecks of nn_conv_spec.lua
-- run the composed route (the kernel has no float64); this spec ties the
-- kernel to that route.
local ember = require "ember"
local nn = require "ember.nn"

local fixtures = dofile("tests/fixtures/nn_conv.lua")
local F64 = { dtype = "float64" }

local function T(spec, dtype)
  return ember.tensor(spec.data, F64):view(spec.shape):to(dtype or "float64")
end

local function max_rel(a, b)
  local ad, bd = a:double(), b:double()
  return (ad - bd):abs():max():item() / math.max(bd:abs():max():item(), 1e-300)
end

local function check(what, got, want, tol)
  assert(got ~= nil, what .. " is nil")
  assert.are.same(want.shape, got.shape, what .. " shape")
  local e = max_rel(got, want)
  assert(e <= tol, ("%s: relative error %.3g > %.1g"):format(what, e, tol))
end

-- The module of a fixture's config, float32, on the given route.
local function make(cfg, route)
  local cls = cfg.nd == 2 and nn.Conv2d or nn.Conv1d
  return cls(cfg.in_channels, cfg.out_channels, cfg.kernel_size, { stride = cfg.stride, padding = cfg.padding,
    dilation = cfg.dilation, groups = cfg.groups, bias = cfg.bias, route = route })
end

-- Output and gradients (x, then the parameters by name) of one step with
-- the fixture's weights and upstream gradient R; the routes taken.
local function run(c, route, autocast)
  local m = make(c.config, route)
  local sd = {}
  for k, v in pairs(c.state) do sd[k] = T(v, "float32") end
  m:load_state_dict(sd)
  local x = T(c.x, "float32"):requires_grad_()
  local before = ember.conv_routes()
  local y = autocast and ember.autocast("bfloat16", function() return m(x) end) or m(x)
  local after = ember.conv_routes()
  ;(y:float() * T(c.R, "float32")):sum():backward()
  local grads = { x = x.grad }
  for k, p in pairs(m:named_parameters()) do grads[k] = p.grad end
  return y, grads, { kernel = after.kernel - before.kernel, composed = after.composed - before.composed }
end

describe("nn.Conv2d/Conv1d on the backend's convolution kernel", function()
  local has_kernel
  setup(function()
    local y, _, routes = run(fixtures.cases[1], "auto")
    assert(y)
    has_kernel = routes.kernel == 1
  end)

  it("runs on the kernel on the CPU in float32: ember.conv_routes() counts it, and route=\"composed\" does not", function()
    assert.is_true(has_kernel, "the CPU backend's convolution kernel did not run")
    local c = fixtures.cases[1]
    local _, _, r1 = run(c, "auto")
    assert.are.same({ kernel = 1, composed = 0 }, r1)
    local _, _, r2 = run(c, "composed")
    assert.are.same({ kernel = 0, composed = 1 }, r2)
    local r = ember.conv_routes()
    assert(math.type(r.kernel) == "integer" and math.type(r.composed) == "integer")
    assert(tostring(r):find("kernel"), "conv_routes prints: " .. tostring(r))
  end)

  for _, c in ipairs(fixtures.cases) do
    it(c.name .. ": float32 output and gradients match the composed route and PyTorch", function()
      local yk, gk, rk = run(c, "auto")
      local yc, gc, rc = run(c, "composed")
      assert.are.same({ kernel = 1, composed = 0 }, rk, "routes of the kernel module")
      assert.are.same({ kernel = 0, composed = 1 }, rc, "routes of the composed module")
      assert.are.equal("float32", yk.dtype)
      -- float32 sums of at most a few hundred products, in different orders
      check(c.name .. " output vs composed", yk, yc, 2e-6)
      check(c.name .. " output vs PyTorch", yk, T(c.out), 2e-6)
      check(c.name .. " grad x vs composed", gk.x, gc.x, 2e-6)
      check(c.name .. " grad x vs PyTorch", gk.x, T(c.grad_x), 2e-6)
      local n = 0
      for k, g in pairs(c.grads) do
        n = n + 1
        assert.are.equal("float32", gk[k].dtype)
        check(c.name .. " grad " .. k .. " vs composed", gk[k], gc[k], 2e-6)
        check(c.name .. " grad " .. k .. " vs PyTorch", gk[k], T(g), 2e-6)
      end
      assert(n >= 1)
    end)
  end

  it("bfloat16 under autocast: the kernel runs, within bfloat16's error of PyTorch's float64; float32 gradients", function()
    for _, c in ipairs(fixtures.cases) do
      local yk, gk, rk = run(c, "auto", true)
      assert.are.same({ kernel = 1, composed = 0 }, rk, c.name)
      assert.are.equal("bfloat16", yk.dtype)
      -- inputs and weights rounded to 8 bits, sums in float32, output rounded
      check(c.name .. " bf16 output", yk, T(c.out), 2e-2)
      check(c.name .. " bf16 grad x", gk.x, T(c.grad_x), 3e-2)
      assert.are.equal("float32", gk.x.dtype)
      for k, g in pairs(c.grads) do
        assert.are.equal("float32", gk[k].dtype)
        check(c.name .. " bf16 grad " .. k, gk[k], T(g), 3e-2)
      end
    end
  end)

  it("float64 takes the composed route (the kernel declines it)", function()
    local m = nn.Conv2d(2, 3, 3, { dtype = "float64" })
    local before = ember.conv_routes()
    local y = m(ember.randn({ 1, 2, 5, 5 }, F64))
    local after = ember.conv_routes()
    assert.are.equal("float64", y.dtype)
    assert.are.same({ 0, 1 }, { after.kernel - before.kernel, after.composed - before.composed })
  end)

  it("a non-contiguous input, a batch of one and an unbatched input give the composed route's values", function()
    ember.manual_seed(3)
    local k = nn.Conv2d(5, 4, 3, { padding = { 1, 2 }, stride = { 2, 1 } })
    local c = nn.Conv2d(5, 4, 3, { padding = { 1, 2 }, stride = { 2, 1 }, route = "composed" })
    c:load_state_dict(k:state_dict())
    local x = ember.randn(6, 7, 2, 5):permute(3, 4, 1, 2)
    assert.is_false(x:is_contiguous())
    check("non-contiguous", k(x), c(x), 2e-6)
    check("unbatched", k(x[1]), c(x[1]), 2e-6)
    -- the same shapes again: the cached primitives
    check("cached", k(x), c(x), 2e-6)
  end)

  -- With 16 channels and more on both sides the kernel runs on oneDNN's
  -- blocked layout, and the forward keeps x in it for the weight gradient
  -- (the backend's conv2d_keep, ember_backend.h): one activation the graph
  -- holds, then frees.
  local function live()
    collectgarbage()
    collectgarbage()
    return ember.live_bytes()
  end

  it("keeps x in the kernel's layout for the weight gradient: held by the graph, freed with it, only when the weight needs a gradient", function()
    ember.manual_seed(5)
    local m = nn.Conv2d(16, 32, 3, { padding = 1 })
    local x, xg = ember.randn(2, 16, 8, 8), ember.randn(2, 16, 8, 8):requires_grad_()
    local xbytes, ybytes = x:numel() * 4, 2 * 32 * 8 * 8 * 4
    m(x):sum():backward() -- the first call makes the primitives
    for _, p in ipairs(m:parameters()) do p.grad = nil end
    local b0 = live()
    local y = m(x)
    local held = live() - b0 - ybytes
    assert(held >= xbytes and held < xbytes + 4096, "bytes held beside y: " .. held)
    y = nil
    assert.are.equal(b0, live(), "freed with the graph, without a backward")
    y = m(x)
    y:backward(ember.ones_like(y))
    assert.are.equal(ybytes + 32 * 16 * 9 * 4 + 32 * 4, live() - b0, "after backward: y and the gradients")
    y = nil
    for _, p in ipairs(m:parameters()) do p.grad = nil end
    assert.are.equal(b0, live())
    -- the weight needs no gradient: nothing kept (the input's gradient reads no x)
    m.weight:requires_grad_(false)
    y = m(xg)
    assert.are.equal(ybytes, live() - b0, "no weight gradient: only y")
    m.weight:requires_grad_(true)
  end)

  it("each graph reads its own kept x: two forwards, backwards in reverse order, bit for bit the gradients of one at a time, and the composed route's", function()
    ember.manual_seed(6)
    local m = nn.Conv2d(16, 16, 3, { padding = 1, stride = 2 })
    local c = nn.Conv2d(16, 16, 3, { padding = 1, stride = 2, route = "composed" })
    c:load_state_dict(m:state_dict())
    for _, autocast in ipairs { false, true } do
      local function fwd(mod, x)
        return autocast and ember.autocast("bfloat16", function() return mod(x) end) or mod(x)
      end
      local xs = { ember.randn(3, 16, 9, 9), ember.randn(3, 16, 9, 9) }
      local R = ember.randn(3, 16, 5, 5)
      local function grads(mod, y)
        ;(y:float() * R):sum():backward()
        local g = { mod.weight.grad, mod.bias.grad }
        mod.weight.grad, mod.bias.grad = nil, nil
        return g
      end
      local one = { grads(m, fwd(m, xs[1])), grads(m, fwd(m, xs[2])) }
      local y1, y2 = fwd(m, xs[1]), fwd(m, xs[2])
      local two = { [2] = grads(m, y2) }
      two[1] = grads(m, y1)
      for i = 1, 2 do
        for j = 1, 2 do
          assert.is_true(ember.equal(one[i][j], two[i][j]), ("x %d, parameter %d, autocast %s"):format(i, j, autocast))
        end
        local want = grads(c, fwd(c, xs[i]))
        check(("grad weight of x %d, autocast %s"):format(i, autocast), two[i][1], want[1], autocast and 3e-2 or 2e-6)
        check(("grad bias of x %d, autocast %s"):format(i, autocast), two[i][2], want[2], autocast and 3e-2 or 2e-6)
      end
    end
  end)

  it("an input written in place after the forward is refused at backward, as PyTorch's", function()
    local m = nn.Conv2d(16, 16, 3, { padding = 1 })
    local x = ember.randn(1, 16, 6, 6)
    local y = m(x)
    x:add_(1)
    local ok, msg = pcall(function() y:sum():backward() end)
    assert.is_false(ok)
    assert.matches("modified by an in%-place operation", msg)
  end)

  it("the core op's own errors name conv2d and what is wrong", function()
    local x, w = ember.randn(2, 4, 5, 5), ember.randn(6, 2, 3, 3)
    local function err(...)
      local ok, msg = pcall(ember._conv2d, ...)
      assert.is_false(ok)
      return msg
    end
    assert.matches("ember.conv2d: input %[2, 4, 5, 5%] does not fit weight %[6, 2, 3, 3%] with groups = 3",
      err(x, w, nil, 1, 1, 0, 0, 0, 0, 1, 1, 3))
    assert.matches("ember.conv2d: the kernel %(extent 7 with dilation%) is larger than the padded input %(6%) along dim 3",
      err(x, w, nil, 1, 1, 1, 0, 0, 0, 3, 1, 2))
    assert.matches("ember.conv2d: bias has shape %[5%], expected %[6%]", err(x, w, ember.randn(5), 1, 1, 0, 0, 0, 0, 1, 1, 2))
    assert.matches("ember.conv2d: strides and dilations must be >= 1", err(x, w, nil, 0, 1, 0, 0, 0, 0, 1, 1, 2))
    assert.matches("ember.conv2d: input is float32 but weight is float64", err(x, w:double(), nil, 1, 1, 0, 0, 0, 0, 1, 1, 2))
    local ok, msg = pcall(function() return nn.Conv2d(2, 2, 3, { route = "onednn" }) end)
    assert.is_false(ok)
    assert.matches("nn_conv_route_spec.lua:%d+: Conv2d: route must be \"auto\"", msg)
  end)
end)
