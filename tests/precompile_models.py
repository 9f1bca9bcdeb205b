"""Small models for the precompile and Dynamo-cache tests, built the same way (seed 0) in the test
process and in the fresh processes that load what it saved."""
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(dim), Attention(dim, 2), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(approximate="tanh"), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def build(name: str, device: str, seed: int = 0):
    """(model, example input) for "mlp" or "transformer_block"."""
    torch.manual_seed(seed)
    if name == "mlp":
        model, x = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)), torch.randn(4, 16)
    elif name == "transformer_block":
        model, x = Block(16), torch.randn(2, 6, 16)
    else:
        raise ValueError(f"unknown model {name}")
    return model.to(device), x.to(device)
