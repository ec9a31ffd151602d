"""What a serving run measured, per constraint class: cost, latency, accuracy-target attainment, models per query.

Every share is over the requests that *arrived*, so a dropped request counts against a policy:

- **SLO attainment** — admitted requests whose latency met the class's SLO;
- **accuracy-target attainment** — admitted requests in windows (``window`` seconds) where the answers' realised
  accuracy, replayed from real predictions (:func:`.replay.correct_counts`), reached the class's target: Cocktail's
  "accuracy met for x % of requests";
- **models per query** — percentiles over admitted requests of the serving ensemble's size;
- **cost** — the sum of the per-second bills of every VM (:func:`.fleet.billed`), and per million requests;
- **latency percentiles** — over the admitted requests, and (``latency_p99_all_ms``) over every arrived request with
  a dropped one counted at the drop ``timeout``: what its client waited before giving up, an SLO miss.
"""

from __future__ import annotations

import numpy as np


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, quantiles) -> np.ndarray:
    """Quantiles of ``values`` where each value stands for ``weights`` requests (inverted CDF: the smallest value
    whose cumulative weight reaches the quantile)."""
    values, weights = np.asarray(values, dtype=float).ravel(), np.asarray(weights, dtype=float).ravel()
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if values.size == 0:
        return np.full(len(np.atleast_1d(quantiles)), np.nan)
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order]) / weights.sum()
    positions = np.searchsorted(cumulative, np.atleast_1d(quantiles) - 1e-12)
    return values[order][np.minimum(positions, len(values) - 1)]


def target_attainment(admitted: np.ndarray, correct: np.ndarray, arrivals: np.ndarray, target: float,
                      window: int) -> float:
    """Share of the arrived requests that were admitted in a ``window``-second window whose realised accuracy
    (right answers / admitted) reached ``target``; one class (1-D per-second arrays)."""
    if window < 1:
        raise ValueError(f"window must be >= 1 second, got {window}")
    windows = -(-len(admitted) // window)
    pad = windows * window - len(admitted)
    served = np.pad(admitted, (0, pad)).reshape(windows, window).sum(1)
    right = np.pad(correct, (0, pad)).reshape(windows, window).sum(1)
    met = (served > 0) & (right >= target * served)
    return float(served[met].sum() / max(arrivals.sum(), 1))


def _with_dropped(latency_s: np.ndarray, admitted: np.ndarray, dropped: np.ndarray, timeout: float,
                  quantiles) -> np.ndarray:
    """Latency quantiles (ms) over every arrived request: the admitted cohorts at their latency, the dropped ones
    at ``timeout`` seconds."""
    values = np.concatenate([np.nan_to_num(latency_s, nan=0.0).ravel(), np.full(dropped.size, timeout)])
    weights = np.concatenate([admitted.ravel(), dropped.ravel()])
    return weighted_quantiles(values, weights, quantiles) * 1e3


def summary(run, correct: np.ndarray, slo_ms: np.ndarray, targets: np.ndarray, window: int = 60,
            timeout: float = 2.0) -> list[dict]:
    """One row per constraint class of ``run`` (a :class:`.simulator.Run`): the class's share of the run's cost is
    its share of the queue demand it brought (the whole cost for a run of one class); ``timeout``: the seconds a
    dropped request counts for in ``latency_p99_all_ms``."""
    arrivals = run.admitted + run.dropped
    share = arrivals.sum(0) * run.models.mean(0)
    share = share / max(share.sum(), 1)
    rows = []
    for c in range(arrivals.shape[1]):
        admitted, latency = run.admitted[:, c], run.latency_s[:, c]
        arrived = max(int(arrivals[:, c].sum()), 1)
        p50, p99 = weighted_quantiles(latency, admitted, [0.5, 0.99]) * 1e3
        p99_all, = _with_dropped(latency, admitted, run.dropped[:, c], timeout, [0.99])
        m50, m90, m99 = weighted_quantiles(run.models[:, c], admitted, [0.5, 0.9, 0.99])
        within = np.nan_to_num(latency, nan=np.inf) <= slo_ms[c] / 1e3
        cost = run.cost * share[c]
        rows.append(dict(
            requests=int(arrivals[:, c].sum()), dropped_share=float(run.dropped[:, c].sum() / arrived),
            cost=cost, cost_per_million=cost / arrived * 1e6, latency_p50_ms=p50, latency_p99_ms=p99,
            latency_p99_all_ms=p99_all,
            slo_attainment=float(admitted[within].sum() / arrived),
            accuracy=float(correct[:, c].sum() / max(admitted.sum(), 1)),
            target_attainment=target_attainment(admitted, correct[:, c], arrivals[:, c], targets[c], window),
            models_mean=float(np.average(run.models[:, c], weights=np.maximum(admitted, 0) + 1e-12)),
            models_p50=m50, models_p90=m90, models_p99=m99, vms_mean=float(run.vms.mean()), vms_max=int(run.vms.max()),
            vm_launches=int(len(run.vm_model)), revocations=int(run.vm_revoked.sum()),
            spot_share=float(run.vm_cost[run.vm_spot].sum() / max(run.cost, 1e-12))))
    return rows


def summary_all(run, correct: np.ndarray, slo_ms: np.ndarray, targets: np.ndarray, window: int = 60,
                timeout: float = 2.0) -> dict:
    """One row for every class of ``run`` together: the run's whole cost, shares weighted by each class's
    requests, latency and models-per-query percentiles over all admitted requests (and the p99 over every arrived
    one, dropped ones at ``timeout``)."""
    rows = summary(run, correct, slo_ms, targets, window, timeout)
    requests = np.array([row["requests"] for row in rows], dtype=float)
    weight = requests / max(requests.sum(), 1.0)
    out = {key: float(np.dot(weight, [row[key] for row in rows]))
           for key in ("dropped_share", "slo_attainment", "accuracy", "target_attainment", "models_mean")}
    p50, p99 = weighted_quantiles(run.latency_s, run.admitted, [0.5, 0.99]) * 1e3
    m50, m90, m99 = weighted_quantiles(run.models, run.admitted, [0.5, 0.9, 0.99])
    out.update(requests=int(requests.sum()), cost=run.cost, cost_per_million=run.cost / max(requests.sum(), 1) * 1e6,
               latency_p50_ms=p50, latency_p99_ms=p99,
               latency_p99_all_ms=_with_dropped(run.latency_s, run.admitted, run.dropped, timeout, [0.99])[0],
               models_p50=m50, models_p90=m90, models_p99=m99,
               **{key: rows[0][key] for key in ("vms_mean", "vms_max", "vm_launches", "revocations", "spot_share")})
    return out
