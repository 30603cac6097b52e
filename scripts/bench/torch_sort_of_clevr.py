"""PyTorch peer of scripts/sort_of_clevr.lua: the same scenes (the
generator of lua/ember/data/sort_of_clevr.lua, SplitMix64 included, ported
line by line), the same patch-token model with question tokens
cross-attending to image tokens; relational and non-relational accuracy.

    /usr/bin/python3 scripts/bench/torch_sort_of_clevr.py [--epochs 20] [--threads 2]
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_common import Clock, parser, setup, warmup_cosine

SIZE, OBJ, K = 75, 10, 6
RGB = [(255, 0, 0), (0, 0, 255), (0, 160, 0), (255, 156, 0), (255, 230, 0), (128, 128, 128)]
M64 = (1 << 64) - 1


class Rng:
    def __init__(self, seed):
        self.s = seed & M64

    def next64(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def uniform(self):
        return (self.next64() >> 11) * 2.0 ** -53

    def int(self, lo, hi):
        return lo + math.floor(self.uniform() * (hi - lo + 1))


def place(rng, min_dist=16):
    half = OBJ / 2
    lo, hi = half + 1, SIZE - half - 1
    while True:
        xs, ys, ok = [], [], True
        for k in range(K):
            for _ in range(100):
                x, y = lo + rng.uniform() * (hi - lo), lo + rng.uniform() * (hi - lo)
                ok = all((xs[j] - x) ** 2 + (ys[j] - y) ** 2 >= min_dist * min_dist for j in range(k))
                if ok:
                    break
            if not ok:
                break
            xs.append(x)
            ys.append(y)
        if ok:
            return xs, ys


def answer(kind, c, xs, ys, shapes):  # kind 1..6, c 0-based; answers 1..10 as in Lua
    if kind == 1:
        return 3 + shapes[c] - 1
    if kind == 2:
        return 1 if xs[c] < SIZE / 2 else 2
    if kind == 3:
        return 1 if ys[c] < SIZE / 2 else 2
    if kind == 6:
        return 4 + sum(1 for s in shapes if s == shapes[c])
    d = [((xs[k] - xs[c]) ** 2 + (ys[k] - ys[c]) ** 2, k) for k in range(K) if k != c]
    best = min(d)[1] if kind == 4 else max(d)[1]
    return 3 + shapes[best] - 1


def generate(n, seed):
    rng = Rng(seed)
    centers, shapes, qs, ans, rel = [], [], [], [], []
    for _ in range(n):
        xs, ys = place(rng)
        sh = []
        for k in range(K):
            sh.append(rng.int(1, 2))
        centers.append(list(zip(xs, ys)))
        shapes.append(sh)
        q, a, r = [], [], []
        for i in range(20):
            is_rel = i >= 10
            kind = rng.int(1, 3) + (3 if is_rel else 0)
            colour = rng.int(1, K)
            q.append([6 + kind, colour])
            a.append(answer(kind, colour - 1, xs, ys, sh))
            r.append(is_rel)
        qs.append(q)
        ans.append(a)
        rel.append(r)
    return (torch.tensor(centers, dtype=torch.float32), torch.tensor(shapes), torch.tensor(qs) - 1,
            torch.tensor(ans) - 1, torch.tensor(rel))


def render(centers, shapes):
    B = centers.shape[0]
    g = torch.arange(SIZE, dtype=torch.float32) + 0.5
    dx = (g.view(1, 1, 1, SIZE) - centers[:, :, 0].view(B, K, 1, 1)).abs()
    dy = (g.view(1, 1, SIZE, 1) - centers[:, :, 1].view(B, K, 1, 1)).abs()
    half = OBJ / 2
    square = (dx <= half) & (dy <= half)
    circle = (dx * dx + dy * dy) < half * half - 0.5
    inside = torch.where((shapes == 2).view(B, K, 1, 1), circle, square).float()
    ink = 1 - torch.tensor(RGB, dtype=torch.float32) / 255
    return 1 - torch.einsum("bkhw,kc->bchw", inside, ink)


class Block(nn.Module):  # ember's nn.CrossAttentionBlock with self_attention=true, pre-norm
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.sa = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ca = nn.MultiheadAttention(d, heads, batch_first=True)
        self.n1, self.n2, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ffn), nn.ReLU(), nn.Linear(ffn, d))

    def forward(self, x, img):
        h = self.n1(x)
        x = x + self.sa(h, h, h, need_weights=False)[0]
        x = x + self.ca(self.n2(x), img, img, need_weights=False)[0]
        return x + self.ff(self.n3(x))


class VQA(nn.Module):
    def __init__(self, patch=15, d=64, heads=4, img_layers=2, cross_layers=2, ffn=128):
        super().__init__()
        self.p, self.g = patch, SIZE // patch
        self.patch_embed = nn.Linear(3 * patch * patch, d)
        self.row, self.col = nn.Embedding(self.g, d), nn.Embedding(self.g, d)
        self.register_buffer("rows", torch.arange(self.g).repeat_interleave(self.g))
        self.register_buffer("cols", torch.arange(self.g).repeat(self.g))
        self.img = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, ffn, 0.0, batch_first=True, norm_first=True)
                                  for _ in range(img_layers)])
        self.img_norm = nn.LayerNorm(d)
        self.q_embed = nn.Embedding(12, d)
        self.q_pos = nn.Parameter(torch.randn(2, d) * 0.02)
        self.cross = nn.ModuleList([Block(d, heads, ffn) for _ in range(cross_layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 10))

    def forward(self, img, q):
        B, Q, g, p = img.shape[0], q.shape[1], self.g, self.p
        patches = img.reshape(B, 3, g, p, g, p).permute(0, 2, 4, 1, 3, 5).reshape(B, g * g, 3 * p * p)
        h = self.patch_embed(patches) + self.row(self.rows) + self.col(self.cols)
        for layer in self.img:
            h = layer(h)
        mem = self.img_norm(h)
        mem = mem.unsqueeze(1).expand(B, Q, g * g, mem.shape[-1]).reshape(B * Q, g * g, -1)
        x = self.q_embed(q.reshape(B * Q, 2)) + self.q_pos
        for blk in self.cross:
            x = blk(x, mem)
        return self.head(self.norm(x).mean(1))


def evaluate(model, data, idx):
    centers, shapes, q, a, rel = data
    model.eval()
    ok_r = ok_n = n_r = n_n = 0
    with torch.no_grad():
        for i in range(0, len(idx), 50):
            b = idx[i:i + 50]
            hit = model(render(centers[b], shapes[b]), q[b]).argmax(1) == a[b].reshape(-1)
            r = rel[b].reshape(-1)
            ok_r += (hit & r).sum().item()
            ok_n += (hit & ~r).sum().item()
            n_r += r.sum().item()
            n_n += (~r).sum().item()
    model.train()
    return ok_r / n_r, ok_n / n_n


def main():
    p = parser("PyTorch peer of scripts/sort_of_clevr.lua", epochs=20, lr=1e-3, batch=32)
    args = p.parse_args()
    setup(args)
    n_train, n_test = (256, 50) if args.smoke else (9800, 200)
    data = generate(n_train + n_test, args.seed)
    centers, shapes, q, a, rel = data
    train_idx, test_idx = torch.arange(n_train), torch.arange(n_train, n_train + n_test)
    model = VQA()
    total = 8 if args.smoke else (args.max_steps or (n_train + args.batch - 1) // args.batch * args.epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = warmup_cosine(opt, min(300, total // 5), total)
    clock, step = Clock(), 0
    for epoch in range(1, args.epochs + 1):
        perm = train_idx[torch.randperm(n_train)]
        with clock:
            for i in range(0, n_train, args.batch):
                b = perm[i:i + args.batch]
                logits = model(render(centers[b], shapes[b]), q[b])
                loss = F.cross_entropy(logits, a[b].reshape(-1))
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                step += 1
                if step >= total or clock.over(args.time_limit):
                    break
        r, n = evaluate(model, data, test_idx)
        print(f"epoch {epoch}: loss {loss.item():.4f}  test relational {r * 100:.2f}%  non-relational {n * 100:.2f}%  "
              f"train time {clock.total:.1f} s", flush=True)
        if step >= total or clock.over(args.time_limit):
            break
    print(f"RESULT torch_sort_of_clevr rel_acc={r * 100:.2f}% nonrel_acc={n * 100:.2f}% train_s={clock.total:.1f} steps={step}")


if __name__ == "__main__":
    main()
