"""Starting Ray for a test module: a local Ray of the test run's own whose workers can import the test modules.

Test modules and their helpers are imported by name (the test directories are not packages), so a Ray worker that
unpickles a function defined in one needs that module's directory on its ``PYTHONPATH``."""
from __future__ import annotations

import os
from typing import Any, Dict

import ray


def worker_runtime_env(module_file: str) -> Dict[str, Any]:
    """A ``runtime_env`` that puts the directory of ``module_file`` (a test module's ``__file__``) on the workers' path,
    and this one's (a test module imported by a worker imports this module too)."""
    here = os.path.dirname(os.path.abspath(module_file))
    tests = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join(dict.fromkeys([here, tests, os.environ.get("PYTHONPATH", "")])).rstrip(os.pathsep)
    return {"env_vars": {"PYTHONPATH": path}}


def start_local_ray(module_file: str, **init_kwargs: Any):
    """``ray.init`` a local Ray (``address="local"``: never a cluster another process started on this machine), after
    shutting down one already up in this process; workers import the modules beside ``module_file``; worker output is
    not forwarded unless ``log_to_driver`` says so. Returns ``ray.init``'s context."""
    if ray.is_initialized():
        ray.shutdown()
    init_kwargs.setdefault("log_to_driver", False)
    return ray.init(address="local", runtime_env=worker_runtime_env(module_file), **init_kwargs)
