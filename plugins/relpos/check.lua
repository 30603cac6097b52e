-- plugins/relpos/check.lua -- relpos's own references for
-- scripts/check_plugin.lua (whose declared checks test the terms
-- themselves): the options become the declaration the papers describe.
return function(ctx)
  local check, make, user_opts, decl = ctx.check, ctx.make, ctx.user_opts, ctx.decl
  local mode = user_opts.mode or "shaw"
  check("relpos mode=" .. mode .. " declares its paper's terms", function()
    if mode == "shaw" then
      local K = user_opts.max_relative_position or 16
      local t = make():parameters()
      return decl.bias == "shaw" and decl.rel == "clip" and decl.max_distance == K and decl.rel_k == 1 and
             decl.rel_v == 2 and t[1].shape[1] == 2 * K + 1, "declaration " .. decl.bias .. "/" .. decl.rel
    elseif mode == "t5" then
      local nb, md = user_opts.num_buckets or 32, user_opts.max_distance or 128
      return decl.bias == "table" and decl.rel == "t5" and decl.num_buckets == nb and decl.max_distance == md and
             decl.bidirectional == (user_opts.bidirectional ~= false), "declaration " .. decl.bias .. "/" .. decl.rel
    end
    return decl.bias == "alibi" and decl.mask == "none", "declaration " .. decl.bias
  end)
end
