"""WSV's trainable parts as plain torch modules and losses (no files, no data, no model hubs).

Latents are [B, C, F, H, W]. The polisher is a shape-preserving 3D residual CNN (identity at
initialisation: its last convolution starts at zero); the video head maps a latent to a unit vector in
the caption-embedding space (the stand-in for CLIP4Clip: the text side is a frozen sentence encoder);
the prompter is a 3D-CNN stem followed by alternating cross-attention (P learnable queries attend to the
latent's F*H*W tokens) and self-attention, giving P soft prompts of the LM's width; the prefix MLP does
the same from a single vector (the text-only baseline, ClipCap/CapDec style).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vlgap.errors import VlgapError


def _groups(c: int) -> int:
    for g in (8, 4, 2, 1):
        if c % g == 0:
            return g
    return 1


class ResBlock3d(nn.Module):
    def __init__(self, channels: int, hidden: int):
        super().__init__()
        self.norm = nn.GroupNorm(_groups(channels), channels)
        self.conv1 = nn.Conv3d(channels, hidden, 3, padding=1)
        self.conv2 = nn.Conv3d(hidden, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.gelu(self.conv1(F.gelu(self.norm(x)))))


class Polisher(nn.Module):
    """A_phi: [B, C, F, H, W] -> the same shape; exactly the identity before training."""

    def __init__(self, channels: int, hidden: int = 32, n_blocks: int = 2):
        super().__init__()
        self.channels = channels
        self.blocks = nn.ModuleList(ResBlock3d(channels, hidden) for _ in range(n_blocks))
        for b in self.blocks:  # zero last conv: the polisher starts as the identity map
            nn.init.zeros_(b.conv2.weight)
            nn.init.zeros_(b.conv2.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_latents(x, self.channels, "polisher")
        for b in self.blocks:
            x = b(x)
        return x


class VideoHead(nn.Module):
    """Latent -> unit vector in the text encoder's space (the contrastive video tower)."""

    def __init__(self, channels: int, dim: int, hidden: int = 64):
        super().__init__()
        self.channels = channels
        self.stem = nn.Sequential(nn.GroupNorm(_groups(channels), channels), nn.Conv3d(channels, hidden, 3, padding=1),
                                  nn.GELU(), nn.Conv3d(hidden, hidden, 3, padding=1), nn.GELU())
        self.proj = nn.Linear(2 * hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_latents(x, self.channels, "video head")
        h = self.stem(x)
        pooled = torch.cat([h.mean(dim=(2, 3, 4)), h.amax(dim=(2, 3, 4))], dim=1)
        return F.normalize(self.proj(pooled), dim=-1)


class _Block(nn.Module):
    """One prompter layer: queries cross-attend to the video tokens, then self-attend, then an MLP."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.n1, self.n2, self.n3, self.nk = (nn.LayerNorm(d) for _ in range(4))
        self.cross = nn.MultiheadAttention(d, heads, batch_first=True)
        self.self_attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        k = self.nk(kv)
        q = q + self.cross(self.n1(q), k, k, need_weights=False)[0]
        h = self.n2(q)
        q = q + self.self_attn(h, h, h, need_weights=False)[0]
        return q + self.mlp(self.n3(q))


class Prompter(nn.Module):
    """P_theta: latent [B, C, F, H, W] -> soft prompts [B, P, d_lm]."""

    def __init__(self, channels: int, grid: tuple[int, int, int], d_lm: int, n_prompts: int = 8,
                 d_model: int = 128, n_layers: int = 2, heads: int = 4):
        super().__init__()
        self.channels, self.grid, self.n_prompts = channels, tuple(grid), n_prompts
        self.stem = nn.Sequential(nn.GroupNorm(_groups(channels), channels), nn.Conv3d(channels, d_model, 3, padding=1),
                                  nn.GELU(), nn.Conv3d(d_model, d_model, 3, padding=1))
        n_tok = int(math.prod(self.grid))
        self.pos = nn.Parameter(torch.randn(1, n_tok, d_model) * 0.02)
        self.queries = nn.Parameter(torch.randn(1, n_prompts, d_model) * 0.02)
        self.layers = nn.ModuleList(_Block(d_model, heads) for _ in range(n_layers))
        self.out = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, d_lm))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_latents(x, self.channels, "prompter", self.grid)
        tok = self.stem(x).flatten(2).transpose(1, 2) + self.pos  # [B, F*H*W, d]
        q = self.queries.expand(x.shape[0], -1, -1)
        for layer in self.layers:
            q = layer(q, tok)
        return self.out(q)


class PrefixMLP(nn.Module):
    """Text-only baseline's prompter: one embedding vector [B, D] -> soft prompts [B, P, d_lm]."""

    def __init__(self, dim_in: int, d_lm: int, n_prompts: int = 8, hidden: int = 256):
        super().__init__()
        self.dim_in, self.n_prompts, self.d_lm = dim_in, n_prompts, d_lm
        self.net = nn.Sequential(nn.Linear(dim_in, hidden), nn.GELU(), nn.Linear(hidden, n_prompts * d_lm))

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        if v.ndim != 2 or v.shape[1] != self.dim_in:
            raise VlgapError(f"text-only prompter expects embeddings [B, {self.dim_in}], got {list(v.shape)}")
        return self.net(v).view(v.shape[0], self.n_prompts, self.d_lm)


def check_latents(x: torch.Tensor, channels: int, who: str, grid: tuple[int, ...] | None = None) -> None:
    if x.ndim != 5 or x.shape[1] != channels or (grid is not None and tuple(x.shape[2:]) != tuple(grid)):
        want = f"[B, {channels}, " + (", ".join(map(str, grid)) if grid else "F, H, W") + "]"
        raise VlgapError(f"{who}: latents must be {want} (the shape it was built for), got {list(x.shape)}; "
                         "were they made with another latent encoder or grid?")


# ----------------------------------------------------------------------------------------------
# Losses


def symmetric_infonce(a: torch.Tensor, b: torch.Tensor, temperature: float = 0.07) -> torch.Tensor:
    """CLIP's symmetric cross-entropy between matched rows of a and b (both [B, D], L2-normalised).
    Rows with identical text (the same caption twice) are still treated as negatives, as in CLIP."""
    logits = a @ b.T / temperature
    target = torch.arange(a.shape[0], device=a.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def mmd_rbf_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Differentiable biased MMD^2 between flattened sets (RBF, median-heuristic bandwidth on the detached
    pooled distances): the polisher's optional distribution term towards unlabelled real latents."""
    x, y = x.flatten(1), y.flatten(1)
    z = torch.cat([x, y])
    d2 = torch.cdist(z, z).pow(2)
    with torch.no_grad():
        off = d2[~torch.eye(len(z), dtype=torch.bool, device=z.device)]
        bw = off.median().clamp_min(1e-6)
    k = torch.exp(-d2 / bw)
    m = len(x)
    return k[:m, :m].mean() + k[m:, m:].mean() - 2 * k[:m, m:].mean()


def n_parameters(*modules: nn.Module) -> int:
    return int(sum(p.numel() for m in modules if m is not None for p in m.parameters()))
