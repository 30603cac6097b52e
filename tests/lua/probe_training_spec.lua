-- What a new user coming from PyTorch or Torch7 tries first in a training
-- workflow: creation options, freezing, parameter groups, closures, grad
-- mode scopes. Each block is a defect found by probing ember as such a
-- user; the test fails without its fix.
local ember = require "ember"
local nn, optim = require "ember.nn", require "ember.optim"
local raises_here = require("tests.lua.helpers.parity").raises_here

describe("creation functions take a dtype name for the options", function()
  it("as the C creators do (ember.zeros(2, 3, 'int64'))", function()
    assert.are.equal("float64", ember.linspace(0, 1, 5, "float64").dtype)
    assert.are.equal("float32", ember.randint(0, 10, { 3 }, "float32").dtype)
    assert.are.equal("float64", ember.randint(10, { 3 }, "float64").dtype)
    local x = ember.zeros(2)
    for _, f in ipairs { "zeros_like", "ones_like", "empty_like" } do
      assert.are.equal("int64", ember[f](x, "int64").dtype, f)
    end
    for _, f in ipairs { "rand_like", "randn_like" } do
      assert.are.equal("float64", ember[f](x, "float64").dtype, f)
    end
    assert.are.equal("int64", ember.full_like(x, 3, "int64").dtype)
    assert.are.equal("int64", x:new_zeros(2, 3, "int64").dtype)
    assert.are.equal("bool", x:new_ones({ 2 }, "bool").dtype)
    assert.are.equal("float64", ember.logspace(0, 2, 3, "float64").dtype)
  end)

  it("eye(n, m, dtype) and eye(n, dtype)", function()
    local e = ember.eye(2, 3, "int64")
    assert.are.equal("int64", e.dtype)
    assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 } }, e:totable())
    assert.are.same({ 3, 3 }, { ember.eye(3, "float64"):size(1), ember.eye(3, "float64"):size(2) })
    assert.are.equal("float64", ember.eye(3, "float64").dtype)
  end)

  it("anything else is still refused at the user's line", function()
    raises_here(function() ember.linspace(0, 1, 5, 64) end, "ember.linspace: expected an options table")
  end)
end)

describe("freezing", function()
  it("Module:requires_grad_(false) freezes every parameter, true unfreezes", function()
    local m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    assert.are.equal(m[1], m[1]:requires_grad_(false))
    assert.is_false(m[1].weight.requires_grad)
    assert.is_false(m[1].bias.requires_grad)
    assert.is_true(m[3].weight.requires_grad)
    m:requires_grad_()
    assert.is_true(m[1].weight.requires_grad)
    raises_here(function() m:requires_grad_("no") end, "Sequential.requires_grad_: expected a boolean")
  end)

  it("a frozen parameter stays frozen through to(dtype)", function()
    local m = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    m[1].weight.requires_grad = false
    m:to("float64")
    assert.are.equal("float64", m[1].weight.dtype)
    assert.is_false(m[1].weight.requires_grad)
    assert.is_true(m[1].bias.requires_grad)
    m:float()
    assert.is_false(m[1].weight.requires_grad)
  end)
end)

describe("optimizer", function()
  it("add_param_group adds a group with its own options, the rest from the defaults", function()
    ember.manual_seed(0)
    local m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    local opt = optim.SGD(m[2]:parameters(), { lr = 0.1, momentum = 0.9 })
    opt:add_param_group({ params = m[1]:parameters(), lr = 0.01 })
    assert.are.equal(2, #opt.param_groups)
    assert.are.equal(0.01, opt.param_groups[2].lr)
    assert.are.equal(0.9, opt.param_groups[2].momentum)
    local w = m[1].weight:clone()
    m(ember.randn(5, 3)):sum():backward()
    local g = m[1].weight.grad:clone()
    opt:step()
    assert.is_true(ember.allclose(m[1].weight, w - g * 0.01))
    -- the state of the added group round-trips
    local sd = opt:state_dict()
    assert.are.same({ 3, 4 }, sd.param_groups[2].params)
    raises_here(function() opt:add_param_group({ params = m[2]:parameters() }) end, "already optimized")
    raises_here(function() opt:add_param_group({ params = nn.Linear(2, 2), lrr = 1 }) end, "unknown option 'lrr'")
  end)

  it("step(closure) calls the closure with grad on and returns its loss", function()
    ember.manual_seed(0)
    local m = nn.Linear(3, 1)
    local x, y = ember.randn(4, 3), ember.randn(4, 1)
    local opt = optim.SGD(m, { lr = 0.1 })
    local calls = 0
    local function closure()
      calls = calls + 1
      opt:zero_grad()
      local loss = ((m(x) - y) ^ 2):mean()
      loss:backward()
      return loss
    end
    local before = ((m(x) - y) ^ 2):mean():item()
    local loss = ember.no_grad(function() return opt:step(closure) end)
    assert.are.equal(1, calls)
    assert.are.equal(before, loss:item())
    assert.is_true(((m(x) - y) ^ 2):mean():item() < before)
    assert.is_nil(opt:step())
    raises_here(function() opt:step(42) end, "SGD: step: closure must be a function")
  end)
end)

describe("ember.save / ember.load of a nest of tables (torch.save(dict))", function()
  local tmp = os.tmpname()
  after_each(function() os.remove(tmp) end)

  it("round-trips {model=, optimizer=, scheduler=, epoch=} and resumes identically", function()
    ember.manual_seed(0)
    local function make()
      local m = nn.Linear(3, 2)
      local o = optim.Adam(m, { lr = 1e-2, amsgrad = true })
      return m, o, optim.ReduceLROnPlateau(o, { patience = 0 })
    end
    local x, y = ember.randn(4, 3), ember.randn(4, 2)
    local function step(m, o, s)
      o:zero_grad()
      local l = ((m(x) - y) ^ 2):mean()
      l:backward()
      o:step()
      s:step(l:item())
      return l:item()
    end
    local m, o, s = make()
    step(m, o, s)
    ember.save({ model = m:state_dict(), optimizer = o:state_dict(), scheduler = s:state_dict(),
      epoch = 3, name = "run", lrs = { 0.5, 1.0 }, done = false }, tmp)
    local ck = ember.load(tmp)
    assert.are.equal(3, ck.epoch)
    assert.are.equal("integer", math.type(ck.epoch))
    assert.are.equal("float", math.type(ck.lrs[2])) -- 1.0 stays a float
    assert.are.equal("run", ck.name)
    assert.is_false(ck.done)
    local m2, o2, s2 = make()
    m2:load_state_dict(ck.model)
    o2:load_state_dict(ck.optimizer)
    s2:load_state_dict(ck.scheduler)
    for _ = 1, 3 do assert.are.equal(step(m, o, s), step(m2, o2, s2)) end
    assert.is_true(ember.equal(m.weight, m2.weight))
  end)

  it("an optimizer's state_dict alone; infinite numbers", function()
    local o = optim.SGD(nn.Linear(2, 2), { lr = 0.1 })
    ember.save({ best = math.huge, worst = -math.huge }, tmp)
    local r = ember.load(tmp)
    assert.are.equal(math.huge, r.best)
    assert.are.equal(-math.huge, r.worst)
    ember.save(o:state_dict(), tmp)
    assert.are.equal(0.1, ember.load(tmp).param_groups[1].lr)
  end)

  it("what cannot be saved is named at the user's line", function()
    raises_here(function() ember.save({ a = print }, tmp) end, "ember.save: cannot save 'a', a function")
    raises_here(function() ember.save({ [true] = 1 }, tmp) end, "cannot save the key of type boolean")
    -- a dotted key (a state dict's, inside a nest) is saved, escaped
    ember.save({ ["a.b"] = 1 }, tmp)
    assert.are.equal(1, ember.load(tmp)["a.b"])
  end)
end)

describe("grad mode scopes", function()
  it("local g <close> = ember.no_grad() is torch.no_grad()'s with-block; enable_grad inside it", function()
    local w = ember.ones(2):requires_grad_()
    do
      local g <close> = ember.no_grad()
      assert.is_false((w * 2).requires_grad)
      do
        local e <close> = ember.enable_grad()
        assert.is_true((w * 2).requires_grad)
      end
      assert.is_false((w * 2).requires_grad)
    end
    assert.is_true((w * 2).requires_grad)
    assert.is_true(ember.no_grad(function() return ember.enable_grad(function() return (w * 2).requires_grad end) end))
    local a, b = ember.no_grad(function(k) return (w * k).requires_grad, k end, 3)
    assert.is_false(a)
    assert.are.equal(3, b)
    -- an error inside the function restores the mode
    assert.is_false(pcall(ember.no_grad, function() error("boom") end))
    assert.is_true(ember.is_grad_enabled())
    raises_here(function() ember.no_grad(3) end, "ember.no_grad: expected a function")
  end)
end)

describe("nn.CrossEntropyLoss with class probabilities (soft targets)", function()
  local fx = dofile("tests/fixtures/nn_probe.lua")
  local T = require("tests.lua.helpers.parity").T

  it("matches PyTorch 1.13: weights, label smoothing, every reduction, [B, L, C]", function()
    assert.is_true(#fx.soft_cross_entropy >= 7)
    for i, c in ipairs(fx.soft_cross_entropy) do
      require("tests.lua.helpers.parity").cross_entropy_case(nn, c, i, function(cc) return T(cc.target) end, true)
    end
  end)

  it("passes a float64 gradcheck in the logits and the probabilities", function()
    local gradcheck = require "tests.lua.helpers.gradcheck"
    ember.manual_seed(0)
    local logits = ember.randn(3, 4, "float64")
    local t = ember.randn(3, 4, "float64"):softmax(2)
    local w = ember.rand(4, "float64") + 0.5
    gradcheck.check(function(a, b) return nn.CrossEntropyLoss { weight = w, label_smoothing = 0.1 }(a, b) end,
      { logits, t })
  end)

  it("a float target of another shape is refused, naming both", function()
    raises_here(function() nn.CrossEntropyLoss()(ember.randn(4, 3), ember.rand(4, 2)) end,
      "nn.CrossEntropyLoss: a float target holds class probabilities and must have the logits' shape [4, 3], got [4, 2]")
  end)
end)

describe("clear errors and option tables in the everyday modules", function()
  it("nn.Linear names a dtype mismatch between input and weight and how to fix it", function()
    raises_here(function() nn.Linear(3, 2)(ember.ones(4, 3, "float64")) end,
      "Linear.forward: the input is float64 but the weight is float32: convert the input (x:to(\"float32\")) "
      .. "or the module (m:to(\"float64\"))")
    -- under autocast a bfloat16 input is fine
    local y = ember.autocast("bfloat16", function() return nn.Linear(3, 2)(ember.ones(4, 3, "bfloat16")) end)
    assert.are.equal("bfloat16", y.dtype)
  end)

  it("nn.Dropout takes an options table as the other modules do", function()
    assert.are.equal(0.2, nn.Dropout { p = 0.2 }.p)
    assert.are.equal(0.5, nn.Dropout {}.p)
    raises_here(function() nn.Dropout { q = 1 } end, "nn.Dropout: unknown option 'q'")
  end)
end)

describe("Tensor:detach_", function()
  it("cuts the tensor itself from the graph: truncated BPTT over chunks", function()
    ember.manual_seed(0)
    local rnn = nn.GRU(3, 4, { batch_first = true })
    local h
    for _ = 1, 3 do
      local out, hn = rnn(ember.randn(2, 5, 3), h)
      out:sum():backward() -- without detach_, the second chunk reaches the freed graph of the first
      h = hn:detach_()
      assert.are.equal(hn, h)
      assert.is_false(h.requires_grad)
      assert.is_nil(h.grad_fn)
    end
    local w = ember.ones(2):requires_grad_()
    w:detach_()
    assert.is_false(w.requires_grad)
  end)
end)

describe("data.Dataset as a PyTorch user reaches for it", function()
  local data = require "ember.data"

  it("data.Dataset(x, y) is TensorDataset: fields 1, 2; ds[i] is a row; #ds its length", function()
    local x, y = ember.randn(10, 3), ember.arange(1, 11, "int64")
    local ds = data.Dataset(x, y)
    assert.are.equal(10, #ds)
    local seen = 0
    for b in ds:batches(4) do
      assert.are.equal(b[1]:size(1), b[2]:size(1))
      seen = seen + b[2]:size(1)
    end
    assert.are.equal(10, seen)
    assert.are.equal(2, ds[2][2]:item())
    assert.are.equal(10, ds[-1][2]:item())
    assert.is_true(ember.equal(x[3], ds[3][1]))
    local named = data.Dataset { x = x, y = y } -- the table form through the call too
    assert.are.equal(4, named[4].y:item())
    assert.are.equal(4, named:row(4).y:item())
  end)

  it("bad arguments are named at the user's line", function()
    local ds = data.Dataset(ember.randn(10, 3))
    raises_here(function() local _ = ds[11] end, "Dataset: row 11 is out of range (1..10 or -10..-1)")
    raises_here(function() data.Dataset(ember.ones(2), 3) end, "Dataset.new: argument 2 is a number")
    raises_here(function() data.Dataset("x") end, "Dataset.new: expected a table of name -> tensor or tensors, got string")
    raises_here(function() data.Dataset { x = 3 } end, "Dataset.new: field 'x' is a number, not a tensor")
  end)
end)

describe("higher-order gradients", function()
  it("create_graph = true is refused as unsupported (not as an unknown option); false is fine", function()
    local x = ember.ones(2):requires_grad_()
    raises_here(function() (x * x):sum():backward { create_graph = true } end,
      "ember.backward: create_graph is not supported: ember's backward is not itself differentiable")
    raises_here(function() ember.grad((x * x):sum(), x, { create_graph = true }) end,
      "ember.grad: create_graph is not supported")
    ;(x * x):sum():backward { create_graph = false }
    assert.are.same({ 2, 2 }, x.grad:totable())
    assert.are.same({ 2, 2 }, ember.grad((x * x):sum(), x, { create_graph = false })[1]:totable())
  end)
end)

describe("a parameter group added after the schedule was made", function()
  -- PyTorch 1.13's lr of the added group after 3 steps (a chainable schedule's formula runs over
  -- every group; a closed-form one zips the groups with its base lrs; OneCycleLR and
  -- ReduceLROnPlateau fail in PyTorch, ember leaves the group; WarmupCosine is ember's)
  local WANT = { 0.0625, 0.36450000000000005, 0.3969463130731183, 0.5, 0.875, 0.5, 0.5, 0.5, 0.5, 0.5 }
  it("is changed by a chainable schedule and kept by a closed-form one, as PyTorch's, and the schedule goes on",
    function()
    local makers = {
      function(o) return optim.StepLR(o, 1, 0.5) end,
      function(o) return optim.ExponentialLR(o, 0.9) end,
      function(o) return optim.CosineAnnealingLR(o, 10) end,
      function(o) return optim.LambdaLR(o, function(e) return 1 / (e + 1) end) end,
      function(o) return optim.LinearLR(o, { start_factor = 0.5, total_iters = 4 }) end,
      function(o) return optim.OneCycleLR(o, { max_lr = 0.1, total_steps = 10 }) end,
      function(o) return optim.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 2 }) end,
      function(o) return optim.CosineAnnealingWarmRestarts(o, { T_0 = 2 }) end,
      function(o) return optim.WarmupCosine(o, { warmup_steps = 2, total_steps = 10 }) end,
      function(o) return optim.ReduceLROnPlateau(o, { patience = 0 }) end,
    }
    for k, make in ipairs(makers) do
      local m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
      local o = optim.SGD(m[1], { lr = 0.1, momentum = 0.9 })
      local s = make(o)
      o:add_param_group({ params = m[2]:parameters(), lr = 0.5 })
      for step = 1, 3 do s:step(s.__name == "ReduceLROnPlateau" and 1 or nil) end
      assert.are.near(WANT[k], o.param_groups[2].lr, 1e-15, "schedule " .. k)
      assert.are.equal(2, #s:get_last_lr(), "schedule " .. k)
    end
  end)
end)

describe("forward hooks (PyTorch's register_forward_hook / register_forward_pre_hook)", function()
  it("see a child's inputs and output inside a container, may replace them, and go with remove()", function()
    ember.manual_seed(0)
    local m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    local x = ember.randn(5, 4)
    local ref = m(x)
    local feats, seen_mod, seen_in, calls = nil, nil, nil, 0
    local h = m[2]:register_forward_hook(function(mod, inputs, out)
      calls = calls + 1
      seen_mod, seen_in, feats = mod, inputs[1], out
    end)
    assert.is_true(ember.equal(ref, m(x)))
    assert.are.equal(1, calls)
    assert.are.equal(m[2], seen_mod)
    assert.is_true(ember.equal(seen_in, m[1](x)))
    assert.is_true(ember.equal(feats, m[2](m[1](x))))
    -- an output hook that replaces, and a pre-hook that replaces the input
    local h2 = m[3]:register_forward_hook(function(_, _, out) return out * 0 end)
    assert.are.same({ 0, 0 }, m(x)[1]:totable())
    h2:remove()
    local h3 = m[1]:register_forward_pre_hook(function(_, inputs) return inputs[1] * 0 end)
    assert.is_true(ember.allclose(m(x)[1], m[3](m[2](m[1].bias:view(1, 3)))[1]))
    h3:remove()
    h:remove()
    h:remove() -- twice is fine
    calls = 0
    assert.is_true(ember.equal(ref, m(x)))
    assert.are.equal(0, calls)
    -- gradients flow through a replaced output
    local h4 = m[3]:register_forward_hook(function(_, _, out) return out * 2 end)
    m:zero_grad()
    m(x):sum():backward()
    local g2 = m[3].bias.grad:clone()
    h4:remove()
    m:zero_grad()
    m(x):sum():backward()
    assert.is_true(ember.allclose(g2, m[3].bias.grad * 2))
    raises_here(function() m:register_forward_hook(3) end, "Sequential.register_forward_hook: expected a function")
  end)
end)

describe("help()", function()
  it("indents every line of a multi-line example, not only the first", function()
    local out = require("ember._doc").render("Does x.\n@usage local a = 1\nprint(a)\n@treturn number")
    assert.are.equal("Does x.\nExample:\n  local a = 1\n  print(a)\n  returns number", out)
  end)
end)

describe("tensor methods a PyTorch user calls", function()
  it("in-place index_fill_, index_add_, scatter_, scatter_add_, tril_, triu_, fmod_, remainder_", function()
    local idx = ember.tensor({ 2 }, "int64")
    local x = ember.zeros(3, 3)
    assert.are.equal(x, x:index_fill_(1, idx, 5))
    assert.are.same({ 0, 0, 0, 5, 5, 5, 0, 0, 0 }, x:reshape(-1):totable())
    x:index_add_(2, idx, ember.ones(3, 1))
    assert.are.same({ 0, 1, 0, 5, 6, 5, 0, 1, 0 }, x:reshape(-1):totable())
    local d = ember.tensor({ { 1 }, { 2 }, { 3 } }, "int64")
    local s = ember.zeros(3, 3):scatter_add_(2, d, ember.ones(3, 1)):scatter_(2, d, 7)
    assert.is_true(ember.equal(s, ember.eye(3) * 7))
    local o = ember.ones(3, 3)
    assert.are.same({ 1, 0, 0, 1, 1, 0, 1, 1, 1 }, o:clone():tril_():reshape(-1):totable())
    assert.are.same({ 1, 1, 1, 0, 1, 1, 0, 0, 1 }, o:clone():triu_():reshape(-1):totable())
    assert.are.same({ 1.5, -1.5 }, ember.tensor { 5.5, -5.5 }:fmod_(2):totable())
    assert.are.same({ 1.5, 0.5 }, ember.tensor { 5.5, -5.5 }:remainder_(2):totable())
  end)

  it("type, element_size, reshape_as, where, new_empty", function()
    local x = ember.zeros(2, 3)
    assert.are.equal("float32", x:type())
    assert.are.equal("float64", x:type("float64").dtype)
    assert.are.equal(4, x:element_size())
    assert.are.equal(2, x:bfloat16():element_size())
    assert.are.equal(8, x:long():element_size())
    assert.are.same({ 2, 3 }, { ember.arange(6):reshape_as(x):size(1), ember.arange(6):reshape_as(x):size(2) })
    assert.are.same({ 1, 0 }, ember.ones(2):where(ember.tensor { true, false }, ember.zeros(2)):totable())
    assert.are.same({ 1, -1 }, ember.ones(2):where(ember.tensor { true, false }, -1):totable())
    assert.are.equal("int64", ember.zeros(2, "int64"):new_empty(3).dtype)
    raises_here(function() x:type(3) end, "ember.type: expected a dtype name")
  end)
end)

describe("PyTorch's names in ember.optim", function()
  it("clip_grad_norm_, clip_grad_value_ and optim.lr_scheduler.*", function()
    local m = nn.Linear(3, 2)
    local opt = optim.SGD(m, { lr = 0.1 })
    m(ember.ones(1, 3)):sum():backward()
    assert.is_true(optim.clip_grad_norm_(m:parameters(), 0.5) > 0.5)
    optim.clip_grad_value_(m:parameters(), 0.01)
    assert.is_true(m.weight.grad:abs():max():item() <= 0.01 + 1e-9)
    local s = optim.lr_scheduler.StepLR(opt, 1, 0.5)
    s:step()
    assert.are.equal(0.05, opt.param_groups[1].lr)
    assert.are.equal(optim.CosineAnnealingLR, optim.lr_scheduler.CosineAnnealingLR)
  end)
end)

describe("ember.Size", function()
  it("s[-1] is the last size (x.shape[-1] as in PyTorch); ipairs, # and methods unchanged", function()
    local s = ember.zeros(2, 3, 4).shape
    assert.are.equal(4, s[-1])
    assert.are.equal(2, s[-3])
    assert.is_nil(s[-4])
    assert.is_nil(s[0])
    assert.is_nil(s[4])
    assert.are.equal(3, #s)
    local n = 0
    for _ in ipairs(s) do n = n + 1 end
    assert.are.equal(3, n)
    assert.are.equal(24, s:numel())
    assert.are.equal(5, ember.zeros(7, 5):size()[-1])
  end)
end)

describe("reductions take PyTorch's keywords", function()
  it("x:sum{dim =, keepdim =}, x:sum(dim, {keepdim =}), and the same for mean, max, argmax, any ...", function()
    local x = ember.arange(6):view(2, 3)
    assert.are.same({ { 3 }, { 12 } }, x:sum { dim = 2, keepdim = true }:totable())
    assert.are.same({ { 3 }, { 12 } }, x:sum(2, { keepdim = true }):totable())
    assert.are.same({ 1, 4 }, x:mean { dim = -1 }:totable())
    assert.are.same({ { 15 } }, x:sum { keepdim = true }:totable())
    assert.are.equal(15, x:sum({ 1, 2 }):item()) -- a list of dims stays a list
    local v, i = x:max { dim = 2 }
    assert.are.same({ 2, 5 }, v:totable())
    assert.are.same({ 3, 3 }, i:totable())
    assert.are.same({ 3, 3 }, x:argmax { dim = 2 }:totable())
    assert.are.same({ { false }, { true } }, x:gt(2):all { dim = 2, keepdim = true }:totable())
    assert.are.same({ 3, 5, 7 }, ember.sum(x, { dim = 1 }):totable())
    raises_here(function() x:sum(2, { dim = 1 }) end, "ember.sum: dim given twice")
    raises_here(function() x:sum { dims = 1 } end, "ember.sum: unknown option 'dims'")
    raises_here(function() x:sum(5) end, "ember.sum: dim 5 is out of range") -- the plain call's error at the user's line
  end)
end)

describe("Module:to keeps the parameters' identity", function()
  it("an optimizer made before m:double() still trains the model (PyTorch's module.to keeps its Parameters)", function()
    ember.manual_seed(0)
    local m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    local opt = optim.SGD(m, { lr = 0.1 })
    local w = m[1].weight
    m:double()
    assert.is_true(rawequal(w, m[1].weight))
    assert.are.equal("float64", w.dtype)
    assert.is_true(w.requires_grad and w.is_leaf)
    local before = m[1].weight:clone()
    opt:zero_grad()
    m(ember.ones(2, 3, "float64")):sum():backward()
    opt:step()
    assert.is_true((m[1].weight - before):abs():max():item() > 0, "the optimizer updated the model")
    -- tied weights stay tied, buffers convert, int buffers stay
    local e = nn.Embedding(5, 4)
    local tied = nn.Sequential(e, nn.Linear(4, 5, { bias = false }))
    tied[2].weight = e.weight
    tied:float()
    assert.is_true(rawequal(tied[1].weight, tied[2].weight))
    local bn = nn.BatchNorm1d(3):double()
    assert.are.equal("float64", bn.running_mean.dtype)
    assert.are.equal("int64", bn.num_batches_tracked.dtype)
  end)
end)

describe("state dicts print readably", function()
  it("print(m:state_dict()) and print(opt:state_dict()) list their contents, not an address", function()
    local m = nn.Linear(2, 2)
    local s = tostring(m:state_dict())
    assert.truthy(s:find("weight = tensor(shape=[2, 2]", 1, true), s)
    local o = optim.SGD(m, { lr = 0.5 })
    local so = tostring(o:state_dict())
    assert.truthy(so:find("lr = 0.5", 1, true), so)
    local sched = optim.StepLR(optim.SGD(nn.Linear(2, 2), { lr = 0.5 }), 1, 0.5)
    sched:step()
    assert.are.equal("{0.25}", tostring(sched:get_last_lr()))
    -- still plain tables to save and load
    local tmp = os.tmpname()
    ember.save(m:state_dict(), tmp)
    assert.is_true(ember.equal(ember.load(tmp).weight, m.weight))
    os.remove(tmp)
  end)
end)

describe("Tensor:to as PyTorch's", function()
  it("takes a device and a dtype together, another tensor, or an options table", function()
    local x = ember.ones(2)
    assert.are.equal("float64", x:to("cpu", "float64").dtype) -- the dtype was silently ignored
    assert.are.equal("float64", x:to("float64", "cpu").dtype)
    assert.are.equal("int64", x:to(ember.zeros(1, "int64")).dtype)
    assert.are.equal("bfloat16", x:to { dtype = "bfloat16", device = "cpu" }.dtype)
    assert.is_true(rawequal(x, x:to("float32", "cpu")))
    local w = ember.ones(2):requires_grad_()
    ;(w:to("cpu", "float64") * 3):sum():backward()
    assert.are.same({ 3, 3 }, w.grad:totable())
    raises_here(function() x:to("float64", "int64") end, "ember.to: two dtypes given (float64 and int64)")
    raises_here(function() x:to(3) end, "ember.to: expected a dtype or device name, a tensor or {dtype=, device=}, got number")
    raises_here(function() x:to { dtpe = "x" } end, "ember.to: unknown option 'dtpe'")
  end)
end)

describe("Module:to as PyTorch's", function()
  it("takes a device and a dtype together, a tensor, or {dtype=, device=}", function()
    local m = nn.Sequential(nn.Linear(2, 2), nn.TransformerEncoderLayer(8, 2))
    local w = m[1].weight
    m:to("cpu", "float64") -- was an error inside Module.lua
    assert.are.equal("float64", m[1].weight.dtype)
    assert.are.equal("float64", m[2].self_attn.q_proj.weight.dtype)
    assert.is_true(rawequal(w, m[1].weight))
    m:to { dtype = "float32", device = "cpu" }
    assert.are.equal("float32", m[1].weight.dtype)
    m:to(ember.zeros(1, "bfloat16"))
    assert.are.equal("bfloat16", m[1].weight.dtype)
    raises_here(function() m:to { dtpe = "float64" } end, "Sequential.to: unknown option 'dtpe'")
    raises_here(function() m:to(3) end, "Sequential.to: expected a dtype or device name (or both)")
  end)
end)

describe("nn.init.orthogonal_ and eye_", function()
  it("orthogonal_: orthonormal rows or columns (whichever are fewer) times gain, seeded, any float dtype", function()
    for _, sh in ipairs { { 3, 5 }, { 5, 3 }, { 4, 4 }, { 8, 2, 3, 3 } } do
      local w = nn.init.orthogonal_(ember.empty(sh, "float64"), 2)
      local m = w:reshape(sh[1], -1)
      local g = sh[1] <= m:size(2) and m:matmul(m:t()) or m:t():matmul(m)
      assert.is_true((g - ember.eye(g:size(1), "float64") * 4):abs():max():item() < 1e-12, table.concat(sh, "x"))
    end
    ember.manual_seed(3)
    local a = nn.init.orthogonal_(ember.empty(4, 6))
    ember.manual_seed(3)
    assert.is_true(ember.equal(a, nn.init.orthogonal_(ember.empty(4, 6))))
    local lstm = nn.LSTM(3, 4)
    nn.init.orthogonal_(lstm.weight_hh_l0) -- a parameter, filled in place
    assert.is_true(lstm.weight_hh_l0.requires_grad)
    raises_here(function() nn.init.orthogonal_(ember.empty(3)) end, "nn.init.orthogonal_: needs at least 2 dims")
  end)

  it("eye_ fills a 2-d tensor with the identity", function()
    assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 } }, nn.init.eye_(ember.empty(2, 3)):totable())
    raises_here(function() nn.init.eye_(ember.empty(2, 2, 2)) end, "nn.init.eye_: needs a 2-d tensor")
  end)
end)

describe("ember.profile's table options", function()
  it("PyTorch's sort_by names work; an unknown option or sort key is refused, not ignored", function()
    local p = ember.profile(function() ember.randn(8, 8):matmul(ember.randn(8, 8)):sum() end)
    local by_total = p:stats { sort_by = "cpu_time_total" }
    for i = 2, #by_total do assert.is_true(by_total[i - 1].total >= by_total[i].total) end
    local by_calls = p:stats { sort_by = "count" }
    for i = 2, #by_calls do assert.is_true(by_calls[i - 1].calls >= by_calls[i].calls) end
    assert.truthy(p:table { sort_by = "self_cpu_time_total", row_limit = 1 }:find("more rows", 1, true))
    raises_here(function() p:table { sortby = "total" } end, "Profile:table: unknown option 'sortby'")
    raises_here(function() p:table { sort_by = "bogus" } end, "Profile:table: sort_by must be one of")
    raises_here(function() p:stats { sort_by = "bogus" } end, "Profile:stats: sort_by must be one of")
  end)
end)

describe("checkpoint.save / load parts", function()
  it("a misspelt or unknown key is named, not skipped", function()
    local checkpoint = require "ember.checkpoint"
    local tmp = os.tmpname()
    local m = nn.Linear(2, 2)
    raises_here(function() checkpoint.save(tmp, { model = m, epoch = 3 }) end,
      "checkpoint.save: unknown key 'epoch' (keys: metadata, model, optimizer, rng, scheduler; put other values in metadata")
    checkpoint.save(tmp, { model = m, metadata = { epoch = 3 } })
    raises_here(function() checkpoint.load(tmp, { model = nn.Linear(2, 2), optimzer = optim.SGD(m, { lr = 1 }) }) end,
      "checkpoint.load: unknown key 'optimzer' (keys: model, optimizer, rng, scheduler, strict)")
    local m2 = nn.Linear(2, 2)
    assert.are.equal("3", checkpoint.load(tmp, { model = m2 }).epoch)
    assert.is_true(ember.equal(m.weight, m2.weight))
    os.remove(tmp)
  end)
end)

describe("optimizers take PyTorch's positional lr", function()
  it("optim.SGD(params, 0.1) is {lr = 0.1}; another type is named", function()
    local m = nn.Linear(2, 2)
    assert.are.equal(0.1, optim.SGD(m, 0.1).param_groups[1].lr)
    assert.are.equal(0.01, optim.Adam(m:parameters(), 0.01).param_groups[1].lr)
    raises_here(function() optim.SGD(m, "0.1") end, "SGD: options must be a table {lr = ...} or the lr, got string")
  end)
end)

describe("PyTorch's positional options", function()
  it("are taken in PyTorch's order (nn/_module_args.lua), the losses' too", function()
    local c = nn.Conv2d(1, 4, 3, 2, 1)
    assert.are.equal(2, c.stride[1])
    assert.are.equal(1, c.padding[1])
    assert.are.equal(2, nn.LSTM(3, 4, 2).num_layers)
    raises_here(function() nn.Conv2d(1, 4, 3, 2, 1, 1, 1, true, "zeros", 7) end,
      "Conv2d: takes at most 9 arguments before the options table")
    assert.are.equal(0.5, nn.CosineEmbeddingLoss(0.5).margin) -- torch's margin, first (nn_torch_args_spec)
  end)
end)

describe("cat and stack promote dtypes as torch.cat", function()
  it("join tensors of several dtypes in their common one, gradients in each input's dtype", function()
    assert.are.equal("float64", ember.cat({ ember.ones(2), ember.ones(2, "float64") }).dtype)
    assert.are.equal("bfloat16", ember.cat({ ember.ones(1, "int64"), ember.tensor { true }, ember.ones(1, "bfloat16") }).dtype)
    assert.are.equal("float32", ember.stack({ ember.ones(2, "int64"), ember.ones(2) }).dtype)
    assert.are.same({ 1, 2, 3 }, ember.cat({ ember.tensor({ 1 }, "int64"), ember.tensor { 2, 3 } }):totable())
    local a, b = ember.ones(2):requires_grad_(), ember.ones(2, "float64"):requires_grad_()
    ;(ember.cat({ a, b }) * ember.tensor({ 1, 2, 3, 4 }, "float64")):sum():backward()
    assert.are.equal("float32", a.grad.dtype)
    assert.are.same({ 1, 2 }, a.grad:totable())
    assert.are.same({ 3, 4 }, b.grad:totable())
    raises_here(function() ember.cat({ ember.ones(2), ember.ones(3, 1) }) end, "ember.cat: tensor 1 has 1 dims but tensor 2 has 2")
  end)
end)

describe("ember.autocast's argument", function()
  it("names torch.autocast's device type and the unsupported dtypes at the user's line", function()
    raises_here(function() ember.autocast("cpu", function() end) end,
      "ember.autocast: takes the dtype, not torch.autocast's device type: ember.autocast(\"bfloat16\", ...), got \"cpu\"")
    raises_here(function() ember.autocast("float16", function() end) end, "ember.autocast: dtype float16 is not supported")
    raises_here(function() ember.autocast("float32", function() end) end, "ember.autocast: dtype float32 is not supported")
    raises_here(function() ember.autocast("fp16", function() end) end, "ember.autocast: dtype float16 is not supported")
    raises_here(function() local s <close> = ember.autocast("bfloat") end, 'ember.autocast: unknown dtype "bfloat"')
    assert.are.equal(1, ember.autocast("bfloat16", function() return 1 end))
  end)
end)

describe("data.pad's arguments", function()
  it("are checked at the user's line (were asserts and crashes in padding.lua)", function()
    local data = require "ember.data"
    local ids, mask = data.pad({ { 5, 6 }, { 7 } }, 1)
    assert.are.same({ { 5, 6 }, { 7, 1 } }, ids:totable())
    assert.are.same({ { false, false }, { false, true } }, mask:totable())
    raises_here(function() data.pad({ { 1, 2 } }, "x") end, "data.pad: pad_id must be a number, got string")
    raises_here(function() data.pad("x", 1) end, "data.pad: lists must be a list of id lists, got string")
    raises_here(function() data.pad({ { 1 }, 2 }, 1) end, "data.pad: item 2 must be a list of ids, got number")
  end)
end)

describe("Module:apply", function()
  it("visits the children first, then the module, as PyTorch's apply", function()
    local m = nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), nn.Linear(2, 1))
    local order = {}
    assert.are.equal(m, m:apply(function(mod) order[#order + 1] = mod.__name end))
    assert.are.same({ "Linear", "ReLU", "Sequential", "Linear", "Sequential" }, order)
    raises_here(function() m:apply(3) end, "Sequential.apply: expected a function(module), got number")
  end)
end)

describe("16-bit floats and module conversions", function()
  it("m:bfloat16() converts, m:half() and t:half() say ember's 16-bit float is bfloat16, at the user's line", function()
    local m = nn.Linear(3, 2)
    assert.are.equal(m, m:bfloat16())
    assert.are.equal("bfloat16", m.weight.dtype)
    assert.are.equal("bfloat16", m.bias.dtype)
    raises_here(function() m:half() end, "Linear.half: ember has no float16 dtype; its 16-bit float is bfloat16")
    raises_here(function() ember.randn(2):half() end, "ember.half: ember has no float16 dtype; its 16-bit float is bfloat16")
  end)

  it("m:to() of a name that is no dtype or device is refused at the user's line, before anything moved", function()
    local m = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2))
    raises_here(function() m:to("float16") end, "Sequential.to: dtype 'float16' is not supported")
    raises_here(function() m:to("tpu") end, "Sequential.to: unknown dtype or device 'tpu'")
    assert.are.equal("float32", m[1].weight.dtype)
    assert.are.equal("float32", m[2].weight.dtype)
  end)
end)

describe("Module:zero_grad(set_to_none), as PyTorch's model.zero_grad", function()
  it("false zeroes every gradient in place (the same tensors); nothing or true drops them", function()
    local nn = require "ember.nn"
    local m = nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 1))
    m(ember.ones(4, 3)):sum():backward()
    local g = m[1].weight.grad
    assert.is_true(g:abs():sum():item() > 0)
    m:zero_grad(false)
    assert.are.equal(0, g:abs():sum():item()) -- the gradient held before, zeroed where it is
    for _, p in ipairs(m:parameters()) do assert.are.equal(0, p.grad:abs():sum():item()) end
    m:zero_grad()
    for _, p in ipairs(m:parameters()) do assert.is_nil(p.grad) end
    require("tests.lua.helpers.parity").raises_here(function() m:zero_grad(1) end,
      "Sequential.zero_grad: set_to_none must be a boolean or nothing, got number")
  end)
end)
