"""Exact label probabilities from servers, as the local engine computes them.

A server's answer restricted to the labels does not give them: llama-server reports top
log-probabilities before its grammar applies, and a grammar spells the answer in
whatever tokens the model picks ('p' + 'oli' for 'politics'), not the label's own
tokenization. So each label is scored instead, as choices.py scores it locally: the
log-likelihood of each spelling's own tokens (the label as it is, and after a space) as
the continuation of the prompt's tokens, the spellings of a label summed and the sums
normalised over the labels. A prompt's requests go together; the server's prompt cache
shares the prompt between them.

Each server has its own way, on endpoints beside its OpenAI API root (not under /v1):

- llama.cpp's llama-server: `/tokenize` gives the prompt's tokens (`/apply-template`
  first lays out a conversation with the model's chat template, as its chat endpoint
  does) and each spelling's; one `/completion` per spelling then generates exactly the
  spelling's tokens -- a grammar of token ids (`<[id]>`) forces them -- with `n_probs`
  and `post_sampling_probs: false`, so that each generated token comes with its
  log-probability from the raw logits (a softmax over the whole vocabulary, before the
  grammar and the samplers).
- vLLM: `/tokenize` (of a text, or of a conversation under the model's chat template),
  then one `/v1/completions` per spelling whose prompt is the prompt's tokens followed
  by the spelling's, with `prompt_logprobs`: the log-probability of every prompt token
  given the ones before it, from which the spelling's are read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from .checks import is_conversation
from .choices import Labels, every_spelling, label_probabilities, spelled_labels


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


class LabelScoring:
    """How one kind of server scores a token continuation; `label_scores` does the rest."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, model: str):
        self.client = client
        self.base_url = base_url
        # the server's own endpoints sit beside its OpenAI API root
        self.root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
        self.model = model

    async def prompt_tokens(self, prompt: Any) -> list[int]:
        """The tokens of a text, token ids or a conversation, as the engine renders them."""
        raise NotImplementedError

    async def label_tokens(self, text: str) -> list[int]:
        """A label spelling's tokens, as the engine tokenizes them: no BOS, no special tokens."""
        raise NotImplementedError

    async def continuation_logprob(self, prompt: list[int], continuation: list[int]) -> tuple[float, int]:
        """The log-likelihood of `continuation` after `prompt`, and the prompt tokens the server reused."""
        raise NotImplementedError

    async def label_scores(self, prompt: Any, labels: Labels) -> LabelScores:
        """The probability of each label as the continuation of `prompt`, as choices.py computes it."""
        texts = every_spelling(labels)
        prompt_tokens, *spelt = await asyncio.gather(self.prompt_tokens(prompt), *map(self.label_tokens, texts))
        spellings = spelled_labels(labels, dict(zip(texts, spelt)).__getitem__)
        scored = await asyncio.gather(*(
            self.continuation_logprob(prompt_tokens, list(tokens)) for _, tokens in spellings
        ))
        return LabelScores(
            probs=label_probabilities(len(labels), [(label, logprob) for (label, _), (logprob, _) in
                                                    zip(spellings, scored)]),
            n_prompt_tokens=len(prompt_tokens),
            n_cached_tokens=min(cached for _, cached in scored),
        )


class LlamaServerScoring(LabelScoring):
    async def _tokenize(self, text: str, special: bool) -> list[int]:
        answer = await post_json(self.client, f"{self.root}/tokenize",
                                 {"content": text, "add_special": special, "parse_special": special})
        return [int(t) for t in answer["tokens"]]

    async def prompt_tokens(self, prompt: Any) -> list[int]:
        if is_conversation(prompt):  # laid out as the chat endpoint lays it out
            prompt = (await post_json(self.client, f"{self.root}/apply-template", {"messages": prompt}))["prompt"]
        # a text with BOS and its special tokens parsed, as the engine tokenizes a prompt
        return await self._tokenize(prompt, True) if isinstance(prompt, str) else [int(t) for t in prompt]

    async def label_tokens(self, text: str) -> list[int]:
        return await self._tokenize(text, False)

    async def continuation_logprob(self, prompt: list[int], continuation: list[int]) -> tuple[float, int]:
        answer = await post_json(self.client, f"{self.root}/completion", {
            "model": self.model, "prompt": prompt, "n_predict": len(continuation),
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


class VLLMScoring(LabelScoring):
    async def _tokenize(self, body: dict[str, Any]) -> list[int]:
        answer = await post_json(self.client, f"{self.root}/tokenize", {"model": self.model, **body})
        return [int(t) for t in answer["tokens"]]

    async def prompt_tokens(self, prompt: Any) -> list[int]:
        if is_conversation(prompt):  # the template writes the special tokens it needs
            return await self._tokenize({"messages": prompt, "add_generation_prompt": True,
                                         "add_special_tokens": False})
        if isinstance(prompt, str):
            return await self._tokenize({"prompt": prompt, "add_special_tokens": True})
        return [int(t) for t in prompt]

    async def label_tokens(self, text: str) -> list[int]:
        return await self._tokenize({"prompt": text, "add_special_tokens": False})

    async def continuation_logprob(self, prompt: list[int], continuation: list[int]) -> tuple[float, int]:
        # prompt_logprobs: each prompt token's own log-probability (and the top one), None for the first
        answer = await post_json(self.client, f"{self.base_url}/completions", {
            "model": self.model, "prompt": prompt + continuation, "max_tokens": 1, "temperature": 0.0,
            "prompt_logprobs": 1,
        })
        try:
            positions = answer["choices"][0]["prompt_logprobs"][len(prompt):]
            if len(positions) != len(continuation):
                raise ValueError(f"{len(positions)} log-probabilities for {len(continuation)} tokens")
            logprob = sum(float(step[str(t)]["logprob"]) for step, t in zip(positions, continuation))
            details = (answer.get("usage") or {}).get("prompt_tokens_details") or {}
            cached = int(details.get("cached_tokens") or 0)
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise ScoringResponseError(f"a scoring response lacks prompt log-probabilities ({error!r})") from None
        return logprob, min(cached, len(prompt))
