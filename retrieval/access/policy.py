"""Who may do what: the access file (`KG_ACCESS_FILE`, TOML) grants roles to users (by e-mail or OIDC subject) and to
groups (from a configurable ID-token claim) per graph and per graph-memory tenant; `authorize` is the one check.

    groups_claim = "groups"          # the ID-token claim holding the user's groups (a list or one string)

    [[grant]]
    role = "annotator"               # viewer < annotator < curator < admin
    users = ["alice@example.org"]    # verified e-mail (ASCII case ignored) or OIDC subject, compared exactly
    groups = ["annotators"]          # values of the groups claim
    graphs = ["demo"]                # graph names, or "*" for every graph
    tenants = ["team-a"]             # graph-memory tenants, or "*"

A user's role on a graph (tenant) is the highest role of the grants that name them (or one of their groups) and that
graph (tenant) or `*`. Nothing is granted by default: a signed-in user whom no grant names sees no data.
"""

from __future__ import annotations

import re
import string
import tomllib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from retrieval.access.roles import EVERY, Role, Scope, action
from retrieval.errors import AccessDenied, ConfigError

# graph names and tenant ids share this shape (graph.catalog.check_name, explore.memory.ID_PATTERN)
_NAME = re.compile(r"\*|[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
MAX_KEY_CHARS = 80  # an identity is an annotator name too (evaluation.labels.MAX_ANNOTATOR_CHARS)
RESERVED_KEYS = ("adjudicated", "consensus", "import")  # annotator names with a meaning of their own


class Grant(BaseModel):
    """One [[grant]] of the access file: a role for some users and groups on some graphs and tenants."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    graphs: tuple[str, ...] = ()
    tenants: tuple[str, ...] = ()

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: object) -> Role:
        try:
            return value if isinstance(value, Role) else Role.parse(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("graphs", "tenants")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if not _NAME.fullmatch(v)]
        if bad:
            raise ValueError(f"{bad[0][:200]!r} is neither '*' nor a name of 1-64 letters, digits, '_' or '-'")
        return value


class AccessPolicy(BaseModel):
    """The parsed access file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    groups_claim: str = Field("groups", min_length=1, max_length=200)
    grants: tuple[Grant, ...] = Field((), alias="grant")


def load_policy(path: Path) -> AccessPolicy:
    """Read and validate the access file; ConfigError names the file and the first problem."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"access file {path}: cannot read it: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"access file {path}: not valid TOML: {exc}") from exc
    try:
        return AccessPolicy.model_validate(raw)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p + 1) if isinstance(p, int) else str(p) for p in first["loc"])
        raise ConfigError(f"access file {path}: {where}: {first['msg']}") from exc


@dataclass(frozen=True)
class Identity:
    """A user and the roles the access file gives them. `key` names them in grades and the audit log."""

    key: str
    name: str = ""
    email: str = ""
    subject: str = ""
    groups: tuple[str, ...] = ()
    graphs: Mapping[str, Role] = field(default_factory=dict)  # graph name or "*" -> role
    tenants: Mapping[str, Role] = field(default_factory=dict)  # tenant id or "*" -> role
    local: bool = False  # local mode: the one user of a KG Lens nobody else can reach

    def role(self, scope: Scope, name: str | None = None) -> Role | None:
        """The user's role on a graph or tenant (the higher of its own grant and `*`); on the site, `*` of graphs."""
        table = self.tenants if scope == "tenant" else self.graphs
        found = [r for r in (table.get(EVERY), None if scope == "site" else table.get(name or "")) if r is not None]
        return max(found) if found else None

    @property
    def granted(self) -> bool:
        return bool(self.graphs or self.tenants)


LOCAL = Identity(key="local", name="local", graphs={EVERY: Role.ADMIN}, tenants={EVERY: Role.ADMIN}, local=True)


def _groups(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def email_verified(claims: Mapping[str, Any]) -> bool:
    """Whether the provider vouches for the e-mail: `email_verified` is JSON `true`, or the string "true" that some
    providers send (AWS Cognito); anything else, a missing claim included, is unverified."""
    value = claims.get("email_verified")
    return value is True or value == "true"


def claim_problem(value: str) -> str:
    """Why a claim cannot name a user as it is ('' if it can). Claims are never trimmed, collapsed or folded: one
    that white space, control or format characters (U+202E, U+200B ...) or Unicode normalisation would change could
    be shown as, or turned into, another user's identity."""
    if not value:
        return "it is empty"
    odd = next((c for c in value if c.isspace() or unicodedata.category(c)[0] in "CZ"), None)
    if odd is not None:
        return f"it holds {unicodedata.name(odd, f'U+{ord(odd):04X}')} (U+{ord(odd):04X})"
    if not unicodedata.is_normalized("NFC", value):
        return "it is not in Unicode NFC form"
    return ""


def _ascii_lower(text: str) -> str:
    """A-Z to a-z and nothing else: e-mail addresses are matched ignoring ASCII case only (casefold would make
    'straße' 'strasse' and the Kelvin sign 'k', merging different addresses)."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def identity_for(policy: AccessPolicy, claims: Mapping[str, Any]) -> Identity:
    """The identity of a signed-in user from their ID-token claims (`sub`, `email`, `email_verified`, `name`, the
    groups claim).

    The key is the e-mail exactly as the provider sent it when the provider says it is verified (`email_verified`),
    else the subject. A claim that is not already canonical (`claim_problem`) is refused, never normalised onto
    someone else's. An e-mail matches a grant's users ignoring ASCII case only, the subject exactly.
    """
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise AccessDenied("the identity provider gave no subject (`sub`) for this user")
    problem = claim_problem(subject)
    if problem:
        raise AccessDenied(f"the identity provider's subject claim {ascii(subject)[:200]} cannot name a user: "
                           f"{problem}. KG Lens compares identities exactly and does not normalise them.")
    email = claims.get("email")
    email = email if isinstance(email, str) and email and email_verified(claims) else ""
    if email:
        local, at, domain = email.rpartition("@")
        problem = claim_problem(email) or ("" if at and local and domain and "@" not in local
                                           else "it is not one address of the form local@domain")
        if problem:
            raise AccessDenied(f"the identity provider's e-mail claim {ascii(email)[:200]} cannot name a user: "
                               f"{problem}. KG Lens compares identities exactly and does not normalise them; "
                               "ask the provider's administrator to correct the address.")
    key = email or subject
    if len(key) > MAX_KEY_CHARS or key in RESERVED_KEYS:
        raise AccessDenied(f"the identity {ascii(key)[:200]} cannot name an annotator (at most {MAX_KEY_CHARS} "
                           f"characters, not one of {', '.join(RESERVED_KEYS)})")
    groups = _groups(claims.get(policy.groups_claim))
    graphs: dict[str, Role] = {}
    tenants: dict[str, Role] = {}
    mail = _ascii_lower(email)
    for grant in policy.grants:
        named = subject in grant.users or (email and mail in {_ascii_lower(u) for u in grant.users})
        if not (named or set(groups) & set(grant.groups)):
            continue
        for table, names in ((graphs, grant.graphs), (tenants, grant.tenants)):
            for n in names:
                table[n] = max(table.get(n, grant.role), grant.role)
    name = claims.get("name")
    return Identity(key=key, name=name if isinstance(name, str) and name else key, email=email, subject=subject,
                    groups=groups, graphs=graphs, tenants=tenants)


def unresolved(claims: Mapping[str, Any]) -> str:
    """How the audit log names a sign-in whose claims `identity_for` refused: marked, and the subject escaped, so
    that it can never read as another user's identity."""
    return f"unresolved sign-in, subject {ascii(claims.get('sub'))[:150]}"


def refusal(identity: Identity, name: str, *, graph: str | None = None, tenant: str | None = None) -> str:
    """Why `identity` may not do action `name` on the graph or tenant ('' when it may)."""
    act = action(name)
    target = tenant if act.scope == "tenant" else graph
    if act.scope != "site" and not target:
        return f"{act.what} needs a {act.scope} to act on"
    have = identity.role(act.scope, target)
    if have is not None and have >= act.role:
        return ""
    where = "on every graph (graphs = [\"*\"])" if act.scope == "site" else f"on {act.scope} {str(target)[:200]!r}"
    held = f"you ({identity.key}) have {have.label} there" if have else f"you ({identity.key}) have no role there"
    return f"{act.what} needs the {act.role.label} role {where}; {held}."


def authorize(identity: Identity, name: str, *, graph: str | None = None, tenant: str | None = None) -> None:
    """The one check every action passes: AccessDenied naming the role needed, or nothing."""
    why = refusal(identity, name, graph=graph, tenant=tenant)
    if why:
        raise AccessDenied(why)
