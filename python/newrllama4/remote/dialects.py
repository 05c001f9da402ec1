"""The OpenAI-compatible completions API as each server speaks it.

A RemoteContext sends one `POST {base_url}/completions` per prompt, or `POST
{base_url}/chat/completions` for a prompt given as chat messages, which the server
lays out with its model's own chat template. Every server takes the OpenAI fields
(model, prompt or messages, max_tokens, temperature, top_p, seed, stop, logprobs);
the rest -- top-k, min-p, the repetition penalty, structured outputs --
each server spells its own way, or not at all. Servers are told apart by the
`owned_by` of the model in their `GET /models` list: "vllm", "llamacpp" (llama.cpp's
llama-server) or "me" (llama-cpp-python's server).

Labels, JSON schemas and grammars need structured outputs: vLLM's
`structured_outputs` (`json`, `grammar`), llama-server's `grammar` (GBNF) and
`json_schema`, llama-cpp-python's `grammar` alone (a schema is converted to GBNF), on
both endpoints. vLLM's and llama-server's labels are scored on their own endpoints instead
(`label_scoring`, see labels.py). Elsewhere a label answer is restricted to a label (or the label after
a space, as a model writes a word that follows text), and asks for the top
log-probabilities of its first token, from which each label's probability is read: see
`label_probs`.

Embeddings (RemoteContext.embed_parallel) go to `POST {base_url}/embeddings`, OpenAI's
endpoint, which llama-server serves when started with `--embeddings` (pooled as its
`--pooling` says) and vLLM for a model it runs as a pooling model. Each request asks for
the vector as the server computes it: float32 bytes in base64 (OpenAI's
`encoding_format`), not normalised (llama-server's `embd_normalize: -1`, vLLM's
`normalize: false`), as the engine's own states are not.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from llama_cpp.llama_grammar import json_schema_to_gbnf

from ..checks import is_conversation
from ..constraints import Constraint
from ..labels import Labels, every_spelling
from ..sampling import SamplingParams
from .http import post_json
from .labels import LabelScoring, ScoringResponseError, label_grammar

# vLLM refuses more than its --max-logprobs, 20 by default
TOP_LOGPROBS = 20

Prompt = Any  # str, a list of token ids, or chat messages


# -- the label scoring of each server that can score labels exactly (labels.py) ----


class LlamaServerScoring(LabelScoring):
    scores_fields = True

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


# -- the completions API of each kind of server -------------------------------------


class OpenAICompatible:
    """A server known only to speak the OpenAI API: it gets the OpenAI fields alone."""

    name = "OpenAI-compatible"
    # the name of the server's repetition penalty field; None for a server that gets
    # none of the sampling fields beyond OpenAI's
    penalty_field: Optional[str] = None
    has_structured_outputs = False  # whether label_fields and constraint_fields work
    # how labels.py scores labels on this server, exactly as locally; None: their
    # probabilities are read from a constrained answer's top log-probabilities instead
    label_scoring: Optional[type[LabelScoring]] = None
    # the fields of an embeddings request that ask for the vector not normalised
    raw_embedding_fields: dict[str, Any] = {}

    def embedding_body(self, model: str, prompt: Prompt) -> dict[str, Any]:
        """The body of one prompt's embeddings request."""
        return {"model": model, "input": prompt, "encoding_format": "base64", **self.raw_embedding_fields}

    def sampling_fields(self, params: SamplingParams) -> dict[str, Any]:
        """The fields of `params` beyond the OpenAI ones that this server takes."""
        if self.penalty_field is None:
            return {}
        penalty = params.penalty_repeat if params.penalised else 1.0
        return {"top_k": params.top_k, "min_p": params.min_p, self.penalty_field: penalty}

    def label_fields(self, labels: Labels) -> dict[str, Any]:
        """The fields that restrict an answer to `labels` (or a label after a space)."""
        raise NotImplementedError(f"{self.name} servers have no structured outputs")

    def constraint_fields(self, constraint: Constraint) -> dict[str, Any]:
        """The fields that make an answer follow a JSON schema or a GBNF grammar."""
        raise NotImplementedError(f"{self.name} servers have no structured outputs")

    def request_body(self, model: str, prompt: Prompt, params: SamplingParams, seed: int,
                     labels: Optional[Labels] = None, constraint: Optional[Constraint] = None) -> dict[str, Any]:
        chat = is_conversation(prompt)
        body: dict[str, Any] = {
            "model": model, ("messages" if chat else "prompt"): prompt, "max_tokens": params.max_tokens,
            "temperature": params.temperature, "top_p": params.top_p, "seed": seed,
            **self.sampling_fields(params),
        }
        if labels is not None:
            # a token is at least one byte, so the longest spelling's bytes bound its tokens
            body["max_tokens"] = max(len(spelling.encode("utf-8")) for spelling in every_spelling(labels))
            # the chat API asks for top log-probabilities in two fields, the completions API in one
            body.update({"logprobs": True, "top_logprobs": TOP_LOGPROBS} if chat else {"logprobs": TOP_LOGPROBS})
            body.update(self.label_fields(labels))
            return body
        if params.stop:
            body["stop"] = list(params.stop)
        if constraint is not None:
            body.update(self.constraint_fields(constraint))
        return body


class VLLM(OpenAICompatible):
    """vLLM: its repetition penalty covers the whole prompt and answer (no `repeat_last_n`)."""

    name = "vLLM"
    penalty_field = "repetition_penalty"
    has_structured_outputs = True
    label_scoring = VLLMScoring
    raw_embedding_fields = {"normalize": False}

    # vLLM 0.12 dropped the older `guided_json` and `guided_grammar`, and ignores them
    # without a word; labels are scored, not answered (labels.py)
    def constraint_fields(self, constraint: Constraint) -> dict[str, Any]:
        key = "json" if constraint.parses_json else "grammar"
        return {"structured_outputs": {key: constraint.source}}


class LlamaCppPython(OpenAICompatible):
    """llama-cpp-python's server: its penalty window is the server's `last_n_tokens_size`."""

    name = "llama-cpp-python"
    penalty_field = "repeat_penalty"
    has_structured_outputs = True

    def label_fields(self, labels: Labels) -> dict[str, Any]:
        return {"grammar": label_grammar(labels)}

    def constraint_fields(self, constraint: Constraint) -> dict[str, Any]:
        if constraint.parses_json:
            return {"grammar": json_schema_to_gbnf(json.dumps(constraint.source))}
        return {"grammar": constraint.source}


class LlamaServer(LlamaCppPython):
    """llama.cpp's llama-server: takes every sampling parameter."""

    name = "llama.cpp"
    label_scoring = LlamaServerScoring
    raw_embedding_fields = {"embd_normalize": -1}

    def sampling_fields(self, params: SamplingParams) -> dict[str, Any]:
        return {**super().sampling_fields(params), "repeat_last_n": params.repeat_last_n}

    def constraint_fields(self, constraint: Constraint) -> dict[str, Any]:
        if constraint.parses_json:
            return {"json_schema": constraint.source}
        return super().constraint_fields(constraint)


def endpoint_path(prompt: Prompt) -> str:
    """Where a prompt is sent, after the base URL."""
    return "chat/completions" if is_conversation(prompt) else "completions"


SERVERS_BY_OWNER = {"vllm": VLLM(), "llamacpp": LlamaServer(), "me": LlamaCppPython()}


def server_api(owned_by: Any) -> OpenAICompatible:
    return SERVERS_BY_OWNER.get(owned_by, OpenAICompatible())


@dataclass(frozen=True)
class Answer:
    """What a server answered to one request."""

    text: str
    finish_reason: str
    n_prompt_tokens: int
    n_tokens: int
    n_cached_tokens: int
    first_top_logprobs: list[tuple[str, float]]  # empty without logprobs


def read_answer(payload: Any) -> Answer:
    """The answer in a completions or chat completions response; KeyError, IndexError,
    TypeError or ValueError for a response that holds none."""
    choice = payload["choices"][0]
    text = choice["message"]["content"] if "message" in choice else choice["text"]
    if not isinstance(text, str):  # a chat answer without content (a tool call, a refusal)
        raise TypeError(f"the answer's content is {type(text).__name__}, not text")
    usage = payload.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    finish_reason = choice.get("finish_reason")
    return Answer(
        text=text,
        finish_reason="length" if finish_reason == "length" else "stop",
        n_prompt_tokens=int(usage.get("prompt_tokens", 0)),
        n_tokens=int(usage.get("completion_tokens", 0)),
        n_cached_tokens=int(details.get("cached_tokens") or 0),
        first_top_logprobs=_first_top_logprobs(choice.get("logprobs")),
    )


def _first_top_logprobs(logprobs: Any) -> list[tuple[str, float]]:
    if not logprobs:
        return []
    if "content" in logprobs:  # the chat API's form, which llama-server also writes for completions
        content = logprobs["content"]
        return [(t["token"], float(t["logprob"])) for t in content[0]["top_logprobs"]] if content else []
    top = logprobs.get("top_logprobs")  # the OpenAI completions form: one {text: logprob} per token
    return [(text, float(logprob)) for text, logprob in top[0].items()] if top else []


def read_embedding(payload: Any) -> tuple[bytes, int]:
    """The vector in an embeddings response, as little-endian float32 bytes, and its prompt's
    tokens; KeyError, IndexError, TypeError or ValueError for a response that holds none.
    A server that ignores `encoding_format` answers a list of numbers."""
    vector = payload["data"][0]["embedding"]
    if isinstance(vector, str):
        data = base64.b64decode(vector, validate=True)
        if len(data) % 4:
            raise ValueError(f"{len(data)} bytes are not float32 numbers")
    else:
        data = np.asarray(vector, dtype="<f4").tobytes()
    if not data:
        raise ValueError("the embedding is empty")
    return data, int((payload.get("usage") or {}).get("prompt_tokens", 0))
