"""Stream test kit: probes that drive and observe a stream from a test (Pekko's StreamTestKit), and a
manual (virtual) clock for timer tests: ``Materializer.local(clock=ManualClock())``; for event time,
``TestStream`` (a scripted source of timestamped elements, watermarks and idle markers)."""
from .clock import ManualClock
from .signals import Recording, Scripted
from .probes import TestPublisherProbe, TestSink, TestSource, TestSubscriberProbe
from .stages_stopped import assert_all_stages_stopped
from .test_stream import TestStream

__all__ = [
    "TestSource",
    "TestSink",
    "TestPublisherProbe",
    "TestSubscriberProbe",
    "TestStream",
    "ManualClock",
    "Scripted",
    "Recording",
    "assert_all_stages_stopped",
]
