-- What a PyTorch user tries first with custom autograd functions and the
-- autograd API (ember.Function as torch.autograd.Function, core/lua/l_function.c).
-- Each block is a defect found by probing; it fails without its fix. The
-- values are PyTorch 1.13's (written next to them) or follow from the math.
local ember = require "ember"
local parity = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local raises_here = parity.raises_here

local F64 = { dtype = "float64" }
local function close(got, want, tol)
  assert(got ~= nil, "no tensor")
  local d = (got:double() - ember.tensor(want, F64)):abs():max():item()
  assert(d <= (tol or 1e-12), ("off by %g: %s"):format(d, tostring(got)))
end

describe("ember.Function's ctx, as torch.autograd.Function's", function()
  it("ctx.save_for_backward(a, b) (torch's dot call) and ctx.saved_tensors", function()
    local Mul = ember.Function {
      name = "probe_mul",
      forward = function(ctx, a, b)
        ctx.save_for_backward(a, b)
        return a * b
      end,
      backward = function(ctx, g)
        local a, b = table.unpack(ctx.saved_tensors)
        return g * b, g * a
      end,
    }
    local a = ember.tensor({ 1, 2, 3 }, F64):requires_grad_()
    local b = ember.tensor({ 4, 5, 6 }, F64):requires_grad_()
    Mul(a, b):sum():backward()
    close(a.grad, { 4, 5, 6 })
    close(b.grad, { 1, 2, 3 })
    -- the method call still works, and saved_tensors is ctx.saved
    local Sq = ember.Function {
      name = "probe_sq",
      forward = function(ctx, x)
        ctx:save_for_backward(x)
        assert(rawequal(ctx.saved_tensors, ctx.saved))
        return x * x
      end,
      backward = function(ctx, g) return 2 * g * ctx.saved_tensors[1] end,
    }
    gradcheck.check(function(x) return Sq(x) end, { ember.randn({ 3, 2 }, F64) })
  end)

  it("F.apply(...) is torch's spelling of F(...)", function()
    local Sq = ember.Function {
      name = "probe_apply",
      forward = function(ctx, x)
        ctx.save_for_backward(x)
        return x * x
      end,
      backward = function(ctx, g) return 2 * g * ctx.saved_tensors[1] end,
    }
    local x = ember.tensor({ 1, -2 }, F64):requires_grad_()
    local y = Sq.apply(x)
    assert.are.equal("probe_apply", y.grad_fn)
    Sq:apply(x):sum():backward()
    close(x.grad, { 2, -4 })
    assert.is_true(ember.autograd.gradcheck(Sq.apply, { x }))
  end)

  it("a gradient for a non-tensor argument is refused, as torch's (nil is the only answer there)", function()
    local Scale = ember.Function {
      name = "probe_scale",
      forward = function(ctx, a, k)
        ctx.k = k
        return a * k
      end,
      backward = function(ctx, g) return g * ctx.k, g:sum() end,
    }
    local x = ember.ones(2):requires_grad_()
    raises_here(function() Scale(x, 3):sum():backward() end,
      "probe_scale: error in the Lua backward: backward returned a tensor for argument 2, which was not a tensor in forward")
  end)

  it("a saved tensor written in place afterwards fails the backward, naming the function", function()
    local F = ember.Function {
      name = "probe_saved_inplace",
      forward = function(ctx, a, b)
        ctx.save_for_backward(b)
        return a * b
      end,
      backward = function(ctx, g) return g * ctx.saved_tensors[1], nil end,
    }
    local a, b = ember.randn(3):requires_grad_(), ember.randn(3)
    local y = F(a, b)
    b:add_(1)
    raises_here(function() y:sum():backward() end,
      "probe_saved_inplace: a tensor saved with save_for_backward ([3] float32 cpu) has been modified by an in-place operation")
  end)

  it("ctx.needs_input_grad: one boolean per argument, in forward and in backward", function()
    -- torch: (True, False, False) for F.apply(x_requiring_grad, y, 3)
    local seen = {}
    local F = ember.Function {
      name = "probe_needs",
      forward = function(ctx, a, b, k)
        seen.fwd = { table.unpack(ctx.needs_input_grad, 1, 3) }
        return a * b * k
      end,
      backward = function(ctx, g)
        seen.bwd = ctx.needs_input_grad
        return ctx.needs_input_grad[1] and g or nil, nil, nil
      end,
    }
    F(ember.randn(2):requires_grad_(), ember.randn(2), 3):sum():backward()
    assert.are.same({ true, false, false }, seen.fwd)
    assert.are.same({ true, false, false }, seen.bwd)
    ember.no_grad(function() F(ember.randn(2):requires_grad_(), ember.randn(2), 3) end)
    assert.are.same({ false, false, false }, seen.fwd)
  end)

  it("several outputs, a non-tensor and a non-differentiable one among them (mark_non_differentiable)", function()
    -- torch 1.13, x = [0.5, -1, 2]: s, c, i = F.apply(x, 2.5); s.sum().backward()
    -- backward gets (ones, zeros, tensor(0)); x.grad = [2.1940, 1.3508, -1.0404]; i.requires_grad False
    local got = {}
    local SinCos = ember.Function {
      name = "probe_sincos",
      forward = function(ctx, x, k)
        ctx.save_for_backward(x)
        ctx.k = k
        local i = x:argmax()
        ctx.mark_non_differentiable(i)
        return x:sin() * k, "label", x:cos(), i
      end,
      backward = function(ctx, gs, glabel, gc, gi)
        got = { gs = gs, glabel = glabel, gc = gc, gi = gi }
        local x = ctx.saved_tensors[1]
        return gs * x:cos() * ctx.k - gc * x:sin(), nil
      end,
    }
    local x = ember.tensor({ 0.5, -1, 2 }, F64):requires_grad_()
    local s, label, c, i = SinCos(x, 2.5)
    assert.are.equal("label", label)
    assert.are.equal("probe_sincos", s.grad_fn)
    assert.are.equal("probe_sincos", c.grad_fn)
    assert.is_false(i.requires_grad)
    assert.are.equal(3, i:item())
    s:sum():backward()
    close(x.grad, { 2.1939564047259, 1.3507557646703, -1.0403670913670 }, 1e-12)
    close(got.gc, { 0, 0, 0 }) -- the unused output's gradient is materialized as zeros
    assert.is_nil(got.glabel)
    assert.are.equal("int64", got.gi.dtype)
    -- a floating output marked non-differentiable does not require grad either
    local Sorted = ember.Function {
      name = "probe_sorted",
      forward = function(ctx, a)
        local v = a * 2
        local m = a:max()
        ctx.mark_non_differentiable(m)
        return v, m
      end,
      backward = function(ctx, gv, gm)
        got.gm = gm
        return gv * 2
      end,
    }
    local v, m = Sorted(x)
    assert.is_true(v.requires_grad)
    assert.is_false(m.requires_grad)
    assert.is_nil(m.grad_fn)
    v:sum():backward()
    close(got.gm, { 0 })
    -- float64 gradcheck over both differentiable outputs
    gradcheck.check(function(a)
      local p, _, q = SinCos(a, 2.5)
      return { p, q }
    end, { ember.randn({ 3, 2 }, F64) })
  end)

  it("each of several outputs has its own memory: one may be written in place", function()
    -- torch 1.13: p, q = F.apply(x) (2x, 3x); p.mul_(2); (p + q).sum().backward(): x.grad = [7, 7, 7]
    local F = ember.Function {
      name = "probe_two",
      forward = function(ctx, a) return a * 2, a * 3 end,
      backward = function(ctx, gp, gq) return gp * 2 + gq * 3 end,
    }
    local x = ember.tensor({ 1, 2, 3 }, F64):requires_grad_()
    local p, q = F(x)
    p:mul_(2)
    close(q, { 3, 6, 9 })
    close(p, { 4, 8, 12 })
    ;(p + q):sum():backward()
    close(x.grad, { 7, 7, 7 })
  end)

  it("ctx.set_materialize_grads(false): an unused output's gradient is nil", function()
    -- torch 1.13: q.sum().backward() gives backward (None, ones); x.grad = [3, 3, 3]
    local seen
    local G = ember.Function {
      name = "probe_nomat",
      forward = function(ctx, x)
        ctx.set_materialize_grads(false)
        return x * 2, x * 3
      end,
      backward = function(ctx, a, b)
        seen = { a = a, b = b }
        return (a and a * 2 or 0) + (b and b * 3 or 0)
      end,
    }
    local x = ember.tensor({ 0.5, -1, 2 }, F64):requires_grad_()
    local p, q = G(x)
    q:sum():backward { retain_graph = true }
    assert.is_nil(seen.a)
    close(seen.b, { 1, 1, 1 })
    close(x.grad, { 3, 3, 3 })
    p:sum():backward() -- the next backward through the same node starts afresh
    assert.is_nil(seen.b)
    close(x.grad, { 5, 5, 5 })
    raises_here(function() ember.Function { name = "probe_badmat", forward = function(ctx, t)
      ctx.set_materialize_grads(0)
      return t
    end, backward = print }(x) end, "ctx.set_materialize_grads: expected a boolean, got number")
  end)

  it("differentiable outputs of several dtypes are refused, naming the function", function()
    local F = ember.Function { name = "probe_mixed", forward = function(ctx, a) return a, a:float() end, backward = print }
    raises_here(function() F(ember.randn({ 2 }, F64):requires_grad_()) end,
      "ember.Function 'probe_mixed': forward's differentiable outputs must share a dtype and a device (output 1 is float64")
  end)

  it("ctx.mark_dirty: an in-place Function returns its input, now with the Function's history", function()
    -- torch 1.13: y = x.clone(); z = D.apply(y) (y *= 2); z is y; (z * z).sum().backward(): x.grad = 8 x
    local Double = ember.Function {
      name = "probe_double_",
      forward = function(ctx, a)
        a:mul_(2)
        ctx.mark_dirty(a)
        return a
      end,
      backward = function(ctx, g) return g * 2 end,
    }
    local x = ember.tensor({ 1, 2, 3 }, F64):requires_grad_()
    local y = x:clone()
    local z = Double(y)
    assert.is_true(rawequal(z, y))
    assert.are.equal("probe_double_", y.grad_fn)
    ;(z * z):sum():backward()
    close(x.grad, { 8, 16, 24 })
    -- a leaf that requires grad: torch's "a leaf Variable that requires grad has been used in an in-place operation"
    raises_here(function() Double(ember.ones(2):requires_grad_()) end,
      "ember.Function 'probe_double_': a leaf tensor that requires grad ([2] float32) is being used in an in-place operation")
    -- what another op saved of the input is caught by the version counter at backward
    local e = x:exp()
    local w = Double(e)
    raises_here(function() w:sum():backward() end, "a tensor that 'exp' saved for its gradient")
    -- a view: the tensor it views would keep its old history (torch rebases it; ember refuses)
    local base = x:clone()
    raises_here(function() Double(base:narrow(1, 1, 2)) end,
      "ember.Function 'probe_double_': ctx.mark_dirty: the tensor ([2] float64) shares its memory with other tensors")
    -- views made inside forward, and what save_for_backward saved, are fine: an in-place ReLU
    local Relu_ = ember.Function {
      name = "probe_relu_",
      forward = function(ctx, a)
        local flat = a:view(-1)
        flat:clamp_(0)
        ctx.mark_dirty(a)
        ctx.save_for_backward(a)
        return a
      end,
      backward = function(ctx, g) return g * ctx.saved_tensors[1]:gt(0):to(g.dtype) end,
    }
    local u = ember.tensor({ -1, 2, -3, 4 }, F64):requires_grad_()
    local r = Relu_(u:clone())
    r:sum():backward()
    close(u.grad, { 0, 1, 0, 1 })
    -- an integer tensor written in place comes back itself too (nothing to differentiate)
    local Count = ember.Function {
      name = "probe_count_",
      forward = function(ctx, a, counts)
        counts:add_(1)
        ctx.mark_dirty(counts)
        return counts
      end,
      backward = function(ctx, g) return nil, nil end,
    }
    local counts = ember.zeros({ 2 }, { dtype = "int64" })
    assert.is_true(rawequal(counts, Count(x, counts)))
    assert.are.same({ 1, 1 }, counts:totable())
    -- a dirty tensor must be returned
    local Lost = ember.Function { name = "probe_lost", forward = function(ctx, a, b)
      ctx.mark_dirty(b)
      return a * 1
    end, backward = print }
    raises_here(function() Lost(x, x:clone()) end, "a tensor given to ctx.mark_dirty must be returned by forward")
  end)
end)

describe("requires_grad on a tensor made by an op", function()
  it("requires_grad_() is a no-op there, turning it off is refused (torch's rule)", function()
    local x = ember.randn(3):requires_grad_()
    local y = x * 3
    assert.are.equal(y, y:requires_grad_())
    y.requires_grad = true
    assert.is_true(y.requires_grad)
    raises_here(function() y:requires_grad_(false) end, "can only be turned off on leaf tensors (this one was made by")
  end)
end)

describe("no_grad and enable_grad as torch's decorators", function()
  it("ember.no_grad()(fn) wraps fn (@torch.no_grad()) and leaves grad mode as it was", function()
    local x = ember.ones(2):requires_grad_()
    local f = ember.no_grad()(function(a, k) return a * k, ember.is_grad_enabled() end)
    assert.is_true(ember.is_grad_enabled())
    local y, on = f(x, 3)
    assert.is_false(y.requires_grad)
    assert.is_false(on)
    assert.is_true(ember.is_grad_enabled())
    local g = ember.enable_grad()(function() return (x * 2).requires_grad end)
    assert.is_true(ember.no_grad(g))
    assert.is_true(ember.is_grad_enabled())
    raises_here(function() ember.no_grad()(5) end, "ember.no_grad: ember.no_grad()(fn) wraps a function (torch's decorator), got number")
    assert.is_true(ember.is_grad_enabled())
  end)
end)

describe("ember.autograd.grad, torch.autograd.grad's positional form", function()
  it("grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused)", function()
    -- torch 1.13: x = [1, 2]; y = x * x; grad(y, x, ones, True) -> (2x,); allow_unused gives None
    local x = ember.tensor({ 1, 2 }, F64):requires_grad_()
    local z = ember.ones(2):requires_grad_()
    local y = x * x
    close(ember.autograd.grad(y, x, ember.ones(2, F64), true)[1], { 2, 4 })
    close(ember.autograd.grad({ y }, { x }, { ember.tensor({ 1, 3 }, F64) }, true)[1], { 2, 12 })
    local gs = ember.autograd.grad(y:sum(), { x, z }, nil, true, false, true, true)
    close(gs[1], { 2, 4 })
    assert.is_nil(gs[2])
    close(ember.autograd.grad(y:sum(), x, nil, { retain_graph = true })[1], { 2, 4 })
    -- a grad_output of another dtype is cast (torch 1.13: float32 ones for a float64 output give (2x,))
    close(ember.autograd.grad(y, x, ember.ones(2), true)[1], { 2, 4 })
    -- create_graph = true, positional or in the options after grad_outputs, is refused, not ignored
    raises_here(function() ember.autograd.grad(y:sum(), x, nil, true, true) end, "ember.grad: create_graph is not supported")
    raises_here(function() ember.autograd.grad(y:sum(), x, nil, { create_graph = true }) end,
      "ember.grad: create_graph is not supported")
    raises_here(function() ember.autograd.grad(y:sum(), x, nil, 1) end,
      "ember.grad: retain_graph (argument 4) must be a boolean or nil, got number")
    raises_here(function() ember.autograd.grad(y:sum(), x, 5) end,
      "ember.grad: grad_outputs (argument 3) must be a tensor, a list of tensors or nil, got number")
    -- the graph was kept until now; a grad without retain_graph frees it, the next names ember.grad
    ember.autograd.grad(y:sum(), x)
    raises_here(function() ember.autograd.grad(y:sum(), x) end, "ember.grad: the graph through 'mul' was already freed")
  end)
end)

describe("ember.autograd.backward, torch.autograd.backward's positional form", function()
  it("backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)", function()
    local w = ember.tensor({ 1, 2 }, F64):requires_grad_()
    local y = (w * w):sum()
    ember.autograd.backward(y, nil, true) -- the graph is kept
    ember.autograd.backward({ y }, nil, false)
    close(w.grad, { 4, 8 })
    local v = ember.ones(2, F64):requires_grad_()
    w.grad = nil
    ember.autograd.backward((w * v):sum(), nil, nil, nil, nil, { v })
    assert.is_nil(w.grad)
    close(v.grad, { 1, 2 })
    raises_here(function() ember.autograd.backward((w * w):sum(), nil, false, true) end,
      "ember.autograd.backward: create_graph is not supported")
    raises_here(function() ember.autograd.backward((w * w):sum(), nil, 1) end, "options must be a table, got number")
  end)
end)

describe("t:backward, torch's positional form", function()
  it("t:backward(gradient, retain_graph, create_graph, inputs)", function()
    local w = ember.tensor({ 1, 2 }, F64):requires_grad_()
    local v = ember.ones(2, F64):requires_grad_()
    local y = w * v
    y:backward(ember.ones(2, F64), true, false)
    close(w.grad, { 1, 1 })
    w.grad, v.grad = nil, nil
    y:backward(ember.ones(2, F64), false, false, { v })
    assert.is_nil(w.grad)
    close(v.grad, { 1, 2 })
    raises_here(function() (w * w):sum():backward(nil, false, true) end, "ember.backward: create_graph is not supported")
    -- a gradient of another floating dtype is cast (torch 1.13: float64 ones for a float32 output give [2, 4])
    local x = ember.tensor({ 1, 2 }):requires_grad_()
    ;(x * x):backward(ember.ones(2, F64))
    assert.are.equal("float32", x.grad.dtype)
    close(x.grad, { 2, 4 })
    raises_here(function() (x * x):backward(ember.ones(2, { dtype = "int64" })) end,
      "ember.backward: gradient is [2] int64 cpu, but the output is [2] float32 cpu")
  end)
end)

describe("autograd.grad and autograd.backward where grad mode is off", function()
  it("ember.grad in a Function's backward differentiates a graph forward built (torch's checkpoint pattern)", function()
    local Inner = ember.Function {
      name = "probe_inner",
      forward = function(ctx, x)
        local xd = x:detach():requires_grad_()
        ctx.xd = xd
        ctx.y = ember.enable_grad(function() return xd:sin() * xd end)
        return ctx.y:detach()
      end,
      backward = function(ctx, g) return ember.autograd.grad(ctx.y, { ctx.xd }, g, true)[1] end,
    }
    local x = ember.tensor({ 0.5, 1, 2 }, F64):requires_grad_()
    Inner(x):sum():backward()
    -- d(x sin x) = sin x + x cos x; torch 1.13: [0.9182, 1.3818, 0.0770]
    close(x.grad, { 0.918216819549, 1.381773290676, 0.077003753731 }, 1e-11)
    gradcheck.check(function(a) return Inner(a) end, { ember.randn({ 4 }, F64) })
  end)

  it("under no_grad, for outputs made with grad mode on (several outputs summed too)", function()
    local x = ember.tensor({ 1, 2 }, F64):requires_grad_()
    local y = x * x
    local s, first = y:sum(), y[1]
    local g = ember.no_grad(function() return ember.autograd.grad({ s, first }, x, nil, true)[1] end)
    close(g, { 4, 4 })
    ember.no_grad(function() ember.autograd.backward({ s, first }) end)
    close(x.grad, { 4, 4 })
  end)
end)
