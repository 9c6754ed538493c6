"""The input buffer of a channel between local (thread) islands: once the first elements arrived and are not large,
it asks for ``InProcessTransport.channel_buffer`` elements ahead where the consumer has only the stages' default;
large elements keep that default (16); where a stage or graph around the consumer sets ``Attributes.input_buffer``,
or the materializer was given one, that is the buffer (as Pekko's async boundary does). Read from the running
graph's island report (``inputs[..]["capacity"]``) once the consumer got its first element."""
from __future__ import annotations

import pytest

import numpy as np

from atoll import Attributes, Flow, Keep, Materializer, Source
from atoll._impl.islands.local_phase import InProcessTransport
from atoll.testkit import TestSink


def _channel_capacity(flow, source=None, **settings) -> int:
    mat = Materializer.local(**settings)
    try:
        source = Source.range(0, 100_000) if source is None else source
        probe = source.island().via(flow).to_mat(TestSink.probe(), Keep.right).run(mat)
        probe.request(1)
        probe.expect_next()
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


@pytest.mark.parametrize("large", [
    lambda i: np.zeros(10_000),                          # 80 KB
    lambda i: b"x" * 70_000,
    lambda i: {"id": i, "image": np.zeros(10_000)},      # a row holding a large value
    lambda i: (i, "y" * 70_000),
], ids=["numpy", "bytes", "row", "tuple"])
def test_large_elements_keep_the_stages_default_buffer(large):
    assert _channel_capacity(identity(), Source.from_iterator(lambda: (large(i) for i in range(1000)))) == 16


def test_small_rows_get_the_channel_buffer():
    rows = Source.from_iterator(lambda: ({"id": i, "name": f"n{i}", "v": [1.0] * 8} for i in range(100_000)))
    assert _channel_capacity(identity(), rows) == 4096


@pytest.mark.parametrize("size", [1, 2, 16, 8192])
def test_an_input_buffer_set_on_the_consumer_is_the_channel_buffer(size):
    assert _channel_capacity(identity().with_attributes(Attributes.input_buffer(1, size))) == size


@pytest.mark.parametrize("size", [1, 16, 8192])
def test_an_input_buffer_given_to_the_materializer_is_the_channel_buffer(size):
    assert _channel_capacity(identity(), input_buffer=(1, size)) == size


def test_an_input_buffer_set_on_a_composite_around_the_consumer_is_the_channel_buffer():
    assert _channel_capacity(identity().via(identity()).with_attributes(Attributes.input_buffer(1, 4))) == 4


@pytest.mark.parametrize("elem, large", [
    (1, False), ("short", False), (b"x" * 1000, False), ({"a": 1, "b": "c"}, False), ([1.0] * 100, False),
    (np.zeros(8), False),
    (np.zeros(10_000)[1:], False),   # a view: its buffer belongs to the base array, which getsizeof does not count
    (np.zeros(10_000), True), (b"x" * 70_000, True), ("y" * 70_000, True), ([0] * 10_000, True),
    ({"k": np.zeros(10_000)}, True), ((1, b"x" * 70_000), True), ([np.zeros(10_000)], True),
    ({"outer": {"inner": np.zeros(10_000)}}, False),   # deeper than one level: not looked at
])
def test_is_large_element(elem, large):
    from atoll._impl.islands.element_size import is_large_element

    assert is_large_element(elem) is large
