"""PyTorch peer of scripts/addition.lua: an encoder-decoder Transformer
(d=128, 4 heads, FFN 512, 2 pre-LN encoder + 2 decoder layers) learning
3-digit addition; exact match of greedy decoding on 5,000 held-out
problems that never overlap the 50,000 training ones (nor their mirrors).

    /usr/bin/python3 scripts/bench/torch_addition.py [--epochs 30] [--threads 2]
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_common import Clock, parser, setup, warmup_cosine

PAD, UNK, BOS, EOS = 0, 1, 2, 3
ALPHABET = "0123456789+"
STOI = {c: i + 4 for i, c in enumerate(ALPHABET)}
ITOS = {i: c for c, i in STOI.items()}
SRC_LEN, TGT_LEN = 7, 6


def generate(n_train, n_test, seed):
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(1000 * 1000, generator=g).tolist()
    used, train, test = set(), [], []
    for p in perm:
        a, b = divmod(p, 1000)
        key = (min(a, b), max(a, b))
        if len(train) < n_train:
            train.append((a, b))
            used.add(key)
        elif key not in used:
            test.append((a, b))
            used.add(key)
            if len(test) >= n_test:
                break
    return train, test


def tensors(pairs):
    src = torch.full((len(pairs), SRC_LEN), PAD, dtype=torch.long)
    tgt = torch.full((len(pairs), TGT_LEN), PAD, dtype=torch.long)
    for r, (a, b) in enumerate(pairs):
        s = [STOI[c] for c in f"{a}+{b}"]
        t = [BOS] + [STOI[c] for c in str(a + b)] + [EOS]
        src[r, : len(s)] = torch.tensor(s)
        tgt[r, : len(t)] = torch.tensor(t)
    return src, tgt


class Seq2Seq(nn.Module):
    def __init__(self, d=128, heads=4, ffn=512, enc=2, dec=2):
        super().__init__()
        V = len(ALPHABET) + 4
        self.embed = nn.Embedding(V, d, padding_idx=PAD)
        self.src_pos = nn.Parameter(torch.randn(SRC_LEN, d) * 0.02)
        self.tgt_pos = nn.Parameter(torch.randn(TGT_LEN, d) * 0.02)
        self.enc = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, ffn, 0.0, batch_first=True, norm_first=True)
                                  for _ in range(enc)])
        self.dec = nn.ModuleList([nn.TransformerDecoderLayer(d, heads, ffn, 0.0, batch_first=True, norm_first=True)
                                  for _ in range(dec)])
        self.enc_norm, self.dec_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.out = nn.Linear(d, V)

    def encode(self, src, mask):
        h = self.embed(src) + self.src_pos[: src.shape[1]]
        for layer in self.enc:
            h = layer(h, src_key_padding_mask=mask)
        return self.enc_norm(h)

    def decode(self, tgt, memory, mask):
        L = tgt.shape[1]
        h = self.embed(tgt) + self.tgt_pos[:L]
        causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        for layer in self.dec:
            h = layer(h, memory, tgt_mask=causal, memory_key_padding_mask=mask)
        return self.out(self.dec_norm(h))

    @torch.no_grad()
    def greedy(self, src):
        mask = src == PAD
        memory = self.encode(src, mask)
        ids = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
        for _ in range(TGT_LEN - 1):  # no KV cache in nn.TransformerDecoderLayer: the prefix is recomputed
            nxt = self.decode(ids, memory, mask)[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], 1)
        out = []
        for row in ids[:, 1:].tolist():
            s = []
            for t in row:
                if t == EOS:
                    break
                s.append(ITOS.get(t, "?"))
            out.append("".join(s))
        return out


def exact_match(model, src, answers):
    model.eval()
    ok = 0
    for i in range(0, len(answers), 1000):
        got = model.greedy(src[i:i + 1000])
        ok += sum(g == a for g, a in zip(got, answers[i:i + 1000]))
    model.train()
    return ok / len(answers)


def main():
    args = parser("PyTorch peer of scripts/addition.lua", epochs=30, lr=1e-3, batch=128).parse_args()
    setup(args)
    n_train, n_test = (2000, 200) if args.smoke else (50000, 5000)
    train, test = generate(n_train, n_test, args.seed)
    src, tgt = tensors(train)
    src_te, _ = tensors(test)
    answers = [str(a + b) for a, b in test]
    model = Seq2Seq()
    total = 40 if args.smoke else (args.max_steps or (len(train) + args.batch - 1) // args.batch * args.epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = warmup_cosine(opt, min(400, total // 5), total)
    clock, step = Clock(), 0
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(train))
        with clock:
            for i in range(0, len(train), args.batch):
                idx = perm[i:i + args.batch]
                s, t = src[idx], tgt[idx]
                s = s[:, : int((s != PAD).sum(1).max())]
                t = t[:, : int((t != PAD).sum(1).max())]
                logits = model.decode(t[:, :-1], model.encode(s, s == PAD), s == PAD)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t[:, 1:].reshape(-1), ignore_index=PAD)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                step += 1
                if step >= total or clock.over(args.time_limit):
                    break
        em = exact_match(model, src_te, answers)
        print(f"epoch {epoch}: loss {loss.item():.4f}  held-out exact match {em * 100:.2f}%  train time {clock.total:.1f} s",
              flush=True)
        if step >= total or clock.over(args.time_limit):
            break
    print(f"RESULT torch_addition exact_match={em * 100:.2f}% train_s={clock.total:.3f} steps={step}")


if __name__ == "__main__":
    main()
