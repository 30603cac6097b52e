-- check_plugin_parts.lua -- for scripts/check_plugin.lua: the parts a
-- check of attention can reuse, apart from the driver that walks a
-- variant's caps: the "ok N - what" reporter, comparisons with a
-- tolerance, random problems, and masks written out independently of the
-- C core (key padding, random boolean, bottom-right causal, additive).
-- Returns function(ember) -> the parts (a table); a spec can dofile it too.
-- Run on its own, it only answers --help (it is a part of check_plugin.lua).
if arg and arg[0] and arg[0]:match("check_plugin_parts%.lua$") then
  require("ember.cli").help_from_header(arg)
  print("check_plugin_parts.lua is loaded by scripts/check_plugin.lua; run that (see its --help)")
  return
end

return function(ember)
  local M = {}

  -- A reporter: report(ok, what, why) prints "ok N - what" or "not ok N -
  -- what: why"; check(what, fn), where fn returns true, or false/nil and a
  -- reason, or raises; finish() prints "N passed, M failed" and returns M.
  function M.reporter()
    local passed, failed, n = 0, 0, 0
    local r = {}
    function r.report(ok, what, why)
      n = n + 1
      if ok then
        passed = passed + 1
        print(string.format("ok %d - %s", n, what))
      else
        failed = failed + 1
        print(string.format("not ok %d - %s: %s", n, what, tostring(why)))
      end
    end
    function r.check(what, fn)
      local ok, res, why = pcall(fn)
      if not ok then r.report(false, what, "raised: " .. tostring(res))
      else r.report(res, what, why) end
    end
    function r.finish()
      print(string.format("%d passed, %d failed", passed, failed))
      return failed
    end
    return r
  end

  -- The call raises an error whose message contains every pattern (plain).
  function M.raises(fn, ...)
    local ok, err = pcall(fn)
    if ok then return false, "no error raised" end
    err = tostring(err)
    for _, p in ipairs({...}) do
      if not err:find(p, 1, true) then return false, "error lacks '" .. p .. "': " .. err end
    end
    return true
  end

  function M.randn(shape, dtype) return ember.randn(shape, {dtype = dtype or "float64"}) end

  function M.maxabs(t) return t:double():abs():max():item() end
  function M.maxdiff(a, b) return (a:double() - b:double()):abs():max():item() end
  function M.finite(t) return t:double():ne(t:double()):logical_not():logical_and(t:double():abs():lt(math.huge)) end
  function M.all_finite(t) return M.finite(t):logical_not():double():sum():item() == 0 end

  function M.close(a, b, tol, what)
    if not a then return false, (what or "value") .. " is nil" end
    local d, s = M.maxdiff(a, b), M.maxabs(b)
    if d <= tol * math.max(s, 1) then return true end
    return false, string.format("%s differs by %.3g (scale %.3g, tol %.1g)", what or "value", d, s, tol)
  end

  -- A problem: q, k, v and the call options.
  function M.problem(p)
    p = p or {}
    local B, H, Lq, Lk, dk, dv = p.B or 2, p.H or 2, p.Lq or 5, p.Lk or p.Lq or 5, p.dk or 3, p.dv or 4
    local dt = p.dtype or "float64"
    return {q = M.randn({B, H, Lq, dk}, dt), k = M.randn({B, H, Lk, dk}, dt), v = M.randn({B, H, Lk, dv}, dt),
            B = B, H = H, Lq = Lq, Lk = Lk, dk = dk, dv = dv}
  end

  function M.kp_mask(B, Lk) -- batch 1: last two keys padded; others none
    local rows = {}
    for b = 1, B do
      local r = {}
      for j = 1, Lk do r[j] = (b == 1 and j > Lk - 2) end
      rows[b] = r
    end
    return ember.tensor(rows)
  end

  function M.bool_mask(Lq, Lk, seed) -- random, every row keeps its last key
    local rows, s = {}, seed or 7
    for i = 1, Lq do
      local r = {}
      for j = 1, Lk do
        s = (s * 1103515245 + 12345) % 2147483648
        r[j] = j == Lk or (s % 3 ~= 0)
      end
      rows[i] = r
    end
    return ember.tensor(rows)
  end

  function M.causal_allowed(Lq, Lk) -- j <= i + Lk - Lq (1-based i, j: same rule)
    local rows = {}
    for i = 1, Lq do
      local r = {}
      for j = 1, Lk do r[j] = j <= i + Lk - Lq end
      rows[i] = r
    end
    return ember.tensor(rows)
  end

  function M.additive_of(mask, dtype) -- bool (true = may attend) -> 0 / -inf
    return ember.zeros(mask.shape, {dtype = dtype or "float64"}):masked_fill(mask:logical_not(), -math.huge)
  end

  return M
end
