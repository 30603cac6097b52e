#!/usr/bin/python3
"""Writes tests/fixtures/nn_moe.lua: PyTorch float64 references for nn.MoE
(lua/ember/nn/MoE.lua), for tests/lua/nn_moe_spec.lua.

Run with Debian's python3-torch (1.13):  /usr/bin/python3 tests/gen_moe_fixtures.py

PyTorch 1.13 has no mixture-of-experts layer: the blocks are written here
from Hugging Face transformers' modeling code, as a user porting a
checkpoint would check them:

  * MixtralSparseMoeBlock: router logits = gate(h); softmax over all
    experts, top-k, renormalised; each expert w2(silu(w1 x) * w3 x); the
    loop over experts with torch.where(one_hot mask) and index_add_;
  * Qwen2MoeSparseMoeBlock: softmax, top-k, renormalised only with
    norm_topk_prob; gate_proj/up_proj/down_proj experts; a shared expert
    scaled by sigmoid(shared_expert_gate(h));
  * a DeepSeek-MoE-style block: softmax then top-k renormalised, two
    shared experts as one MLP of twice the width (`shared_experts.*`).

Hugging Face's softmax(..., dtype=torch.float) would round float64 to
float32: here the router runs in the input's dtype (float64). The auxiliary
losses are transformers' load_balancing_loss_func (one layer: num_experts *
sum over the k choices and experts of mean(one_hot) * mean(softmax)) and
ST-MoE's z-loss mean(logsumexp(logits)^2).

Each case stores the weights under Hugging Face's names, the input x, the
output, aux_loss, z_loss, the tokens per expert, and the gradients of
sum(out * R) + 0.3 * aux_loss + 0.7 * z_loss for x and every weight.
The case with an attention_mask (transformers' [B, L], 1 = token) takes
the losses (z-loss: a mean over the tokens) and counts over the tokens only.

Its own seed: the other fixtures do not change when this one does.
"""
import os

import torch
import torch.nn.functional as F
from torch import nn

from fixture_writer import Writer

torch.manual_seed(20261207)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
AUX, Z = 0.3, 0.7


class MixtralExpert(nn.Module):
    def __init__(self, d, dff):
        super().__init__()
        self.w1 = nn.Linear(d, dff, bias=False)  # gate projection
        self.w2 = nn.Linear(dff, d, bias=False)  # down projection
        self.w3 = nn.Linear(d, dff, bias=False)  # up projection

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class QwenMLP(nn.Module):
    def __init__(self, d, dff):
        super().__init__()
        self.gate_proj = nn.Linear(d, dff, bias=False)
        self.up_proj = nn.Linear(d, dff, bias=False)
        self.down_proj = nn.Linear(dff, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class SparseMoeBlock(nn.Module):
    """MixtralSparseMoeBlock (norm_topk_prob=True, no shared expert) and
    Qwen2MoeSparseMoeBlock in one."""

    def __init__(self, d, dff, E, k, expert=MixtralExpert, norm_topk_prob=True, shared=None,
                 shared_name="shared_expert", shared_gate=False):
        super().__init__()
        self.E, self.k, self.norm_topk_prob = E, k, norm_topk_prob
        self.gate = nn.Linear(d, E, bias=False)
        self.experts = nn.ModuleList([expert(d, dff) for _ in range(E)])
        self.shared_name = shared_name
        if shared:
            setattr(self, shared_name, QwenMLP(d, shared))
        self.shared_expert_gate = nn.Linear(d, 1, bias=False) if shared_gate else None

    def forward(self, hidden_states):
        d = hidden_states.shape[-1]
        h = hidden_states.reshape(-1, d)
        router_logits = self.gate(h)
        routing_weights = F.softmax(router_logits, dim=1, dtype=h.dtype)
        routing_weights, selected_experts = torch.topk(routing_weights, self.k, dim=-1)
        if self.norm_topk_prob:
            routing_weights = routing_weights / routing_weights.sum(dim=-1, keepdim=True)
        final = torch.zeros_like(h)
        expert_mask = F.one_hot(selected_experts, num_classes=self.E).permute(2, 1, 0)
        for e in range(self.E):
            idx, top_x = torch.where(expert_mask[e])
            current_state = h[None, top_x].reshape(-1, d)
            current = self.experts[e](current_state) * routing_weights[top_x, idx, None]
            final = final.index_add(0, top_x, current.to(h.dtype))
        shared = getattr(self, self.shared_name, None)
        if shared is not None:
            s = shared(h)
            if self.shared_expert_gate is not None:
                s = torch.sigmoid(self.shared_expert_gate(h)) * s
            final = final + s
        return final.reshape(hidden_states.shape), router_logits, selected_experts


def load_balancing_loss(gate_logits, num_experts, top_k, attention_mask=None):
    """transformers' load_balancing_loss_func for one layer."""
    routing_weights = F.softmax(gate_logits, dim=-1)
    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    expert_mask = F.one_hot(selected_experts, num_experts).to(routing_weights.dtype)
    if attention_mask is None:
        tokens_per_expert = torch.mean(expert_mask, dim=0)
        router_prob_per_expert = torch.mean(routing_weights, dim=0)
    else:
        m = attention_mask.reshape(-1).to(routing_weights.dtype)
        expert_attention_mask = m[:, None, None].expand(-1, top_k, num_experts)
        tokens_per_expert = torch.sum(expert_mask * expert_attention_mask, dim=0) / torch.sum(
            expert_attention_mask, dim=0)
        router_per_expert_attention_mask = m[:, None].expand(-1, num_experts)
        router_prob_per_expert = torch.sum(routing_weights * router_per_expert_attention_mask, dim=0) / torch.sum(
            router_per_expert_attention_mask, dim=0)
    return torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0)) * num_experts


def case(name, block, x_shape, opts, attention_mask=None):
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape) * 0.5)
    x = torch.randn(*x_shape, requires_grad=True)
    out, logits, selected = block(x)
    aux = load_balancing_loss(logits, block.E, block.k, attention_mask)
    z2 = torch.logsumexp(logits, -1).square()
    if attention_mask is None:
        z = z2.mean()
        counted = selected
    else:
        m = attention_mask.reshape(-1).to(z2.dtype)
        z = (z2 * m).sum() / m.sum()
        counted = selected[attention_mask.reshape(-1).bool()]
    R = torch.randn(out.shape)
    loss = (out * R).sum() + AUX * aux + Z * z
    loss.backward()
    state = {k: v.detach().clone() for k, v in block.state_dict().items()}
    grads = {k: p.grad.clone() for k, p in block.named_parameters()}
    return {"name": name, "opts": opts, "state": state, "x": x.detach(), "out": out.detach(), "R": R,
            "aux_loss": aux.item(), "z_loss": z.item(),
            "tokens_per_expert": torch.bincount(counted.reshape(-1), minlength=block.E),
            "attention_mask": attention_mask,
            "grad_x": x.grad.clone(), "grads": grads}


def main():
    d, dff = 6, 8
    cases = [
        case("mixtral", SparseMoeBlock(d, dff, 4, 2), (2, 5, d),
             {"d_model": d, "d_ff": dff, "num_experts": 4, "top_k": 2}),
        case("qwen2_shared_gate", SparseMoeBlock(d, dff, 6, 3, expert=QwenMLP, norm_topk_prob=False, shared=10,
                                                 shared_gate=True), (7, d),
             {"d_model": d, "d_ff": dff, "num_experts": 6, "top_k": 3, "router": "softmax_topk",
              "norm_topk_prob": False, "shared_experts": 1, "shared_d_ff": 10, "shared_expert_gate": True}),
        case("deepseek_shared", SparseMoeBlock(d, dff, 5, 2, expert=QwenMLP, norm_topk_prob=True, shared=2 * dff,
                                               shared_name="shared_experts"), (3, 4, d),
             {"d_model": d, "d_ff": dff, "num_experts": 5, "top_k": 2, "router": "softmax_topk",
              "norm_topk_prob": True, "shared_experts": 2}),
        # padding: routed, but the losses and counts take the tokens only (attention_mask 1 = token)
        case("mixtral_padded", SparseMoeBlock(d, dff, 4, 2), (3, 5, d),
             {"d_model": d, "d_ff": dff, "num_experts": 4, "top_k": 2},
             torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])),
    ]
    Writer(keys="auto").write(os.path.join(HERE, "fixtures", "nn_moe.lua"), "tests/gen_moe_fixtures.py",
                              {"aux_coef": AUX, "z_coef": Z, "cases": cases})


if __name__ == "__main__":
    main()
