"""Argument checks shared by the entry points (checks.py)."""

import pytest

import newrllama4 as nl
from newrllama4.checks import per_prompt


def is_word(value):
    return isinstance(value, str)


def test_one_value_or_none_serves_every_prompt():
    assert per_prompt("grammar", "g", 3, is_word, "a word") == [("grammar", "g")] * 3
    assert per_prompt("grammar", None, 2, is_word, "a word") == [("grammar", None)] * 2


def test_a_list_gives_each_prompt_its_own_value_named_by_its_index():
    assert per_prompt("grammar", ["a", None], 2, is_word, "a word") == [("grammar[0]", "a"), ("grammar[1]", None)]


@pytest.mark.parametrize("value", [["a", "b", "c"], ["a", 1], 7])
def test_anything_else_names_the_argument_and_the_number_of_prompts(value):
    with pytest.raises(nl.InvalidArgumentError, match="a list of 2 of them") as raised:
        per_prompt("grammar", value, 2, is_word, "a word")
    assert raised.value.argument == "grammar"
