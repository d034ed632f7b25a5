"""A tiny scripted OpenAI-compatible server on 127.0.0.1 for tests: it answers
``POST /v1/chat/completions`` from a script and records every request body."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
from fake_chat import route


def reply(content: str, usage: bool = True) -> dict:
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}]}
    if usage:
        body["usage"] = {"prompt_tokens": 111, "completion_tokens": 7, "total_tokens": 118}
    return {"status": 200, "body": body}


def error(status: int, message: str) -> dict:
    return {"status": status, "body": {"error": {"message": message, "type": "server_error"}}}


def hang(seconds: float = 5.0) -> dict:
    return {"delay": seconds, **reply(route("chain"))}


class FakeOpenAI:
    """Answers POST /v1/chat/completions from a script and records every request body."""

    def __init__(self) -> None:
        self.script: list[dict] = []
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append(json.loads(self.rfile.read(length)))
                step = outer.script.pop(0) if outer.script else error(500, "script exhausted")
                time.sleep(step.get("delay", 0))
                data = json.dumps(step["body"]).encode()
                try:
                    self.send_response(step["status"])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url, api_key="test-key")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
