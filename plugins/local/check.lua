-- plugins/local/check.lua -- local's own references for
-- scripts/check_plugin.lua (which runs every generic and declared check
-- first): exactness where the pattern covers everything, and the patterns
-- against dense masks written out by hand.
return function(ctx)
  local ember, check, make, problem, std, close, maxdiff, randn, user_opts, caps, mask_sets, equals_standard, bool_mask, kp_mask, causal_allowed =
    ctx.ember, ctx.check, ctx.make, ctx.problem, ctx.std, ctx.close, ctx.maxdiff, ctx.randn, ctx.user_opts,
    ctx.caps, ctx.mask_sets, ctx.equals_standard, ctx.bool_mask, ctx.kp_mask, ctx.causal_allowed
  -- the checker's options under these: the other mode's go back to their
  -- defaults (local refuses an option its mode does not read)
  local defaults = {}
  for _, o in ipairs(ember.attention_variants("local").options) do defaults[o.name] = o.default end
  local function mode_opts(o)
    local other = o.mode == "block" and { "window_left", "window_right" }
      or { "block_size", "local_blocks", "global_blocks", "global_tokens" }
    for _, n in ipairs(other) do if o[n] == nil then o[n] = defaults[n] end end
    return o
  end
  equals_standard("sliding window >= L equals standard", mode_opts {mode = "sliding", window_left = 8, window_right = 8}, {}, nil, mask_sets)
  equals_standard("block-sparse with every block on equals standard",
                  mode_opts {mode = "block", block_size = 2, local_blocks = 3, global_blocks = 0, global_tokens = 0}, {}, nil, mask_sets)
  equals_standard("block-sparse with every token global equals standard",
                  mode_opts {mode = "block", block_size = 1, local_blocks = 0, global_tokens = 5}, {}, nil, mask_sets)
  check("sliding window: query i sees exactly keys i-left..i+right (self included)", function()
    local a, p = make(mode_opts {mode = "sliding", window_left = 1, window_right = 2}), problem({Lq = 6, Lk = 6})
    local allowed = {}
    for i = 1, 6 do
      allowed[i] = {}
      for j = 1, 6 do allowed[i][j] = j >= i - 1 and j <= i + 2 end
    end
    local ref = std:forward(p.q, p.k, p.v, {attn_mask = ember.tensor(allowed)})
    return close(a:forward(p.q, p.k, p.v), ref, 1e-12, "vs masked standard")
  end)
  check("block-sparse pattern: local blocks + global tokens, as a dense mask", function()
    local a = make(mode_opts {mode = "block", block_size = 2, local_blocks = 0, global_tokens = 1, global_blocks = 0})
    local p = problem({Lq = 6, Lk = 6})
    local allowed = {}
    for i = 1, 6 do
      allowed[i] = {}
      for j = 1, 6 do
        allowed[i][j] = i == 1 or j == 1 or (i - 1) // 2 == (j - 1) // 2
      end
    end
    local ref = std:forward(p.q, p.k, p.v, {attn_mask = ember.tensor(allowed)})
    return close(a:forward(p.q, p.k, p.v), ref, 1e-12, "vs masked standard")
  end)
end
