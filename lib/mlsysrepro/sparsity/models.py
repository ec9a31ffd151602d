"""The paper's two trained models on top of :class:`.lstm.LSTM`: a PTB language model and a CoNLL-2003 tagger.

- :class:`WordLM` (Zaremba et al., 2014, "medium": 2 layers x 650, BPTT 35): embedding -> LSTM ->
  dropout -> decoder. Dropout on the embeddings, between layers and before the decoder; in
  ``structured`` mode every one of those GEMMs is compacted, the decoder's (H x 10,000) included.
  ``tied`` shares the embedding and decoder weights (Press & Wolf, 2017; needs emb = hidden).
  ``mode``, ``p``, ``compact`` and ``period`` are those of :class:`.lstm.LSTM`, for every dropout in the model.
- :class:`Tagger`: a BiLSTM tagger, a forward and a backward one-layer LSTM over the embeddings,
  dropout on the embeddings and on the concatenated states, a linear layer to the tags (no CRF).
"""

from __future__ import annotations

import torch
from torch import nn

from .lstm import LSTM, Drop, masked_projection


class WordLM(nn.Module):
    def __init__(self, vocab_size: int, hidden: int, num_layers: int = 2, p: float = 0.5, mode: str = "standard",
                 tied: bool = False, compact: bool = True, period: int = 1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.lstm = LSTM(hidden, hidden, num_layers, p, mode, compact, period)
        self.decoder_bias = nn.Parameter(torch.zeros(vocab_size))
        self.decoder = None if tied else nn.Parameter(torch.empty(hidden, vocab_size))  # W_dec^T
        nn.init.uniform_(self.embedding.weight, -0.05, 0.05)
        if self.decoder is not None:
            nn.init.uniform_(self.decoder, -0.05, 0.05)

    def forward(self, ids: torch.Tensor, state=None, generator: torch.Generator | None = None):
        """Logits (T, B, vocab) for ids (T, B), and the LSTM's final state (carry it, detached, to the next window)."""
        out, state = self.lstm(self.embedding(ids), state, generator)
        weight = self.embedding.weight.t() if self.decoder is None else self.decoder
        drop = self.lstm.drop(out.shape[0], out.shape[1], out.shape[2], generator, out.dtype)
        return masked_projection(out, weight, self.decoder_bias, drop), state


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each column of ``x`` (T, B, ...) reversed within its length; padding stays at the end (an involution)."""
    steps = torch.arange(x.shape[0])[:, None]
    index = torch.where(steps < lengths[None, :], lengths[None, :] - 1 - steps, steps)
    return x.gather(0, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))


class Tagger(nn.Module):
    def __init__(self, vocab_size: int, num_tags: int, embedding: int = 100, hidden: int = 100, p: float = 0.5,
                 mode: str = "standard", compact: bool = True, period: int = 1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding, padding_idx=0)
        self.forward_lstm = LSTM(embedding, hidden, 1, p, mode, compact, period)
        self.backward_lstm = LSTM(embedding, hidden, 1, p, mode, compact, period)
        self.classifier = nn.Linear(2 * hidden, num_tags)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, generator: torch.Generator | None = None):
        """Tag logits (T, B, tags) for padded ids (T, B)."""
        x = self.embedding(ids)
        ahead, _ = self.forward_lstm(x, generator=generator)
        behind, _ = self.backward_lstm(reverse_padded(x, lengths), generator=generator)
        states = torch.cat([ahead, reverse_padded(behind, lengths)], 2)
        drop = self.forward_lstm.drop(states.shape[0], states.shape[1], states.shape[2], generator, states.dtype)
        return masked_projection(states, self.classifier.weight.t(), self.classifier.bias, drop)
