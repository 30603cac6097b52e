--- ember.generate: autoregressive decoding -- greedy, temperature and top-k
-- sampling -- with an optional key/value cache.
--
--   local ids = generate.generate(model, prompt, {max_new_tokens=50,
--       strategy="greedy"|"sample", temperature=1, top_k=nil, eos_id=nil,
--       memory=nil, memory_key_padding_mask=nil, use_cache=true,
--       return_logits=false})
--
-- The model is any object with
--   model:decode(ids [B, L] int64, {cache=, start=, memory=, memory_key_padding_mask=})
--     -> logits [B, L, V]
-- where `start` is the 1-based position of ids[:, 1] in the sequence and
-- `cache` (a table, empty at the first call, or nil) is handed to the
-- decoder layers (TransformerDecoderLayer's forward{cache=}; one sub-table
-- per layer: cache[i]). With a cache the first call sees the whole prompt
-- and every later call only the new token, so a step costs O(L): its
-- self-attention keys/values are appended, and cross-attention keys/values
-- of the memory are computed on the first call only. Without it each step
-- recomputes the whole prefix (O(L^2)); both give the same logits.
--
-- Sampling draws from ember's seeded generator (ember.manual_seed).
-- Returns the ids [B, L0 + n] (prompt included) and, with return_logits,
-- the list of each step's next-token logits [B, V].
-- @module generate
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"

local generate = {}

-- The id of one row's sample from probabilities (a Lua list), with top-k.
local function sample_row(probs, top_k, u)
  local idx = {}
  for i = 1, #probs do idx[i] = i end
  if top_k and top_k < #probs then
    table.sort(idx, function(a, b)
      if probs[a] ~= probs[b] then return probs[a] > probs[b] end
      return a < b
    end)
    for i = #idx, top_k + 1, -1 do idx[i] = nil end
  end
  local total = 0
  for _, i in ipairs(idx) do total = total + probs[i] end
  local acc, target = 0, u * total
  for _, i in ipairs(idx) do
    acc = acc + probs[i]
    if target < acc then return i end
  end
  return idx[#idx]
end

--- Next ids [B, 1] from logits [B, V].
function generate.pick(logits, opts)
  opts = opts or {}
  local strategy = opts.strategy or "greedy"
  if strategy == "greedy" then return logits:argmax(-1, true) end
  if strategy ~= "sample" then
    error("generate: strategy must be \"greedy\" or \"sample\", got " .. tostring(strategy), 2)
  end
  local t = opts.temperature or 1
  if type(t) ~= "number" or t <= 0 then error("generate: temperature must be > 0, got " .. tostring(t), 2) end
  local k = opts.top_k
  if k ~= nil and (math.type(k) ~= "integer" or k < 1) then
    error("generate: top_k must be a positive integer, got " .. tostring(k), 2)
  end
  local probs = (logits:double() / t):softmax(-1):totable()
  local u = ember.rand(#probs, { dtype = "float64" }):totable()
  local ids = {}
  for b, row in ipairs(probs) do ids[b] = { sample_row(row, k, u[b]) } end
  return ember.tensor(ids, { dtype = "int64", device = logits.device })
end

--- Decodes up to opts.max_new_tokens tokens after prompt (int64 [B, L], 1-based ids).
-- @param model an object with `model:decode(ids, {cache=, start=, memory=, memory_key_padding_mask=})` -> logits [B, L, V]
-- @tparam Tensor prompt int64 [B, L]
-- @param[opt] opts `{max_new_tokens=, strategy="greedy"|"sample", temperature=1, top_k=, eos_id=, memory=, memory_key_padding_mask=, use_cache=true, return_logits=false}`
-- @return ids int64 [B, L + n] (and the logits with return_logits)
function generate.generate(model, prompt, opts)
  opts = opts or {}
  if type(model) ~= "table" and type(model) ~= "userdata" or not model.decode then
    error("generate: the model needs a decode(ids, opts) method", 2)
  end
  if prompt.dtype ~= "int64" or prompt.ndim ~= 2 then
    error(("generate: prompt must be int64 [B, L], got %s [%s]"):format(prompt.dtype,
      table.concat(prompt.shape, ", ")), 2)
  end
  local n = opts.max_new_tokens or 32
  local use_cache = opts.use_cache ~= false
  local was_training = model.training
  if model.eval then model:eval() end
  local ids, all_logits, done = prompt, {}, nil
  local cache = use_cache and {} or nil
  ember.no_grad(function()
    local input, start = prompt, 1
    for _ = 1, n do
      local logits = model:decode(input, {
        cache = cache, start = start, memory = opts.memory,
        memory_key_padding_mask = opts.memory_key_padding_mask,
      })
      local last = logits:select(2, logits.shape[2])
      if opts.return_logits then all_logits[#all_logits + 1] = last end
      local nxt = generate.pick(last, opts)
      if opts.eos_id then
        -- rows that already ended keep emitting eos
        if done then nxt = nxt:masked_fill(done, opts.eos_id) end
        local now = nxt:eq(opts.eos_id)
        done = done and done:logical_or(now) or now
      end
      ids = ember.cat({ ids, nxt }, 2)
      if done and done:long():sum():item() == done:numel() then break end
      if use_cache then
        start = ids.shape[2]
        input = nxt
      else
        input = ids
      end
    end
  end)
  if was_training and model.train then model:train() end
  if opts.return_logits then return ids, all_logits end
  return ids
end

-- C errors (unreadable files, bad tensors) name the user's line, not this file's.
for k, f in pairs(generate) do
  if type(f) == "function" then generate[k] = require("ember._errors").wrap(f) end
end

return generate
