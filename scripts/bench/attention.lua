-- attention.lua -- forward+backward time and peak memory of one
-- MultiHeadAttention layer per variant, against PyTorch's
-- nn.MultiheadAttention in the same run.
--
--   ember scripts/bench/attention.lua [--quick] [--no-torch] [--only LABEL,...]
--        [--precision fp32|bf16|both] [--op] [--cpu-time] [--extra NAME[:k=v,...]] [--reps N]
--        [--rounds N] [--tile_gemm all|PATH,...] [--help]
--
-- d_model 256, 8 heads, float32 (--precision bf16: the step under
-- ember.autocast("bfloat16"), float32 weights; both: each row in float32
-- and in bfloat16, with the ratio), L = 256, 1024, 4096 with B*L = 4096 held
-- constant (B = 16, 4, 1), causal and non-causal. Each configuration runs
-- in a child process (this script with --one ...), so memory numbers do not
-- leak into each other:
--   time   seconds per forward+backward (the best of `reps` after a warm-up,
--          3, or 2 for the layer at L = 4096; --reps N sets it for every row:
--          the least disturbed run on a shared machine; rows shorter than
--          that get more runs, at least a second of them, up to 50; and
--          each row's process runs twice, --rounds N, in rounds over its
--          group of variants, keeping its best: a busy stretch of seconds
--          then slows one round of a row, not the whole row);
--   peak   growth of the peak resident size during those runs (VmHWM after
--          resetting it with /proc/self/clear_refs, minus VmRSS before), MiB;
--   saved  ember.live_bytes() held by the graph after the forward (what is
--          saved for backward), MiB -- an L x L tensor shows up here.
-- With B*L constant, a variant whose memory is linear in L keeps the same
-- memory as L grows; a quadratic one grows 4x from 1024 to 4096. The ratio
-- is printed for every variant and PyTorch.
-- --op times the attention op alone (ember.Attention on q, k, v of
-- [B, 8, L, 32], forward+backward), without the layer's four projections:
-- a block mask shrinks only this part, so the block-sparse target (time
-- within +-30% of tiles kept x standard's) is read from this table. PyTorch
-- 1.13 has no fused attention op to compare with, so this table has none.
-- --cpu-time reports process CPU seconds (os.clock; Python's
-- process_time) instead of wall seconds: on a machine other jobs share, the
-- CPU time of a 1-thread run (OMP_NUM_THREADS=1) is what stays comparable.
-- --extra adds a row for any loaded variant, a dropped-in plugin included
-- (EMBER_PLUGIN_PATH=its folder:...), with its options after a colon.
-- --tile_gemm all (or a list of blas, avx512, avx2, plain) runs each row
-- again per path of the fused kernel's float32 tile products
-- (EMBER_CPU_TILE_GEMM in the child's environment; a path this CPU lacks
-- falls back, see ember.cpu_info().tile_gemm) and notes each path's time
-- and blas's time / the path's: the old OpenBLAS tiles against ours, in
-- the same run. The time column stays the default path's.
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = ember or require "ember"

local D_MODEL, HEADS, BL = 256, 8, 4096
local MIN_TIMED = 1.0 -- seconds of timed runs per row, at least (up to 50 runs)

local function rss_kib(field)
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  for line in f:lines() do
    local v = line:match("^" .. field .. ":%s+(%d+)")
    if v then f:close() return tonumber(v) end
  end
  f:close()
  return 0
end

-- ---------------------------------------------------------------- child
if arg[1] == "--one" then
  local variant, L, B, causal, reps = arg[2], tonumber(arg[3]), tonumber(arg[4]), arg[5] == "1", tonumber(arg[6])
  local bf16, op_only = arg[8] == "bf16", arg[9] == "op"
  local now = arg[10] == "cpu" and os.clock or ember.clock -- os.clock: the process's CPU time
  local spec = op_only and {heads = HEADS, head_dim = D_MODEL // HEADS, attention = variant}
               or {d_model = D_MODEL, heads = HEADS, attention = variant}
  for kv in (arg[7] or ""):gmatch("[^,]+") do
    local k, v = kv:match("^([%w_]+)=(.*)$")
    spec[k] = tonumber(v) or (v == "true" and true) or (v == "false" and false) or v
  end
  ember.manual_seed(0)
  local m = op_only and ember.Attention(spec) or ember.MultiHeadAttention(spec)
  -- the forward's arguments: (q, k, v, opts) for the op, (x, nil, opts) for the layer
  local args
  if op_only then
    local function qkv() return ember.randn(B, HEADS, L, D_MODEL // HEADS):requires_grad_() end
    args = {qkv(), qkv(), qkv(), {causal = causal}, n = 4}
  else
    args = {ember.randn(B, L, D_MODEL):requires_grad_(), nil, {causal = causal}, n = 3}
  end
  local function step()
    local out = bf16 and ember.autocast("bfloat16", m.forward, m, table.unpack(args, 1, args.n))
                or m:forward(table.unpack(args, 1, args.n))
    local before = ember.live_bytes()
    local loss = out:to("float32"):sum()
    loss:backward()
    return before
  end
  local t_warm = now()
  step()
  t_warm = now() - t_warm
  m:zero_grad()
  -- short rows get more runs, at least MIN_TIMED seconds of them: a best
  -- of 3 over 60 ms is one busy moment of a shared machine
  reps = math.max(reps, math.min(50, math.ceil(MIN_TIMED / math.max(t_warm, 1e-3))))
  local f = io.open("/proc/self/clear_refs", "w")
  if f then f:write("5") f:close() end
  local base = rss_kib("VmRSS")
  local live0 = ember.live_bytes()
  local saved, dt = 0, math.huge
  for _ = 1, reps do
    local start = now()
    local after_fwd = step()
    dt = math.min(dt, now() - start)
    saved = math.max(saved, after_fwd - live0)
    m:zero_grad()
  end
  print(string.format("%.6f %.1f %.1f", dt, (rss_kib("VmHWM") - base) / 1024, saved / 2^20))
  os.exit(0)
end

-- ---------------------------------------------------------------- parent
local quick, with_torch, only, precision, op_only, clock = false, true, nil, "fp32", false, "wall"
local extra, reps_opt, rounds, tile_paths = {}, nil, 2, nil
local function positive_int(flag, v)
  local n = math.tointeger(tonumber(v))
  if not n or n < 1 then
    io.stderr:write(("attention.lua: %s needs a positive integer, got %s\n"):format(flag, tostring(v)))
    os.exit(2)
  end
  return n
end
for i, a in ipairs(arg) do
  if a == "--extra" then extra[#extra + 1] = arg[i + 1] end
  if a == "--cpu-time" then clock = "cpu" end
  if a == "--op" then op_only, with_torch = true, false end
  if a == "--quick" then quick = true end
  if a == "--precision" then precision = arg[i + 1] end
  if a == "--no-torch" then with_torch = false end
  if a == "--only" then only = arg[i + 1] end
  if a == "--rounds" then rounds = positive_int(a, arg[i + 1]) end
  if a == "--reps" then reps_opt = positive_int(a, arg[i + 1]) end
  if a == "--tile_gemm" then
    local v = arg[i + 1] == "all" and "blas,avx512,avx2,plain" or arg[i + 1] or ""
    tile_paths = {}
    for w in v:gmatch("[^,]+") do
      if w ~= "blas" and w ~= "avx512" and w ~= "avx2" and w ~= "plain" then
        io.stderr:write("attention.lua: --tile_gemm takes all or a list of blas, avx512, avx2, plain; got " .. w .. "\n")
        os.exit(2)
      end
      tile_paths[#tile_paths + 1] = w
    end
  end
end
local exe = arg[-1] or "ember"
local script = arg[0]
if precision ~= "fp32" and precision ~= "bf16" and precision ~= "both" then
  io.stderr:write("attention.lua: --precision must be fp32, bf16 or both, got " .. tostring(precision) .. "\n")
  os.exit(2)
end

-- label, variant, options; `kept` gives the fraction of (query tile, key
-- tile) pairs the block mask keeps at L, with the tiles the CPU kernel uses
-- under a block mask at head dim 32 (64 x 64); the target for block-sparse
-- is that fraction of standard's time, +-30%.
local BLOCK, LOCAL_BLOCKS, GLOBAL, TILE = 64, 1, 16, 64
local function block_allows(p, j)
  local d = j // BLOCK - p // BLOCK
  return p < GLOBAL or j < GLOBAL or (d >= -LOCAL_BLOCKS and d <= LOCAL_BLOCKS)
end
local variants = {
  {"standard", "standard", ""},
  {"local(w=64+64)", "local", "window_left=64,window_right=64"},
  {"local(block)", "local", string.format("mode=block,block_size=%d,local_blocks=%d,global_tokens=%d", BLOCK, LOCAL_BLOCKS, GLOBAL),
   kept = function(L, causal)
     local kept, all = 0, 0
     for i0 = 0, L - 1, TILE do
       for j0 = 0, L - 1, TILE do
         if not causal or j0 <= i0 + TILE - 1 then -- causal: tiles past the diagonal are skipped by standard too
           all = all + 1
           local any = false
           for i = i0, i0 + TILE - 1, 1 do
             -- the band's ends grow with the query: the tile's corner rows and the global keys decide
             if block_allows(i, j0) or block_allows(i, j0 + TILE - 1) or i < GLOBAL or j0 < GLOBAL then any = true break end
           end
           if any then kept = kept + 1 end
         end
       end
     end
     return kept / all
   end},
  {"relpos(alibi)", "relpos", "mode=alibi"},
  {"relpos(t5)", "relpos", "mode=t5"},
  {"relpos(shaw)", "relpos", "mode=shaw"},
  {"linear", "linear", ""},
}
for _, e in ipairs(extra) do
  local name, o = e:match("^([^:]+):?(.*)$")
  variants[#variants + 1] = {e, name, o}
end
local lengths = quick and {256, 1024} or {256, 1024, 4096}

local function selected(label)
  if not only then return true end
  for w in only:gmatch("[^,]+") do if w == label or (w == "standard" and label == "standard") then return true end end
  return label == "standard" -- the ratios need it
end

local function run(cmd)
  local p = io.popen(cmd)
  local line = p:read("*l")
  p:close()
  local t, peak, saved = (line or ""):match("^(%S+) (%S+) ?(%S*)")
  return tonumber(t), tonumber(peak), tonumber(saved)
end

local rows = {}
print(require("ember.cli").machine())
print(string.format("# %s, d_model %d, %d heads, %s, B*L = %d, %d threads",
                    op_only and "the attention op alone (ember.Attention, q/k/v [B, 8, L, 32])" or "one MultiHeadAttention layer",
                    D_MODEL, HEADS, precision == "fp32" and "float32" or precision == "bf16" and "bfloat16 autocast"
                    or "float32 (time) and bfloat16 autocast (note)", BL, ember.get_num_threads()))
print(string.format("%-16s %5s %3s %6s %9s %9s %9s %8s %8s %s", "variant", "L", "B", "causal",
                    clock == "cpu" and "cpu (s)" or "time (s)",
                    "peak MiB", "saved MiB", "/std", "/torch", "note"))
for _, causal in ipairs({false, true}) do
  for _, L in ipairs(lengths) do
    local B = BL // L
    local reps = reps_opt or ((L >= 4096 and not op_only) and 2 or 3)
    -- every child of the group runs `rounds` times, the rounds one after
    -- another, and each keeps its best: a busy stretch of a shared machine
    -- (seconds long) then slows one round of a row, not the row
    local group, jobs = {}, {}
    local function job(r, field, cmd)
      jobs[#jobs + 1] = function()
        local t, peak, saved = run(cmd)
        if t and (not r[field] or t < r[field]) then r[field] = t end
        if field == "t" and not r.peak then r.peak, r.saved = peak, saved end
      end
    end
    if with_torch then
      group.torch = {label = "pytorch nn.MHA", variant = "pytorch", L = L, causal = causal}
      job(group.torch, "t", string.format("/usr/bin/python3 scripts/bench/attention_torch.py %d %d %d %d %d %d %d %s 2>/dev/null",
                                          L, B, causal and 1 or 0, D_MODEL, HEADS, reps, ember.get_num_threads(), clock))
    end
    for _, v in ipairs(variants) do
      if selected(v[1]) then
        local function cmd(prec, tile)
          return string.format("%s%q %q --one %s %d %d %d %d %q %s %s %s", tile and ("EMBER_CPU_TILE_GEMM=" .. tile .. " ") or "",
                               exe, script, v[2], L, B, causal and 1 or 0, reps,
                               v[3], prec, op_only and "op" or "layer", clock)
        end
        local r = {label = v[1], variant = v[1], L = L, causal = causal, t_tile = {}}
        job(r, "t", cmd(precision == "bf16" and "bf16" or "fp32"))
        if precision == "both" then job(r, "t_bf16", cmd("bf16")) end
        for _, tp in ipairs(tile_paths or {}) do
          jobs[#jobs + 1] = function()
            local t = run(cmd(precision == "bf16" and "bf16" or "fp32", tp))
            if t and (not r.t_tile[tp] or t < r.t_tile[tp]) then r.t_tile[tp] = t end
          end
        end
        if v.kept then r.kept = v.kept(L, causal) end
        group[#group + 1] = r
        rows[#rows + 1] = r
      end
    end
    for _ = 1, rounds do
      for _, j in ipairs(jobs) do j() end
    end
    local std = group[1] and group[1].t
    local std_bf16 = group[1] and group[1].t_bf16
    local torch = group.torch and group.torch.t
    local function line(r)
      local note = ""
      if r.kept and std and r.t then
        note = string.format("tiles kept %.3f, time / (kept x std) = %.2f", r.kept, r.t / (r.kept * std))
        if r.t_bf16 and std_bf16 then -- the same ratio within the bf16 column
          note = note .. string.format(" (bf16 %.2f)", r.t_bf16 / (r.kept * std_bf16))
        end
      end
      if r.t_bf16 and r.t then
        note = string.format("bf16 %.3f s, fp32/bf16 %.2fx", r.t_bf16, r.t / r.t_bf16) .. (note ~= "" and "; " .. note or "")
      end
      if tile_paths and r.t_tile then -- tile paths: time, and blas / path
        local parts, tb = {}, r.t_tile.blas
        for _, tp in ipairs(tile_paths) do
          local t = r.t_tile[tp]
          parts[#parts + 1] = string.format("%s %s", tp, t and string.format("%.3f", t) or "failed")
            .. ((t and tb and tp ~= "blas") and string.format(" (%.2fx)", tb / t) or "")
        end
        note = "tiles: " .. table.concat(parts, ", ") .. (note ~= "" and "; " .. note or "")
      end
      print(string.format("%-16s %5d %3d %6s %9s %9s %9s %8s %8s %s", r.label, L, B, tostring(causal),
                          r.t and string.format("%.3f", r.t) or "failed", r.peak and string.format("%.1f", r.peak) or "-",
                          r.saved and string.format("%.1f", r.saved) or "-",
                          (r.t and std) and string.format("%.2f", r.t / std) or "-",
                          (r.t and torch) and string.format("%.2f", r.t / torch) or "-", note))
    end
    for _, r in ipairs(group) do line(r) end
    if group.torch then line(group.torch) rows[#rows + 1] = group.torch end
  end
end

local function find(variant, L, causal)
  for _, r in ipairs(rows) do
    if r.variant == variant and r.L == L and r.causal == causal then return r end
  end
end
if not quick then
  print("# time and memory ratios L=1024 -> L=4096 at constant B*L (1.0 = linear in L, 4.0 = quadratic)")
  for _, v in ipairs(variants) do
    for _, causal in ipairs({false, true}) do
      local a, b = find(v[1], 1024, causal), find(v[1], 4096, causal)
      if a and b and a.peak and b.peak and a.peak > 0 then
        print(string.format("%-16s causal=%-5s time %.2f  peak %.2f  saved %.2f", v[1], tostring(causal),
                            (a.t and b.t) and b.t / a.t or 0, b.peak / a.peak,
                            (a.saved and a.saved > 0) and b.saved / a.saved or 0))
      end
    end
  end
end
