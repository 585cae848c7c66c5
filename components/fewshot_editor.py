"""The Data page's few-shot editor (seed 004 FewShotManager): add, edit and delete a graph's worked examples."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from retrieval.access import Permit
from retrieval.answer.fewshot import LIMITS, FewShotManager
from retrieval.config import Settings
from retrieval.errors import RetrievalError
from ui_text import clean, md_literal, short

NEW = "➕ New example"


def render_fewshot_editor(cfg: Settings, graph: str, permit: Permit) -> None:
    """The examples of `graph` (kept across re-ingests of the same name) and a form to change them; a change is
    checked against `permit` on the server and logged (a role that may not edit sees the examples only)."""
    manager = FewShotManager(cfg.data_dir, graph)
    try:
        examples = manager.examples()
    except RetrievalError as exc:
        st.error(md_literal(exc), icon=":material/error:")
        return
    st.caption(f"Worked examples for graph **{md_literal(graph)}**: the Answer tab puts the two closest to a "
               "question into Gemini's prompt, and the Query page's natural-language box those with Cypher.")
    if examples:
        frame = pd.DataFrame([(clean(short(e.question, 120)), clean(short(e.answer, 160)), bool(e.cypher))
                              for e in examples], columns=["question", "answer", "Cypher"])
        st.dataframe(frame, hide_index=True, column_config={"Cypher": st.column_config.CheckboxColumn(width=70)})
    if not permit.allowed:
        st.caption(md_literal(permit.refusal))
    by_label = {f"{i}. {clean(short(e.question, 80))}": e for i, e in enumerate(examples, start=1)}
    pick = st.selectbox("Example", [NEW, *by_label], key=f"fewshot-pick-{graph}")
    chosen = by_label.get(pick)
    with st.form(key=f"fewshot-form-{graph}-{chosen.id if chosen else 'new'}"):
        question = st.text_input("Question", value=chosen.question if chosen else "", max_chars=LIMITS["question"])
        answer = st.text_area("Answer", value=chosen.answer if chosen else "", max_chars=LIMITS["answer"],
                              help="Written as the answer should read, with its facts")
        cypher = st.text_area("Cypher (optional)", value=chosen.cypher if chosen else "", max_chars=LIMITS["cypher"],
                              help="A read query answering the question: an example for natural language to Cypher")
        save, delete = st.columns(2)
        saved = save.form_submit_button("Save", type="primary", icon=":material/save:", help=permit.refusal or None)
        deleted = delete.form_submit_button("Delete", icon=":material/delete:", disabled=chosen is None,
                                            help=permit.refusal or None)
    try:
        if saved or deleted:
            permit.check(f"{'saved' if saved else 'deleted'} example {chosen.id if chosen else '(new)'}")
        if saved:
            if chosen is None:
                manager.add(question, answer, cypher)
            else:
                manager.update(chosen.id, question, answer, cypher)
            st.toast("Few-shot example saved.", icon=":material/check:")
        elif deleted and chosen is not None:
            manager.delete(chosen.id)
            st.toast("Few-shot example deleted.", icon=":material/check:")
        else:
            return
    except RetrievalError as exc:
        st.error(md_literal(exc), icon=":material/error:")
        return
    permit.record(f"{'saved' if saved else 'deleted'}: {short(question, 200)}")
    st.session_state.pop(f"fewshot-pick-{graph}", None)
    st.rerun()
