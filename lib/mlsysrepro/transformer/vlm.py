"""A tiny vision-language model: a ViT encoder with a [CLS] token, a projector and the collection's Llama decoder.

The layout is LLaVA's (Liu et al. 2023): the image's patch tokens, projected to the decoder's width, come first and
the question's tokens after them, ``[vision][question]``, and the answer is the next token after the question. Under
the causal mask the vision tokens cannot see the question, so a pruner that wants to know what is asked must read
the question (AsymVLM's scorer, SparseVLM, FastV's last-token attention).

:meth:`TinyVLM.encode` returns, beside the vision tokens, the last ViT block's [CLS] attention over the patches
(VisionZip's signal). It is trained end to end on the answer token by :func:`.training.train` with ``loss=vlm_loss``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .llama import Llama, LlamaConfig, RMSNorm


@dataclass(frozen=True)
class VLMConfig:
    image: int = 32  # pixels a side
    patch: int = 4  # pixels a patch side
    vit_dim: int = 64
    vit_layers: int = 2
    vit_heads: int = 4
    glyph_classes: int = 11  # what each cell shows: a digit 0-9 or nothing
    row_tokens: tuple[int, ...] = ()  # token ids of the words naming each cell row (tied 2-D positions)
    col_tokens: tuple[int, ...] = ()
    cell_words: tuple[int, ...] = ()  # token ids of the words naming each cell, raster order (optional)
    decoder: LlamaConfig = field(default_factory=lambda: LlamaConfig(dim=96, layers=4, heads=4, kv_heads=2, ffn=256))

    def __post_init__(self):
        if self.image % self.patch:
            raise ValueError(f"image ({self.image}) must be a multiple of patch ({self.patch})")
        if len(self.row_tokens) != len(self.col_tokens) or (self.row_tokens and self.side % len(self.row_tokens)):
            raise ValueError(f"row_tokens and col_tokens must name as many cells a side, which must divide the "
                             f"{self.side} patches a side; got {len(self.row_tokens)} and {len(self.col_tokens)}")
        if self.cell_words and len(self.cell_words) != len(self.row_tokens) ** 2:
            raise ValueError(f"cell_words must name every cell ({len(self.row_tokens) ** 2}), "
                             f"got {len(self.cell_words)}")
        if self.vit_dim % self.vit_heads:
            raise ValueError(f"vit_dim ({self.vit_dim}) must divide by vit_heads ({self.vit_heads})")

    @property
    def side(self) -> int:
        """Patches a side of the image."""
        return self.image // self.patch

    @property
    def vision_tokens(self) -> int:
        return self.side ** 2

    @property
    def cell_side(self) -> int:
        """Patches a side of one cell (the grid named by ``row_tokens``; the whole image without them)."""
        return self.side // len(self.row_tokens) if self.row_tokens else self.side


class ViTBlock(nn.Module):
    """A pre-norm encoder block (Dosovitskiy et al. 2021) that also returns its attention weights."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        weights = (q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5).softmax(-1)  # (B, heads, N, N)
        x = x + self.out((weights @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x)), weights


class TinyVLM(nn.Module):
    """Patches -> ViT (with [CLS]) -> linear projector -> Llama decoder over ``[vision][question]``."""

    def __init__(self, cfg: VLMConfig):
        super().__init__()
        self.cfg = cfg
        self.patch_embed = nn.Linear(cfg.patch ** 2, cfg.vit_dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.vit_dim))
        self.pos = nn.Parameter(torch.randn(1, cfg.vision_tokens + 1, cfg.vit_dim) * 0.02)
        self.vit = nn.ModuleList(ViTBlock(cfg.vit_dim, cfg.vit_heads) for _ in range(cfg.vit_layers))
        self.project = nn.Sequential(RMSNorm(cfg.vit_dim), nn.Linear(cfg.vit_dim, cfg.decoder.dim))
        self.decoder = Llama(cfg.decoder)
        #: the encoder's auxiliary objective while training: each cell's glyph class, read from all of its tokens
        #: together (concatenated), so no single token needs to carry the label; unused at inference
        self.glyph_head = nn.Linear(cfg.cell_side ** 2 * cfg.decoder.dim, cfg.glyph_classes)

    def patches(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, H, W) pixels -> (B, N, patch²) patches in row-major order."""
        p, b = self.cfg.patch, len(pixels)
        if pixels.shape[1:] != (self.cfg.image, self.cfg.image):
            raise ValueError(f"pixels must be (B, {self.cfg.image}, {self.cfg.image}), got {tuple(pixels.shape)}")
        side = self.cfg.side
        return pixels.view(b, side, p, side, p).permute(0, 1, 3, 2, 4).reshape(b, -1, p * p)

    def encode(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The vision tokens in the decoder's width (B, N, dim) and the last ViT block's [CLS] attention over the
        patches (B, N), averaged over its heads."""
        x = self.patch_embed(self.patches(pixels))
        x = torch.cat((self.cls.expand(len(x), -1, -1), x), 1) + self.pos
        for block in self.vit:
            x, weights = block(x)
        return self.project(x[:, 1:]) + self.places(), weights[:, :, 0, 1:].mean(1)

    def places(self) -> torch.Tensor:
        """(N, dim) each vision token's 2-D position in the decoder's word space: the embeddings of the words
        naming its cell's row and column (``cfg.row_tokens``, ``cfg.col_tokens``) and, with ``cfg.cell_words``, the
        cell itself, tied to the decoder's, so that a question naming a row, a column or a cell finds its tokens by
        content (none without those tokens)."""
        cfg = self.cfg
        if not cfg.row_tokens:
            return torch.zeros(cfg.vision_tokens, cfg.decoder.dim)
        patch = torch.arange(cfg.vision_tokens)
        per_cell = cfg.side // len(cfg.row_tokens)
        rows = patch // cfg.side // per_cell
        cols = patch % cfg.side // per_cell
        places = self.decoder.embed(torch.tensor(cfg.row_tokens)[rows]) + self.decoder.embed(
            torch.tensor(cfg.col_tokens)[cols])
        if cfg.cell_words:
            cells = torch.tensor(cfg.cell_words)[rows * len(cfg.row_tokens) + cols]
            places = places + self.decoder.embed(cells)
        return places

    def cell_tokens(self, vision: torch.Tensor) -> torch.Tensor:
        """(B, N, dim) vision tokens -> (B, cells, tokens per cell * dim): each cell's tokens side by side."""
        b, _, d = vision.shape
        side, per = self.cfg.side, self.cfg.cell_side
        cells = side // per
        return (vision.view(b, cells, per, cells, per, d).permute(0, 1, 3, 2, 4, 5)
                .reshape(b, cells * cells, per * per * d))

    def embed_question(self, question: torch.Tensor) -> torch.Tensor:
        """Token ids (B, L) -> the decoder's input embeddings (B, L, dim)."""
        return self.decoder.embed(question)

    def forward(self, pixels: torch.Tensor, question: torch.Tensor) -> torch.Tensor:
        """Answer logits (B, vocab) at the last position, every token kept."""
        vision, _ = self.encode(pixels)
        x = torch.cat((vision, self.embed_question(question)), 1)
        return self.decoder.forward_embeddings(x)[:, -1]


def vlm_loss(model: TinyVLM, pixels: torch.Tensor, tokens: torch.Tensor, targets: torch.Tensor,
             glyphs: torch.Tensor | None = None, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy of the answers: ``targets`` (B, L) holds, at the text positions that predict an answer, its
    token (-100 elsewhere). With ``glyphs`` (B, cells) (each cell's class, -100 where it has none), plus the
    encoder's auxiliary cross-entropy of each cell's class from its tokens together (:meth:`TinyVLM.cell_tokens`):
    the part a VLM's pretrained vision encoder plays, without which the ViT must learn to read digits from the
    answers alone. With ``keep`` (B, k) sorted token indices, the decoder sees only those vision tokens, at their
    own positions (token dropout: training on pruned inputs)."""
    vision, _ = model.encode(pixels)
    text = model.embed_question(tokens)
    positions = None
    seen = vision
    if keep is not None:
        seen = vision.gather(1, keep[..., None].expand(-1, -1, vision.shape[-1]))
        following = vision.shape[1] + torch.arange(text.shape[1]).expand(len(text), -1)
        positions = torch.cat((keep, following), 1)
    logits = model.decoder.forward_embeddings(torch.cat((seen, text), 1), positions)
    loss = F.cross_entropy(logits[:, seen.shape[1]:].flatten(0, 1), targets.flatten(), ignore_index=-100)
    if glyphs is not None and (glyphs != -100).any():  # a batch of charts only has no glyph to name
        loss = loss + F.cross_entropy(model.glyph_head(model.cell_tokens(vision)).flatten(0, 1), glyphs.flatten(),
                                      ignore_index=-100)
    return loss
