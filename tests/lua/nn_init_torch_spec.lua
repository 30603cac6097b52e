-- nn.init as torch.nn.init: dirac_ and sparse_, kaiming on a zero-element
-- tensor, _calculate_fan_in_and_fan_out, and the generator of PyTorch 2.2
-- (given last or by name) with the arguments past a function's own refused.
local ember = require "ember"
local nn = require "ember.nn"
local raises_here = require("tests.lua.helpers.parity").raises_here

-- the message of a failed call, or nil
local err_of = require("tests.lua.helpers.parity").error_of

describe("nn.init as torch.nn.init", function()
  it("dirac_: a convolution weight that passes its channels through (was: no dirac_)", function()
    local w = nn.init.dirac_(ember.empty(4, 4, 3, 3))
    local x = ember.randn(1, 4, 5, 5)
    assert.is_true(ember.allclose(nn.functional.conv2d(x, w, nil, 1, 1), x))
    -- groups, and fewer in-channels than a group's out-channels (torch: w[g * 3 + d, d, 1] = 1)
    local g = nn.init.dirac_(ember.randn(6, 2, 3), 2)
    local want = ember.zeros(6, 2, 3)
    for _, at in ipairs { { 1, 1 }, { 2, 2 }, { 4, 1 }, { 5, 2 } } do want[at[1]][at[2]][2] = 1 end
    assert.is_true(g:equal(want))
    assert.matches("nn.init.dirac_: needs a convolution weight of 3, 4 or 5 dims",
      err_of(function() nn.init.dirac_(ember.empty(6, 2)) end))
    assert.matches("groups must be a positive integer dividing dim 1",
      err_of(function() nn.init.dirac_(ember.empty(6, 2, 3), 4) end))
  end)

  it("sparse_: ceil(sparsity * rows) zeros in every column, N(0, std^2) elsewhere (was: no sparse_)", function()
    ember.manual_seed(0)
    local w = nn.init.sparse_(ember.empty(10, 300), 0.25, 2)
    assert.is_true(w:eq(0):sum(1):eq(3):all():item())
    local kept = w:masked_select(w:ne(0))
    assert.is_true(math.abs(kept:std():item() - 2) < 0.1)
    -- the zeros fall on different rows from column to column
    assert.is_true(w:eq(0):sum(2):gt(0):all():item())
    assert.is_true(nn.init.sparse_(ember.empty(4, 3), { sparsity = 0.5 }):eq(0):sum(1):eq(2):all():item())
  end)

  it("kaiming on a zero-element tensor is a no-op, as PyTorch's (was: 'the fan_in ... is 0')", function()
    assert.are.equal(0, nn.init.kaiming_uniform_(ember.empty(3, 0)):numel())
    assert.are.equal(0, nn.init.kaiming_normal_(ember.empty(3, 0), 0, "fan_in", "relu"):numel())
  end)
end)

describe("nn.init._calculate_fan_in_and_fan_out", function()
  it("has torch's _calculate_fan_in_and_fan_out", function()
    local fi, fo = nn.init._calculate_fan_in_and_fan_out(ember.empty(64, 32, 3, 3))
    assert.are.equal(288, fi)
    assert.are.equal(576, fo)
    local ok, err = pcall(nn.init._calculate_fan_in_and_fan_out, ember.empty(5))
    assert.is_false(ok)
    assert.matches("nn_init_torch_spec.lua:%d+: nn.init._calculate_fan_in_and_fan_out: fan in and fan out need", err)
  end)
end)

describe("nn.init's generator (PyTorch 2.2's) and arguments past a function's own", function()
  local init = nn.init
  local CASES = {
    { "uniform_", { -1, 2 } }, { "normal_", { 0.5, 2 } }, { "trunc_normal_", { 0, 1, -1, 1 } },
    { "xavier_uniform_", { 1.5 } }, { "xavier_normal_", { 1.5 } }, { "kaiming_uniform_", { 0.1, "fan_out", "leaky_relu" } },
    { "kaiming_normal_", { 0, "fan_in", "relu" } }, { "orthogonal_", { 2 } }, { "sparse_", { 0.3, 0.1 } },
  }
  local function with(list, g)
    local r = { table.unpack(list) }
    r[#r + 1] = g
    return r
  end

  it("draws from the generator given last, leaving the global one as it is (it was dropped)", function()
    for _, c in ipairs(CASES) do
      local name, args = c[1], c[2]
      ember.manual_seed(5)
      local want = init[name](ember.empty(6, 4), table.unpack(args))
      ember.manual_seed(11)
      local next_draw = ember.rand(3)
      ember.manual_seed(11)
      local g = ember.Generator():manual_seed(5)
      local got = init[name](ember.empty(6, 4), table.unpack(with(args, g)))
      assert.is_true(got:equal(want), name .. ": the generator's draws")
      assert.is_true(ember.rand(3):equal(next_draw), name .. ": the global generator moved")
    end
  end)

  it("takes generator by name too", function()
    local g = ember.Generator():manual_seed(2)
    local a = init.kaiming_uniform_(ember.empty(4, 4), { mode = "fan_out", generator = g })
    local b = init.normal_(ember.empty(4), { std = 3, generator = g })
    ember.manual_seed(2)
    assert.is_true(a:equal(init.kaiming_uniform_(ember.empty(4, 4), { mode = "fan_out" })))
    assert.is_true(b:equal(init.normal_(ember.empty(4), 0, 3)))
  end)

  it("refuses arguments past a function's own and a generator that is not one, at the user's line", function()
    raises_here(function() init.normal_(ember.empty(4), 0, 1, nil, 5) end,
      "nn.init.normal_: takes at most 3 arguments after the tensor (the last a generator), got 4")
    raises_here(function() init.zeros_(ember.empty(4), 0) end, "nn.init.zeros_: takes at most 0 arguments")
    raises_here(function() init.xavier_uniform_(ember.empty(4, 4), 1, 7) end, "generator must be an ember.Generator")
    raises_here(function() init.normal_(ember.empty(4), { std = 1 }, 3) end, "the options table must be the last")
  end)
end)
