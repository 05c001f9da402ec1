"""The step loop of one call: admit, fill the batch, decode, sample, retire.

Data flows one way: prompts -> sequences -> batch -> llama_decode -> samples -> results.
It runs the prompts of one window that a CallDriver (call_driver.py) did not find in
the result cache, and hands each answer back as its prompt finishes.
Whatever happens (a finished window, an exception, KeyboardInterrupt, an exception
from the progress callback), every KV stream is empty on exit.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any, Callable, Mapping, Optional

import llama_cpp as llama
import numpy as np

from ._llama import TokenBatch
from .attention import Rows, throwaway_rows, tiled_end
from .constraints import ConstrainedAnswer, Constraint, mask_logits
from .errors import DecodeError, EmptyPromptError, InvalidTokenError, PromptTooLongError
from .features import FeatureRequest, HiddenStates, KeptStates, micro_batches, text_span
from .labels import LabelPrompt, Labels, score
from .model import Model
from .prefix_cache import PrefixCache
from .prefix_plan import PrefixPlan
from .results import Completion, Stats
from .sampling import BatchSampler, SamplingParams, sequence_generator
from .scheduler import PlanEntry, Scheduler
from .sequence import Sequence

log = logging.getLogger("newrllama4")

# where a finished prompt's answer goes: its index and completion
Finished = Callable[[int, Completion], None]


class StepLoop:
    def __init__(
        self,
        model: Model,
        ctx: Any,
        batch: TokenBatch,
        scheduler: Scheduler,
        n_ctx: int,
        params: SamplingParams,
        prefix_cache: Optional[PrefixCache],
        batch_invariant: bool,
        finished: Finished,
        to_continue: bool = False,
        continuing: bool = False,
        states: Optional[HiddenStates] = None,
    ):
        """`to_continue`, `continuing`: the next call goes on from this call's prompts, this
        call from the previous call's (PrefixPlan keeps one snapshot of each prompt between).
        `states`: the context's hidden states, read for the prompts of a call with
        `features` (features.py). `finished` takes each prompt's answer as the prompt finishes. One StepLoop runs a
        call's windows one after the other, its stats counting them all."""
        self.model = model
        self.to_continue = to_continue
        self.continuing = continuing
        self.batch_invariant = batch_invariant
        self.ctx = ctx
        self.memory = llama.llama_get_memory(ctx)
        self.batch = batch
        self.scheduler = scheduler
        self.n_ctx = n_ctx
        self.params = params
        self.sampler = BatchSampler(params, model.n_vocab, llama.llama_n_threads(ctx))
        self.prefix_cache = prefix_cache
        self.prefixes: Optional[PrefixPlan] = None
        self.sequences: dict[int, Sequence] = {}  # the window's, by prompt index
        self.label_prompts: dict[int, LabelPrompt] = {}
        self.generators: Optional[list[np.random.Generator]] = None
        self.finished = finished
        self.states = states
        self.features: Optional[FeatureRequest] = None
        self.stats = Stats(seed=params.seed)

    # -- prompts -> sequences ---------------------------------------------------------

    def _sequence(self, index: int, tokens: list[int]) -> Sequence:
        sequence = Sequence(index, tokens, self.params.stop)
        if self.batch_invariant:
            sequence.n_tiled = tiled_end(len(tokens))
        bad_token = next((t for t in tokens if not 0 <= t < self.model.n_vocab), None)
        if not tokens:
            sequence.finish("error", EmptyPromptError(index))
        elif bad_token is not None:
            sequence.finish("error", InvalidTokenError(index, bad_token, self.model.n_vocab))
        elif len(tokens) > self.n_ctx:
            sequence.finish("error", PromptTooLongError(index, len(tokens), self.n_ctx))
        return sequence

    # -- the loop -----------------------------------------------------------------------

    def _label_prompt(self, sequence: Sequence, labels: Labels) -> LabelPrompt:
        label_prompt = LabelPrompt(
            sequence.index, sequence.tokens, labels, lambda text: self.model.tokenize(text, add_special=False),
            self.params.stop,
        )
        for scoring in label_prompt.sequences:
            # the label's own tokens after the prompt take the one-row kernel, like generated ones
            scoring.n_tiled = sequence.n_tiled
            if scoring.n_prompt > self.n_ctx:
                scoring.finish("error", PromptTooLongError(sequence.index, scoring.n_prompt, self.n_ctx))
        return label_prompt

    def run(self, indices: list[int], tokens: Mapping[int, list[int]], labels: list[Optional[Labels]],
            constraints: list[Optional[Constraint]], generators: Optional[list[np.random.Generator]] = None,
            features: Optional[FeatureRequest] = None) -> None:
        """Run the prompts at `indices`, given as their `tokens`, to their answers; every KV
        stream is empty after. `generators`: each prompt's random stream, when the caller
        carries it over calls (field_probs.py); by default `sequence_generator(seed, index)`.
        `features`: each answer keeps its prompt's states (features.py)."""
        self.generators = generators
        self.features = features
        try:
            self._run(indices, tokens, labels, constraints)
        finally:
            self._release_all()

    def _run(self, indices: list[int], tokens: Mapping[int, list[int]], labels: list[Optional[Labels]],
             constraints: list[Optional[Constraint]]) -> None:
        sequences = self.sequences = {i: self._sequence(i, tokens[i]) for i in indices}
        for sequence in sequences.values():
            if constraints[sequence.index] is not None and not sequence.finished:
                sequence.constrained = ConstrainedAnswer(constraints[sequence.index], self.model)
        label_prompts = self.label_prompts = {
            s.index: self._label_prompt(s, labels[s.index])
            for s in sequences.values() if labels[s.index] is not None and not s.finished
        }
        live = [s for s in sequences.values() if not s.finished and s.index not in label_prompts]
        if self.features is not None:
            for sequence in live + [p.root for p in label_prompts.values()]:
                if not sequence.finished:
                    sequence.kept = self._kept_states(sequence)
        live += [s for p in label_prompts.values() for s in p.sequences if not s.finished]
        self._n_left = Counter(s.index for s in live)
        self.stats.prompt_tokens += sum(s.n_prompt for s in live)
        for index in indices:
            if not self._n_left[index]:
                log.debug("request %d failed before start", index)
                self._finish_prompt(index)
        if self.prefix_cache is not None:
            self.prefixes = PrefixPlan(self.prefix_cache, self.ctx, live, self.to_continue, self.continuing)
        self.scheduler.add(live)
        can_start = self.prefixes.can_start if self.prefixes else None
        while not self.scheduler.done:
            for sequence in self.scheduler.admit(can_start):
                self._start(sequence)
            self.stats.peak_active_sequences = max(self.stats.peak_active_sequences, len(self.scheduler.running))
            self._run_batch(self.scheduler.next_batch())
            for sequence in [s for s in self.scheduler.running if s.finished]:
                self._retire(sequence)
        self.stats.generated_tokens += sum(len(s.generated) for s in sequences.values())
        self.stats.cached_prompt_tokens += sum(s.n_restored for s in live)
        if self.prefixes is not None:
            self.stats.prefix_snapshots += self.prefixes.snapshots
            self.stats.prefix_copied_bytes += self.prefixes.copied_bytes
        # let go of the window before the next is built, which then reuses its memory
        # instead of holding two windows at once (17 MB more at 4,096 prompts of the tiny model)
        self.sequences, self.label_prompts, self.prefixes = {}, {}, None

    def _start(self, sequence: Sequence) -> None:
        sequence.generator = self._generator(sequence.index)
        if self.prefixes is not None:
            self.prefixes.start(sequence)
        log.debug("request %d started in slot %d with %d prompt tokens", sequence.index, sequence.slot, sequence.n_prompt)

    def _retire(self, sequence: Sequence) -> None:
        # free the slot's KV cells now, so the next prompt starts from an empty stream
        llama.llama_memory_seq_rm(self.memory, sequence.slot, -1, -1)
        self.scheduler.retire(sequence)
        if self.prefixes is not None:
            self.prefixes.retire(sequence, self.scheduler.waiting)
        log.debug(
            "request %d finished (%s) after %d tokens", sequence.index, sequence.finish_reason, len(sequence.generated)
        )
        self._n_left[sequence.index] -= 1
        if not self._n_left[sequence.index]:  # a prompt with labels is done with its last scoring sequence
            self._finish_prompt(sequence.index)

    def _finish_prompt(self, index: int) -> None:
        label_prompt = self.label_prompts.get(index)
        self.finished(index, label_prompt.completion(self.params.temperature, self._generator(index))
                      if label_prompt is not None else self.sequences[index].completion())

    def _generator(self, index: int) -> np.random.Generator:
        if self.generators is not None:
            return self.generators[index]
        return sequence_generator(self.params.seed, index)

    def _release_all(self) -> None:
        self.scheduler.running.clear()
        self.scheduler.waiting.clear()
        llama.llama_memory_clear(self.memory, True)

    # -- batch -> decode -> samples -----------------------------------------------------

    def _run_batch(self, plan: list[PlanEntry]) -> None:
        """Decode one planned batch and sample its outputs; on failure retry in halves."""
        throwaway = self._throwaway_rows(plan)
        wanting_logits = self._fill(plan, throwaway)
        is_prefill = any(entry.sequence.prefilling for entry in plan)
        keeping = self._keeping(wanting_logits)
        started = time.perf_counter()
        try:
            status = self.batch.decode(self.ctx)
        finally:
            if keeping is not None:
                self.states.stop()
        elapsed = time.perf_counter() - started
        for rows in throwaway:
            llama.llama_memory_seq_rm(self.memory, rows.slot, rows.position, -1)
        self.stats.llama_decode_calls += 1
        if is_prefill:
            self.stats.prefill_seconds += elapsed
        else:
            self.stats.decode_seconds += elapsed
        if status != 0:
            if keeping is not None:
                self.states.take()
            self._recover(plan, status)
            return
        if keeping is not None:
            self._keep_states(wanting_logits, *keeping)
        for sequence, n in plan:
            sequence.n_cached += n
            self.stats.decoded_tokens += n
            if self.prefixes is not None:
                self.prefixes.after_decode(sequence)
        if wanting_logits:
            self._sample(wanting_logits)

    # -- the states a decode keeps (features.py) ------------------------------------------

    def _kept_states(self, sequence: Sequence) -> KeptStates:
        span = text_span(self.model, sequence.tokens[:sequence.n_prompt], self.features.text(sequence.index))
        return KeptStates(self.features, sequence.n_prompt, span)

    def _keeping(self, wanting_logits: list[Sequence]) -> Any:
        """Which states this decode copies, (final, layer) or None, and asks the callback for them:
        the final rows when an output row's prompt keeps "last" and has none yet (a prompt's state
        is its first output row: that of its last prompt token), the layer's when a row wants it."""
        if self.features is None:
            return None
        finishing = [s for s in wanting_logits if s.kept is not None and s.hidden_state is None]
        final = any("last" in s.kept.request.kinds for s in finishing)
        layer = self.features.needs_layer and any(
            s is not None and s.kept is not None and s.hidden_state is None and s.kept.wants_layer_rows(start, n)
            for _, s, start, n in self.filled)
        if not (finishing or layer):
            return None
        self.states.want(final, self.features.layer if layer else None)
        return final, layer

    def _keep_states(self, sequences: list[Sequence], final: bool, layer: bool) -> None:
        final_rows, micro = self.states.take()
        if final:
            if len(final_rows) != len(sequences):
                raise RuntimeError(f"llama.cpp computed {len(final_rows)} final hidden states for {len(sequences)} "
                                   "output rows")
            for sequence, row in zip(sequences, final_rows):
                if sequence.kept is not None and sequence.hidden_state is None:
                    sequence.kept.final = row
        if layer:
            rows = [(s, start + j) for _, s, start, n in self.filled for j in range(n)]
            order = micro_batches([slot for slot, _, _, n in self.filled for _ in range(n)], self.batch.capacity)
            if [len(m) for m in micro] != [len(o) for o in order]:
                raise RuntimeError(f"llama.cpp computed micro-batches of {[len(m) for m in micro]} rows, "
                                   f"not {[len(o) for o in order]}")
            for batch_rows, values in zip(order, micro):
                for k, value in zip(batch_rows, values):
                    sequence, position = rows[k]
                    if sequence is not None and sequence.kept is not None and sequence.kept.wants_layer_row(position):
                        sequence.kept.layer_rows[position] = value
        for sequence in sequences:  # their last prompt token is done
            if sequence.kept is not None and sequence.hidden_state is None:
                sequence.hidden_state = sequence.kept.assembled()
                sequence.kept.layer_rows = {}

    def _fill(self, plan: list[PlanEntry], throwaway: list[Rows]) -> list[Sequence]:
        """Put the plan and its throwaway rows into the batch, in slot order (llama.cpp
        takes consecutive seq_ids in batch order into a micro-batch), a slot's throwaway
        rows after its plan entry; return the sequences whose last token wants logits,
        in batch order. `filled` keeps the batch's runs of rows: (slot, sequence or None
        for throwaway rows, first position, count)."""
        self.batch.clear()
        wanting_logits = []
        self.filled: list[tuple[int, Optional[Sequence], int, int]] = []
        first = plan[0].sequence
        filler = first.tokens[first.n_cached]
        # (slot, 0, k) for plan[k], (slot, 1, k) for throwaway[k]
        order = sorted([(entry.sequence.slot, 0, k) for k, entry in enumerate(plan)]
                       + [(rows.slot, 1, k) for k, rows in enumerate(throwaway)])
        for slot, is_throwaway, k in order:
            if is_throwaway:
                rows = throwaway[k]
                self.batch.add([filler] * rows.n, rows.position, slot, False)
                self.filled.append((slot, None, rows.position, rows.n))
                continue
            sequence, n = plan[k]
            start = sequence.n_cached
            wants_logits = start + n == len(sequence.tokens)
            self.batch.add(sequence.tokens[start:start + n], start, slot, wants_logits)
            self.filled.append((slot, sequence, start, n))
            if wants_logits:
                wanting_logits.append(sequence)
        return wanting_logits

    def _throwaway_rows(self, plan: list[PlanEntry]) -> list[Rows]:
        """The rows that keep a batch-invariant batch's tokens on their kernels and in as
        few of llama.cpp's passes as may be (attention.throwaway_rows)."""
        if not self.batch_invariant:
            return []
        next_position = {s.slot: s.n_cached for s in self.scheduler.running}
        room = self.batch.capacity - self.scheduler.n_slots - max(n for _, n in plan) * len(plan)
        # the chunks of prompts others wait for may be longer (Scheduler._equal_prefill)
        length = max((n for s, n in plan if not s.awaited), default=max(n for _, n in plan))
        return throwaway_rows([Rows(s.slot, s.n_cached, n) for s, n in plan],
                              lambda slot: next_position.get(slot, 0), room, length)

    def _recover(self, plan: list[PlanEntry], status: int) -> None:
        # llama.cpp keeps the micro-batches that succeeded; roll every sequence back to
        # where it was before this batch so that a retry starts from a known state
        for sequence, _ in plan:
            llama.llama_memory_seq_rm(self.memory, sequence.slot, sequence.n_cached, -1)
        if len(plan) == 1:
            sequence = plan[0].sequence
            log.debug("request %d failed: llama_decode returned %d", sequence.index, status)
            sequence.finish("error", DecodeError(sequence.index, status))
            return
        self.stats.retries += 1
        middle = len(plan) // 2
        for half in (plan[:middle], plan[middle:]):
            self._run_batch(half)

    def _sample(self, sequences: list[Sequence]) -> None:
        started = time.perf_counter()
        # llama.cpp keeps the batch's output rows contiguous and in batch order
        logits = np.ctypeslib.as_array(llama.llama_get_logits(self.ctx), shape=(len(sequences), self.model.n_vocab))
        scoring = [k for k, s in enumerate(sequences) if s.score_tokens is not None]
        if scoring:  # read before the sampler penalises rows in place
            score([sequences[k] for k in scoring], logits[scoring])
            sampling = [k for k, s in enumerate(sequences) if s.score_tokens is None]
            sequences, logits = [sequences[k] for k in sampling], logits[sampling]
        constrained = [k for k, s in enumerate(sequences) if s.constrained is not None]
        if constrained:
            mask_logits(logits, constrained, [sequences[k].constrained for k in constrained])
        tokens = (
            self.sampler.sample(logits, [s.tokens for s in sequences], [s.generator for s in sequences])
            if sequences else np.empty(0, dtype=np.int64)
        )
        self.stats.sample_seconds += time.perf_counter() - started
        for sequence, token in zip(sequences, tokens.tolist()):
            if self.model.is_eog(token):
                sequence.end()
            else:
                sequence.accept(token, self.model.token_piece, self.params.max_tokens, self.n_ctx)
