"""PyTorch peer of scripts/sort_of_clevr.lua: the same scenes (the
generator of lua/ember/data/sort_of_clevr.lua, SplitMix64 included, ported
line by line), the same models in the same configs; relational,
non-relational and per-kind accuracy. As the Lua script, --model picks one:
  conv (the default, ember.models.CrossAttentionVLM{stem = "conv"}): the
        image and each pixel's x, y through four 3x3 stride-2 Conv2d (24
        channels) with BatchNorm and ReLU, the 5x5 cells as image tokens
        (channels, centre, Fourier features of it), two pre-LN encoder
        layers, the question's kind and colour embeddings through two
        cross-attention blocks; lr 1e-3, 100 epochs;
  given: object slots pooled from the inked pixels of each colour,
        question tokens cross-attending to the object tokens,
        distance-biased heads in the image layers and the cross-attention;
        lr 3e-3, 20 epochs.

    /usr/bin/python3 scripts/bench/torch_sort_of_clevr.py [--model conv] [--epochs 100] [--threads 2] [--bf16]
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

    def forward(self, x, img, img_mask=None):
        h = self.n1(x)
        x = x + self.sa(h, h, h, need_weights=False)[0]
        x = x + self.ca(self.n2(x), img, img, attn_mask=img_mask, need_weights=False)[0]
        return x + self.ff(self.n3(x))


def add_layers(m, d, heads, img_layers, cross_layers, ffn):  # both models' image layers and question blocks
    m.img = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, ffn, 0.0, batch_first=True, norm_first=True)
                           for _ in range(img_layers)])
    m.img_norm = nn.LayerNorm(d)
    m.q_embed = nn.Embedding(12, d)
    m.q_pos = nn.Parameter(torch.randn(2, d) * 0.02)
    m.cross = nn.ModuleList([Block(d, heads, ffn) for _ in range(cross_layers)])


COLOUR_FREQS = 3


def colour_features(rgb):  # a pixel's colour and its Fourier features, as in the Lua script
    parts = [rgb]
    for f in range(COLOUR_FREQS):
        a = rgb * (math.pi * 2 ** f)
        parts += [a.sin(), a.cos()]
    return torch.cat(parts, -1)


def distances(pos):  # pairwise distances [B, K, K] between object centres [B, K, 2], no gradient
    p = pos.detach()
    return ((p.unsqueeze(2) - p.unsqueeze(1)) ** 2).sum(3).add(1e-8).sqrt()


def slope_list(spec):  # "-32,32,0,0" -> [-32.0, 32.0, 0.0, 0.0]; "" -> None
    return [float(v) for v in spec.split(",") if v.strip()] or None


class VQA(nn.Module):
    def __init__(self, d=64, heads=4, img_layers=2, cross_layers=2, ffn=128, pixel_dim=32, fourier=4, relative=False,
                 distance_slopes=None, subject_slopes=None, window=0.0, compete=False, slots="colour"):
        super().__init__()
        self.window, self.compete = window, compete
        self.colour_slots = slots == "colour"
        self.register_buffer("slot_rgb", torch.tensor(RGB, dtype=torch.float32) / 255)  # [K, 3]
        self.heads = heads
        # distance biases, as the Lua script: a head with a negative slope cannot see
        # its own token (image layers) or the question's subject (cross-attention)
        self.distance_slopes, self.subject_slopes = distance_slopes, subject_slopes
        if distance_slopes:
            sl = torch.tensor(distance_slopes).view(1, heads, 1, 1)
            self.register_buffer("slopes", sl)
            self.register_buffer("self_block", torch.eye(K).view(1, 1, K, K) * (sl < 0).float() * -1e4)
        if subject_slopes:
            sl = torch.tensor(subject_slopes).view(1, heads, 1, 1)
            self.register_buffer("sub_slopes", sl)
            self.register_buffer("sub_block", (sl < 0).float() * -1e4)
        dp = pixel_dim
        self.dp, self.n_freq, self.relative = dp, fourier, relative
        self.pixel = nn.Sequential(nn.Linear(3 + 6 * COLOUR_FREQS, dp), nn.ReLU(), nn.Linear(dp, dp), nn.ReLU())
        self.pix_value = nn.Linear(dp, dp)
        if not self.colour_slots:  # learned slots: attention from the colour's question embedding
            self.pix_key, self.slot_query = nn.Linear(dp, dp), nn.Linear(d, dp)
        g = (torch.arange(SIZE, dtype=torch.float32) + 0.5) / SIZE * 2 - 1
        self.register_buffer("xy", torch.stack([g.repeat(SIZE), g.repeat_interleave(SIZE)], 1))  # x fastest
        self.register_buffer("freqs", math.pi * 2.0 ** torch.arange(fourier, dtype=torch.float32) / 2)
        self.object_embed = nn.Linear(dp + 5 + 4 * fourier, d)
        add_layers(self, d, heads, img_layers, cross_layers, ffn)
        if relative:
            self.rel_embed = nn.Sequential(nn.Linear(2, d), nn.ReLU(), nn.Linear(d, d))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 10))

    def encode(self, img):  # -> object tokens after the image layers, and before them [B, K, d]
        B, P = img.shape[0], SIZE * SIZE
        pix = img.reshape(B, 3, P).transpose(1, 2)
        M = K * (OBJ + 1) * (OBJ + 1)  # the inkiest pixels: every inked one, padded with white
        ink, at = (1 - pix).sum(2).topk(M, 1)
        pix = pix.gather(1, at.unsqueeze(2).expand(B, M, 3))
        xy = self.xy[at]
        blank = (ink < 0.01).float().view(B, 1, M)
        h = self.pixel(colour_features(pix))
        colour = self.q_embed.weight[:K]  # slot k wears the embedding of colour k
        if self.colour_slots:  # object-centric pooling by colour, as the Lua script
            diff = pix.view(B, 1, M, 3) - self.slot_rgb.view(1, K, 1, 3)
            logits = (((diff * diff).sum(3) < 1e-3).float() - 1) * 1e4
        else:
            logits = self.slot_query(colour).view(1, K, self.dp) @ self.pix_key(h).transpose(1, 2)
        if self.compete and not self.colour_slots:  # slots compete for the pixels
            logits = logits + logits.log_softmax(1)
        w = (logits - blank * 1e4).softmax(2)
        pos = w @ xy
        sw, inside = w, 1 - blank  # the pixels the shape features see
        if self.window > 0:  # those within `window` px of the slot's centre
            far = ((xy.unsqueeze(1) - pos.detach().unsqueeze(2)) ** 2).sum(3).gt((self.window / (SIZE / 2)) ** 2).float()
            sw = (logits - (blank + far) * 1e4).softmax(2)
            inside = inside * (1 - far)
        feat, spos = sw @ self.pix_value(h), sw @ xy
        area = (logits.sigmoid() * inside).sum(2, keepdim=True) / 100  # the shape: area and spread
        spread = ((sw @ (xy * xy) - spos * spos) * ((SIZE / 2) ** 2 / 10)).log1p()
        ang = pos.unsqueeze(3) * self.freqs
        four = torch.cat([ang.sin(), ang.cos()], 3).reshape(B, K, 4 * self.n_freq)
        obj = self.object_embed(torch.cat([feat, pos, spread, area, four], 2)) + colour
        tok, mask = obj, None
        if self.distance_slopes:  # [B*H, K, K], PyTorch's layout of a per-head mask
            mask = (distances(pos).unsqueeze(1) * self.slopes + self.self_block).reshape(B * self.heads, K, K)
        for layer in self.img:
            tok = layer(tok, src_mask=mask)
        return self.img_norm(tok), obj, pos

    def forward(self, img, q):
        B, Q = img.shape[0], q.shape[1]
        mem, obj, pos = self.encode(img)
        d = mem.shape[-1]
        mem = mem.unsqueeze(1).expand(B, Q, K, d).reshape(B * Q, K, d)
        if self.relative:  # every object seen from the question's subject
            origin = pos[torch.arange(B).unsqueeze(1), q[:, :, 1]].reshape(B * Q, 1, 2)
            mem = mem + self.rel_embed(pos.unsqueeze(1).expand(B, Q, K, 2).reshape(B * Q, K, 2) - origin)
        kind = self.q_embed(q[:, :, 0].reshape(B * Q, 1))
        subject = obj[torch.arange(B).unsqueeze(1), q[:, :, 1]].reshape(B * Q, 1, d)  # slot of the colour
        x = torch.cat([kind, subject], 1) + self.q_pos
        img_mask = None
        if self.subject_slopes:  # each object's distance from the question's subject
            frm = distances(pos)[torch.arange(B).unsqueeze(1), q[:, :, 1]].reshape(B * Q, 1, 1, K)
            is_subject = F.one_hot(q[:, :, 1].reshape(-1), K).float().view(B * Q, 1, 1, K)
            img_mask = (frm * self.sub_slopes + is_subject * self.sub_block).expand(B * Q, self.heads, 2, K)
            img_mask = img_mask.reshape(B * Q * self.heads, 2, K)
        for blk in self.cross:
            x = blk(x, mem, img_mask)
        return self.head(self.norm(x).mean(1))


class ConvVQA(nn.Module):  # ember.models.CrossAttentionVLM{stem = "conv"}, the Lua script's --model conv
    def __init__(self, d=64, heads=4, img_layers=2, cross_layers=2, ffn=128, fourier=4, channels=(24, 24, 24, 24)):
        super().__init__()
        layers, c_in, side = [], 3 + 2, SIZE
        for c in channels:  # 3x3 stride 2 with BatchNorm and ReLU (Relation Networks' CNN)
            layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.BatchNorm2d(c), nn.ReLU()]
            c_in, side = c, (side - 1) // 2 + 1
        self.stem = nn.Sequential(*layers)
        g = (torch.arange(SIZE, dtype=torch.float32) + 0.5) / SIZE * 2 - 1  # CoordConv's x and y channels
        self.register_buffer("pixel_xy", torch.stack([g.view(1, SIZE).expand(SIZE, SIZE),
                                                      g.view(SIZE, 1).expand(SIZE, SIZE)]).unsqueeze(0))
        step = 1 << len(channels)  # cell i is centred on input pixel step * i (0-based)
        c = (torch.arange(side, dtype=torch.float32) * step + 0.5) / SIZE * 2 - 1
        cxy = torch.stack([c.repeat(side), c.repeat_interleave(side)], 1)  # [N, 2], row-major cells
        parts = [cxy]
        for f in range(fourier):
            a = cxy * (math.pi * 2 ** f / 2)
            parts += [a.sin(), a.cos()]
        self.register_buffer("token_pos", torch.cat(parts, 1))  # [N, 2 + 4F]
        self.token_embed = nn.Linear(c_in + 2 + 4 * fourier, d)
        add_layers(self, d, heads, img_layers, cross_layers, ffn)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 10))

    def forward(self, img, q):
        B, Q = img.shape[0], q.shape[1]
        f = self.stem(torch.cat([img, self.pixel_xy.expand(B, 2, SIZE, SIZE)], 1))  # [B, C, g, g]
        C, N = f.shape[1], f.shape[2] * f.shape[3]
        pos = self.token_pos
        tok = self.token_embed(torch.cat([f.reshape(B, C, N).transpose(1, 2).float(),
                                          pos.view(1, N, -1).expand(B, N, pos.shape[1])], 2))
        tok = tok.float()  # (torch 1.13's CPU autocast refuses a bfloat16 input to layer_norm)
        for layer in self.img:
            tok = layer(tok)
        mem = self.img_norm(tok)
        d = mem.shape[-1]
        mem = mem.unsqueeze(1).expand(B, Q, N, d).reshape(B * Q, N, d)
        x = torch.cat([self.q_embed(q[:, :, 0].reshape(B * Q, 1)), self.q_embed(q[:, :, 1].reshape(B * Q, 1))], 1)
        x = x + self.q_pos  # the colour token is the colour's embedding: finding its object is learned
        for blk in self.cross:
            x = blk(x, mem)
        return self.head(self.norm(x).mean(1))


EPOCHS, LR, WARMUP, RELATIVE = 100, 1e-3, 100, False  # the Lua script's defaults (--model conv)
GIVEN_EPOCHS, GIVEN_LR = 20, 3e-3  # --model given's own
DISTANCE_SLOPES, SUBJECT_SLOPES = "-1000,1000,0,0", "-1000,1000,0,0"
WINDOW, COMPETE = 0.0, False
KINDS = ["shape", "left", "top", "closest", "furthest", "count"]


def evaluate(model, data, idx):  # -> relational, non-relational, {kind: accuracy}
    centers, shapes, q, a, rel = data
    model.eval()
    ok, n = [0] * 6, [0] * 6
    with torch.no_grad():
        for i in range(0, len(idx), 50):
            b = idx[i:i + 50]
            hit = model(render(centers[b], shapes[b]), q[b]).argmax(1) == a[b].reshape(-1)
            kind = q[b][:, :, 0].reshape(-1) - 6  # kind tokens 6..11 (0-based)
            for k in range(6):
                ok[k] += (hit & (kind == k)).sum().item()
                n[k] += (kind == k).sum().item()
    model.train()
    acc = {KINDS[k]: ok[k] / max(n[k], 1) for k in range(6)}
    return sum(ok[3:]) / max(sum(n[3:]), 1), sum(ok[:3]) / max(sum(n[:3]), 1), acc


def main():
    p = parser("PyTorch peer of scripts/sort_of_clevr.lua", epochs=None, lr=None, batch=32)
    p.add_argument("--model", choices=("conv", "given"), default="conv")
    p.add_argument("--warmup", type=int, default=WARMUP)
    p.add_argument("--relative", type=lambda v: v.lower() in ("1", "true", "yes"), default=RELATIVE)
    p.add_argument("--distance_slopes", default=DISTANCE_SLOPES)
    p.add_argument("--subject_slopes", default=SUBJECT_SLOPES)
    p.add_argument("--window", type=float, default=WINDOW)
    p.add_argument("--compete", type=lambda v: v.lower() in ("1", "true", "yes"), default=COMPETE)
    p.add_argument("--slots", choices=("colour", "learned"), default="colour")
    args = p.parse_args()
    if args.epochs is None:
        args.epochs = EPOCHS if args.model == "conv" else GIVEN_EPOCHS
    if args.lr is None:
        args.lr = LR if args.model == "conv" else GIVEN_LR
    setup(args)
    n_train, n_test = (256, 50) if args.smoke else (9800, 200)
    data = generate(n_train + n_test, args.seed)
    centers, shapes, q, a, rel = data
    train_idx, test_idx = torch.arange(n_train), torch.arange(n_train, n_train + n_test)
    model = ConvVQA() if args.model == "conv" else VQA(relative=args.relative, distance_slopes=slope_list(args.distance_slopes),
                subject_slopes=slope_list(args.subject_slopes), window=args.window, compete=args.compete,
                slots=args.slots)
    print(f"{sum(p.numel() for p in model.parameters())} parameters")
    total = 8 if args.smoke else (args.max_steps or (n_train + args.batch - 1) // args.batch * args.epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = warmup_cosine(opt, min(args.warmup, total // 5), total)
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
        r, n, acc = evaluate(model, data, test_idx)
        kinds = ", ".join(f"{k} {acc[k] * 100:.1f}%" for k in KINDS[3:]) + "; " + \
            ", ".join(f"{k} {acc[k] * 100:.1f}%" for k in KINDS[:3])
        print(f"epoch {epoch}: loss {loss.item():.4f}  test relational {r * 100:.2f}%  non-relational {n * 100:.2f}%  "
              f"[{kinds}]  train time {clock.total:.1f} s", flush=True)
        if step >= total or clock.over(args.time_limit):
            break
    print(f"RESULT torch_sort_of_clevr rel_acc={r * 100:.2f}% nonrel_acc={n * 100:.2f}% closest_acc={acc['closest'] * 100:.2f}% "
          f"furthest_acc={acc['furthest'] * 100:.2f}% count_acc={acc['count'] * 100:.2f}% train_s={clock.total:.3f} steps={step}")


if __name__ == "__main__":
    main()
