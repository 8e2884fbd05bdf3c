"""The ring of output buffers (vclip/_loader/handoff.py): buffers allocated as slots are first used,
slots taken in turn among those the batches in flight need."""

from __future__ import annotations

import numpy as np
from helpers import require_extra

require_extra("torch")
from vclip._loader.handoff import BufferRing, CpuHandoff  # noqa: E402 (needs torch)


def test_slots_go_round_among_those_in_use_and_the_ring_grows_with_them():
    ring = BufferRing(7, lambda: np.zeros(4, np.uint8), CpuHandoff())
    slots = [ring.next_slot(5) for _ in range(7)]
    assert slots == [0, 1, 2, 3, 4, 0, 1]  # depth 2 and three beyond: five slots
    for slot in set(slots):
        ring.prepare(slot)
    assert ring.allocated == 5  # the two slots of a depth never reached hold nothing
    assert [ring.next_slot(6) for _ in range(5)] == [2, 3, 4, 5, 0]  # the depth grew: a sixth slot joins
    assert [ring.next_slot() for _ in range(8)] == [1, 2, 3, 4, 5, 6, 0, 1]  # all of them by default
