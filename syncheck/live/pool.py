"""One forward per round for independent generations: the next token of every stream, packed or padded.

**Packed rounds** (the default on CPU where the model allows it, :func:`syncheck.model.packed.packs`): each
:class:`~syncheck.live.monitor.MonitorRun` keeps its own one-row caches, and a round is one forward that carries the
next token of every run, the without-context flush of each sentence that ended in the round before, and both
prompts of each run not yet prefilled (the with-context one from a copy of the cached documents' prefix where it
shares them, :mod:`syncheck.live.prefix_cache`), each row's tokens side by side in one sequence with no padding
(:func:`~syncheck.model.packed.packed_forward`). A flush or a prompt then costs a few tokens of a forward that runs
anyway instead of a forward of its own, and nothing is copied when runs join or leave. A finished sentence's score
arrives one token later than alone; a run's last flush goes in the next round's forward, and the run ends there; a
new run takes its first token in the round after its prompts.

**Padded rounds** (elsewhere, or ``packed=False``): the pool owns one left-padded with-context KV cache holding a row
for each run, each row with its own position ids; a run joins by having its prefilled one-row cache concatenated in,
and leaves by having its row dropped. The cache has room to grow (:func:`~syncheck.model.kv.with_room`): a decode step
writes its position in place. Runs that arrive in the same round are prefilled together (both prompts, each in one
left-padded forward). The without-context flushes at sentence ends run in forwards of their own, grouped
(:func:`~syncheck.live.deferred_kl.flush_group`): a run's finished sentence waits until a run ends (whose last flush
goes at once, and takes the waiting ones with it), ``flush_group`` runs have one, or it has waited ``flush_wait``
rounds, whichever comes first; so its score arrives at most ``flush_wait`` tokens later than alone (its text streams
on meanwhile), and its features are the same to float tolerance.

Either way, a run whose flushes must stay its own (:meth:`MonitorRun.flush_due
<syncheck.live.monitor.MonitorRun.flush_due>`) flushes as it would alone, and each run keeps its sentence scoring.
Lookback ratios are not pooled (runs of a monitor that records them are stepped one by one).
"""

from __future__ import annotations

from typing import Sequence

import torch

from syncheck.live.deferred_kl import FlushResult, flush_group, flushed_row, plan_flush
from syncheck.live.engine import LiveEngine
from syncheck.live.monitor import MonitorStep
from syncheck.live.state import Batch
from syncheck.model.kv import cache_length, concat_left_padded, select_rows, with_room
from syncheck.model.packed import Segment, packed_forward, packs

#: runs with a finished sentence that make a flush go at once (see the module docstring); by default none waits: the
#: flushes of the sentences that end in the same round go in one forward. Waiting for others measured no faster
#: than not grouping, inside the runs' spreads (RESULTS.md in the source repository, "Serving", and its notes)
FLUSH_GROUP = 1
#: rounds a finished sentence may wait for others before it is flushed
FLUSH_WAIT = 0
#: ``syncheck serve --packing``: the pool's ``packed`` argument by name
PACKING = {"auto": None, "on": True, "off": False}


def packing_choice(name: str) -> bool | None:
    """The :class:`DecodePool` ``packed`` argument for ``auto`` (packed on CPU where the model allows it), ``on`` or
    ``off``."""
    if name not in PACKING:
        raise ValueError(f"packing must be auto, on or off, got {name!r}")
    return PACKING[name]


class DecodePool:
    """Steps the runs it is given, all of them in one with-context forward.

    Args:
        engine: the :class:`~syncheck.live.engine.LiveEngine` of the runs' monitor.
        flush_group: runs with a finished sentence that make the flush go at once (1: every finished sentence is
            flushed in the round it ends, together with the others that end in that round).
        flush_wait: rounds a finished sentence may wait for others (0: none waits).
        packed: step in packed rounds (see the module docstring): ``None`` (default) on CPU where the model allows
            it (:func:`~syncheck.model.packed.packs`; not yet measured on an accelerator, where ``True`` turns it
            on), ``False`` never (one left-padded cache for all rows, flushes grouped by ``flush_group`` and
            ``flush_wait``).
    """

    def __init__(self, engine: LiveEngine, flush_group: int = FLUSH_GROUP, flush_wait: int = FLUSH_WAIT,
                 packed: bool | None = None) -> None:
        if flush_group < 1 or flush_wait < 0:
            raise ValueError(f"need flush_group >= 1 and flush_wait >= 0, got {flush_group}, {flush_wait}")
        self.engine = engine
        self.flush_group, self.flush_wait = flush_group, flush_wait
        self._packed = packed
        self._due: dict[int, tuple] = {}  # id(run) -> (run, the token its flush reaches, whether it is its last)
        self.runs: list = []
        self.cache = None
        self.pads: list[int] = []
        self._waited: dict[int, int] = {}  # id(run) -> rounds its finished sentence has waited
        #: flushes the pool ran (alone or grouped), and the runs' flushes in them
        self.group_flushes = 0
        self.grouped_rows = 0

    @property
    def pooled(self) -> bool:
        """Whether runs are batched (else each is stepped alone)."""
        return not self.engine.lookback

    def step(self, runs: Sequence) -> None:
        """One token for each run (``run.choose()``), then ``run.advance()`` for each; see ``run.last``.

        Runs not yet prefilled (``Monitor.run(prefill=False)``) are prefilled first. Packed, their prompts ride this
        round's forward and they take no token in it (``run.last`` is empty); padded, they are prefilled together,
        one forward for their with-context prompts and one for their without-context prompts
        (:meth:`LiveEngine.start_many`), and take their first token in this round.
        """
        if not self.pooled:
            for run in runs:
                token = run.choose()  # prefills a fresh run first
                self.engine.step(run.batch, token)
                run.advance()
            return
        if self.packed:
            self._step_packed(runs)
            return
        fresh = [r for r in runs if r.batch is None]
        if fresh:
            for run, batch in zip(fresh, self.engine.start_many([r.prompts for r in fresh])):
                run.prefill(batch)
        self._sync(runs)
        tokens = torch.cat([r.choose() for r in self.runs])
        view = Batch([r.row for r in self.runs], self.cache, None, torch.cat([r.batch.next_logp for r in self.runs]),
                     prompt=[], prompt_len_without=0, pad_with=list(self.pads),
                     prompt_lens=[r.batch.prompt_len for r in self.runs])
        self.engine.step(view, tokens)
        self.cache = view.with_cache
        for i, run in enumerate(self.runs):
            run.batch.observe_next(view.next_logp[i : i + 1])
        self._flush_finished()
        for run in self.runs:
            run.advance()

    @property
    def packed(self) -> bool:
        """Whether rounds are packed (decided on first use, from the model: :func:`~syncheck.model.packed.packs`)."""
        if self._packed is None:  # measured on CPU only; on an accelerator, pass packed=True to try it
            lm = self.engine.lm
            self._packed = lm.device.type == "cpu" and packs(lm.model)
        return self._packed

    def _step_packed(self, runs: Sequence) -> None:
        """One packed forward: the next token of every run (except those whose last flush goes now: they end), the
        flushes that came due in the round before, and the prompts of the runs not yet prefilled (they take their
        first token in the next round). Then each run advances; a run whose next flush would be its last waits for
        the next round to end."""
        self.runs = [r for r in runs if r.result is None]
        here = {id(r) for r in self.runs}
        due = [d for key, d in self._due.items() if key in here]
        ending = {id(run) for run, _, final in due if final}
        plans = [plan_flush(self.engine, run.batch, [end]) for run, end, _ in due]
        fresh = [r for r in self.runs if r.batch is None]
        starts, started = self.engine.start_segments([r.prompts for r in fresh]) if fresh else ([], None)
        running = [r for r in self.runs if r.batch is not None]
        stepping = [r for r in running if id(r) not in ending]
        segments, fed = [], []
        for run in stepping:
            feed, took, positions = self.engine.append_tokens(run.batch, run.choose())
            if took[0]:  # an EOS ends the row: nothing to feed
                segments.append(Segment(run.batch.with_cache, feed, logits=1, start=positions[0]))
                fed.append(run)
        flushes = [plan for plan in plans if plan.feed is not None]
        segments += [Segment(plan.cache, plan.feed[0], logits=plan.n[0], start=int(plan.positions[0, 0]))
                     for plan in flushes]
        outs = packed_forward(self.engine.lm.model, segments + starts, self.engine.hidden_layers)
        for run, out in zip(fed, outs):
            run.batch.fed_with(run.batch.with_cache, torch.log_softmax(out.logits.float(), -1))
            self.engine.append_hidden(run.batch, [True], [out.hidden])
        for plan, out in zip(flushes, outs[len(fed) :]):
            plan.apply(FlushResult(plan.cache, [flushed_row(plan, 0, torch.log_softmax(out.logits.float(), -1))[0]]))
        for plan in plans:
            if plan.feed is None:
                plan.apply(None)
        if fresh:
            for run, batch in zip(fresh, started(outs[len(segments) :])):
                run.prefill(batch)
                run.last = MonitorStep("", [])
        if flushes:
            self.group_flushes += 1
            self.grouped_rows += len(flushes)
        self._due = {}
        for run in running:
            if id(run) in ending:  # its last flush went in this forward: it ends now
                run.hold_flush = False
                run.advance()
                continue
            flush = run.flush_due()
            if flush is not None:
                self._due[id(run)] = (run, *flush)
                if flush[1]:  # its last flush goes in the next round's forward, and the run ends there
                    run.last = MonitorStep("", [])
                    continue
            run.hold_flush = flush is not None
            run.advance()

    def _flush_finished(self) -> None:
        """Flush the runs' finished sentences together once a run ends (its last flush cannot wait), enough runs have
        one, or one has waited long enough; hold them (``run.hold_flush``) until then."""
        due = {id(run): (run, *flush) for run in self.runs if (flush := run.flush_due()) is not None}
        self._waited = {key: self._waited.get(key, -1) + 1 for key in due}
        go = bool(due) and (len(due) >= self.flush_group or max(self._waited.values()) >= self.flush_wait
                            or any(final for _, _, final in due.values()))
        if go:
            flush_group(self.engine, [run.batch for run, _, _ in due.values()], [end for _, end, _ in due.values()])
            self.group_flushes += 1
            self.grouped_rows += len(due)
            self._waited = {}
        for run in self.runs:
            run.hold_flush = not go and id(run) in due

    def _sync(self, runs: Sequence) -> None:
        """Make the pool's rows exactly ``runs``: drop the rows of runs that left, concatenate the new ones."""
        wanted = {id(r) for r in runs}
        keep = [i for i, r in enumerate(self.runs) if id(r) in wanted and r.result is None]
        if len(keep) < len(self.runs):
            if keep:
                cut = min(self.pads[i] for i in keep)
                self.cache = with_room(select_rows(self.cache, keep, cache_length(self.cache) - cut, start=cut))
                self.pads = [self.pads[i] - cut for i in keep]
            else:
                self.cache, self.pads = None, []
            self.runs = [self.runs[i] for i in keep]
        have = {id(r) for r in self.runs}
        new = [r for r in runs if id(r) not in have]
        if not new:
            return
        if any(len(r.batch) != 1 or r.batch.with_cache is None for r in new):
            raise ValueError("a run joins the pool with its own prefilled one-row batch")
        caches = ([self.cache] if self.cache is not None else []) + [r.batch.with_cache for r in new]
        if len(caches) == 1:  # one run into an empty pool: its cache becomes the pool's (given room to grow)
            cache, pads = with_room(caches[0]), [0]
        else:  # built with room to grow
            cache, pads = concat_left_padded(caches)
        if self.cache is not None:
            extra = pads[0]  # every old row gets the same extra left padding
            pads = [p + extra for p in self.pads] + pads[len(self.runs) :]
        self.cache, self.pads = cache, pads
        for run in new:
            run.batch.release_with_cache()  # the pool's row is its cache from now on
        self.runs.extend(new)


__all__ = ["PACKING", "DecodePool", "packing_choice"]
