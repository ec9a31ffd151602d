"""Training efficiency from structured sparsity: serves "Structured in Space, Randomized in Time" (Sarma et al.,
NeurIPS 2021; structured dropout for RNN training).

Public entry points:

- :func:`.masks.dropout_mask`: the paper's four mask cases (Fig. 1) plus no dropout;
- :class:`.lstm.LSTM`: a multi-layer LSTM with explicit gate GEMMs whose dropout, in the batch-shared modes
  (``structured``, ``fixed``), really shrinks the GEMMs that read the dropped hidden state
  (:func:`.lstm.masked_projection`, :class:`.lstm.CompactProjection`); its time loop and backward pass are
  :class:`.recurrence.Recurrence`;
- :class:`.models.WordLM` (PTB, Zaremba et al.) and :class:`.models.Tagger` (CoNLL-2003 BiLSTM), and the same
  models on ``torch.nn.LSTM`` in :mod:`.reference`;
- :mod:`.text_data` (PTB and CoNLL-2003 through the data registry), :func:`.span_f1.span_f1` (conlleval's rule),
  :mod:`.training` (truncated BPTT; tagger training with dev span F1);
- :mod:`.gemm_timing`: forward, backward-data and backward-weight GEMMs timed, dense-masked against compacted;
- :mod:`.dropout_experiments`: the notebook's presets and one function per figure.
"""
