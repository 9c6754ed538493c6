"""The console's HTTP server and its JSON (see the package docstring)."""
from __future__ import annotations

import json
import logging
import math
import threading
from typing import Any, List, Optional

from ..materializer import graph_registry
from ..materializer.graph_drawing import GraphDrawing, IslandDrawing, to_svg
from .page import PAGE

log = logging.getLogger("atoll.console")


def _clean(v: Any) -> Any:
    """JSON-safe: non-finite floats become None, unknown objects their ``str``."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return str(v)


def _islands(entry: graph_registry.GraphEntry) -> List[dict]:
    if entry.ended is not None and entry.final_islands is not None:
        return entry.final_islands
    try:
        infos = entry.graph.islands()
    except Exception as e:  # noqa: BLE001 - a graph whose handle fails still shows
        log.debug("islands() of %s failed: %r", entry.name, e)
        infos = []
    if entry.ended is not None:
        entry.final_islands = infos
    return infos


def graph_json(entry: graph_registry.GraphEntry) -> dict:
    running = entry.graph.is_running
    state = "running"
    if not running:
        exc = entry.graph.completion.exception() if entry.graph.completion.done() else None
        state = "completed" if exc is None else f"failed: {type(exc).__name__}"
    return _clean({
        "id": entry.id,
        "name": entry.name,
        "state": state,
        "running": running,
        "started": entry.started,
        "ended": entry.ended,
        "islands": _islands(entry),
    })


def graphs_json() -> List[dict]:
    """Every running and recent graph, newest first, with its islands' figures."""
    return [graph_json(e) for e in reversed(graph_registry.graphs())]


def graph_svg(entry: graph_registry.GraphEntry) -> str:
    drawing = entry.drawing()
    if drawing is None:  # materialized without a blueprint: its islands only
        names = [i.get("name", "?") for i in _islands(entry)]
        drawing = GraphDrawing(entry.name, [IslandDrawing(k, n, []) for k, n in enumerate(names)], [])
    return to_svg(drawing)


class ConsoleServer:
    """A running console; ``url`` is where it answers, ``stop()`` ends it."""

    def __init__(self, port: int = 8266, host: str = "127.0.0.1"):
        from http.server import ThreadingHTTPServer

        self.httpd = ThreadingHTTPServer((host, port), _handler())
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self.url = f"http://{self.host}:{self.port}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="atoll-console", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> "ConsoleServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self):
        return f"ConsoleServer({self.url})"


def _handler():
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        server_version = "atoll-console"

        def log_message(self, fmt, *args) -> None:  # quiet: no line per request
            log.debug("console: " + fmt, *args)

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _entry(self, part: str) -> Optional[graph_registry.GraphEntry]:
            try:
                return graph_registry.find(int(part))
            except ValueError:
                return None

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                self._send(200, PAGE.encode(), "text/html; charset=utf-8")
            elif path == "/api/graphs":
                self._send(200, json.dumps(graphs_json()).encode(), "application/json")
            elif path.startswith("/api/graphs/") and path.endswith(".svg"):
                entry = self._entry(path[len("/api/graphs/"):-4])
                if entry is None:
                    self._send(404, b"no such graph", "text/plain")
                else:
                    self._send(200, graph_svg(entry).encode(), "image/svg+xml")
            else:
                self._send(404, b"not found", "text/plain")

        def do_POST(self) -> None:  # noqa: N802
            parts = self.path.strip("/").split("/")
            if len(parts) == 4 and parts[:2] == ["api", "graphs"] and parts[3] == "cancel":
                entry = self._entry(parts[2])
                if entry is None:
                    self._send(404, b'{"ok": false}', "application/json")
                    return
                entry.graph.cancel()
                log.warning("console: graph %s cancelled", entry.name)
                self._send(200, b'{"ok": true}', "application/json")
            else:
                self._send(404, b"not found", "text/plain")

    return Handler


def serve(port: int = 8266, host: str = "127.0.0.1") -> ConsoleServer:
    """Start the console on ``host:port`` (port 0: any free port; see ``.url``) and return it."""
    return ConsoleServer(port, host)
