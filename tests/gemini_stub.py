"""A local stand-in for the Gemini REST API that the real google-genai client talks to."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], tuple[int, str]]


@dataclass
class StubState:
    """What the stub answers next: a status and a body text (the model's JSON as a string).

    `responder`, when set, answers each request instead: it gets the request body and returns (status, text),
    so different prompts get different answers and failures can be injected per call. `delay_s` holds each
    answer back (to overlap concurrent calls, or to outlast a client timeout); `max_in_flight` records the
    most requests the stub was serving at once.
    """

    status: int = 200
    text: str = "{}"
    requests: list[dict[str, Any]] = field(default_factory=list)
    responder: Responder | None = None
    delay_s: float = 0.0
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def prompt_of(body: dict[str, Any]) -> str:
    """The user prompt text of a generateContent request body."""
    return "".join(part.get("text", "") for c in body.get("contents", []) for part in c.get("parts", []))


def _handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            with state.lock:
                state.requests.append({"path": self.path, "key": self.headers.get("x-goog-api-key"), "body": body})
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
            try:
                status, text = state.responder(body) if state.responder else (state.status, state.text)
                if state.delay_s:
                    time.sleep(state.delay_s)
            finally:
                with state.lock:
                    state.in_flight -= 1
            self._answer(status, text)

        def _answer(self, status: int, text: str) -> None:
            if status != 200:
                payload = {"error": {"code": status, "message": "stub error", "status": "RESOURCE_EXHAUSTED"}}
            else:
                payload = {
                    "candidates": [
                        {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
                    ]
                }
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout) before the answer

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
