"""A stage with keep-going stays alive after all its ports closed (Pekko's KeepGoingStageSpec)."""
from __future__ import annotations

import queue

import pytest

from atoll import GraphStage, GraphStageLogic, InHandler, Inlet, Keep, SinkShape
from atoll.testkit import TestSource

from interpreter_kit import Kit
from stage_helpers import Boom

PONG, POST_STOP, UPSTREAM_COMPLETED, END_OF_EVENT_HANDLER = "Pong", "PostStop", "UpstreamCompleted", "EndOfEventHandler"


class PingableSink(GraphStage):
    """A sink controlled through an async callback (its materialized value): ``register(listener)``,
    ``ping``, ``complete``, ``fail``, ``throw``."""

    def __init__(self, keep_alive: bool):
        self.in_ = Inlet("ping.in")
        self.shape = SinkShape(self.in_)
        self.keep_alive = keep_alive

    def create_logic_and_materialized_value(self, attributes):
        stage = self

        class Logic(GraphStageLogic):
            def __init__(self):
                super().__init__(stage.shape)
                self.listener = None
                self.set_handler(
                    stage.in_,
                    InHandler(on_push=lambda: self.pull(stage.in_), on_upstream_finish=lambda: self.tell(UPSTREAM_COMPLETED)),
                )
                self.callback = self.get_async_callback(self.on_command)

            def tell(self, msg):
                if self.listener is not None:
                    self.listener(msg)

            def pre_start(self):
                self.set_keep_going(stage.keep_alive)

            def on_command(self, cmd):
                kind = cmd[0]
                if kind == "register":
                    self.listener = cmd[1]
                elif kind == "ping":
                    self.tell(PONG)
                elif kind == "complete":
                    self.complete_stage()
                    self.tell(END_OF_EVENT_HANDLER)
                elif kind == "fail":
                    self.fail_stage(Boom("test"))
                    self.tell(END_OF_EVENT_HANDLER)
                elif kind == "throw":
                    try:
                        raise Boom("test")
                    finally:
                        self.tell(END_OF_EVENT_HANDLER)

            def post_stop(self):
                self.tell(POST_STOP)

        logic = Logic()
        return logic, logic.callback


# ------------------------------------------------------------------------------ on the bare interpreter
def _kit_setup(keep_alive: bool):
    kit = Kit()
    up = kit.add(kit.upstream())
    sink = kit.add(PingableSink(keep_alive))
    kit.connect(up.out, sink._in_ports[0])
    kit.init()
    callback = kit.mat_values[0]
    msgs = []
    callback.invoke(("register", msgs.append))
    kit.run()
    return kit, up, sink, callback, msgs


@pytest.mark.parametrize("command", ["complete", "fail", "throw"])
def test_alive_after_all_ports_closed_until_explicitly_stopped(command):
    kit, up, sink, callback, msgs = _kit_setup(keep_alive=True)
    callback.invoke(("ping",))
    callback.invoke(("ping",))
    kit.run()
    assert msgs == [PONG, PONG]

    up.on_complete()
    assert msgs[-1] == UPSTREAM_COMPLETED
    assert sink.is_closed(sink._in_ports[0])
    assert not sink._finalized and kit.interpreter.running_stages == 1

    callback.invoke(("ping",))
    callback.invoke(("ping",))
    kit.run()
    assert msgs[-2:] == [PONG, PONG]

    callback.invoke((command,))
    kit.run()
    # post_stop runs after the event handler returned, never inside it
    assert msgs[-2:] == [END_OF_EVENT_HANDLER, POST_STOP]
    assert kit.interpreter.is_completed


def test_close_down_early_if_keep_going_is_not_requested():
    kit, up, sink, callback, msgs = _kit_setup(keep_alive=False)
    callback.invoke(("ping",))
    kit.run()
    up.on_complete()
    assert msgs == [PONG, UPSTREAM_COMPLETED, POST_STOP]
    assert kit.interpreter.is_completed


def test_keep_going_can_be_switched_off_again():
    kit, up, sink, callback, msgs = _kit_setup(keep_alive=True)
    up.on_complete()
    assert not sink._finalized

    def switch_off(_):
        sink.set_keep_going(False)

    sink.get_async_callback(switch_off).invoke(None)
    kit.run()
    assert msgs == [UPSTREAM_COMPLETED, POST_STOP]
    assert kit.interpreter.is_completed


def test_keep_going_stage_still_sees_upstream_failure():
    kit, up, sink, callback, msgs = _kit_setup(keep_alive=True)
    up.on_error(Boom("upstream"))
    # the default on_upstream_failure fails the stage, which ends keep-going
    assert msgs == [POST_STOP]
    assert kit.interpreter.is_completed


# ------------------------------------------------------------------------------ materialized
@pytest.mark.parametrize("command", ["complete", "fail", "throw"])
def test_keep_going_in_a_running_stream(mat, command):
    src, callback = TestSource.probe().to_mat(PingableSink(keep_alive=True), Keep.both).run(mat)
    msgs: "queue.Queue" = queue.Queue()
    callback.invoke(("register", msgs.put))
    callback.invoke(("ping",))
    assert msgs.get(timeout=3) == PONG

    src.send_complete()
    assert msgs.get(timeout=3) == UPSTREAM_COMPLETED

    callback.invoke(("ping",))
    assert msgs.get(timeout=3) == PONG
    callback.invoke((command,))
    assert msgs.get(timeout=3) == END_OF_EVENT_HANDLER
    assert msgs.get(timeout=3) == POST_STOP


def test_close_down_early_in_a_running_stream(mat):
    src, callback = TestSource.probe().to_mat(PingableSink(keep_alive=False), Keep.both).run(mat)
    msgs: "queue.Queue" = queue.Queue()
    callback.invoke(("register", msgs.put))
    callback.invoke(("ping",))
    assert msgs.get(timeout=3) == PONG
    src.send_complete()
    assert msgs.get(timeout=3) == UPSTREAM_COMPLETED
    assert msgs.get(timeout=3) == POST_STOP
