-- Errors raised in ember's Lua code (and by C ops that Lua code calls)
-- point at the user's line -- this file -- however many library frames lie
-- between (class constructors, module __call, wrappers); see
-- lua/ember/_errors.lua. The calls are not tail calls (`local _ =`), which
-- would take the caller's frame off the stack, as anywhere in Lua.
local ember = require "ember"
local nn, optim, data = require "ember.nn", require "ember.optim", require "ember.data"
local checkpoint, generate = require "ember.checkpoint", require "ember.generate"

local function param() return ember.ones(2):requires_grad_() end

local PROBES = {
  { "nn.Linear(0, 3)", function() local _ = nn.Linear(0, 3) end, "in_features" },
  { "Linear forward, wrong width", function() local _ = nn.Linear(2, 3):forward(ember.ones(4)) end, "in_features=2" },
  { "Linear called, wrong dtype", function() local _ = nn.Linear(2, 3)(ember.ones(2, "int64")) end, "" },
  { "nn.Embedding(0, 3)", function() local _ = nn.Embedding(0, 3) end, "num_embeddings" },
  { "Embedding id out of range (a C error)", function() local _ = nn.Embedding(3, 3)(ember.tensor({ 5 }, "int64")) end,
    "out of range" },
  { "nn.LayerNorm(0)", function() local _ = nn.LayerNorm(0) end, "normalized_shape" },
  { "nn.Dropout(2)", function() local _ = nn.Dropout(2) end, "p must be" },
  { "nn.GELU('x')", function() local _ = nn.GELU("x") end, "approximate" },
  { "nn.FeedForward activation", function() local _ = nn.FeedForward(4, 8, { activation = "x" }) end, "activation" },
  { "CrossEntropyLoss float targets not shaped like the logits",
    function() local _ = nn.CrossEntropyLoss()(ember.ones(2, 3), ember.ones(2)) end, "int64" },
  { "CrossEntropyLoss class ids out of range (a C error)",
    function() local _ = nn.CrossEntropyLoss()(ember.ones(2, 3), ember.tensor({ 1, 4 }, "int64")) end, "4" },
  { "nn.Sequential(3)", function() local _ = nn.Sequential(3) end, "not a module" },
  { "SinusoidalPositionalEncoding(0)", function() local _ = nn.SinusoidalPositionalEncoding(0) end, "d_model" },
  { "SGD lr < 0", function() local _ = optim.SGD({ param() }, { lr = -1 }) end, "lr must be" },
  { "Adam betas", function() local _ = optim.Adam({ param() }, { betas = 3 }) end, "betas" },
  { "AdamW unknown option", function() local _ = optim.AdamW({ param() }, { foo = 1 }) end, "unknown option 'foo'" },
  { "clip_grad_norm", function() local _ = optim.clip_grad_norm({}, -1) end, "max_norm" },
  { "checkpoint.save", function() local _ = checkpoint.save(3) end, "checkpoint.save" },
  { "checkpoint.load of a missing file (a C error)",
    function() local _ = checkpoint.load("/nonexistent/x.safetensors") end, "No such file" },
  { "generate without decode", function() local _ = generate.generate({}, ember.ones(2), {}) end, "decode" },
  { "Dataset.new without fields", function() local _ = data.Dataset.new({}) end, "no fields" },
  { "a helper", function() local _ = ember.ones(3):triu() end, "ember.triu" },
  { "table indexing", function() local _ = ember.ones(3)[{ 4 }] end, "out of range" },
  { "a wrapped listing", function() local _ = ember.ones(3):split(0) end, "ember.split" },
  { "a C op", function() local _ = ember.ones(2, 3):matmul(ember.ones(2, 3)) end, "ember.matmul" },
}

describe("errors point at the user's line", function()
  for _, p in ipairs(PROBES) do
    it(p[1], function()
      local ok, msg = pcall(p[2])
      assert.is_false(ok, "expected an error")
      assert(tostring(msg):find("^[^\n]*error_location_spec%.lua:%d+: "), "not at the user's line: " .. tostring(msg))
      assert(tostring(msg):find(p[3], 1, true), ("%q lacks %q"):format(msg, p[3]))
    end)
  end

  it("a user's own error inside a callback keeps its own position", function()
    local ok, msg = pcall(function()
      local _ = ember.Function { name = "boom", forward = function() error("my own error") end,
                                 backward = function() end }(ember.ones(1))
    end)
    assert.is_false(ok)
    assert(msg:find("error_location_spec.lua", 1, true) and msg:find("my own error", 1, true), msg)
  end)
end)

describe("library positions in long, shortened chunk names", function()
  it("are recognised as the library's, user files' are not", function()
    local errors = require "ember._errors"
    local dir = debug.getinfo(errors.wrap, "S").source:match("^@(.*/)_errors%.lua$")
    local shortened = "..." .. (dir .. "nn/CrossEntropyLoss.lua"):sub(-50)
    assert.are.equal("boom", errors.strip_library_position(shortened .. ":41: boom"))
    assert.are.equal("...er/train.lua:41: boom", errors.strip_library_position("...er/train.lua:41: boom"))
    assert.are.equal("/home/u/train.lua:3: boom", errors.strip_library_position("/home/u/train.lua:3: boom"))
  end)
end)

describe("'not supported' says what is", function()
  it("an attention variant lists what it supports and who supports the rest", function()
    local lin = ember.MultiHeadAttention { d_model = 8, heads = 2, attention = "linear" }
    local ok, msg = pcall(lin.forward, lin, ember.randn(2, 5, 8), nil, { allow_mask = ember.ones({ 5, 5 }, "bool") })
    assert.is_false(ok)
    assert(msg:find("does not support", 1, true) and msg:find("it supports:", 1, true)
      and msg:find("loaded variants that do: ", 1, true) and msg:find("standard", 1, true), msg)
  end)

  it("subtraction of two bools says what works", function()
    local ok, msg = pcall(function() return ember.tensor { true } - ember.tensor { true } end)
    assert.is_false(ok)
    assert(msg:find("Use logical_xor() instead", 1, true), msg)
  end)
end)
