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
    rows, cols = place_tokens(grid)
    decoder = LlamaConfig(vocab=len(VOCAB), dim=dim, layers=layers, heads=heads, kv_heads=kv_heads, ffn=ffn)
    return VLMConfig(image=grid * CELL, patch=patch, vit_dim=vit_dim, vit_layers=vit_layers, vit_heads=heads,
                     decoder=decoder, row_tokens=rows, col_tokens=cols)


def train_on_canvases(cfg: VLMConfig, bank: GlyphBank, families: list[str], grid: int, blank: float,
                      history: tuple[int, int], width: int, questions: int, batch: int, steps: int, lr: float,
                      seed: int) -> dict:
    """Train a fresh :class:`.vlm.TinyVLM` (seeded by ``seed``) for ``steps`` steps of ``batch`` canvases of
    ``families`` drawn uniformly, ``questions`` questions each (:func:`.vlm.vlm_loss`, with the glyph objective);
    returns its ``state``, every step's ``losses`` and the training ``seconds``."""
    torch.manual_seed(seed)
    model = TinyVLM(cfg)

    def sample(generator):
        drawn = [families[i] for i in torch.randint(len(families), (batch,), generator=generator)]
        return training_sequences(bank, drawn, grid, blank, generator, tuple(history), width, questions, cfg.patch)

    start = time.perf_counter()
    losses = train(model, sample, steps, lr, torch.Generator().manual_seed(seed), loss=vlm_loss, weight_decay=0.05,
                   desc="training the VLM")
    return {"state": model.state_dict(), "losses": losses, "seconds": time.perf_counter() - start}
