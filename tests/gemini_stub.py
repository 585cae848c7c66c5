"""A local stand-in for the Gemini REST API that the real google-genai client talks to.

`:generateContent` answers one JSON body; `:streamGenerateContent?alt=sse` answers server-sent events, one
`data:` line per chunk of `stream` (or of the text as one chunk), `delay_s` apart. `finish_reason` /
`block_reason` make the model refuse, `raw` replaces the body with any text (malformed).
"""

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
    answer back (to overlap concurrent calls, or to outlast a client timeout), and spaces a stream's chunks;
    `max_in_flight` records the most requests the stub was serving at once.
    """

    status: int = 200
    text: str = "{}"
    requests: list[dict[str, Any]] = field(default_factory=list)
    responder: Responder | None = None
    delay_s: float = 0.0
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stream: list[str] | None = None  # streamed chunks of text (default: the text as one chunk)
    finish_reason: str = "STOP"  # e.g. SAFETY: the model refuses (sent on the last chunk)
    block_reason: str = ""  # e.g. SAFETY: the prompt is blocked (promptFeedback, no candidates)
    raw: str | None = None  # send this body as-is instead of a well-formed response

    def reset(self) -> None:
        """Back to the defaults (one stand-in shared by several tests)."""
        self.__dict__.update(StubState().__dict__)


def prompt_of(body: dict[str, Any]) -> str:
    """The user prompt text of a generateContent request body."""
    return "".join(part.get("text", "") for c in body.get("contents", []) for part in c.get("parts", []))


def _payload(state: StubState, status: int, text: str, finish: str | None) -> dict[str, Any]:
    if status != 200:
        return {"error": {"code": status, "message": "stub error", "status": "RESOURCE_EXHAUSTED"}}
    if state.block_reason:
        return {"promptFeedback": {"blockReason": state.block_reason}}
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}] if text else []}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


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
            try:
                if ":streamGenerateContent" in self.path and status == 200:
                    self._stream(text)
                else:
                    self._answer(status, text)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout) before the answer

        def _answer(self, status: int, text: str) -> None:
            body = state.raw if state.raw is not None else json.dumps(
                _payload(state, status, text, state.finish_reason))
            data = body.encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, text: str) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            if state.raw is not None:
                self.wfile.write(f"data: {state.raw}\r\n\r\n".encode())
                return
            chunks = state.stream if state.stream is not None else [text]
            for i, chunk in enumerate(chunks):
                if i and state.delay_s:
                    time.sleep(state.delay_s)
                event = _payload(state, 200, chunk, state.finish_reason if i == len(chunks) - 1 else None)
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
