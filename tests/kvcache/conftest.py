import torch


def observe_weights(cache, layer: int, weights: torch.Tensor) -> None:
    """Hand ``cache`` hand-built attention ``weights`` (B, heads, T, S) as the model would: only the queries its
    ``query_weights`` asks for, weighted and summed (None when it asks for none)."""
    query_weights = cache.query_weights(layer, weights.shape[2])
    paid = None if query_weights is None else (weights * query_weights.to(weights.dtype)[:, None]).sum(2)
    cache.observe(layer, paid)
