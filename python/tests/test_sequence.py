"""One prompt on its way through the engine (sequence.py): incremental, UTF-8-safe text and stop strings, without a model."""

from newrllama4.sequence import OutputText


def feed(pieces, stop=()):
    text = OutputText(tuple(stop))
    stopped = False
    for piece in pieces:
        if text.append(piece):
            stopped = True
            break
    text.finish()
    return text.text, stopped


def test_a_character_split_over_tokens_comes_out_whole():
    snowman = "☃".encode()  # three bytes
    text = OutputText(())
    text.append(b"a" + snowman[:1])
    assert text.text == "a"  # half a character is held back, not shown as garbage
    text.append(snowman[1:2])
    assert text.text == "a"
    text.append(snowman[2:] + b"b")
    assert text.text == "a☃b"


def test_an_unfinished_character_at_the_end_becomes_one_replacement_char():
    assert feed([b"ok", "é".encode()[:1]]) == ("ok\ufffd", False)


def test_stop_string_across_token_boundaries_is_cut_out():
    assert feed([b"Answer: yes", b"\n", b"#", b"## more"], stop=["\n###"]) == ("Answer: yes", True)


def test_earliest_of_several_stop_strings_wins():
    assert feed([b"one, two. three"], stop=[".", ","]) == ("one", True)


def test_no_stop_string_keeps_everything():
    assert feed([b"one", b" two"], stop=["three"]) == ("one two", False)


def test_a_stop_string_inside_a_multibyte_character_boundary():
    euro = "€".encode()
    assert feed([b"cost 5", euro[:2], euro[2:], b" total"], stop=["€"]) == ("cost 5", True)
