-- A tiny per-rank test harness for the MPI tests: every rank checks its
-- own results; a failure on any rank makes that rank (so mpirun) exit
-- non-zero. Rank 0 prints the "ok N - name" lines.
local dist = require "ember.distributed"
local H = {passed = 0, failed = 0}

function H.check(name, cond, detail)
  local r = dist.is_initialized() and dist.rank() or 0
  if cond then
    H.passed = H.passed + 1
    if r == 0 then print("ok - " .. name) end
  else
    H.failed = H.failed + 1
    print(("not ok - %s (rank %d)%s"):format(name, r, detail and (": " .. tostring(detail)) or ""))
  end
end

-- Runs fn; a raised error is a failure of `name`.
function H.test(name, fn)
  local ok, err = pcall(fn)
  if not ok then H.check(name, false, err) else H.check(name, true) end
end

-- Expects fn to raise an error matching pattern.
function H.raises(name, pattern, fn)
  local ok, err = pcall(fn)
  H.check(name, not ok and tostring(err):find(pattern) ~= nil,
          ok and "no error" or ("error was: " .. tostring(err)))
end

function H.max_rel_diff(a, b)
  if a:numel() == 0 then return 0 end
  local d = (a:double() - b:double()):abs():max():item()
  local m = b:double():abs():max():item()
  return d / math.max(m, 1e-30)
end

-- Same shape, dtype and values (compared as float64)?
function H.same(a, b)
  if a.dtype ~= b.dtype or table.concat(a.shape, ",") ~= table.concat(b.shape, ",") then
    return false, ("%s %s vs %s %s"):format(a.dtype, table.concat(a.shape, "x"), b.dtype, table.concat(b.shape, "x"))
  end
  if a:numel() == 0 then return true end
  local d = (a:double() - b:double()):abs():max():item()
  return d == 0, "max abs difference " .. d
end

function H.done()
  local r = dist.is_initialized() and dist.rank() or 0
  if r == 0 or H.failed > 0 then
    print(("rank %d: %d passed, %d failed"):format(r, H.passed, H.failed))
  end
  if H.failed > 0 then os.exit(1) end
end

return H
