-- A new user's first look at tensors: tostring of tensors (set_printoptions
-- included). The REPL's printing is repl_spec.lua's.
local ember = require "ember"

describe("tostring of a tensor", function()
  after_each(function() ember.set_printoptions { profile = "default" } end)

  it("prints every digit of a large float64 in fixed notation (sci_mode = false)", function()
    -- an element longer than the formatter's buffer was cut and the bytes
    -- after the buffer were printed
    ember.set_printoptions { sci_mode = false }
    local s = tostring(ember.tensor({ 1e300, 1 }, "float64"))
    local big = ("%.4f"):format(1e300)
    assert.truthy(s:find("tensor([" .. big .. ",", 1, true), s)
    assert.truthy(s:find((" "):rep(#big - 6) .. "1.0000], shape=[2], dtype=float64", 1, true), s)
    ember.set_printoptions { sci_mode = false, precision = 30 }
    s = tostring(ember.tensor({ -1.7e308 }, "float64"))
    assert.are.equal("tensor([" .. ("%.30f"):format(-1.7e308) .. "], shape=[1], dtype=float64, device=cpu)", s)
    assert.is_nil(s:find("[^%g ]"), "only printable characters")
  end)

  it("keeps torch's choice of notation and the summary past the threshold", function()
    assert.are.equal("tensor([1.0000e-05, 1.0000e-06], shape=[2], dtype=float32, device=cpu)",
      tostring(ember.tensor({ 1e-5, 1e-6 })))
    assert.are.equal("tensor([   nan,    inf,   -inf, 1.5000], shape=[4], dtype=float32, device=cpu)",
      tostring(ember.tensor({ 0 / 0, 1 / 0, -1 / 0, 1.5 })))
    local s = tostring(ember.arange(0, 2000, { dtype = "int64" }))
    assert.are.equal("tensor([   0,    1,    2,  ..., 1997, 1998, 1999], shape=[2000], dtype=int64, device=cpu)", s)
  end)
end)
