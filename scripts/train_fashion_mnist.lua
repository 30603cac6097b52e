-- train_fashion_mnist.lua -- an MLP on Fashion-MNIST, trained with ember's
-- autograd alone (no nn, no optim): the foundation's end-to-end check.
--
--   ember scripts/train_fashion_mnist.lua [--epochs N] [--batch N] [--lr X]
--                                         [--hidden N] [--seed N] [--threads N]
--                                         [--limit N] [--smoke]
--
-- Data: Debian's dataset-fashion-mnist (idx files under
-- /usr/share/datasets/fashion-mnist). Prints a progress bar with loss and
-- throughput, then the test accuracy.
local ember = require "ember"
local progress = require "ember.progress"

local DATA_DIR = os.getenv("EMBER_FASHION_MNIST") or "/usr/share/datasets/fashion-mnist"

-- The options, parsed by lua-argparse (the scripts' parser; ember.cli adds
-- the shared model options this script does not have).
local function parse_args(argv)
  local argparse = require "argparse"
  local p = argparse("ember scripts/train_fashion_mnist.lua",
    "An MLP on Fashion-MNIST trained with autograd alone (no nn, no optim).",
    "Examples:\n   ember scripts/train_fashion_mnist.lua --hidden 128 --lr 0.05")
  p:option("--epochs", "passes over the training set", "3", tonumber):argname("N")
  p:option("--batch", "batch size", "128", tonumber):argname("N")
  p:option("--lr", "SGD learning rate, momentum 0.9", "0.1", tonumber):argname("X")
  p:option("--hidden", "hidden units", "256", tonumber):argname("N")
  p:option("--seed", "random seed", "0", tonumber):argname("N")
  p:option("--threads", "CPU threads", nil, tonumber):argname("N")
  p:option("--limit", "use only the first N training images", nil, tonumber):argname("N")
  p:flag("--smoke", "a few hundred steps on a subset; asserts the loss fell")
  -- a bad command line ends the script as ember.cli's do: the message and
  -- status 2, no traceback (argparse's own parse exits 1)
  local function usage_error(msg)
    io.stderr:write(("scripts/train_fashion_mnist.lua: %s (see --help)\n"):format(msg))
    os.exit(2, true)
  end
  -- "--lr -1", "--seed -3": a number after an option that takes one is its
  -- value (argparse read it as an unknown option '-1'), as in ember.cli
  local args = require("ember.cli").negative_values(argv, function(name) return name ~= "smoke" end)
  local ok, o = p:pparse(args)
  if not ok then usage_error(o) end
  for _, name in ipairs({"epochs", "batch", "hidden", "threads", "limit"}) do
    local v = o[name]
    if v ~= nil and not (v >= 1 and v % 1 == 0) then
      usage_error(("option --%s must be a positive integer, got %s"):format(name, tostring(v)))
    end
  end
  if not (o.lr >= 0 and o.lr < math.huge) then -- NaN, and "1e400" (inf), which trained to NaN losses
    usage_error(("option --lr must be a finite number >= 0, got %s"):format(tostring(o.lr)))
  end
  if o.seed % 1 ~= 0 then usage_error(("option --seed must be an integer, got %s"):format(tostring(o.seed))) end
  for _, name in ipairs({"epochs", "batch", "hidden", "threads", "limit", "seed"}) do
    if o[name] then o[name] = math.tointeger(o[name]) end
  end
  o.momentum = 0.9
  return o
end

-- Reads a gzip'd idx file through gzip(1) into a Lua string.
local function read_gz(name)
  local path = DATA_DIR .. "/" .. name
  local f = io.open(path, "rb")
  if not f then
    error(("cannot read %s: install the Debian package dataset-fashion-mnist "
           .. "(apt-get install dataset-fashion-mnist)"):format(path), 0)
  end
  f:close()
  local p = assert(io.popen("gzip -dc '" .. path .. "'", "r"))
  local s = p:read("a")
  p:close()
  return s
end

local function be32(s, pos)
  local a, b, c, d = s:byte(pos, pos + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- Images as float32 [n, 784] in [0, 1]; labels as 1-based int64 [n].
local function load(prefix, limit)
  local img, lab = read_gz(prefix .. "-images-idx3-ubyte.gz"), read_gz(prefix .. "-labels-idx1-ubyte.gz")
  assert(be32(img, 1) == 2051 and be32(lab, 1) == 2049, "not an idx file")
  local n = be32(img, 5)
  if limit then n = math.min(n, limit) end
  local x = ember.from_bytes(img, {n, 784}, {offset = 16}) / 255
  local y = ember.from_bytes(lab, {n}, {offset = 8, dtype = "int64"}) + 1
  return x, y, n
end

local function main(argv)
  local o = parse_args(argv)
  if o.threads then ember.set_num_threads(o.threads) end
  ember.manual_seed(o.seed)
  local limit = o.limit or (o.smoke and 4096 or nil)
  local xtr, ytr, ntr = load("train", limit)
  local xte, yte, nte = load("t10k", o.smoke and 1000 or nil)
  if o.smoke then o.epochs = 1 end
  print(("Fashion-MNIST: %d train, %d test images; MLP 784-%d-10; %d threads")
        :format(ntr, nte, o.hidden, ember.get_num_threads()))

  -- Kaiming-uniform initialisation, as nn.Linear does.
  local function linear(i, o_)
    local bound = 1 / math.sqrt(i)
    local w = ember.uniform({i, o_}, -bound, bound):requires_grad_()
    local b = ember.uniform({o_}, -bound, bound):requires_grad_()
    return w, b
  end
  local w1, b1 = linear(784, o.hidden)
  local w2, b2 = linear(o.hidden, 10)
  local params = {w1, b1, w2, b2}
  local velocity = {}
  for i, p in ipairs(params) do velocity[i] = ember.zeros(p.shape) end

  local function forward(x) return (x:matmul(w1) + b1):relu():matmul(w2) + b2 end

  local first_loss, last_loss
  for epoch = 1, o.epochs do
    local perm = ember.randperm and ember.randperm(ntr) or nil
    local bar = progress.new{total = ntr, label = ("epoch %d/%d"):format(epoch, o.epochs), unit = "img"}
    local seen, loss_sum, steps = 0, 0, 0
    for start = 1, ntr, o.batch do
      local len = math.min(o.batch, ntr - start + 1)
      local x, y
      if perm then
        local idx = perm:narrow(1, start, len)
        x, y = xtr:index_select(1, idx), ytr:index_select(1, idx)
      else
        x, y = xtr:narrow(1, start, len), ytr:narrow(1, start, len)
      end
      local loss = ember.cross_entropy(forward(x), y)
      for _, p in ipairs(params) do p.grad = nil end
      loss:backward()
      ember.no_grad(function()
        for i, p in ipairs(params) do
          velocity[i]:mul_(o.momentum):add_(p.grad)
          p:add_(velocity[i], -o.lr)
        end
      end)
      local l = loss:item()
      first_loss = first_loss or l
      last_loss = l
      seen, loss_sum, steps = seen + len, loss_sum + l, steps + 1
      if steps % 20 == 0 or seen == ntr then bar:update(seen, {loss = loss_sum / steps}) end
    end
    bar:finish()
  end

  local correct = ember.no_grad(function()
    local hits = 0
    for start = 1, nte, 1000 do
      local len = math.min(1000, nte - start + 1)
      local pred = forward(xte:narrow(1, start, len)):argmax(2)
      hits = hits + pred:eq(yte:narrow(1, start, len)):long():sum():item()
    end
    return hits
  end)
  print(("test accuracy: %.2f%% (%d/%d)"):format(100 * correct / nte, correct, nte))
  if o.smoke then
    assert(last_loss < first_loss, ("smoke: loss did not fall (%.4f -> %.4f)"):format(first_loss, last_loss))
    print(("smoke ok: loss %.4f -> %.4f"):format(first_loss, last_loss))
  end
end

main(arg or {})
