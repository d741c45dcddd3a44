"""The models: a small frozen causal target and a block-diffusion drafter conditioned on its hidden states.

The drafter sees a sequence cut into blocks of `block` tokens. In each block the first token is known (the
anchor) and the rest are [MASK]; in one parallel step the drafter predicts every next token of the block,
attending to the target's hidden states up to the anchor and bidirectionally within its own block. That
visibility rule is one `mask_mod`, used as a flex_attention block mask (GPU) or as the same mask made dense
for SDPA (CPU, where flex_attention has no backward in torch 2.13).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


def block_diffusion_mask_mod(seq_len: int, block: int) -> Callable:
    """Visibility for queries [0, T) over keys [context 0..T) | drafter block 0..T)]."""

    def mask_mod(b, h, q_idx, kv_idx):
        """True where query q_idx may attend to key kv_idx."""
        q_block = q_idx // block
        is_ctx = kv_idx < seq_len
        ctx_ok = is_ctx & (kv_idx <= q_block * block)
        own_ok = (~is_ctx) & ((kv_idx - seq_len) // block == q_block)
        return ctx_ok | own_ok

    return mask_mod


def build_mask(kind: str, seq_len: int, block: int, device: str):
    """The attention mask for one sequence length: a flex BlockMask or a dense boolean mask."""
    mod = block_diffusion_mask_mod(seq_len, block)
    if kind == "flex":
        from torch.nn.attention.flex_attention import create_block_mask
        return create_block_mask(mod, None, None, seq_len, 2 * seq_len, device=device)
    from torch.nn.attention.flex_attention import create_mask
    return create_mask(mod, 1, 1, seq_len, 2 * seq_len, device=device)


def attend(kind: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask) -> torch.Tensor:
    """Masked attention through flex_attention or SDPA; the same visibility either way."""
    if kind == "flex":
        from torch.nn.attention.flex_attention import flex_attention
        return flex_attention(q, k, v, block_mask=mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class CausalBlock(nn.Module):
    """A pre-norm transformer block with causal self-attention (the target's)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One block: causal attention, then the MLP."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class TargetLM(nn.Module):
    """The target: a small causal character LM. Trained briefly, then frozen."""

    def __init__(self, vocab: int, dim: int, heads: int, layers: int, max_len: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(CausalBlock(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        """Last-layer hidden states, one per position."""
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)

    def loss(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy over a batch of sequences."""
        logits = self.head(self.hidden(tokens[:, :-1]))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


class DrafterBlock(nn.Module):
    """Drafter layer: queries from the block stream, keys/values from [target context | block stream]."""

    def __init__(self, dim: int, heads: int, attention: str):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, ctx: torch.Tensor, mask) -> torch.Tensor:
        """One layer of block-diffusion attention and an MLP."""
        b, t, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        kv = self.kv(torch.cat([ctx, h], dim=1)).view(b, 2 * t, 2, self.heads, d // self.heads)
        k, v = kv.permute(2, 0, 3, 1, 4)
        a = attend(self.attention, q, k, v, mask)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class Drafter(nn.Module):
    """A block-diffusion drafter: predicts a block of masked tokens in parallel from target hidden states."""

    def __init__(self, vocab: int, target_dim: int, dim: int, heads: int, layers: int, block: int,
                 mask_id: int, attention: str):
        super().__init__()
        self.block, self.mask_id = block, mask_id
        self.embed = nn.Embedding(vocab, dim)
        self.ctx_proj = nn.Linear(target_dim, dim)
        self.layers = nn.ModuleList(DrafterBlock(dim, heads, attention) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        self.head.weight = self.embed.weight  # tied input/output embedding, as small LMs and DFlash's drafter do
        nn.init.normal_(self.embed.weight, std=0.02)

    def noised(self, tokens: torch.Tensor) -> torch.Tensor:
        """Each block's anchor stays, every other position becomes [MASK]."""
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        return torch.where(pos % self.block == 0, tokens, torch.full_like(tokens, self.mask_id))

    def logits(self, tokens: torch.Tensor, hidden: torch.Tensor, mask) -> torch.Tensor:
        """Predictions for every position's next token, all blocks at once."""
        x = self.embed(self.noised(tokens))
        ctx = self.ctx_proj(hidden)
        for layer in self.layers:
            x = layer(x, ctx, mask)
        return self.head(self.norm(x))

    def loss(self, tokens: torch.Tensor, hidden: torch.Tensor, mask) -> torch.Tensor:
        """Cross-entropy of the block predictions; `tokens` holds one more position than `hidden`."""
        logits = self.logits(tokens[:, :-1], hidden, mask)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
