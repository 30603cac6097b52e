-- Docs tested for what they say (issue 26 item 6): where a doc comment
-- states a boolean mask's convention ("true = padding", "true = may
-- attend", ...), the convention is read from the doc text itself (what
-- help() prints) and checked against what the function does. A doc that
-- says the opposite of the code fails here.
local ember = require "ember"
local nn = require "ember.nn"
local doc = require "ember._doc"

-- The convention a doc states for option `opt`: "masked" (true = padding,
-- masked, blocked) or "allowed" (true = may attend, a real key).
local MEANS = {
  ["padding"] = "masked", ["masked"] = "masked", ["masked out"] = "masked",
  ["may attend"] = "allowed", ["a real key"] = "allowed", ["a real token"] = "allowed",
}

local function stated(entry, opt)
  local text = doc.lookup(entry)
  assert(text, "no doc entry for " .. tostring(entry))
  text = text:gsub("%s+", " ")
  local after = text:match("`" .. opt .. "`%s*%b()") or text:match("`" .. opt .. "`[^`]*")
  assert(after, ("the doc of %s does not describe %s"):format(doc.name_of(entry) or entry, opt))
  local phrase = after:match("true = ([%a ]-)[,;%)]")
  assert(phrase, ("the doc of %s states no convention for %s: %q"):format(doc.name_of(entry) or entry, opt, after))
  local means = MEANS[phrase]
  assert(means, ("unknown convention phrase %q for %s"):format(phrase, opt))
  return means, phrase
end

local function maxdiff(a, b) return (a - b):abs():max():item() end

-- Attention of one query over keys 1..3 where key 1 is marked true:
-- "masked" must equal attention over keys 2..3, "allowed" must equal v[1].
local function check(means, run, v)
  local marked = run()
  if means == "masked" then
    return marked, run({ 2, 3 })
  end
  return marked, v:narrow(3, 1, 1)
end

describe("mask conventions stated in the docs hold", function()
  local q, k, v
  before_each(function()
    ember.manual_seed(3)
    q = ember.randn({ 1, 1, 1, 4 }, { dtype = "float64" })
    k = ember.randn({ 1, 1, 3, 4 }, { dtype = "float64" }) * 3
    v = ember.randn({ 1, 1, 3, 4 }, { dtype = "float64" })
  end)

  it("ember.Attention.forward: key_padding_mask", function()
    local a = ember.Attention { heads = 1, head_dim = 4, dtype = "float64" }
    local means, phrase = stated(ember.Attention.forward, "key_padding_mask")
    local mask = ember.tensor({ { true, false, false } })
    local function run(keep)
      if keep then return (a(q, k:narrow(3, 2, 2), v:narrow(3, 2, 2))) end
      return (a(q, k, v, { key_padding_mask = mask }))
    end
    local got, want = check(means, run, v)
    assert(maxdiff(got, want) < 1e-12, ("the doc says key_padding_mask true = %s, the code does otherwise"):format(phrase))
  end)

  it("ember.Attention.forward: a boolean attn_mask", function()
    local a = ember.Attention { heads = 1, head_dim = 4, dtype = "float64" }
    local means, phrase = stated(ember.Attention.forward, "attn_mask")
    local mask = ember.tensor({ { true, false, false } })
    local function run(keep)
      if keep then return (a(q, k:narrow(3, 2, 2), v:narrow(3, 2, 2))) end
      return (a(q, k, v, { attn_mask = mask }))
    end
    local got, want = check(means, run, v)
    assert(maxdiff(got, want) < 1e-12, ("the doc says attn_mask true = %s, the code does otherwise"):format(phrase))
  end)

  it("data.padding: the mask it returns", function()
    local text = doc.lookup("data.padding"):gsub("%s+", " ")
    local phrase = text:match("mask[^(]*%(bool %[B, L%], true = ([%a ]-)[,;%)]")
    assert(phrase, "data.padding's doc states no convention for its mask: " .. text)
    local data = require "ember.data"
    local ids, mask = data.pad({ { 5, 6, 7 }, { 8 } }, 1)
    -- row 2 has one real token and two pads
    local padded = mask[2]:totable()
    local means = MEANS[phrase]
    assert.are.same(means == "masked" and { false, true, true } or { true, false, false }, padded,
      ("the doc says the mask's true = %s, the code does otherwise"):format(phrase))
    -- and attention given it as key_padding_mask ignores the pad keys of row 2
    local a = ember.Attention { heads = 1, head_dim = 4, dtype = "float64" }
    local kv = ember.randn({ 2, 1, 3, 4 }, { dtype = "float64" })
    local qq = ember.randn({ 2, 1, 1, 4 }, { dtype = "float64" })
    local out = a(qq, kv, kv, { key_padding_mask = mask })
    assert.is_true(maxdiff(out[2], kv[2]:narrow(2, 1, 1)) < 1e-12)
    assert.are.equal(ids.shape[2], 3)
  end)

  for _, opt in ipairs { "key_padding_mask", "allow_mask", "block_mask" } do
    it("nn.MultiHeadAttention.forward: " .. opt, function()
      local m = nn.MultiHeadAttention(4, 1, { dtype = "float64" }):eval()
      local means, phrase = stated(nn.MultiHeadAttention.forward, opt)
      local x, kv = q:view(1, 1, 4), k:view(1, 3, 4)
      local mask = ember.tensor({ { true, false, false } }) -- [B, Lk] or [Lq, Lk]: both 1 x 3 here
      local function run(keep)
        if keep then return (m(x, kv:narrow(2, 2, 2))) end
        return (m(x, kv, { [opt] = mask }))
      end
      local got = run()
      local want = means == "masked" and run({ 2, 3 }) or m(x, kv:narrow(2, 1, 1))
      assert(maxdiff(got, want) < 1e-12, ("the doc says %s true = %s, the code does otherwise"):format(opt, phrase))
    end)
  end
end)

describe("the docs see the modules the user has (issue 26: this spec failed after docs_spec)", function()
  it("ember.nn and ember.Attention follow package.loaded when a module is loaded again", function()
    local names = { "ember.nn", "ember.nn.Attention" }
    local saved = {}
    for _, n in ipairs(names) do saved[n] = package.loaded[n] end
    local _ = ember.nn, ember.Attention -- first use
    for _, n in ipairs(names) do package.loaded[n] = nil end
    local ok, err = pcall(function()
      local nn2 = require "ember.nn"
      assert(rawequal(ember.nn, nn2), "ember.nn is a copy that was unloaded")
      assert(rawequal(ember.Attention, nn2.Attention), "ember.Attention is a class that was unloaded")
      assert(doc.lookup(ember.Attention.forward), "help() cannot name ember.Attention.forward")
    end)
    for _, n in ipairs(names) do package.loaded[n] = saved[n] end
    assert(ok, err)
  end)
end)
