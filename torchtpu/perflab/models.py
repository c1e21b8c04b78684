"""Small reference models and data, shared by the examples, the tests and
perflab: a 3-layer MLP, a small CNN (conv, batch norm, pooling) and a 2-layer
GPT (embedding, causal self-attention, layer norm, GELU, cross entropy)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, dim_in=64, hidden=128, classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self, channels=3, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 4 * 4, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, block):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, dim, heads, block):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, block)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=64, dim=64, heads=4, layers=2, block=64):
        super().__init__()
        self.block = block
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads, block) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(pos))
        logits = self.head(self.ln(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def arithmetic_corpus(lines=4000, seed=0):
    """A text of addition facts ("17+25=42"), deterministic: a model that
    learns it shows a loss well below its start."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, 100, (lines,), generator=g)
    b = torch.randint(0, 100, (lines,), generator=g)
    return "".join(f"{x}+{y}={x + y}\n" for x, y in zip(a.tolist(), b.tolist()))


class CharData:
    """Character-level batches of (input, next character) from a text."""

    def __init__(self, text, block, seed=0):
        chars = sorted(set(text))
        self.vocab = len(chars)
        self.stoi = {c: i for i, c in enumerate(chars)}
        self.itos = chars
        self.data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)
        self.block = block
        self.gen = torch.Generator().manual_seed(seed)

    def batch(self, size):
        ix = torch.randint(0, len(self.data) - self.block - 1, (size,), generator=self.gen)
        x = torch.stack([self.data[i:i + self.block] for i in ix.tolist()])
        y = torch.stack([self.data[i + 1:i + 1 + self.block] for i in ix.tolist()])
        return x, y

    def decode(self, ids):
        return "".join(self.itos[i] for i in ids)
