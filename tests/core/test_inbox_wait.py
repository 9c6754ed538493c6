"""get_within: a timed SimpleQueue wait that returns at a put or at its timeout (never waits on for ever)."""
import threading
from queue import Empty, SimpleQueue

import pytest

from atoll._impl.islands.inbox_wait import get_within


def test_elements_come_out_in_order_whatever_the_timeout():
    q = SimpleQueue()
    for x in (1, 2, 3, 4):
        q.put(x)
    assert [get_within(q, None), get_within(q, 0.0), get_within(q, 1e-6), get_within(q, 5.0)] == [1, 2, 3, 4]


@pytest.mark.parametrize("timeout", [0.0, -1.0, 1e-6, 0.05])
def test_an_empty_queue_raises_empty_at_the_timeout(timeout):
    q = SimpleQueue()
    q.put("x")
    assert get_within(q, None) == "x"  # the state that used to turn a short timed get into an endless one
    with pytest.raises(Empty):
        get_within(q, timeout)


def test_a_put_from_another_thread_wakes_a_waiting_get():
    q = SimpleQueue()
    q.put(0)
    get_within(q, None)
    t = threading.Timer(0.05, q.put, ("woken",))
    t.start()
    try:
        assert get_within(q, 30.0) == "woken"
    finally:
        t.cancel()
        t.join()
