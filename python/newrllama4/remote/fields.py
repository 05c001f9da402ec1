"""field_probs on llama-server: a JSON answer's enum and boolean fields scored as locally.

The same rounds as field_probs.py, one prompt at a time: `/completion` generates on the
prompt's token ids and the answer's so far, under a GBNF grammar of the round's text
(the fields between generated under their own schemas, converted by llama.cpp's own
converter, with no free whitespace), returning the tokens it wrote; the field's values
are then scored as labels are on llama-server (labels.py), on those tokens, and the
value picked is appended as the tokens that write it exactly (`/detokenize` checks).
Other servers cannot: RemoteContext refuses `field_probs` there.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any, Optional

from llama_cpp.llama_grammar import SchemaConverter

from ..constraints import Constraint
from ..errors import IncompleteOutputError
from ..field_probs import Answer, choose_value, fail, finished
from ..results import Completion
from ..sampling import SamplingParams
from .http import post_json
from .labels import LabelScoring


@functools.lru_cache(maxsize=64)
def round_gbnf(pieces: str) -> str:
    """llama.cpp's GBNF of one round (`pieces` as JSON): literal texts and the GBNF of each
    schema between them, compact (the converter's optional whitespace after a value is none)."""
    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    items = []
    for j, piece in enumerate(json.loads(pieces)):
        if isinstance(piece, str):
            items.append(json.dumps(piece, ensure_ascii=False))
        else:
            items.append(converter.visit(converter.resolve_refs(piece, "schema"), f"field{j}"))
    converter._rules["space"] = '""'
    if "char" in converter._rules:  # JSON's: no control characters unescaped, as llguidance has it
        converter._rules["char"] = (r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] '
                                    r'[0-9a-fA-F] [0-9a-fA-F])')
    converter._add_rule("root", " ".join(items))
    return converter.format_grammar()


async def scored_answer(scoring: LabelScoring, prompt: Any, index: int, constraint: Constraint,
                        params: SamplingParams, seed: int) -> Completion:
    """Prompt `index`'s answer with its fields scored, in rounds on one llama-server."""
    a = Answer(index, constraint, params.seed)
    fields = a.fields
    a.prompt = await scoring.prompt_tokens(prompt)
    writings = await _writings(scoring, {t for texts in fields.texts for t in texts})
    for k in range(len(fields.names) + 1):
        budget = params.max_tokens - len(a.tokens)
        if budget < 1:
            fail(a, IncompleteOutputError(index, "json_schema", len(a.tokens), "length"))
            break
        answer = await post_json(scoring.client, f"{scoring.root}/completion", {
            "model": scoring.model, "prompt": a.prompt + a.tokens, "n_predict": budget,
            "grammar": round_gbnf(json.dumps(fields.pieces[k])), "return_tokens": True, "cache_prompt": True,
            "seed": seed, **_sampling(params),
        })
        tokens = [int(t) for t in answer["tokens"]]
        if tokens and (answer.get("stop_type") == "eos" or answer.get("stopped_eos")):
            # llama-server returns the end-of-generation token it stopped on (its
            # process_token keeps every sampled token before checking for one), which is
            # no part of the answer: the values are scored, and the next round goes on,
            # right after the text, as locally
            tokens.pop()
        a.tokens += tokens
        a.text += answer["content"]
        if answer.get("stop_type") == "limit" or answer.get("stopped_limit"):
            fail(a, IncompleteOutputError(index, "json_schema", len(a.tokens), "length"))
            break
        if k == len(fields.names):
            break
        scores = await scoring.label_scores(a.prompt + a.tokens, fields.texts[k])
        choose_value(a, scores.probs, params, k, writings.get)
        if a.failed is not None:
            break
    return a.failed if a.failed is not None else finished(a)


def _sampling(params: SamplingParams) -> dict[str, Any]:
    return {
        "temperature": params.temperature, "top_k": params.top_k, "top_p": params.top_p, "min_p": params.min_p,
        "repeat_last_n": params.repeat_last_n, "repeat_penalty": params.penalty_repeat if params.penalised else 1.0,
        "stop": list(params.stop),
    }


async def _writings(scoring: LabelScoring, texts: set[str]) -> dict[str, Optional[list[int]]]:
    """The tokens that write " " + each value exactly, as field_probs.writing finds them locally."""
    written = sorted(" " + t for t in texts)
    found = await asyncio.gather(*(_writing(scoring, text) for text in written))
    return dict(zip(written, found))


async def _writing(scoring: LabelScoring, text: str) -> Optional[list[int]]:
    for candidate in (text, text[1:]):
        tokens = await scoring.label_tokens(candidate)
        detokenized = await post_json(scoring.client, f"{scoring.root}/detokenize", {"tokens": tokens})
        if detokenized["content"] == text:
            return tokens
    return None
