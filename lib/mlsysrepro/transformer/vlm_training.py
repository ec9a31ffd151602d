"""Training the tiny VLM on canvases (:mod:`mlsysrepro.vision.canvases`): its configuration from a paper's knobs
and the training run, in a module of their own so that a cached model depends on this code and what it imports
(the canvases, the model, the optimiser), not on the experiments around it."""

from __future__ import annotations

import time

import torch

from ..vision.canvases import CELL, VOCAB, GlyphBank, place_tokens, training_sequences
from .llama import LlamaConfig
from .training import train
from .vlm import TinyVLM, VLMConfig, vlm_loss


def canvas_vlm_config(grid: int, patch: int, vit_dim: int, vit_layers: int, dim: int, layers: int, heads: int,
                      kv_heads: int, ffn: int) -> VLMConfig:
    """A VLM for ``grid`` x ``grid`` canvases of 8-pixel cells, its 2-D positions tied to the words ``row<i>`` and
    ``col<i>`` of the canvases' vocabulary."""
    rows, cols, cells = place_tokens(grid)
    decoder = LlamaConfig(vocab=len(VOCAB), dim=dim, layers=layers, heads=heads, kv_heads=kv_heads, ffn=ffn)
    return VLMConfig(image=grid * CELL, patch=patch, vit_dim=vit_dim, vit_layers=vit_layers, vit_heads=heads,
                     decoder=decoder, row_tokens=rows, col_tokens=cols, cell_words=cells)


def train_on_canvases(cfg: VLMConfig, bank: GlyphBank, families: list[str], grid: int, blank: float,
                      history: tuple[int, int], width: int, questions: int, batch: int, steps: int, lr: float,
                      seed: int, token_dropout: float = 0.0) -> dict:
    """Train a fresh :class:`.vlm.TinyVLM` (seeded by ``seed``) for ``steps`` steps of ``batch`` canvases of
    ``families`` drawn uniformly, ``questions`` questions each (:func:`.vlm.vlm_loss`, with the cells' glyph
    objective); with ``token_dropout`` > 0, the decoder sees a random subset of ``1 - token_dropout`` of the vision
    tokens in each step (a model trained on pruned inputs). Returns its ``state``, every step's ``losses`` and the
    training ``seconds``."""
    if not 0 <= token_dropout < 1:
        raise ValueError(f"token_dropout must be in [0, 1), got {token_dropout}")
    torch.manual_seed(seed)
    model = TinyVLM(cfg)

    kept = round(cfg.vision_tokens * (1 - token_dropout))

    def sample(generator):
        drawn = [families[i] for i in torch.randint(len(families), (batch,), generator=generator)]
        pixels, tokens, targets, glyphs = training_sequences(bank, drawn, grid, blank, generator, tuple(history),
                                                             width, questions)
        keep = None
        if token_dropout:
            keep = torch.rand(batch, cfg.vision_tokens, generator=generator).argsort(-1)[:, :kept].sort(-1).values
        return pixels, tokens, targets, glyphs, keep

    start = time.perf_counter()
    losses = train(model, sample, steps, lr, torch.Generator().manual_seed(seed), loss=vlm_loss, weight_decay=0.05,
                   desc="training the VLM")
    return {"state": model.state_dict(), "losses": losses, "seconds": time.perf_counter() - start}
