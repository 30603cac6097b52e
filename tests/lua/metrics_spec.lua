-- ember.metrics (CSV log, curves as PNG) and the cairo binding behind the
-- plots (core/lua/l_plot.c).
local ember = require "ember"
local metrics = require "ember.metrics"

local function tmpname(ext)
  local p = os.tmpname()
  os.remove(p)
  return p .. (ext or "")
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- width, height from a PNG's IHDR chunk; nil when not a PNG.
local function png_size(path)
  local s = read(path)
  if s:sub(1, 8) ~= "\137PNG\r\n\26\n" or s:sub(13, 16) ~= "IHDR" then return nil end
  local w, h = string.unpack(">I4I4", s, 17)
  return w, h
end

describe("ember.metrics CSV log", function()
  it("writes a header and one row per log call, empty fields for absent columns", function()
    local path = tmpname(".csv")
    local log = metrics.new(path, {"step", "loss", "note"})
    log:log{step = 1, loss = 0.5}
    log:log{step = 2, note = 'say "hi", ok'}
    log:close()
    assert.are.equal('step,loss,note\n1,0.5,\n2,,"say ""hi"", ok"\n', read(path))
    local cols, rows = metrics.read_csv(path)
    os.remove(path)
    assert.are.same({"step", "loss", "note"}, cols)
    assert.are.same({{step = 1, loss = 0.5}, {step = 2, note = 'say "hi", ok'}}, rows)
  end)

  it("flushes every row, so a stopped run keeps its log", function()
    local path = tmpname(".csv")
    local log = metrics.new(path, {"step"})
    log:log{step = 7}
    assert.are.equal("step\n7\n", read(path))
    log:close()
    os.remove(path)
  end)

  it("rejects unknown columns and bad arguments", function()
    local path = tmpname(".csv")
    local log = metrics.new(path, {"step"})
    assert.has_error(function() log:log{loss = 1} end, "metrics: column 'loss' is not one of step")
    log:close()
    os.remove(path)
    assert.has_error(function() metrics.new(path, {}) end)
    assert.has_error(function() metrics.new("/nonexistent/dir/m.csv", {"a"}) end)
  end)

  it("gives the series of rows that have both columns", function()
    local path = tmpname(".csv")
    local log = metrics.new(path, {"step", "loss", "acc"})
    log:log{step = 1, loss = 3}
    log:log{step = 2, acc = 0.5}
    log:log{step = 3, loss = 1}
    log:close()
    os.remove(path)
    local xs, ys = log:series("step", "loss")
    assert.are.same({1, 3}, xs)
    assert.are.same({3, 1}, ys)
  end)
end)

describe("ember.metrics.Means", function()
  it("keeps weighted running means and resets", function()
    local m = metrics.Means()
    assert.is_nil(m:mean("loss"))
    m:add("loss", 2 * 4, 4)
    m:add("loss", 1 * 4, 4)
    m:add("steps", 3)
    assert.are.equal(1.5, m:mean("loss"))
    assert.are.equal(3, m:mean("steps"))
    m:reset()
    assert.is_nil(m:mean("loss"))
  end)
end)

describe("PNG plots", function()
  it("draws line charts with cairo", function()
    assert.is_function(ember.plot_lines)
    local path = tmpname(".png")
    local log = metrics.new(tmpname(".csv"), {"step", "loss", "acc"})
    for i = 1, 20 do log:log{step = i, loss = 2 / i, acc = i % 5 == 0 and 1 - 1 / i or nil} end
    log:close()
    assert.is_true(log:plot(path, {x = "step", y = {"loss", "acc"}, title = "curves"}))
    local w, h = png_size(path)
    os.remove(path)
    assert.are.equal(800, w)
    assert.are.equal(500, h)
  end)

  it("skips non-finite points and draws a single point", function()
    local path = tmpname(".png")
    ember.plot_lines(path, {width = 300, height = 200, series = {
      {name = "a", x = {1, 2, 3}, y = {1, 0 / 0, math.huge}}, {name = "b", x = {5}, y = {2}}}})
    assert.are.same({300, 200}, {png_size(path)})
    os.remove(path)
  end)

  it("reports bad specs clearly", function()
    local path = tmpname(".png")
    assert.has_error(function() ember.plot_lines(path, {series = {}}) end,
      "ember.plot_lines: need 1 to 16 series, got 0")
    assert.has_error(function() ember.plot_lines(path, {series = {{x = {1, 2}, y = {1}}}}) end,
      "ember.plot_lines: series 1 has 2 x values and 1 y values")
    assert.has_error(function() ember.plot_lines(path, {series = {{x = {1}, y = {"a"}}}}) end)
    assert.has_error(function() ember.plot_lines(path, {series = {{x = {0 / 0}, y = {1}}}}) end,
      "ember.plot_lines: no finite points to plot")
    assert.has_error(function() ember.plot_lines(path, {width = 10, series = {{x = {1}, y = {1}}}}) end)
    local ok, err = pcall(ember.plot_lines, "/nonexistent/dir/x.png", {series = {{x = {1}, y = {1}}}})
    assert.is_false(ok)
    assert.matches("cannot write /nonexistent/dir/x.png", err)
  end)

  it("draws a heatmap over an image, upscaled", function()
    local path = tmpname(".png")
    local img = ember.ones(3, 10, 20)
    ember.plot_heatmap(path, {image = img, heat = ember.rand(2, 4), scale = 5, title = "two\nlines"})
    local w, h = png_size(path)
    os.remove(path)
    assert.are.equal(300, w) -- 100 px of image, widened to fit the title
    assert.are.equal(50 + 6 + 36, h)
    assert.has_error(function() ember.plot_heatmap(path, {image = img, heat = ember.rand(3, 4)}) end,
      "ember.plot_heatmap: heat [3, 4] must divide the image [10, 20]")
    assert.has_error(function() ember.plot_heatmap(path, {heat = ember.rand(3)}) end)
    assert.has_error(function() ember.plot_heatmap(path, {heat = ember.rand(2, 2), image = ember.rand(2, 4, 4)}) end)
  end)
end)

describe("ember.progress", function()
  local progress = require "ember.progress"

  it("shows the label, counts, metrics in a stable order, rate and ETA", function()
    local bar = progress.new{total = 200, label = "epoch 1/3", unit = "words"}
    bar.start = bar.start - 10 -- pretend 10 s went by
    bar.done = 100
    bar.order, bar.metrics = {"acc", "loss"}, {acc = 0.5, loss = 1.25}
    local text = bar:line()
    assert.matches("^epoch 1/3 %[############%.%.%.%.%.%.%.%.%.%.%.%.%] 100/200", text)
    assert.matches("acc 0.5  loss 1.25", text, 1, true)
    assert.matches("10%.?%d* words/s", text)
    assert.matches("eta 00:1%d$", text)
  end)

  it("needs a total", function()
    assert.has_error(function() progress.new{} end)
  end)
end)
