-- kv_decode.lua: KV-cached greedy decoding, in ms per token at given
-- positions, for a decoder-only model of 4 nn.TransformerDecoderLayer
-- (d_model 256, 8 heads, FFN 1024, sinusoidal positions, vocab 256), B = 1,
-- float32 on the CPU (issue 27's measure: the cost at 2048 should be at most
-- 1.3x the cost at 128).
--
-- For each position P the prompt of P - 1 tokens is run once (prefill,
-- filling the cache), then `steps` tokens are decoded one at a time, each
-- fed back (greedy), as ember.generate does (its cache reserves the
-- prompt plus the new tokens at once); the time of those steps,
-- divided by their number, is printed with the bytes the KV cache holds
-- (its buffers, all layers; kv_heads < 8 is grouped-query attention) as
--   position ms_per_token prefill_s cache_MiB
-- The best of `rounds` rounds counts (a shared machine's busy moments only
-- slow a round down).
--
-- --bf16 runs the whole decoding under one ember.autocast("bfloat16")
-- region: the products in bfloat16 with the weights cast once (autocast's
-- cast cache), and K and V cached in bfloat16 (half the bytes).
--
--   ember scripts/bench/kv_decode.lua [steps=32] [rounds=3] [positions=128,512,2048] [kv_heads=8] [--bf16]
--   ember scripts/bench/kv_decode.lua 32 3 128,512,2048,8192
--   ember scripts/bench/kv_decode.lua 32 3 2048 2        -- GQA, 4 query heads per kv head
--   ember scripts/bench/kv_decode.lua 32 3 128,2048 8 --bf16
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = require "ember"
local nn = require "ember.nn"

local bf16 = false
for i = #arg, 1, -1 do
  if arg[i] == "--bf16" then bf16 = true; table.remove(arg, i) end
end

local steps = math.tointeger(tonumber(arg[1])) or 32
local rounds = math.tointeger(tonumber(arg[2])) or 3
local positions = {}
for p in (arg[3] or "128,512,2048"):gmatch("%d+") do positions[#positions + 1] = math.tointeger(tonumber(p)) end
local kv_heads = math.tointeger(tonumber(arg[4])) or 8
local max_pos = 0
for _, p in ipairs(positions) do max_pos = math.max(max_pos, p) end

local D, H, F, V, LAYERS = 256, 8, 1024, 256, 4

local LM = nn.Module:extend("BenchLM")
function LM:__init()
  self:add_module("embed", nn.Embedding(V, D))
  self:add_module("pos", nn.SinusoidalPositionalEncoding(D, { max_len = max_pos + steps + 1 }))
  self:add_module("decoder", nn.TransformerDecoder(D, H, LAYERS, { dim_feedforward = F, dropout = 0, cross = false,
    norm_first = true, kv_heads = kv_heads ~= 8 and kv_heads or nil }))
  self:add_module("head", nn.Linear(D, V))
end
function LM:decode(ids, o)
  return self.head(self.decoder(self.pos(self.embed(ids), o.start), nil, { cache = o.cache }))
end

ember.manual_seed(1)
local model = LM():eval()
print("# " .. require("ember.cli").machine())
print(("# %d layers, d_model %d, %d heads (%d kv heads), FFN %d, B 1, %s, %d decode steps, best of %d rounds")
  :format(LAYERS, D, H, kv_heads, F, bf16 and "bfloat16 (autocast, one region)" or "float32", steps, rounds))
print("position ms_per_token prefill_s cache_MiB")

local function cache_bytes(cache)
  local n = 0
  for _, layer in ipairs(cache) do
    for _, buf in ipairs { layer.self._k or layer.self.k, layer.self._v or layer.self.v } do
      n = n + buf:numel() * ember.dtype_info(buf.dtype).size
    end
  end
  return n
end
local region <close> = bf16 and ember.autocast("bfloat16") or nil
ember.no_grad(function()
  for _, P in ipairs(positions) do
    local best, prefill, bytes = math.huge, math.huge, 0
    for _ = 1, rounds do
      local cache = { reserve = P + steps } -- as ember.generate: the buffers are allocated once
      local prompt = (ember.rand(1, P - 1) * V):long() + 1
      local t0 = ember.clock()
      local logits = model:decode(prompt, { cache = cache, start = 1 })
      prefill = math.min(prefill, ember.clock() - t0)
      local nxt = logits:select(2, logits.shape[2]):argmax(-1, true)
      t0 = ember.clock()
      for s = 0, steps - 1 do
        logits = model:decode(nxt, { cache = cache, start = P + s })
        nxt = logits:select(2, 1):argmax(-1, true)
      end
      best = math.min(best, (ember.clock() - t0) / steps)
      bytes = cache_bytes(cache)
    end
    print(("%d %.3f %.3f %.1f"):format(P, best * 1e3, prefill, bytes / 2 ^ 20))
    io.stdout:flush()
  end
end)
