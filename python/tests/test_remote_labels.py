"""Labels on servers (remote/labels.py): grammars, answers and probabilities from top log-probabilities."""

import math

import pytest

from newrllama4.remote.labels import answer_label, label_grammar, label_probs


def test_label_grammar_escapes_what_gbnf_needs():
    assert label_grammar(("a", 'b"c', "d\\e\n")) == 'root ::= " "? ("a" | "b\\"c" | "d\\\\e\\n")'


def test_answers_name_labels_with_or_without_a_space():
    assert answer_label(("yes", "no"), " no") == "no"
    assert answer_label(("yes", "no"), "yes") == "yes"
    assert answer_label(("yes", "no"), "maybe") is None


def test_label_probabilities_come_from_the_tokens_that_begin_one_label():
    top = [(" yes", -0.5), ("no", -1.0), (" nop", -2.0), (" ", -3.0), ("", -3.0), ("maybe", -0.1)]
    probs = label_probs(("yes", "no", "nope"), top)
    # "no" begins two labels, " " and "" all of them, "maybe" none: left out
    total = math.exp(-0.5) + math.exp(-2.0)
    assert probs == pytest.approx([math.exp(-0.5) / total, 0.0, math.exp(-2.0) / total])
    assert label_probs(("yes", "no"), [("maybe", -0.1)]) is None
