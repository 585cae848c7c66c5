"""Access control: roles (roles.py), the access file and the one check `authorize` (policy.py), the audit log
(audit.py), and the gate a session acts through (gate.py). Local mode is one identity, `local`, with every role."""

from retrieval.access.audit import AuditEntry, AuditLog
from retrieval.access.gate import LOCAL_GATE, Gate, Permit
from retrieval.access.policy import (
    LOCAL,
    AccessPolicy,
    Identity,
    authorize,
    identity_for,
    load_policy,
    refusal,
    unresolved,
)
from retrieval.access.roles import ACTIONS, Role

__all__ = [
    "ACTIONS", "LOCAL", "LOCAL_GATE", "AccessPolicy", "AuditEntry", "AuditLog", "Gate", "Identity", "Permit", "Role",
    "authorize", "identity_for", "load_policy", "refusal", "unresolved",
]
