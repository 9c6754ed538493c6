"""Atoll's benchmarks, each measured side by side with the alternatives in one run.

Run from the repository root: ``./scripts/bench [name ...]`` (or ``.venv/bin/python -m benchmarks``);
``--list`` names them, ``--quick`` is a smoke run with small sizes, ``--json PATH`` also writes the
results. The registry lives in ``benchmarks/__main__.py``; shared helpers in ``benchmarks/_common.py``.
Benchmarks print numbers; they never assert on time (the tests do not either).
"""
