--- ember.data.fashion_mnist: the idx files of Debian's dataset-fashion-mnist.
--
--   local fashion_mnist = require "ember.data.fashion_mnist"
--   local x, y = fashion_mnist.load("train")   -- x float32 [60000, 28, 28] in [0, 1]
--                                               -- y int64 [60000], labels 1..10
--   local tx, ty = fashion_mnist.load("test", {limit = 10})   -- the first 10 of 10,000
--   print(tx.shape, ty.shape)                   --> ember.Size{10, 28, 28} ember.Size{10}
--   print(fashion_mnist.CLASSES[ty[1]:item()])  -- the name of a label
--
-- The files are read from EMBER_FASHION_MNIST (a folder), else from M.DIR
-- (Debian's package).
-- @module data.fashion_mnist
local error = require("ember._errors").error -- raises at the user's line
local source = require "ember.data.source"

local M = {}

M.DIR = "/usr/share/datasets/fashion-mnist"
M.PACKAGE = "dataset-fashion-mnist"
M.CLASSES = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
             "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}

local function be32(s, pos)
  local a, b, c, d = s:byte(pos, pos + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function read(name)
  local dir = os.getenv("EMBER_FASHION_MNIST") or M.DIR
  return source.read_gz("fashion_mnist", dir .. "/" .. name, M.PACKAGE), dir .. "/" .. name
end

--- split: "train" (60,000 images) or "test" (10,000). opts.limit: keep the
-- first n. Returns images float32 [n, 28, 28] scaled to [0, 1] and 1-based
-- int64 labels [n].
function M.load(split, opts)
  local ember = require "ember"
  local prefix = ({train = "train", test = "t10k"})[split]
  if not prefix then error(("fashion_mnist.load: split must be 'train' or 'test', got %s"):format(tostring(split)), 2) end
  if opts ~= nil and type(opts) ~= "table" then
    error(("fashion_mnist.load: options must be a table {limit = n}, got %s"):format(type(opts)), 2)
  end
  for k in pairs(opts or {}) do
    if k ~= "limit" then error(("fashion_mnist.load: unknown option '%s' (the option is limit)"):format(tostring(k)), 2) end
  end
  local limit = opts and opts.limit
  if limit ~= nil and (math.type(limit) ~= "integer" or limit < 0) then
    error(("fashion_mnist.load: limit must be an integer >= 0, got %s"):format(tostring(limit)), 2)
  end
  local img, ipath = read(prefix .. "-images-idx3-ubyte.gz")
  local lab, lpath = read(prefix .. "-labels-idx1-ubyte.gz")
  if #img < 16 or be32(img, 1) ~= 2051 then error("fashion_mnist: " .. ipath .. " is not an idx3 image file", 0) end
  if #lab < 8 or be32(lab, 1) ~= 2049 then error("fashion_mnist: " .. lpath .. " is not an idx1 label file", 0) end
  local n, rows, cols = be32(img, 5), be32(img, 9), be32(img, 13)
  if be32(lab, 5) ~= n then
    error(("fashion_mnist: %d images but %d labels"):format(n, be32(lab, 5)), 0)
  end
  if limit then n = math.min(n, limit) end
  local x = ember.from_bytes(img, {n, rows, cols}, {offset = 16}) / 255
  local y = ember.from_bytes(lab, {n}, {offset = 8, dtype = "int64"}) + 1
  return x, y
end

return M
