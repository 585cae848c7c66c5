"""Personalised PageRank (retrieval.graph.ppr) against networkx on small graphs, plus its edge cases."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from retrieval.errors import ValidationError
from retrieval.graph.ppr import Transition, personalized_pagerank, ppr, specificity


def _random_graph(n: int, m: int, seed: int) -> tuple[sp.csr_matrix, nx.DiGraph]:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    w = rng.uniform(0.5, 3.0, len(src))
    csr = sp.csr_matrix((w, (src, dst)), shape=(n, n))
    csr.sum_duplicates()
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    coo = csr.tocoo()
    g.add_weighted_edges_from(zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist(), strict=True))
    return csr, g


@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_matches_networkx_personalised_pagerank(damping: float) -> None:
    csr, g = _random_graph(60, 150, seed=7)  # sparse enough to have dangling nodes
    seeds = {3: 2.0, 10: 1.0, 41: 0.5}
    ours = personalized_pagerank(csr, seeds, damping, tol=1e-12, max_iter=1000)
    theirs = nx.pagerank(g, alpha=damping, personalization=seeds, dangling=seeds, tol=1e-14, max_iter=1000)
    ref = np.array([theirs[i] for i in range(60)])
    assert ours.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(ours, ref, atol=1e-9)
    assert list(np.argsort(-ours)[:15]) == list(np.argsort(-ref)[:15])


def test_batched_columns_equal_single_runs() -> None:
    csr, _ = _random_graph(40, 120, seed=3)
    trans = Transition.of(csr)
    a = np.zeros(40)
    a[[1, 2]] = [1.0, 3.0]
    b = np.zeros(40)
    b[30] = 1.0
    both = ppr(trans, np.stack([a, b], axis=1), 0.5, tol=1e-12)
    np.testing.assert_allclose(both[:, 0], ppr(trans, a, 0.5, tol=1e-12), atol=1e-12)
    np.testing.assert_allclose(both[:, 1], ppr(trans, b, 0.5, tol=1e-12), atol=1e-12)
    np.testing.assert_allclose(both.sum(axis=0), [1.0, 1.0])


def test_dangling_mass_returns_to_seeds() -> None:
    # 0 -> 1 -> 2, and 2 has no out-edge: its mass goes back to the seed, never lost
    csr = sp.csr_matrix((np.ones(2), ([0, 1], [1, 2])), shape=(3, 3))
    p = personalized_pagerank(csr, {0: 1.0}, 0.5, tol=1e-14, max_iter=500)
    assert p.sum() == pytest.approx(1.0)
    assert p[0] > p[1] > p[2] > 0


@pytest.mark.parametrize(
    ("seeds", "damping"),
    [({}, 0.5), ({0: 0.0}, 0.5), ({5: 1.0}, 0.5), ({0: -1.0}, 0.5), ({0: 1.0}, 1.0), ({0: 1.0}, 0.0)],
)
def test_bad_input_is_refused(seeds: dict[int, float], damping: float) -> None:
    csr = sp.csr_matrix(np.ones((3, 3)))
    with pytest.raises(ValidationError):
        personalized_pagerank(csr, seeds, damping)


def test_specificity_is_inverse_passage_count() -> None:
    node_chunk = sp.csr_matrix(np.array([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]]))
    np.testing.assert_allclose(specificity(node_chunk), [0.25, 1.0, 1.0])


def test_stable_top_keeps_the_exact_ranking_of_the_top_nodes() -> None:
    rng = np.random.default_rng(3)
    n = 3000  # a power-law-ish graph: preferential targets, as the scale graphs have
    src = rng.integers(0, n, 30_000)
    dst = (rng.pareto(1.2, 30_000) * 20).astype(np.int64) % n
    keep = src != dst
    csr = sp.csr_matrix((np.ones(keep.sum()), (src[keep], dst[keep])), shape=(n, n))
    und = (csr + csr.T).tocsr()
    trans = Transition.of(und)
    for seeds in ({5: 1.0, 900: 0.5}, {int(i): 1.0 for i in rng.integers(0, n, 40)}):
        exact = ppr(trans, seeds, 0.5, tol=1e-12)
        fast = ppr(trans, seeds, 0.5, stable_top=50, stable_rows=2000)
        assert list(np.argsort(-fast[:2000], kind="stable")[:20]) == list(np.argsort(-exact[:2000], kind="stable")[:20])
        assert 0 < np.abs(fast - exact).sum() < 0.01  # it stopped short of the L1 tolerance, close to it
    batched = ppr(trans, np.eye(n)[:, :2], 0.5, stable_top=50)  # many queries at once: the exact path
    np.testing.assert_allclose(batched[:, 0], ppr(trans, {0: 1.0}, 0.5), atol=1e-12)
