"""What a call returns (results.py): completions in prompt order, and its stats."""

import pytest

from newrllama4.results import Completion, ParallelResult, Stats


def completion(text, reason="stop"):
    return Completion(text, [1, 2], 3, 2, 0, reason)


def test_a_result_is_a_sequence_of_completions_in_prompt_order():
    result = ParallelResult([completion("a"), completion("b", "length")], Stats(prompts=2))
    assert len(result) == 2 and result[1].text == "b" and [c.text for c in result[:1]] == ["a"]
    assert result.texts == ["a", "b"] and list(result) == [result[0], result[1]]
    assert repr(result) == "<ParallelResult: 2 completions, 0 failed, 0.0 tok/s>"


def test_rates_and_overhead_are_derived_once_the_counters_are_final():
    stats = Stats(prompt_tokens=100, generated_tokens=30, prefill_seconds=2.0, decode_seconds=1.0,
                  sample_seconds=0.5, total_seconds=6.0)
    stats.close()
    assert stats.prompt_tokens_per_s == 50.0 and stats.generation_tokens_per_s == 5.0
    assert stats.overhead_seconds == pytest.approx(2.5)
    idle = Stats()
    idle.close()
    assert (idle.prompt_tokens_per_s, idle.generation_tokens_per_s, idle.overhead_seconds) == (0.0, 0.0, 0.0)
    assert stats.to_dict()["prompt_tokens"] == 100 and set(stats.to_dict()) == set(Stats.__dataclass_fields__)
