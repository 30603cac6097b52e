-- core._json_decode / core._json_encode (core/lua/l_json.c, on cJSON): the
-- reader and writer of a model folder's JSON files (config.json, a sharded
-- checkpoint's index), as Python's json module reads and writes them.
local core = require "ember.core"

describe("core._json_decode", function()
  it("reads objects, arrays, escapes, surrogate pairs, numbers, booleans and null", function()
    local v = core._json_decode([[ {"a": "caf\u00e9 \ud83d\ude00\n\"", "b": [1, -2.5e3, 0.5, true, false, null, {}],
      "c": 1e-05, "d": 16.0, "e": null, "big": 1e20, "neg": -7} ]])
    assert.are.equal("café 😀\n\"", v.a)
    assert.are.equal("integer", math.type(v.b[1]))
    assert.are.equal(-2500, v.b[2])
    assert.are.equal("float", math.type(v.b[3]))
    assert.is_true(v.b[4])
    assert.is_false(v.b[5])
    assert.is_nil(v.b[6]) -- a hole: null is nil
    assert.are.same({}, v.b[7])
    assert.are.equal(1e-05, v.c)
    assert.are.equal("integer", math.type(v.d)) -- an integral value reads as an integer
    assert.is_nil(v.e)
    assert.are.equal("float", math.type(v.big)) -- past 2^53: not exact as an integer
    assert.are.equal(-7, v.neg)
  end)

  it("names the byte where malformed text goes wrong, and text after the value", function()
    for bad, msg in pairs { ["[1,]"] = "bad JSON at byte 4", ['{"a" 1}'] = "bad JSON at byte 6",
                            ['"abc'] = "bad JSON at byte 2", ["{} x"] = "byte 4: text after the value near 'x'",
                            [""] = "bad JSON at byte 1", ["nul"] = "bad JSON at byte 1" } do
      local ok, err = pcall(core._json_decode, bad)
      assert.is_false(ok, bad)
      assert.truthy(tostring(err):find(msg, 1, true), tostring(err))
    end
    assert.are.same({ 1 }, core._json_decode(" [1] \n\t"))
  end)
end)

describe("core._json_encode", function()
  it("writes what json_decode reads back, keys sorted, 2-space indents by default", function()
    local v = { hidden_size = 16, rms_norm_eps = 1e-5, name = 'a"b\tc\n', arch = { "LlamaForCausalLM" },
                nested = { x = { 1, 2.5, true, false } }, empty = {} }
    local text = core._json_encode(v)
    assert.are.same(v, core._json_decode(text))
    assert.truthy(text:find('\n  "arch": ["LlamaForCausalLM"],\n  "empty": [],\n  "hidden_size": 16,', 1, true), text)
    assert.truthy(core._json_encode({ a = { b = 1 } }, 4):find('\n    "a": {\n        "b": 1\n    }\n}', 1, true))
    assert.are.equal("0.1", core._json_encode(0.1))
    assert.are.equal('"x"', core._json_encode("x"))
  end)

  it("refuses what JSON cannot hold, naming where it is", function()
    for _, c in ipairs {
      { { a = { b = 0 / 0 } }, "json_encode: value.a.b is NaN" },
      { { 1, math.huge }, "json_encode: value[2] is inf" },
      { { [true] = 1 }, "value has a boolean key" },
      { { f = print }, "value.f is a function" },
      { { 1, 2, x = 3 }, "value mixes a list of 2 with other keys" },
      { { [2] = "b" }, "value has a number key" },
    } do
      local ok, err = pcall(core._json_encode, c[1])
      assert.is_false(ok)
      assert.truthy(tostring(err):find(c[2], 1, true), tostring(err))
    end
    local t = {}
    t.self = t
    local ok, err = pcall(core._json_encode, t)
    assert.is_false(ok)
    assert.truthy(err:find("nested more than 200 deep", 1, true), err)
  end)
end)
