"""Answers kept on disk across calls and crashes: one SQLite row per finished prompt.

With `generate_parallel(prompts, ..., cache="answers.sqlite")` every prompt is looked
up before anything is decoded; the answers found come back as they were stored and
only the other prompts run. Each answer is committed as its prompt finishes, in a
transaction of its own, so a call killed by `kill -9`, Ctrl-C or a power cut loses
only the answers still being generated, and a re-run computes just those. Failed
prompts are not stored.

An answer's key is the SHA-256 of a canonical JSON of everything that decides it:

- `CACHE_FORMAT`, bumped whenever the engine's output for the same inputs changes
  (not the engine's version: a release that leaves outputs alone keeps its caches);
- the model: for a local context the model file's SHA-256, computed once per file and
  remembered in the cache file by the file's path, size and modification time; for a
  remote one `RemoteContext.model_identity`, "server:" and the model id the servers
  report (a SHA-256 holds no colon, so the two never meet);
- the prompt: locally its tokens as rendered, not its string; remotely the prompt as
  it is sent (its text, token ids or chat messages), since the server tokenizes it;
- what else of the context decides answers: locally llama-cpp-python's version (whose
  llama.cpp kernels decide the numbers), `batch_invariant`, and the limit on the
  sequence where it can end an answer before `max_tokens` does; remotely the kinds of
  server, which decide the fields each request is sent (never the URLs or the API key:
  the same model gives the same answers from another address);
- every argument of `generate_parallel` by name except those in `NOT_IN_KEY`, which
  cannot change an answer: all `SamplingParams` fields, and the arguments given
  per prompt (a prompt's own labels, ...) with that prompt's value; `field_probs` only
  where it scores a prompt's fields (field_probs.py), so that the answers of other
  prompts, which it leaves alone, are found again; `hidden_states` only when asked for
  (its kinds and layer, and a prompt's `feature_texts` entry where "mean" reads it), since
  an answer kept without its states cannot serve a call that wants them, while one kept
  with them is the same answer (features.py);
- with temperature > 0 only, the seed and the prompt's index, which seed its random
  stream (`sampling.sequence_generator`) and, remotely, its request's seed. A greedy
  answer depends on neither, so it is found again whatever the seed and wherever the
  prompt moved in the list.

Several processes can share one file: the WAL journal lets readers and a writer work
at once, writers wait for each other (busy timeout), and INSERT OR IGNORE keeps the
first of two identical answers computed at the same time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional, Union

from .constraints import Constraint
from .errors import CacheError, InvalidArgumentError
from .features import FeatureRequest
from .files import file_identity, file_sha256
from .labels import Labels
from .results import Completion
from .sampling import SamplingParams

# 2: the tiled matmul forced for every batch (it was off), which rounds differently
# 3: batch invariance on an F16 KV cache with its tiled attention kernel (it was Q8_0)
# 4: a prompt's last tile in the one-row kernel; the fast lane on repacked weights
# 5: a completion's label and label_probs (they were choice and choice_probs)
CACHE_FORMAT = 5
# Arguments of generate_parallel that cannot change an answer; every other one is in the key.
NOT_IN_KEY = frozenset({"self", "prompts", "on_progress", "cache"})

# "NLRC" in the SQLite header marks a newrllama4 result cache; user_version is its layout
_APPLICATION_ID = 0x4E4C5243
_LAYOUT_VERSION = 1
_LAYOUT = (
    "CREATE TABLE answers (key TEXT PRIMARY KEY, completion TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE model_files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, "
    "sha256 TEXT NOT NULL)",
)
_BUSY_TIMEOUT_SECONDS = 60.0
# what an answer read back gets anew, rather than from its row
_NOT_STORED = frozenset({"error", "n_cached_tokens", "from_cache"})


def check_cache_path(cache: Any) -> Optional[str]:
    if cache is None:
        return None
    if not isinstance(cache, (str, os.PathLike)) or not isinstance(os.fspath(cache), str) or not os.fspath(cache):
        raise InvalidArgumentError("cache", cache, "None or the path of a cache file")
    return os.fspath(Path(cache).expanduser())


class ResultCache:
    """One open cache file: answers by key, and the SHA-256 of the model files seen."""

    def __init__(self, path: str):
        self.path = path
        try:
            self._db = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise CacheError(path, f"cannot be opened: {exc}") from exc
        try:
            self._use_wal()
            # a process that dies loses nothing committed; a power cut at worst the last
            # answers, which a re-run computes again; the file stays consistent either way
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._check_layout()
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, sqlite3.Error):
                raise CacheError(path, f"is not a usable SQLite database: {exc}") from exc
            raise

    def close(self) -> None:
        self._db.close()

    def _use_wal(self) -> None:
        # Switching a new file to WAL needs it to itself, and SQLite answers "locked" at
        # once rather than waiting: two processes creating one cache file take turns here.
        deadline = time.monotonic() + _BUSY_TIMEOUT_SECONDS
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _check_layout(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")  # two processes creating the file take turns
        try:
            application_id = self._db.execute("PRAGMA application_id").fetchone()[0]
            is_empty = self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
            if application_id == 0 and is_empty:
                for statement in _LAYOUT:
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
                self._db.execute(f"PRAGMA user_version = {_LAYOUT_VERSION}")
            elif application_id != _APPLICATION_ID:
                raise CacheError(self.path, "is a SQLite database of another application, not a newrllama4 result cache")
            else:
                layout = self._db.execute("PRAGMA user_version").fetchone()[0]
                if layout != _LAYOUT_VERSION:
                    raise CacheError(
                        self.path, f"has layout {layout}, which this engine (layout {_LAYOUT_VERSION}) cannot read"
                    )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _run(self, sql: str, parameters: tuple) -> Optional[tuple]:
        """One statement, in a transaction of its own; its first row."""
        try:
            return self._db.execute(sql, parameters).fetchone()
        except sqlite3.Error as exc:
            raise CacheError(self.path, f"failed: {exc}") from exc

    def model_sha256(self, model_path: str) -> str:
        """The SHA-256 of a model file, hashed only when the cache has not seen this
        path with this size and modification time."""
        identity = file_identity(model_path)
        row = self._run("SELECT sha256 FROM model_files WHERE path = ? AND size = ? AND mtime_ns = ?", identity)
        if row is not None:
            return row[0]
        sha256 = file_sha256(model_path)
        self._run("INSERT OR REPLACE INTO model_files VALUES (?, ?, ?, ?)", identity + (sha256,))
        return sha256

    def get(self, key: str) -> Optional[Completion]:
        row = self._run("SELECT completion FROM answers WHERE key = ?", (key,))
        if row is None:
            return None
        stored = json.loads(row[0])
        if stored.get("hidden_state") is not None:
            stored["hidden_state"] = base64.b64decode(stored["hidden_state"])
        # none of the prompt was decoded for this answer
        return Completion(**stored, n_cached_tokens=stored["n_prompt_tokens"], from_cache=True)

    def put(self, key: str, completion: Completion) -> None:
        stored = {f.name: getattr(completion, f.name) for f in fields(Completion) if f.name not in _NOT_STORED}
        if completion.hidden_state is not None:
            stored["hidden_state"] = base64.b64encode(completion.hidden_state).decode("ascii")
        self._run("INSERT OR IGNORE INTO answers VALUES (?, ?)", (key, json.dumps(stored)))


def per_prompt_arguments(labels: list[Optional[Labels]],
                         constraints: list[Optional[Constraint]]) -> dict[str, list[Any]]:
    """The arguments of a call given per prompt, by name, one value per prompt: with the
    SamplingParams, every argument of generate_parallel outside NOT_IN_KEY."""
    return {
        "labels": labels,
        # a constraint by its compiled grammar, which also covers how JSON is written
        **{kind: [c.grammar if c is not None and c.kind == kind else None for c in constraints]
           for kind in ("json_schema", "grammar")},
    }


@dataclass(frozen=True)
class ModelFile:
    """A local model as a key names it: by its file's SHA-256, which the cache remembers."""

    path: str


class CachedCall:
    """The result cache as one call sees it: a lookup per prompt before anything runs, a
    commit per prompt as it finishes.

    `model` is what the keys name the model by: a local ModelFile, or a server's model
    (RemoteContext.model_identity). `setup` holds what else of the context decides
    answers, and `n_ctx` its limit on a sequence (None for a server, whose limit is its
    model's); see the module's docstring for both.
    """

    def __init__(self, path: str, model: Union[ModelFile, str], setup: dict[str, Any], params: SamplingParams,
                 labels: list[Optional[Labels]], constraints: list[Optional[Constraint]],
                 n_ctx: Optional[int] = None, features: Optional[FeatureRequest] = None):
        self._cache = ResultCache(path)
        try:
            model_id = self._cache.model_sha256(model.path) if isinstance(model, ModelFile) else model
        except BaseException:
            self._cache.close()
            raise
        self._common = {"format": CACHE_FORMAT, "model": model_id, **setup,
                        **({"hidden_states": features.key()} if features is not None else {})}
        self._features = features
        self._arguments = {f.name: getattr(params, f.name) for f in fields(params) if f.name != "seed"}
        self._per_prompt = per_prompt_arguments(labels, constraints)
        self._scores_fields = [c is not None and c.fields is not None for c in constraints]
        self._seed = None if params.greedy else params.seed
        self._n_ctx = n_ctx
        self._max_tokens = params.max_tokens
        self._keys: dict[int, str] = {}

    def close(self) -> None:
        self._cache.close()

    def key(self, index: int, prompt: Any) -> str:
        """Prompt `index`'s key: `prompt` is its tokens for a local model, the prompt as
        sent for a server."""
        material = dict(
            self._common,
            prompt=prompt,
            arguments=dict(self._arguments, **{name: values[index] for name, values in self._per_prompt.items()},
                           **({"field_probs": True} if self._scores_fields[index] else {})),
            random=None if self._seed is None else {"seed": self._seed, "index": index},
        )
        if self._features is not None and self._features.text(index) is not None:
            material["feature_text"] = self._features.text(index)
        if self._n_ctx is not None:
            # a sequence ends at n_ctx tokens; past prompt + max_tokens that limit never binds
            material["sequence_limit"] = min(self._n_ctx, len(prompt) + self._max_tokens)
        canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()

    def lookup(self, index: int, prompt: Any) -> Optional[Completion]:
        self._keys[index] = self.key(index, prompt)
        return self._cache.get(self._keys[index])

    def store(self, index: int, completion: Completion) -> None:
        if completion.finish_reason != "error":
            self._cache.put(self._keys[index], completion)
