"""The Search page's Answer tab: an answer written from the shown result's evidence, with [n] citation links.

With GEMINI_API_KEY the answer streams in from Gemini; without one the tab says so and offers an extractive answer
(evidence sentences), labelled as such. The answer runs only on a click (tabs all run on every search) and is kept
for the session. Every string from data or the model reaches the page escaped.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from components.trace import render_warnings, timings_chart
from retrieval.answer.synthesis import NO_KEY, answer_question
from retrieval.config import Settings
from retrieval.errors import RetrievalError
from retrieval.graph.runtime import KG
from retrieval.models import Answer, Enhancements, Evidence, SearchResult
from ui_text import esc, md_literal, short

SWITCHES = {
    "graph_rerank": ("Graph rerank", "Order the facts by α·similarity + β·PageRank before numbering them."),
    "cross_encoder": ("Cross-encoder", "Score (question, fact) pairs with the cross-encoder; passes through with a "
                      "warning when the model cannot load."),
    "few_shot": ("Few-shot", "Put the graph's stored examples closest to the question into the prompt (Data page)."),
    "multi_doc": ("Multi-doc", "Add passages of the best-matching books as evidence and combine the books."),
}
_CSS = (
    ".kg-answer{font-size:1rem;line-height:1.65;margin:.2rem 0 .8rem}"
    ".kg-answer a.kg-cite{font-size:.72em;vertical-align:super;text-decoration:none;margin-left:1px;color:#3557c7}"
    ".kg-answer .kg-uncited{background:#fff3bf;border-bottom:2px dotted #e8590c}"
    ".kg-answer .kg-flag{font-size:.7em;color:#c92a2a;margin-left:3px;vertical-align:super}"
    ".kg-evidence{font-size:.9rem;list-style:none;padding-left:0;margin:0}"
    ".kg-evidence li{padding:4px 8px;border-radius:4px;margin:2px 0;scroll-margin-top:80px}"
    ".kg-evidence li.cited{background:#f1f4ff}.kg-evidence li:target{outline:2px solid #e8590c}"
    ".kg-evidence .n{font-weight:600;margin-right:6px}.kg-evidence .kind{font-size:.75em;padding:0 6px;"
    "border-radius:8px;background:#eef1f6;margin-right:6px}.kg-evidence .src{display:block;color:#6b7385;"
    "font-size:.85em}"
)


def answer_html(answer: Answer, anchor: str) -> str:
    """The answer's sentences with citation links to the evidence list below; uncited sentences and numbers that
    cite nothing are marked. `anchor` prefixes the element ids (letters, digits and '-' only)."""
    by_n = {e.n: e for e in answer.evidence}
    out = []
    for s in answer.sentences:
        body = esc(s.text)
        if not s.cited:
            body = (f'<span class="kg-uncited" title="this sentence cites no evidence">{body}</span>'
                    '<span class="kg-flag">uncited</span>')
        cites = "".join(f'<a class="kg-cite" href="#{anchor}-{n}" title="{esc(short(by_n[n].text, 240))}">[{n}]</a>'
                        for n in s.citations)
        bad = "".join(f'<span class="kg-flag" title="no evidence has this number">[{n}]?</span>' for n in s.invalid)
        out.append(body + cites + bad)
    cited = {e.n for e in answer.citations}
    items = "".join(_evidence_item(e, anchor, e.n in cited) for e in answer.evidence)
    return (f"<style>{_CSS}</style><div class='kg-answer'>{' '.join(out)}</div>"
            f"<ol class='kg-evidence'>{items}</ol>")


def _evidence_item(e: Evidence, anchor: str, cited: bool) -> str:
    source = f'<span class="src">{esc(e.source)}</span>' if e.source else ""
    kind = "fact" if e.kind == "fact" else "passage"
    return (f'<li id="{anchor}-{e.n}" class="{"cited" if cited else ""}"><span class="n">[{e.n}]</span>'
            f'<span class="kind">{kind}</span>{esc(short(e.text, 500))}{source}</li>')


def check_text(answer: Answer) -> str:
    """The citation check in one line."""
    n = len(answer.sentences)
    parts = [f"{n} sentence{'s' * (n != 1)}",
             "every one cites evidence" if not answer.uncited else f"{answer.uncited} cite nothing (marked)"]
    if answer.invalid_citations:
        parts.append("cited numbers with no evidence: " + ", ".join(f"[{i}]" for i in answer.invalid_citations))
    else:
        parts.append("every citation points to a retrieved item")
    return "Citation check: " + "; ".join(parts) + "."


def render_answer(answer: Answer, result: SearchResult, *, key: str) -> None:
    """The answer (labelled generated or extractive), its warnings, the evidence list and the answer's trace."""
    if answer.kind == "generated":
        st.markdown(f":blue-badge[:material/auto_awesome: generated] **Answer** by {md_literal(answer.model)}, "
                    "written only from the numbered evidence below")
    else:
        st.markdown(":orange-badge[:material/format_quote: extractive] **Extractive answer** — the evidence "
                    "sentences closest to the question, not generated text")
    # the tab already says once that Gemini is off; a warning is for what else changed this answer
    render_warnings([w for w in answer.warnings if w not in result.warnings and w != NO_KEY])
    st.html(answer_html(answer, f"ev-{key}"))
    st.caption(check_text(answer))
    with st.expander("Answer trace: use_enhancements, examples, timings"):
        rows = [(SWITCHES[k][0], v) for k, v in answer.enhancements.items() if k in SWITCHES]
        st.dataframe(pd.DataFrame(rows, columns=["switch", "what it did"]), hide_index=True)
        if answer.examples:
            st.markdown("Few-shot examples in the prompt: " + " · ".join(md_literal(q) for q in answer.examples))
        if answer.timings:
            st.html(timings_chart(answer.timings))


def switches(cfg_key: str = "answer-switch") -> Enhancements:
    """The four use_enhancements toggles (kept across searches)."""
    cols = st.columns(len(SWITCHES))
    values = {name: col.toggle(label, value=getattr(Enhancements(), name), help=tip, key=f"{cfg_key}-{name}")
              for col, (name, (label, tip)) in zip(cols, SWITCHES.items(), strict=True)}
    return Enhancements(**values)


def render_answer_tab(cfg: Settings, kg: KG, result: SearchResult, *, key: str,
                      cross_encoder: Callable[[], object]) -> None:
    """A button writes the answer (streamed with a key); the last answer of this result stays shown.
    `cross_encoder` gives the app's shared CrossEncoderReranker, asked for only when its switch is on."""
    if not cfg.gemini_enabled:
        st.info("Gemini is not configured (no GEMINI_API_KEY), so no answer can be written here. An extractive "
                "answer picks the evidence sentences closest to the question, each with its citation.",
                icon=":material/key_off:")
    enh = switches()
    label = "Write an answer with Gemini" if cfg.gemini_enabled else "Show an extractive answer"
    stored = st.session_state.get(f"answer-{key}")
    if st.button(label, key=f"answer-button-{key}", type="primary", icon=":material/auto_awesome:"):
        live = st.empty()
        try:
            with st.spinner("Writing the answer…"):
                stored = (enh, answer_question(
                    kg, result.query, result=result, settings=cfg, enhancements=enh,
                    on_text=lambda text: live.markdown(md_literal(text) + " ▌"),
                    cross_encoder=cross_encoder() if enh.cross_encoder else None))
        except RetrievalError as exc:
            st.error(f"No answer: {md_literal(exc)}", icon=":material/error:")
            return
        finally:
            live.empty()
        st.session_state[f"answer-{key}"] = stored
    if stored is None:
        st.caption("The answer cites the facts and passages of this result as [1], [2] …; each number links to "
                   "its evidence.")
        return
    used, answer = stored
    if used != enh:
        st.caption("The switches changed since this answer was written: press the button to write it again.")
    render_answer(answer, result, key=key)
