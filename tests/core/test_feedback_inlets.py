"""Feedback inputs of cycles (``atoll._impl.islands.feedback``), on island plans written by hand: which fan-in
inlets the watermark valve leaves out."""
from __future__ import annotations

from atoll import Broadcast, Merge, Zip
from atoll._impl.islands.feedback import feedback_inlets
from atoll._impl.islands.island_plan import AddStage, AssignPort, IslandPlan, PublishOutput, TakeInput
from atoll._impl.ops.transform import Map
from atoll.stage.attributes import Attributes


class Plan:
    """Writes an island plan: ``stage(module)`` adds a stage, ``wire(a, out, b, in)`` connects two of them."""

    def __init__(self, index=0):
        self.plan = IslandPlan(f"island-{index}", index, Attributes.none)
        self.slots = 0

    def stage(self, module) -> int:
        return self.plan.add_stage(AddStage(module, Attributes.none))

    def wire(self, a: int, out: int, b: int, in_: int) -> None:
        slot = self.slots
        self.slots += 1
        self.plan.steps.append(AssignPort(a, False, out, slot))
        self.plan.steps.append(AssignPort(b, True, in_, slot))


def test_a_dag_has_no_feedback_inputs():
    p = Plan()
    a, b, m = p.stage(Map(abs)), p.stage(Map(abs)), p.stage(Merge(2))
    p.wire(a, 0, m, 0)
    p.wire(b, 0, m, 1)
    assert feedback_inlets([p.plan]) == {}


def test_the_merge_input_that_closes_a_loop_is_feedback():
    p = Plan()
    src, m, bc, step = p.stage(Map(abs)), p.stage(Merge(2)), p.stage(Broadcast(2)), p.stage(Map(abs))
    p.wire(src, 0, m, 0)
    p.wire(m, 0, bc, 0)
    p.wire(bc, 1, step, 0)
    p.wire(step, 0, m, 1)
    assert feedback_inlets([p.plan]) == {0: {m: (1,)}}


def test_a_loop_across_islands_is_found_through_its_channels():
    head, body = Plan(0), Plan(1)
    src, m, bc = head.stage(Map(abs)), head.stage(Merge(2)), head.stage(Broadcast(2))
    head.wire(src, 0, m, 0)
    head.wire(m, 0, bc, 0)
    head.plan.steps.append(PublishOutput(bc, 1, 7))  # channel 7: head -> body
    step = body.stage(Map(abs))
    body.plan.steps.append(AssignPort(step, True, 0, 0))
    body.plan.steps.append(TakeInput(0, 0, 7))
    body.plan.steps.append(PublishOutput(step, 0, 8))  # channel 8: body -> head
    head.plan.steps.append(AssignPort(m, True, 1, 5))
    head.plan.steps.append(TakeInput(5, 1, 8))
    assert feedback_inlets([head.plan, body.plan]) == {0: {m: (1,)}}


def test_a_zip_fed_twice_inside_the_loop_keeps_both_inputs():
    p = Plan()
    src, m, bc, z, bc2 = (p.stage(Map(abs)), p.stage(Merge(2)), p.stage(Broadcast(2)), p.stage(Zip()),
                          p.stage(Broadcast(2)))
    p.wire(src, 0, m, 0)
    p.wire(m, 0, bc, 0)
    p.wire(bc, 0, z, 0)
    p.wire(bc, 1, z, 1)
    p.wire(z, 0, bc2, 0)
    p.wire(bc2, 1, m, 1)
    # Zip's inputs are both in the loop: leaving both out would stop time there, so neither is
    assert feedback_inlets([p.plan]) == {0: {m: (1,)}}
