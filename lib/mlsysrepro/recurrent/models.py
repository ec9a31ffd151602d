"""The paper's models on :class:`.lstm.LSTM`: a PTB language model, a CoNLL-2003 tagger, an IWSLT translator.

- :class:`WordLM` (Zaremba et al., 2014, "medium": 2 layers x 650, BPTT 35): embedding -> LSTM ->
  dropout -> decoder. Dropout on the embeddings, between layers and before the decoder; in
  ``structured`` mode every one of those GEMMs is compacted (by ``kernel``), the decoder's (H x 10,000) included.
  ``tied`` shares the embedding and decoder weights (Press & Wolf, 2017; needs emb = hidden). ``cutoffs`` swaps the
  full softmax for Grave et al.'s (2017) adaptive softmax (``torch.nn.AdaptiveLogSoftmaxWithLoss``): the frequent
  words and one logit per tail cluster in the head, rarer words in clusters of smaller width, so that a CPU can train
  on all of PTB; the dropout before it is the same mask, applied to the states (:meth:`WordLM.loss`).
  ``mode``, ``p``, ``kernel``, ``period`` and ``fused`` are those of :class:`.lstm.LSTM`, for every dropout in the
  model.
- :class:`Tagger`: a BiLSTM tagger, a forward and a backward one-layer LSTM over the embeddings,
  dropout on the embeddings and on the concatenated states, a linear layer to the tags (no CRF).
- :class:`Translator`: an LSTM encoder-decoder with global attention for IWSLT (see its docstring).
"""

from __future__ import annotations

import torch
from torch import nn

from ..sparsity.compaction import masked_projection
from .lstm import LSTM


class WordLM(nn.Module):
    def __init__(self, vocab_size: int, hidden: int, num_layers: int = 2, p: float = 0.5, mode: str = "standard",
                 tied: bool = False, kernel: str = "per-draw", period: int = 1, cutoffs: tuple[int, ...] = (),
                 fused: bool = False):
        super().__init__()
        if cutoffs and tied:
            raise ValueError("an adaptive softmax (cutoffs) has no single decoder matrix to tie; pass tied=False")
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.lstm = LSTM(hidden, hidden, num_layers, p, mode, kernel, period, fused)
        self.adaptive = (nn.AdaptiveLogSoftmaxWithLoss(hidden, vocab_size, list(cutoffs), div_value=4.0)
                         if cutoffs else None)
        self.decoder_bias = None if cutoffs else nn.Parameter(torch.zeros(vocab_size))
        self.decoder = None if tied or cutoffs else nn.Parameter(torch.empty(hidden, vocab_size))  # W_dec^T
        nn.init.uniform_(self.embedding.weight, -0.05, 0.05)
        if self.decoder is not None:
            nn.init.uniform_(self.decoder, -0.05, 0.05)

    def forward(self, ids: torch.Tensor, state=None, generator: torch.Generator | None = None):
        """Logits (T, B, vocab) for ids (T, B), and the LSTM's final state (carry it, detached, to the next window)."""
        if self.adaptive is not None:
            raise ValueError("a WordLM with an adaptive softmax (cutoffs) scores targets with loss(), not logits")
        out, state = self.lstm(self.embedding(ids), state, generator)
        weight = self.embedding.weight.t() if self.decoder is None else self.decoder
        drop = self.lstm.drop(*out.shape, generator, out.dtype, out.device)
        return masked_projection(out, weight, self.decoder_bias, drop), state

    def loss(self, ids: torch.Tensor, targets: torch.Tensor, state=None, generator: torch.Generator | None = None):
        """The mean negative log-likelihood of ``targets`` (T, B) after ``ids`` (T, B), and the final state. With an
        adaptive softmax the states are dropped by the same draw a full softmax's decoder would read (a dense mask:
        the adaptive head's GEMMs are torch's own)."""
        if self.adaptive is None:
            logits, state = self(ids, state, generator)
            return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)), state
        out, state = self.lstm(self.embedding(ids), state, generator)
        drop = self.lstm.drop(*out.shape, generator, out.dtype, out.device, dense=True)
        return self.adaptive(out.mul(drop.mask).reshape(-1, out.shape[-1]), targets.reshape(-1)).loss, state


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each column of ``x`` (T, B, ...) reversed within its length; padding stays at the end (an involution)."""
    steps = torch.arange(x.shape[0], device=x.device)[:, None]
    lengths = lengths.to(x.device)
    index = torch.where(steps < lengths[None, :], lengths[None, :] - 1 - steps, steps)
    return x.gather(0, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))


class Tagger(nn.Module):
    def __init__(self, vocab_size: int, num_tags: int, embedding: int = 100, hidden: int = 100, p: float = 0.5,
                 mode: str = "standard", kernel: str = "per-draw", period: int = 1, fused: bool = False):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding, padding_idx=0)
        self.forward_lstm = LSTM(embedding, hidden, 1, p, mode, kernel, period, fused)
        self.backward_lstm = LSTM(embedding, hidden, 1, p, mode, kernel, period, fused)
        self.classifier = nn.Linear(2 * hidden, num_tags)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, generator: torch.Generator | None = None):
        """Tag logits (T, B, tags) for padded ids (T, B)."""
        x = self.embedding(ids)
        ahead, _ = self.forward_lstm(x, generator=generator)
        behind, _ = self.backward_lstm(reverse_padded(x, lengths), generator=generator)
        states = torch.cat([ahead, reverse_padded(behind, lengths)], 2)
        drop = self.forward_lstm.drop(*states.shape, generator, states.dtype, states.device)
        return masked_projection(states, self.classifier.weight.t(), self.classifier.bias, drop)


class Translator(nn.Module):
    """An LSTM encoder-decoder with Luong et al.'s (2015) global attention ("general" score, no input feeding), the
    shape of OpenNMT's RNN model, for the paper's IWSLT rows.

    Encoder and decoder are :class:`.lstm.LSTM` stacks with the same dropout ``mode`` (on each layer's input); the
    decoder starts from a zero state (attention carries the source) and runs teacher-forced over the whole target,
    so its GEMMs stay batched. Per target step ``t``: ``a_t = softmax_s(h_t W_a e_s)`` over the source positions
    (padding masked), ``c_t = sum_s a_ts e_s``, ``o_t = tanh(W_c [c_t; h_t])``, and the generator reads the dropped
    ``o_t`` through :func:`~mlsysrepro.sparsity.compaction.masked_projection` (compacted in the batch-shared modes,
    like the LM's decoder).
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, hidden: int, num_layers: int = 2, p: float = 0.3,
                 mode: str = "standard", kernel: str = "per-draw", period: int = 1):
        super().__init__()
        self.src_embedding = nn.Embedding(src_vocab, hidden, padding_idx=0)
        self.tgt_embedding = nn.Embedding(tgt_vocab, hidden, padding_idx=0)
        self.encoder = LSTM(hidden, hidden, num_layers, p, mode, kernel, period)
        self.decoder = LSTM(hidden, hidden, num_layers, p, mode, kernel, period)
        self.score = nn.Parameter(torch.empty(hidden, hidden))  # W_a
        self.combine = nn.Linear(2 * hidden, hidden)  # W_c
        self.generator = nn.Parameter(torch.empty(hidden, tgt_vocab))  # W_gen^T
        self.generator_bias = nn.Parameter(torch.zeros(tgt_vocab))
        for w in (self.score, self.generator):
            nn.init.uniform_(w, -hidden**-0.5, hidden**-0.5)

    def encode(self, src: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Encoder states (S, B, H) for padded source ids (S, B)."""
        return self.encoder(self.src_embedding(src), generator=generator)[0]

    def attend(self, states: torch.Tensor, memory: torch.Tensor, src_lengths: torch.Tensor,
               generator: torch.Generator | None = None) -> torch.Tensor:
        """Logits (T, B, vocab) from decoder states (T, B, H) attending over encoder states (S, B, H)."""
        scores = torch.einsum("tbh,hk,sbk->bts", states, self.score, memory)
        positions = torch.arange(memory.shape[0], device=memory.device)
        padding = positions[None, :] >= src_lengths.to(memory.device)[:, None]  # (B, S)
        weights = scores.masked_fill(padding[:, None, :], float("-inf")).softmax(-1)
        context = torch.einsum("bts,sbh->tbh", weights, memory)
        attended = torch.tanh(self.combine(torch.cat([context, states], 2)))
        drop = self.decoder.drop(*attended.shape, generator, attended.dtype, attended.device)
        return masked_projection(attended, self.generator, self.generator_bias, drop)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """Teacher-forced logits (T, B, tgt vocab) for target inputs ``tgt_in`` (T, B) (BOS + target)."""
        memory = self.encode(src, generator)
        states, _ = self.decoder(self.tgt_embedding(tgt_in), generator=generator)
        return self.attend(states, memory, src_lengths, generator)

    @torch.no_grad()
    def greedy(self, src: torch.Tensor, src_lengths: torch.Tensor, bos: int, eos: int, max_len: int) -> torch.Tensor:
        """Greedy decoding, one step at a time: (steps, B) target ids, ``eos`` after the end."""
        memory = self.encode(src)
        token = torch.full((1, src.shape[1]), bos, dtype=torch.long, device=src.device)
        state, out = None, []
        for _ in range(max_len):
            h, state = self.decoder(self.tgt_embedding(token), state)
            token = self.attend(h, memory, src_lengths).argmax(-1)
            out.append(token)
            if (torch.cat(out) == eos).any(0).all():
                break
        return torch.cat(out)
