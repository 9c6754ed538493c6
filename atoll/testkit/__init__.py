"""Stream test kit: probes that drive and observe a stream from a test (Pekko's StreamTestKit), and a
manual (virtual) clock for timer tests: ``Materializer.local(clock=ManualClock())``."""
from .clock import ManualClock
from .signals import Recording, Scripted
from .probes import TestPublisherProbe, TestSink, TestSource, TestSubscriberProbe
from .stages_stopped import assert_all_stages_stopped

__all__ = [
    "TestSource",
    "TestSink",
    "TestPublisherProbe",
    "TestSubscriberProbe",
    "ManualClock",
    "Scripted",
    "Recording",
    "assert_all_stages_stopped",
]
