"""How ``map_pool`` starts its Ray actors, checked without a Ray cluster.

* the pool actor class is shipped to its worker by value and its module imports nothing of Atoll, so a new
  pool actor's worker process does not import the ``atoll`` package (on the path to a cold first result);
* ``MapPool.prepare_on_driver`` creates the driver's pool actors once the island actors were created when the
  materializer offers ``on_islands_created`` (the island actor's worker process is then started first), else
  at once; handles whose actor was never created are neither killed nor given back.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from atoll._impl.ops import actor_pool, pool_map, pool_worker
from atoll._impl.ops.actor_pool import RayWorker

STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def test_the_pool_worker_module_imports_only_the_standard_library():
    """Everything ``pool_worker`` imports (at module level or in a function) is imported by every pool actor's
    worker process: only the standard library, never Atoll (no relative import either)."""
    tree = ast.parse(open(pool_worker.__file__).read())
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import in pool_worker: from {'.' * node.level}{node.module}"
            imported.append(node.module)
    assert imported and all(m.split(".")[0] in STDLIB for m in imported), imported


def test_the_pool_actor_class_unpickles_without_atoll():
    """After ``_ray_actor_class()`` the actor class pickles by value: a fresh interpreter loads it, builds an
    instance with a factory and calls it without importing ``atoll``."""
    from ray import cloudpickle  # ray is a core dependency
    actor_pool._ray_actor_class()
    blob = cloudpickle.dumps((pool_worker.PoolActor, lambda: (lambda xs: [x * 2 for x in xs])))
    code = (
        "import sys, pickle\n"
        "cls, factory = pickle.loads(sys.stdin.buffer.read())\n"
        "a = cls(factory, '__call__')\n"
        "a.ready()\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('atoll'))\n"
        "print(cls.__name__, a.call([1, 2, 3], True), a.reset(), loaded)\n"
    )
    env = dict(os.environ, PYTHONPATH="")
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().split("\n")[0] == "PoolActor [2, 4, 6] False []"


# =========================================================================== prepare_on_driver
class _Handle:
    def __init__(self, log, options, args):
        self.log, self.options, self.args = log, options, args

    def __repr__(self):
        return f"actor{self.options}"


class _FakeActorClass:
    """Stands for ``ray.remote(PoolActor)``: records every actor creation."""

    def __init__(self, log):
        self.log = log

    def options(self, **options):
        log = self.log

        class _Opts:
            @staticmethod
            def remote(*args):
                h = _Handle(log, options, args)
                log.append(("create", h))
                return h

        return _Opts


class _Ctx:
    """A driver context of a remote materializer (``DriverContext``'s surface ``prepare_on_driver`` uses)."""

    remote = True

    def __init__(self):
        self.materializer = object()  # no warm pool
        self.ends: list = []

    def on_end(self, fn):
        self.ends.append(fn)


class _CtxWithHook(_Ctx):
    def __init__(self):
        super().__init__()
        self.created: list = []

    def on_islands_created(self, fn):
        self.created.append(fn)


@pytest.fixture
def fake_ray(monkeypatch):
    log: list = []
    monkeypatch.setattr(pool_map, "ray_active", lambda: True)
    monkeypatch.setattr(actor_pool, "_ray_actor_class", lambda: _FakeActorClass(log))
    killed = []
    monkeypatch.setattr(RayWorker, "kill", lambda self: killed.append(self.actor) if self.actor is not None else None)
    return log, killed


class Model:
    def __call__(self, x):
        return x


def test_prepare_on_driver_creates_the_actors_once_the_islands_were_created(fake_ray):
    """With ``on_islands_created`` the pool actors are created by that callback (after the island actors), not
    during the preparation; each with ``max_restarts=0, max_task_retries=0`` and the stage's options."""
    log, killed = fake_ray
    stage = pool_map.MapPool(Model, size=2, num_cpus=0.5)
    ctx = _CtxWithHook()
    copy, finish = stage.prepare_on_driver(ctx)
    assert finish is None and copy is not stage and stage.prestarted == ()
    assert [w.actor for w in copy.prestarted] == [None, None]
    assert log == [] and len(ctx.created) == 1 and len(ctx.ends) == 1
    ctx.created[0]()  # the island actors exist now
    assert [w.actor for w in copy.prestarted] == [h for _, h in log] and len(log) == 2
    for _, h in log:
        assert h.options == {"max_restarts": 0, "max_task_retries": 0, "num_cpus": 0.5, "num_gpus": 0}
        assert h.args == (Model, "__call__")
    ctx.ends[0]()  # the graph ended: no warm pool here, so both are killed
    assert killed == [h for _, h in log]


def test_prepare_on_driver_without_the_hook_creates_the_actors_at_once(fake_ray):
    log, killed = fake_ray
    ctx = _Ctx()
    copy, _ = pool_map.MapPool(Model, size=(1, 3), num_cpus=0.5).prepare_on_driver(ctx)
    assert len(log) == 1 and [w.actor for w in copy.prestarted] == [log[0][1]]  # min actors: 1
    ctx.ends[0]()
    assert killed == [log[0][1]]


def test_actors_never_created_are_neither_killed_nor_given_back(fake_ray):
    """Materialization failed before the island actors were created: the end callback finds handles without
    an actor and does nothing with them (no actor is created just to be killed)."""
    log, killed = fake_ray
    ctx = _CtxWithHook()
    copy, _ = pool_map.MapPool(Model, size=2, num_cpus=0.5).prepare_on_driver(ctx)
    ctx.ends[0]()
    assert log == [] and killed == []
    w = RayWorker.later()
    w.give_back(None, None)  # nothing to ask: returns at once
    assert w.actor is None and w.ready_ref is None


def test_prepare_on_driver_does_nothing_in_process_or_with_min_zero(fake_ray):
    log, _ = fake_ray
    ctx = _CtxWithHook()
    ctx.remote = False
    stage = pool_map.MapPool(Model, size=2)
    assert stage.prepare_on_driver(ctx) == (stage, None)
    stage = pool_map.MapPool(Model, size=(0, 2))
    assert stage.prepare_on_driver(_CtxWithHook()) == (stage, None)
    assert log == []
