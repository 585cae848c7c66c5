"""Who may change a graph: the one server-side check every curation write passes through.

Until roles exist (a curator role may edit), an edit is authored by the local user: the name the caller gives
(the app's annotator name, the CLI's `--author`), else the operating-system user. Roles plug in here: this
function is the only place that decides, and every write path (engine, CLI, app) calls it.
"""

from __future__ import annotations

import getpass

from retrieval.errors import AccessDenied, ValidationError

MAX_AUTHOR_CHARS = 80


def local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container): still one local user
        return "local"


def authorise(author: str | None, action: str = "edit") -> str:
    """The author a change is recorded under, if they may make it (AccessDenied otherwise)."""
    name = " ".join(str(author or "").split()) or local_user()
    if len(name) > MAX_AUTHOR_CHARS:
        raise ValidationError(f"author name is {len(name)} characters; the limit is {MAX_AUTHOR_CHARS}")
    if "\x00" in name:
        raise ValidationError("author name contains a NUL character")
    if action not in ("edit", "undo", "redo", "review"):
        raise AccessDenied(f"unknown curation action {action!r}")
    return name
