"""The batch sampler against a slow, row-by-row reference of the documented semantics."""

import copy
import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import newrllama4 as nl
from newrllama4 import _top_k
from newrllama4.sampling import BatchSampler, SamplingParams, sequence_generator


def reference_sample(row, history, params, generator):
    """BatchSampler's documented steps, one row at a time, with a full sort."""
    logits = row.astype(np.float32).copy()
    if params.repeat_last_n > 0 and params.penalty_repeat != 1.0:
        for token in set(history[-params.repeat_last_n:]):
            value = logits[token]
            logits[token] = value / np.float32(params.penalty_repeat) if value > 0 else value * np.float32(params.penalty_repeat)
    if params.temperature == 0:
        best = logits.max()
        return min(i for i in range(len(logits)) if logits[i] == best)
    no_cut = params.top_k == 0 and params.top_p == 1.0 and params.min_p == 0.0
    # a full stable sort: ties keep the lower id first (numpy's, so that a 262,144-logit row takes milliseconds)
    ranked = list(range(len(logits))) if no_cut else np.argsort(-logits, kind="stable").tolist()
    if params.top_k:
        ranked = ranked[:params.top_k]
    scaled = logits[ranked] / params.temperature
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    keep = [True] * len(ranked)
    if params.top_p < 1.0:
        mass = np.float32(0)
        for i, p in enumerate(probs):
            keep[i] = mass < params.top_p
            mass += p
    if params.min_p > 0.0:
        keep = [k and p >= params.min_p * probs.max() for k, p in zip(keep, probs)]
    keep = [k and p > 0 for k, p in zip(keep, probs)]  # refused tokens (-inf) never
    probs = np.where(keep, probs, np.float32(0))
    cumulative = np.cumsum(probs)
    threshold = generator.random() * cumulative[-1]
    chosen = next((i for i, c in enumerate(cumulative) if c > threshold), None)
    if chosen is None or not keep[chosen]:
        chosen = max(i for i, k in enumerate(keep) if k)
    return ranked[chosen]


GRID = [
    dict(temperature=t, top_k=k, top_p=p, min_p=m, penalty_repeat=r, repeat_last_n=n)
    for t, k, p, m, (r, n) in itertools.product(
        (0.0, 0.7, 1.5), (0, 1, 5, 40), (1.0, 0.9, 0.3), (0.0, 0.1), ((1.0, 64), (1.3, 8), (0.8, 64))
    )
]


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("params", GRID, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()))
def test_batch_sampler_matches_the_row_by_row_reference(params, ties, masked):
    rng = np.random.default_rng(len(str(params)) + ties)
    # 64 or 32 groups of tokens: the group path serves top_k 1 and 5, a full sort top_k 40;
    # a vocabulary of 3000 leaves ids past the last whole row of groups, one of 2048 does not
    n_rows, n_vocab = 6, 3000 if ties else 2048
    if ties:  # few distinct values: ranking ties everywhere
        logits = rng.integers(-4, 5, size=(n_rows, n_vocab)).astype(np.float32)
    else:
        logits = (rng.standard_normal((n_rows, n_vocab)) * 3).astype(np.float32)
    if masked:  # as a json_schema or grammar masks them: rows allowing 3 tokens (< top_k), or half
        for i in range(n_rows):
            refused = rng.permutation(n_vocab)[3:] if i < n_rows // 2 else rng.permutation(n_vocab)[: n_vocab // 2]
            logits[i, refused] = -np.inf
    histories = [list(rng.integers(0, n_vocab, size=30)) for _ in range(n_rows)]
    sampling = SamplingParams(**params, seed=5)
    for step in range(3):
        batch_generators = [sequence_generator(5, i) for i in range(n_rows)]
        reference_generators = [sequence_generator(5, i) for i in range(n_rows)]
        for _ in range(step):  # later draws of each stream, too
            for g in batch_generators + reference_generators:
                g.random()
        expected = [reference_sample(logits[i], histories[i], sampling, reference_generators[i]) for i in range(n_rows)]
        got = BatchSampler(sampling, n_vocab).sample(logits.copy(), histories, batch_generators)
        assert got.tolist() == expected


def test_a_row_samples_the_same_alone_as_in_any_batch():
    rng = np.random.default_rng(1)
    n_rows = 19
    logits = (rng.standard_normal((n_rows, 5000)) * 2).astype(np.float32)
    histories = [list(rng.integers(0, 5000, size=20)) for _ in range(n_rows)]
    sampler = BatchSampler(SamplingParams(), 5000)  # the defaults: temperature, top-k, top-p, penalty
    together = sampler.sample(logits.copy(), histories, [sequence_generator(9, i) for i in range(n_rows)])
    alone = [sampler.sample(logits[i:i + 1].copy(), histories[i:i + 1], [sequence_generator(9, i)])[0]
             for i in range(n_rows)]
    assert together.tolist() == alone


def test_a_row_samples_the_same_alone_as_in_any_batch_on_any_number_of_threads():
    # rows of Gemma's size, so that the top-k kernel shares them among threads
    rng = np.random.default_rng(2)
    n_rows, n_vocab = 7, 262_144
    logits = (rng.standard_normal((n_rows, n_vocab)) * 3).astype(np.float32)
    histories = [list(rng.integers(0, n_vocab, size=20)) for _ in range(n_rows)]
    alone = [BatchSampler(SamplingParams(), n_vocab).sample(logits[i:i + 1].copy(), histories[i:i + 1],
                                                            [sequence_generator(9, i)])[0] for i in range(n_rows)]
    for n_threads in (2, 3, 16):
        sampler = BatchSampler(SamplingParams(), n_vocab, n_threads)
        together = sampler.sample(logits.copy(), histories, [sequence_generator(9, i) for i in range(n_rows)])
        assert together.tolist() == alone


def sampled_as_the_reference(model, monkeypatch, prompts, max_tokens, **sampling):
    """Generates with the engine and checks every step's draws against reference_sample on
    the same logits, histories and random streams: the same tokens as any full stable sort
    of each row, so the same as the sampler before its top-k kernel changed. Returns how
    many rows were checked."""
    steps = []
    real = BatchSampler.sample

    def spy(self, logits, histories, generators):
        before = (logits.copy(), [list(h) for h in histories], [copy.deepcopy(g) for g in generators], self.params)
        tokens = real(self, logits, histories, generators)
        steps.append((before, tokens.tolist()))
        return tokens

    monkeypatch.setattr(BatchSampler, "sample", spy)
    with nl.Context(model, n_ctx=256, n_seq_max=len(prompts), n_threads=2) as ctx:
        ctx.generate_parallel(prompts, max_tokens=max_tokens, **sampling)
    for (logits, histories, generators, params), tokens in steps:
        assert tokens == [reference_sample(*row) for row in zip(logits, histories, [params] * len(tokens), generators)]
    return sum(len(tokens) for _, tokens in steps)


@pytest.mark.parametrize("seed", [1, 77])
def test_seeded_draws_on_the_tiny_model_are_the_reference_draws(model, monkeypatch, seed):
    prompts = ["once upon a time", "the king and the queen", "red river", "hello how are you today"]
    assert sampled_as_the_reference(model, monkeypatch, prompts, 24, seed=seed) > 4 * 4


@pytest.mark.slow
def test_seeded_draws_on_gemma_are_the_reference_draws(gemma, monkeypatch):
    # the R defaults (SamplingParams'), eight rows of 262,144 logits a step, shared between two threads
    prompts = [f"Here is a long, detailed essay about {topic}.\n\n" for topic in
               ("the ocean", "honey bees", "jazz music", "volcanoes", "the violin", "glaciers", "ancient Rome", "bread")]
    assert sampled_as_the_reference(gemma, monkeypatch, prompts, 16, seed=42) > 8 * 8


def test_draws_follow_the_probabilities():
    logits = np.log(np.array([[0.5, 0.3, 0.2, 1e-9]], dtype=np.float32))
    sampler = BatchSampler(SamplingParams(temperature=1.0, top_k=0, top_p=1.0, penalty_repeat=1.0), 4)
    generator = sequence_generator(3, 0)
    draws = [int(sampler.sample(logits.copy(), [[]], [generator])[0]) for _ in range(4000)]
    frequencies = np.bincount(draws, minlength=4) / len(draws)
    assert np.allclose(frequencies, [0.5, 0.3, 0.2, 0.0], atol=0.03)


def test_top_p_and_min_p_cut_the_unlikely_tokens():
    logits = np.log(np.array([[0.45, 0.35, 0.15, 0.05]], dtype=np.float32))
    for params, allowed in ((dict(top_p=0.7), {0, 1}), (dict(top_p=0.95), {0, 1, 2}), (dict(min_p=0.5), {0, 1})):
        sampling = SamplingParams(temperature=1.0, top_k=0, penalty_repeat=1.0, **{"top_p": 1.0, **params})
        generator = sequence_generator(4, 0)
        draws = {int(BatchSampler(sampling, 4).sample(logits.copy(), [[]], [generator])[0]) for _ in range(500)}
        assert draws == allowed


def test_the_engine_reads_each_sequence_its_own_row_of_logits(model):
    # rows of llama_get_logits follow the batch order: compare with llama_get_logits_ith
    import llama_cpp as llama
    from newrllama4 import engine

    seen = []
    real = engine.StepLoop._sample

    def spy(self, sequences):
        block = np.ctypeslib.as_array(llama.llama_get_logits(self.ctx), shape=(len(sequences), model.n_vocab))
        for row in range(len(sequences)):
            ith = np.ctypeslib.as_array(llama.llama_get_logits_ith(self.ctx, row - len(sequences)), shape=(model.n_vocab,))
            seen.append(np.array_equal(block[row], ith))
        real(self, sequences)

    engine.StepLoop._sample = spy
    try:
        with nl.Context(model, n_ctx=256, n_seq_max=4) as ctx:
            ctx.generate_parallel(["hello how are you", "once upon a time there", "red", "the king"], max_tokens=4)
    finally:
        engine.StepLoop._sample = real
    assert seen and all(seen)


@pytest.mark.parametrize("n_threads", [1, 2, 4])
@pytest.mark.parametrize("n_vocab, k", [(1, 1), (63, 5), (64, 64), (65, 100), (1000, 40), (262_144, 40), (5000, 900),
                                        (262_144 + 61, 7)])
def test_the_top_k_kernel_keeps_what_a_full_stable_sort_keeps(n_vocab, k, n_threads):
    rng = np.random.default_rng(n_vocab + k)
    rows = [
        rng.standard_normal(n_vocab),
        np.sort(rng.standard_normal(n_vocab)),  # rising: every block beats the last, many selections
        np.round(rng.standard_normal(n_vocab), 1),  # ties everywhere
        np.zeros(n_vocab),  # one tie of the whole row
        np.where(rng.random(n_vocab) < 0.99, -np.inf, rng.standard_normal(n_vocab)),  # fewer than k allowed
        np.full(n_vocab, -np.inf),
    ]
    logits = np.array(rows, dtype=np.float32)
    logits[0, ::7] = np.nan  # never ranked, as -inf
    ids = np.empty((len(rows), k), dtype=np.int64)
    values = np.empty((len(rows), k), dtype=np.float32)
    _top_k.top_k(logits, len(rows), n_vocab, k, ids, values, n_threads)
    for row, row_ids, row_values in zip(logits, ids, values):
        ranked = [i for i in np.argsort(-row, kind="stable") if np.isfinite(row[i])][:k]
        assert row_ids[:len(ranked)].tolist() == ranked
        assert row_values[:len(ranked)].tolist() == row[ranked].tolist()
        assert (row_values[len(ranked):] == -np.inf).all() and (row_ids[len(ranked):] == 0).all()


@pytest.mark.skipif(sys.platform == "win32", reason="MSVC builds for x64 always take SSE2")
def test_the_top_k_kernel_without_sse2_keeps_what_the_kernel_keeps(tmp_path):
    # the plain C scans that builds for other processors (Apple's, ARM servers) take
    from setuptools import Distribution, Extension

    source = Path(_top_k.__file__).with_name("_top_k.c")
    extension = Extension("_top_k", [str(source)], extra_compile_args=["-U__SSE2__"])
    build = Distribution({"name": "portable", "ext_modules": [extension]}).get_command_obj("build_ext")
    build.build_lib, build.build_temp = str(tmp_path), str(tmp_path / "temp")
    build.ensure_finalized()
    build.run()
    spec = importlib.util.spec_from_file_location("_top_k", build.get_ext_fullpath("_top_k"))
    portable = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(portable)
    rng = np.random.default_rng(3)
    logits = np.concatenate([rng.standard_normal((3, 70_001)), np.sort(rng.standard_normal((1, 70_001)))]).astype(np.float32)
    logits[0, ::5] = -np.inf
    logits[1] = np.round(logits[1], 1)
    for k in (1, 40, 300):
        expected, got = (np.empty((4, k), dtype=np.int64) for _ in range(2))
        values = np.empty((4, k), dtype=np.float32)
        _top_k.top_k(logits, 4, 70_001, k, expected, values, 1)
        portable.top_k(logits, 4, 70_001, k, got, values, 2)
        assert (got == expected).all()


def test_the_top_k_kernel_refuses_buffers_of_the_wrong_size():
    logits = np.zeros((2, 10), dtype=np.float32)
    with pytest.raises(ValueError, match="ids holds"):
        _top_k.top_k(logits, 2, 10, 3, np.empty((2, 2), dtype=np.int64), np.empty((2, 3), dtype=np.float32), 1)
    with pytest.raises(ValueError, match="logits holds"):
        _top_k.top_k(logits, 3, 10, 3, np.empty((3, 3), dtype=np.int64), np.empty((3, 3), dtype=np.float32), 1)
    with pytest.raises(ValueError, match="n_threads >= 1"):
        _top_k.top_k(logits, 2, 10, 3, np.empty((2, 3), dtype=np.int64), np.empty((2, 3), dtype=np.float32), 0)
