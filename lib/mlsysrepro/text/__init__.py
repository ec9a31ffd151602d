"""Text data and metrics shared by the papers that train language and sequence models: structured dropout (PTB,
CoNLL-2003, IWSLT) and BaKlaVa / AsymVLM (WikiText-2, PTB and tinyshakespeare text).

Public entry points:

- :mod:`.corpora` — PTB (raw text, or word ids with :func:`.corpora.batchify` / :func:`.corpora.bptt_windows`),
  WikiText-2 and tinyshakespeare text, CoNLL-2003 (tagged sentences, :func:`.corpora.pad_batch`), the IWSLT releases
  (:data:`.corpora.IWSLT`, :func:`.corpora.load_parallel`), all through the data registry;
- :func:`.span_f1.span_f1` — conlleval's chunk rule and span precision / recall / F1;
- :func:`.bleu.corpus_bleu` — corpus BLEU (Papineni et al., 2002).
"""
