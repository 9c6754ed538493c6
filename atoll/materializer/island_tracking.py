"""IslandTracking: maps the traversal's global slots to island-local ones in one pass.

Every ``EnterIsland``/``ExitIsland`` closes a *segment* (a contiguous run of global slots belonging to
one island). An enclosed island leaves a hole in its parent, which is compensated by counting the
skipped slots, so each island sees a contiguous local slot space. Output wiring is resolved as:

* backward, same segment -> local wire;
* backward, earlier segment -> find the segment; same phase -> local wire, else cross-island
  (``create_publisher`` in the producer's phase, ``take_publisher`` in the consumer's);
* forward (target slot not visited yet) -> remembered and resolved when ``wire_in`` reaches it.

None of this bookkeeping is allocated for a graph without islands.
"""
from __future__ import annotations

import bisect
from typing import Any, Callable, List, Optional


class _Segment:
    __slots__ = ("island_global_offset", "length", "global_base_offset", "relative_base_offset", "phase")

    def __init__(self, island_global_offset, length, global_base_offset, relative_base_offset, phase):
        self.island_global_offset = island_global_offset
        self.length = length
        self.global_base_offset = global_base_offset
        self.relative_base_offset = relative_base_offset
        self.phase = phase

    def __repr__(self):
        return (
            f"Segment(base={self.global_base_offset}, len={self.length}, "
            f"relative_base={self.relative_base_offset}, phase={self.phase.name})"
        )


class _SavedIsland:
    __slots__ = ("island_global_offset", "last_visited_offset", "skipped_slots", "phase")

    def __init__(self, island_global_offset, last_visited_offset, skipped_slots, phase):
        self.island_global_offset = island_global_offset
        self.last_visited_offset = last_visited_offset
        self.skipped_slots = skipped_slots
        self.phase = phase


class IslandTracking:
    """Slot bookkeeping of one materialization; see the module docstring."""

    def __init__(self, make_phase: Callable[[Any, Any, int], Any], top_attributes, debug: Optional[Callable[[str], None]] = None):
        self._make_phase = make_phase
        self._island_count = 0
        self.current_phase = make_phase(None, top_attributes, self._next_island())
        self.phases: List[Any] = [self.current_phase]
        self.current_global_offset = 0
        self._segment_global_offset = 0
        self._island_global_offset = 0
        self._skipped_slots = 0
        self._segments: Optional[List[_Segment]] = None
        self._segment_bases: Optional[List[int]] = None
        self._stack: Optional[List[_SavedIsland]] = None
        self._forward_keys: Optional[List[int]] = None
        self._forward_values: Optional[List[tuple]] = None
        self._debug = debug

    def _next_island(self) -> int:
        n = self._island_count
        self._island_count += 1
        return n

    def _complete_segment(self) -> None:
        length = self.current_global_offset - self._segment_global_offset
        if self._stack is None:
            self._stack = []
        if length > 0:
            seg = _Segment(
                self._island_global_offset,
                length,
                self._segment_global_offset,
                self._segment_global_offset - self._island_global_offset - self._skipped_slots,
                self.current_phase,
            )
            if self._segments is None:
                self._segments = []
                self._segment_bases = []
            self._segments.append(seg)
            self._segment_bases.append(seg.global_base_offset)
            if self._debug:
                self._debug(f"  completed {seg}")

    def enter_island(self, tag, attributes) -> None:
        self._complete_segment()
        self._stack.append(
            _SavedIsland(self._island_global_offset, self.current_global_offset, self._skipped_slots, self.current_phase)
        )
        self.current_phase = self._make_phase(tag, attributes, self._next_island())
        self.phases.append(self.current_phase)
        self._island_global_offset = self.current_global_offset
        self._segment_global_offset = self.current_global_offset
        self._skipped_slots = 0
        if self._debug:
            self._debug(f"  enter island {self.current_phase.name} at offset {self.current_global_offset}")

    def exit_island(self) -> None:
        parent = self._stack.pop()
        self._complete_segment()
        self._segment_global_offset = self.current_global_offset
        self._island_global_offset = parent.island_global_offset
        self.current_phase = parent.phase
        self._skipped_slots = parent.skipped_slots + (self.current_global_offset - parent.last_visited_offset)
        if self._debug:
            self._debug(f"  exit to island {self.current_phase.name} (skipped {self._skipped_slots} slots)")

    def wire_in(self, in_, handle) -> None:
        local = self.current_global_offset - self._island_global_offset - self._skipped_slots
        if self._debug:
            self._debug(f"  wire {in_} at global {self.current_global_offset} -> local {local}")
        self.current_phase.assign_port(in_, local, handle)
        if self._forward_keys:
            i = bisect.bisect_left(self._forward_keys, self.current_global_offset)
            while i < len(self._forward_keys) and self._forward_keys[i] == self.current_global_offset:
                del self._forward_keys[i]
                out, out_handle, phase = self._forward_values.pop(i)
                if phase is self.current_phase:
                    if self._debug:
                        self._debug(f"    resolved forward wire {out} -> local {local}")
                    phase.assign_port(out, local, out_handle)
                else:
                    if self._debug:
                        self._debug(f"    resolved forward cross-island wire {out} -> {self.current_phase.name}:{local}")
                    publisher = phase.create_publisher(out, out_handle)
                    self.current_phase.take_publisher(local, publisher, None)
        self.current_global_offset += 1

    def wire_out(self, out, absolute_slot: int, handle) -> None:
        if absolute_slot < self.current_global_offset:
            if absolute_slot >= self._segment_global_offset:
                local = absolute_slot - self._island_global_offset - self._skipped_slots
                if self._debug:
                    self._debug(f"  wire {out} -> global {absolute_slot}: in-segment, local {local}")
                self.current_phase.assign_port(out, local, handle)
                return
            i = bisect.bisect_right(self._segment_bases, absolute_slot) - 1
            seg = self._segments[i]
            local = absolute_slot - seg.global_base_offset + seg.relative_base_offset
            if seg.phase is self.current_phase:
                if self._debug:
                    self._debug(f"  wire {out} -> global {absolute_slot}: cross-segment, local {local}")
                self.current_phase.assign_port(out, local, handle)
            else:
                if self._debug:
                    self._debug(f"  wire {out} -> global {absolute_slot}: cross-island to {seg.phase.name}:{local}")
                publisher = self.current_phase.create_publisher(out, handle)
                seg.phase.take_publisher(local, publisher, None)
        else:
            if self._forward_keys is None:
                self._forward_keys = []
                self._forward_values = []
            i = bisect.bisect_right(self._forward_keys, absolute_slot)
            self._forward_keys.insert(i, absolute_slot)
            self._forward_values.insert(i, (out, handle, self.current_phase))
            if self._debug:
                self._debug(f"  wire {out} -> global {absolute_slot}: forward, remembered")

    def check_done(self) -> None:
        if self._forward_keys:
            raise RuntimeError(f"unresolved forward wires to global slots {self._forward_keys}")
