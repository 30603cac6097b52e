--- ember.data.transforms' containers, as torchvision's: Compose, Lambda,
-- RandomApply, RandomChoice and RandomOrder, and ember's PerSample (a
-- transform drawn anew for each image of a batch). Their parts are
-- transforms or any callable (a Lua function of the image).
--
--   local T = require "ember.data.transforms"
--   local t = T.Compose{T.RandomHorizontalFlip(), T.Normalize({0.5}, {0.5})}
--   print(t(ember.ones(1, 2, 2)):sum():item())   --> 4.0
--   print(tostring(t):gsub("\n", " | "))   --> Compose( | RandomHorizontalFlip(p=0.5) | Normalize(mean=[0.5], std=[0.5]) | ) 3
-- @module data.transforms.containers
local U = require "ember.data._transforms_util"
local raise = U.raise

local M = {}

-- The list of transforms of who: a list of callables (or, when one is
-- allowed, a single one).
local function transforms_of(who, ts, single_ok)
  if single_ok and U.is_callable(ts) then return { ts } end
  if type(ts) ~= "table" or getmetatable(ts) ~= nil then
    raise("%s: transforms must be a list of transforms, got %s", who, type(ts))
  end
  local n = 0
  for k in pairs(ts) do
    if math.type(k) ~= "integer" or k < 1 then raise("%s: transforms must be a list, got a key %s", who, tostring(k)) end
    n = math.max(n, k)
  end
  for i = 1, n do
    if not U.is_callable(ts[i]) then
      raise("%s: transform %d is a %s, not a transform (a function or a callable object)", who, i, type(ts[i]))
    end
  end
  local out = {}
  for i = 1, n do out[i] = ts[i] end
  return out
end

local function str(t) return type(t) == "function" and "<function>" or tostring(t) end

-- "Name(\n    line\n    t1\n    t2\n)", nested printouts indented.
local function listing(name, first, ts)
  local lines = { name .. "(" }
  if first then lines[#lines + 1] = "    " .. first end
  for _, t in ipairs(ts) do lines[#lines + 1] = "    " .. U.indent(str(t)) end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- ---- Compose -------------------------------------------------------------

local Compose = U.class("Compose")
M.Compose = Compose

--- Compose(transforms): the transforms (a list) applied in order.
-- @usage local T = require "ember.data.transforms"
-- local t = T.Compose{T.CenterCrop(2), T.Lambda(function(x) return x * 2 end)}
-- print(t(ember.ones(1, 4, 4)):sum():item())   --> 8.0
function Compose.new(transforms)
  return setmetatable({ transforms = transforms_of("Compose", transforms) }, Compose)
end

--- The image through every transform in turn.
function Compose:forward(img)
  for _, t in ipairs(self.transforms) do img = t(img) end
  return img
end

function Compose:_repr() return listing("Compose", nil, self.transforms) end

-- ---- Lambda --------------------------------------------------------------

local Lambda = U.class("Lambda")
M.Lambda = Lambda

--- Lambda(fn): a function of the image as a transform.
function Lambda.new(fn)
  if not U.is_callable(fn) then raise("Lambda: expected a function, got %s", type(fn)) end
  return setmetatable({ lambd = fn }, Lambda)
end

--- fn(img).
function Lambda:forward(img) return self.lambd(img) end

function Lambda:_repr() return "Lambda()" end

-- ---- RandomApply ---------------------------------------------------------

local RandomApply = U.class("RandomApply")
M.RandomApply = RandomApply

--- RandomApply(transforms [, p=0.5] [, {generator = g}]): with probability
-- p (one draw per call), all the transforms in order; else the image as
-- it is. transforms: a list, or one transform.
-- @usage local T = require "ember.data.transforms"
-- local t = T.RandomApply({T.Lambda(function(x) return -x end)}, 0)
-- print(t(ember.ones(1, 1, 1)):item())   --> 1.0
function RandomApply.new(...)
  local who = "RandomApply"
  local o = U.args(who, { "transforms", "p" }, { "generator" }, ...)
  return setmetatable({ transforms = transforms_of(who, o.transforms, true), p = U.prob(who, o.p, 0.5),
    generator = o.generator }, RandomApply)
end

--- The image through the transforms, or as it is.
function RandomApply:forward(img)
  if self.p < U.rand(self.generator) then return img end -- torchvision's test
  for _, t in ipairs(self.transforms) do img = t(img) end
  return img
end

function RandomApply:_repr() return listing("RandomApply", "p=" .. U.num(self.p), self.transforms) end

-- ---- RandomChoice --------------------------------------------------------

local RandomChoice = U.class("RandomChoice")
M.RandomChoice = RandomChoice

--- RandomChoice(transforms [, p] [, {generator = g}]): one of the
-- transforms, picked each call (weights p, a list of numbers >= 0; by
-- default all the same).
function RandomChoice.new(...)
  local who = "RandomChoice"
  local o = U.args(who, { "transforms", "p" }, { "generator" }, ...)
  local ts = transforms_of(who, o.transforms)
  if #ts == 0 then raise("%s: give at least one transform", who) end
  local p = o.p
  if p ~= nil then
    if type(p) ~= "table" or #p ~= #ts then
      raise("%s: p must be a list of %d weights (one per transform), got %s", who, #ts,
        type(p) == "table" and U.py(p, "[]") or tostring(p))
    end
    local total = 0
    for _, w in ipairs(p) do
      if type(w) ~= "number" or not (w >= 0) then raise("%s: the weights p must be numbers >= 0, got %s", who, U.py(p, "[]")) end
      total = total + w
    end
    if not (total > 0) then raise("%s: the weights p add up to 0", who) end
  end
  return setmetatable({ transforms = ts, p = p, generator = o.generator }, RandomChoice)
end

--- The image through one transform, picked at random.
function RandomChoice:forward(img)
  local ts, p = self.transforms, self.p
  local u = U.rand(self.generator)
  local k = #ts
  if p == nil then
    k = math.min(math.floor(u * #ts) + 1, #ts)
  else
    local total = 0
    for _, w in ipairs(p) do total = total + w end
    local acc = 0
    for i, w in ipairs(p) do
      acc = acc + w / total
      if u < acc then k = i break end
    end
  end
  return ts[k](img)
end

function RandomChoice:_repr() return listing("RandomChoice", "p=" .. U.py(self.p, "[]"), self.transforms) end

-- ---- RandomOrder ---------------------------------------------------------

local RandomOrder = U.class("RandomOrder")
M.RandomOrder = RandomOrder

--- RandomOrder(transforms [, {generator = g}]): all the transforms, in an
-- order drawn each call (randperm).
function RandomOrder.new(...)
  local o = U.args("RandomOrder", { "transforms" }, { "generator" }, ...)
  return setmetatable({ transforms = transforms_of("RandomOrder", o.transforms), generator = o.generator },
    RandomOrder)
end

--- The image through the transforms in a random order.
function RandomOrder:forward(img)
  if #self.transforms == 0 then return img end
  for _, k in ipairs(U.randperm(self.generator, #self.transforms)) do img = self.transforms[k](img) end
  return img
end

function RandomOrder:_repr() return listing("RandomOrder", nil, self.transforms) end

-- ---- PerSample -----------------------------------------------------------

local PerSample = U.class("PerSample")
M.PerSample = PerSample

--- PerSample(transform): applies transform to each image of a batch [N,
-- C, H, W] on its own (its own draws, image 1 first) and stacks the
-- results, which must have one shape; an image [C, H, W] goes through
-- transform as it is. torchvision has no such thing: its transforms, and
-- ember's, draw once per call, so a batch gets one crop or flip for all its
-- images. (In a dataset's get(i), or `data.TransformDataset`, each image is
-- its own call already.)
-- @usage local T = require "ember.data.transforms"
-- local t = T.PerSample(T.RandomHorizontalFlip())
-- print(t(ember.rand(8, 1, 4, 4)).shape)   --> ember.Size{8, 1, 4, 4}
function PerSample.new(transform)
  if not U.is_callable(transform) then
    raise("PerSample: expected a transform (a function or a callable object), got %s", type(transform))
  end
  return setmetatable({ transform = transform }, PerSample)
end

--- Each image of the batch transformed on its own, stacked.
function PerSample:forward(batch)
  if not U.is_tensor(batch) then raise("PerSample: expected a batch tensor [N, C, H, W], got %s", type(batch)) end
  if batch.ndim < 4 then return self.transform(batch) end
  local out = {}
  for i = 1, batch.shape[1] do
    out[i] = self.transform(batch[i])
    if not U.is_tensor(out[i]) then raise("PerSample: the transform returned a %s for image %d, not a tensor", type(out[i]), i) end
    if i > 1 and U.shape_str(out[i]) ~= U.shape_str(out[1]) then
      raise("PerSample: the transform gave image %d the shape %s but image 1 %s; stacking needs one shape", i,
        U.shape_str(out[i]), U.shape_str(out[1]))
    end
  end
  if #out == 0 then return batch end
  return U.ember().stack(out, 1)
end

function PerSample:_repr() return "PerSample(" .. U.indent(str(self.transform)) .. ")" end

return M
