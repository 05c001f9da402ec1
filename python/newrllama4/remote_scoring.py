"""Exact label probabilities from llama.cpp's llama-server, as the local engine computes them.

A server's answer restricted to the labels does not give them: llama-server reports top
log-probabilities before its grammar applies, and its grammar spells the answer in
whatever tokens the model picks ('p' + 'oli' for 'politics'), not the label's own
tokenization. So each label is scored instead, as choices.py scores it locally: the
log-likelihood of each spelling's own tokens (the label as it is, and after a space) as
the continuation of the prompt, the spellings of a label summed and the sums normalised
over the labels.

llama-server has what that takes on its native endpoints (beside /v1, not under it):
`/tokenize` gives the prompt's tokens (`/apply-template` first lays out a conversation
with the model's chat template, as its chat endpoint does) and each spelling's; one
`/completion` per spelling then generates exactly the spelling's tokens -- a grammar of
token ids (`<[id]>`) forces them -- with `n_probs` and `post_sampling_probs: false`, so
that each generated token comes with its log-probability from the raw logits (a softmax
over the whole vocabulary, before the grammar and the samplers). A prompt's requests go
together, and the server's prompt cache shares the prompt between them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from .checks import is_conversation
from .choices import Labels, label_probabilities, label_spellings, spelled_labels


class StatusError(Exception):
    """A request answered with an HTTP status other than 200."""

    def __init__(self, response: httpx.Response):
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


class ScoringResponseError(ValueError):
    """A scoring response that does not hold what was asked for."""


@dataclass(frozen=True)
class LabelScores:
    probs: np.ndarray  # one per label, summing to 1
    n_prompt_tokens: int
    n_cached_tokens: int  # the prompt tokens the server reused, in the request that reused fewest


async def post_json(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Any:
    """The JSON a POST is answered with; StatusError for a status other than 200,
    ValueError for a body that is not JSON."""
    response = await client.post(url, json=body)
    if response.status_code != 200:
        raise StatusError(response)
    return response.json()


def native_root(base_url: str) -> str:
    """Where llama-server's own endpoints are: its OpenAI API root without /v1."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


async def llama_server_label_scores(client: httpx.AsyncClient, base_url: str, model: str, prompt: Any,
                                    labels: Labels) -> LabelScores:
    """The probability of each label as the continuation of `prompt` (a text, token ids
    or a conversation) on the llama-server at `base_url`, as choices.py computes it."""
    root = native_root(base_url)

    async def tokenize(text: str, special: bool) -> list[int]:
        # as the engine tokenizes: a prompt with BOS and its special tokens parsed, a label without either
        answer = await post_json(client, f"{root}/tokenize",
                                 {"content": text, "add_special": special, "parse_special": special})
        return [int(t) for t in answer["tokens"]]

    async def tokenize_prompt() -> list[int]:
        text = prompt
        if is_conversation(prompt):  # laid out as the chat endpoint lays it out
            text = (await post_json(client, f"{root}/apply-template", {"messages": prompt}))["prompt"]
        return await tokenize(text, True) if isinstance(text, str) else [int(t) for t in text]

    texts = list(dict.fromkeys(text for label in labels for text in label_spellings(label)))
    prompt_tokens, *spelt = await asyncio.gather(tokenize_prompt(), *(tokenize(text, False) for text in texts))
    tokens_of = dict(zip(texts, spelt))
    spellings = spelled_labels(labels, tokens_of.__getitem__)
    scored = await asyncio.gather(*(
        _continuation_logprob(client, root, model, prompt_tokens, list(tokens)) for _, tokens in spellings
    ))
    return LabelScores(
        probs=label_probabilities(len(labels), [(label, logprob) for (label, _), (logprob, _) in zip(spellings, scored)]),
        n_prompt_tokens=len(prompt_tokens),
        n_cached_tokens=min(cached for _, cached in scored),
    )


async def _continuation_logprob(client: httpx.AsyncClient, root: str, model: str, prompt: list[int],
                                continuation: list[int]) -> tuple[float, int]:
    """The log-likelihood of `continuation` after `prompt`, and the prompt tokens the server reused."""
    answer = await post_json(client, f"{root}/completion", {
        "model": model, "prompt": prompt, "n_predict": len(continuation),
        "grammar": "root ::= " + " ".join(f"<[{t}]>" for t in continuation),
        "n_probs": 1, "post_sampling_probs": False, "temperature": 0.0, "cache_prompt": True,
    })
    try:
        steps = answer["completion_probabilities"]
        generated = [int(step["id"]) for step in steps]
        logprob = sum(float(step["logprob"]) for step in steps)
        cached = int(answer.get("tokens_cached") or 0)
    except (KeyError, TypeError, ValueError) as error:
        raise ScoringResponseError(f"a scoring response lacks token log-probabilities ({error!r})") from None
    if generated != continuation:
        raise ScoringResponseError(f"a scoring request forced the tokens {continuation} and got {generated}")
    return logprob, cached
