"""The audit log for admins: who did what and when, allowed or refused; filtered by age, person, action and outcome,
and downloadable as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pandas as pd
import streamlit as st

from retrieval.access import AuditEntry
from ui_text import clean

AGES = {"Last hour": timedelta(hours=1), "Last day": timedelta(days=1), "Last week": timedelta(days=7),
        "Everything": None}
SHOWN = 2000  # newest entries drawn in the table (the download holds every entry of the chosen age)


def entries_frame(entries: Sequence[AuditEntry]) -> pd.DataFrame:
    """The entries as text cells, newest first (every string cleaned; the data grid shows it as text)."""
    return pd.DataFrame([{"time (UTC)": e.at[:19].replace("T", " "), "who": clean(e.actor), "action": clean(e.action),
                          "outcome": e.outcome, "graph": clean(e.graph), "tenant": clean(e.tenant),
                          "detail": clean(e.detail)} for e in reversed(entries)],
                        columns=["time (UTC)", "who", "action", "outcome", "graph", "tenant", "detail"])


def render_audit(read: Callable[[str | None], list[AuditEntry]]) -> None:
    """Filters, the table, and the JSON download; `read(since)` reads the log from an ISO time (None: all)."""
    cols = st.columns([1.2, 2, 2, 1.2], vertical_alignment="bottom")
    age = cols[0].selectbox("Since", list(AGES), index=1, key="audit-age")
    span = AGES[age]
    entries = read(None if span is None else (datetime.now(UTC) - span).isoformat(timespec="microseconds"))
    who = cols[1].multiselect("Who", sorted({e.actor for e in entries}), key="audit-who")
    what = cols[2].multiselect("Action", sorted({e.action for e in entries}), key="audit-what")
    outcome = cols[3].selectbox("Outcome", ["all", "ok", "refused"], key="audit-outcome")
    chosen = [e for e in entries if (not who or e.actor in who) and (not what or e.action in what)
              and outcome in ("all", e.outcome)]
    refused = sum(e.outcome == "refused" for e in chosen)
    st.caption(f"{len(chosen):,} entries ({refused:,} refused) · oldest first in the download, newest first below"
               + (f" · the newest {SHOWN:,} shown" if len(chosen) > SHOWN else ""))
    st.dataframe(entries_frame(chosen[-SHOWN:]), hide_index=True, key="audit-table",
                 column_config={"detail": st.column_config.TextColumn(width="large")})
    st.download_button("audit.json", json.dumps([e.model_dump() for e in chosen], ensure_ascii=False, indent=1),
                       file_name="audit.json", mime="application/json", icon=":material/download:",
                       disabled=not chosen, on_click="ignore")
