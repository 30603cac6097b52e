--- ember.generate: autoregressive decoding -- greedy, temperature, top-k and
-- top-p (nucleus) sampling, repetition penalty, stop sequences, a time limit,
-- batches of left-padded prompts and several samples per prompt
-- (num_return_sequences) -- with an optional key/value cache.
--
--   local generate = require "ember.generate"
--   local model = require("ember.models").Llama{vocab_size = 50, hidden_size = 16, intermediate_size = 32,
--                                                num_hidden_layers = 1, num_attention_heads = 2}
--   local prompt = ember.tensor({{5, 9, 2}}, {dtype = "int64"})       -- [B, L0] token ids
--   local ids = generate.generate(model, prompt, {max_new_tokens = 4})   -- greedy
--   print(ids.shape)                                                  --> ember.Size{1, 7}
--   local sampled, logits = generate.generate(model, prompt, {max_new_tokens = 4, strategy = "sample",
--       temperature = 0.8, top_k = 10, top_p = 0.9, return_logits = true})
--   print(#logits, logits[1].shape)                                   --> 4 ember.Size{1, 50}
--   print(pcall(generate.generate, model, prompt, {top_q = 0.9}))     --> false ...unknown option 'top_q'...
--
-- generate.generate's doc (below) lists the options and their defaults. An
-- option generate does not know is an error that lists the known ones.
--
-- The model is any object with
--   model:decode(ids [B, L] int64, {cache=, start=, memory=, memory_key_padding_mask=,
--                key_padding_mask=}) -> logits [B, L, V]
-- where `start` is the 1-based position of ids[:, 1] in the sequence and
-- `cache` (a table, empty at the first call, or nil) is handed to the
-- decoder layers (TransformerDecoderLayer's forward{cache=}; one sub-table
-- per layer: cache[i]). With a cache the first call sees the whole prompt
-- and every later call only the new token, so a step costs O(L): its
-- self-attention keys/values are written into the cache in place, and
-- cross-attention keys/values of the memory are computed on the first call
-- only. Without it each step recomputes the whole prefix (O(L^2)); both give
-- the same logits. A model whose decode leaves the cache table untouched
-- (it ignores it) is given the whole sequence at every step, as without one;
-- so is a model with no decode, called as model(ids) (a forward(ids) ->
-- logits [B, L, V], e.g. an nn.Sequential; it takes no padding mask or memory).
--
-- The prompt may also be one sequence, int64 [L] or a Lua list of ids: the
-- ids come back as [L + n] (and each step's logits as [V]).
--
-- A batch of prompts of different lengths is left-padded, with
-- prompt_padding_mask (bool [B, L], true = padding; padding after a token
-- is an error, since a row continues from its last position). Without it,
-- as Hugging Face infers the attention mask, a given pad_id (not an eos id)
-- found at the start of rows is taken as their left padding. decode gets it as
-- key_padding_mask: with a cache on the first call only (the layers keep it
-- in the cache, see MultiHeadAttention.forward_cached), without one over
-- every position so far. Positions count from the padded start, so a row's
-- result equals its run alone where positions are relative (RoPE).
--
-- In bfloat16: call it inside one ember.autocast("bfloat16") region (and
-- ember.no_grad). The products then run in bfloat16 with each weight cast
-- once for the whole region (autocast's cast cache), and the cache holds K
-- and V in bfloat16, half the bytes a step reads; on the 4-layer d256
-- decoder of scripts/bench/kv_decode.lua (--bf16) a step at 2048 cached
-- positions took about 0.7-0.8 ms against 1.0-2.0 in float32. A region per
-- step would cast every weight again at every step.
--
-- Sampling draws from ember's seeded generator (ember.manual_seed), or from
-- opts.generator (an ember.Generator, leaving the global one as it is).
-- Returns the ids [B, L0 + n] (prompt included; B * num_return_sequences rows) and, with return_logits,
-- the list of each step's next-token logits [B, V] (before the penalty).
-- @module generate
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"

local generate = {}

-- The new positions generate's KV cache allocates at once (see generate.generate).
local RESERVE_NEW = 2048

-- The options of pick, and those of generate (pick's among them).
local PICK_OPTS = { "strategy", "temperature", "top_k", "top_p", "generator" }
local GEN_OPTS = { "max_new_tokens", "min_new_tokens", "strategy", "temperature", "top_k", "top_p", "repetition_penalty", "eos_id",
                   "stop", "pad_id", "max_time", "prompt_padding_mask", "memory", "memory_key_padding_mask",
                   "use_cache", "return_logits", "variant_inputs", "num_return_sequences", "generator" }

-- Hugging Face's names for generate's options: an unknown option that is
-- one says what to write instead.
local HF_NAMES = {
  do_sample = 'strategy = "sample"',
  attention_mask = "prompt_padding_mask = attention_mask:eq(0) (bool, true = padding; left-padded prompts)",
  eos_token_id = "eos_id", pad_token_id = "pad_id", stop_strings = "stop (token id sequences)",
  max_length = "max_new_tokens (the prompt not counted)", min_length = "min_new_tokens (the prompt not counted)",
}

-- Hugging Face's options that generate has no counterpart of
local HF_MISSING = {
  num_beams = "ember's generate has no beam search (greedy or sampling)",
  num_beam_groups = "ember's generate has no beam search (greedy or sampling)",
  no_repeat_ngram_size = "ember's generate has no n-gram blocking (repetition_penalty discourages repeats)",
  min_p = "ember's generate has no min-p filter (top_k and top_p filter)",
  typical_p = "ember's generate has no typical filter (top_k and top_p filter)",
  output_scores = "return_logits = true returns each step's logits (before the repetition penalty)",
  return_dict_in_generate = "generate returns the ids, and the logits with return_logits = true",
}

-- ... and what more to say about one
local HF_NOTES = { do_sample = ' (do_sample = false is "greedy", the default)' }

local function check_names(opts, known, who)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(("%s: options must be a table, got %s"):format(who, type(opts))) end
  local set = {}
  for _, k in ipairs(known) do set[k] = true end
  for k in pairs(opts) do
    if not set[k] then
      local names = { table.unpack(known) }
      table.sort(names)
      local hint = HF_NAMES[k] and set[HF_NAMES[k]:match("^[%w_]+")] and ("; Hugging Face's %s is %s here%s"):format(k,
        HF_NAMES[k], HF_NOTES[k] or "") or HF_MISSING[k] and set.max_new_tokens and ("; Hugging Face's %s: %s"):format(k,
        HF_MISSING[k]) or ""
      error(("%s: unknown option '%s'%s (options: %s)"):format(who, tostring(k), hint, table.concat(names, ", ")))
    end
  end
  return opts
end

-- The position of one row's sample among its first n probabilities (a Lua
-- list, most likely first when top_p is given; `total`, when given, is the
-- whole row's sum, of which these are the most likely), with top-p: the
-- smallest set of most likely tokens whose probability reaches top_p (the
-- first token past it included), as Hugging Face.
local function sample_row(probs, n, top_p, u, total)
  if not total then
    total = 0
    for i = 1, n do total = total + probs[i] end
  end
  if not (total > 0) then return nil end -- every logit -inf (or NaN): nothing to draw
  if top_p then
    local acc, keep = 0, 0
    for i = 1, n do
      if acc >= top_p * total and keep > 0 then break end -- (top_p = 0: the most likely token alone)
      acc, keep = acc + probs[i], i
    end
    n, total = keep, acc
  end
  local acc, target, last = 0, u * total, nil
  for i = 1, n do
    acc = acc + probs[i]
    if target < acc then return i end
    if probs[i] > 0 then last = i end
  end
  return last -- (u * total rounded up to the sum: the last token that can be drawn)
end

-- Plain sampling reads a row in blocks of this many ids.
local BLOCK = 1024

-- Per row [B, 1], a probability that every token top-k / top-p can keep
-- reaches, so that only those are sorted (ember's sort of a 128k
-- vocabulary costs ~15 ms a row); nil: sort them all.
local function keep_bound(probs, k, p)
  if k then
    -- below the k-th largest: the first of max, max / 16, max / 256, ... that k tokens reach
    local t = probs:amax(2, true)
    for _ = 1, 16 do
      local enough = probs:ge(t):sum(2, true):ge(k)
      if enough:all():item() then return t end
      t = ember.where(enough, t, t / 16)
    end
    return nil
  end
  -- a token the nucleus keeps has less than top_p before it, so it and the
  -- tokens after it (at most V, none more likely) hold over 1 - top_p of the
  -- total: it is more likely than (1 - top_p) / V of it (halved: a margin for rounding)
  return probs:sum(2, true) * ((1 - p) / probs.shape[2] / 2)
end

local function check_values(opts)
  local strategy = opts.strategy or "greedy"
  if strategy ~= "greedy" and strategy ~= "sample" then
    error("generate: strategy must be \"greedy\" or \"sample\", got " .. tostring(strategy))
  end
  local t = opts.temperature or 1
  -- greedy ignores it, and takes 0 as Hugging Face does (with do_sample=False)
  if type(t) ~= "number" or t < 0 or (t == 0 and strategy == "sample") or t ~= t then
    error(("generate: temperature must be > 0 when sampling, got %s (for greedy decoding: strategy = \"greedy\")")
      :format(tostring(t)))
  end
  local k = opts.top_k
  if k ~= nil and (math.type(k) ~= "integer" or k < 0) then
    error("generate: top_k must be an integer >= 0 (0: no top-k filtering), got " .. tostring(k))
  end
  if k == 0 then k = nil end -- Hugging Face's top_k=0: no filtering
  local p = opts.top_p
  -- Hugging Face's TopPLogitsWarper takes 0 too: it keeps its min_tokens_to_keep = 1, the most likely token
  if p ~= nil and (type(p) ~= "number" or not (p >= 0 and p <= 1)) then
    error("generate: top_p must be a number in [0, 1] (0: only the most likely token), got " .. tostring(p))
  end
  if p == 1 then p = nil end -- Hugging Face's top_p = 1: no filtering (the draws of plain sampling)
  local g = opts.generator
  if g ~= nil and getmetatable(g) ~= getmetatable(ember.default_generator) then
    error("generate: generator must be an ember.Generator (ember.Generator():manual_seed(n)), got "
      .. (ember.is_tensor(g) and "a tensor" or type(g)))
  end
  return strategy, t, k, p
end

local function no_token(b)
  error(("generate: row %d has no token to sample: its logits are all -inf or NaN"):format(b))
end

-- Plain sampling, in id order: the block of BLOCK ids that u * total falls
-- in (from the blocks' sums), then the id within it. (A Lua pass over every
-- row's probabilities took ~130 ms at B = 32 and a 128k vocabulary.)
local function sample_in_order(probs, u)
  local B, V = probs.shape[1], probs.shape[2]
  local ids = {}
  if V <= BLOCK then -- one block: the rows as Lua lists at once
    for b, row in ipairs(probs:totable()) do
      ids[b] = { sample_row(row, V, nil, u[b]) }
      if not ids[b][1] then no_token(b) end
    end
    return ids
  end
  local nb = (V + BLOCK - 1) // BLOCK
  local padded = probs
  if nb * BLOCK > V then
    padded = ember.cat({ probs, ember.zeros({ B, nb * BLOCK - V }, { dtype = "float64", device = probs.device }) }, 2)
  end
  local sums = padded:view(B, nb, BLOCK):sum(3):totable()
  for b = 1, B do
    local blk, before, total = sample_row(sums[b], nb, nil, u[b]), 0, 0
    if not blk then no_token(b) end
    for j = 1, nb do
      if j == blk then before = total end
      total = total + sums[b][j]
    end
    local first = (blk - 1) * BLOCK
    local vals = probs[b]:narrow(1, first + 1, math.min(BLOCK, V - first)):totable()
    -- the draw within the block, from what is left of u * total after the blocks before it
    ids[b] = { first + sample_row(vals, #vals, nil, (u[b] * total - before) / sums[b][blk], sums[b][blk]) }
  end
  return ids
end

-- Top-k / top-p sampling: each row's candidates (keep_bound), most likely
-- first; ember's sort is stable: equal probabilities keep the lower id first.
local function sample_sorted(probs, u, k, p)
  local B, V = probs.shape[1], probs.shape[2]
  -- (a small vocabulary is sorted whole, all rows at once: cheaper than a row at a time)
  local bound = V > BLOCK and keep_bound(probs, k, p)
  local totals = not k and probs:sum(2):totable() -- top-p alone: of the whole row
  local all_ids = bound and ember.arange(1, V + 1, { dtype = "int64", device = probs.device })
  local all_sorted, all_order
  if not bound then
    all_sorted, all_order = probs:sort(2, true)
    all_sorted, all_order = all_sorted:totable(), all_order:totable()
  end
  local ids = {}
  for b = 1, B do
    local sorted, order = all_sorted and all_sorted[b], all_order and all_order[b]
    if bound then
      local m = probs[b]:ge(bound[b])
      local id_of = all_ids:masked_select(m):totable()
      sorted, order = probs[b]:masked_select(m):sort(1, true)
      sorted, order = sorted:totable(), order:totable()
      for i, j in ipairs(order) do order[i] = id_of[j] end -- positions among the candidates -> ids
    end
    local n = #sorted
    if k then
      -- as Hugging Face's top-k: every token as likely as the k-th is kept
      n = math.min(k, n)
      while n < #sorted and sorted[n + 1] == sorted[k] do n = n + 1 end
    end
    local at = sample_row(sorted, n, p, u[b], totals and totals[b])
    if not at then no_token(b) end
    ids[b] = { order[at] }
  end
  return ids
end

local function pick(logits, opts)
  local strategy, t, k, p = check_values(opts)
  if strategy == "greedy" then return logits:argmax(-1, true) end
  local probs = (logits:double() / t):softmax(-1)
  local B, V = probs.shape[1], probs.shape[2]
  if k and k >= V then k = nil end
  local u = ember.rand(B, { dtype = "float64", generator = opts.generator }):totable()
  local ids = (k or p) and sample_sorted(probs, u, k, p) or sample_in_order(probs, u)
  return ember.tensor(ids, { dtype = "int64", device = logits.device })
end

--- Next ids [B, 1] from logits [B, V].
-- @tparam Tensor logits [B, V]
-- @tparam[opt] table opts `strategy` ("greedy" or "sample"), `temperature`
-- (1), `top_k` (0: none, as Hugging Face's; tokens as likely as the k-th
-- are kept too), `top_p` (nucleus: sample among the most likely tokens
-- whose probabilities sum to top_p; 0 keeps the most likely one alone, as Hugging Face's)
-- @treturn Tensor int64 [B, 1], 1-based ids
function generate.pick(logits, opts)
  opts = check_names(opts, PICK_OPTS, "generate.pick")
  if not (ember.is_tensor(logits) and logits.ndim == 2 and ember.dtype_info(logits.dtype).floating) then
    error(("generate.pick: logits must be a float tensor [B, V] (one row per sequence; logits:unsqueeze(1) for one "
      .. "[V]), got %s"):format(ember.is_tensor(logits) and ("%s [%s]"):format(logits.dtype,
        table.concat(logits.shape, ", ")) or type(logits)))
  end
  return pick(logits, opts)
end

-- Hugging Face's repetition penalty: the logit of every token already in a
-- row (prompt included) is divided by `penalty` where positive and
-- multiplied by it where negative. counts [B, V]: how often each row holds
-- each id. (In tensors: a Lua loop over the rows' logits took ~0.1 s a step
-- at B = 32 and a 128k vocabulary.)
local function penalize(logits, counts, penalty)
  return ember.where(counts:gt(0), ember.where(logits:lt(0), logits * penalty, logits / penalty), logits)
end

-- A value as an error message shows it: a string quoted, a list of
-- numbers as {a, b}, another table as what it is.
local function shown(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if ember.is_tensor(v) then return ("a %s tensor [%s]"):format(v.dtype, table.concat(v.shape, ", ")) end
  if type(v) == "table" then
    if next(v) == nil then return "an empty table" end
    local items = {}
    for i, x in ipairs(v) do items[i] = type(x) == "number" and tostring(x) or shown(x) end
    if #items > 0 and #items <= 8 then return "{" .. table.concat(items, ", ") .. "}" end
    return "a table"
  end
  return tostring(v)
end

-- Checks the stop sequences: a list of non-empty lists of ids.
local function check_stop(stop)
  if stop == nil then return nil end
  if type(stop) == "table" then -- a sequence may be an int64 tensor [n] (a tokenizer's ids)
    local lists = {}
    for i, s in ipairs(stop) do
      lists[i] = ember.is_tensor(s) and s.ndim == 1 and s.dtype == "int64" and s:totable() or s
    end
    stop = lists
  end
  local ok = type(stop) == "table" and #stop > 0
  for _, s in ipairs(ok and stop or {}) do
    ok = ok and type(s) == "table" and #s > 0
    for _, id in ipairs(type(s) == "table" and s or {}) do ok = ok and math.type(id) == "integer" end
  end
  for i, s in ipairs(ok and stop or {}) do
    for _, id in ipairs(s) do
      if id < 1 then
        error(("generate: stop sequence %d holds the id %d: token ids are 1-based (Hugging Face's id + 1)"):format(i, id))
      end
    end
  end
  if not ok then
    local flat, text = type(stop) == "table" and #stop > 0, type(stop) == "string"
    for _, id in ipairs(flat and stop or {}) do
      flat = flat and math.type(id) == "integer"
      text = text or type(id) == "string"
    end
    local got = tostring(stop)
    if flat then
      got = ("a list of ids {%s} (one sequence is {{%s}}; each id alone: {{%s}})"):format(table.concat(stop, ", "),
        table.concat(stop, ", "), table.concat(stop, "}, {"))
    elseif text then -- Hugging Face's stop_strings
      got = "text: stop takes token ids (a tokenizer's encode of each string, e.g. {tok:encode(\"\\n\\n\")})"
    elseif type(stop) == "table" then
      got = "a table that is not a list of non-empty lists of integer ids"
    end
    error("generate: stop must be a list of token id sequences, e.g. {{5}, {7, 8}}, got " .. got)
  end
  return stop
end

-- Does row `ids` (a list: the prompt's tokens, then the ids generated so
-- far) end with a stop sequence?
local function ends_with_stop(gen, stop)
  for _, s in ipairs(stop) do
    local n = #s
    if #gen >= n then
      local hit = true
      for i = 1, n do
        if gen[#gen - n + i] ~= s[i] then hit = false break end
      end
      if hit then return true end
    end
  end
  return false
end

local function check_generate(model, prompt, opts)
  if type(model) ~= "table" and type(model) ~= "userdata" or not (model.decode or type(model.forward) == "function") then
    -- (a forward(ids) -> logits [B, L, V] alone does too: see the module's doc)
    error(("generate: the model needs a decode(ids, opts) method (or a forward(ids) -> logits [B, L, V]), got %s")
      :format(ember.is_tensor(model) and "a tensor (generate(model, prompt, opts): the model comes first)"
        or type(model) == "table" and "a table without them" or type(model)))
  end
  if not model.decode then
    -- forward(ids) alone: no cache, and nothing but the ids reaches it
    for _, k in ipairs { "prompt_padding_mask", "memory", "memory_key_padding_mask", "variant_inputs" } do
      if opts[k] ~= nil then
        error(("generate: %s needs a model with a decode(ids, {key_padding_mask=, memory=, ...}) method: this "
          .. "model has only forward(ids), which takes none (see ember.generate's doc)"):format(k))
      end
    end
  end
  if not ember.is_tensor(prompt) or prompt.dtype ~= "int64" or prompt.ndim ~= 2 then
    error(("generate: prompt must be int64 [B, L], got %s%s"):format(ember.is_tensor(prompt) and
      ("%s [%s]"):format(prompt.dtype, table.concat(prompt.shape, ", ")) or type(prompt),
      -- a tokenizer's output as Hugging Face's model.generate(**inputs) takes it
      type(prompt) == "table" and prompt.input_ids ~= nil and " (a tokenizer's output? give its input_ids, and "
        .. "prompt_padding_mask = attention_mask:eq(0) for a left-padded batch)" or ""))
  end
  if prompt.shape[2] == 0 then
    error(("generate: prompt must hold at least one token per row (a BOS id), got int64 [%d, 0]"):format(prompt.shape[1]))
  end
  check_values(opts)
  local rp = opts.repetition_penalty
  if rp ~= nil and (type(rp) ~= "number" or rp <= 0) then
    error("generate: repetition_penalty must be a number > 0 (1 = none), got " .. tostring(rp))
  end
  for _, k in ipairs { "max_new_tokens", "min_new_tokens" } do
    local n = opts[k]
    if n ~= nil and (math.type(n) ~= "integer" or n < 0) then
      error(("generate: %s must be an integer >= 0, got %s"):format(k, tostring(n)))
    end
  end
  -- eos_id: one id or a list of them (as Hugging Face's eos_token_id); ids are 1-based
  local function id_ok(x) return math.type(x) == "integer" and x >= 1 end
  local eos = opts.eos_id
  local eos_ok = id_ok(eos) or (type(eos) == "table" and #eos > 0)
  for _, x in ipairs(type(eos) == "table" and eos or {}) do eos_ok = eos_ok and id_ok(x) end
  if eos ~= nil and not eos_ok then
    error("generate: eos_id must be a token id (an integer >= 1: ids are 1-based) or a list of them, got " ..
      shown(eos))
  end
  if opts.pad_id ~= nil and not id_ok(opts.pad_id) then
    error("generate: pad_id must be a token id (an integer >= 1: ids are 1-based), got " .. shown(opts.pad_id))
  end
  local mt = opts.max_time
  if mt ~= nil and (type(mt) ~= "number" or mt < 0) then
    error("generate: max_time must be a number of seconds >= 0, got " .. shown(mt))
  end
  local nrs = opts.num_return_sequences
  if nrs ~= nil and (math.type(nrs) ~= "integer" or nrs < 1) then
    error("generate: num_return_sequences must be an integer >= 1, got " .. tostring(nrs))
  end
  if nrs and nrs > 1 and (opts.strategy or "greedy") == "greedy" then
    error(("generate: num_return_sequences = %d needs strategy = \"sample\": greedy decoding gives every copy the "
      .. "same tokens (Hugging Face refuses it too)"):format(nrs))
  end
  local vi = opts.variant_inputs
  if nrs and nrs > 1 and vi ~= nil then
    error("generate: num_return_sequences with variant_inputs: repeat the prompt's rows (prompt:repeat_interleave(n, 1)) "
      .. "and the variant's per-row tensors yourself")
  end
  if vi ~= nil and type(vi) ~= "table" and type(vi) ~= "function" then
    error("generate: variant_inputs must be a table {name = tensor} or a function(start, L) returning one, got " .. type(vi))
  end
  local pm = opts.prompt_padding_mask
  if pm ~= nil and not (ember.is_tensor(pm) and pm.dtype == "bool" and pm.ndim == 2
      and pm.shape[1] == prompt.shape[1] and pm.shape[2] == prompt.shape[2]) then
    error(("generate: prompt_padding_mask must be a bool tensor [B=%d, L=%d] (true = padding), got %s")
      :format(prompt.shape[1], prompt.shape[2], ember.is_tensor(pm) and
        ("%s [%s]"):format(pm.dtype, table.concat(pm.shape, ", ")) or type(pm)))
  end
  -- each row continues from its last position: padding after a token would
  -- put the pads between the prompt and its continuation
  for b, row in ipairs(pm and pm:totable() or {}) do
    local seen_token = false
    for j, pad in ipairs(row) do
      if not pad then
        seen_token = true
      elseif seen_token then
        error(("generate: prompt_padding_mask row %d has padding after a token (position %d): pad prompts on the "
          .. "left (Hugging Face's padding_side = \"left\": tok:encode_batch(texts, {padding_side = \"left\"}) or "
          .. "ember.data.pad(lists, pad_id, {side = \"left\"})); a row continues from its last position%s"):format(b, j,
          row[1] and "" or "; true = padding: from Hugging Face's attention_mask (1 = token) it is attention_mask:eq(0)"))
      end
    end
    -- (Hugging Face's attention_mask taken as it is marks every token of an unpadded row)
    if not seen_token then
      error(("generate: prompt_padding_mask row %d is all padding: a row needs at least one token (true = padding: "
        .. "from Hugging Face's attention_mask, 1 = token, it is attention_mask:eq(0))"):format(b))
    end
  end
  return check_stop(opts.stop)
end

-- Hugging Face's _prepare_attention_mask_for_generation: without a mask, a
-- prompt holding the given pad_id (not an eos id) is padded there. Taken
-- only where that is a left padding leaving a token in every row (else the
-- ids are the prompt's own, as before).
local function infer_padding(prompt, opts)
  local pad = opts.pad_id
  if opts.prompt_padding_mask ~= nil or math.type(pad) ~= "integer" then return opts end
  local eos = type(opts.eos_id) == "table" and opts.eos_id or { opts.eos_id }
  for _, e in ipairs(eos) do if e == pad then return opts end end
  local mask = prompt:eq(pad)
  if not mask:any():item() then return opts end
  for _, row in ipairs(mask:totable()) do
    local seen_token = false
    for _, is_pad in ipairs(row) do
      if not is_pad then seen_token = true elseif seen_token then return opts end
    end
    if not seen_token then return opts end
  end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.prompt_padding_mask = mask
  return o
end

-- One prompt given as a Lua list of ids, or as int64 [L] (unbatched, as
-- PyTorch's modules take one sequence): the batch of one it stands for, its
-- per-row options with it, and whether it was unbatched.
local function batched(prompt, opts)
  if type(prompt) == "table" and #prompt > 0 then -- a Lua list of ids, or of rows of ids
    local ok, t = pcall(ember.tensor, prompt, { dtype = "int64" })
    if ok then prompt = t end
  end
  if not (ember.is_tensor(prompt) and prompt.ndim == 1 and prompt.dtype == "int64") then return prompt, opts, false end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  for k, nd in pairs { prompt_padding_mask = 1, memory_key_padding_mask = 1, memory = 2 } do
    if ember.is_tensor(o[k]) and o[k].ndim == nd then o[k] = o[k]:unsqueeze(1) end
  end
  return prompt:unsqueeze(1), o, true
end

-- The training flag of the model and of each of its modules, and a
-- function that puts them back (a part the user keeps in eval mode stays so).
local function save_modes(model)
  local saved = { { model, model.training } }
  if type(model.modules) == "function" then
    local ok, list = pcall(model.modules, model)
    for _, m in ipairs(ok and type(list) == "table" and list or {}) do saved[#saved + 1] = { m, m.training } end
  end
  return function()
    if saved[1][2] and model.train then model:train() end
    for _, s in ipairs(saved) do
      if type(s[2]) == "boolean" and s[1].training ~= s[2] then s[1].training = s[2] end
    end
  end
end

--- Decodes up to opts.max_new_tokens tokens after prompt (int64 [B, L], 1-based ids).
-- @param model an object with `model:decode(ids, {cache=, start=, memory=, memory_key_padding_mask=, key_padding_mask=, variant_inputs=})` -> logits [B, L, V]
-- (only the last position is read; other shapes, NaN logits, and a sampled row whose logits are all -inf are errors),
-- or a model with no decode, called as model(ids) -> logits [B, L, V] on the whole sequence (no cache)
-- @tparam Tensor prompt int64 [B, L], or one prompt [L] (or a Lua list of ids)
-- @param[opt] opts `max_new_tokens` (32), `min_new_tokens` (0: the eos ids
-- cannot be picked before that many new tokens, as Hugging Face's), `strategy` ("greedy" or "sample"),
-- `temperature` (1), `top_k` (0: none, where Hugging Face's generation config defaults to 50, so pass
-- top_k = 50 to sample as its do_sample = true; tokens as likely as the k-th are kept too, as Hugging Face's),
-- `top_p` (nucleus sampling, in [0, 1]: 0 keeps only the most likely token, as Hugging Face's), `repetition_penalty`
-- (as Hugging Face's: > 1 makes tokens already in the row less likely; a left padding's ids are not
-- counted, so a row of a batch is penalized as alone, where Hugging Face's counts the pad id too),
-- `eos_id` (a row that emits it is done; a list of ids, any of them), `stop` (token id sequences, e.g.
-- `{{5}, {7, 8}}`, each a list or an int64 tensor [n]: a row whose ids end with one after a new token
-- is done; as Hugging Face's stop_strings a sequence may begin in the prompt), `pad_id`
-- (what done rows emit; default eos_id (the first), else 1; given and not an eos id, it marks the left
-- padding of a prompt given without prompt_padding_mask, as Hugging Face infers the mask), `max_time` (seconds: no new
-- step starts after it), `prompt_padding_mask` (bool [B, L], true = padding,
-- for left-padded prompts), `memory`, `memory_key_padding_mask`, `use_cache`
-- (true), `return_logits` (false), `variant_inputs` (the per-call tensors
-- of the model's attention variant written in Lua, handed to every decode
-- call: a table, e.g. `{prefix = n}` for "prefix_lm", or a function(start,
-- L) returning the table for the call whose ids begin at position start
-- and number L), `num_return_sequences` (1: with sampling, n sequences per
-- prompt, each prompt's next to each other, as Hugging Face's), `generator` (an ember.Generator to
-- sample from; default ember.manual_seed's). top_p = 1 and a top_k of at least the vocabulary filter
-- nothing (the draws of plain sampling, as Hugging Face leaves them out). Generation ends when every row is
-- done. The model's training flags (each module's) are put back after generation, which runs in eval mode.
-- @return ids int64 [B * num_return_sequences, L + n] ([L + n] for one prompt [L]) (and the logits with return_logits)
-- @usage local m = require("ember.models").Llama{vocab_size = 50, hidden_size = 16, intermediate_size = 32,
--   num_hidden_layers = 1, num_attention_heads = 2}
-- local prompt = ember.tensor({{5, 9, 2}, {1, 1, 7}}, {dtype = "int64"})   -- row 2 left-padded with id 1
-- ember.manual_seed(0)
-- local ids = require("ember.generate").generate(m, prompt, {max_new_tokens = 5, strategy = "sample",
--   top_p = 0.9, repetition_penalty = 1.2, num_return_sequences = 2, prompt_padding_mask = prompt:eq(1)})
-- print(ids.shape)   --> ember.Size{4, 8}
function generate.generate(model, prompt, opts)
  opts = check_names(opts, GEN_OPTS, "generate")
  local unbatched
  prompt, opts, unbatched = batched(prompt, opts)
  local stop = check_generate(model, prompt, opts)
  opts = infer_padding(prompt, opts)
  if opts.prompt_padding_mask and not model.decode then
    error(("generate: pad_id %d marks the left padding of the prompt, which needs a model with a decode(ids, "
      .. "{key_padding_mask=, ...}) method: this model has only forward(ids), which would attend to the padding")
      :format(opts.pad_id))
  end
  local copies = opts.num_return_sequences or 1
  if copies > 1 then
    -- as Hugging Face: each prompt's copies next to each other (repeat_interleave)
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    for _, k in ipairs { "prompt_padding_mask", "memory", "memory_key_padding_mask" } do
      if ember.is_tensor(o[k]) then o[k] = o[k]:repeat_interleave(copies, 1) end
    end
    opts, prompt = o, prompt:repeat_interleave(copies, 1)
  end
  local n = opts.max_new_tokens or 32
  local use_cache = opts.use_cache ~= false
  local penalty = opts.repetition_penalty
  local eos_ids = type(opts.eos_id) == "table" and opts.eos_id or (opts.eos_id and { opts.eos_id }) or nil
  local pad_id = opts.pad_id or (eos_ids and eos_ids[1]) or 1
  local B = prompt.shape[1]
  local restore_modes = save_modes(model)
  if model.eval then model:eval() end
  -- a model with forward(ids) alone gets the whole sequence at every step
  local decode = model.decode or function(self, ids)
    local mt = getmetatable(self)
    if mt and mt.__call then return self(ids) end -- an nn.Module: its forward hooks run too
    return self:forward(ids)
  end
  local who = model.decode and "model:decode" or "model:forward (the model has no decode)"
  local ids, all_logits, done = prompt, {}, nil
  -- the layers' KV buffers are allocated once for the whole run (nn/_kv_cache.lua),
  -- up to RESERVE_NEW new tokens: past that they double as needed, so a large
  -- max_new_tokens that eos cuts short does not hold its whole cache (a 7B
  -- model's 32768 positions are ~4 GiB in bfloat16), as Hugging Face's growing cache
  local cache = use_cache and { reserve = prompt.shape[2] + math.min(n, RESERVE_NEW) } or nil
  local t_start = ember.clock()
  -- per row, its ids, the padding left out (stop sequences)
  local gen = {}
  for b, row in ipairs(stop and prompt:totable() or {}) do
    gen[b] = {}
    local pads = opts.prompt_padding_mask and opts.prompt_padding_mask[b]:totable()
    for j, id in ipairs(row) do
      if not (pads and pads[j]) then gen[b][#gen[b] + 1] = id end
    end
  end
  local counts -- [B, V]: how often each row holds each id, its padding left out (repetition penalty)
  local pad_mask = opts.prompt_padding_mask
  local ok, err = pcall(ember.no_grad, function()
    local input, start = prompt, 1
    for step = 1, n do
      local vi = opts.variant_inputs
      if type(vi) == "function" then vi = vi(start, input.shape[2]) end
      local logits = decode(model, input, {
        cache = cache, start = start, memory = opts.memory,
        memory_key_padding_mask = opts.memory_key_padding_mask,
        key_padding_mask = (not use_cache or start == 1) and pad_mask or nil,
        variant_inputs = vi,
      })
      -- (only the last position is read: a model may return just that one)
      if not (ember.is_tensor(logits) and logits.ndim == 3 and logits.shape[1] == B and logits.shape[2] >= 1
          and ember.dtype_info(logits.dtype).floating) then
        error(("generate: %s must return float logits [B=%d, L=%d, V], got %s"):format(who, B, input.shape[2],
          ember.is_tensor(logits) and ("%s [%s]"):format(logits.dtype, table.concat(logits.shape, ", ")) or type(logits)))
      end
      if use_cache and start == 1 then
        -- a decode that left the cache untouched ignores it: it would see only
        -- the new token from here on, so the whole sequence goes to it instead
        local used = false
        for key in pairs(cache) do if key ~= "reserve" then used = true end end
        if not used then use_cache, cache = false, nil end
      end
      local last = logits:select(2, logits.shape[2])
      local V = last.shape[2]
      local can_end = stop ~= nil
      for _, e in ipairs(eos_ids or {}) do can_end = can_end or e <= V end
      if step == 1 and can_end and pad_id > V then
        -- a done row emits pad_id, which the next step hands to the model
        error(("generate: pad_id %d%s is past the model's %d logits (the vocabulary): a row that is done emits it, "
          .. "and the next step hands it to the model"):format(pad_id, opts.pad_id and "" or " (the first eos_id)", V))
      end
      if last:isnan():any():item() then
        error(("generate: the model's logits hold NaN at new token %d"):format(ids.shape[2] - prompt.shape[2] + 1))
      end
      if opts.return_logits then all_logits[#all_logits + 1] = last end
      if penalty and penalty ~= 1 then
        if not counts then
          counts = ember.zeros({ B, last.shape[2] }, { dtype = "int64", device = last.device })
          local real = opts.prompt_padding_mask and opts.prompt_padding_mask:logical_not():long()
            or ember.ones(prompt.shape, { dtype = "int64", device = prompt.device })
          counts:scatter_add_(2, prompt, real)
        end
        last = penalize(last, counts, penalty)
      end
      if eos_ids and step <= (opts.min_new_tokens or 0) then
        -- Hugging Face's MinNewTokensLengthLogitsProcessor: no eos yet
        last = last:clone()
        for _, e in ipairs(eos_ids) do
          if e <= last.shape[2] then last:narrow(2, e, 1):fill_(-math.huge) end
        end
      end
      local nxt = pick(last, opts)
      if done then nxt = nxt:masked_fill(done, pad_id) end
      local now
      for _, e in ipairs(eos_ids or {}) do now = now and now:logical_or(nxt:eq(e)) or nxt:eq(e) end
      if counts then counts:scatter_add_(2, nxt, ember.ones({ B, 1 }, { dtype = "int64", device = nxt.device })) end
      if stop then
        local col = nxt:totable()
        local hits = {}
        for b = 1, B do
          gen[b][#gen[b] + 1] = col[b][1]
          hits[b] = { ends_with_stop(gen[b], stop) }
        end
        local s = ember.tensor(hits, { dtype = "bool", device = nxt.device })
        now = now and now:logical_or(s) or s
      end
      if now then done = done and done:logical_or(now) or now end
      ids = ember.cat({ ids, nxt }, 2)
      if pad_mask and not use_cache then pad_mask = ember.cat({ pad_mask, ember.zeros({ B, 1 }, { dtype = "bool", device = pad_mask.device }) }, 2) end
      if done and done:long():sum():item() == done:numel() then break end
      if opts.max_time and ember.clock() - t_start >= opts.max_time then break end
      if use_cache then
        start = ids.shape[2]
        input = nxt
      else
        input = ids
      end
    end
  end)
  -- the model's modes come back on an error too
  restore_modes()
  if not ok then error(err, 0) end
  if unbatched and copies == 1 then -- one prompt [L] in, its ids [L + n] out (and logits [V])
    ids = ids:squeeze(1)
    for i, l in ipairs(all_logits) do all_logits[i] = l:squeeze(1) end
  end
  if opts.return_logits then return ids, all_logits end
  return ids
end

-- C errors (unreadable files, bad tensors) name the user's line, not this file's.
for k, f in pairs(generate) do
  if type(f) == "function" then generate[k] = require("ember._errors").wrap(f) end
end

-- ember.generate(model, prompt, opts) is generate.generate (a user's first
-- guess, as model:generate is for the models that have one)
return setmetatable(generate, { __call = function(_, ...) return generate.generate(...) end })
