"""What keeping each prompt's features (`hidden_states`, features.py) costs a label pass.

An annotation's prompts (one instruction, a short text each, two labels) run through the
label pass on contexts of the same settings: one that never keeps states, and one for
each set of kinds (`--kinds`: "last" is hidden_states=True; "middle", "mean" and sets
joined by commas), which keeps them (its llama.cpp context carries the eval callback
from its first such call). The rounds take turns, each from an empty prefix cache; the
ratio of their seconds is the cost of the features (issue 53 asks for at most 1.05).
The labels of all must be the same bits.

Usage: python bench_features.py [--model gemma3-270m] [--prompts 256] [--n-seq-max 8] [--rounds 5]
                                [--kinds last middle mean last,middle,mean]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

INSTRUCTION = ("Read the customer's message and say whether it is a complaint. Answer yes or no.\n"
               "A complaint reports a problem with a product, a delivery or the service.\n\n")
WORDS = ("the parcel arrived late again and the box was open my order was wrong thank you for "
         "the quick help great service broken screen refund please never again lovely staff").split()


def texts_of(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60))) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--n-seq-max", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kinds", nargs="+", default=["last"])
    args = parser.parse_args()

    import contextlib

    import newrllama4 as nl

    texts = texts_of(args.prompts)
    prompts = [f"{INSTRUCTION}Text: {text}\nAnswer:" for text in texts]
    labels = ["yes", "no"]
    kinds = {name: name.split(",") for name in args.kinds}
    with nl.Model(args.model) as model, contextlib.ExitStack() as stack:
        contexts = {name: stack.enter_context(nl.Context(model, n_ctx=512, n_seq_max=args.n_seq_max))
                    for name in ["labels", *kinds]}

        def run(name):
            states = kinds.get(name, False)
            return contexts[name].generate_parallel(prompts, labels=labels, temperature=0, hidden_states=states,
                                                    feature_texts=texts if states else None)

        for name, ctx in contexts.items():  # warm-up; a context that keeps states takes its eval callback here
            ctx.generate_parallel(prompts[:4], labels=labels, temperature=0, hidden_states=kinds.get(name, False))
        seconds: dict[str, list[float]] = {name: [] for name in contexts}
        for _ in range(args.rounds):
            for name, ctx in contexts.items():
                ctx.clear_cache()
                started = time.perf_counter()
                result = run(name)
                seconds[name].append(time.perf_counter() - started)
                if name == "labels":
                    probs = [c.label_probs for c in result]
                else:
                    assert all(c.hidden_state is not None for c in result)
                    assert [c.label_probs for c in result] == probs, "features changed the labels"
    print(f"{args.prompts} prompts of {model.description}, n_seq_max={args.n_seq_max}, {args.rounds} rounds")
    for name, values in seconds.items():
        print(f"  {name:18s} fastest {min(values):7.2f} s, median {statistics.median(values):7.2f} s")
    for name in kinds:
        ratio_min = min(seconds[name]) / min(seconds["labels"])
        ratio_median = statistics.median(seconds[name]) / statistics.median(seconds["labels"])
        print(f"  {name} cost: {ratio_min:.3f}x (fastest rounds), {ratio_median:.3f}x (medians)")


if __name__ == "__main__":
    main()
