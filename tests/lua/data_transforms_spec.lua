-- ember.data.transforms (torchvision.transforms on tensors) and
-- data.TransformDataset: there were none, and every vision script wrote its
-- own augmentation. The deterministic operations against torchvision 0.14's
-- (tests/fixtures/transforms.lua, made in plain torch by
-- tests/gen_transforms_fixtures.py: torchvision is not installed); the
-- random ones by the exact geometry of a known draw, reproducibility from a
-- seed, statistics over many draws, and what a batch gets (one draw).
local ember = require "ember"
local data = require "ember.data"
local parity = require "tests.lua.helpers.parity"
local T = data.transforms
local TF = T.functional
local P, check, raises_here = parity.T, parity.check, parity.raises_here

local fixtures = dofile("tests/fixtures/transforms.lua")

local function input(c) return P(fixtures.inputs[c.x]) end
local function same(a, b) return a.dtype == b.dtype and (a:double() - b:double()):abs():max():item() == 0 end
local function gen(seed) return ember.Generator():manual_seed(seed) end
local function copy(g) return ember.Generator():set_state(g:get_state()) end

describe("transforms.functional against torchvision 0.14 (PyTorch 1.13)", function()
  for _, c in ipairs(fixtures.cases) do
    it(c.name, function()
      local got = TF[c.op](input(c), table.unpack(c.args, 1, c.n))
      local tol = (c.op == "gaussian_blur") and 1e-6 or 1e-12
      if c.out.dtype == "int64" then
        assert.is_true(same(got, P(c.out)), c.name)
      else
        check(c.name, got, P(c.out), tol)
      end
    end)
  end

  it("the fixture check can fail: a wrong padding mode is caught", function()
    local c
    for _, k in ipairs(fixtures.cases) do if k.name == "pad ltrb symmetric" then c = k end end
    local got = TF.pad(input(c), c.args[1], 0, "reflect")
    assert.is_true(parity.max_rel(got, P(c.out)) > 1e-3)
  end)
end)

describe("the deterministic transforms are the functional operations", function()
  local function fixture(name)
    for _, c in ipairs(fixtures.cases) do if c.name == name then return c end end
    error("no fixture " .. name)
  end

  it("Resize, CenterCrop, Pad, Normalize, flips with p = 1, ConvertImageDtype", function()
    local c = fixture("resize 10 bilinear max_size None antialias True")
    check("Resize", T.Resize(10)(input(c)), P(c.out), 1e-12)
    c = fixture("resize [4, 5] bilinear max_size None antialias False")
    check("Resize antialias false", T.Resize({ 4, 5 }, { antialias = false })(input(c)), P(c.out), 1e-12)
    c = fixture("resize 5 bicubic max_size None antialias True")
    check("Resize bicubic", T.Resize{ size = 5, interpolation = "bicubic" }(input(c)), P(c.out), 1e-12)
    c = fixture("resize 8 bilinear max_size 9 antialias True")
    check("Resize max_size", T.Resize(8, "bilinear", 9)(input(c)), P(c.out), 1e-12)
    c = fixture("center_crop larger than the image")
    check("CenterCrop", T.CenterCrop({ 10, 12 })(input(c)), P(c.out), 0)
    c = fixture("center_crop odd margin (Python round 1.5 -> 2)")
    check("CenterCrop", T.CenterCrop(4)(input(c)), P(c.out), 0)
    c = fixture("pad ltrb reflect")
    check("Pad", T.Pad({ 1, 2, 3, 4 }, { padding_mode = "reflect" })(input(c)), P(c.out), 0)
    c = fixture("pad int constant fill")
    check("Pad", T.Pad(2, 0.5)(input(c)), P(c.out), 0)
    c = fixture("pad ltrb symmetric")
    check("Pad", T.Pad{ padding = { 3, 1, 2, 4 }, padding_mode = "symmetric" }(input(c)), P(c.out), 0)
    c = fixture("normalize")
    check("Normalize", T.Normalize({ 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 })(input(c)), P(c.out), 1e-12)
    c = fixture("hflip batch")
    check("RandomHorizontalFlip(1)", T.RandomHorizontalFlip(1)(input(c)), P(c.out), 0)
    c = fixture("vflip image")
    check("RandomVerticalFlip{p = 1}", T.RandomVerticalFlip{ p = 1 }(input(c)), P(c.out), 0)
    assert.is_true(same(T.RandomHorizontalFlip(0)(input(c)), input(c)))
    c = fixture("convert_image_dtype float -> int")
    assert.is_true(same(T.ConvertImageDtype("int64")(input(c)), P(c.out)))
  end)

  it("Normalize inplace changes the image itself; the default leaves it", function()
    local x = ember.full({ 2, 3, 3 }, 1.0)
    local y = T.Normalize({ 0.5, 0 }, { 0.5, 2 })(x)
    assert.are.equal(1, x[1][1][1]:item())
    assert.are.same({ 1, 0.5 }, { y[1][1][1]:item(), y[2][1][1]:item() })
    local z = T.Normalize({ 0.5, 0 }, { 0.5, 2 }, true)(x)
    assert.are.equal(1, x[1][1][1]:item())
    assert.is_true(rawequal(z, x) or same(z, x))
  end)

  it("Pad's per-channel fill, and int64 images through the geometric ones", function()
    local x = ember.zeros(3, 2, 2)
    local y = T.Pad(1, { 0.1, 0.2, 0.3 })(x)
    assert.are.same({ 3, 4, 4 }, y.shape)
    for c, v in ipairs { y[1][1][1]:item(), y[2][4][4]:item(), y[3][1][3]:item() } do
      assert.is_true(math.abs(v - c / 10) < 1e-7)
    end
    assert.are.equal(0, y[2][2][2]:item())
    local u8 = ember.tensor({ { { 0, 255 }, { 255, 0 } } }, { dtype = "int64" })
    local r = T.Resize({ 4, 4 })(u8)
    assert.are.equal("int64", r.dtype)
    assert.is_true(r:min():item() >= 0 and r:max():item() <= 255)
    assert.are.equal("int64", T.CenterCrop(1)(u8).dtype)
    assert.are.same({ 255, 0 }, T.RandomHorizontalFlip(1)(u8)[1][1]:totable())
  end)

  it("float32 and bfloat16 images give the float64 result to their precision", function()
    local x = ember.rand(3, 9, 11, { dtype = "float64" })
    local pipe = T.Compose{ T.Resize(6), T.CenterCrop(5), T.Pad(1, 0, "edge"), T.Normalize({ 0.4, 0.5, 0.6 }, { 0.2, 0.3, 0.4 }) }
    local want = pipe(x)
    check("float32", pipe(x:float()), want, 1e-5)
    local b = pipe(x:to("bfloat16"))
    assert.are.equal("bfloat16", b.dtype)
    check("bfloat16", b, pipe(x:to("bfloat16"):double()), 3e-2)
    local j = TF.adjust_hue(x:to("bfloat16"), 0.2)
    assert.are.equal("bfloat16", j.dtype)
  end)
end)

describe("random transforms: reproducible from a seed, one draw per call", function()
  local function pipeline(g)
    return T.Compose{
      T.RandomResizedCrop(12, { generator = g }),
      T.RandomHorizontalFlip{ generator = g },
      T.RandomApply({ T.ColorJitter(0.4, 0.4, 0.4, 0.1, { generator = g }) }, 0.8, { generator = g }),
      T.RandomErasing{ generator = g, value = "random" },
      T.GaussianBlur(3, { 0.1, 2 }, { generator = g }),
    }
  end

  it("the same seed gives the same images; another seed others; the global stream is left alone", function()
    local img = ember.rand(3, 20, 24)
    ember.manual_seed(7)
    local before = ember.default_generator:get_state()
    local a = { pipeline(gen(1))(img), pipeline(gen(1))(img) }
    assert.are.same(before, ember.default_generator:get_state())
    assert.is_true(same(a[1], a[2]))
    local p = pipeline(gen(1))
    local first, second = p(img), p(img)
    assert.is_true(same(first, a[1]))
    assert.is_false(same(first, second)) -- the generator goes on
    assert.is_false(same(pipeline(gen(2))(img), a[1]))
  end)

  it("without a generator they draw from the default one: ember.manual_seed reproduces them", function()
    local img = ember.rand(3, 20, 24)
    ember.manual_seed(11)
    local a = pipeline(nil)(img)
    ember.manual_seed(11)
    local b = pipeline(nil)(img)
    assert.is_true(same(a, b))
  end)

  it("a batch gets one draw (all images the same flip and crop); PerSample draws per image", function()
    local g = gen(3)
    local x = ember.rand(16, 1, 4, 4)
    local flipped_some, kept_some = false, false
    for _ = 1, 20 do
      local y = T.RandomHorizontalFlip{ generator = g }(x)
      local f = same(y, TF.hflip(x))
      assert.is_true(f or same(y, x))
      flipped_some, kept_some = flipped_some or f, kept_some or not f
    end
    assert.is_true(flipped_some and kept_some)
    local y = T.PerSample(T.RandomHorizontalFlip{ generator = g })(x)
    local n = 0
    for i = 1, 16 do
      if same(y[i], TF.hflip(x[i])) then n = n + 1 else assert.is_true(same(y[i], x[i])) end
    end
    assert.is_true(n > 0 and n < 16, "PerSample flipped " .. n .. " of 16")
    -- RandomCrop on a batch: one place for all
    local b = ember.arange(2 * 36):view(2, 1, 6, 6)
    local c = T.RandomCrop(3, { generator = gen(4) })(b)
    assert.are.equal(36, (c[2] - c[1]):min():item())
    assert.are.equal(36, (c[2] - c[1]):max():item())
  end)
end)

describe("random transforms: the exact geometry of a known draw", function()
  it("RandomCrop: top and left are torch.randint draws, after padding; pad_if_needed pads both sides", function()
    local img = ember.rand(2, 5, 7)
    local g = gen(5)
    local d = copy(g)
    local i = ember.randint(0, 5 + 4 - 4 + 1, { 1 }, { generator = d }):item() + 1
    local j = ember.randint(0, 7 + 4 - 6 + 1, { 1 }, { generator = d }):item() + 1
    local got = T.RandomCrop({ 4, 6 }, 2, { padding_mode = "reflect", generator = g })(img)
    assert.is_true(same(got, TF.crop(TF.pad(img, 2, 0, "reflect"), i, j, 4, 6)))
    -- pad_if_needed: width 7 < 9 gets 2 columns on each side (torchvision's rule), then a 9-wide crop
    local t = T.RandomCrop({ 5, 9 }, { pad_if_needed = true, fill = -1, generator = gen(6) })
    local y = t(img)
    assert.are.same({ 2, 5, 9 }, y.shape)
    local cols = y:eq(-1):all(2):all(1):long():sum():item() -- columns all fill
    assert.are.equal(2, cols)
  end)

  it("RandomResizedCrop: torchvision's sampling rule, draw for draw, and the fallback", function()
    local img = ember.rand(3, 30, 40)
    local g = gen(8)
    local d = copy(g)
    local scale, ratio = { 0.2, 0.6 }, { 0.5, 2 }
    -- by hand: area fraction, log-ratio (float32 draws), Python's round, then the place
    local function f32(v) return string.unpack("f", string.pack("f", v)) end
    local target = 1200 * ember.empty(1):uniform_(scale[1], scale[2], { generator = d }):item()
    local ar = f32(math.exp(ember.empty(1):uniform_(f32(math.log(0.5)), f32(math.log(2)), { generator = d }):item()))
    local function pyround(v) local f = math.floor(v) local r = v - f
      if r > 0.5 or (r == 0.5 and f % 2 == 1) then f = f + 1 end return math.tointeger(f) end
    local w, h = pyround(math.sqrt(target * ar)), pyround(math.sqrt(target / ar))
    assert.is_true(w <= 40 and h <= 30) -- the first try fits with this seed
    local i = ember.randint(0, 30 - h + 1, { 1 }, { generator = d }):item() + 1
    local j = ember.randint(0, 40 - w + 1, { 1 }, { generator = d }):item() + 1
    local pi, pj, ph, pw = T.RandomResizedCrop.get_params(img, scale, ratio, copy(g))
    assert.are.same({ i, j, h, w }, { pi, pj, ph, pw })
    local got = T.RandomResizedCrop(8, scale, ratio, { generator = g })(img)
    check("RandomResizedCrop", got, TF.resized_crop(img, i, j, h, w, 8), 0)
    -- nothing fits (an area larger than the image): the central crop, the ratio clamped to 4/3
    local wide = ember.rand(1, 10, 40)
    assert.are.same({ 1, 14, 10, 13 }, { T.RandomResizedCrop.get_params(wide, { 2, 3 }, { 3 / 4, 4 / 3 }, gen(1)) })
    assert.are.same({ 1, 1, 10, 40 }, { T.RandomResizedCrop.get_params(wide, { 2, 3 }, { 1, 5 }, gen(1)) })
  end)

  it("RandomErasing: a block of the drawn size at a uniform place, value per channel", function()
    local t = T.RandomErasing{ p = 1, scale = { 0.25, 0.25 }, ratio = { 1, 1 }, value = { 2, 3 }, generator = gen(2) }
    local seen = {}
    for _ = 1, 300 do
      local y = t(ember.zeros(2, 8, 8))
      assert.are.equal(16 * 2, y[1]:sum():item())
      assert.are.equal(16 * 3, y[2]:sum():item())
      local nz = y[1]:ne(0):nonzero() -- 1-based rows and columns of the block
      local top, left = nz[1][1]:item(), nz[1][2]:item()
      assert.are.same({ top + 3, left + 3 }, nz[16]:totable())
      seen[top * 10 + left] = true
    end
    local places = 0
    for _ in pairs(seen) do places = places + 1 end
    assert.are.equal(25, places)
    -- a block larger than the image on every try: left as it is
    local x = ember.rand(1, 4, 4)
    assert.is_true(same(T.RandomErasing{ p = 1, scale = { 1, 1 }, ratio = { 1, 1 } }(x), x))
  end)

  it("ColorJitter: a random order, then the factors, as get_params draws them", function()
    local img = ember.rand(3, 5, 6)
    local g = gen(9)
    local order, b, c, s, h = T.ColorJitter.get_params({ 0.5, 1.5 }, { 0.5, 1.5 }, { 0, 2 }, { -0.2, 0.2 }, copy(g))
    local want = img
    for _, k in ipairs(order) do
      want = k == 1 and TF.adjust_brightness(want, b) or k == 2 and TF.adjust_contrast(want, c)
        or k == 3 and TF.adjust_saturation(want, s) or TF.adjust_hue(want, h)
    end
    local got = T.ColorJitter(0.5, 0.5, { 0, 2 }, 0.2, { generator = g })(img)
    check("ColorJitter", got, want, 0)
    table.sort(order)
    assert.are.same({ 1, 2, 3, 4 }, order)
    assert.is_true(b >= 0.5 and b < 1.5 and h >= -0.2 and h < 0.2)
  end)

  it("GaussianBlur: sigma drawn uniform in its range", function()
    local img = ember.rand(3, 7, 7)
    local g = gen(10)
    local sigma = ember.empty(1):uniform_(0.5, 1.5, { generator = copy(g) }):item()
    check("GaussianBlur", T.GaussianBlur(5, { 0.5, 1.5 }, { generator = g })(img), TF.gaussian_blur(img, 5, sigma), 0)
  end)
end)

describe("random transforms: statistics over many draws", function()
  it("flips with p, RandomApply with p, RandomChoice by weight", function()
    local g = gen(12)
    local x = ember.tensor({ { { 1, 2 } } })
    local n = 0
    for _ = 1, 4000 do
      if T.RandomHorizontalFlip(0.3, { generator = g })(x)[1][1][1]:item() == 2 then n = n + 1 end
    end
    assert.is_true(math.abs(n / 4000 - 0.3) < 0.03, "flipped " .. n)
    local neg = T.RandomApply(T.Lambda(function(v) return -v end), 0.75, { generator = g })
    n = 0
    for _ = 1, 4000 do if neg(x)[1][1][1]:item() < 0 then n = n + 1 end end
    assert.is_true(math.abs(n / 4000 - 0.75) < 0.03, "applied " .. n)
    local pick = T.RandomChoice({ T.Lambda(function() return 1 end), T.Lambda(function() return 2 end) }, { 1, 3 },
      { generator = g })
    n = 0
    for _ = 1, 4000 do if pick(x) == 2 then n = n + 1 end end
    assert.is_true(math.abs(n / 4000 - 0.75) < 0.03, "picked " .. n)
  end)

  it("RandomCrop's places are uniform; RandomResizedCrop's areas and ratios stay in range", function()
    local g = gen(13)
    local img = ember.arange(36):view(1, 6, 6)
    local counts = {}
    for _ = 1, 3000 do
      local v = T.RandomCrop(4, { generator = g })(img)[1][1][1]:item() -- the crop's top-left value
      counts[v] = (counts[v] or 0) + 1
    end
    local places = 0
    for _, k in pairs(counts) do
      places = places + 1
      assert.is_true(math.abs(k / 3000 - 1 / 9) < 0.03)
    end
    assert.are.equal(9, places)
    local big = ember.zeros(1, 50, 60)
    for _ = 1, 300 do
      local _, _, h, w = T.RandomResizedCrop.get_params(big, { 0.08, 1 }, { 3 / 4, 4 / 3 }, g)
      assert.is_true(h * w >= 0.08 * 3000 * 0.8 and h * w <= 3000)
      assert.is_true(w / h > 3 / 4 * 0.85 and w / h < 4 / 3 * 1.15, ("%d x %d"):format(h, w))
    end
  end)

  it("ColorJitter's brightness factor is uniform in [1 - v, 1 + v]", function()
    local g = gen(14)
    local t = T.ColorJitter{ brightness = 0.5, generator = g }
    local x = ember.full({ 3, 1, 1 }, 0.5)
    local lo, hi, sum = 1, 0, 0
    for _ = 1, 2000 do
      local f = t(x)[1][1][1]:item() / 0.5
      lo, hi, sum = math.min(lo, f), math.max(hi, f), sum + f
    end
    assert.is_true(lo >= 0.5 and lo < 0.52 and hi < 1.5 and hi > 1.48)
    assert.is_true(math.abs(sum / 2000 - 1) < 0.03)
  end)
end)

describe("data.TransformDataset with DataLoader", function()
  it("transforms each row on its own (per-image draws), the label by target_transform", function()
    local x = ember.arange(2):view(1, 1, 1, 2):expand(64, 1, 1, 2):contiguous()
    local y = ember.arange(1, 65, { dtype = "int64" })
    ember.manual_seed(3)
    local ds = data.TransformDataset(data.TensorDataset(x, y), T.RandomHorizontalFlip(),
      { target_transform = function(v) return v * 10 end })
    assert.are.equal(64, #ds)
    local xb, yb = data.DataLoader(ds, { batch_size = 64 }):iter()()
    assert.are.same({ 64, 1, 1, 2 }, xb.shape)
    assert.are.same({ 10, 640 }, { yb[1]:item(), yb[64]:item() })
    local flipped = xb:select(4, 1):eq(1):long():sum():item()
    assert.is_true(flipped > 10 and flipped < 54, "flipped " .. flipped)
  end)

  it("named rows (a Dataset's), plain tensors and lists; the errors", function()
    local ds = data.TransformDataset(data.Dataset.new{ x = ember.ones(3, 1, 2, 2), y = ember.zeros(3) }, T.Normalize(0.5, 0.5))
    assert.are.equal(4, ds[2].x:sum():item())
    assert.are.equal(0, ds[-1].y:item())
    local plain = data.TransformDataset({ ember.ones(1, 2, 2) }, T.Pad(1))
    assert.are.same({ 1, 4, 4 }, plain[1].shape)
    raises_here(function() local _ = ds[4] end, "TransformDataset: row 4 is out of range for a dataset of 3 rows")
    raises_here(function() data.TransformDataset(ds, 5) end, "TransformDataset: transform must be a transform")
    raises_here(function() data.TransformDataset(ds, nil, { target = 1 }) end, "TransformDataset: unknown option 'target'")
    local keyed = data.TransformDataset(data.Dataset.new{ img = ember.ones(2, 1, 2, 2) }, T.Pad(1))
    raises_here(function() local _ = keyed[1] end, "TransformDataset: row 1 has no item x to transform (give key =)")
    assert.are.same({ 1, 4, 4 }, data.TransformDataset(keyed.dataset, T.Pad(1), { key = "img" })[1].img.shape)
  end)
end)

describe("transforms print as torchvision prints them", function()
  it("each transform and Compose", function()
    local cases = {
      { T.Normalize({ 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 }),
        "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])" },
      { T.Resize(256), "Resize(size=256, interpolation=bilinear, max_size=None, antialias=True)" },
      { T.CenterCrop(224), "CenterCrop(size=(224, 224))" },
      { T.RandomCrop(32, 4), "RandomCrop(size=(32, 32), padding=4)" },
      { T.RandomHorizontalFlip(), "RandomHorizontalFlip(p=0.5)" },
      { T.RandomVerticalFlip(1), "RandomVerticalFlip(p=1)" },
      { T.RandomResizedCrop(224), "RandomResizedCrop(size=(224, 224), scale=(0.08, 1.0), ratio=(0.75, 1.3333), "
        .. "interpolation=bilinear, antialias=True)" },
      { T.RandomErasing(), "RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False)" },
      { T.ColorJitter(0.4), "ColorJitter(brightness=[0.6, 1.4], contrast=None, saturation=None, hue=None)" },
      { T.Pad(4, 0, "reflect"), "Pad(padding=4, fill=0, padding_mode=reflect)" },
      { T.GaussianBlur(3), "GaussianBlur(kernel_size=(3, 3), sigma=(0.1, 2.0))" },
      { T.Lambda(print), "Lambda()" },
      { T.Compose{ T.CenterCrop(2), T.RandomApply({ T.RandomVerticalFlip() }, 0.3) },
        "Compose(\n    CenterCrop(size=(2, 2))\n    RandomApply(\n        p=0.3\n        RandomVerticalFlip(p=0.5)\n    )\n)" },
    }
    for _, c in ipairs(cases) do assert.are.equal(c[2], tostring(c[1])) end
  end)
end)

describe("errors name the transform and what was wrong, at the caller's line", function()
  it("Normalize", function()
    local t = T.Normalize({ 0.5, 0.5, 0.5 }, { 0.2, 0.2, 0.2 })
    raises_here(function() local _ = t(ember.rand(1, 4, 4)) end,
      "Normalize: mean has 3 values, but the image has 1 channels (dim -3 of the input)")
    raises_here(function() local _ = t(ember.rand(4, 4)) end, "Normalize: expected an image [C, H, W] or a batch")
    raises_here(function() local _ = t(ember.ones(3, 2, 2, { dtype = "int64" })) end,
      "Normalize: expects a floating-point image (values in [0, 1]), got int64")
    raises_here(function() local _ = T.Normalize(0.5, { 0.5, 0 })(ember.rand(2, 2, 2)) end, "Normalize: std [0.5, 0] has a 0")
    raises_here(function() T.Normalize("a", 1) end, "Normalize: mean must be a number or a list of numbers")
  end)

  it("crops larger than the image, bad sizes and paddings", function()
    raises_here(function() local _ = T.RandomCrop(8)(ember.rand(3, 6, 8)) end,
      "RandomCrop: the crop 8 x 8 is larger than the image 6 x 8")
    assert.are.same({ 3, 8, 8 }, T.RandomCrop(8, { pad_if_needed = true })(ember.rand(3, 6, 8)).shape)
    raises_here(function() T.CenterCrop(0) end, "CenterCrop: size must be a positive integer or a list {h, w}")
    raises_here(function() T.Pad({ 1, 2, 3 }) end, "Pad: padding must be an integer or a list of 1, 2 or 4 integers")
    raises_here(function() T.Pad(1, 0, "mirror") end, "Pad: padding_mode must be")
    raises_here(function() local _ = T.Pad(5, 0, "reflect")(ember.rand(1, 4, 9)) end,
      "Pad: reflect padding (left 5, top 5, right 5, bottom 5) must be smaller than the image (H 4, W 9)")
    raises_here(function() local _ = T.Resize(4)("img") end, "Resize: expected an image tensor [C, H, W] or a batch")
    raises_here(function() T.Resize(4, "area") end, "Resize: interpolation must be")
    raises_here(function() T.Resize({ 4, 4 }, "bilinear", 8) end, "Resize: max_size goes only with a size")
  end)

  it("probabilities and ranges", function()
    raises_here(function() T.RandomHorizontalFlip(1.5) end, "RandomHorizontalFlip: p must be a probability between 0 and 1, got 1.5")
    raises_here(function() T.RandomApply({}, -1) end, "RandomApply: p must be a probability")
    raises_here(function() T.RandomErasing{ p = 2 } end, "RandomErasing: p must be a probability")
    raises_here(function() T.RandomErasing{ scale = { 0.5, 2 } } end, "RandomErasing: scale must lie between 0 and 1")
    raises_here(function() T.RandomErasing{ value = "noise" } end, "RandomErasing: value, a string, must be \"random\"")
    raises_here(function() local _ = T.RandomErasing{ p = 1, value = { 1, 2 } }(ember.rand(3, 8, 8)) end,
      "RandomErasing: value has 2 numbers, but the image has 3 channels")
    raises_here(function() T.RandomResizedCrop(8, { 0.9, 0.1 }) end, "RandomResizedCrop: scale must be a pair {min, max}")
    raises_here(function() T.ColorJitter{ hue = 0.7 } end, "ColorJitter: hue must lie in [-0.5, 0.5]")
    raises_here(function() T.ColorJitter(-1) end, "ColorJitter: brightness, a single number, must be >= 0")
    raises_here(function() local _ = T.ColorJitter(0, 0, 0.5)(ember.rand(2, 4, 4)) end, "ColorJitter: expects an RGB image")
    raises_here(function() T.GaussianBlur(4) end, "GaussianBlur: kernel_size must be an odd positive integer")
    raises_here(function() T.RandomCrop(4, { generator = 1 }) end, "RandomCrop: generator must be an ember.Generator")
    raises_here(function() T.RandomCrop(4, { paddin = 1 }) end, "RandomCrop: unknown option 'paddin'")
    raises_here(function() T.RandomCrop(4, 1, { padding = 1 }) end, "RandomCrop: padding is given twice")
    raises_here(function() T.Compose{ T.CenterCrop(2), 3 } end, "Compose: transform 2 is a number, not a transform")
    local k = 0
    local uneven = T.PerSample(function(v) k = k + 1 return v:narrow(3, 1, k) end)
    raises_here(function() local _ = uneven(ember.rand(2, 1, 4, 4)) end,
      "PerSample: the transform gave image 2 the shape [1, 4, 2] but image 1 [1, 4, 1]")
  end)
end)
