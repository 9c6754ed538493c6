"""Atoll's internals: the graph interpreter and islands, the Ray actors and channels, the operator
implementations. Nothing here is public API - import from ``atoll``, ``atoll.dsl``, ``atoll.stage``,
``atoll.testkit``, ``atoll.interop`` and ``atoll.materializer``; modules here change without notice."""
