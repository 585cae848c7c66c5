"""The gate a session works through: its identity's checks (`authorize`) with every refusal and every allowed
action worth keeping written to the audit log (none in local mode: one user, nobody to tell apart)."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.access.audit import AuditLog
from retrieval.access.policy import LOCAL, Identity, authorize, refusal
from retrieval.errors import AccessDenied


@dataclass(frozen=True)
class Gate:
    """An identity and the audit log its actions go to (state: the two dependencies every check needs)."""

    identity: Identity
    audit: AuditLog | None = None

    def allows(self, action: str, *, graph: str | None = None, tenant: str | None = None) -> bool:
        return not refusal(self.identity, action, graph=graph, tenant=tenant)

    def check(self, action: str, *, graph: str | None = None, tenant: str | None = None, detail: str = "") -> None:
        """`authorize`; a refusal is written to the audit log, then raised."""
        try:
            authorize(self.identity, action, graph=graph, tenant=tenant)
        except AccessDenied as exc:
            self.record(action, graph=graph, tenant=tenant, detail=f"{exc}{' · ' + detail if detail else ''}",
                        outcome="refused")
            raise

    def record(self, action: str, *, graph: str | None = None, tenant: str | None = None, detail: str = "",
               outcome: str = "ok") -> None:
        """Write who did `action` (or was refused it) to the audit log."""
        if self.audit is not None:
            self.audit.record(self.identity.key, action, outcome=outcome, graph=graph or "", tenant=tenant or "",
                              detail=detail)

    def permit(self, action: str, *, graph: str | None = None, tenant: str | None = None) -> Permit:
        """One action on one graph or tenant, for a page to show (allowed, or why not) and to check when it acts."""
        return Permit(self, action, graph, tenant, refusal(self.identity, action, graph=graph, tenant=tenant))


@dataclass(frozen=True)
class Permit:
    """Whether this session may do one action on one scope (`refusal` says why not), and the check a handler runs
    on the server before acting: a button drawn disabled can still be clicked by a crafted request."""

    gate: Gate
    action: str
    graph: str | None
    tenant: str | None
    refusal: str

    @property
    def allowed(self) -> bool:
        return not self.refusal

    def check(self, detail: str = "") -> None:
        self.gate.check(self.action, graph=self.graph, tenant=self.tenant, detail=detail)

    def record(self, detail: str = "") -> None:
        self.gate.record(self.action, graph=self.graph, tenant=self.tenant, detail=detail)


LOCAL_GATE = Gate(LOCAL)
