"""A fake tracking server for the hostile-answer tests: an HTTP server on 127.0.0.1 whose every answer a test
chooses (`respond(request)`, calling request.answer(status, body)); it keeps each request's headers. Not MLflow:
the real one is tests/support/mlflow_server.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeServer:
    def __init__(self, respond) -> None:
        self.respond, self.headers, self.paths = respond, [], []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def answer(self, status: int, body) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                self.body = json.loads(raw) if raw[:1] == b"{" else raw
                owner.headers.append(dict(self.headers))
                owner.paths.append(self.path)
                owner.respond(self)

            do_GET = do_POST = do_PUT = _any

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client that hung up on a long answer: expected
                import sys

                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self.http = Quiet(("127.0.0.1", 0), Handler)
        self.http.daemon_threads, self.http.block_on_close = True, False  # a handler still sleeping is left
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def __enter__(self) -> "FakeServer":
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.http.shutdown()
        self.http.server_close()
