-- ember.generate's options (issue 27 item 4, issue 26 item 7): unknown
-- options are errors, top_p, repetition_penalty, stop sequences, max_time
-- and batches of left-padded prompts. Each is checked deterministically:
-- seeded sampling, counted clocks, a row decoded alone.
local ember = require "ember"
local generate = require "ember.generate"
local TinyLM = require "tests.lua.helpers.tiny_lm"

local function prompt(B, L, V)
  return (ember.rand(B, L, { dtype = "float64" }) * (V or 11)):long() + 1
end

local message = require("tests.lua.helpers.parity").must_fail -- the message of fn's error, which must fail

describe("generate's options", function()
  local m
  before_each(function()
    ember.manual_seed(21)
    m = TinyLM { cross = false }
  end)

  it("an unknown option is an error listing the known ones, at the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = message(function() generate.generate(m, prompt(1, 2), { top_q = 0.9 }) end)
    assert.truthy(msg:find("generate: unknown option 'top_q' (options: ", 1, true), msg)
    for _, name in ipairs { "max_new_tokens", "top_k", "top_p", "repetition_penalty", "stop", "max_time" } do
      assert.truthy(msg:find(name, 1, true), msg)
    end
    assert.truthy(msg:find("generate_options_spec.lua:" .. line, 1, true), msg)
    msg = message(function() generate.pick(ember.zeros(1, 3), { max_new_tokens = 3 }) end)
    assert.truthy(msg:find("generate.pick: unknown option 'max_new_tokens'", 1, true), msg)
  end)

  it("ember.generate(model, prompt, opts) is generate.generate, its errors at the caller's line", function()
    local p = prompt(1, 3)
    ember.manual_seed(3)
    local a = ember.generate(m, p, { max_new_tokens = 4 })
    ember.manual_seed(3)
    local b = generate.generate(m, p, { max_new_tokens = 4 })
    assert.are.same(b:totable(), a:totable())
    assert.are.same({ 1, 7 }, a.shape)
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = message(function() ember.generate(m, p, { top_q = 0.9 }) end)
    assert.truthy(msg:find("generate_options_spec.lua:" .. line .. ": ", 1, true), msg)
  end)

  it("checks the new options' values", function()
    for _, c in ipairs {
      { { top_p = -0.1 }, "top_p must be a number in [0, 1]" },
      { { top_p = 1.5 }, "top_p must be a number in [0, 1]" },
      { { repetition_penalty = 0 }, "repetition_penalty must be a number > 0" },
      { { stop = { 3 } }, "stop must be a list of token id sequences" },
      { { stop = { {} } }, "stop must be a list of token id sequences" },
      { { max_time = -1 }, "max_time must be a number of seconds >= 0" },
      { { prompt_padding_mask = ember.zeros(1, 2) }, "prompt_padding_mask must be a bool tensor [B=1, L=2]" },
    } do
      local msg = message(function() generate.generate(m, prompt(1, 2), c[1]) end)
      assert.truthy(msg:find("generate: " .. c[2], 1, true), msg)
    end
  end)

  it("top_p keeps the smallest set of most likely tokens that reaches p", function()
    -- probabilities 0.5, 0.3, 0.15, 0.05 (in the order 3, 1, 4, 2)
    local probs = { 0.3, 0.05, 0.5, 0.15 }
    local logits = ember.tensor({ probs }, { dtype = "float64" }):log()
    local function support(p)
      local seen = {}
      ember.manual_seed(4)
      for _ = 1, 300 do seen[generate.pick(logits, { strategy = "sample", top_p = p }):item()] = true end
      local ids = {}
      for id in pairs(seen) do ids[#ids + 1] = id end
      table.sort(ids)
      return ids
    end
    assert.are.same({ 3 }, support(0.5))          -- 0.5 reaches 0.5
    assert.are.same({ 1, 3 }, support(0.6))       -- 0.5 < 0.6: the next one too
    assert.are.same({ 1, 3, 4 }, support(0.9))
    assert.are.same({ 1, 2, 3, 4 }, support(1.0))
    -- a tiny top_p is greedy
    local p = prompt(3, 2)
    assert.is_true(generate.generate(m, p, { max_new_tokens = 6 })
      == generate.generate(m, p, { strategy = "sample", top_p = 1e-9, max_new_tokens = 6 }))
  end)

  it("top_p changes seeded sampling, reproducibly", function()
    local p = prompt(4, 2)
    local function run(o)
      ember.manual_seed(9)
      o.strategy, o.max_new_tokens, o.temperature = "sample", 12, 3
      return generate.generate(m, p, o)
    end
    assert.is_true(run({ top_p = 0.5 }) == run({ top_p = 0.5 }))
    assert.is_false(run({ top_p = 0.5 }) == run({}))
  end)

  it("repetition_penalty is Hugging Face's: positive logits divided, negative multiplied", function()
    for trial = 1, 6 do
      local p = prompt(1, 3)
      local _, logits = generate.generate(m, p, { max_new_tokens = 1, return_logits = true })
      local want = logits[1]:totable()[1]
      local seen = {}
      for _, id in ipairs(p:totable()[1]) do seen[id] = true end
      for id in pairs(seen) do want[id] = want[id] < 0 and want[id] * 3 or want[id] / 3 end
      local best = 1
      for i = 2, #want do if want[i] > want[best] then best = i end end
      local ids = generate.generate(m, p, { max_new_tokens = 1, repetition_penalty = 3 })
      assert.are.equal(best, ids[1][4]:item(), "trial " .. trial)
    end
    -- the penalty changes greedy decoding
    local q = prompt(3, 3)
    assert.is_false(generate.generate(m, q, { max_new_tokens = 8 })
      == generate.generate(m, q, { max_new_tokens = 8, repetition_penalty = 5 }))
    -- 1 is no penalty
    local q = prompt(2, 3)
    assert.is_true(generate.generate(m, q, { max_new_tokens = 5 })
      == generate.generate(m, q, { max_new_tokens = 5, repetition_penalty = 1 }))
  end)

  it("stop sequences end a row; done rows emit pad_id; all done ends generation", function()
    local p = prompt(2, 2)
    local g = generate.generate(m, p, { max_new_tokens = 8 })
    local row1 = g[1]:totable()
    local seq = { row1[4], row1[5] } -- the 2nd and 3rd generated tokens of row 1
    local s = generate.generate(m, p, { max_new_tokens = 8, stop = { { 99 }, seq }, pad_id = 11 })
    local r1 = s[1]:totable()
    -- row 1 ends right after the stop sequence (or at its first match, if
    -- earlier: one may begin with the prompt's last token, as Hugging Face's)
    local at
    for j = 3, #r1 do if r1[j - 1] == seq[1] and r1[j] == seq[2] then at = j break end end
    assert.is_not_nil(at, "the stop sequence was not generated")
    for j = at + 1, #r1 do assert.are.equal(11, r1[j]) end
    for j = 1, at do assert.are.equal(row1[j], r1[j]) end
    -- a single-token stop that both rows emit first ends generation at once
    local both = generate.generate(m, p, { max_new_tokens = 8, stop = { { g[1][3]:item() }, { g[2][3]:item() } } })
    assert.are.same({ 2, 3 }, both.shape)
  end)

  it("max_time stops after the step that passes it (a counted clock)", function()
    local real = ember.clock
    local t = 0
    ember.clock = function() t = t + 1 return t end -- each call one second later
    local ok, a = pcall(generate.generate, m, prompt(1, 2), { max_new_tokens = 10, max_time = 2.5 })
    t = 0
    local ok0, b = pcall(generate.generate, m, prompt(1, 2), { max_new_tokens = 10, max_time = 0 })
    ember.clock = real
    assert(ok, a)
    assert(ok0, b)
    -- the start reads 1; the steps read 2, 3, 4: elapsed 1, 2, 3 -> three tokens
    assert.are.same({ 1, 5 }, a.shape)
    assert.are.same({ 1, 3 }, b.shape) -- max_time = 0: one token
    assert.are.same({ 1, 12 }, generate.generate(m, prompt(1, 2), { max_new_tokens = 10, max_time = 1e9 }).shape)
  end)
end)

describe("a batch of left-padded prompts", function()
  -- RoPE and no absolute positions: a row's attention depends only on
  -- relative positions, so a left-padded row equals the row alone
  for _, use_cache in ipairs { true, false } do
    it("gives each row what it gives alone (use_cache = " .. tostring(use_cache) .. ")", function()
      ember.manual_seed(31)
      local m = TinyLM { cross = false, rope = true, positions = "none", layers = 2 }
      local long = prompt(1, 5)
      local short = prompt(1, 2)
      local PAD = 1
      local batch = ember.cat({ long, ember.cat({ ember.full({ 1, 3 }, PAD, { dtype = "int64" }), short }, 2) }, 1)
      local mask = ember.tensor({ { false, false, false, false, false }, { true, true, true, false, false } })
      local o = { max_new_tokens = 7, use_cache = use_cache, return_logits = true }
      local _, la = generate.generate(m, long, o)
      local _, lb = generate.generate(m, short, o)
      o.prompt_padding_mask = mask
      local ids, lab = generate.generate(m, batch, o)
      assert.are.same({ 2, 12 }, ids.shape)
      for i = 1, 7 do
        local d1 = (lab[i]:narrow(1, 1, 1) - la[i]):abs():max():item()
        local d2 = (lab[i]:narrow(1, 2, 1) - lb[i]):abs():max():item()
        assert(d1 < 1e-10 and d2 < 1e-10, ("step %d: rows differ from their runs alone by %.3g, %.3g"):format(i, d1, d2))
      end
      if use_cache then
        -- the cache kept the prompt's padding: [B, positions so far]
        local pad = m.last_cache[1].self.pad
        assert.are.same({ 2, 11 }, pad.shape)
        assert.is_true(pad:narrow(2, 1, 3)[2]:all():item())
        assert.is_false(pad:narrow(2, 4, 8):any():item())
      end
      -- without the mask the padding changes the short row
      o.prompt_padding_mask = nil
      local _, lu = generate.generate(m, batch, o)
      assert.is_true((lu[1]:narrow(1, 2, 1) - lb[1]):abs():max():item() > 1e-6)
    end)
  end
end)
