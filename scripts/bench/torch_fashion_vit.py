"""PyTorch peer of scripts/fashion_vit.lua, in its default config: the tiny
ViT with a conv stem (three 3x3 stride-2 convolutions, 32-64-64 channels,
GELU between, to 4x4 tokens), d=64, 4 pre-LN layers, 4 heads, MLP 128, GELU,
mean pooling; AdamW 2e-3 (weight decay 0.05), batch 128, warm-up then cosine,
gradient clipping at 1, label smoothing 0.1, random horizontal flips and, for
half the images, a random shift of up to 2 pixels; 22 epochs. The same options
as the Lua script select its other configs (--convs 0 --pool cls --lr 1e-3
--label_smoothing 0 --augment none: the earlier plain ViT; --augment flip: the
14-epoch config before; --tta flip: test-time flip averaging).

    /usr/bin/python3 scripts/bench/torch_fashion_vit.py [--epochs 22] [--threads 2]
"""
import gzip

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_common import Clock, parser, setup, warmup_cosine

DIR = "/usr/share/datasets/fashion-mnist"


def load(prefix, limit=None):
    with gzip.open(f"{DIR}/{prefix}-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(f"{DIR}/{prefix}-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    if limit:
        x, y = x[:limit], y[:limit]
    return torch.tensor(x, dtype=torch.float32) / 255, torch.tensor(y, dtype=torch.long)


def augment_index(mode):
    """The variants of scripts/fashion_vit.lua's augment_index: [variants, 784] source pixels (784: background)."""
    shift = 2 if mode == "crop+flip" else 0
    i, j = torch.meshgrid(torch.arange(28), torch.arange(28), indexing="ij")
    rows = []
    for flip in (0, 1):
        for dy in range(-shift, shift + 1):
            for dx in range(-shift, shift + 1):
                y, x = i + dy, (27 - j if flip else j) + dx
                ok = (y >= 0) & (y < 28) & (x >= 0) & (x < 28)
                rows.append(torch.where(ok, y * 28 + x, torch.full_like(y, 784)).reshape(784))
    return torch.stack(rows)


class ViT(nn.Module):
    def __init__(self, d=64, heads=4, layers=4, mlp=128, patch=7, convs=3, stem_width=32, pool="mean"):
        super().__init__()
        self.convs, self.pool = convs, pool
        if convs == 0:
            self.p, self.g = patch, 28 // patch
            self.patch_embed = nn.Linear(patch * patch, d)
            n = self.g * self.g
        else:  # 3x3 stride-2 convolutions, widths doubling from stem_width up to d (the last is d), GELU between
            stem, c_in, side = [], 1, 28
            for i in range(1, convs + 1):
                c_out = d if i == convs else min(d, stem_width << (i - 1))
                stem.append(nn.Conv2d(c_in, c_out, 3, stride=2, padding=1))
                if i < convs:
                    stem.append(nn.GELU())
                c_in, side = c_out, (side - 1) // 2 + 1
            self.stem = nn.Sequential(*stem)
            n = side * side
        if pool == "cls":
            self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
            n += 1
        self.pos = nn.Parameter(torch.randn(n, d) * 0.02)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, mlp, 0.0, activation="gelu",
                                                                batch_first=True, norm_first=True)
                                     for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        B = x.shape[0]
        if self.convs == 0:
            g, p = self.g, self.p
            tokens = self.patch_embed(x.reshape(B, g, p, g, p).permute(0, 1, 3, 2, 4).reshape(B, g * g, p * p))
        else:
            tokens = self.stem(x.unsqueeze(1)).flatten(2).transpose(1, 2)
        if self.pool == "cls":
            tokens = torch.cat([self.cls.expand(B, 1, -1), tokens], 1)
        h = tokens + self.pos
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h[:, 0] if self.pool == "cls" else h.mean(1)))


def accuracy(model, x, y, tta="none"):
    """Test accuracy; with tta "flip", that of the probabilities of each image and its mirror averaged."""
    model.eval()
    ok = 0
    with torch.no_grad():
        for i in range(0, len(y), 1000):
            xb = x[i:i + 1000]
            scores = model(xb)
            if tta == "flip":
                scores = scores.softmax(1) + model(xb.flip(2)).softmax(1)
            ok += (scores.argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return ok / len(y)


def main():
    p = parser("PyTorch peer of scripts/fashion_vit.lua", epochs=22, lr=2e-3, batch=128)
    p.add_argument("--convs", type=int, default=3, help="3x3 stride-2 convolutions before tokenizing (0: patches)")
    p.add_argument("--stem-width", "--stem_width", type=int, default=32, help="channels of the first convolution")
    p.add_argument("--pool", default="mean", choices=["cls", "mean"])
    p.add_argument("--patch", type=int, default=7, help="patch side when --convs is 0")
    p.add_argument("--augment", default="crop+flip", choices=["none", "flip", "crop+flip"])
    p.add_argument("--crop-prob", "--crop_prob", type=float, default=0.5,
                   help="with --augment crop+flip, the share of images shifted (the rest only flipped or not)")
    p.add_argument("--tta", default="none", choices=["none", "flip"], help="test-time flip averaging")
    p.add_argument("--label-smoothing", "--label_smoothing", type=float, default=0.1)
    args = p.parse_args()
    setup(args)
    xtr, ytr = load("train", 2048 if args.smoke else None)
    xte, yte = load("t10k", 1000 if args.smoke else None)
    mean, std = xtr.mean(), xtr.std()
    xtr, xte = (xtr - mean) / std, (xte - mean) / std
    model = ViT(patch=args.patch, convs=args.convs, stem_width=args.stem_width, pool=args.pool)
    print(f"{sum(t.numel() for t in model.parameters())} parameters")
    variants = augment_index(args.augment) if args.augment != "none" else None
    background = (0 - mean) / std
    total = 30 if args.smoke else (args.max_steps or (len(ytr) + args.batch - 1) // args.batch * args.epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    sched = warmup_cosine(opt, min(300, total // 5), total)
    clock, step = Clock(), 0
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(ytr))
        with clock:
            for i in range(0, len(ytr), args.batch):
                idx = perm[i:i + args.batch]
                x = xtr[idx]
                if variants is not None:
                    B = x.shape[0]
                    flat = torch.cat([x.reshape(B, 784), background.expand(B, 1)], 1)
                    if args.crop_prob >= 1:
                        pick = torch.randint(len(variants), (B,))
                    else:  # the unshifted variant of each flip is the middle one
                        per_flip = len(variants) // 2
                        shift = torch.where(torch.rand(B) < args.crop_prob, torch.randint(per_flip, (B,)),
                                            torch.full((B,), per_flip // 2))
                        pick = torch.randint(2, (B,)) * per_flip + shift
                    x = flat.gather(1, variants[pick]).reshape(B, 28, 28)
                loss = F.cross_entropy(model(x), ytr[idx], label_smoothing=args.label_smoothing)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                step += 1
                if step >= total or clock.over(args.time_limit):
                    break
        acc = accuracy(model, xte, yte, args.tta)
        plain = f" (flip TTA; {accuracy(model, xte, yte) * 100:.2f}% without)" if args.tta == "flip" else ""
        print(f"epoch {epoch}: loss {loss.item():.4f}  test acc {acc * 100:.2f}%{plain}  train time {clock.total:.1f} s "
              f"({step * args.batch / clock.total:.0f} img/s)", flush=True)
        if step >= total or clock.over(args.time_limit):
            break
    print(f"RESULT torch_fashion_vit test_acc={acc * 100:.2f}% train_s={clock.total:.3f} steps={step}")


if __name__ == "__main__":
    main()
