"""PyTorch peer of scripts/langid.lua: the AttentionClassifier on single
words of 5 languages, same data rules, model and optimiser.

    /usr/bin/python3 scripts/bench/torch_langid.py [--epochs 6] [--threads 2]
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_common import Clock, parser, setup, warmup_cosine

LISTS = [("English", "/usr/share/dict/american-english"), ("French", "/usr/share/dict/french"),
         ("German", "/usr/share/dict/ngerman"), ("Spanish", "/usr/share/dict/spanish"),
         ("Italian", "/usr/share/dict/italian")]
MAX_CHARS = 20


def load(n_train, n_test, seed):
    owner, lists = {}, []
    for i, (_, path) in enumerate(LISTS):
        words = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                w = line.rstrip("\n\r")
                if "'" in w or "\u2019" in w:
                    continue
                w = w.lower()
                if not 2 <= len(w) <= MAX_CHARS:
                    continue
                o = owner.get(w)
                if o is None:
                    owner[w] = i
                    words.append(w)
                elif o != i:
                    owner[w] = -1
        lists.append(words)
    rng = random.Random(seed)
    train, test = [], []
    for i, words in enumerate(lists):
        clean = [w for w in words if owner[w] == i]
        rng.shuffle(clean)
        train += [(w, i) for w in clean[:n_train]]
        test += [(w, i) for w in clean[n_train:n_train + n_test]]
    return train, test


HASH_MUL = 1000003


def ngram_ids(ids, ngrams, buckets):
    """The hashed ids of the character 2..ngrams-grams ending at each position
    [B, L, ngrams - 1], 0 (padding) where there is none: the same hash as
    langid.lua's ngram_ids over its 1-based token ids (ours + 1), with Lua's
    wrapping 64-bit integers and floor modulo."""
    K = max(ngrams - 1, 1)
    out = []
    for row in ids.tolist():
        n_tok = sum(1 for t in row if t != 0)
        grams = []
        for j in range(len(row)):  # 0-based position; Lua's j is j + 1
            for n in range(2, K + 2):
                g = 0
                if j < n_tok and j + 1 >= n:
                    h = n
                    for t in row[j - n + 1: j + 1]:
                        h = (h * HASH_MUL + t + 1) & 0xFFFFFFFFFFFFFFFF
                    if h >= 1 << 63:
                        h -= 1 << 64
                    g = 1 + h % (buckets - 1)
                grams.append(g)
        out.append(grams)
    return torch.tensor(out, dtype=torch.long).view(ids.shape[0], ids.shape[1], K)


class AttentionClassifier(nn.Module):
    def __init__(self, vocab, d=64, heads=4, layers=2, ffn=256, hidden=128, classes=5, dropout=0.1,
                 ngrams=5, buckets=32768):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.ngram_embed = nn.Embedding(buckets, d, padding_idx=0) if ngrams > 1 else None
        self.pos = nn.Parameter(torch.randn(MAX_CHARS + 2, d) * 0.02)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, ffn, dropout, batch_first=True,
                                                                norm_first=True) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, classes))

    def forward(self, ids, mask, grams):
        x = self.embed(ids) + self.pos[: ids.shape[1]]
        if self.ngram_embed is not None:
            x = x + self.ngram_embed(grams[:, : ids.shape[1]]).sum(2)
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=mask)
        x = self.norm(x)
        keep = (~mask).float().unsqueeze(2)
        return self.head((x * keep).sum(1) / keep.sum(1))


def encode(pairs, stoi):
    # <pad>=0 <unk>=1 <bos>=2 <eos>=3, then characters
    L = max(len(w) for w, _ in pairs) + 2
    ids = torch.zeros(len(pairs), L, dtype=torch.long)
    for r, (w, _) in enumerate(pairs):
        seq = [2] + [stoi.get(c, 1) for c in w] + [3]
        ids[r, : len(seq)] = torch.tensor(seq)
    return ids, torch.tensor([y for _, y in pairs])


def accuracy(model, ids, grams, y):
    model.eval()
    with torch.no_grad():
        ok = sum((model(ids[i:i + 512], ids[i:i + 512] == 0, grams[i:i + 512]).argmax(1) == y[i:i + 512]).sum().item()
                 for i in range(0, len(y), 512))
    model.train()
    return ok / len(y)


def main():
    p = parser("PyTorch peer of scripts/langid.lua", epochs=4, lr=3e-3, batch=64)
    # the defaults of scripts/langid.lua (see the reasons there)
    p.add_argument("--d-model", "--d_model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--ffn", type=int, default=256)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--ngrams", type=int, default=5)
    p.add_argument("--ngram-buckets", "--ngram_buckets", type=int, default=32768)
    p.add_argument("--weight-decay", "--weight_decay", type=float, default=0.01)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--label-smoothing", "--label_smoothing", type=float, default=0.0)
    args = p.parse_args()
    setup(args)
    n_train, n_test = (400, 100) if args.smoke else (10000, 2000)
    train, test = load(n_train, n_test, args.seed)
    chars = sorted({c for w, _ in train for c in w})
    stoi = {c: i + 4 for i, c in enumerate(chars)}
    xtr, ytr = encode(train, stoi)
    xte, yte = encode(test, stoi)
    gtr, gte = (ngram_ids(x, args.ngrams, args.ngram_buckets) for x in (xtr, xte))
    model = AttentionClassifier(len(stoi) + 4, d=args.d_model, heads=args.heads, layers=args.layers, ffn=args.ffn,
                                hidden=args.hidden, dropout=args.dropout, ngrams=args.ngrams,
                                buckets=args.ngram_buckets)
    steps_per_epoch = (len(ytr) + args.batch - 1) // args.batch
    total = args.max_steps or steps_per_epoch * args.epochs
    if args.smoke:
        total = 40
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sched = warmup_cosine(opt, min(args.warmup, total // 5), total)
    clock, step = Clock(), 0
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(ytr))
        with clock:
            for i in range(0, len(ytr), args.batch):
                idx = perm[i:i + args.batch]
                ids = xtr[idx]
                ids = ids[:, : int((ids != 0).sum(1).max())]
                logits = model(ids, ids == 0, gtr[idx])
                loss = F.cross_entropy(logits, ytr[idx], label_smoothing=args.label_smoothing)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                step += 1
                if step >= total or clock.over(args.time_limit):
                    break
        acc = accuracy(model, xte, gte, yte)
        print(f"epoch {epoch}: loss {loss.item():.4f}  test acc {acc * 100:.2f}%  train time {clock.total:.1f} s "
              f"({step * args.batch / clock.total:.0f} words/s)", flush=True)
        if step >= total or clock.over(args.time_limit):
            break
    print(f"RESULT torch_langid test_acc={acc * 100:.2f}% train_s={clock.total:.3f} steps={step}")


if __name__ == "__main__":
    main()
