"""Constrained answers against free generation, in one run; and the two grammar engines.

32 annotation prompts (the instruction of bench_prefix.py plus a sentence each), 32 at
once, default model, greedy, each run on a fresh context (so each decodes the
instruction once and restores it for the others):
(a) 4 free tokens; (b) `labels`: three of them;
(c) free text with max_tokens=32; (d) a small JSON schema (an enum, an integer, a short
string) with max_tokens=32. A JSON answer stops when its object closes, free text runs
to max_tokens, so (d) is compared with (c) by total time and by time per generated token.

Then the mask of one step, for 32 sequences over Gemma's 262,144 tokens: llguidance's
batched fill (what the engine uses) against llama.cpp's own grammar sampler applied to
each sequence's full candidate array, at the start of the answer and inside a string.

Then a schema against the same schema with `field_probs=True` (field_table): the codebook
of tests/testthat/test-annotate-answers.R (three booleans and an enum of four topics) over
its 40 short texts, n_ctx=512, n_seq_max=4, greedy, on SmolLM2 135M and on the default
model. With field_probs each scored field is a round of its own (field_probs.py); a
later round restores each text's previous round from the prefix cache instead of
prefilling it again. The latest figures are in docs/benchmarks.md.

Usage: python bench_constraints.py [--threads N] [--fields-only]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import time
from typing import Any

import llama_cpp as llama
import numpy as np

import newrllama4 as nl
from bench_prefix import INSTRUCTION, prompts, texts
from newrllama4.constraints import ConstrainedAnswer, check_constraints, mask_logits

LABELS = ["economy", "politics", "culture"]
SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"enum": LABELS},
        "year": {"type": "integer"},
        "topic": {"type": "string", "maxLength": 24},
    },
    "required": ["label", "year", "topic"],
    "additionalProperties": False,
}
# the same answers in llama.cpp's GBNF, for its grammar sampler
SCHEMA_GBNF = r'''root ::= "{\"label\": \"" ("economy" | "politics" | "culture") "\", \"year\": " [0-9]{1,6} ", \"topic\": \"" [^"\\]{0,24} "\"}"'''
N_SEQUENCES = 32


def generation_table(model: nl.Model, threads: int) -> None:
    batch = prompts([INSTRUCTION], texts(N_SEQUENCES))
    runs = [
        ("(a) 4 free tokens", dict(max_tokens=4)),
        (f"(b) labels={LABELS}", dict(labels=LABELS)),
        ("(c) free text, max_tokens=32", dict(max_tokens=32)),
        ("(d) json_schema, max_tokens=32", dict(max_tokens=32, json_schema=SCHEMA)),
    ]
    print(f"{N_SEQUENCES} prompts, {N_SEQUENCES} at once, greedy, {threads} threads\n")
    print(f"| {'run':<48} | generated | seconds | s / 1k tokens | vs (a) | vs (c) | vs (c) per token |")
    print(f"|{'-' * 50}|----------:|--------:|--------------:|-------:|-------:|-----------------:|")
    seconds = {}
    per_token = {}
    for name, params in runs:
        with nl.Context(model, n_ctx=512, n_seq_max=N_SEQUENCES, n_threads=threads) as ctx:
            ctx.generate_parallel(["warm-up"], max_tokens=2, temperature=0, **(
                {"json_schema": SCHEMA} if "json_schema" in params else {}))  # llguidance's vocabulary bridge, once
            result = ctx.generate_parallel(batch, temperature=0, **params)
        stats = result.stats
        assert stats.failures == 0, [c.error for c in result if c.error]
        key = name[1]
        seconds[key] = stats.total_seconds
        per_token[key] = stats.total_seconds / max(stats.generated_tokens, 1) * 1000
        versus_c = f"{seconds[key] / seconds['c']:>5.2f}x" if "c" in seconds else "      "
        per_token_c = f"{per_token[key] / per_token['c']:>15.2f}x" if "c" in per_token else " " * 16
        print(f"| {name:<48} | {stats.generated_tokens:>9} | {stats.total_seconds:>7.2f} "
              f"| {per_token[key]:>13.1f} | {seconds[key] / seconds['a']:>5.2f}x | {versus_c} | {per_token_c} |")
    print(f"\nsample answer of (d): {result[0].text}")


def mask_table(model: nl.Model) -> None:
    constraint = check_constraints(SCHEMA, None, 1, model)[0]
    start = [ConstrainedAnswer(constraint, model) for _ in range(N_SEQUENCES)]
    in_string = [ConstrainedAnswer(constraint, model) for _ in range(N_SEQUENCES)]
    prefix = model.tokenize('{"label": "economy", "year": 2020, "topic": "the', add_special=False)
    for answer in in_string:
        assert answer.matcher.consume_tokens(prefix)
    logits = np.random.default_rng(0).standard_normal((N_SEQUENCES, model.n_vocab)).astype(np.float32)

    def llguidance_step(answers: list[ConstrainedAnswer]) -> float:
        rows = logits.copy()
        started = time.perf_counter()
        mask_logits(rows, list(range(N_SEQUENCES)), answers)
        return time.perf_counter() - started

    def llama_cpp_step(prefix_tokens: list[int]) -> float:
        samplers = []
        for _ in range(N_SEQUENCES):
            sampler = llama.llama_sampler_init_grammar(model.vocab(), SCHEMA_GBNF.encode(), b"root")
            for token in prefix_tokens:
                llama.llama_sampler_accept(sampler, token)
            samplers.append(sampler)
        candidates = np.zeros(model.n_vocab, dtype=[("id", np.int32), ("logit", np.float32), ("p", np.float32)])
        started = time.perf_counter()
        for sampler, row in zip(samplers, logits):
            candidates["id"] = np.arange(model.n_vocab)
            candidates["logit"] = row
            array = llama.llama_token_data_array(
                data=candidates.ctypes.data_as(ctypes.POINTER(llama.llama_token_data)), size=model.n_vocab,
                selected=-1, sorted=False,
            )
            llama.llama_sampler_apply(sampler, ctypes.byref(array))
        elapsed = time.perf_counter() - started
        for sampler in samplers:
            llama.llama_sampler_free(sampler)
        return elapsed

    print(f"\nThe mask of one step, {N_SEQUENCES} sequences x {model.n_vocab} tokens (best of 5, ms)\n")
    print("| state                        | llguidance, batched fill + masking | llama.cpp grammar sampler |")
    print("|------------------------------|-----------------------------------:|--------------------------:|")
    for name, answers, prefix_tokens in (("start of the answer", start, []), ("inside the topic string", in_string, prefix)):
        ours = min(llguidance_step(answers) for _ in range(5)) * 1000
        theirs = min(llama_cpp_step(prefix_tokens) for _ in range(5)) * 1000
        print(f"| {name:<28} | {ours:>34.1f} | {theirs:>25.1f} |")


CODEBOOK = {
    "type": "object",
    "properties": {
        "mentions_place": {"type": "boolean"},
        "positive": {"type": "boolean"},
        "about_people": {"type": "boolean"},
        "topic": {"enum": ["sport", "politics", "weather", "food"]},
    },
    "required": ["mentions_place", "positive", "about_people", "topic"],
    "additionalProperties": False,
}


def codebook_prompts(model: nl.Model) -> list[Any]:
    """The 40 texts of test-annotate-answers.R's codebook after an instruction: chat messages,
    or plain text for a model without a chat template (the default Gemma 3 270M file)."""
    shapes = ["The team won the %s final after extra time.", "Parliament passed the %s bill at night.",
              "Heavy rain is expected over %s tomorrow.", "This %s restaurant serves great soup."]
    words = ["cup", "city", "coast", "new", "old", "river", "north", "south", "east", "west"]
    instruction = ("Code the text. Answer in JSON with the fields mentions_place (true or false), positive "
                   "(true or false), about_people (true or false) and topic (sport, politics, weather or food).")
    texts = [shape % word for word in words for shape in shapes]
    try:
        model.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True)
    except nl.ChatTemplateError:
        return [f"{instruction}\n\nText: {text}\nJSON: " for text in texts]
    return [[{"role": "system", "content": instruction}, {"role": "user", "content": text}] for text in texts]


def field_table(threads: int, models: tuple[str, ...] = ("smollm2-135m-instruct", nl.models.DEFAULT_MODEL)) -> None:
    print(f"\nA schema against the same schema with field_probs: 40 texts, n_seq_max=4, greedy, {threads} threads\n")
    print("| model                 | schema, s | field_probs, s | ratio | field_probs: prompt tokens restored |")
    print("|-----------------------|----------:|---------------:|------:|------------------------------------:|")
    for name in models:
        seconds = {}
        with nl.Model(name) as model:
            batch = codebook_prompts(model)
            for field_probs in (False, True):
                with nl.Context(model, n_ctx=512, n_seq_max=4, n_threads=threads) as ctx:
                    ctx.generate_parallel(["warm-up"], max_tokens=2, temperature=0, json_schema=CODEBOOK)
                    result = ctx.generate_parallel(batch, temperature=0, max_tokens=64, json_schema=CODEBOOK,
                                                   field_probs=field_probs)
                assert result.stats.failures == 0, [c.error for c in result if c.error]
                seconds[field_probs] = result.stats.total_seconds
                restored = f"{result.stats.cached_prompt_tokens} of {result.stats.prompt_tokens}"
        print(f"| {name:<21} | {seconds[False]:>9.2f} | {seconds[True]:>14.2f} | {seconds[True] / seconds[False]:>4.1f}x "
              f"| {restored:>35} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--fields-only", nargs="*", metavar="MODEL",
                        help="only the schema against field_probs (on these models)")
    args = parser.parse_args()
    if args.fields_only is not None:
        field_table(args.threads, *([tuple(args.fields_only)] if args.fields_only else []))
        return
    with nl.Model() as model:
        generation_table(model, args.threads)
        mask_table(model)
    field_table(args.threads)


if __name__ == "__main__":
    main()
