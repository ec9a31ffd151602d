"""Recurrent networks whose dropout can be structured: serves "Structured in Space, Randomized in Time" (Sarma et
al., NeurIPS 2021) and any paper that trains an LSTM.

Public entry points:

- :class:`.lstm.LSTM` — a multi-layer LSTM with explicit gate GEMMs; in the batch-shared dropout modes its input
  projections run compacted (:mod:`mlsysrepro.sparsity.compaction`); its time loop and backward pass are
  :class:`.recurrence.Recurrence`;
- :class:`.models.WordLM` (PTB, Zaremba et al.), :class:`.models.Tagger` (CoNLL-2003 BiLSTM),
  :class:`.models.Translator` (IWSLT, attention encoder-decoder), and the LM and tagger on ``torch.nn.LSTM`` in
  :mod:`.reference` (the baseline a user would pick);
- :mod:`.training` — truncated BPTT with Zaremba's SGD recipe, tagger and translator training with dev F1 / BLEU.
"""
