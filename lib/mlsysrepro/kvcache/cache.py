"""KV caches speaking :class:`mlsysrepro.transformer.llama.KVCache`: the full cache and the budgeted one.

:class:`BudgetedCache` gives every (layer, KV head) its own capacity, the BaKlaVa setting. One step of a layer:

1. ``update`` appends the new keys, values and positions to what the layer holds and returns them all: the new
   queries attend to every kept entry and to each other (a prefill sees its whole prompt);
2. ``query_weights`` asks the policy whose attention it reads, and ``observe`` receives that attention (summed
   over the queries; None for a policy that reads none), lets the policy fold it into each entry's score
   (:mod:`.policies`), and then every head that holds more than its budget keeps its protected entries (sinks,
   recent window) and its highest-priority ones up to the budget.

So between steps no head ever holds more than its budget. While decoding, a token is written in place into a
free slot, and a head over its budget drops its ``slack`` lowest-priority unprotected entries at once (1 for
budgets under 64, a 32nd of the layer's smallest budget above), so ranking runs every few steps. A layer is stored
as tensors (B, kv_heads, S, d) with S one more than the largest budget of the layer; a head with a smaller budget
marks its unused slots with position -1, which attention masks (:mod:`mlsysrepro.transformer.llama`). The slots
are allocated, the entries are what is kept:
:meth:`BudgetedCache.allocated_bytes` and :meth:`BudgetedCache.held_bytes` report both.

With ``pooled=True`` a layer's budgets form one pool (AdaKV, Feng et al. 2024): the layer keeps its
``sum(budgets)`` highest-priority entries across heads, each head first keeping its protected entries and its
``floor`` best ones (AdaKV's safeguard).
"""

from __future__ import annotations

import torch

from .scoring import Observation, ranked


class FullCache:
    """Keeps every key and value: the reference that compressed caches are compared with. Each layer's tensors are
    allocated ahead and double when full, so appending a decoded token copies nothing; it reads no attention."""

    def __init__(self):
        self.keys: dict[int, torch.Tensor] = {}  # (B, kv_heads, capacity, d)
        self.values: dict[int, torch.Tensor] = {}
        self.positions: dict[int, torch.Tensor] = {}  # (B, kv_heads, capacity)
        self.length: dict[int, int] = {}  # entries held per head

    def update(self, layer, k, v, positions):
        b, h, t, d = k.shape
        held = self.length.get(layer, 0)
        if layer not in self.keys or held + t > self.keys[layer].shape[2]:
            capacity = max(2 * (held + t), 16)
            keys, values = k.new_empty(b, h, capacity, d), v.new_empty(b, h, capacity, v.shape[-1])
            pos = positions.new_full((b, h, capacity), -1)
            if held:
                keys[:, :, :held], values[:, :, :held] = self.keys[layer][:, :, :held], self.values[layer][:, :, :held]
                pos[:, :, :held] = self.positions[layer][:, :, :held]
            self.keys[layer], self.values[layer], self.positions[layer] = keys, values, pos
        end = self.length[layer] = held + t
        self.keys[layer][:, :, held:end] = k
        self.values[layer][:, :, held:end] = v
        self.positions[layer][:, :, held:end] = positions[:, None, :]
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end], self.positions[layer][:, :, :end]

    def query_weights(self, layer, queries):
        return None

    def observe(self, layer, paid):
        pass

    def entries(self) -> int:
        """Cached (key, value) pairs over all layers, heads and sequences."""
        return sum(self.positions[layer][:, :, :n].numel() for layer, n in self.length.items())

    def held_bytes(self) -> int:
        """Bytes of the keys and values held."""
        return sum(self.keys[layer][:, :, :n].nbytes + self.values[layer][:, :, :n].nbytes
                   for layer, n in self.length.items())

    def allocated_bytes(self) -> int:
        """Bytes of the key and value tensors, the room to grow included."""
        return sum(t.nbytes for d in (self.keys, self.values) for t in d.values())


class BudgetedCache:
    """A KV cache with ``budgets[layer, kv_head]`` entries per head, evicting by ``policy``."""

    def __init__(self, budgets: torch.Tensor, policy, pooled: bool = False, floor: int = 0):
        budgets = torch.as_tensor(budgets, dtype=torch.long)
        if budgets.dim() != 2 or (budgets < 1).any():
            raise ValueError(f"budgets must be a (layers, kv_heads) tensor of integers >= 1, got {budgets.tolist()}")
        if floor < 0 or (pooled and (floor * budgets.shape[1] > budgets.sum(1)).any()):
            raise ValueError(f"floor ({floor}) must be >= 0 and, pooled, fit every layer's total budget")
        self.budgets, self.policy, self.pooled, self.floor = budgets, policy, pooled, floor
        self._protected = [policy.protected(b) for b in budgets]  # (sinks, window) per head, per layer
        #: entries a full head drops at once while decoding: 1 below budgets of 64, then a 32nd of the layer's
        #: smallest budget (so the ranking runs every ``slack`` steps; on average ``slack / 2`` slots stay free)
        self.slack = [max(1, int(b.min()) // 32) for b in budgets]
        self.keys: dict[int, torch.Tensor] = {}  # (B, H, capacity, d)
        self.values: dict[int, torch.Tensor] = {}
        self.positions: dict[int, torch.Tensor] = {}  # (B, H, capacity), -1 for an empty slot
        self.scores: dict[int, torch.Tensor] = {}
        self.width: dict[int, int] = {}  # slots in use: every entry sits below this index
        self.count: dict[int, torch.Tensor] = {}  # (B, H, 1) entries held, kept up to date while decoding
        self._pending: dict[int, tuple] = {}
        self.evicted = False  # whether any entry has been dropped (a cache that has cannot serve :meth:`load`)

    def update(self, layer, k, v, positions):
        b, h, t, _ = k.shape
        pos = positions[:, None, :].expand(b, h, t)
        if t == 1 and layer in self.keys and not self.pooled:
            return self._write_in_place(layer, k, v, pos)
        score = torch.zeros(b, h, t, dtype=k.dtype)
        prefill = layer not in self.keys
        if not prefill:
            w = self.width[layer]
            k = torch.cat((self.keys[layer][:, :, :w], k), dim=2)
            v = torch.cat((self.values[layer][:, :, :w], v), dim=2)
            pos = torch.cat((self.positions[layer][:, :, :w], pos), dim=2)
            score = torch.cat((self.scores[layer][:, :, :w], score), dim=2)
        self._pending[layer] = (k, v, pos, score, prefill, t)
        return k, v, pos

    def _write_in_place(self, layer, k, v, pos):
        """Decoding one token: it goes into each head's first empty slot (there is always one: a layer has one
        slot more than its largest budget), and the buffers are returned without copying."""
        keys, values, positions = self.keys[layer], self.values[layer], self.positions[layer]
        free = (positions < 0).to(torch.int8).argmax(-1, keepdim=True)  # (B, H, 1)
        slot = free[..., None].expand(-1, -1, -1, k.shape[-1])
        keys.scatter_(2, slot, k)
        values.scatter_(2, slot, v)
        positions.scatter_(2, free, pos)
        self.scores[layer].scatter_(2, free, 0.0)
        self.count[layer] += 1
        # the first empty slot is a hole below the width or the width itself: the width grows by one at most
        w = self.width[layer] = min(positions.shape[-1], self.width[layer] + 1)
        self._pending[layer] = pos  # the new token's position: "now" for the recent window
        return keys[:, :, :w], values[:, :, :w], positions[:, :, :w]

    def query_weights(self, layer, queries):
        """The policy's, for these queries (at prefill when the layer held nothing before)."""
        pending = self._pending[layer]
        return self.policy.query_weights(queries, not isinstance(pending, torch.Tensor) and pending[4])

    def observe(self, layer, paid):
        pending = self._pending.pop(layer)
        if paid is not None:
            paid = paid.unflatten(1, (self.budgets.shape[1], -1)).sum(2)  # pool the query heads of each KV head
        if isinstance(pending, torch.Tensor):
            self._evict_one(layer, paid, now=pending)
            return
        k, v, pos, score, prefill, queries = pending
        self._keep(layer, k, v, pos, self.policy.accumulate(score, Observation(paid, prefill, queries=queries)))

    def load(self, prefilled: "BudgetedCache") -> "BudgetedCache":
        """This fresh cache as it would stand had it prefilled the context that ``prefilled`` (same policy, budgets
        that hold the whole context, so it evicted nothing) did: each layer's entries and scores, compressed to this
        cache's budgets. A prefill's queries attend to the whole prompt whatever the budgets (``update``), so its
        hidden states, and the scores the policy reads from them, do not depend on the budgets: one prefill serves
        every allocation, and each then compresses exactly as it would have (:func:`.evaluation.continuation_nlls`)."""
        if self.keys:
            raise ValueError("load needs a fresh cache; this one holds entries already")
        if prefilled.policy != self.policy:
            raise ValueError(f"the prefilled cache scored with {prefilled.policy}, this one with {self.policy}")
        if prefilled.evicted:
            raise ValueError("the prefilled cache evicted entries: its budgets must hold the whole context")
        for layer in sorted(prefilled.keys):
            w = prefilled.width[layer]
            self._keep(layer, *(x[:, :, :w].clone() for x in (prefilled.keys[layer], prefilled.values[layer],
                                                                prefilled.positions[layer], prefilled.scores[layer])))
        return self

    def _keep(self, layer, k, v, pos, score):
        """Store a layer's entries after a step that read more than one token, keeping each head's (or, pooled,
        each layer's) highest-priority ones within its budget, with room for decoding in place."""
        held = (pos >= 0).sum(-1)  # (B, H)
        budgets = self.budgets[layer]
        over = (held.sum(-1) > budgets.sum()).any() if self.pooled else (held > budgets).any()
        if over:
            self.evicted = True
            index, valid = self._select(layer, score, pos)
            k = k.gather(2, index[..., None].expand(-1, -1, -1, k.shape[-1]))
            v = v.gather(2, index[..., None].expand(-1, -1, -1, v.shape[-1]))
            pos = pos.gather(2, index).masked_fill(~valid, -1)
            score = score.gather(2, index)
        self.width[layer], self.count[layer] = pos.shape[-1], (pos >= 0).sum(-1, keepdim=True)
        spare = 0 if self.pooled else max(0, int(budgets.max()) + 1 - pos.shape[-1])
        if spare:  # room for decoding in place
            k, v = (torch.cat((x, x.new_zeros(*x.shape[:2], spare, x.shape[-1])), 2) for x in (k, v))
            pos = torch.cat((pos, pos.new_full((*pos.shape[:2], spare), -1)), 2)
            score = torch.cat((score, score.new_zeros(*score.shape[:2], spare)), 2)
        self.keys[layer], self.values[layer], self.positions[layer], self.scores[layer] = k, v, pos, score

    def _priority(self, layer, score, pos):
        """The policy's priority, +inf for protected entries (sinks, recent window), -inf for empty slots."""
        return ranked(self.policy, score, pos, *self._protected[layer])

    def _evict_one(self, layer, paid, now):
        """After a decoding step a head holds at most one entry over its budget. Such a head drops its
        ``slack[layer]`` lowest-priority entries that are neither sinks nor in the recent window (as
        :meth:`_priority`, in fewer operations), so the next ``slack - 1`` tokens go into freed slots and nothing
        is ranked until the head is over again."""
        w = self.width[layer]
        pos, stored = self.positions[layer][:, :, :w], self.scores[layer][:, :, :w]
        score = self.policy.accumulate(stored, Observation(paid, queries=1))
        if score is not stored:  # a policy that did not update in place
            stored.copy_(score)
        over = self.count[layer] > self.budgets[layer][:, None]  # (B, H, 1)
        if over.any():
            self.evicted = True
            slack = self.slack[layer]
            sinks, window = self._protected[layer]
            candidate = (pos >= sinks[:, None]) & (pos <= now - window[:, None])  # excludes empty slots (-1)
            priority = torch.where(candidate, self.policy.priority(score, pos), float("inf"))
            victims = priority.topk(slack, dim=-1, largest=False).indices if slack > 1 else priority.argmin(-1, True)
            if slack > 1:  # fewer candidates than the slack: only the candidates go
                evict = over & candidate.gather(2, victims)
                self.count[layer] -= evict.sum(-1, keepdim=True)
            else:
                evict = over
                self.count[layer] -= over.long()
            pos.scatter_(2, victims, torch.where(evict, -1, pos.gather(2, victims)))

    def _select(self, layer, score, pos):
        """Slot indices (B, H, S') to keep, and which of them hold an entry."""
        budgets = self.budgets[layer]
        priority = self._priority(layer, score, pos)
        if not self.pooled:
            index = priority.topk(min(pos.shape[-1], int(budgets.max())), dim=-1).indices
            rank = torch.arange(index.shape[-1])
            return index, (rank < budgets[:, None]) & (pos.gather(2, index) >= 0)
        if self.floor:  # each head's ``floor`` best entries are kept before the pool is shared
            best = priority.topk(min(self.floor, pos.shape[-1]), dim=-1).indices
            priority = priority.scatter(2, best, float("inf")).masked_fill(pos < 0, float("-inf"))
        flat = priority.flatten(1)
        chosen = flat.topk(min(flat.shape[-1], int(budgets.sum())), dim=-1).indices
        keep = torch.zeros_like(flat, dtype=torch.bool).scatter(1, chosen, True).view_as(pos) & (pos >= 0)
        index = keep.to(torch.int8).topk(int(keep.sum(-1).max()), dim=-1).indices
        return index, keep.gather(2, index)

    def held(self) -> torch.Tensor:
        """Entries held per (layer, sequence, KV head): (layers, B, kv_heads)."""
        return torch.stack([(self.positions[layer] >= 0).sum(-1) for layer in sorted(self.positions)])

    def entries(self) -> int:
        return int(self.held().sum())

    def allocated_bytes(self) -> int:
        """Bytes of the key and value tensors, unused slots included."""
        return sum(t.nbytes for d in (self.keys, self.values) for t in d.values())

    def held_bytes(self) -> int:
        """Bytes of the keys and values actually kept."""
        k = next(iter(self.keys.values()))
        return 2 * self.entries() * k.shape[-1] * k.element_size()
