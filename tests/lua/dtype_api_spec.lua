-- PyTorch's dtype API on ember's dtype names: the constants (ember.float32,
-- ember.double, ...), ember.finfo and ember.iinfo, get_default_dtype and
-- set_default_dtype (every factory, the promotions that make a float from
-- integers, nn modules' parameters and buffers), promote_types, result_type
-- and can_cast. PyTorch 1.13's answers are in tests/fixtures/dtype_api.lua
-- (tests/gen_dtype_api_fixtures.py).
local ember = require "ember"
local nn = ember.nn
local fx = dofile("tests/fixtures/dtype_api.lua")

local DTYPES = { "float32", "float64", "bfloat16", "int64", "bool" }

-- The error a chunk raises, run as the user's line 1 ("user:1:").
local function err_of(src)
  local f = assert(load(src, "=user", "t", setmetatable({ ember = ember, nn = nn }, { __index = _G })))
  local ok, msg = pcall(f)
  assert.is_false(ok, "no error from: " .. src)
  return tostring(msg)
end

local function assert_error(src, op, words)
  local msg = err_of(src)
  assert.truthy(msg:find("^user:1: ember%." .. op .. ": "), "not ember." .. op .. " at the user's line: " .. msg)
  for _, w in ipairs(words or {}) do assert.truthy(msg:find(w, 1, true), ("%q lacks %q"):format(msg, w)) end
end

describe("dtype constants", function()
  it("are the dtype names, so x.dtype == ember.float32 works", function()
    for _, d in ipairs(DTYPES) do
      assert.are.equal(d, ember[d])
      assert.is_true(ember.zeros(2, { dtype = ember[d] }).dtype == ember[d])
    end
    assert.is_true(ember.randn(2).dtype == ember.float32)
    assert.is_false(ember.randn(2):double().dtype == ember.float32)
  end)

  it("include torch's aliases of the dtypes ember has; reading one it lacks is an error at the user's line", function()
    assert.are.equal("float32", ember.float)
    assert.are.equal("float64", ember.double)
    assert.are.equal("int64", ember.long)
    assert.are.equal("float64", ember.ones(1, { dtype = ember.double }).dtype)
    -- {dtype = ember.int32} was {dtype = nil}: float32, silently
    for _, n in ipairs { "half", "float16", "int32", "int", "short", "int16", "int8", "uint8", "complex64", "cfloat" } do
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, err = pcall(function() return ember.zeros(2, { dtype = ember[n] }) end)
      assert.is_false(ok, n)
      assert.truthy(err:find("dtype_api_spec.lua:" .. line .. ": ember." .. n .. ": unknown dtype '", 1, true), err)
      assert.truthy(err:find("(expected float32, float64, int64, bool or bfloat16)", 1, true), err)
    end
    assert.is_nil(rawget(ember, "int32"))
    -- the functions of those names are still functions
    assert.are.equal("function", type(ember.is_floating_point))
    assert.are.equal("float32", ember.tensor({ 1 }, "float64"):float().dtype)
  end)
end)

describe("ember.finfo", function()
  it("gives torch's fields and values for float32, float64 and bfloat16", function()
    for name, want in pairs(fx.finfo) do
      local f = ember.finfo(ember[name])
      assert.are.equal(name, f.dtype)
      for k, v in pairs(want) do assert.are.equal(v, f[k], name .. "." .. k) end
      assert.are.equal(f.eps, ember.finfo(ember.zeros(1, { dtype = name })).eps) -- a tensor
      assert.are.equal(name, ember.finfo("torch." .. name).dtype) -- torch's spelling
    end
    assert.are.equal(fx.finfo.float64.eps, ember.finfo("double").eps)
  end)

  it("eps is the gap after 1 and max the largest finite value, in tensors of the dtype", function()
    for _, name in ipairs { "float32", "float64", "bfloat16" } do
      local f = ember.finfo(name)
      local one = ember.ones(1, { dtype = name })
      assert.is_true((one + f.eps):gt(one):item(), name)
      assert.is_true((one + f.eps / 2):eq(one):item(), name)
      local m = ember.full({ 1 }, f.max, { dtype = name })
      assert.are.equal(f.max, m:item(), name)
      assert.are.equal(math.huge, (m * 2):item(), name)
      assert.are.equal(f.tiny, ember.full({ 1 }, f.tiny, { dtype = name }):item(), name)
    end
  end)

  it("without an argument describes the default dtype, and prints as torch's", function()
    assert.are.equal(ember.get_default_dtype(), ember.finfo().dtype)
    assert.are.equal(
      "finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, smallest_normal=1.17549e-38, "
      .. "tiny=1.17549e-38, dtype=float32)", tostring(ember.finfo("float32")))
  end)

  it("refuses integer dtypes, unknown names and other values, naming itself at the user's line", function()
    assert_error("ember.finfo('int64')", "finfo", { "floating-point", "int64", "ember.iinfo" })
    assert_error("ember.finfo(ember.bool)", "finfo", { "bool" })
    assert_error("ember.finfo(ember.zeros(2, 'int64'))", "finfo", { "int64" })
    assert_error("ember.finfo('float16')", "finfo", { "float16" })
    assert_error("ember.finfo(3)", "finfo", { "number" })
  end)
end)

describe("ember.iinfo", function()
  it("gives torch's int64 limits as Lua integers", function()
    local i = ember.iinfo(ember.int64)
    assert.are.equal(fx.iinfo.int64.bits, i.bits)
    assert.are.equal(fx.iinfo.int64.max, i.max)
    assert.are.equal(fx.iinfo.int64.min, tostring(i.min))
    assert.are.equal("integer", math.type(i.max))
    assert.are.equal("integer", math.type(i.min))
    assert.are.equal("int64", ember.iinfo(ember.tensor({ 1 }, "int64")).dtype)
    assert.are.equal(i.max, ember.tensor({ i.max }, "int64"):item())
    assert.are.equal("iinfo(min=-9223372036854775808, max=9223372036854775807, dtype=int64)", tostring(i))
  end)

  it("refuses bool, float dtypes and nothing, naming itself at the user's line", function()
    assert_error("ember.iinfo(ember.bool)", "iinfo", { "bool" })
    assert_error("ember.iinfo('float32')", "iinfo", { "integer", "float32", "ember.finfo" })
    assert_error("ember.iinfo()", "iinfo", { "nil" })
  end)
end)

describe("the default dtype", function()
  after_each(function() ember.set_default_dtype("float32") end)

  it("is float32 until set", function()
    assert.are.equal("float32", ember.get_default_dtype())
    assert.are.equal("float32", ember.zeros(2).dtype)
  end)

  it("float64 makes every floating factory and promotion float64, as torch's (fixture)", function()
    ember.set_default_dtype(ember.float64)
    assert.are.equal("float64", ember.get_default_dtype())
    local l = ember.tensor({ 1, 2 }, "int64")
    local made = {
      zeros = ember.zeros(2), ones = ember.ones(2), empty = ember.empty(2), full = ember.full({ 2 }, 1.5),
      rand = ember.rand(2), randn = ember.randn(2), arange = ember.arange(0.0, 3.0), linspace = ember.linspace(0, 1, 3),
      logspace = ember.logspace(0, 1, 3), eye = ember.eye(2), tensor = ember.tensor({ 1.5, 2.0 }),
      int_times_float = l * 0.5, int_div_int = l / l, exp_of_int = l:exp(), sqrt_of_int = l:sqrt(),
      int_pow_float = l ^ 0.5, bool_times_float = l:gt(1) * 0.5, where_floats = ember.where(l:gt(1), 0.5, 1.5),
      reciprocal_of_int = l:reciprocal(), clamp_int_float = l:clamp(-2.5, 3.5),
      logsumexp_of_int = l:view(1, 2):logsumexp(2), number_div_int = 2 / l, int_div_number = l / 2,
      sigmoid_of_int = l:sigmoid(),
      linear_weight = nn.Linear(2, 2).weight, linear_bias = nn.Linear(2, 2).bias,
      layernorm_weight = nn.LayerNorm(2).weight, embedding_weight = nn.Embedding(3, 2).weight,
      batchnorm_running_mean = nn.BatchNorm1d(2).running_mean,
    }
    for k, want in pairs(fx.float64_default) do
      assert.is_not_nil(made[k], k)
      assert.are.equal(want, made[k].dtype, k)
    end
  end)

  it("reaches the factories torch has no twin of, and ember's own float rules", function()
    ember.set_default_dtype("double") -- any name of float64
    assert.are.equal("float64", ember.get_default_dtype())
    for what, t in pairs {
      uniform = ember.uniform({ 2 }, 0, 1), normal = ember.normal({ 2 }, 0, 1), Tensor = ember.Tensor(2, 3),
      tensor_of_integers = ember.tensor({ 1, 2 }), arange_of_integers = ember.arange(3),
      from_bytes = ember.from_bytes("\1\2", 2), special_of_number = ember.special.expit(0.5),
      conv_weight = nn.Conv2d(1, 1, 3).weight, lstm_weight = nn.LSTM(2, 3).weight_ih_l0,
      mha_weight = nn.MultiheadAttention(4, 2).in_proj_weight, groupnorm_bias = nn.GroupNorm(1, 2).bias,
      positional = nn.SinusoidalPositionalEncoding(4, { max_len = 8 }).pe,
      -- a batch of integers with some floats (a float first is float64, as torch's)
      collated_numbers = require("ember.data").default_collate({ 1, 2.5 }),
    } do
      assert.are.equal("float64", t.dtype, what)
    end
  end)

  it("leaves what has its own dtype: explicit dtypes, booleans, integers where ember keeps them, *_like, x:float()", function()
    ember.set_default_dtype("float64")
    assert.are.equal("float32", ember.zeros(2, "float32").dtype)
    assert.are.equal("int64", ember.arange(3, { dtype = "int64" }).dtype)
    assert.are.equal("bool", ember.full({ 2 }, true).dtype)
    assert.are.equal("bool", ember.tensor({ true, false }).dtype)
    local x = ember.randn(2, "float32")
    assert.are.equal("float32", ember.zeros_like(x).dtype)
    assert.are.equal("float32", ember.randn(2):float().dtype)
    assert.are.equal("float32", (x * 0.5).dtype) -- a number never widens a float tensor
    assert.are.equal("int64", (ember.tensor({ 1 }, "int64") * 2).dtype)
    assert.are.equal("float32", ember.tensor(x).dtype)
  end)

  it("float32 modules keep float32 on float32 inputs under a float64 default (no scratch widens them)", function()
    ember.set_default_dtype("float64")
    local cases = {
      { nn.Linear(4, 3), { 2, 4 } }, { nn.Conv2d(2, 3, 3, { padding = 1 }), { 1, 2, 5, 5 } },
      { nn.LayerNorm(4), { 2, 4 } }, { nn.BatchNorm1d(4), { 3, 4 } }, { nn.MultiheadAttention(4, 2), { 3, 1, 4 } },
      { nn.LSTM(4, 3), { 5, 1, 4 } }, { nn.GroupNorm(2, 4), { 2, 4, 3 } }, { nn.MaxPool2d(2), { 1, 1, 4, 4 } },
      { nn.AvgPool2d(2), { 1, 1, 4, 4 } }, { nn.Dropout(0.5), { 4, 4 } }, { nn.GELU(), { 4 } },
    }
    for i, c in ipairs(cases) do
      local m = c[1]:float()
      local x = ember.randn(c[2], "float32"):requires_grad_()
      local y = m(x)
      if type(y) == "table" and not ember.is_tensor(y) then y = y[1] end
      assert.are.equal("float32", y.dtype, "case " .. i)
      y:sum():backward()
      assert.are.equal("float32", x.grad.dtype, "case " .. i)
      for _, p in ipairs(m:parameters()) do assert.are.equal("float32", p.grad.dtype, "case " .. i) end
    end
  end)

  it("float64 for gradchecks: a module built after set_default_dtype passes ember.autograd.gradcheck", function()
    ember.set_default_dtype(ember.float64)
    ember.manual_seed(3)
    local lin = nn.Linear(3, 2)
    local x = ember.randn(4, 3):requires_grad_()
    assert.are.equal("float64", x.dtype)
    assert.is_true(ember.autograd.gradcheck(function(a) return lin(a):tanh() end, { x }))
  end)

  it("bfloat16 is allowed, as torch's", function()
    ember.set_default_dtype(ember.bfloat16)
    assert.are.equal("bfloat16", ember.zeros(2).dtype)
    assert.are.equal("bfloat16", ember.tensor({ 0.5 }).dtype)
    assert.are.equal(0.5, ember.tensor({ 0.5 }):item())
    assert.are.equal("bfloat16", ember.finfo().dtype)
  end)

  it("refuses non-floating dtypes and other values, and keeps the old default", function()
    ember.set_default_dtype("float64")
    assert_error("ember.set_default_dtype(ember.int64)", "set_default_dtype", { "floating-point", "int64" })
    assert_error("ember.set_default_dtype('bool')", "set_default_dtype", { "bool" })
    assert_error("ember.set_default_dtype('float16')", "set_default_dtype", { "float16" })
    assert_error("ember.set_default_dtype()", "set_default_dtype", { "dtype" })
    assert.are.equal("float64", ember.get_default_dtype())
  end)
end)

describe("promote_types, result_type, can_cast", function()
  after_each(function() ember.set_default_dtype("float32") end)

  local function rows(list)
    local out = {}
    for _, r in ipairs(list) do
      local w = {}
      for word in r:gmatch("%S+") do w[#w + 1] = word end
      out[#out + 1] = w
    end
    return out
  end

  it("promote_types and can_cast agree with torch for every pair", function()
    for _, r in ipairs(rows(fx.promote_types)) do
      assert.are.equal(r[3], ember.promote_types(r[1], r[2]), r[1] .. " " .. r[2])
    end
    for _, r in ipairs(rows(fx.can_cast)) do
      assert.are.equal(r[3] == "true", ember.can_cast(r[1], r[2]), r[1] .. " -> " .. r[2])
    end
    assert.are.equal("float64", ember.promote_types("torch.float32", "double"))
  end)

  -- "t:int64" a 1-d tensor, "z:int64" a 0-d one, "i:2" "f:2.5" "b:true" numbers
  local function operand(s)
    local k, v = s:match("^(%a):(.+)$")
    if k == "t" then return ember.ones(2, { dtype = v }) end
    if k == "z" then return ember.ones({}, { dtype = v }) end
    if k == "i" then return math.tointeger(tonumber(v)) end
    if k == "f" then return tonumber(v) + 0.0 end
    return v == "true"
  end

  it("result_type agrees with torch for tensors, 0-d tensors and numbers, under both defaults", function()
    for default, list in pairs(fx.result_type) do
      ember.set_default_dtype(default)
      local bad = {}
      for _, r in ipairs(rows(list)) do
        local got = ember.result_type(operand(r[1]), operand(r[2]))
        if got ~= r[3] then bad[#bad + 1] = ("%s %s: %s, want %s"):format(r[1], r[2], got, r[3]) end
      end
      assert.are.same({}, bad, default)
    end
  end)

  it("result_type is the dtype ember's ops give", function()
    for _, a in ipairs(DTYPES) do
      for _, b in ipairs(DTYPES) do
        for _, za in ipairs { false, true } do
          local x = za and ember.ones({}, { dtype = a }) or ember.ones(2, { dtype = a })
          local y = ember.ones(2, { dtype = b })
          assert.are.equal(ember.result_type(x, y), (x + y).dtype, a .. " " .. b)
          assert.are.equal(ember.result_type(x, y), ember.where(ember.ones(2, "bool"), x, y).dtype, a .. " " .. b)
        end
      end
      local x = ember.ones(2, { dtype = a })
      if a ~= "bool" then
        assert.are.equal(ember.result_type(x, 2.5), (x * 2.5).dtype, a)
        assert.are.equal(ember.result_type(x, 2), (x * 2).dtype, a)
      end
    end
  end)

  it("can_cast is what in-place ops allow", function()
    local i = ember.tensor({ 1, 2 }, "int64")
    assert.is_false(ember.can_cast("float32", "int64"))
    assert.has_error(function() i:add_(ember.tensor({ 0.5, 0.5 })) end)
    assert.is_true(ember.can_cast("bool", "int64"))
    i:add_(ember.tensor({ true, false }))
    assert.are.same({ 2, 2 }, i:totable())
  end)

  it("name themselves and the bad argument at the user's line", function()
    assert_error("ember.promote_types('float32', 'float16')", "promote_types", { "float16" })
    assert_error("ember.promote_types('float32')", "promote_types", { "dtype" })
    assert_error("ember.can_cast(1, 'float32')", "can_cast", { "number" })
    assert_error("ember.result_type('float32', 1)", "result_type", { "argument 1", "string" })
    assert_error("ember.result_type(ember.ones(1), {})", "result_type", { "argument 2", "table" })
    assert_error("ember.result_type(ember.ones(1), 1, 2)", "result_type", { "argument 3" })
  end)

  it("is_floating_point is a function and a method", function()
    for _, d in ipairs(DTYPES) do
      local want = ember.finfo ~= nil and (d == "float32" or d == "float64" or d == "bfloat16")
      local x = ember.zeros(1, { dtype = d })
      assert.are.equal(want, x:is_floating_point(), d)
      assert.are.equal(want, ember.is_floating_point(x), d)
    end
  end)
end)
