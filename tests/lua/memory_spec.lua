-- The Lua GC must account for tensor memory: loops that drop tensors every
-- step keep their resident memory flat.
local ember = require "ember"

local PAGE = 4096 -- /proc/self/statm counts pages

local function rss()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("n", "n")
  f:close()
  return resident * PAGE
end

describe("memory", function()
  it("stays flat over a 10,000-step loop of small ops with autograd", function()
    ember.manual_seed(0)
    local w = ember.randn(16, 16, { requires_grad = true })
    local b = ember.zeros(16, { requires_grad = true })
    local at2000
    for step = 1, 10000 do
      local x = ember.randn(8, 16)
      local y = (x:matmul(w) + b):relu()
      local loss = (y * y):mean()
      loss:backward()
      ember.no_grad(function()
        w:add_(w.grad, -1e-3)
        b:add_(b.grad, -1e-3)
      end)
      w.grad, b.grad = nil, nil
      if step == 2000 then at2000 = rss() end
    end
    local at10000 = rss()
    local ratio = at10000 / at2000
    assert(ratio <= 1.10 and ratio >= 0.90,
      ("RSS went from %.1f MB at step 2000 to %.1f MB at step 10000"):format(at2000 / 1e6, at10000 / 1e6))
  end)

  it("frees dropped tensors at the pace they are made (3 MB per step)", function()
    -- Each step makes ~3 MB of tensors that the Lua GC sees as a few bytes
    -- of userdata each; without accounting this grows by hundreds of MB.
    local w = ember.full({ 256, 512 }, 0.01, { requires_grad = true })
    local start = rss()
    local peak = start
    for _ = 1, 150 do
      local x = ember.full({ 256, 512 }, 0.5)
      local loss = (w * x):exp():mean()
      loss:backward()
      w.grad = nil
      peak = math.max(peak, rss())
    end
    local growth = (peak - start) / 1e6
    assert(growth < 64, ("RSS grew by %.1f MB"):format(growth))
  end)

  it("keeps tensor memory bounded in generational mode too", function()
    -- A minor collection promotes live tensors to the old generation; the
    -- binding then forces full collections as tensor memory doubles (+64 MB).
    collectgarbage("generational")
    local ok, err = pcall(function()
      local peak = 0
      for _ = 1, 200 do -- 1.5 MB per step, 300 MB in all
        local x = ember.ones(256, 512)
        local y = (x * 2):exp()
        peak = math.max(peak, ember.live_bytes())
      end
      assert(peak < 100e6, ("live tensor bytes peaked at %.1f MB"):format(peak / 1e6))
    end)
    collectgarbage("incremental")
    assert(ok, err)
  end)
end)
