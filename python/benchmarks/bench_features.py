"""What keeping each prompt's features (`hidden_states=True`, features.py) costs a label pass.

An annotation's prompts (one instruction, a short text each, two labels) run through the
label pass on two contexts of the same settings: one that never keeps states, one that
does (its llama.cpp context carries the eval callback from its first such call). The
rounds take turns, each from an empty prefix cache; the ratio of their seconds is the
cost of the features (issue 53 asks for at most 1.05). The labels of both must be the
same bits.

Usage: python bench_features.py [--model gemma3-270m] [--prompts 256] [--n-seq-max 8] [--rounds 5]
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


def prompts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"{INSTRUCTION}Text: {' '.join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))}\nAnswer:"
            for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--n-seq-max", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import newrllama4 as nl

    texts = prompts(args.prompts)
    labels = ["yes", "no"]
    with nl.Model(args.model) as model, \
            nl.Context(model, n_ctx=512, n_seq_max=args.n_seq_max) as plain, \
            nl.Context(model, n_ctx=512, n_seq_max=args.n_seq_max) as keeping:
        # warm-up; the second context takes its eval callback here
        plain.generate_parallel(texts[:4], labels=labels, temperature=0)
        keeping.generate_parallel(texts[:4], labels=labels, temperature=0, hidden_states=True)
        seconds: dict[str, list[float]] = {"labels": [], "labels + features": []}
        for _ in range(args.rounds):
            for name, ctx, states in (("labels", plain, False), ("labels + features", keeping, True)):
                ctx.clear_cache()
                started = time.perf_counter()
                result = ctx.generate_parallel(texts, labels=labels, temperature=0, hidden_states=states)
                seconds[name].append(time.perf_counter() - started)
                if states:
                    assert all(c.hidden_state is not None for c in result)
                    assert [c.label_probs for c in result] == probs, "features changed the labels"
                else:
                    probs = [c.label_probs for c in result]
    print(f"{args.prompts} prompts of {model.description}, n_seq_max={args.n_seq_max}, {args.rounds} rounds")
    for name, values in seconds.items():
        print(f"  {name:18s} fastest {min(values):7.2f} s, median {statistics.median(values):7.2f} s")
    ratio_min = min(seconds["labels + features"]) / min(seconds["labels"])
    ratio_median = statistics.median(seconds["labels + features"]) / statistics.median(seconds["labels"])
    print(f"  features cost: {ratio_min:.3f}x (fastest rounds), {ratio_median:.3f}x (medians)")


if __name__ == "__main__":
    main()
