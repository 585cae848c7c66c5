"""A local stand-in for the Gemini REST API that the real google-genai client talks to.

`:generateContent` answers one JSON body; `:streamGenerateContent?alt=sse` answers server-sent events, one
`data:` line per chunk of `stream` (or `text` as one chunk). `delay_s` holds the answer back (timeouts),
`finish_reason` / `block_reason` make the model refuse, `raw` replaces the body with any bytes (malformed).
"""

from __future__ import annotations

import json
import threading
import time
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
    stream: list[str] | None = None  # streamed chunks of text (default: `text` as one chunk)
    delay_s: float = 0.0  # wait before answering (and between streamed chunks)
    finish_reason: str = "STOP"  # e.g. SAFETY: the model refuses (sent on the last chunk)
    block_reason: str = ""  # e.g. SAFETY: the prompt is blocked (promptFeedback, no candidates)
    raw: str | None = None  # send this body as-is instead of a well-formed response

    def reset(self) -> None:
        """Back to the defaults (one stand-in shared by several tests)."""
        self.__dict__.update(StubState().__dict__)


def _candidate(text: str, finish: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}] if text else []}}
    if finish:
        out["finishReason"] = finish
    return out


def _payload(state: StubState, text: str, finish: str | None) -> dict[str, Any]:
    if state.status != 200:
        return {"error": {"code": state.status, "message": "stub error", "status": "RESOURCE_EXHAUSTED"}}
    if state.block_reason:
        return {"promptFeedback": {"blockReason": state.block_reason}}
    return {"candidates": [_candidate(text, finish)]}


def _handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append({"path": self.path, "key": self.headers.get("x-goog-api-key"), "body": body})
            if state.delay_s:
                time.sleep(state.delay_s)
            try:
                if ":streamGenerateContent" in self.path and state.status == 200:
                    self._stream()
                    return
                data = state.raw.encode() if state.raw is not None else json.dumps(
                    _payload(state, state.text, state.finish_reason)).encode()
                self.send_response(state.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def _stream(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            if state.raw is not None:
                self.wfile.write(f"data: {state.raw}\r\n\r\n".encode())
                return
            chunks = state.stream if state.stream is not None else [state.text]
            for i, text in enumerate(chunks):
                if i and state.delay_s:
                    time.sleep(state.delay_s)
                last = i == len(chunks) - 1
                event = _payload(state, text, state.finish_reason if last else None)
                self.wfile.write(f"data: {json.dumps(event)}\r\n\r\n".encode())
                self.wfile.flush()

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
