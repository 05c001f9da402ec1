"""A context's arguments (context_settings.py): checked once, with one source for their defaults."""

import inspect

import pytest

import newrllama4 as nl
from newrllama4.context_settings import ContextSettings, default_threads


@pytest.mark.parametrize(
    "argument, value",
    [("n_ctx", 0), ("n_seq_max", 0), ("n_seq_max", -1), ("n_batch", 2), ("n_threads", 0), ("batch_invariant", "yes")],
)
def test_bad_context_arguments(model, argument, value):
    kwargs = {"n_seq_max": 4, argument: value}
    with pytest.raises(nl.InvalidArgumentError, match=argument):
        nl.Context(model, **kwargs)


def test_the_context_s_defaults_are_the_settings_own():
    parameters = inspect.signature(nl.Context.__init__).parameters
    settings = ContextSettings()
    for name in ("n_ctx", "n_seq_max", "n_batch", "n_threads", "batch_invariant", "prefix_cache", "prefix_cache_mb"):
        assert parameters[name].default == getattr(ContextSettings, name), name
    assert settings.n_threads == default_threads() >= 1


def test_settings_take_context_s_arguments_in_its_order():
    assert ContextSettings(64, 2, 16, 1, False).batch_invariant is False
    assert ContextSettings(n_ctx=64.0).n_ctx == 64  # R's whole numbers arrive as doubles
