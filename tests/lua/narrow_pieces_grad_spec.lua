-- The gradient of narrow pieces of one tensor (chunk, split, a joined q/k/v
-- projection) is put into the tensor's gradient in place: the first piece
-- makes a zero whole, the others are copied into regions still untouched
-- and added where something was already written (an overlapping piece, the
-- whole tensor used as well). Every order must give the sum.
local ember = require "ember"

local function maxdiff(a, b) return (a - b):abs():max():item() end

-- x [4, 6] -> y = 2x (a node whose gradient collects the pieces' gradients);
-- `uses` lists what the loss reads, in the order the graph is built:
-- {lo, len} a narrow of y along dim 2 (1-based), "whole" y itself. The
-- loss is sum_k sum(use_k * w_k); the expected dL/dx is 2 * the sum of each
-- w_k placed at its region.
local function check(uses, dtype)
  ember.manual_seed(7)
  local x = ember.randn({ 4, 6 }, { dtype = "float64" }):to(dtype):requires_grad_()
  local y = x * 2
  local loss, want = nil, ember.zeros({ 4, 6 }, { dtype = "float64" })
  for k, u in ipairs(uses) do
    local part = u == "whole" and y or y:narrow(2, u[1], u[2])
    -- small integers: every sum is exact in bfloat16 too
    local w = (ember.arange(1, part:numel() + 1, { dtype = "float64" }):view(table.unpack(part.shape)) + k * 7) % 9 - 4
    local term = (part * w:to(dtype)):sum()
    loss = loss and loss + term or term
    if u == "whole" then want = want + w * 2
    else want:narrow(2, u[1], u[2]):add_(w * 2) end
  end
  -- freed memory of the whole's size holding 7s: a region the pieces leave
  -- unwritten reads 7s unless it is zeroed before use
  for _ = 1, 8 do local junk = ember.full({ 4, 6 }, 7, { dtype = dtype }) junk = nil end -- luacheck: ignore
  collectgarbage("collect")
  loss:backward()
  return maxdiff(x.grad:double(), want)
end

describe("gradients of narrow pieces of one tensor", function()
  for _, dtype in ipairs({ "float64", "bfloat16" }) do
    local cases = {
      { "three disjoint pieces (chunk)", { { 1, 2 }, { 3, 2 }, { 5, 2 } } },
      { "pieces in another order", { { 5, 2 }, { 1, 2 }, { 3, 2 } } },
      { "two pieces, a gap left zero", { { 1, 2 }, { 5, 2 } } },
      { "a piece used twice", { { 1, 3 }, { 1, 3 }, { 4, 3 } } },
      { "overlapping pieces", { { 1, 4 }, { 3, 4 } } },
      { "overlap after a disjoint one", { { 5, 2 }, { 1, 3 }, { 2, 3 } } },
      { "the whole first, then pieces", { "whole", { 1, 3 }, { 4, 3 } } },
      { "a piece, the whole, a piece", { { 1, 3 }, "whole", { 4, 3 } } },
      { "pieces, then the whole", { { 1, 3 }, { 4, 3 }, "whole" } },
      { "six one-column pieces (more than the record holds)", { { 1, 1 }, { 2, 1 }, { 3, 1 }, { 4, 1 }, { 5, 1 }, { 6, 1 } } },
      { "six pieces and a repeat of the first", { { 1, 1 }, { 2, 1 }, { 3, 1 }, { 4, 1 }, { 5, 1 }, { 6, 1 }, { 1, 1 } } },
    }
    for _, c in ipairs(cases) do
      it(dtype .. ": " .. c[1], function()
        assert.are.equal(0, check(c[2], dtype))
      end)
    end
  end

  it("chunk's pieces through further ops, against a float64 gradcheck", function()
    local gradcheck = require "tests.lua.helpers.gradcheck"
    ember.manual_seed(8)
    local x = ember.randn({ 3, 6 }, { dtype = "float64" })
    gradcheck.check(function(a)
      local y = a:tanh()
      local p = y:chunk(3, 2)
      return p[1] * p[2] + p[3]:exp() + y:narrow(2, 2, 2)
    end, { x })
  end)
end)
