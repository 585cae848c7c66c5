"""A real OpenID Connect provider for the team-mode tests: `oidc-provider-mock` (Authlib's authorization server in
Flask; discovery, authorization code flow, signed ID tokens, end-session) served on 127.0.0.1 in a thread, with
predefined users whose claims the test chooses. Its sign-in form lists each user as a button (`sub`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CLIENT_ID = "kg-lens"
CLIENT_SECRET = "kg-lens-test-secret"  # any secret: the provider accepts every client that does not register


@contextmanager
def oidc_provider(users: Mapping[str, Mapping[str, Any]]) -> Iterator[str]:
    """Serve the provider on 127.0.0.1:<free port> with `users` (subject -> ID-token claims); yields its issuer URL."""
    import werkzeug.serving
    from oidc_provider_mock import User, app

    before = os.environ.get("AUTHLIB_INSECURE_TRANSPORT")
    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"  # the provider's own endpoints are plain http on the loopback
    server = werkzeug.serving.make_server(
        "127.0.0.1", 0, app(user_claims=[User(sub=sub, claims=dict(claims)) for sub, claims in users.items()]),
        threaded=True,
    )
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        if before is None:
            os.environ.pop("AUTHLIB_INSECURE_TRANSPORT", None)
        else:
            os.environ["AUTHLIB_INSECURE_TRANSPORT"] = before


def write_secrets(path: Path, issuer: str, *, cookie_secret: str = "kg-lens-test-cookie-secret-0123456789") -> Path:
    """A secrets.toml whose [auth] table signs in with the provider at `issuer` (the redirect URI's `{port}` is
    filled in by Streamlit with its own port)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "[auth]\n"
        'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
        f'cookie_secret = "{cookie_secret}"\n'
        f'client_id = "{CLIENT_ID}"\n'
        f'client_secret = "{CLIENT_SECRET}"\n'
        f'server_metadata_url = "{issuer}/.well-known/openid-configuration"\n',
        encoding="utf-8",
    )
    return path


def write_access_file(path: Path, grants: Sequence[Mapping[str, Any]], groups_claim: str = "groups") -> Path:
    """An access file with `grants` ([[grant]] tables: role, users, groups, graphs, tenants)."""
    lines = [f'groups_claim = "{groups_claim}"', ""]
    for grant in grants:
        lines.append("[[grant]]")
        for key, value in grant.items():
            rendered = f'"{value}"' if isinstance(value, str) else "[" + ", ".join(f'"{v}"' for v in value) + "]"
            lines.append(f"{key} = {rendered}")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
