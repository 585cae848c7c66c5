"""Metrics from labels with ir-measures, checked against hand-computed values; reranker runs end to end."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from retrieval.embedding import Embedder
from retrieval.evaluation.evaluate import evaluate, evaluate_rerankers, measures_for
from retrieval.evaluation.labels import make_label, query_id
from retrieval.models import VerbalizedFact
from retrieval.rerank import CrossEncoderReranker, MMRReranker, NoRerank, Reranker

LABELS = [
    make_label("q one", "a", 3), make_label("q one", "b", 0), make_label("q one", "c", 1), make_label("q one", "d", 2),
    make_label("q two", "x", 2),
    make_label("q three", "z", 0),  # no relevant item: skipped
]
RUNS = {
    "none": {"q one": ["b", "a", "c"], "q two": ["y", "x"]},
    "better": {"q one": ["a", "c", "b"], "q two": ["x", "y"], "q unlabelled": ["a"]},
    "empty": {},
}


def dcg(gains: Sequence[int]) -> float:
    return sum(g / math.log2(rank + 1) for rank, g in enumerate(gains, start=1))


def test_hand_computed_metrics_and_lift() -> None:
    report = evaluate(LABELS, RUNS, ks=[3])
    assert report.measures == ("nDCG@3", "P@3", "R@3", "RR")
    assert report.skipped_queries == ("q three",)
    per = {(r.reranker, r.query): r.values for r in report.per_query}
    ideal_one = dcg([3, 2, 1])
    # q one, none: b(0) a(3) c(1); relevant = a, c, d
    assert per["none", "q one"]["nDCG@3"] == pytest.approx(dcg([0, 3, 1]) / ideal_one)
    assert per["none", "q one"]["P@3"] == pytest.approx(2 / 3)
    assert per["none", "q one"]["R@3"] == pytest.approx(2 / 3)
    assert per["none", "q one"]["RR"] == pytest.approx(1 / 2)
    assert per["better", "q one"]["nDCG@3"] == pytest.approx(dcg([3, 1, 0]) / ideal_one)
    assert per["better", "q one"]["RR"] == 1.0
    # q two: the one relevant item at rank 2, then at rank 1
    assert per["none", "q two"]["nDCG@3"] == pytest.approx(dcg([0, 2]) / dcg([2]))
    assert per["none", "q two"]["P@3"] == pytest.approx(1 / 3)
    assert per["better", "q two"]["R@3"] == 1.0
    # a reranker that returns nothing scores 0 on every scored query
    assert all(v == 0.0 for (name, _), vals in per.items() if name == "empty" for v in vals.values())
    means = {m.reranker: m for m in report.means}
    assert means["none"].n_queries == 2
    assert means["none"].values["RR"] == pytest.approx((0.5 + 0.5) / 2)
    assert means["better"].values["RR"] == pytest.approx(1.0)
    lift = {(lf.reranker, lf.measure): lf for lf in report.lift}
    assert lift["better", "RR"].delta == pytest.approx(0.5)
    assert lift["better", "RR"].relative == pytest.approx(1.0)
    assert lift["empty", "P@3"].delta == pytest.approx(-0.5)
    assert ("none", "RR") not in lift
    assert any("1 ranked queries have no labels" in w for w in report.warnings)
    table = report.table()
    assert "better" in table and "+0.5000" in table
    assert report.per_query[0].query_id == query_id(report.per_query[0].query)


def test_cutoffs_and_missing_baseline() -> None:
    assert measures_for([10, 5, 5]) == ["nDCG@5", "P@5", "R@5", "nDCG@10", "P@10", "R@10", "RR"]
    with pytest.raises(ValueError):
        measures_for([0])
    report = evaluate(LABELS, {"better": RUNS["better"]}, ks=[1, 3])
    assert report.lift == () and any("no 'none' run" in w for w in report.warnings)
    per = {(r.reranker, r.query): r.values for r in report.per_query}
    assert per["better", "q one"]["P@1"] == 1.0 and per["better", "q one"]["R@1"] == pytest.approx(1 / 3)


def test_cli_eval_labels_checks_its_input(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from retrieval.cli.labels import register

    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["eval-labels", "--data-dir", str(tmp_path)])
    assert res.exit_code == 2 and "no labels" in res.output
    res = CliRunner().invoke(app, ["eval-labels", "--k", "5,x", "--data-dir", str(tmp_path)])
    assert res.exit_code == 2 and "--k" in res.output


def test_rerankers_rerun_on_each_labelled_query(embedder: Embedder, tmp_path: Path) -> None:
    pools = {
        "capital of France": [
            VerbalizedFact(id="f-banana", type="global", text="Bananas are yellow fruit."),
            VerbalizedFact(id="f-paris", type="global", text="Paris is the capital of France."),
            VerbalizedFact(id="f-paris2", type="global", text="The capital of France is Paris."),
            VerbalizedFact(id="f-lyon", type="global", text="Lyon is a large city in France."),
        ],
        "who wrote Hamlet": [
            VerbalizedFact(id="h-moon", type="local", text="The Moon orbits the Earth."),
            VerbalizedFact(id="h-shakes", type="local", text="Hamlet was written by William Shakespeare."),
        ],
    }
    calls: list[str] = []

    def pool(query: str) -> list[VerbalizedFact]:
        calls.append(query)
        return pools[query]

    labels = [make_label("capital of France", "f-paris", 3), make_label("capital of France", "f-paris2", 2),
              make_label("capital of France", "f-banana", 0), make_label("who wrote Hamlet", "h-shakes", 3)]
    rerankers: dict[str, Reranker] = {
        "none": NoRerank(), "mmr": MMRReranker(embedder, lambda_=1.0),
        "cross_encoder": CrossEncoderReranker(str(tmp_path / "no-model"), local_files_only=True),
    }
    report, runs = evaluate_rerankers(labels, pool, rerankers, ks=[2])
    assert sorted(calls) == ["capital of France", "who wrote Hamlet"]  # one retrieval per query
    assert runs.runs["none"]["who wrote Hamlet"] == ["h-moon", "h-shakes"]
    assert runs.runs["mmr"]["who wrote Hamlet"][0] == "h-shakes"
    assert len(runs.runs["cross_encoder"]["capital of France"]) == 2  # passthrough, cut to top_k by the runner
    means = {m.reranker: m.values for m in report.means}
    assert means["mmr"]["RR"] == 1.0 and means["none"]["RR"] == pytest.approx(0.5)
    assert means["cross_encoder"] == means["none"]
    assert any(w.startswith("cross_encoder: Cross-encoder ") and "results keep their order. (x2)" in w
               for w in report.warnings)
