--- ember.data.sort_of_clevr: the Sort-of-CLEVR generator (Santoro et al. 2017).
--
-- A scene is 6 objects on a 75x75 white image, each a square or a circle
-- about 10 px across, none overlapping, each in its own colour (red, blue,
-- green, orange, yellow, gray), so a colour names exactly one object.
-- Every image gets 10 non-relational and 10 relational questions:
--   non-relational: shape of the <c> object? is it on the left? on the top?
--   relational: shape of the object closest to <c>? furthest from <c>?
--               how many objects have the shape of <c>?
-- Answers come from a vocabulary of 10: yes no rectangle circle 1..6.
--
--   local sort_of_clevr = require "ember.data.sort_of_clevr"
--   local ds = sort_of_clevr.generate{n_images = 20, seed = 1}   -- the paper's set: 9800 (train)
--   -- ds.centers float32 [N, 6, 2] (x, y in pixels), ds.shapes int64 [N, 6]
--   -- (1 rectangle, 2 circle), ds.questions int64 [N, 20, 2] (question tokens),
--   -- ds.answers int64 [N, 20] (1..10), ds.relational bool [N, 20]
--   print(ds.questions.shape, ds.answers.shape)   --> ember.Size{20, 20, 2} ember.Size{20, 20}
--   local idx = ember.tensor({3, 1, 4}, {dtype = "int64"})   -- a batch: images 3, 1, 4
--   local img = sort_of_clevr.render(ds, idx)   -- float32 [B, 3, 75, 75] in [0, 1]
--   print(img.shape)                             --> ember.Size{3, 3, 75, 75}
--   local q = ds.questions[1][1]                 -- image 1's first question: {kind, colour}
--   print(sort_of_clevr.question_text(q[1]:item() - 6, q[2]:item()))   -- tokens 7..12 are the kinds
--
-- Images are rendered from the scene descriptions per batch with tensor
-- ops, so 10,000 scenes cost a few hundred kilobytes instead of 675 MB of
-- float pixels.
-- @module data.sort_of_clevr
local error = require("ember._errors").error -- raises at the user's line
local Rng = require "ember.data.rng"

local M = {}

M.SIZE = 75
M.OBJECT_SIZE = 10
M.N_OBJECTS = 6
M.COLOURS = {"red", "blue", "green", "orange", "yellow", "gray"}
M.RGB = {{255, 0, 0}, {0, 0, 255}, {0, 160, 0}, {255, 156, 0}, {255, 230, 0}, {128, 128, 128}}
M.SHAPES = {"rectangle", "circle"}
M.ANSWERS = {"yes", "no", "rectangle", "circle", "1", "2", "3", "4", "5", "6"}
-- Question kinds: the first three are non-relational.
M.KINDS = {"shape", "left", "top", "closest", "furthest", "count"}
-- Question tokens: colours 1..6, then kinds 7..12. A question is {kind, colour}.
M.QUESTION_TOKENS = {"red", "blue", "green", "orange", "yellow", "gray",
                     "shape", "left", "top", "closest", "furthest", "count"}
local YES, NO, RECT = 1, 2, 3

--- The sentence of a question (kind and colour 1-based).
function M.question_text(kind, colour)
  local c = M.COLOURS[colour]
  return ({
    ("What is the shape of the %s object?"):format(c),
    ("Is the %s object on the left?"):format(c),
    ("Is the %s object on the top?"):format(c),
    ("What is the shape of the object closest to the %s object?"):format(c),
    ("What is the shape of the object furthest from the %s object?"):format(c),
    ("How many objects have the shape of the %s object?"):format(c),
  })[kind]
end

-- Centers for 6 objects, rejection-sampled until every pair of centers is
-- at least min_dist apart (squares of side 10 cannot touch then).
local function place(rng, min_dist)
  local half = M.OBJECT_SIZE / 2
  local lo, hi = half + 1, M.SIZE - half - 1
  while true do
    local xs, ys, ok = {}, {}, true
    for k = 1, M.N_OBJECTS do
      local x, y
      for _ = 1, 100 do
        x, y = lo + rng:uniform() * (hi - lo), lo + rng:uniform() * (hi - lo)
        ok = true
        for j = 1, k - 1 do
          if (xs[j] - x) ^ 2 + (ys[j] - y) ^ 2 < min_dist * min_dist then ok = false break end
        end
        if ok then break end
      end
      if not ok then break end
      xs[k], ys[k] = x, y
    end
    if ok then return xs, ys end
  end
end

--- The answer (1..10) to question kind about object c of a scene.
function M.answer(kind, c, xs, ys, shapes)
  local mid = M.SIZE / 2
  if kind == 1 then return RECT + shapes[c] - 1 end
  if kind == 2 then return xs[c] < mid and YES or NO end
  if kind == 3 then return ys[c] < mid and YES or NO end
  if kind == 6 then
    local n = 0
    for k = 1, M.N_OBJECTS do if shapes[k] == shapes[c] then n = n + 1 end end
    return 4 + n -- "1" is answer 5
  end
  local best, best_d
  for k = 1, M.N_OBJECTS do
    if k ~= c then
      local d = (xs[k] - xs[c]) ^ 2 + (ys[k] - ys[c]) ^ 2
      if not best or (kind == 4 and d < best_d) or (kind == 5 and d > best_d) then best, best_d = k, d end
    end
  end
  return RECT + shapes[best] - 1
end

--- opts: n_images, seed (0), n_nonrel (10), n_rel (10), min_dist (16).
function M.generate(opts)
  local ember = require "ember"
  opts = opts or {}
  local n = opts.n_images or error("sort_of_clevr.generate: n_images is required", 2)
  local n_nonrel, n_rel = opts.n_nonrel or 10, opts.n_rel or 10
  local nq = n_nonrel + n_rel
  local rng = Rng.new(opts.seed or 0)
  local centers, shapes, questions, answers, relational = {}, {}, {}, {}, {}
  for _ = 1, n do
    local xs, ys = place(rng, opts.min_dist or 16)
    local sh = {}
    for k = 1, M.N_OBJECTS do
      sh[k] = rng:int(1, 2)
      centers[#centers + 1] = xs[k]
      centers[#centers + 1] = ys[k]
      shapes[#shapes + 1] = sh[k]
    end
    for q = 1, nq do
      local rel = q > n_nonrel
      local kind = rng:int(1, 3) + (rel and 3 or 0)
      local colour = rng:int(1, M.N_OBJECTS)
      questions[#questions + 1] = 6 + kind
      questions[#questions + 1] = colour
      answers[#answers + 1] = M.answer(kind, colour, xs, ys, sh)
      relational[#relational + 1] = rel
    end
  end
  return {
    n = n,
    centers = ember.tensor(centers):view(n, M.N_OBJECTS, 2),
    shapes = ember.tensor(shapes, {dtype = "int64"}):view(n, M.N_OBJECTS),
    questions = ember.tensor(questions, {dtype = "int64"}):view(n, nq, 2),
    answers = ember.tensor(answers, {dtype = "int64"}):view(n, nq),
    relational = ember.tensor(relational):view(n, nq),
  }
end

-- Pixel grids, made once.
local grid_x, grid_y
local function grids(ember)
  if not grid_x then
    grid_x = (ember.arange(0, M.SIZE) + 0.5):view(1, 1, 1, M.SIZE)
    grid_y = (ember.arange(0, M.SIZE) + 0.5):view(1, 1, M.SIZE, 1)
  end
  return grid_x, grid_y
end

--- Renders scenes idx (a 1-based int64 tensor; all when nil) of ds as
-- float32 [B, 3, 75, 75] in [0, 1]: white, with each object in its colour.
function M.render(ds, idx)
  local ember = require "ember"
  local centers, shapes = ds.centers, ds.shapes
  if idx then centers, shapes = centers:index_select(1, idx), shapes:index_select(1, idx) end
  local B, K, S = centers:size(1), M.N_OBJECTS, M.SIZE
  local gx, gy = grids(ember)
  local cx = centers:select(3, 1):view(B, K, 1, 1)
  local cy = centers:select(3, 2):view(B, K, 1, 1)
  local dx, dy = (gx - cx):abs(), (gy - cy):abs()
  local half = M.OBJECT_SIZE / 2
  local square = dx:le(half):logical_and(dy:le(half))
  local circle = (dx * dx + dy * dy):lt(half * half - 0.5) -- no lone pixel on the rim
  local is_circle = shapes:eq(2):view(B, K, 1, 1)
  local inside = ember.where(is_circle, circle, square):float()       -- [B, K, S, S]
  -- each pixel is inside at most one object: ink = sum_k inside_k * (1 - rgb_k)
  local ink = {}
  for k = 1, K do
    ink[k] = {1 - M.RGB[k][1] / 255, 1 - M.RGB[k][2] / 255, 1 - M.RGB[k][3] / 255}
  end
  local ink_t = ember.tensor(ink)                                      -- [K, 3]
  local per_pixel = inside:view(B, K, S * S):transpose(2, 3):reshape(B * S * S, K)
    :matmul(ink_t):view(B, S * S, 3)
  return (1 - per_pixel):transpose(2, 3):reshape(B, 3, S, S)
end

return M
