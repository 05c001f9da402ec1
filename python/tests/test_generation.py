"""What every context offers (generation.py): generate_parallel's arguments and their defaults."""

import dataclasses
import inspect

import newrllama4 as nl


def test_the_sampling_defaults_are_sampling_params_own():
    signature = inspect.signature(nl.Context.generate_parallel).parameters
    for field in dataclasses.fields(nl.SamplingParams):
        assert signature[field.name].default == getattr(nl.SamplingParams, field.name), field.name
    assert nl.SamplingParams().stop == () and nl.SamplingParams(stop="x").stop == ("x",)


def test_every_context_takes_the_same_arguments():
    base = inspect.signature(nl.Context.generate_parallel)
    assert inspect.signature(nl.RemoteContext.generate_parallel) == base
    assert inspect.signature(nl.worker.WorkerContext.generate_parallel) == base
