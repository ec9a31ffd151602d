"""Corpus BLEU (Papineni et al., ACL 2002) on tokenised sentences, as the paper's translation rows report it.

``BLEU = BP * exp(mean_n log p_n)`` for n = 1..4, where ``p_n`` is the corpus-level modified n-gram
precision (each hypothesis n-gram counted at most as often as it occurs in the reference) and
``BP = min(1, exp(1 - r / c))`` the brevity penalty for a hypothesis corpus of c tokens against
references of r tokens. One reference per sentence, no smoothing, scores in % (as sacreBLEU prints
them, on text that is already tokenised).
"""

from __future__ import annotations

import math
from collections import Counter


def ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def corpus_bleu(hypotheses: list[list[str]], references: list[list[str]], max_n: int = 4) -> dict[str, float]:
    """``{"bleu", "brevity_penalty", "precisions"}`` of tokenised hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    matched, total = [0] * max_n, [0] * max_n
    hyp_len = ref_len = 0
    for hyp, ref in zip(hypotheses, references):
        hyp_len, ref_len = hyp_len + len(hyp), ref_len + len(ref)
        for n in range(1, max_n + 1):
            counts, ref_counts = ngrams(hyp, n), ngrams(ref, n)
            matched[n - 1] += sum(min(c, ref_counts[g]) for g, c in counts.items())
            total[n - 1] += max(0, len(hyp) - n + 1)
    precisions = [100.0 * m / t if t else 0.0 for m, t in zip(matched, total)]
    penalty = 1.0 if hyp_len > ref_len else (math.exp(1 - ref_len / hyp_len) if hyp_len else 0.0)
    bleu = 0.0 if min(matched) == 0 else penalty * math.exp(sum(math.log(p / 100) for p in precisions) / max_n) * 100
    return {"bleu": bleu, "brevity_penalty": penalty, "precisions": precisions}
