#!/usr/bin/python3
"""Writes tests/fixtures/transforms.lua: torchvision.transforms' deterministic
tensor operations (torchvision 0.14, the one of PyTorch 1.13), for
tests/lua/data_transforms_spec.lua.

torchvision is not installed here, so each operation is written below in
plain torch the way torchvision 0.14's functional_tensor.py / functional.py
write it (flips by flip(), crops by slicing, padding through F.pad and
_pad_symmetric's index lists, resize through F.interpolate with
align_corners=False, Python's round() for center_crop, _blend, _rgb2hsv and
_hsv2rgb, the float32 Gaussian kernel and its depthwise conv2d). ember's
positions are 1-based, so each case stores ember's arguments (`args`, `n`
of them), the name of its input in `inputs` (`x`) and the output (`out`).

Run with Debian's python3-torch:  /usr/bin/python3 tests/gen_transforms_fixtures.py
"""
import math
import os

import torch
import torch.nn.functional as F

from fixture_writer import Writer

torch.manual_seed(20260501)
HERE = os.path.dirname(os.path.abspath(__file__))
D = torch.float64


# ---- torchvision 0.14, in plain torch ------------------------------------

def hflip(img):
    return img.flip(-1)


def vflip(img):
    return img.flip(-2)


def parse_padding(padding):  # torchvision's forms -> F.pad's [left, right, top, bottom]
    if isinstance(padding, int):
        padding = [padding]
    if len(padding) == 1:
        return [padding[0]] * 4
    if len(padding) == 2:
        return [padding[0], padding[0], padding[1], padding[1]]
    return [padding[0], padding[2], padding[1], padding[3]]


def pad_symmetric(img, p):  # _pad_symmetric
    w, h = img.shape[-1], img.shape[-2]
    xi = torch.tensor(list(range(p[0] - 1, -1, -1)) + list(range(w)) + [-(i + 1) for i in range(p[1])])
    yi = torch.tensor(list(range(p[2] - 1, -1, -1)) + list(range(h)) + [-(i + 1) for i in range(p[3])])
    return img[..., yi[:, None], xi[None, :]]


def pad(img, padding, fill=0, padding_mode="constant"):
    p = parse_padding(padding)
    if padding_mode == "symmetric":
        return pad_symmetric(img, p)
    mode = {"edge": "replicate"}.get(padding_mode, padding_mode)
    need_squeeze = img.ndim < 4 and mode != "constant"
    if need_squeeze:
        img = img.unsqueeze(0)
    out = F.pad(img, p, mode=mode, value=float(fill)) if mode == "constant" else F.pad(img, p, mode=mode)
    return out.squeeze(0) if need_squeeze else out


def crop(img, top, left, height, width):
    h, w = img.shape[-2], img.shape[-1]
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        padding_ltrb = [max(-left + min(0, right), 0), max(-top + min(0, bottom), 0),
                        max(right - max(w, left), 0), max(bottom - max(h, top), 0)]
        return pad(img[..., max(top, 0):bottom, max(left, 0):right], padding_ltrb, fill=0)
    return img[..., top:bottom, left:right]


def center_crop(img, output_size):
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    elif len(output_size) == 1:
        output_size = (output_size[0], output_size[0])
    image_height, image_width = img.shape[-2], img.shape[-1]
    crop_height, crop_width = output_size
    if crop_width > image_width or crop_height > image_height:
        padding_ltrb = [
            (crop_width - image_width) // 2 if crop_width > image_width else 0,
            (crop_height - image_height) // 2 if crop_height > image_height else 0,
            (crop_width - image_width + 1) // 2 if crop_width > image_width else 0,
            (crop_height - image_height + 1) // 2 if crop_height > image_height else 0,
        ]
        img = pad(img, padding_ltrb, fill=0)
        image_height, image_width = img.shape[-2], img.shape[-1]
        if crop_width == image_width and crop_height == image_height:
            return img
    crop_top = int(round((image_height - crop_height) / 2.0))
    crop_left = int(round((image_width - crop_width) / 2.0))
    return crop(img, crop_top, crop_left, crop_height, crop_width)


def resized_output(h, w, size, max_size=None):  # _compute_resized_output_size
    if isinstance(size, (list, tuple)) and len(size) == 2:
        return list(size)
    requested = size if isinstance(size, int) else size[0]
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = requested, int(requested * long / short)
    if max_size is not None and new_long > max_size:
        new_short, new_long = int(max_size * new_short / new_long), max_size
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    return [new_h, new_w]


def resize(img, size, interpolation="bilinear", max_size=None, antialias=True):
    h, w = img.shape[-2], img.shape[-1]
    out = resized_output(h, w, size, max_size)
    if out == [h, w]:
        return img
    x = img.reshape(1, -1, h, w)
    interp = interpolation in ("bilinear", "bicubic")
    y = F.interpolate(x, size=out, mode=interpolation, align_corners=False if interp else None,
                      antialias=antialias if interp else False)
    return y.reshape(*img.shape[:-2], *out)


def normalize(img, mean, std):
    mean = torch.as_tensor(mean, dtype=img.dtype).view(-1, 1, 1)
    std = torch.as_tensor(std, dtype=img.dtype).view(-1, 1, 1)
    return (img - mean) / std


def blend(img1, img2, ratio):
    return (ratio * img1 + (1.0 - ratio) * img2).clamp(0, 1.0).to(img1.dtype)


def rgb_to_grayscale(img, num_output_channels=1):
    r, g, b = img.unbind(dim=-3)
    l_img = (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype).unsqueeze(dim=-3)
    if num_output_channels == 3:
        return l_img.expand(img.shape)
    return l_img


def adjust_brightness(img, f):
    return blend(img, torch.zeros_like(img), f)


def adjust_contrast(img, f):
    c = img.shape[-3]
    mean = torch.mean(rgb_to_grayscale(img) if c == 3 else img, dim=(-3, -2, -1), keepdim=True)
    return blend(img, mean, f)


def adjust_saturation(img, f):
    if img.shape[-3] == 1:
        return img
    return blend(img, rgb_to_grayscale(img), f)


def rgb2hsv(img):
    r, g, b = img.unbind(dim=-3)
    maxc = torch.max(img, dim=-3).values
    minc = torch.min(img, dim=-3).values
    eqc = maxc == minc
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    cr_divisor = torch.where(eqc, ones, cr)
    rc = (maxc - r) / cr_divisor
    gc = (maxc - g) / cr_divisor
    bc = (maxc - b) / cr_divisor
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = hr + hg + hb
    h = torch.fmod((h / 6.0 + 1.0), 1.0)
    return torch.stack((h, s, maxc), dim=-3)


def hsv2rgb(img):
    h, s, v = img.unbind(dim=-3)
    i = torch.floor(h * 6.0)
    f = (h * 6.0) - i
    i = i.to(dtype=torch.int32)
    p = torch.clamp((v * (1.0 - s)), 0.0, 1.0)
    q = torch.clamp((v * (1.0 - s * f)), 0.0, 1.0)
    t = torch.clamp((v * (1.0 - s * (1.0 - f))), 0.0, 1.0)
    i = i % 6
    mask = i.unsqueeze(dim=-3) == torch.arange(6).view(-1, 1, 1)
    a1 = torch.stack((v, q, p, p, t, v), dim=-3)
    a2 = torch.stack((t, v, v, q, p, p), dim=-3)
    a3 = torch.stack((p, p, t, v, v, q), dim=-3)
    a4 = torch.stack((a1, a2, a3), dim=-4)
    return torch.einsum("...ijk, ...xijk -> ...xjk", mask.to(dtype=img.dtype), a4)


def adjust_hue(img, f):
    hsv = rgb2hsv(img)
    h, s, v = hsv.unbind(dim=-3)
    h = (h + f) % 1.0
    return hsv2rgb(torch.stack((h, s, v), dim=-3))


def gaussian_kernel1d(k, sigma):
    half = (k - 1) * 0.5
    x = torch.linspace(-half, half, steps=k)
    pdf = torch.exp(-0.5 * (x / sigma).pow(2))
    return pdf / pdf.sum()


def gaussian_blur(img, kernel_size, sigma):
    if isinstance(kernel_size, int):
        kernel_size = [kernel_size, kernel_size]
    if isinstance(sigma, (int, float)):
        sigma = [float(sigma), float(sigma)]
    kx = gaussian_kernel1d(kernel_size[0], sigma[0]).to(img.dtype)
    ky = gaussian_kernel1d(kernel_size[1], sigma[1]).to(img.dtype)
    kernel = torch.mm(ky[:, None], kx[None, :])
    c = img.shape[-3]
    kernel = kernel.expand(c, 1, kernel.shape[0], kernel.shape[1])
    x = img.unsqueeze(0) if img.ndim == 3 else img
    p = [kernel_size[0] // 2, kernel_size[0] // 2, kernel_size[1] // 2, kernel_size[1] // 2]
    x = F.pad(x, p, mode="reflect")
    y = F.conv2d(x, kernel, groups=c)
    return y.squeeze(0) if img.ndim == 3 else y


def erase(img, i, j, h, w, v):
    img = img.clone()
    img[..., i:i + h, j:j + w] = v
    return img


def convert_image_dtype(img, dtype):  # float -> 8-bit integer values, as uint8's max 255
    if img.is_floating_point() and not dtype.is_floating_point:
        return img.mul(255 + 1.0 - 1e-3).to(dtype)
    if not img.is_floating_point() and dtype.is_floating_point:
        return img.to(dtype) / 255
    return img.to(dtype)


# ---- cases ---------------------------------------------------------------

cases = []


inputs = {}


def case(name, op, x, out, args):
    key = next((k for k, v in inputs.items() if v is x), None)
    if key is None:
        key = "x%d" % (len(inputs) + 1)
        inputs[key] = x
    cases.append({"name": name, "op": op, "x": key, "args": list(args), "n": len(args), "out": out})


img = torch.rand(3, 7, 9, dtype=D)
batch = torch.rand(2, 3, 6, 5, dtype=D)
gray = torch.rand(1, 8, 8, dtype=D)
big = torch.rand(3, 12, 16, dtype=D)

for name, x in (("image", img), ("batch", batch)):
    case("hflip " + name, "hflip", x, hflip(x), [])
    case("vflip " + name, "vflip", x, vflip(x), [])

# padding: torchvision's forms and every mode (fill only for constant)
case("pad int constant fill", "pad", img, pad(img, 2, 0.5), [2, 0.5, "constant"])
case("pad lr/tb edge", "pad", img, pad(img, [1, 3], 0, "edge"), [[1, 3], 0, "edge"])
case("pad ltrb reflect", "pad", img, pad(img, [1, 2, 3, 4], 0, "reflect"), [[1, 2, 3, 4], 0, "reflect"])
case("pad ltrb symmetric", "pad", img, pad(img, [3, 1, 2, 4], 0, "symmetric"), [[3, 1, 2, 4], 0, "symmetric"])
case("pad circular batch", "pad", batch, F.pad(batch, [2, 1, 1, 3], mode="circular"), [[2, 1, 1, 3], 0, "circular"])
case("pad reflect batch", "pad", batch, pad(batch, [2, 0], 0, "reflect"), [[2, 0], 0, "reflect"])
case("pad 2-d constant", "pad", img[0], pad(img[0], [1, 2], 0), [[1, 2], 0, "constant"])

# crops: ember's top/left are 1-based
case("crop inside", "crop", img, crop(img, 2, 3, 4, 5), [3, 4, 4, 5])
case("crop past the edges", "crop", img, crop(img, -2, 6, 5, 6), [-1, 7, 5, 6])
case("center_crop odd margin (Python round 1.5 -> 2)", "center_crop", img, center_crop(img, [4, 4]), [[4, 4]])
case("center_crop round 2.5 -> 2", "center_crop", big, center_crop(big, [7, 11]), [[7, 11]])
case("center_crop larger than the image", "center_crop", img, center_crop(img, [10, 12]), [[10, 12]])
case("center_crop larger in one dim", "center_crop", batch, center_crop(batch, [9, 3]), [[9, 3]])

# resize through F.interpolate
for size, interp, max_size, aa in (
        ([4, 5], "bilinear", None, True), ([4, 5], "bilinear", None, False), ([15, 20], "bilinear", None, True),
        (10, "bilinear", None, True), (5, "bicubic", None, True), (5, "bicubic", None, False),
        ([12, 7], "nearest", None, True), (4, "nearest-exact", None, True), (8, "bilinear", 9, True)):
    x = big if size != [12, 7] else img
    case("resize %s %s max_size %s antialias %s" % (size, interp, max_size, aa), "resize", x,
         resize(x, size, interp, max_size, aa), [size, interp, max_size, aa])
case("resize batch", "resize", batch, resize(batch, [3, 4]), [[3, 4], "bilinear", None, True])
case("resized_crop", "resized_crop", big, resize(crop(big, 3, 5, 8, 10), [6, 6]), [4, 6, 8, 10, [6, 6], "bilinear", True])

case("normalize", "normalize", img, normalize(img, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
     [[0.485, 0.456, 0.406], [0.229, 0.224, 0.225]])
case("normalize batch, one value", "normalize", batch, normalize(batch, [0.5], [0.25]), [[0.5], [0.25]])

rgb = torch.rand(3, 6, 7, dtype=D)
rgb[:, 0, 0] = 0.5  # a gray pixel: maxc == minc
rgb[:, 0, 1] = torch.tensor([0.9, 0.9, 0.2])  # ties for the max
rgb[:, 0, 2] = torch.tensor([0.3, 0.8, 0.8])
rgbs = torch.rand(2, 3, 4, 5, dtype=D)
case("rgb_to_grayscale", "rgb_to_grayscale", rgb, rgb_to_grayscale(rgb), [1])
case("rgb_to_grayscale 3 channels batch", "rgb_to_grayscale", rgbs, rgb_to_grayscale(rgbs, 3), [3])
for f in (0.0, 0.6, 1.7):
    case("adjust_brightness %g" % f, "adjust_brightness", rgb, adjust_brightness(rgb, f), [f])
    case("adjust_contrast %g" % f, "adjust_contrast", rgb, adjust_contrast(rgb, f), [f])
    case("adjust_saturation %g" % f, "adjust_saturation", rgb, adjust_saturation(rgb, f), [f])
case("adjust_contrast batch (a mean per image)", "adjust_contrast", rgbs, adjust_contrast(rgbs, 1.5), [1.5])
case("adjust_contrast gray", "adjust_contrast", gray, adjust_contrast(gray, 0.5), [0.5])
for f in (-0.5, -0.2, 0.0, 0.13, 0.5):
    case("adjust_hue %g" % f, "adjust_hue", rgb, adjust_hue(rgb, f), [f])
case("adjust_hue batch", "adjust_hue", rgbs, adjust_hue(rgbs, 0.3), [0.3])

case("gaussian_blur 3 sigma 1", "gaussian_blur", img, gaussian_blur(img, 3, 1.0), [3, 1.0])
case("gaussian_blur (5, 3) sigma (1.5, 0.7) batch", "gaussian_blur", batch, gaussian_blur(batch, [5, 3], [1.5, 0.7]),
     [[5, 3], [1.5, 0.7]])

case("erase", "erase", img, erase(img, 1, 2, 3, 4, 0.25), [2, 3, 3, 4, 0.25])

u8 = torch.randint(0, 256, (3, 4, 5))
case("convert_image_dtype int -> float", "convert_image_dtype", u8, convert_image_dtype(u8, torch.float64), ["float64"])
case("convert_image_dtype float -> int", "convert_image_dtype", img, convert_image_dtype(img, torch.int64), ["int64"])

Writer().write(os.path.join(HERE, "fixtures", "transforms.lua"), "tests/gen_transforms_fixtures.py", {"inputs": inputs, "cases": cases})
print("%d cases" % len(cases))
