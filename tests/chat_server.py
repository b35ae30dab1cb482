"""A real chat-completions server on 127.0.0.1 that answers from a per-test script.

Each POST to `/v1/chat/completions` is recorded (path, headers, JSON body)
and answered with the next `Reply` of the script: a chat completion with the
given content and usage, or any status, headers and raw body. A request past
the end of the script gets a 599 so the test fails loudly.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass
class Reply:
    status: int = 200
    content: str | None = None
    usage: dict[str, int] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # overrides the completion body entirely
    delay: float = 0.0

    def payload(self, model: str) -> bytes:
        if self.body is not None:
            return self.body
        if self.status != 200:
            return json.dumps({"error": {"message": f"scripted {self.status}"}}).encode()
        data: dict[str, Any] = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.content or ""},
                    "finish_reason": "stop",
                }
            ],
        }
        if self.usage is not None:
            data["usage"] = self.usage
        return json.dumps(data).encode()


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def user_message(self) -> str:
        return str(next(m["content"] for m in self.body["messages"] if m["role"] == "user"))

    @property
    def text(self) -> str:
        """Everything sent in the messages, for secret checks."""
        return "\n".join(str(m["content"]) for m in self.body["messages"])


class ChatServer:
    """`with ChatServer([Reply(...), ...]) as server:` then point base_url at `server.url`."""

    def __init__(self, script: list[Reply]) -> None:
        self.script = list(script)
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                del format, args  # keep pytest output clean

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                body = json.loads(raw) if raw else {}
                with outer._lock:
                    outer.requests.append(Recorded(self.path, dict(self.headers.items()), body))
                    reply = outer.script.pop(0) if outer.script else Reply(status=599)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    reply = Reply(status=404)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.payload(str(body.get("model", "")))
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
