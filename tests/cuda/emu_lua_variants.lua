-- On the emulated CUDA device (backends/cuda/emu): every shipped variant
-- written in Lua (plugins/flex) runs its traced programs inside the fused
-- CUDA kernel (ember.attention_routes(): fused +1 forward, nothing
-- composed, so a silent fallback to the dense Lua path fails here) and
-- agrees with the CPU's fused kernel: output, dq, dk, dv and the learned
-- tables' gradients within 1e-4 in float32 and 0.05 in bfloat16 (both sides
-- from the same bf16-rounded inputs and tables; the CPU side in float32),
-- with Lq = Lk = 150 (three 64-tiles, the last one partial) and a
-- cross-attention case; dropout (the same Philox draws as the CPU) and
-- bfloat16 autocast; the block map skipping tiles on the device. Then the bad input: an index out of range and a NaN
-- score are clear errors, and a call the kernel declines (float64) runs
-- densely.
--   ember tests/cuda/emu_lua_variants.lua   (EMBER_PLUGIN_PATH: the emu folder first)
local ember = require "ember"

local failed = 0
local function check(ok, what)
  if not ok then failed = failed + 1 end
  print((ok and "ok " or "not ok ") .. what)
end

local doc_ids = require "tests.lua.helpers.doc_ids" -- [B, L] ids of documents of the given lengths

local B, H, D, L = 2, 2, 8, 150
-- {variant, options, call options, per-call inputs (CPU tensors), Lq}
local cases = {
  { "softcap", { cap = 2.5 }, { causal = true } },
  { "softcap", { cap = 0.7 }, {} },
  { "document", {}, { causal = true }, { doc = doc_ids(B, L, { 37, 90, 11 }) } },
  { "document", {}, {}, { doc = doc_ids(B, L, { 64, 20 }) } },
  { "sliding_sinks", { window_left = 20, window_right = 5, sinks = 3 }, {} },
  { "sliding_sinks", { window_left = 33, window_right = 0, sinks = 1 }, { causal = true } },
  { "prefix_lm", {}, {}, { prefix = ember.tensor({ 17, 60 }, { dtype = "int64" }) } },
  { "sinks", {}, { causal = true } },
  { "sinks", {}, {} },
  { "example_lua", { max_distance = 9 }, {} },
  { "alibi_lua", {}, { causal = true } },
  { "window_lua", { window_left = 16, window_right = 16 }, {} },
  { "window_lua", { window_left = 16, window_right = 3 }, { causal = true }, nil, 70 },
  { "softcap", { cap = 1.5 }, { causal = true }, nil, 40 },
}

local function maxdiff(a, b) return (a:to("cpu"):to("float32") - b:to("float32")):abs():max():item() end

local function on(inputs, dev)
  if not inputs then return nil end
  local r = {}
  for n, t in pairs(inputs) do r[n] = t:to(dev) end
  return r
end

local function copy_opts(o, inputs)
  local r = {}
  for a, b in pairs(o) do r[a] = b end
  r.variant_inputs = inputs
  return r
end

for _, c in ipairs(cases) do
  local name, vopts, copts, inputs, lq = c[1], c[2], c[3], c[4], c[5] or L
  for _, dt in ipairs { "float32", "bfloat16" } do
    ember.manual_seed(7)
    local spec = { attention = name, heads = H, head_dim = D }
    for a, b in pairs(vopts) do spec[a] = b end
    local a = ember.Attention(spec)
    ember.no_grad(function()
      for _, t in ipairs(a:parameters()) do
        local r = ember.randn(t.shape) * 0.5
        if dt == "bfloat16" then r = r:to("bfloat16"):to("float32") end
        t:copy_(r)
      end
    end)
    local g = ember.Attention(spec):to("cuda")
    g:load_state_dict(a:state_dict())
    if dt == "bfloat16" then g = g:to("bfloat16") end
    local q, k, v = ember.randn(B, H, lq, D), ember.randn(B, H, L, D), ember.randn(B, H, L, D)
    if dt == "bfloat16" then -- both sides start from the same rounded inputs
      q, k, v = q:to("bfloat16"):to("float32"), k:to("bfloat16"):to("float32"), v:to("bfloat16"):to("float32")
    end
    local w = ember.randn(B, H, lq, D)
    local qg, kg, vg = q:to("cuda"):to(dt):requires_grad_(), k:to("cuda"):to(dt):requires_grad_(),
        v:to("cuda"):to(dt):requires_grad_()
    local before = ember.attention_routes()
    local og = g:forward(qg, kg, vg, copy_opts(copts, on(inputs, "cuda")))
    ;(og:to("float32") * w:to("cuda")):sum():backward()
    local after = ember.attention_routes()
    local qc, kc, vc = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
    local oc = a:forward(qc, kc, vc, copy_opts(copts, inputs))
    ;(oc * w):sum():backward()
    local d = math.max(maxdiff(og:detach(), oc:detach()), maxdiff(qg.grad, qc.grad), maxdiff(kg.grad, kc.grad),
      maxdiff(vg.grad, vc.grad))
    local ps, pg = a:parameters(), g:parameters()
    local tables = 0
    for i, t in ipairs(ps) do
      if t.grad then
        tables = tables + 1
        if not pg[i].grad then
          d = math.huge
        else
          -- a table's gradient sums over every score: relative to its size
          d = math.max(d, maxdiff(pg[i].grad, t.grad) / math.max(1, t.grad:abs():max():item()))
        end
      end
    end
    local tol = dt == "float32" and 1e-4 or 5e-2
    local fused = after.fused - before.fused
    local composed = after.composed - before.composed
    check(d < tol and fused == 1 and composed == 0,
      string.format("%s %s %s Lq=%d Lk=%d %s: max diff vs cpu %.2e (tol %g), %d table grads, fused +%d, composed +%d",
        dt, name, next(vopts) and "(options)" or "", lq, L, copts.causal and "causal" or "", d, tol, tables, fused,
        composed))
  end
end

-- Dropout in training: both backends drop the same probabilities (one
-- Philox stream), so the outputs agree; autocast runs the fused kernel in
-- bfloat16 close to float32.
for _, name in ipairs { "softcap", "sinks", "document" } do
  local spec = { attention = name, heads = H, head_dim = D }
  local a = ember.Attention(spec):train()
  local g = ember.Attention(spec):to("cuda")
  g:load_state_dict(a:state_dict())
  g:train()
  local q = ember.randn(B, H, 70, D)
  local inp = name == "document" and { doc = doc_ids(B, 70, { 20, 30 }) } or nil
  ember.manual_seed(5)
  local oc = a:forward(q, q, q, { dropout = 0.3, variant_inputs = inp })
  ember.manual_seed(5)
  local r0 = ember.attention_routes()
  local og = g:forward(q:to("cuda"), q:to("cuda"), q:to("cuda"), { dropout = 0.3, variant_inputs = on(inp, "cuda") })
  local r1 = ember.attention_routes()
  local d = maxdiff(og, oc)
  check(d < 1e-4 and r1.fused - r0.fused == 1, ("%s with dropout 0.3: max diff vs cpu %.2e, fused +%d"):format(name, d,
    r1.fused - r0.fused))
end
do
  local a = ember.Attention { attention = "example_lua", heads = H, head_dim = D, max_distance = 5 }:to("cuda")
  ember.no_grad(function() a:parameters()[1]:copy_(ember.randn(a:parameters()[1].shape):to("cuda") * 0.5) end)
  local q = ember.randn(1, H, 50, D):to("cuda")
  local ref = a(q, q, q)
  local r0 = ember.attention_routes()
  local low = ember.autocast("bfloat16", function() return a(q, q, q) end)
  local r1 = ember.attention_routes()
  local d = maxdiff(low, ref:to("cpu"))
  check(d < 0.1 and r1.fused - r0.fused == 1, ("example_lua under bfloat16 autocast: max diff vs float32 %.2e, fused +%d"):format(d,
    r1.fused - r0.fused))
end

-- The block map reaches the device: a document mask of 4 equal documents
-- skips the tiles across documents (12 of 16 at L = 256), so on the
-- emulator (one CPU thread, time proportional to the work) it takes well
-- under standard attention's time.
do
  local Lm = 256
  local att = ember.Attention { attention = "document", heads = H, head_dim = D }:to("cuda")
  local std = ember.Attention { attention = "standard", heads = H, head_dim = D }:to("cuda")
  local q = ember.randn(1, H, Lm, D):to("cuda")
  local ids = doc_ids(1, Lm, { 64 }):to("cuda")
  local function time(f) -- the best of three, after a warm-up: the machine may be busy
    f()
    local best = math.huge
    for _ = 1, 3 do
      local t0 = ember.clock()
      f()
      ember.synchronize("cuda")
      best = math.min(best, ember.clock() - t0)
    end
    return best
  end
  local td = time(function() return att(q, q, q, { variant_inputs = { doc = ids } }) end)
  local ts = time(function() return std(q, q, q) end)
  check(td < 0.7 * ts, ("document mask %.3fs vs standard %.3fs on the emulator (tiles across documents skipped)"):format(td, ts))
end

-- Bad input on the device: clear errors, no crash.
do
  local att = ember.Attention { attention = "document", heads = H, head_dim = D }:to("cuda")
  local q = ember.randn(1, H, 40, D):to("cuda")
  local ids = doc_ids(1, 40, { 10 })
  local ok, err = pcall(att.forward, att, q, q, q, { variant_inputs = { doc = ids:narrow(2, 1, 30):to("cuda") } })
  check(not ok and tostring(err):find("out of range", 1, true) ~= nil and tostring(err):find("doc", 1, true) ~= nil,
    "a document id tensor shorter than the sequence: " .. tostring(err))

  ember.attention_variant { name = "emu_nan_score", score = function(s, b, h, q, k, ctx) return ember.log(s - s - 1) end }
  local na = ember.Attention { attention = "emu_nan_score", heads = H, head_dim = D }:to("cuda")
  ok, err = pcall(na.forward, na, q, q, q)
  check(not ok and tostring(err):find("NaN", 1, true) ~= nil, "a score function that gives NaN: " .. tostring(err))

  -- float64 is not a dtype of the fused CUDA kernel: the dense Lua path runs
  local sc = ember.Attention { attention = "softcap", heads = H, head_dim = D, dtype = "float64" }:to("cuda")
  local q64 = q:to("float64")
  local before = ember.attention_routes()
  ok, err = pcall(sc.forward, sc, q64, q64, q64, { causal = true })
  local after = ember.attention_routes()
  check(ok and after.composed - before.composed == 1 and after.fused == before.fused,
    "float64 on the device falls back to the dense path" .. (ok and "" or ": " .. tostring(err)))
  -- the fallback keys on the core's status, not its wording: asked to (argument 8),
  -- core:forward answers a declined call with nil and the message; else it raises
  local out, why = sc.core:forward({}, q64, q64, q64, { causal = true }, {}, true)
  check(out == nil and type(why) == "string" and why:find("does not cover", 1, true) ~= nil,
    "a declined call answers nil and why when asked: " .. tostring(why))
  ok, err = pcall(sc.core.forward, sc.core, {}, q64, q64, q64, { causal = true }, {})
  check(not ok and tostring(err):find("does not cover", 1, true) ~= nil, "and raises when not asked: " .. tostring(err))
end

print(failed == 0 and "every Lua variant fused on the emulated device and equal to the CPU" or (failed .. " failed"))
os.exit(failed == 0 and 0 or 1)
