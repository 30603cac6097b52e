-- nn.checkpoint as torch.utils.checkpoint.
--
--  * A module that moves state in its training forward (BatchNorm's and
--    InstanceNorm's running statistics and num_batches_tracked,
--    spectral_norm's power iteration) moved it twice, once in the forward
--    and again in the backward's recompute; spectral norm's second iteration
--    also changed u and v, so the gradients were no longer those of the run
--    without checkpointing.
--  * torch's keyword arguments ({use_reentrant = false} after fn's
--    arguments) reached fn, or were dropped.
local ember = require "ember"
local nn = require "ember.nn"

-- the message of a failed call, or nil
local err_of = require("tests.lua.helpers.parity").error_of

local bitwise_equal = require("tests.lua.helpers.parity").bitwise_equal

describe("nn.checkpoint and state moved in the forward", function()
  -- one training step of make(), plain or checkpointed; returns the module,
  -- the input's gradient and the output
  local function step(make, use_ckpt, shape)
    ember.manual_seed(5)
    local m = make()
    local x = ember.randn(table.unpack(shape)):requires_grad_()
    local y = use_ckpt and nn.checkpoint(m, x) or m(x)
    y:pow(2):sum():backward()
    return m, x.grad, y
  end

  it("BatchNorm2d's running statistics move once per step, as without checkpointing", function()
    local make = function() return nn.Sequential(nn.Conv2d(3, 4, 3, { padding = 1 }), nn.BatchNorm2d(4)) end
    local a, ga = step(make, false, { 4, 3, 5, 5 })
    local b, gb = step(make, true, { 4, 3, 5, 5 })
    assert.are.equal(1, b[2].num_batches_tracked:item())
    bitwise_equal(a[2].running_mean, b[2].running_mean, "running_mean")
    bitwise_equal(a[2].running_var, b[2].running_var, "running_var")
    bitwise_equal(ga, gb, "input gradient")
    bitwise_equal(a[1].weight.grad, b[1].weight.grad, "conv weight gradient")
  end)

  it("momentum = false (the cumulative average) counts the batch once", function()
    local make = function() return nn.BatchNorm1d(3, { momentum = false }) end
    local a = step(make, false, { 6, 3 })
    local b = step(make, true, { 6, 3 })
    assert.are.equal(1, b.num_batches_tracked:item())
    bitwise_equal(a.running_var, b.running_var, "running_var")
  end)

  it("InstanceNorm2d with track_running_stats moves them once", function()
    local make = function() return nn.InstanceNorm2d(3, { track_running_stats = true }) end
    local a = step(make, false, { 2, 3, 4, 4 })
    local b = step(make, true, { 2, 3, 4, 4 })
    bitwise_equal(a.running_mean, b.running_mean, "running_mean")
    bitwise_equal(a.running_var, b.running_var, "running_var")
  end)

  it("nested checkpoints move the statistics once too", function()
    local make = function() return nn.BatchNorm1d(3) end
    local a = step(make, false, { 5, 3 })
    ember.manual_seed(5)
    local bn = make()
    local x = ember.randn(5, 3):requires_grad_()
    nn.checkpoint(function(h) return nn.checkpoint(bn, h * 1) end, x):pow(2):sum():backward()
    assert.are.equal(1, bn.num_batches_tracked:item())
    bitwise_equal(a.running_mean, bn.running_mean, "running_mean")
  end)

  it("spectral_norm (parametrization and hook) iterates once, and the gradients are the plain run's", function()
    for _, hook in ipairs { false, true } do
      local make = function()
        local lin = nn.Linear(6, 5)
        if hook then nn.utils.spectral_norm(lin) else nn.utils.parametrizations.spectral_norm(lin) end
        return lin
      end
      local a, ga, ya = step(make, false, { 4, 6 })
      local b, gb, yb = step(make, true, { 4, 6 })
      local what = hook and "nn.utils.spectral_norm" or "parametrizations.spectral_norm"
      bitwise_equal(ya, yb, what .. " output")
      bitwise_equal(ga, gb, what .. " input gradient")
      local ua = hook and a.weight_u or a.parametrizations.weight[1]._u
      local ub = hook and b.weight_u or b.parametrizations.weight[1]._u
      bitwise_equal(ua, ub, what .. " u")
    end
  end)

  it("recomputing() is true only inside the backward's recompute", function()
    local ckpt = require "ember.nn.activation_checkpoint"
    local seen = {}
    local x = ember.randn(3):requires_grad_()
    assert.is_false(ckpt.recomputing())
    nn.checkpoint(function(h) seen[#seen + 1] = ckpt.recomputing(); return h * 2 end, x):sum():backward()
    assert.are.same({ false, true }, seen)
    assert.is_false(ckpt.recomputing())
  end)
end)

describe("nn.checkpoint with torch.utils.checkpoint's keyword arguments", function()
  it("{use_reentrant = false} after fn's arguments is checkpoint's, not fn's", function()
    -- was: the table reached fn (a layer then refused 'use_reentrant', a function silently got it)
    ember.manual_seed(0)
    local layer = nn.TransformerEncoderLayer(8, 2)
    layer:eval()
    local x = ember.randn(2, 5, 8)
    local x1 = x:clone():requires_grad_()
    nn.checkpoint(layer, x1, { use_reentrant = false }):sum():backward()
    local x2 = x:clone():requires_grad_()
    layer(x2):sum():backward()
    assert.is_true(x1.grad:equal(x2.grad))
    local seen
    local function f(...)
      seen = select("#", ...)
      return (...) * 2
    end
    nn.checkpoint(f, x:clone():requires_grad_(), { use_reentrant = true, preserve_rng_state = true })
    assert.are.equal(1, seen)
    ember.no_grad(function() nn.checkpoint(f, x, { use_reentrant = false }) end)
    assert.are.equal(1, seen)
    nn.checkpoint(f, x:clone():requires_grad_(), { debug = true }) -- debug alone: fn's own option
    assert.are.equal(2, seen)
    -- an options table of fn's own still reaches it
    local pad = ember.tensor({ { false, false, false, true, true }, { false, false, false, false, false } })
    assert.is_true(nn.checkpoint(layer, x, { key_padding_mask = pad }):equal(layer(x, { key_padding_mask = pad })))
  end)

  it("checkpoint's options beside fn's, or bad values, are errors naming nn.checkpoint", function()
    local layer = nn.Linear(4, 4)
    local x = ember.randn(2, 4)
    assert.matches("nn_checkpoint_state_spec.lua:%d+: nn.checkpoint: the last argument mixes",
      err_of(function() nn.checkpoint(layer, x, { use_reentrant = false, key_padding_mask = 1 }) end))
    assert.matches("use_reentrant must be true or false, got no",
      err_of(function() nn.checkpoint(layer, x, { use_reentrant = "no" }) end))
    assert.matches("context_fn is not supported",
      err_of(function() nn.checkpoint(layer, x, { context_fn = function() end }) end))
  end)

  it("checkpoint_sequential takes them after input, and refuses anything else there", function()
    -- was: any argument after input silently ignored
    local net = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 4), nn.GELU())
    local x = ember.randn(3, 4)
    local a = x:clone():requires_grad_()
    nn.checkpoint_sequential(net, 2, a, { use_reentrant = false }):sum():backward()
    local b = x:clone():requires_grad_()
    net(b):sum():backward()
    assert.is_true(a.grad:equal(b.grad))
    assert.matches("nn_checkpoint_state_spec.lua:%d+: nn.checkpoint_sequential: expected %(functions, segments, input",
      err_of(function() nn.checkpoint_sequential(net, 2, x, { foo = 1 }) end))
  end)
end)
