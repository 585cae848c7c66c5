"""Personalised PageRank on a scipy CSR adjacency by power iteration (Haveliwala 2002; HippoRAG's PPR).

HippoRAG (Gutiérrez et al., arXiv:2405.14831) runs PPR from the query's entity nodes with damping 0.5 and
weights each seed by its node specificity 1/|passages mentioning it|; `specificity` gives those weights.
The transition matrix is built once per graph (`Transition.of`) so a query pays only the iterations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from retrieval.errors import ValidationError

STABLE_MIN_ITER = 4  # `stable_top`: never stop before this many iterations


@dataclass(frozen=True)
class Transition:
    """Column-stochastic transition matrix of a weighted graph, plus its dangling-node mask."""

    matrix: sp.csr_matrix  # [j, i] = w(i, j) / out_weight(i)
    dangling: np.ndarray  # bool, nodes with no out-weight

    @property
    def n(self) -> int:
        return int(self.matrix.shape[0])

    @cached_property
    def matrix32(self) -> sp.csr_matrix:
        """`matrix` in float32 (made once): half the memory traffic of a float64 product."""
        return self.matrix.astype(np.float32)

    @classmethod
    def of(cls, csr: sp.spmatrix) -> Transition:
        """Normalise the rows of `csr` ([i, j] = weight of i -> j) and transpose (O(E))."""
        csr = sp.csr_matrix(csr, dtype=np.float64)
        out_weight = np.asarray(csr.sum(axis=1)).ravel()
        inv = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=out_weight > 0)
        matrix = (sp.diags(inv) @ csr).T.tocsr()
        return cls(matrix, out_weight <= 0)


def _reset_vector(n: int, seeds: Mapping[int, float] | np.ndarray) -> np.ndarray:
    if isinstance(seeds, np.ndarray):
        reset = np.array(seeds, dtype=np.float64)
        if reset.shape[0] != n:
            raise ValidationError(f"personalisation has {reset.shape[0]} rows for a graph of {n} nodes")
        if (reset < 0).any() or not np.isfinite(reset).all():
            raise ValidationError("personalisation weights must be finite and non-negative")
    else:
        reset = np.zeros(n, dtype=np.float64)
        for idx, w in seeds.items():
            if not 0 <= idx < n or not w >= 0:
                raise ValidationError(f"bad PPR seed {idx!r}: {w!r}")
            reset[idx] += w
    total = reset.sum(axis=0)
    if np.any(total <= 0):
        raise ValidationError("PPR needs at least one seed with positive weight")
    return np.asarray(reset / total, dtype=np.float64)


def ppr(
    trans: Transition,
    seeds: Mapping[int, float] | np.ndarray,
    damping: float = 0.5,
    *,
    tol: float = 1e-8,
    max_iter: int = 100,
    stable_top: int = 0,
    stable_rows: int | None = None,
) -> np.ndarray:
    """PPR by power iteration: r <- d·(P r + dangling mass·v) + (1-d)·v (Haveliwala 2002).

    `seeds` is {node: weight} or a non-negative array of shape (n,) or (n, q) for q queries at once
    (one column each). Dangling nodes send their mass back to the personalisation vector v, so every
    column stays a distribution. Stops when the L1 change of every column is below `tol` (not scaled
    by n, unlike networkx).

    `stable_top=k` (one query only) is for callers that use the ranking, not the values: it iterates in
    float32 and also stops once the order of the top k nodes (among the first `stable_rows`, default all)
    is the same after two consecutive iterations (from STABLE_MIN_ITER on). With damping 0.5 the ranking
    settles long before the L1 change does: on the 1M-edge scale graph the top 10 matched the exact order
    after 2-4 iterations, against 14 to reach tol 1e-8.
    """
    if not 0.0 < damping < 1.0:
        raise ValidationError(f"damping must be in (0, 1), got {damping!r}")
    reset = _reset_vector(trans.n, seeds)
    rows = trans.n if stable_rows is None else min(stable_rows, trans.n)
    fast = 0 < stable_top < rows and reset.ndim == 1
    matrix = trans.matrix32 if fast else trans.matrix
    if fast:
        reset = reset.astype(np.float32)
    rank = reset.copy()
    dangling = trans.dangling if trans.dangling.any() else None
    previous: np.ndarray | None = None
    for step in range(1, max_iter + 1):
        lost = rank[dangling].sum(axis=0) if dangling is not None else 0.0
        nxt = damping * (matrix @ rank + lost * reset) + (1.0 - damping) * reset
        delta = np.abs(nxt - rank).sum(axis=0)
        rank = nxt
        if np.all(delta < tol):
            break
        if fast:
            head = rank[:rows]
            top = np.argpartition(-head, stable_top)[:stable_top]
            top = top[np.argsort(-head[top], kind="stable")]
            if step >= STABLE_MIN_ITER and previous is not None and np.array_equal(top, previous):
                break
            previous = top
    return np.asarray(rank, dtype=np.float64)


def personalized_pagerank(
    csr: sp.spmatrix,
    seeds_weights: Mapping[int, float] | np.ndarray,
    damping: float = 0.5,
    *,
    tol: float = 1e-8,
    max_iter: int = 100,
) -> np.ndarray:
    """PPR vector (sums to 1) restarting at `seeds_weights` on adjacency `csr` ([i, j] = weight i -> j).

    `damping` is the probability of following an edge (HippoRAG uses 0.5). One-off convenience around
    `Transition.of` + `ppr`; callers running many queries on one graph should keep the Transition.
    """
    return ppr(Transition.of(csr), seeds_weights, damping, tol=tol, max_iter=max_iter)


def specificity(node_chunk: sp.spmatrix) -> np.ndarray:
    """Node specificity s_i = 1/|P_i| from the node x passage incidence (HippoRAG §3.2); 1 when |P_i| = 0."""
    counts = np.asarray((sp.csr_matrix(node_chunk) != 0).sum(axis=1)).ravel().astype(np.float64)
    return np.asarray(1.0 / np.maximum(counts, 1.0))
