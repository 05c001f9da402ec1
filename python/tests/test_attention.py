"""attention.py: which tokens take the tiled kernel, and the throwaway rows that keep a
batch on its kernels in as few of llama.cpp's passes as may be (on their own, then in
the engine on the tiny model)."""

import newrllama4 as nl
from newrllama4.attention import PASS_ROWS, TILE, one_row_length, restorable, throwaway_rows, tiled_end


def test_the_tiled_part_is_the_whole_tiles_short_of_the_last_tile():
    assert [tiled_end(n) for n in (0, 63, 64, 127, 128, 129, 191, 192, 300)] == [0, 0, 0, 0, 64, 64, 64, 128, 192]


def test_prompts_of_one_instruction_and_short_texts_restore_all_of_it():
    for instruction in (150, 187, 192, 209):
        for text in range(1, TILE + 1):
            n_tiled = tiled_end(instruction + text)
            assert n_tiled <= instruction  # counted from the end, it was past the instruction for most texts
            assert restorable(instruction, n_tiled, n_tiled) == instruction


def no_slot(slot):
    raise AssertionError(f"slot {slot} is not a gap")


def test_one_row_chunks_are_padded_to_the_longest():
    assert throwaway_rows([(0, 10, 5), (1, 40, 9), (2, 0, 9)], no_slot, room=100, length=9) == [(0, 15, 4)]


def test_tiled_chunks_get_no_rows():
    assert throwaway_rows([(0, 0, TILE), (1, 64, TILE)], no_slot, room=100, length=TILE) == []
    assert throwaway_rows([], no_slot, room=100, length=0) == []


def test_short_gaps_are_filled_from_each_slots_next_position():
    next_position = {1: 30, 2: 0, 3: 7}.get
    rows = throwaway_rows([(0, 10, 2), (3, 5, 2)], next_position, room=100, length=2)
    assert rows == [(1, 30, 2), (2, 0, 2)]  # 2 slots x 2 rows <= PASS_ROWS: one run of slots 0-3


def test_a_gap_too_long_or_without_room_is_left_as_two_runs():
    long = PASS_ROWS // 2 + 1
    assert throwaway_rows([(0, 0, long), (3, 0, long)], {1: 0, 2: 0}.get, room=100, length=long) == []
    assert throwaway_rows([(0, 0, 1), (2, 0, 1)], {1: 0}.get, room=0, length=1) == [(0, 1, 1), (2, 1, 1)]  # companions


def test_a_lone_token_gets_a_companion_unless_a_gap_row_joins_it_to_a_neighbour():
    assert throwaway_rows([(4, 17, 1)], no_slot, room=100, length=1) == [(4, 18, 1)]
    assert throwaway_rows([(0, 9, 1), (1, 3, 1)], no_slot, room=100, length=1) == []
    assert throwaway_rows([(0, 9, 1), (2, 3, 1)], {1: 12}.get, room=100, length=1) == [(1, 12, 1)]
    assert throwaway_rows([(0, 9, 2)], no_slot, room=100, length=2) == []  # two rows are not the KV-split kernel's one


def test_a_chunk_longer_than_the_padded_length_is_left_to_a_pass_of_its_own():
    # a prompt others wait for takes its whole chunk beside shorter ones (Scheduler._equal_prefill)
    assert throwaway_rows([(0, 10, 5), (1, 40, 9), (2, 0, 30)], no_slot, room=100, length=9) == [(0, 15, 4)]
    assert throwaway_rows([(0, 9, 1), (1, 3, 40)], no_slot, room=100, length=1) == []  # one run: no companion
    assert throwaway_rows([(0, 9, 1), (3, 0, 40)], {1: 0, 2: 0}.get, room=0, length=1) == [(0, 10, 1)]
    assert throwaway_rows([(3, 0, 40)], no_slot, room=100, length=1) == []  # 40 rows are not the KV-split kernel's one


def test_one_row_chunks_advance_by_the_cut_that_spends_the_fewest_rows_and_passes():
    assert one_row_length([20, 20, 20]) == 20
    assert one_row_length([20, 22, 21, 19]) == 22  # padding 6 rows beats three more passes
    assert one_row_length([5, 48, 48, 48]) == 5  # a pass more beats padding the 5 by 43 rows
    assert one_row_length([1, 1, 1, 1, 1, 1, 1, 60]) == 1  # 7 x 59 rows of padding cost more than a pass
    # eight chunks: 22 rows now, then the longer ones in two more passes (318 row-equivalents
    # against 400 for one pass padded to 48)
    assert one_row_length([20, 25, 30, 48, 48, 48, 20, 22]) == 22


def test_one_row_prompts_of_different_lengths_take_one_llama_decode_call(model):
    # before throwaway rows, prompts advanced together by the shortest: four calls here
    prompts = [[5 + i] * n for i, n in enumerate((12, 14, 16, 18))]
    assert one_row_length([12, 14, 16, 18]) == 18
    with nl.Context(model, n_ctx=128, n_seq_max=4, prefix_cache=False) as ctx:
        result = ctx.generate_parallel(prompts, max_tokens=1, temperature=0)
    assert result.stats.llama_decode_calls == 1
    with nl.Context(model, n_ctx=128, n_seq_max=1, prefix_cache=False) as ctx:
        assert [c.tokens for c in result] == [c.tokens for c in ctx.generate_parallel(prompts, max_tokens=1, temperature=0)]
