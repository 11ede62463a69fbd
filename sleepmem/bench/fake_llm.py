"""A scripted OpenAI-compatible chat server that counts calls (benchmarks and tests).

It stands in for a hosted LLM API, which cannot run here: every request is answered
with one `event` candidate per event id it was sent, in the extractor's JSON format.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ID = re.compile(r'"id"\s*:\s*"(e\d+)"')


class CountingLLM:
    def __init__(self) -> None:
        self.calls = 0
        self.prompt_chars = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
                with server._lock:
                    server.calls += 1
                    server.prompt_chars += len(prompt)
                ids = list(dict.fromkeys(_ID.findall(prompt)))
                reply = {"candidates": [
                    {"event_ids": [i], "type": "event", "statement": f"Something said in {i}."}
                    for i in ids
                ]}
                payload: dict[str, Any] = {
                    "id": "cmpl-bench", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "bench"),
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": json.dumps(reply)}}],
                    "usage": {"prompt_tokens": len(prompt) // 4,
                              "completion_tokens": 20 * len(ids),
                              "total_tokens": len(prompt) // 4 + 20 * len(ids)},
                }
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> CountingLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
