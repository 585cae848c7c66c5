"""CLI: `labels queries|pool|progress|import|agreement|adjudicate|export` and `eval-labels` (metrics per system
from hand labels, with bootstrap intervals and a paired test)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from
from retrieval.errors import NotFoundError, ValidationError
from retrieval.evaluation.labels import Label, LabelStore, normalize_query

QueriesOpt = Annotated[
    Path | None, typer.Option("--queries", help="query_id<TAB>text file (default: queries.tsv beside FILE)")
]
VersionOpt = Annotated[str | None, typer.Option("--graph-version", help="Graph version of the labels")]
SetOpt = Annotated[str | None, typer.Option("--set", help="Query set name (default: the only one)")]
ModesOpt = Annotated[str, typer.Option("--modes", help="all, or comma-separated: kg, vector, graph, hybrid, "
                                       "comprehensive, dual, multidoc")]
RerankersOpt = Annotated[str, typer.Option("--rerankers", help="all, off (no reranker system), or "
                                           "comma-separated: none, mmr, graph, cross_encoder, llm")]


def _active_version(data_dir: Path) -> str:
    from retrieval.graph import catalog

    try:
        return catalog.resolve(data_dir).version
    except NotFoundError:
        return ""


def _parse_ks(text: str) -> list[int]:
    try:
        ks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValidationError(f"--k: expected comma-separated integers, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise ValidationError(f"--k: cutoffs must be positive, got {text!r}")
    return ks


def _modes(text: str) -> list[str]:
    from retrieval.search.modes import MODES

    return list(MODES) if text.strip() == "all" else [m.strip() for m in text.split(",") if m.strip()]


def _rerankers(text: str) -> list[str] | None:
    """None: every reranker this configuration has; [] for `--rerankers off` (`none` is the no-rerank baseline)."""
    text = text.strip()
    if text == "all":
        return None
    return [] if text == "off" else [r.strip() for r in text.split(",") if r.strip()]


def _in_set(labels: Sequence[Label], texts: Sequence[str]) -> list[Label]:
    wanted = {normalize_query(t) for t in texts}
    return [lb for lb in labels if lb.query_text in wanted]


def _set_ids(store: LabelStore, set_name: str | None) -> dict[str, str]:
    """query text -> id of the named set, in set order ({} without a name)."""
    from retrieval.evaluation.querysets import get_query_set

    return {} if set_name is None else {q.text: q.query_id for q in get_query_set(store, set_name).queries}


def _bar(total: int, desc: str) -> Any:
    """A progress bar on stderr (stdout stays clean for --json)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="query", file=sys.stderr, leave=False)


def register(app: typer.Typer) -> None:
    labels_app = typer.Typer(help="Relevance labels: query sets, pools, grades, agreement, TREC qrels.",
                             no_args_is_help=True)
    queries_app = typer.Typer(help="Named query sets (queries.tsv or JSONL).", no_args_is_help=True)
    app.add_typer(labels_app, name="labels")
    labels_app.add_typer(queries_app, name="queries")

    @queries_app.command("import")
    def queries_import(
        file: Annotated[Path, typer.Argument(help="queries.tsv (query_id<TAB>text) or JSONL ({id, query|text|"
                                             "question})")],
        name: Annotated[str | None, typer.Option("--name", help="Set name (default: the file name)")] = None,
        replace: Annotated[bool, typer.Option("--replace", help="Replace a set of that name (drops its pools)")]
        = False,
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Import a query set, validated whole (file:line: field: reason) before anything is stored."""
        from retrieval.evaluation.querysets import import_queries

        with cli_errors():
            settings = settings_from(data_dir)
            store = LabelStore.in_data_dir(settings.data_dir)
            qs = import_queries(store, file, name, replace=replace, max_queries=settings.max_query_set)
            typer.echo(f"imported query set {qs.name!r}: {len(qs.queries)} queries into {store.path}")

    @queries_app.command("list")
    def queries_list(
        as_json: Annotated[bool, typer.Option("--json")] = False, data_dir: Path | None = DataDirOpt,
    ) -> None:
        """The stored query sets."""
        from retrieval.evaluation.querysets import list_query_sets

        with cli_errors():
            sets = list_query_sets(LabelStore.in_data_dir(settings_from(data_dir).data_dir))
        if as_json:
            echo_json([{"name": s.name, "queries": n, "source": s.source, "created_at": s.created_at}
                       for s, n in sets])
            return
        for s, n in sets:
            typer.echo(f"{s.name}\t{n} queries\t{s.source}\t{s.created_at}")
        if not sets:
            typer.echo("no query sets: run `labels queries import FILE`")

    @labels_app.command("pool")
    def labels_pool(
        depth: Annotated[int, typer.Option("--depth", help="Top k of each system pooled (1-50)")] = 10,
        modes: ModesOpt = "all",
        rerankers: RerankersOpt = "all",
        set_name: SetOpt = None,
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Pool a query set (TREC style): the union of every mode's and reranker's top k per query, stored for
        grading on the active graph's version."""
        from retrieval.evaluation.pooling import build_pool
        from retrieval.evaluation.querysets import get_query_set
        from retrieval.graph.runtime import open_kg

        with cli_errors():
            settings = settings_from(data_dir)
            store = LabelStore.in_data_dir(settings.data_dir)
            qs = get_query_set(store, set_name)
            kg = open_kg(settings)
            bar = _bar(len(qs.queries), f"pool {qs.name}")
            try:
                info = build_pool(store, kg, qs, depth, _modes(modes), _rerankers(rerankers),
                                  progress=lambda n: bar.update(1))
            finally:
                bar.close()
                kg.close()
        typer.echo(f"pooled {info.items} items for {info.queries} queries of {info.set_name!r} at depth {info.depth} "
                   f"on graph version {info.graph_version} from {len(info.systems)} systems: "
                   f"{', '.join(info.systems)}")
        for w in info.warnings:
            typer.echo(f"warning: {w}", err=True)

    @labels_app.command("progress")
    def labels_progress(
        annotator: Annotated[str, typer.Option("--annotator", help="Whose progress ('' anonymous)")] = "",
        set_name: SetOpt = None,
        as_json: Annotated[bool, typer.Option("--json")] = False,
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Labeled / pooled per query and overall for an annotator, and where they resume."""
        from retrieval.evaluation.pooling import next_item, progress
        from retrieval.evaluation.querysets import get_query_set

        with cli_errors():
            store = LabelStore.in_data_dir(settings_from(data_dir).data_dir)
            name = get_query_set(store, set_name).name
            done = progress(store, name, annotator)
            resume = next_item(store, name, annotator)
        if as_json:
            echo_json({"progress": done, "next": resume})
            return
        for q in done.queries:
            typer.echo(f"{q.query_id:<12}{q.labeled:>4}/{q.pooled:<4} {q.query[:90]}")
        where = f"resume at #{resume.position + 1} ({resume.query_id}, {resume.item_id})" if resume else "all graded"
        typer.echo(f"{done.annotator or '(anonymous)'}: {done.labeled}/{done.pooled} graded; {where}")

    @labels_app.command("import")
    def labels_import(
        file: Annotated[Path, typer.Argument(help="TREC qrels: `query_id 0 item_id grade` per line")],
        queries: QueriesOpt = None,
        set_name: Annotated[str | None, typer.Option("--set", help="Resolve query ids through this query set")]
        = None,
        graph_version: VersionOpt = None,
        annotator: Annotated[str, typer.Option("--annotator", help="Whose grades these are ('adjudicated': "
                                               "adjudications)")] = "import",
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Import graded labels (0-3) from TREC qrels (default version: the active graph's); all-or-nothing."""
        from retrieval.evaluation.querysets import get_query_set
        from retrieval.evaluation.trec import import_qrels

        with cli_errors():
            settings = settings_from(data_dir)
            version = _active_version(settings.data_dir) if graph_version is None else graph_version
            store = LabelStore.in_data_dir(settings.data_dir)
            ids = get_query_set(store, set_name).texts() if set_name and queries is None else None
            n = import_qrels(store, file, queries, queries=ids, graph_version=version, annotator=annotator)
            typer.echo(f"imported {n} labels by {annotator or '(anonymous)'!s} (graph version {version or '-'}) "
                       f"into {store.path}")

    @labels_app.command("agreement")
    def labels_agreement(
        as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
        set_name: Annotated[str | None, typer.Option("--set", help="Only the queries of this set")] = None,
        graph_version: VersionOpt = None,
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Cohen's kappa per pair of annotators, Krippendorff's alpha (ordinal) over all, and the disagreements."""
        from retrieval.evaluation.agreement import agreement
        from retrieval.evaluation.pooling import stored_pool
        from retrieval.evaluation.querysets import get_query_set

        with cli_errors():
            store = LabelStore.in_data_dir(settings_from(data_dir).data_dir)
            labels = store.all_labels(graph_version)
            texts: dict[tuple[str, str], str] = {}
            ids: dict[str, str] = {}
            if set_name is not None:
                qs = get_query_set(store, set_name)
                labels = _in_set(labels, [q.text for q in qs.queries])
                ids = {q.text: q.query_id for q in qs.queries}
                try:
                    texts = {(it.query, it.item_id): it.text for it in stored_pool(store, qs.name, graph_version)[1]}
                except NotFoundError:
                    pass  # not pooled yet: disagreements are listed without the item text
            report = agreement(labels, graph_version, texts, ids)
        if as_json:
            echo_json(report)
            return
        typer.echo(f"annotators: {', '.join(a or '(anonymous)' for a in report.annotators) or 'none'}; "
                   f"{report.items} items graded by two or more")
        for p in report.pairs:
            typer.echo(f"  {p.a} / {p.b}: {p.items} shared items, agreement {_num(p.observed)}, "
                       f"Cohen's kappa {_num(p.kappa)}, quadratic-weighted kappa {_num(p.weighted_kappa)}")
        typer.echo(f"Krippendorff's alpha (ordinal, all annotators): {_num(report.alpha_ordinal)}")
        for note in report.notes:
            typer.echo(f"note: {note}")
        typer.echo(f"{len(report.disagreements)} disagreements:")
        for d in report.disagreements:
            grades = ", ".join(f"{a}={g}" for a, g in d.grades.items())
            outcome = f"adjudicated {d.adjudicated}" if d.adjudicated is not None else (
                f"resolves to {d.resolved}" if d.resolved is not None else "UNRESOLVED (tie)")
            typer.echo(f"  {d.query_id} {d.item_id}: {grades} -> {outcome}  | {d.query[:60]}")

    @labels_app.command("adjudicate")
    def labels_adjudicate(
        query: Annotated[str, typer.Argument(help="The query id (from agreement or the set) or its text")],
        item_id: Annotated[str, typer.Argument(help="The item id")],
        grade: Annotated[int, typer.Argument(help="The decided grade, 0-3")],
        set_name: SetOpt = None,
        graph_version: VersionOpt = None,
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Settle a disagreement: a label by the reserved annotator `adjudicated`, which wins over every vote."""
        from retrieval.evaluation.labels import ADJUDICATED, query_id
        from retrieval.evaluation.querysets import get_query_set, list_query_sets

        with cli_errors():
            settings = settings_from(data_dir)
            store = LabelStore.in_data_dir(settings.data_dir)
            known = {lb.query_text for lb in store.all_labels()}
            texts = {query_id(t): t for t in known}
            if set_name is not None or len(list_query_sets(store)) == 1:
                texts |= get_query_set(store, set_name).texts()
            text = texts.get(query) or normalize_query(query)
            if text not in known:
                raise NotFoundError(f"no labels for query {query[:80]!r}: give a query id from `labels agreement` "
                                    "(with --set for a set's ids) or the query text")
            version = _active_version(settings.data_dir) if graph_version is None else graph_version
            label = store.put_label(text, item_id, grade, graph_version=version, annotator=ADJUDICATED)
        typer.echo(f"adjudicated {item_id} = {label.grade} for {label.query_text[:80]!r}")

    @labels_app.command("export")
    def labels_export(
        format: Annotated[str, typer.Option("--format", help="qrels (runs: eval-labels --runs-out)")] = "qrels",
        out: Annotated[Path, typer.Option("--out", help="Directory for qrels.txt and queries.tsv")] = Path("."),
        annotator: Annotated[str | None, typer.Option("--annotator", help="One annotator's labels only")] = None,
        adjudicated: Annotated[bool, typer.Option("--adjudicated", help="One grade per item by the adjudication "
                                                  "rule (the default)")] = False,
        include_ties: Annotated[bool, typer.Option("--include-ties", help="Keep unadjudicated even splits at "
                                                   "their lower grade")] = False,
        set_name: Annotated[str | None, typer.Option("--set", help="Only this set's queries, under its ids")]
        = None,
        graph_version: VersionOpt = None,
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Export labels as TREC qrels plus queries.tsv: one annotator's, or adjudicated (explicit adjudication,
        else the annotators' consensus; even splits left out unless --include-ties)."""
        from retrieval.evaluation.consensus import resolve_labels
        from retrieval.evaluation.trec import QRELS_FILE, QUERIES_FILE, export_qrels

        with cli_errors():
            if format != "qrels":
                raise ValidationError(f"--format: only 'qrels' is supported, got {format!r}")
            if annotator is not None and adjudicated:
                raise ValidationError("--annotator and --adjudicated exclude each other")
            store = LabelStore.in_data_dir(settings_from(data_dir).data_dir)
            labels = store.all_labels(graph_version, annotator)
            ids = _set_ids(store, set_name)
            if ids:
                labels = _in_set(labels, list(ids))
            labels, ties = resolve_labels(labels, include_ties=include_ties)
            n = export_qrels(labels, out / QRELS_FILE, out / QUERIES_FILE, ids)
        who = f"annotator {annotator or '(anonymous)'}" if annotator is not None else "adjudicated"
        typer.echo(f"wrote {n} labels ({who}) to {out / QRELS_FILE} and {out / QUERIES_FILE}")
        if ties and annotator is None:
            what = "exported at the lower grade" if include_ties else "left out (adjudicate them or --include-ties)"
            typer.echo(f"{len(ties)} unresolved ties {what}", err=True)

    @app.command("eval-labels")
    def eval_labels(
        as_json: Annotated[bool, typer.Option("--json", help="Print the full report as JSON")] = False,
        ks: Annotated[str, typer.Option("--k", help="Cutoffs, e.g. 5,10")] = "10",
        compare: Annotated[str | None, typer.Option("--compare", help="Two systems, e.g. graph,vector: "
                                                    "paired randomization test per measure (p_value)")] = None,
        modes: ModesOpt = "all",
        rerankers: RerankersOpt = "all",
        set_name: Annotated[str | None, typer.Option("--set", help="Only the queries of this set")] = None,
        annotator: Annotated[str | None, typer.Option("--annotator", help="One annotator's labels (default: "
                                                      "adjudicated)")] = None,
        include_ties: Annotated[bool, typer.Option("--include-ties")] = False,
        bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples")] = 1000,
        seed: Annotated[int, typer.Option("--seed")] = 0,
        graph_version: VersionOpt = None,
        runs_out: Annotated[Path | None, typer.Option("--runs-out", help="Write a TREC run per system here")] = None,
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Run each labelled query through every mode and reranker; nDCG@k, P@k, R@k, MRR per system with 95%
        bootstrap intervals, unjudged counts, lift over no rerank and (--compare) a paired test."""
        from retrieval.evaluation.evaluate import evaluate
        from retrieval.evaluation.follow import followed, gone_note
        from retrieval.evaluation.pooling import RERANK_PREFIX, choose_rerankers, run_systems
        from retrieval.evaluation.trec import export_run
        from retrieval.graph.runtime import open_kg

        with cli_errors():
            cutoffs = _parse_ks(ks)
            pair = None
            if compare is not None:
                parts = [p.strip() for p in compare.split(",")]
                if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
                    raise ValidationError(f"--compare: expected two different systems a,b, got {compare!r}")
                pair = (parts[0], parts[1])
            if bootstrap < 0:
                raise ValidationError(f"--bootstrap must be >= 0, got {bootstrap}")
            settings = settings_from(data_dir)
            store = LabelStore.in_data_dir(settings.data_dir)
            labels = store.all_labels(graph_version, annotator)
            ids = _set_ids(store, set_name)
            if ids:
                labels = _in_set(labels, list(ids))
            if not labels:
                raise NotFoundError(f"no labels in {settings.data_dir}: grade in the app or import qrels")
            kg = open_kg(settings)
            # grades follow the graph: items a curation merged count for the item that took them over
            labels, gone = followed(settings.data_dir, kg.name, labels)
            queries = sorted({lb.query_text for lb in labels})
            try:
                chosen, notes = choose_rerankers(kg, _rerankers(rerankers))
                if gone:
                    notes = [*notes, gone_note(gone)]
                bar = _bar(len(queries), "eval-labels")
                try:
                    runs = run_systems(kg, queries, max(cutoffs), _modes(modes), chosen,
                                       progress=lambda n: bar.update(1))
                finally:
                    bar.close()
            finally:
                kg.close()
            report = evaluate(labels, runs.ids(), cutoffs, RERANK_PREFIX + "none", include_ties=include_ties,
                              bootstrap=bootstrap, seed=seed, compare=pair)
            report = report.model_copy(update={"warnings": (*notes, *runs.warnings, *report.warnings)})
            if runs_out is not None:
                for name, ranking in runs.ids().items():
                    export_run(ranking, runs_out / f"run.{name.replace(':', '-')}.txt", name, ids)
        if as_json:
            echo_json(report)
            return
        typer.echo(report.table())
        for q in report.skipped_queries:
            typer.echo(f"skipped (no relevant label): {q}")
        for w in report.warnings:
            typer.echo(f"warning: {w}", err=True)


def _num(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"
