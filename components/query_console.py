"""The Query page's console: natural language to Cypher (with a key), example queries from the graph's schema,
the editor with a JSON parameter box, results as a table and as a graph, and the session's history.

Queries run read-only (explore.console): the engine refuses writes. Cells reach the page as text in a data grid
and graph labels through render_graph, so nothing from the graph is ever interpreted as markup.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pandas as pd
import streamlit as st

from components.graph_view import GraphMarks, render_graph
from retrieval.access import Permit
from retrieval.answer.fewshot import FewShotManager
from retrieval.config import Settings
from retrieval.errors import AccessDenied, RetrievalError, ValidationError
from retrieval.explore import console
from retrieval.graph.catalog import GraphHandle
from retrieval.graph.runtime import KG
from retrieval.models import QueryResult
from retrieval.stores.console import ConsoleError
from ui_records import LiveGraph
from ui_text import clean, md_code, md_literal, short

QUERY, PARAMS, HISTORY, RUN_NOW = "console-query", "console-params", "console-history", "console-run-now"
HISTORY_SIZE = 30
CELL_CHARS = 300
ICONS = {"refused": ":material/block:", "timeout": ":material/timer_off:"}


def _load(query: str, params: dict[str, Any]) -> None:
    """Put a query and its parameters into the editor (a callback: runs before the widgets are drawn)."""
    st.session_state[QUERY] = query
    st.session_state[PARAMS] = json.dumps(params, ensure_ascii=False) if params else ""


def vocabulary(kg: KG) -> console.Vocabulary:
    return kg.index.cached("console_vocabulary", lambda: console.vocabulary(kg))


def render_examples(cfg: Settings, kg: KG) -> None:
    examples = console.example_queries(cfg.graph_backend, vocabulary(kg))
    by_title = {e.title: e for e in examples}

    def pick() -> None:
        chosen = by_title.get(st.session_state.get("console-example") or "")
        if chosen is not None:
            _load(chosen.query, chosen.params)

    st.selectbox("Start from an example built from this graph's schema", list(by_title), index=None,
                 placeholder="Example queries…", key="console-example", on_change=pick)


def render_natural_language(cfg: Settings, kg: KG, handle: GraphHandle) -> None:
    """Question → Cypher with Gemini: drafted, validated by the engine's plan, put in the editor to check."""
    if not cfg.gemini_enabled:
        st.caption("Natural language to Cypher needs Gemini: GEMINI_API_KEY is not set. Write Cypher below or "
                   "start from an example.")
        return
    ask, go = st.columns([5, 1], vertical_alignment="bottom")
    question = ask.text_input("Ask in plain English; Gemini drafts the Cypher for you to check before it runs",
                              key="console-nl", max_chars=1000)
    if go.button("Draft Cypher", icon=":material/auto_awesome:"):
        from retrieval.graph.runtime import embedding_cache

        try:
            if not question.strip():
                raise ValidationError("type a question first")
            shots = FewShotManager(cfg.data_dir, handle.name).select(question, embedding_cache(kg), 3,
                                                                     with_cypher=True)
            draft = console.draft_cypher(cfg, question, cfg.graph_backend, vocabulary(kg), [e for e, _ in shots])
        except RetrievalError as exc:
            st.error(f"No draft: {md_literal(exc)}", icon=":material/error:")
            return
        _load(draft.cypher, draft.param_dict())
        try:
            console.explain(cfg, handle, draft.cypher, draft.param_dict())
            st.session_state["console-draft"] = ("ok", draft.explanation)
        except RetrievalError as exc:
            st.session_state["console-draft"] = ("error", str(exc))
    note = st.session_state.get("console-draft")
    if note and note[0] == "ok":
        st.success(f"Drafted and checked with the engine's plan (not run): {md_literal(note[1])}",
                   icon=":material/fact_check:")
    elif note:
        st.warning(f"The draft does not pass the engine's check; edit it before running: {md_literal(note[1])}",
                   icon=":material/warning:")


def _display(value: Any) -> Any:
    if isinstance(value, dict) and "label" in value and "properties" in value:
        props = value["properties"]
        name = next((props[k] for k in ("name", "title", "id") if props.get(k) is not None), "")
        return clean(short(f"(:{value['label']} {json.dumps(name, ensure_ascii=False)})", CELL_CHARS))
    if isinstance(value, dict) and "type" in value and "properties" in value:
        rel = value["properties"].get("relation_type") or value["type"]
        return clean(short(f"[:{value['type']} {rel}]", CELL_CHARS))
    if isinstance(value, (dict, list)):
        return clean(short(json.dumps(value, ensure_ascii=False), CELL_CHARS))
    return clean(value) if isinstance(value, str) else value


def result_frame(result: QueryResult) -> pd.DataFrame:
    """Rows as a table: nodes as `(:Label "name")`, relationships as `[:TYPE name]`, the rest as JSON text; a column
    of mixed kinds becomes text (a data grid column has one type)."""
    frame = pd.DataFrame([[_display(v) for v in row] for row in result.rows],
                         columns=[clean(c) for c in result.columns] or None)
    for col in frame.columns:
        kinds = {type(v) for v in frame[col] if v is not None}
        if len(kinds) > 1 and not kinds <= {int, float}:
            frame[col] = [None if v is None else clean(v) for v in frame[col]]
    return frame


def render_result(result: QueryResult, live: LiveGraph) -> None:
    st.markdown(f"**{result.showing}** · {result.elapsed_ms:.0f} ms · read-only {md_literal(result.backend)} · "
                f"time limit {result.timeout_ms / 1000:g} s · at most {result.max_rows:,} rows shown")
    graph = result.subgraph
    if graph.nodes:
        left, right = st.columns([1, 1], gap="medium")
        with left:
            st.dataframe(result_frame(result), hide_index=True, height=min(560, 40 + 35 * len(result.rows)))
        with right:
            render_graph(graph, GraphMarks(), max_nodes=150, height=520, live=live, key="kg-query", stem="query")
    else:
        st.dataframe(result_frame(result), hide_index=True)
        st.caption("No nodes or relationships in these columns: return `a, r, b` or a path `p` to see them drawn.")


def run(cfg: Settings, handle: GraphHandle, query: str, params_text: str, permit: Permit | None = None) -> None:
    """Run the editor's query; the outcome (result or message) goes into the session's history. `permit` (team
    mode) is checked first, and the query is logged with its outcome."""
    entry: dict[str, Any] = {"query": query, "params": params_text, "at": time.strftime("%H:%M:%S")}
    try:
        if permit is not None:
            permit.check(query)
        params = console.parse_params(params_text)
        result = console.run_query(cfg, handle, query, params)
        entry.update(status=result.showing, result=result)
    except ConsoleError as exc:
        entry.update(status=exc.kind, error=str(exc))
    except RetrievalError as exc:
        entry.update(status="refused" if isinstance(exc, AccessDenied) else "error", error=str(exc))
    if permit is not None and permit.allowed:
        permit.record(f"{entry['status']}: {query}" + (f" · params {params_text}" if params_text.strip() else ""))
    history = st.session_state.setdefault(HISTORY, [])
    history.insert(0, entry)
    del history[HISTORY_SIZE:]


def _again(query: str, params_text: str, run_now: bool) -> None:
    st.session_state[QUERY], st.session_state[PARAMS] = query, params_text
    st.session_state[RUN_NOW] = run_now


def render_history() -> None:
    history = st.session_state.get(HISTORY, [])
    if not history:
        return
    with st.expander(f"History of this session ({len(history)})", icon=":material/history:"):
        for i, h in enumerate(history):
            text, edit, again = st.columns([8, 1, 1], vertical_alignment="center")
            text.markdown(f"`{h['at']}` · {md_literal(h['status'])} · {md_code(short(h['query'], 160))}")
            edit.button("Edit", key=f"console-edit-{i}", on_click=_again, args=(h["query"], h["params"], False),
                        help="Put this query and its parameters back into the editor")
            again.button("Run", key=f"console-again-{i}", on_click=_again, args=(h["query"], h["params"], True),
                         help="Run this query again")


def render_console(cfg: Settings, live: LiveGraph, handle: GraphHandle, permit: Permit | None = None) -> None:
    """Question to Cypher, examples, the editor, the last outcome (its graph drawn live) and the history; `permit`
    checks and logs each query (team mode)."""
    render_natural_language(cfg, live.kg, handle)
    render_examples(cfg, live.kg)
    # placeholders that read as hints, not as a query or values already filled in
    query = st.text_area("Cypher (one read statement)", key=QUERY, height=130,
                         placeholder="Type a read statement, e.g. MATCH (a:Entity)-[r]->(b:Entity) RETURN a, r, b "
                                     "LIMIT 25 — or start from an example above")
    params = st.text_area("Parameters (a JSON object; sent as query parameters, never pasted into the text)",
                          key=PARAMS, height=68,
                          placeholder="Optional: a JSON object for the query's $names, e.g. {\"name\": \"…\"}")
    clicked = st.button("Run", type="primary", icon=":material/play_arrow:")  # an empty query gets its message
    if clicked or st.session_state.pop(RUN_NOW, False):
        run(cfg, handle, query, params, permit)
    last = (st.session_state.get(HISTORY) or [None])[0]
    if last is not None and "error" in last:
        st.error(md_literal(last["error"]), icon=ICONS.get(last["status"], ":material/error:"))
    elif last is not None:
        render_result(last["result"], live)
    render_history()
