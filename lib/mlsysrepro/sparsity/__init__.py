"""Training efficiency from structured sparsity: serves "Structured in Space, Randomized in Time" (Sarma et al.,
NeurIPS 2021; structured dropout for RNN training).

Public entry points:

- :func:`.masks.dropout_mask`: the paper's four mask cases (Fig. 1) plus no dropout;
- :class:`.lstm.LSTM`: a multi-layer LSTM with explicit gate GEMMs whose dropout, in the batch-shared modes
  (``structured``, ``fixed``), really shrinks the GEMMs that read the dropped hidden state
  (:func:`.lstm.masked_projection`, :class:`.lstm.CompactProjection`); its time loop and backward pass are
  :class:`.recurrence.Recurrence`;
- :class:`.models.WordLM` (PTB, Zaremba et al.), :class:`.models.Tagger` (CoNLL-2003 BiLSTM) and
  :class:`.models.Translator` (IWSLT, attention encoder-decoder), and the LM and tagger on ``torch.nn.LSTM`` in
  :mod:`.reference`;
- :mod:`.text_data` (PTB, CoNLL-2003 and IWSLT'15 En-Vi through the data registry), :func:`.span_f1.span_f1`
  (conlleval's rule), :func:`.bleu.corpus_bleu`, :mod:`.training` (truncated BPTT; tagger and translator
  training with dev F1 / BLEU);
- :mod:`.gemm_timing`: forward, backward-data and backward-weight GEMMs timed, dense-masked against compacted;
- :mod:`.dropout_experiments`: the notebook's presets and one function per figure.
"""
