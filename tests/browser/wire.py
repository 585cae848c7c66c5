"""A crafted client: the page's Streamlit websocket relayed through Playwright (`page.route_web_socket`), so a test
sees the widgets the server draws and can send what the page never would: a click on a button drawn disabled, a
state for a component drawn read-only. What the server does with such a message is what an attacker gets."""

from __future__ import annotations

import json
import re
from typing import Any

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState


class Wire:
    """Relays one page's websocket; remembers each widget drawn (by label or component key) and the last rerun the
    page asked for, whose widget states a crafted rerun carries on."""

    def __init__(self, page: Any) -> None:
        self.server: Any = None
        self.last: BackMsg | None = None
        self.sent: list[BackMsg] = []
        self.widgets: dict[str, tuple[str, Any]] = {}  # label / widget id -> (element type, element proto)
        page.route_web_socket(re.compile(r".*/_stcore/stream"), self._route)

    def _route(self, ws: Any) -> None:
        server = ws.connect_to_server()
        self.server = server
        ws.on_message(lambda m: self._from_page(m, server))
        server.on_message(lambda m: self._from_server(m, ws))

    def _from_page(self, message: str | bytes, server: Any) -> None:
        if isinstance(message, bytes):
            msg = BackMsg.FromString(message)
            if msg.WhichOneof("type") == "rerun_script":
                self.last = msg
                self.sent.append(msg)
        server.send(message)

    def _from_server(self, message: str | bytes, ws: Any) -> None:
        if isinstance(message, bytes):
            fwd = ForwardMsg.FromString(message)
            if fwd.WhichOneof("type") == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                kind = element.WhichOneof("type")
                proto = getattr(element, kind) if kind else None
                if proto is not None and getattr(proto, "id", ""):
                    self.widgets[proto.id] = (kind, proto)
                    if getattr(proto, "label", ""):
                        self.widgets[proto.label] = (kind, proto)
        ws.send(message)

    def widget(self, name: str, kind: str | None = None) -> Any:
        """The proto of the widget labelled `name`, or whose id contains `name` (a key), drawn most recently."""
        if name in self.widgets and kind in (None, self.widgets[name][0]):
            return self.widgets[name][1]
        found = [p for wid, (k, p) in self.widgets.items() if name in wid and kind in (None, k)]
        if not found:
            raise KeyError(f"no widget {name!r} drawn; have {sorted(k for k in self.widgets if '$$' not in k)}")
        return found[-1]

    def _rerun(self, state: WidgetState) -> None:
        assert self.last is not None and self.server is not None, "the page has not run yet"
        msg = BackMsg()
        msg.CopyFrom(self.last)
        kept = [w for w in msg.rerun_script.widget_states.widgets
                if w.id != state.id and w.WhichOneof("value") not in ("trigger_value", "json_trigger_value",
                                                                      "string_trigger_value")]
        del msg.rerun_script.widget_states.widgets[:]
        msg.rerun_script.widget_states.widgets.extend([*kept, state])
        msg.rerun_script.is_auto_rerun = False
        self.server.send(msg.SerializeToString())

    def click(self, label: str) -> None:
        """Send a click on the button labelled `label` (disabled or not): what a tampered page would send."""
        button = self.widget(label, "button")
        self._rerun(WidgetState(id=button.id, trigger_value=True))

    def set_value(self, key: str, value: str) -> None:
        """Set a text value (a select box's choice) for the widget whose key is `key`, whatever its options."""
        self._rerun(WidgetState(id=self.widget(key).id, string_value=value))

    def set_state(self, key: str, value: dict[str, Any]) -> None:
        """Set a bidirectional component's state (its JSON value) as its own script would."""
        component = self.widget(key, "bidi_component")
        self._rerun(WidgetState(id=component.id, json_value=json.dumps(value)))

    def component_data(self, key: str) -> dict[str, Any]:
        """The data the server last sent to the component whose key is `key`."""
        component = self.widget(key, "bidi_component")
        return json.loads(component.json or component.mixed.json)
