"""Local intrinsic dimension (``lid_layer_<L>``), LID-MLE as in Yin et al. (2024).

For a query point ``x`` and its ``k`` nearest neighbours in a reference set,
at Euclidean distances ``T_1 <= ... <= T_k``, the maximum-likelihood estimate
(Levina and Bickel, 2004) is::

    LID(x) = -1 / ( (1/k) * sum_{i=1..k} log(T_i / T_k) )

Sign convention: ``-`` (Yin et al. find truthful generations have lower LID).
"""

from __future__ import annotations

import numpy as np

#: Default neighbourhood size.
DEFAULT_K = 20
_EPS = 1e-12


def lid_mle(query: np.ndarray, reference: np.ndarray, k: int = DEFAULT_K) -> float:
    """LID-MLE of one point against a reference set.

    Args:
        query: ``(d,)`` hidden state.
        reference: ``(m, d)`` hidden states, ``m >= 2``. A reference point at
            distance 0 from the query (the query itself) is ignored.
        k: number of neighbours; capped at the number of usable points.

    Returns:
        A float >= 0 (0 when the neighbourhood is degenerate).
    """
    reference = np.asarray(reference, dtype=np.float64)
    query = np.asarray(query, dtype=np.float64)
    if reference.ndim != 2 or query.shape != reference.shape[1:]:
        raise ValueError(f"query {query.shape} must be (d,) and reference {reference.shape} (m, d)")
    dist = np.sqrt(np.maximum(((reference - query) ** 2).sum(axis=1), 0.0))
    dist = np.sort(dist[dist > _EPS])
    k = min(k, len(dist))
    if k < 2:
        raise ValueError(f"LID needs at least 2 reference points distinct from the query, got {k}")
    nearest = dist[:k]
    mean_log = float(np.mean(np.log(nearest / nearest[-1])))
    if mean_log >= -_EPS:  # all neighbours equidistant: no local structure
        return 0.0
    return -1.0 / mean_log
