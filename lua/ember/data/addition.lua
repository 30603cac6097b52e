--- ember.data.addition: 3-digit addition problems, "535+61" -> "596".
--
-- Operands are 0..999. Pairs are drawn without replacement from all 10^6
-- ordered pairs with a generator seeded by opts.seed (ember's global one is
-- left as it is); the held-out set never holds a
-- pair of the training set, nor its mirror image (61+535 when 535+61
-- trains), so held-out accuracy measures addition, not recall.
-- @module data.addition
local error = require("ember._errors").error -- raises at the user's line
local M = {}

M.ALPHABET = "0123456789+"

--- opts: n_train (50000), n_test (5000), seed (0), max_operand (999).
-- Returns {train = {inputs = {"535+61", ...}, targets = {"596", ...}}, test = {...}}.
function M.generate(opts)
  local ember = require "ember"
  opts = opts or {}
  local n_train, n_test = opts.n_train or 50000, opts.n_test or 5000
  local m = (opts.max_operand or 999) + 1
  if n_train + n_test > m * m // 2 then
    error(("addition.generate: %d pairs asked, at most %d distinct"):format(n_train + n_test, m * m // 2), 2)
  end
  -- a generator of its own: reseeding the global one reset the caller's ember.manual_seed
  local g = ember.Generator():manual_seed(opts.seed or 0)
  local perm = ember.randperm(m * m, {generator = g}):totable()
  local train, test = {inputs = {}, targets = {}}, {inputs = {}, targets = {}}
  local used = {}
  local function key(a, b) return a < b and a * m + b or b * m + a end
  for _, p in ipairs(perm) do
    local a, b = (p - 1) // m, (p - 1) % m
    local part
    if #train.inputs < n_train then
      part = train
      used[key(a, b)] = true
    elseif not used[key(a, b)] then
      part = test
      used[key(a, b)] = true
    end
    if part then
      part.inputs[#part.inputs + 1] = a .. "+" .. b
      part.targets[#part.targets + 1] = tostring(a + b)
    end
    if #test.inputs >= n_test then break end
  end
  return {train = train, test = test}
end

return M
