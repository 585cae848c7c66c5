"""A local stand-in for the Gemini REST API that the real google-genai client talks to."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class StubState:
    """What the stub answers next: a status and a body text (the model's JSON as a string)."""

    status: int = 200
    text: str = "{}"
    requests: list[dict[str, Any]] = field(default_factory=list)


def _handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append({"path": self.path, "key": self.headers.get("x-goog-api-key"), "body": body})
            if state.status != 200:
                payload = {"error": {"code": state.status, "message": "stub error", "status": "RESOURCE_EXHAUSTED"}}
            else:
                payload = {
                    "candidates": [
                        {"content": {"role": "model", "parts": [{"text": state.text}]}, "finishReason": "STOP"}
                    ]
                }
            data = json.dumps(payload).encode()
            self.send_response(state.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def gemini_stub() -> Iterator[tuple[str, StubState]]:
    """Start the stand-in on a free loopback port; yields (base_url, state)."""
    state = StubState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
