-- ember.optim as a PyTorch user writing a training loop drives it, against
-- torch 1.13: clip_grad_norm_'s arguments and non-finite norms, a group's
-- params given as one tensor, zero_grad's keyword, optimizers stepping a
-- strided parameter, SequentialLR across a checkpoint, ReduceLROnPlateau's
-- state_dict and metric. Each block is a defect found that way; its test
-- fails without the fix.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local checkpoint = require "ember.checkpoint"
local parity = require "tests.lua.helpers.parity"
local tmpdir = require "tests.lua.helpers.tmpdir"
local raises_here = parity.raises_here

local dir = tmpdir()

local function nan_count(t)
  local n = 0
  for _, v in ipairs(t:totable()) do if v ~= v then n = n + 1 end end
  return n
end

describe("clip_grad_norm_ as torch's", function()
  local function grads(a, b)
    local p, q = ember.zeros(3):requires_grad_(), ember.zeros(2):requires_grad_()
    p.grad, q.grad = ember.tensor(a), ember.tensor(b)
    return p, q
  end

  -- torch's fourth positional argument, clip_grad_norm_(ps, 1.0, 2.0, True),
  -- was dropped without a word: a NaN norm came back and the step went on.
  it("takes error_if_nonfinite by position (and as a keyword after norm_type) in both names", function()
    for _, f in ipairs { optim.clip_grad_norm_, nn.utils.clip_grad_norm_ } do
      local p, q = grads({ 0 / 0, -4, 0 }, { 1, 2 })
      raises_here(function() f({ p, q }, 1.0, 2, true) end,
        "the total norm of order 2 for gradients from `parameters` is non-finite")
      assert.are.same({ 1, 2 }, q.grad:totable()) -- refused before any gradient changes
      p, q = grads({ math.huge, -4, 0 }, { 1, 2 })
      raises_here(function() f({ p, q }, 1.0, math.huge, { error_if_nonfinite = true }) end,
        "the total norm of order inf for gradients")
      raises_here(function() f({ p, q }, 1.0, { norm_type = 1, error_if_nonfinite = true }) end,
        "the total norm of order 1 for gradients")
      raises_here(function() f({ p, q }, 1.0, 2, "yes") end, "error_if_nonfinite must be a boolean, got yes")
      raises_here(function() f({ p, q }, 1.0, 2, { norm_type = 1 }) end, "unknown option 'norm_type'")
      p, q = grads({ 3, -4, 0 }, { 0, 0 })
      assert.are.equal(5, f({ p, q }, 10, 2, true)) -- finite: clipped as before
    end
  end)

  -- torch scales by clamp(max_norm / (norm + 1e-6), max = 1): a NaN norm
  -- makes every gradient NaN. ember left the gradients as they were
  -- (`coef < 1` is false for NaN), so only the NaN entries showed it.
  -- torch 1.13: p.grad = [nan, -4, 0], q.grad = [1, 2]; clip_grad_norm_([p, q], 1.0)
  --   -> tensor(nan); p.grad [nan, nan, nan], q.grad [nan, nan]
  --   with p.grad = [inf, -4, 0]: tensor(inf); p.grad [nan, -0., 0.], q.grad [0., 0.]
  it("scales by a non-finite norm without error_if_nonfinite", function()
    local p, q = grads({ 0 / 0, -4, 0 }, { 1, 2 })
    local total = optim.clip_grad_norm_({ p, q }, 1.0)
    assert.is_true(total ~= total)
    assert.are.equal(3, nan_count(p.grad))
    assert.are.equal(2, nan_count(q.grad))
    p, q = grads({ math.huge, -4, 0 }, { 1, 2 })
    assert.are.equal(math.huge, nn.utils.clip_grad_norm_({ p, q }, 1.0))
    assert.are.equal(1, nan_count(p.grad))
    assert.are.same({ 0, 0 }, q.grad:totable())
  end)
end)

describe("clip_grad_norm_'s norm_type", function()
  it("takes torch's norm_type 'inf' (the max abs value)", function()
    local a = ember.tensor({{3, -4}}):requires_grad_()
    a.grad = ember.tensor({{3, -4}})
    local n = nn.utils.clip_grad_norm_(a, 1.0, "inf")
    assert.are.equal(4, n)
    assert.is_true(math.abs(a.grad[1][2]:item() + 1) < 1e-5)
    a.grad = ember.tensor({{3, -4}})
    assert.are.equal(4, optim.clip_grad_norm({a}, 10, {norm_type = "inf"}))
    local ok, err = pcall(optim.clip_grad_norm, {a}, 1.0, "infinity")
    assert.is_false(ok)
    assert.matches("optim_torch_forms_spec.lua:%d+: clip_grad_norm: norm_type must be", err)
  end)
end)

describe("optimizer groups and clipping's arguments", function()
  it("a group's params may be one tensor, as torch's ({params = w})", function()
    local m = nn.Linear(3, 2)
    local opt = optim.AdamW({{params = m.weight, weight_decay = 0.1}}, {lr = 1e-2})
    opt:add_param_group({params = m.bias, weight_decay = 0})
    assert.are.equal(2, #opt.param_groups)
    assert.are.equal(m.weight, opt.param_groups[1].params[1])
    assert.are.equal(m.bias, opt.param_groups[2].params[1])
    assert.are.equal(0, opt.param_groups[2].weight_decay)
  end)

  it("clip_grad_norm / clip_grad_value name a params entry that is not a tensor", function()
    local ok, err = pcall(function() optim.clip_grad_norm({1, 2}, 1) end)
    assert.is_false(ok)
    assert.matches("optim_torch_forms_spec.lua:%d+: clip_grad_norm: params%[1%] is a number, not a tensor", err)
    ok, err = pcall(function() optim.clip_grad_value({ember.zeros(1), "w"}, 1) end)
    assert.is_false(ok)
    assert.matches("optim_torch_forms_spec.lua:%d+: clip_grad_value: params%[2%] is a string, not a tensor", err)
  end)
end)

describe("zero_grad takes PyTorch's keyword as an options table", function()
  it("module and optimizer: zero_grad{set_to_none = false} zeroes in place", function()
    local m = nn.Linear(2, 1)
    local opt = optim.SGD(m:parameters(), { lr = 0.1 })
    m(ember.randn(1, 2)):sum():backward()
    m:zero_grad { set_to_none = false }
    assert.is_not_nil(m.weight.grad)
    assert.are.equal(0, m.weight.grad:abs():sum():item())
    m(ember.randn(1, 2)):sum():backward()
    opt:zero_grad { set_to_none = false }
    assert.is_not_nil(m.weight.grad)
    assert.are.equal(0, m.weight.grad:abs():sum():item())
    opt:zero_grad { set_to_none = true }
    assert.is_nil(m.weight.grad)
  end)

  it("an unknown key or a non-boolean is refused, naming it", function()
    local m = nn.Linear(2, 1)
    local opt = optim.SGD(m:parameters(), { lr = 0.1 })
    local ok, err = pcall(m.zero_grad, m, { set_to_nones = false })
    assert.is_false(ok)
    assert.matches("Linear.zero_grad: unknown option 'set_to_nones'", err, 1, true)
    ok, err = pcall(function() opt:zero_grad("no") end)
    assert.is_false(ok)
    assert.matches("SGD: zero_grad: set_to_none must be a boolean or nothing, got string", err, 1, true)
  end)
end)

describe("SGD, Adam and AdamW on a strided parameter", function()
  -- a leaf made from a transposed view (ember.randn(4, 3):t():requires_grad_())
  -- failed at the first step inside the library: "ember.sgd_step: the
  -- parameter must be contiguous" (adam_step, adamw_step the same), at
  -- optim/SGD.lua's line. torch's optimizers take any layout.
  it("step it as they step the same values laid out contiguously", function()
    local makers = {
      function(ps) return optim.SGD(ps, { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.1 }) end,
      function(ps) return optim.Adam(ps, { lr = 0.1, weight_decay = 0.1 }) end,
      function(ps) return optim.AdamW(ps, { lr = 0.1 }) end,
    }
    for _, make in ipairs(makers) do
      local base = ember.tensor({ { 0.5, -1.2, 2 }, { 0.3, -0.7, 1.1 } }, { dtype = "float64" })
      local t = ember.tensor({ { 0.1, -0.2, 0.3 }, { 0.4, 0.5, -0.6 } }, { dtype = "float64" })
      local a = base:clone():requires_grad_()
      local b = base:t():contiguous():t():requires_grad_()
      assert.is_false(b:is_contiguous())
      local oa, ob = make({ a }), make({ b })
      for _ = 1, 3 do
        for _, pair in ipairs { { a, oa }, { b, ob } } do
          pair[2]:zero_grad()
          ;(pair[1] * pair[1] * pair[1] * t):sum():backward()
          pair[2]:step()
        end
      end
      assert.are.same(a:totable(), b:totable())
      assert.is_false(b:is_contiguous()) -- the parameter itself was updated
    end
  end)
end)

describe("schedules across a checkpoint", function()
  local function make()
    local m = nn.Linear(3, 2)
    local opt = optim.SGD({{params = {m.weight}}, {params = {m.bias}, lr = 0.01}}, {lr = 0.1, momentum = 0.9})
    local s = optim.SequentialLR(opt, {optim.LinearLR(opt, {start_factor = 0.1, total_iters = 3}),
      optim.CosineAnnealingLR(opt, {T_max = 7})}, {milestones = {3}}) -- torch's keyword as a table
    return m, opt, s
  end
  local function steps(m, opt, s, n)
    local out = {}
    for _ = 1, n do
      opt:zero_grad(); m(ember.ones(1, 3)):sum():backward(); opt:step(); s:step()
      local l = s:get_last_lr()
      out[#out + 1] = ("%.12g,%.12g"):format(l[1], opt.param_groups[2].lr)
      assert.are.equal(l[1], opt.param_groups[1].lr) -- get_last_lr is the lr in use
    end
    return table.concat(out, " ")
  end

  it("SequentialLR: get_last_lr goes on after load_state_dict (it stayed at the loaded lrs)", function()
    local m, opt, s = make()
    local full = steps(m, opt, s, 10)
    -- torch 1.13's values for the same schedule
    assert.are.equal("0.04,0.004 0.07,0.007 0.1,0.01 0.0950484433951,0.00950484433951", full:match("^(%S+ %S+ %S+ %S+)"))
    m, opt, s = make()
    local a = steps(m, opt, s, 5)
    local p = dir .. "/seq.safetensors"
    checkpoint.save(p, {model = m, optimizer = opt, scheduler = s})
    local m2, opt2, s2 = make()
    checkpoint.load(p, {model = m2, optimizer = opt2, scheduler = s2})
    assert.are.equal(full, a .. " " .. steps(m2, opt2, s2, 5))
  end)

  it("SequentialLR's options table is checked", function()
    local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})
    local ok, err = pcall(optim.SequentialLR, opt, {optim.ConstantLR(opt), optim.ConstantLR(opt)}, {milestone = {3}})
    assert.is_false(ok)
    assert.matches("optim_torch_forms_spec.lua:%d+: SequentialLR: unknown option 'milestone'", err)
    ok, err = pcall(optim.SequentialLR, opt, {optim.ConstantLR(opt), optim.ConstantLR(opt)}, 2)
    assert.is_false(ok)
    assert.matches("SequentialLR: milestones must be a list of steps %({2}%), got the number 2", err)
  end)
end)

describe("ReduceLROnPlateau's state_dict holds its settings, as torch's", function()
  local P = dofile("tests/fixtures/gamma_grad_plateau.lua").plateau
  local OPTS = { mode = "max", factor = 0.5, patience = 1, threshold = 0.1, threshold_mode = "abs", cooldown = 1,
    min_lr = 0.01, eps = 1e-12 }
  local function make(opts)
    local opt = optim.SGD(nn.Linear(2, 2), { lr = 0.1 })
    return opt, optim.ReduceLROnPlateau(opt, opts)
  end
  it("follows torch's lrs", function()
    local opt, s = make(OPTS)
    for i, m in ipairs(P.metrics) do
      s:step(m)
      assert(math.abs(opt.param_groups[1].lr - P.lrs[i]) < 1e-15, "step " .. i)
    end
  end)
  it("saves every field of torch's (mode_worse follows from mode)", function()
    local _, s = make(OPTS)
    s:step(1.0)
    local sd = s:state_dict()
    for _, k in ipairs(P.state_keys) do
      if k ~= "mode_worse" then assert(sd[k] ~= nil, "state_dict lacks " .. k) end
    end
    assert.are.equal("max", sd.mode)
    assert.are.equal("abs", sd.threshold_mode)
    assert.are.same({ 0.01 }, sd.min_lrs)
  end)
  it("a scheduler made with the defaults and loaded behaves as the saved one, through a file too", function()
    local opt1, s1 = make(OPTS)
    for i = 1, 4 do s1:step(P.metrics[i]) end
    local path = tmpdir() .. "/plateau.bin"
    ember.save(s1:state_dict(), path)
    local opt2, s2 = make()
    s2:load_state_dict(ember.load(path))
    assert.are.equal("max", s2.mode)
    assert.are.equal(0.5, s2.factor)
    for i = 5, #P.metrics do
      s1:step(P.metrics[i])
      s2:step(P.metrics[i])
      assert.are.equal(opt1.param_groups[1].lr, opt2.param_groups[1].lr)
      assert(math.abs(opt2.param_groups[1].lr - P.lrs[i]) < 1e-15, "step " .. i)
    end
  end)
  it("loading checks the settings", function()
    local _, s = make()
    local sd = s:state_dict()
    sd.mode = "maximum"
    raises_here(function() s:load_state_dict(sd) end, "mode must be \"min\" or \"max\", got maximum")
  end)
  it("step takes a one-element tensor (torch's float(metrics)); a longer one is refused at the caller's line", function()
    local opt, s = make({ patience = 0 })
    s:step(ember.tensor({ 1.0 }))
    s:step(ember.tensor(2.0)) -- worse, with patience 0: the lr times 0.1
    assert.are.near(0.01, opt.param_groups[1].lr, 1e-15)
    raises_here(function() s:step(ember.tensor({ 1.0, 2.0 })) end,
      "ReduceLROnPlateau: step needs the metric (a number or a one-element tensor), got a tensor of 2 elements")
  end)
end)
