"""The input buffer of a channel between local (thread) islands: it requests at least
``InProcessTransport.channel_buffer`` elements ahead where the consumer has only the stages' default, and exactly
what ``Attributes.input_buffer`` says where a stage or graph around the consumer sets it, or the materializer was
given one (as Pekko's async boundary does). Read from the running graph's island report (``inputs[..]["capacity"]``)."""
from __future__ import annotations

import pytest

from atoll import Attributes, Flow, Keep, Materializer, Source
from atoll._impl.islands.local_phase import InProcessTransport
from atoll.testkit import TestSink


def _channel_capacity(flow, **settings) -> int:
    mat = Materializer.local(**settings)
    try:
        probe = Source.range(0, 100_000).island().via(flow).to_mat(TestSink.probe(), Keep.right).run(mat)
        probe.request(1)
        assert probe.expect_next() == 0
        (graph,) = mat.running_graphs()
        inputs = [i for island in graph.islands() for i in island.get("inputs") or ()]
        assert len(inputs) == 1, graph.islands()
        probe.cancel()
        return inputs[0]["capacity"]
    finally:
        mat.shutdown()


def identity():
    return Flow.from_function(lambda x: x)


def test_a_channel_into_a_stage_with_the_default_buffer_requests_the_channel_buffer():
    assert InProcessTransport.channel_buffer == 4096
    assert _channel_capacity(identity()) == 4096


@pytest.mark.parametrize("size", [1, 2, 16, 8192])
def test_an_input_buffer_set_on_the_consumer_is_the_channel_buffer(size):
    assert _channel_capacity(identity().with_attributes(Attributes.input_buffer(1, size))) == size


@pytest.mark.parametrize("size", [1, 16, 8192])
def test_an_input_buffer_given_to_the_materializer_is_the_channel_buffer(size):
    assert _channel_capacity(identity(), input_buffer=(1, size)) == size


def test_an_input_buffer_set_on_a_composite_around_the_consumer_is_the_channel_buffer():
    assert _channel_capacity(identity().via(identity()).with_attributes(Attributes.input_buffer(1, 4))) == 4
