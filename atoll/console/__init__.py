"""A live console in the browser: ``atoll.console.serve(port=8266)``.

Serves, from the driver, a page listing every running and recent graph (``atoll.materializer.graph_registry``)
drawn as its islands and stages, with live per-island figures (elements in/out per second, input-buffer fill,
demand outstanding, state, node, watermark per input) refreshed every second, and a Cancel button per graph.
Standard library only (``http.server`` on a daemon thread); ``serve`` returns the ``ConsoleServer``, whose
``stop()`` ends it.

Endpoints: ``/`` (the page), ``/api/graphs`` (JSON), ``/api/graphs/<id>.svg`` (the drawing),
``POST /api/graphs/<id>/cancel``.
"""
from __future__ import annotations

from .server import ConsoleServer, graphs_json, serve

__all__ = ["serve", "ConsoleServer", "graphs_json"]
