-- plugins/linear/check.lua -- linear's own references for
-- scripts/check_plugin.lua: the dense formula, FAVOR's redraw; and its
-- properties (the weights' rows sum to den / (den + eps), not exactly 1).
return {weights_sum_tol = 1e-4, checks = function(ctx)
  local ember, check, make, problem, std, close, maxdiff, randn, user_opts, caps, mask_sets, equals_standard, bool_mask, kp_mask, causal_allowed =
    ctx.ember, ctx.check, ctx.make, ctx.problem, ctx.std, ctx.close, ctx.maxdiff, ctx.randn, ctx.user_opts,
    ctx.caps, ctx.mask_sets, ctx.equals_standard, ctx.bool_mask, ctx.kp_mask, ctx.causal_allowed
  check("linear equals the dense formula phi(q) phi(k)^T v / (rowsum + eps), causal and padded", function()
    local fm = (user_opts.feature_map or "elu")
    -- favor shifts features for range (exactly cancelling only without eps)
    local eps = fm == "favor" and 0 or (user_opts.eps or 1e-6)
    local a = make({eps = eps})
    local p = problem({Lq = 4, Lk = 6})
    local function phi(x)
      if fm == "elu" then return x:elu() + 1 end
      local w = a:state_dict()["features"]        -- [m, dk]
      local xs = x * math.sqrt(1 / math.sqrt(p.dk))
      local m = w.shape[1]
      return ((xs:matmul(w:transpose(1, 2))) - (xs * xs):sum(-1, true) * 0.5):exp() / math.sqrt(m)
    end
    for _, opts in ipairs({{}, {causal = true}, {key_padding_mask = ember.tensor({{false, false, false, false, true, true}, {false, false, false, false, false, false}})}}) do
      local A = phi(p.q):matmul(phi(p.k):transpose(3, 4))   -- [B,H,Lq,Lk]
      if opts.causal then A = A * causal_allowed(4, 6):double() end
      if opts.key_padding_mask then A = A * opts.key_padding_mask:logical_not():double():view(2, 1, 1, 6) end
      local ref = A:matmul(p.v) / (A:sum(-1, true) + eps)
      local ok, why = close(a:forward(p.q, p.k, p.v, opts), ref, 1e-10, "vs dense formula")
      if not ok then return false, why end
    end
    return true
  end)
  if (user_opts.feature_map or "elu") == "favor" then
    check("favor: redraw=true draws new features per training forward, redraw=false keeps them", function()
      local p = problem()
      local a = make({redraw = false})
      a:train()
      local o1, o2 = a:forward(p.q, p.k, p.v), a:forward(p.q, p.k, p.v)
      if maxdiff(o1, o2) ~= 0 then return false, "redraw=false changed between calls" end
      local b = make({redraw = true})
      b:train()
      local r1, r2 = b:forward(p.q, p.k, p.v), b:forward(p.q, p.k, p.v)
      if maxdiff(r1, r2) == 0 then return false, "redraw=true gave the same output twice" end
      b:eval()
      return maxdiff(b:forward(p.q, p.k, p.v), b:forward(p.q, p.k, p.v)) == 0, "eval should use the buffer"
    end)
  end
end}
