"""Starting Ray for a test module: a local Ray of the test run's own whose workers can import the test modules.

Test modules and their helpers are imported by name (the test directories are not packages), so a Ray worker that
unpickles a function defined in one needs that module's directory on its ``PYTHONPATH``.

Most Ray test modules need nothing but a local Ray: the modules of one test directory share one
(:func:`shared_local_ray`), started by the first module that asks and kept for the next (a local Ray takes ~3.5 s to
start and ~1.2 s to stop, and tests/ray alone has two dozen such modules). A module that needs a Ray of its own (a
small object store, a cluster, fewer CPUs) starts it with :func:`start_local_ray`, or after
:func:`release_shared_ray`: both shut the shared one down, and the next module asking for it starts it again. The
root conftest shuts it down before the first module of another directory runs (tests elsewhere expect no Ray in the
process: ``map_remote`` on the local materializer runs on threads then) and when the run ends."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable

import ray

_TESTS = os.path.dirname(os.path.abspath(__file__))
#: the test directories whose modules the shared session's workers may import by name (basenames are unique across
#: them: pytest imports test modules by basename)
_SHARED_DIRS = ("ray", "dsl", "event_time", "checkpoint", "core", "windowing", "testkit")
#: ``ray.init`` arguments of the shared session
SHARED_INIT: Dict[str, Any] = {"num_cpus": 4, "include_dashboard": True}
_shared_ctx = None
#: the directory of the last module that ended with the shared session up
_shared_dir = None


def _runtime_env(dirs: Iterable[str]) -> Dict[str, Any]:
    path = os.pathsep.join(dict.fromkeys([*dirs, _TESTS, os.environ.get("PYTHONPATH", "")])).rstrip(os.pathsep)
    return {"env_vars": {"PYTHONPATH": path}}


def worker_runtime_env(module_file: str) -> Dict[str, Any]:
    """A ``runtime_env`` that puts the directory of ``module_file`` (a test module's ``__file__``) on the workers' path,
    and this one's (a test module imported by a worker imports this module too)."""
    return _runtime_env([os.path.dirname(os.path.abspath(module_file))])


def start_local_ray(module_file: str, **init_kwargs: Any):
    """``ray.init`` a local Ray (``address="local"``: never a cluster another process started on this machine), after
    shutting down one already up in this process; workers import the modules beside ``module_file``; worker output is
    not forwarded unless ``log_to_driver`` says so. Returns ``ray.init``'s context."""
    return _init_local(worker_runtime_env(module_file), init_kwargs)


def _init_local(runtime_env: Dict[str, Any], init_kwargs: Dict[str, Any]):
    global _shared_ctx
    if ray.is_initialized():
        ray.shutdown()
    _shared_ctx = None
    init_kwargs = dict(init_kwargs)
    init_kwargs.setdefault("log_to_driver", False)
    return ray.init(address="local", runtime_env=runtime_env, **init_kwargs)


def _is_shared_up() -> bool:
    """Whether the Ray this process is connected to is the shared session (not one a module started since)."""
    if _shared_ctx is None or not ray.is_initialized():
        return False
    return ray.get_runtime_context().get_node_id() == _shared_ctx.address_info["node_id"]


def shared_local_ray():
    """The test run's shared local Ray (``SHARED_INIT``; workers import the modules of every test directory),
    started now unless it is up; returns ``ray.init``'s context. A module using it does not shut it down: its tests
    end their graphs and materializers, so the next module finds no actor of theirs."""
    global _shared_ctx
    if not _is_shared_up():
        ctx = _init_local(_runtime_env(os.path.join(_TESTS, d) for d in _SHARED_DIRS), SHARED_INIT)
        _shared_ctx = ctx
    return _shared_ctx


def release_shared_ray() -> None:
    """Shut the shared session down if it is the Ray this process is connected to (before a module starts its own)."""
    global _shared_ctx, _shared_dir
    if _is_shared_up():
        ray.shutdown()
    _shared_ctx = None
    _shared_dir = None


def module_starts(directory: str) -> None:
    """A test module of ``directory`` is about to run: the shared session goes down if a module of another directory
    left it up (root conftest)."""
    if _shared_dir is not None and _shared_dir != directory:
        release_shared_ray()


def module_ended(directory: str) -> None:
    """A test module of ``directory`` ended (root conftest): remember the directory if it left the shared session up."""
    global _shared_dir
    _shared_dir = directory if _is_shared_up() else None
