--- ember.data.transforms: image transforms on tensors, as
-- torchvision.transforms (0.14, PyTorch 1.13's) on tensor images.
--
-- A transform is a callable object, `t(img)`, that prints as torchvision
-- prints it; it takes an image [C, H, W] or a batch [N, C, H, W]
-- (the geometric ones also [H, W]) in float32, float64 or bfloat16, the
-- geometric ones also int64 (ember has no uint8: an int64 image holds 8-bit
-- values 0..255). Arguments come in torchvision's positional order, by
-- name in one table, or both: `RandomCrop(32, 4)`, `RandomCrop(32,
-- {padding = 4})`, `RandomCrop{size = 32, padding = 4}`.
--
-- * geometry (`data.transforms.geometry`): Resize, CenterCrop, Pad, RandomCrop,
--   RandomHorizontalFlip, RandomVerticalFlip, RandomResizedCrop;
-- * values (`data.transforms.color`): Normalize, ConvertImageDtype, ToDtype,
--   Grayscale, ColorJitter, GaussianBlur, RandomErasing;
-- * containers (`data.transforms.containers`): Compose, Lambda, RandomApply,
--   RandomChoice, RandomOrder, PerSample;
-- * `transforms.functional`: the operations themselves (hflip, crop, pad,
--   resize, normalize, adjust_hue, gaussian_blur, ...), positions 1-based.
--
-- Randomness: a random transform takes `{generator = g}` (an
-- ember.Generator) and draws from it, else from ember's default generator
-- (reproducible after ember.manual_seed), with torchvision's draws in
-- torchvision's order (the numbers differ from torch's: the generators are
-- not torch's). It draws once per call: one image gets one crop, flip or
-- jitter, and so does a whole batch -- every image of a batch the same, as
-- torchvision on a batch tensor. For a draw per image, transform the images
-- one by one: in a dataset's get(i), through `data.TransformDataset(ds,
-- transform)` (each row its own call, then DataLoader batches them), or
-- with `transforms.PerSample(t)` on a batch.
--
--   local data = require "ember.data"
--   local T = data.transforms
--   local train_tf = T.Compose{
--     T.RandomCrop(28, {padding = 2}),
--     T.RandomHorizontalFlip(),
--     T.Normalize({0.286}, {0.353}),
--   }
--   local x, y = ember.rand(6, 1, 28, 28), ember.arange(1, 7, {dtype = "int64"})
--   local ds = data.TransformDataset(data.TensorDataset(x, y), train_tf)
--   for xb, yb in data.DataLoader(ds, {batch_size = 4, shuffle = true}):iter() do
--     print(xb.shape)   -- ember.Size{4, 1, 28, 28}, then ember.Size{2, 1, 28, 28}
--   end
-- @module data.transforms
local M = { functional = require "ember.data.transforms_functional" }

for _, group in ipairs { "ember.data.transforms_geometry", "ember.data.transforms_color",
  "ember.data.transforms_containers" } do
  for k, v in pairs(require(group)) do
    if k:sub(1, 1) ~= "_" then M[k] = v end
  end
end

return M
