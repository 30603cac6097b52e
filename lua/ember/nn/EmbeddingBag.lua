--- nn.EmbeddingBag(num_embeddings, embedding_dim [, {mode="mean", padding_idx=, include_last_offset=false,
-- max_norm=, norm_type=2, scale_grad_by_freq=false, sparse=false, dtype=, device=}]):
-- the sums, means or maxima of bags of embeddings, without making the
-- [bags, length, dim] tensor of nn.Embedding first, as torch.nn.EmbeddingBag.
-- max_norm, norm_type and scale_grad_by_freq (not with mode "max") as nn.Embedding's.
--
-- forward(input [, offsets [, per_sample_weights]]) (or
-- forward(input, {offsets=, per_sample_weights=})) takes 1-based int64 ids:
--
--  * input 1-d [n] with `offsets` (1-d int64, or a Lua list): bag b is input[offsets[b]],
--    ..., input[offsets[b+1] - 1]. Offsets are 1-based positions (ember's
--    rule for indices): the first is 1 where PyTorch's is 0; equal offsets
--    make an empty bag (its output is zeros). With include_last_offset=true
--    the last offset closes the last bag (n + 1 where PyTorch has n), so
--    there are #offsets - 1 bags.
--  * input 2-d [B, L]: each row is a bag of L ids (no offsets).
--
-- mode "sum", "mean" or "max" reduces each bag to one row: the output is
-- [B, embedding_dim]. per_sample_weights (float, input's shape; mode "sum"
-- only, as PyTorch) scales each embedding before the sum. With padding_idx
-- (1-based) that id's row starts at zero and is left out of every bag (not
-- counted by "mean", never the maximum), so it gets no gradient.
-- `weight` [num_embeddings, embedding_dim] ~ N(0, 1), PyTorch's name and
-- initialisation. Composed from core ops (the lookup, a scatter-add per bag
-- for sum/mean; for max the bags gathered into a [B, longest, dim] block
-- padded with -inf): gradients through autograd, for the weight and the
-- per-sample weights.
-- PyTorch's max_norm, scale_grad_by_freq and sparse are not supported (an
-- error names them as unknown options).
-- Errors name nn.EmbeddingBag at the caller's line: bad sizes or options, ids
-- that are not int64 or out of range, offsets that do not start at 1 or go
-- down or past the input, offsets with a 2-d input, per_sample_weights with
-- a mode other than "sum" or of the wrong shape.
-- @usage local bag = nn.EmbeddingBag(100, 8, {mode = "sum"})
-- local ids = ember.tensor({5, 7, 1, 9, 9}, "int64")
-- local offsets = ember.tensor({1, 3}, "int64")                -- bags {5, 7} and {1, 9, 9}
-- print(bag(ids, offsets).shape)                               --> ember.Size{2, 8}
-- print(bag(ember.tensor({{1, 2}, {3, 4}, {5, 6}}, "int64")).shape)   --> ember.Size{3, 8}
-- @classmod nn.EmbeddingBag
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local Embedding = require "ember.nn.Embedding"

local EmbeddingBag = Module:extend("EmbeddingBag")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
EmbeddingBag.SIGNATURE = { sizes = { "num_embeddings", "embedding_dim" },
  options = { "max_norm", "norm_type", "scale_grad_by_freq", "mode", "sparse", "_weight", "include_last_offset", "padding_idx" } }

local MODES = { sum = true, mean = true, max = true }

function EmbeddingBag:__init(num_embeddings, embedding_dim, opts)
  opts = Module.check_options("nn.EmbeddingBag", opts,
    { "mode", "padding_idx", "include_last_offset", "max_norm", "norm_type", "scale_grad_by_freq", "sparse", "dtype",
      "device" })
  -- sizes, padding_idx and weight: nn.Embedding's
  Embedding._init_weight(self, "EmbeddingBag", num_embeddings, embedding_dim, opts)
  local mode = opts.mode or "mean"
  if not MODES[mode] then
    error(("EmbeddingBag: mode must be \"sum\", \"mean\" or \"max\", got %s"):format(tostring(mode)))
  end
  self.mode = mode
  self.include_last_offset = opts.include_last_offset == true
  -- max_norm, norm_type, scale_grad_by_freq as nn.Embedding's (sparse = true refused)
  local o = Embedding._lookup_options("nn.EmbeddingBag", opts)
  if o.scale_grad_by_freq and mode == "max" then
    error("EmbeddingBag: scale_grad_by_freq is not supported with mode \"max\" (as PyTorch)")
  end
  self.max_norm, self.norm_type, self.scale_grad_by_freq = o.max_norm, o.norm_type, o.scale_grad_by_freq
end

local WHO = "EmbeddingBag.forward"

local function shape_of(t) return "[" .. table.concat(t.shape, ", ") .. "]" end

-- The bags' offsets as a Lua list of 1-based starts plus the end (n + 1), checked.
local function bag_bounds(self, who, n, offsets)
  if not ember.is_tensor(offsets) or offsets.dtype ~= "int64" or offsets.ndim ~= 1 then
    error(("%s: offsets must be a 1-d int64 tensor (1-based positions), got %s"):format(who,
      ember.is_tensor(offsets) and (offsets.dtype .. " " .. shape_of(offsets)) or type(offsets)))
  end
  local off = offsets:totable()
  if self.include_last_offset then
    if #off < 1 then error(who .. ": include_last_offset needs at least one offset") end
  else
    off[#off + 1] = n + 1
  end
  if #off > 1 and off[1] ~= 1 then
    error(("%s: the first offset must be 1 (bags start at the input's first id; 1-based), got %d"):format(who, off[1]))
  end
  for b = 2, #off do
    if off[b] < off[b - 1] or off[b] > n + 1 then
      error(("%s: offsets must not decrease and stay within 1..%d (the input has %d ids), got %d after %d")
        :format(who, n + 1, n, off[b], off[b - 1]))
    end
  end
  if self.include_last_offset and off[#off] ~= n + 1 then
    -- PyTorch ignores ids past the last offset; so do we (they are in no bag)
    n = off[#off] - 1
  end
  return off, n
end

--- The reduced bags.
-- @tparam Tensor input int64 ids (1-based): [n] with offsets, or [B, L]
-- @tparam[opt] Tensor|table offsets int64 [B] (1-based starts; a Lua list of them too), or a
-- table {offsets=, per_sample_weights=}
-- @tparam[opt] Tensor per_sample_weights float, input's shape (mode "sum")
-- @treturn Tensor [B, embedding_dim]
function EmbeddingBag:forward(input, offsets, per_sample_weights)
  if type(offsets) == "table" and not ember.is_tensor(offsets) and offsets[1] == nil then
    local o = Module.check_options(WHO, offsets, { "offsets", "per_sample_weights" })
    offsets, per_sample_weights = o.offsets, o.per_sample_weights
  end
  return EmbeddingBag._bag(self, WHO, input, offsets, per_sample_weights)
end

-- The bags' sums, means or maxima of cfg.weight's rows (cfg: weight,
-- num_embeddings, embedding_dim, mode, padding_idx, include_last_offset):
-- the module's forward (cfg = the module) and nn.functional.embedding_bag's.
-- who: the caller, for errors.
function EmbeddingBag._bag(self, who, input, offsets, per_sample_weights)
  if type(offsets) == "table" and not ember.is_tensor(offsets) then
    -- a Lua list of 1-based offsets
    for i, v in ipairs(offsets) do
      if math.type(v) ~= "integer" then
        error(("%s: offsets must be integers (1-based positions), got %s at %d"):format(who, tostring(v), i))
      end
    end
    offsets = ember.tensor(offsets, { dtype = "int64", device = input and input.device or nil })
  end
  if not ember.is_tensor(input) or input.dtype ~= "int64" or (input.ndim ~= 1 and input.ndim ~= 2) then
    error(("%s: input must be int64 ids (1-based), 1-d with offsets or 2-d [B, L], got %s"):format(who,
      ember.is_tensor(input) and (input.dtype .. " " .. shape_of(input)) or type(input)))
  end
  local psw = per_sample_weights
  if psw ~= nil then
    if self.mode ~= "sum" then
      error(("%s: per_sample_weights is only supported for mode \"sum\" (as PyTorch), this bag's mode is %q")
        :format(who, self.mode))
    end
    if not ember.is_tensor(psw) or shape_of(psw) ~= shape_of(input) then
      error(("%s: per_sample_weights must be a tensor of the input's shape %s, got %s"):format(who, shape_of(input),
        ember.is_tensor(psw) and shape_of(psw) or type(psw)))
    end
    psw = psw:reshape({ -1 })
  end
  local n = input:numel()
  local off
  if input.ndim == 2 then
    if offsets ~= nil then
      error(("%s: offsets must be nil for a 2-d input %s (each row is a bag)"):format(who, shape_of(input)))
    end
    local B, L = input.shape[1], input.shape[2]
    off = {}
    for b = 1, B + 1 do off[b] = (b - 1) * L + 1 end
  else
    if offsets == nil then error(("%s: a 1-d input needs offsets (the 1-based start of each bag)"):format(who)) end
    off, n = bag_bounds(self, who, n, offsets)
  end
  local B = #off - 1
  local D = self.embedding_dim
  local topts = { dtype = self.weight.dtype, device = self.weight.device }
  if B == 0 then return ember.zeros({ 0, D }, topts) end
  if n == 0 then return ember.zeros({ B, D }, topts) end
  local ids = input:reshape({ -1 })
  if ids:numel() > n then
    ids = ids:narrow(1, 1, n)
    if psw then psw = psw:narrow(1, 1, n) end
  end
  local lo, hi = ids:min():item(), ids:max():item()
  if lo < 1 or hi > self.num_embeddings then
    error(("%s: ids must be in 1..%d (1-based), got %d"):format(who, self.num_embeddings, lo < 1 and lo or hi))
  end
  -- the bag of each id (1-based) and each bag's length
  local lens, longest = {}, 0
  for b = 1, B do
    lens[b] = off[b + 1] - off[b]
    if lens[b] > longest then longest = lens[b] end
  end
  local iopts = { dtype = "int64", device = ids.device }
  local bag_of = ember.repeat_interleave(ember.arange(1, B + 1, iopts), ember.tensor(lens, iopts))
  if self.max_norm then Embedding._renorm_(self.weight, ids, self.max_norm, self.norm_type) end
  local emb = ember.embedding(self.weight, ids) -- [n, D]
  if self.scale_grad_by_freq then Embedding._scale_grad_by_freq(emb, ids) end
  local keep = self.padding_idx and ids:ne(self.padding_idx) or nil
  if self.mode == "max" then
    -- the bags as a [B, longest, D] block; the empty places and the
    -- padding ids read a row of -inf, so they are never the maximum
    if keep then emb = emb:masked_fill(keep:logical_not():unsqueeze(2), -math.huge) end
    local ext = ember.cat({ emb, ember.full({ 1, D }, -math.huge, topts) }, 1)
    local pos = ember.arange(1, n + 1, iopts)
    local starts = ember.tensor(off, iopts):narrow(1, 1, B)
    local slot = pos - starts:index_select(1, bag_of) -- 0-based place in the bag
    local flat = (bag_of - 1) * longest + slot + 1
    local idx = ember.full({ B * longest }, n + 1, iopts):scatter(1, flat, pos)
    local out = ext:index_select(1, idx):reshape({ B, longest, D }):amax(2)
    -- an empty bag (or one of padding only) gives zeros, as PyTorch
    local count = keep and ember.zeros({ B }, iopts):index_add(1, bag_of, keep:to("int64"))
      or ember.tensor(lens, iopts)
    return out:masked_fill(count:eq(0):unsqueeze(2), 0)
  end
  local w = psw
  if keep then
    local k = keep:to(emb.dtype)
    w = w and w * k or k
  end
  if w then emb = emb * w:to(emb.dtype):unsqueeze(2) end
  local out = ember.zeros({ B, D }, topts):index_add(1, bag_of, emb)
  if self.mode == "mean" then
    local count = keep and ember.zeros({ B }, topts):index_add(1, bag_of, keep:to(emb.dtype))
      or ember.tensor(lens, topts)
    out = out / count:clamp_min(1):unsqueeze(2)
  end
  return out
end

--- The sizes and mode, for printing (PyTorch's text).
function EmbeddingBag:extra_repr()
  local s = ("%d, %d, mode=%s"):format(self.num_embeddings, self.embedding_dim, self.mode)
  if self.padding_idx then s = s .. ", padding_idx=" .. self.padding_idx end
  if self.include_last_offset then s = s .. ", include_last_offset=true" end
  if self.max_norm then s = s .. (", max_norm=%g"):format(self.max_norm) end
  if self.norm_type ~= 2 then s = s .. (", norm_type=%g"):format(self.norm_type) end
  if self.scale_grad_by_freq then s = s .. ", scale_grad_by_freq=true" end
  return s
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
EmbeddingBag.forward = require("ember._errors").wrap(EmbeddingBag.forward)

return EmbeddingBag
