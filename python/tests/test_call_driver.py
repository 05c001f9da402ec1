"""The call driver (call_driver.py) on its own: the result cache and progress around what computes answers."""

import sqlite3

from newrllama4.call_driver import CallDriver, windows
from newrllama4.errors import EmptyPromptError
from newrllama4.result_cache import CachedCall
from newrllama4.results import Completion, Stats
from newrllama4.sampling import SamplingParams

PROMPTS = ["a", "b", "c"]


def cached_call(path):
    return CachedCall(str(path), "server:m", {}, SamplingParams(temperature=0), [None] * 3, [None] * 3)


def stored_rows(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM answers").fetchone()[0]


def test_each_answer_is_committed_before_the_progress_callback_hears_of_it(tmp_path):
    path = tmp_path / "answers.sqlite"
    seen = []
    with CallDriver(3, lambda done, total: seen.append((done, total, stored_rows(path))), cached_call(path)) as driver:
        assert driver.look_up(range(3), PROMPTS.__getitem__) == [0, 1, 2] and seen == []
        driver.finish(1, Completion("B", [], 1, 1, 0, "stop"))
        driver.finish(0, Completion("", [], 0, 0, 0, "error", EmptyPromptError(0)))  # failures are not stored
        driver.finish(2, Completion("C", [], 1, 1, 0, "stop"))
    assert seen == [(1, 3, 1), (2, 3, 1), (3, 3, 2)]
    result = driver.result(Stats(seed=0))
    assert [c.text for c in result] == ["", "B", "C"]
    assert (result.stats.prompts, result.stats.failures, result.stats.result_cache_hits) == (3, 1, 0)


def test_answers_found_are_reported_at_once_and_the_others_left_to_compute(tmp_path):
    path = tmp_path / "answers.sqlite"
    with CallDriver(3, None, cached_call(path)) as driver:
        driver.look_up(range(3), PROMPTS.__getitem__)
        driver.finish(1, Completion("B", [], 1, 1, 0, "stop"))
    seen = []
    with CallDriver(3, lambda done, total: seen.append(done), cached_call(path)) as driver:
        # a prompt without a key (one that fails before it runs) is not looked up
        assert driver.look_up(range(3), lambda i: None if i == 2 else PROMPTS[i]) == [0, 2]
    assert seen == [1] and driver.completions[1].from_cache and driver.n_hits == 1
    # without a result cache nothing is looked up, and no key is asked for
    assert CallDriver(3).look_up(range(3), lambda i: 1 / 0) == [0, 1, 2]


def test_windows_split_the_prompts_in_order():
    assert [list(w) for w in windows(range(5), 2)] == [[0, 1], [2, 3], [4]]
    assert [list(w) for w in windows([3, 7, 9], 4)] == [[3, 7, 9]]
    assert list(windows([], 4)) == []
