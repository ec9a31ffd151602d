"""The paper's two models on ``torch.nn.LSTM`` (oneDNN's fused LSTM on a CPU), with standard dropout: the
implementation a user would otherwise reach for, and the second baseline of the speed measurements.

``torch.nn.LSTM`` applies its ``dropout`` between layers only (case I); the embeddings and the top
layer's output are dropped with ``nn.Dropout``, so dropout sits where :mod:`.models` puts it.
Both models take the same arguments in ``forward`` as their :mod:`.models` counterparts.
"""

from __future__ import annotations

import torch
from torch import nn


class TorchWordLM(nn.Module):
    def __init__(self, vocab_size: int, hidden: int, num_layers: int = 2, p: float = 0.5):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.drop = nn.Dropout(p)
        self.lstm = nn.LSTM(hidden, hidden, num_layers, dropout=p)
        self.decoder = nn.Linear(hidden, vocab_size)

    def forward(self, ids: torch.Tensor, state=None, generator: torch.Generator | None = None):
        out, state = self.lstm(self.drop(self.embedding(ids)), state)
        return self.decoder(self.drop(out)), state


class TorchTagger(nn.Module):
    def __init__(self, vocab_size: int, num_tags: int, embedding: int = 100, hidden: int = 100, p: float = 0.5):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding, padding_idx=0)
        self.drop = nn.Dropout(p)
        self.lstm = nn.LSTM(embedding, hidden, bidirectional=True)
        self.classifier = nn.Linear(2 * hidden, num_tags)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, generator: torch.Generator | None = None):
        packed = nn.utils.rnn.pack_padded_sequence(self.drop(self.embedding(ids)), lengths, enforce_sorted=False)
        states, _ = nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], total_length=ids.shape[0])
        return self.classifier(self.drop(states))
