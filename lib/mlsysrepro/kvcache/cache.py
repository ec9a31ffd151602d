"""The full KV cache: every key, value and position of every layer, appended as tokens arrive.

It speaks :class:`mlsysrepro.transformer.llama.KVCache`; decoding through it gives the same logits as running
the whole sequence at once, which is what the tests hold every compressed cache to when its budgets are large.
"""

from __future__ import annotations

import torch


class FullCache:
    def __init__(self):
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.positions: dict[int, torch.Tensor] = {}

    def update(self, layer, k, v, positions):
        pos = positions[:, None, :].expand(k.shape[0], k.shape[1], positions.shape[1])
        if layer in self.keys:
            k = torch.cat((self.keys[layer], k), dim=2)
            v = torch.cat((self.values[layer], v), dim=2)
            pos = torch.cat((self.positions[layer], pos), dim=2)
        self.keys[layer], self.values[layer], self.positions[layer] = k, v, pos
        return k, v, pos

    def observe(self, layer, weights):
        pass

    def entries(self) -> int:
        """Cached (key, value) pairs over all layers, heads and sequences."""
        return sum(p.numel() for p in self.positions.values())
