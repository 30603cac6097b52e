-- Autograd's hooks and gradient functions as PyTorch's.
--
-- A leaf's gradient hooks (t:register_hook, t:register_grad_ready_hook) live
-- and die with the tensor, as PyTorch's: they kept it (and its .grad) alive
-- for the whole session, also when the hook's closure captured the tensor
-- itself. And a tensor that comes after a dead one, maybe at its address,
-- never runs the dead one's hooks.
--
-- autograd.backward and ember.grad over several outputs: each gradient must
-- have its output's shape (one that broadcast gave wrong numbers); and
-- ember.grad with respect to a non-leaf leaves no retained gradient behind.
local ember = require "ember"
local nn = require "ember.nn"

local KB = 1024

local function full_gc()
  collectgarbage()
  collectgarbage()
end

-- live tensor bytes that `fn` leaves behind once the GC has run
local function leaves_behind(fn)
  full_gc()
  local base = ember.live_bytes()
  fn()
  full_gc()
  return ember.live_bytes() - base
end

describe("a leaf's gradient hooks", function()
  it("die with the tensor: 50 hooked weights and their gradients are freed", function()
    local left = leaves_behind(function()
      for _ = 1, 50 do
        local w = ember.randn(128, 128, { requires_grad = true })
        w:register_hook(function(g) return g end)
        ;(w * 2):sum():backward()
      end
    end)
    assert.is_true(left < 64 * KB, ("%d bytes of hooked tensors still live"):format(left))
  end)

  it("die with the tensor when the hook captures the tensor itself", function()
    local left = leaves_behind(function()
      for _ = 1, 50 do
        local w = ember.randn(128, 128, { requires_grad = true })
        w:register_hook(function(g) assert(w.shape[1] == 128); return g end)
        ;(w * 2):sum():backward()
      end
    end)
    assert.is_true(left < 64 * KB, ("%d bytes of self-capturing hooks' tensors still live"):format(left))
  end)

  it("register_grad_ready_hook: the same, also capturing the tensor", function()
    local fired = 0
    local left = leaves_behind(function()
      for i = 1, 50 do
        local w = ember.randn(128, 128, { requires_grad = true })
        if i % 2 == 0 then
          w:register_grad_ready_hook(function(t) fired = fired + 1; assert(rawequal(t, w)) end)
        else
          w:register_grad_ready_hook(function() fired = fired + 1 end)
        end
        ;(w * 2):sum():backward()
      end
    end)
    assert.are.equal(50, fired)
    assert.is_true(left < 64 * KB, ("%d bytes of grad-ready hooked tensors still live"):format(left))
  end)

  it("a handle kept does not keep the tensor; its remove() after the tensor died does nothing", function()
    local handles = {}
    local left = leaves_behind(function()
      for _ = 1, 20 do
        local w = ember.randn(128, 128, { requires_grad = true })
        local f = function(g) return w and g end
        handles[#handles + 1] = w:register_hook(f)
        handles[#handles + 1] = w:register_grad_ready_hook(function() return w end)
      end
    end)
    assert.is_true(left < 64 * KB, ("%d bytes kept alive by hook handles"):format(left))
    for _, h in ipairs(handles) do
      h:remove()
      h:remove()
    end
  end)

  it("a dead tensor's hooks never fire for the tensors after it (address reuse)", function()
    local fired = 0
    do
      local w = ember.randn(64, 64, { requires_grad = true })
      w:register_hook(function(g) fired = fired + 1; return g * 0 end)
      w:register_grad_ready_hook(function() fired = fired + 1 end)
      ;(w * 1):sum():backward()
    end
    assert.are.equal(2, fired)
    full_gc()
    for _ = 1, 200 do
      local v = ember.ones(64, 64):requires_grad_()
      ;(v * 1):sum():backward()
      assert.are.equal(2, fired)
      assert.are.equal(64 * 64, v.grad:sum():item())
    end
  end)

  it("a closed tensor's hooks never fire for the tensors after it, and its handles still remove", function()
    local fired = 0
    local w = ember.randn(64, 64, { requires_grad = true })
    local h1 = w:register_hook(function(g) fired = fired + 1; return g * 0 end)
    local h2 = w:register_grad_ready_hook(function() fired = fired + 1 end)
    w:close() -- the value lives on; the tensor (and its address) are freed
    for _ = 1, 200 do
      local v = ember.ones(64, 64):requires_grad_()
      ;(v * 1):sum():backward()
      assert.are.equal(64 * 64, v.grad:sum():item())
    end
    assert.are.equal(0, fired)
    h1:remove()
    h2:remove()
  end)

  it("fire while the tensor lives, through collections, until removed", function()
    local w = ember.ones(3):requires_grad_()
    local seen, ready = 0, 0
    local h = w:register_hook(function(g) seen = seen + 1; return g * 2 end)
    local h2 = w:register_hook(function(g) seen = seen + 10; return g end)
    local r = w:register_grad_ready_hook(function(t) ready = ready + 1; assert(rawequal(t, w)) end)
    for _ = 1, 3 do
      full_gc()
      w.grad = nil
      ;(w * 1):sum():backward()
      assert.are.same({ 2, 2, 2 }, w.grad:totable())
    end
    assert.are.equal(33, seen)
    assert.are.equal(3, ready)
    h:remove()
    h:remove()
    r:remove()
    w.grad = nil
    ;(w * 1):sum():backward()
    assert.are.same({ 1, 1, 1 }, w.grad:totable())
    assert.are.equal(43, seen)
    assert.are.equal(3, ready)
    h2:remove()
    ;(w * 1):sum():backward()
    assert.are.equal(43, seen)
  end)

  it("of a parameter follow it through Module:to (Tensor:_assign) and load_state_dict", function()
    local m = nn.Linear(3, 2)
    local seen, ready = 0, 0
    m.weight:register_hook(function(g) seen = seen + 1; return g * 2 end)
    m.weight:register_grad_ready_hook(function() ready = ready + 1 end)
    m:double()
    full_gc()
    m(ember.ones(1, 3, "float64")):sum():backward()
    assert.are.same({ 1, 1 }, { seen, ready })
    assert.are.same({ { 2, 2, 2 }, { 2, 2, 2 } }, m.weight.grad:totable())
    m:load_state_dict(nn.Linear(3, 2):double():state_dict())
    m.weight.grad = nil
    full_gc()
    m(ember.ones(1, 3, "float64")):sum():backward()
    assert.are.same({ 2, 2 }, { seen, ready })
    -- the float32 tensor the parameter had is gone: tensors after it get none of its hooks
    for _ = 1, 50 do
      local v = ember.ones(2, 3):requires_grad_()
      ;(v * 1):sum():backward()
      assert.are.same({ { 1, 1, 1 }, { 1, 1, 1 } }, v.grad:totable())
    end
    assert.are.same({ 2, 2 }, { seen, ready })
    -- and the model, dropped, takes its hooked parameters with it
    local left = leaves_behind(function()
      for _ = 1, 10 do
        local big = nn.Linear(256, 256)
        big.weight:register_hook(function(g) return big and g end)
        big.bias:register_grad_ready_hook(function() return big end)
        big(ember.ones(1, 256)):sum():backward()
      end
    end)
    assert.is_true(left < 64 * KB, ("%d bytes of hooked models still live"):format(left))
  end)
end)

describe("hooks that are not a leaf's", function()
  it("retain_grad and register_hook on a non-leaf leave nothing behind after backward", function()
    local left = leaves_behind(function()
      for _ = 1, 50 do
        local w = ember.randn(128, 128, { requires_grad = true })
        local y = w * 2
        y:retain_grad()
        y:register_hook(function(g) return y and g end)
        y:sum():backward()
        assert.are.equal(128 * 128, y.grad:sum():item())
      end
    end)
    assert.is_true(left < 64 * KB, ("%d bytes of non-leaf hooks still live"):format(left))
  end)

  it("module hooks and backward-end hooks still fire and remove", function()
    local lin = nn.Linear(3, 2)
    local fwd, bwd, ends = 0, 0, 0
    local hf = lin:register_forward_hook(function() fwd = fwd + 1 end)
    local hb = lin:register_full_backward_hook(function(_, _, gout) bwd = bwd + 1; assert(gout[1]) end)
    local f = function() ends = ends + 1 end
    local he1 = ember.register_backward_end_hook(f)
    local he2 = ember.register_backward_end_hook(f) -- the same function twice: runs once per backward
    full_gc()
    lin(ember.ones(4, 3)):sum():backward()
    assert.are.same({ 1, 1, 1 }, { fwd, bwd, ends })
    he1:remove()
    lin(ember.ones(4, 3)):sum():backward()
    assert.are.same({ 2, 2, 2 }, { fwd, bwd, ends })
    he2:remove()
    he2:remove()
    hf:remove()
    hb:remove()
    lin(ember.ones(4, 3)):sum():backward()
    assert.are.same({ 2, 2, 2 }, { fwd, bwd, ends })
  end)

  it("module hooks refuse options after the hook (torch 2's with_kwargs was ignored: fn got the output as kwargs)", function()
    local lin = nn.Linear(3, 2)
    local parity = require "tests.lua.helpers.parity"
    for _, what in ipairs { "register_forward_pre_hook", "register_forward_hook", "register_full_backward_hook" } do
      parity.raises_here(function() lin[what](lin, function() end, { with_kwargs = true }) end,
        "Linear." .. what .. ": takes one argument, the hook")
    end
    assert.is_nil(rawget(lin, "_forward_hooks")) -- nothing was registered
    local seen
    lin:register_forward_hook(function(_, args, out) seen = { #args, out.shape[2] } end)
    lin(ember.ones(4, 3))
    assert.are.same({ 1, 2 }, seen)
  end)
end)

local function d(t) return ember.tensor(t, { dtype = "float64" }) end

describe("several outputs: each gradient must have its output's shape", function()
  it("autograd.backward refuses a gradient that would broadcast (it gave wrong numbers)", function()
    local a = d { 1, 2 }:requires_grad_()
    local ok, err = pcall(ember.autograd.backward, { a * 2, a * 3 }, { d { 1, 1 }, d { { 1 }, { 1 } } })
    assert.is_false(ok)
    assert.matches("ember.autograd.backward: grad_tensors[2] is [2, 1], but tensor 2 is [2]", err, 1, true)
    assert.is_nil(a.grad)
  end)

  it("ember.grad refuses one too, and more gradients than outputs", function()
    local a = d { 1, 2 }:requires_grad_()
    local ok, err = pcall(ember.autograd.grad, { a * 2, a * 3 }, { a },
      { grad_outputs = { d { 1, 1 }, d { { 1 }, { 1 } } } })
    assert.is_false(ok)
    assert.matches("ember.grad: grad_outputs[2] is [2, 1], but output 2 is [2]", err, 1, true)
    ok, err = pcall(ember.autograd.grad, { a * 2, a * 3 }, { a }, { grad_outputs = { d { 1, 1 }, d { 1, 1 }, d { 1, 1 } } })
    assert.is_false(ok)
    assert.matches("got 2 outputs and 3 grad_outputs", err, 1, true)
    ok, err = pcall(ember.autograd.grad, a * 2, a, { grad_outputs = { d { 1, 1 }, d { 1, 1 } } })
    assert.is_false(ok)
    assert.matches("got 1 outputs and 2 grad_outputs", err, 1, true)
  end)

  it("the right shapes still weight each output", function()
    local a = d { 1, 2 }:requires_grad_()
    local g = ember.autograd.grad({ a * a, a * 3 }, { a }, { grad_outputs = { d { 1, 2 }, d { 10, 1 } } })[1]
    -- 2a * [1, 2] + 3 * [10, 1]
    assert.is_true(ember.allclose(g, a:detach() * 2 * d { 1, 2 } + d { 30, 3 }))
    ember.autograd.backward({ a * a, a * 3 }, { d { 1, 2 }, d { 10, 1 } })
    assert.is_true(ember.allclose(a.grad, g))
  end)

  it("a gradient that requires grad is a constant: its own leaves get nothing (torch's)", function()
    local a = d { 1, 2 }:requires_grad_()
    local b = d { 1, 1 }:requires_grad_()
    ember.autograd.backward({ a * 2, a * 3 }, { b * 1, b * 2 })
    assert.is_nil(b.grad)
    assert.is_true(ember.allclose(a.grad, d { 8, 8 }))
  end)
end)

describe("ember.grad with respect to a non-leaf", function()
  it("does not leave the tensor retaining its gradient in later backwards", function()
    local x = d { 1, 2 }:requires_grad_()
    local h = x * 2
    local y = (h * h):sum()
    local g = ember.autograd.grad(y, h, { retain_graph = true })[1]
    assert.is_true(ember.allclose(g, h:detach() * 2))
    assert.is_nil(h.grad)
    y:backward()
    assert.is_nil(h.grad) -- torch: None (autograd.grad does not call retain_grad)
    assert.is_true(ember.allclose(x.grad, h:detach() * 4))
  end)

  it("sees what the tensor's own hooks made of the gradient, and keeps a retained .grad as it was", function()
    local x = d { 1, 2 }:requires_grad_()
    local h = (x * 1):retain_grad()
    h:register_hook(function(gr) return gr * 10 end)
    local y = (h * 3):sum()
    local g = ember.autograd.grad(y, h, { retain_graph = true })[1]
    assert.is_true(ember.allclose(g, d { 30, 30 }))
    assert.is_nil(h.grad)
    y:backward()
    assert.is_not_nil(h.grad) -- retain_grad the user asked for still holds
  end)

  it("a leaf and a non-leaf together, and an unused non-leaf", function()
    local x = d { 1, 2 }:requires_grad_()
    local h = x * 3
    local u = x * 5
    local gs = ember.autograd.grad((h * x):sum(), { x, h, u }, { allow_unused = true })
    assert.is_true(ember.allclose(gs[1], x:detach() * 6)) -- d(3x^2)/dx
    assert.is_true(ember.allclose(gs[2], x:detach()))
    assert.is_nil(gs[3])
    local ok, err = pcall(ember.autograd.grad, (x * 3 * x):sum(), { x, u })
    assert.is_false(ok)
    assert.matches("input 2 was not used", err, 1, true)
  end)
end)
