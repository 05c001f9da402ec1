"""The scheduler on its own: slots, continuous batching and batch composition."""

import pytest

from newrllama4.attention import TILE, tiled_end
from newrllama4.scheduler import Scheduler
from newrllama4.sequence import Sequence


def sequences(*lengths):
    return [Sequence(i, list(range(1, n + 1)), ()) for i, n in enumerate(lengths)]


def test_admits_at_most_one_sequence_per_slot_with_distinct_seq_ids():
    scheduler = Scheduler(n_slots=3, n_batch=64, separate_phases=True)
    scheduler.add(sequences(5, 5, 5, 5, 5))
    admitted = scheduler.admit()
    assert [s.index for s in admitted] == [0, 1, 2]
    assert sorted(s.slot for s in admitted) == [0, 1, 2]
    assert len(scheduler.waiting) == 2


def test_a_retired_slot_goes_to_the_next_waiting_prompt():
    scheduler = Scheduler(n_slots=2, n_batch=64, separate_phases=True)
    scheduler.add(sequences(3, 3, 3))
    first, second = scheduler.admit()
    scheduler.retire(first)
    (third,) = scheduler.admit()
    assert third.index == 2 and third.slot == first.slot
    assert scheduler.running == [second, third]


def test_one_row_chunks_of_different_lengths_go_in_one_batch():
    # these prompts have no tiled part, so any chunk under a tile serves them; the engine
    # pads the shorter to the longer (attention.throwaway_rows), one pass of llama.cpp's
    scheduler = Scheduler(n_slots=2, n_batch=8, separate_phases=True)  # chunks of 8 // 2 = 4 tokens
    first, second = sequences(10, 6)
    scheduler.add([first, second])
    scheduler.admit()

    def step():
        plan = scheduler.next_batch()
        for sequence, n in plan:
            sequence.n_cached += n
        return [(s.index, n) for s, n in plan]

    assert step() == [(0, 4), (1, 4)]
    assert step() == [(0, 4), (1, 2)]
    assert step() == [(0, 2)]
    assert not first.prefilling and not second.prefilling


def test_equal_chunks_fill_the_batch_and_no_more():
    scheduler = Scheduler(n_slots=4, n_batch=8, separate_phases=True)
    scheduler.add(sequences(2, 2, 2, 2, 2))
    scheduler.admit()
    assert [(s.index, n) for s, n in scheduler.next_batch()] == [(0, 2), (1, 2), (2, 2), (3, 2)]


def test_mixed_phases_pack_several_prompts_into_one_prefill_batch():
    scheduler = Scheduler(n_slots=2, n_batch=8, separate_phases=False)
    scheduler.add(sequences(6, 6))
    scheduler.admit()
    assert [(s.index, n) for s, n in scheduler.next_batch()] == [(0, 6), (1, 2)]


def _generating(sequence):
    sequence.n_cached = sequence.n_prompt
    sequence.tokens.append(99)
    return sequence


def test_separate_phases_never_mix_prompt_and_generation_tokens():
    scheduler = Scheduler(n_slots=3, n_batch=64, separate_phases=True)
    old, new = sequences(4, 4)
    scheduler.add([_generating(old), new])
    scheduler.admit()
    assert [(s.index, n) for s, n in scheduler.next_batch()] == [(1, 4)]
    _generating(new)
    assert [(s.index, n) for s, n in scheduler.next_batch()] == [(0, 1), (1, 1)]


def test_mixed_phases_put_generation_tokens_first_then_prompt_chunks():
    scheduler = Scheduler(n_slots=3, n_batch=4, separate_phases=False)
    old, new = sequences(4, 6)
    scheduler.add([_generating(old), new])
    scheduler.admit()
    assert [(s.index, n) for s, n in scheduler.next_batch()] == [(0, 1), (1, 3)]


def _tiled(*lengths):
    batch = sequences(*lengths)
    for sequence in batch:
        sequence.n_tiled = tiled_end(sequence.n_prompt)
    return batch


def _run_prefill(scheduler):
    """Every prefill batch the scheduler plans, as (index, first position, length)."""
    batches = []
    while any(s.prefilling for s in scheduler.running):
        plan = scheduler.next_batch()
        batches.append([(s.index, s.n_cached, n) for s, n in plan])
        for sequence, n in plan:
            sequence.n_cached += n
            if sequence.snapshot_at and sequence.snapshot_at[0] == sequence.n_cached:
                sequence.snapshot_at.pop(0)  # snapshotted, as PrefixPlan.after_decode does
    return batches


@pytest.mark.parametrize("n_slots, n_batch", [(8, 512), (4, 64), (1, 512), (3, 100), (16, 512), (6, 16)])
def test_whole_tiles_go_in_chunks_of_64_or_more_and_the_rest_in_fewer(n_slots, n_batch):
    scheduler = Scheduler(n_slots=n_slots, n_batch=n_batch, separate_phases=True)
    batch = _tiled(64, 65, 100, 127, 128, 129, 300, 63, 5, 1)
    batch[4].snapshot_at = [64]  # a snapshot point, at a whole tile
    scheduler.add(batch)
    scheduler.admit()
    for plan in _run_prefill(scheduler):
        lengths = {n for _, _, n in plan}
        assert len(lengths) == 1 or max(lengths) < TILE  # one-row chunks are padded to the longest
        assert max(lengths) * len(plan) <= scheduler.capacity
        assert [s for s, _, _ in plan] == sorted(s for s, _, _ in plan)  # slot order (index = slot here)
        for index, start, n in plan:
            tiled = batch[index].n_tiled
            assert (n >= TILE and n % TILE == 0 and start + n <= tiled) if start < tiled else n < TILE


def test_label_tokens_after_a_tiled_question_take_chunks_of_their_own():
    scheduler = Scheduler(n_slots=2, n_batch=512, separate_phases=True)
    (scoring,) = sequences(70)
    scoring.n_tiled = 64  # the whole tile of a 66-token question, then its last 2 tokens and 4 label tokens
    scheduler.add([scoring])
    scheduler.admit()
    assert _run_prefill(scheduler) == [[(0, 0, 64)], [(0, 64, 6)]]


def test_prompts_others_wait_for_go_first_and_take_their_whole_one_row_chunk():
    # B and C decode shared prefixes (PrefixPlan marks them awaited): B's tiled chunk goes
    # before A's one-row one, then B and C advance as far as they may beside A's shorter
    # chunk, their rest a pass of llama.cpp's of its own (the engine pads A only to 30)
    scheduler = Scheduler(n_slots=3, n_batch=192, separate_phases=True)  # one-row chunks up to 63
    a, b, c = _tiled(30, 200, 100)
    b.n_cached = 64  # restored its first tile
    c.snapshot_at = [50]
    b.awaited = c.awaited = True
    scheduler.add([a, b, c])
    scheduler.admit()
    assert _run_prefill(scheduler)[:2] == [[(1, 64, 64)], [(0, 0, 30), (1, 128, 63), (2, 0, 50)]]


def test_admission_asks_about_a_bounded_number_of_waiting_prompts_per_step():
    # every prompt waits for one shared prefix: each step asks about a few, not all 10,000
    from newrllama4.scheduler import HELD_BACK_PER_SLOT

    scheduler = Scheduler(n_slots=4, n_batch=64, separate_phases=True)
    scheduler.add(sequences(*[5] * 10_000))
    for step in range(4):
        asked = []
        admitted = scheduler.admit(lambda s: asked.append(s.index) or False)
        # nothing running: the first starts anyway
        assert [s.index for s in admitted] == ([0] if step == 0 else [])
        assert len(asked) <= HELD_BACK_PER_SLOT * 4 + 1
    assert [s.index for s in scheduler.waiting][:3] == [1, 2, 3]  # order kept
    # once they can start they fill the free slots, in order
    assert [s.index for s in scheduler.admit(lambda s: True)] == [1, 2, 3]


def test_a_prompt_that_can_start_behind_a_few_waiting_ones_still_starts():
    scheduler = Scheduler(n_slots=2, n_batch=64, separate_phases=True)
    scheduler.add(sequences(5, 5, 5, 5))
    scheduler.admit(lambda s: True and s.index == 0)
    (started,) = scheduler.admit(lambda s: s.index == 3)
    assert started.index == 3
    assert [s.index for s in scheduler.waiting] == [1, 2]
