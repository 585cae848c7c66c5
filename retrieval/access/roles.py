"""Roles and the actions they allow: viewer < annotator < curator < admin; each action needs one role on one scope
(a graph, a graph-memory tenant, or the whole site = every graph, `*`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from retrieval.errors import ConfigError

Scope = Literal["graph", "tenant", "site"]
EVERY = "*"  # in the access file: every graph / every tenant


class Role(IntEnum):
    """Each role holds every right of the roles below it."""

    VIEWER = 1
    ANNOTATOR = 2
    CURATOR = 3
    ADMIN = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: object) -> Role:
        names = ", ".join(r.label for r in cls)
        if not isinstance(text, str) or text.strip().upper() not in cls.__members__:
            raise ConfigError(f"unknown role {text!r}; valid: {names}")
        return cls[text.strip().upper()]


@dataclass(frozen=True)
class Action:
    """What an action needs (a role on a scope) and how a refusal names it."""

    role: Role
    scope: Scope
    what: str


# The one table of actions. Pages, components, the graph memory and the CLI name these; `authorize` reads them.
ACTIONS: dict[str, Action] = {
    "view": Action(Role.VIEWER, "graph", "Opening a graph (search, paths, communities, Rerank Inspector)"),
    "console": Action(Role.VIEWER, "graph", "Querying a graph on the console"),
    "memory_read": Action(Role.VIEWER, "tenant", "Reading graph memory"),
    "grade": Action(Role.ANNOTATOR, "graph", "Grading"),
    "import": Action(Role.CURATOR, "graph", "Importing a graph"),
    "label_sets": Action(Role.CURATOR, "graph", "Importing query sets, qrels and building pools"),
    "fewshot": Action(Role.CURATOR, "graph", "Editing few-shot examples"),
    "edit": Action(Role.CURATOR, "graph", "Editing a graph"),
    "memory_write": Action(Role.CURATOR, "tenant", "Saving to graph memory"),
    "delete": Action(Role.ADMIN, "graph", "Deleting a graph"),
    "activate": Action(Role.ADMIN, "graph", "Making a graph active for everyone"),
    "adjudicate": Action(Role.ADMIN, "graph", "Adjudicating disagreements"),
    "memory_delete": Action(Role.ADMIN, "tenant", "Deleting a stored graph"),
    "audit": Action(Role.ADMIN, "site", "Reading the audit log"),
}


def action(name: str) -> Action:
    """The action `name`; ConfigError listing the valid names for any other."""
    if name not in ACTIONS:
        raise ConfigError(f"unknown action {name!r}; valid: {', '.join(ACTIONS)}")
    return ACTIONS[name]
