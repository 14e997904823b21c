"""FOD's candidate sentences: ``S`` next sentences sampled over ``K`` beams in one batch, then scored.

Each candidate is the next sentence of its beam, sampled token by token until a
visible character of the sentence after it exists (or EOS). All rows decode as
one left-padded batch; with steering (:mod:`fod.steering`) the without-context
pass runs in lockstep so every row has
its without-context distribution at every step (for the first :data:`STEER_TOKENS` tokens): in the forward that steps
the rows where the model packs (:meth:`~syncheck.live.engine.LiveEngine.step_level`), else one extra batched forward
per token. A finished candidate
leaves the batch, so each step costs only the rows still decoding (the finished ones are gathered back before
scoring); sampling draws as if it had stayed, so a candidate's tokens do not depend on when the others finished.
Rows that run long do not hold the batch either (``cut_stragglers``): once half the candidates are finished, the
others get at most twice the longest finished one's length (plus :data:`STRAGGLER_SLACK` tokens), and a candidate cut
off mid-sentence is ``capped``. A candidate that wrote the very tokens that were cut away (``redo``) does not count as
finished there: it will be flagged again, so a short degenerate sentence sampled over and over ("4.") does not cut
off the longer candidates that might replace it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from fod.steering import steered_logits
from syncheck.decoding import Decoding
from syncheck.featurize import Premise
from syncheck.live.generation import SentenceEvent
from syncheck.live.monitor import Monitor
from syncheck.live.state import Batch

#: Tokens a straggler may run past twice the longest finished candidate (see the module docstring).
STRAGGLER_SLACK = 8
#: Steered tokens per candidate: the contrast matters where the sentence turns (right after the cut); after that the
#: candidates go on plainly, with the without-context pass deferred again (it costs one batched forward a token)
STEER_TOKENS = 16


@dataclass
class Candidate:
    """One sampled continuation: its row in the sampling batch, its beam and its scored sentence(s)."""

    index: int
    beam: int
    events: list[SentenceEvent]
    ended: bool  # EOS right after its sentence
    capped: bool  # cut off mid-sentence (the sentence token cap or the straggler rule)

    @property
    def score(self) -> float | None:
        scores = [e.sentence.score for e in self.events if e.sentence.score is not None]
        return min(scores) if scores else None

    @property
    def degenerate(self) -> str | None:
        return next((e.sentence.degenerate for e in self.events if e.sentence.degenerate), None)

    @property
    def text(self) -> str:
        return " ".join(e.sentence.text for e in self.events)

    @property
    def end(self) -> int:
        """Token length of the row up to the end of its sentence."""
        return self.events[-1].tokens[1]


def sample_candidates(monitor: Monitor, beams: Sequence[Batch], shares: Sequence[int], premise: Premise,
                      decoding: Decoding, generator: torch.Generator, *, max_tokens: int, steer: str = "none",
                      alpha: float | None = None, ban: Sequence[int] = (), redo: Sequence[int] = (),
                      leave: bool = True, cut_stragglers: bool = True) -> tuple[Batch, list[Candidate]]:
    """Sample ``shares[j]`` next sentences of each one-row beam ``j`` in one batch and score them.

    Args:
        max_tokens: cap on a candidate's new tokens.
        steer: ``"none"`` (the with-context distribution), ``"adacad"`` or ``"cad"`` (see :mod:`fod.steering`).
        alpha: CAD's weight, needed with ``steer="cad"``.
        ban: tokens no candidate may start with (the token a token-level backtrack cut away; the spellings of a
            document label the flagged sentence copied from the prompt).
        redo: the tokens that were cut away (the flagged sentence after the cut); a candidate that repeats them
            exactly does not set the stragglers' deadline.
        leave: finished candidates leave the batch (``False``: they are fed padding to the end, as a reference).
        cut_stragglers: once half the candidates have finished, the others get at most twice the longest finished
            one's tokens (plus :data:`STRAGGLER_SLACK`); ``False``: each runs to the end of its sentence or
            ``max_tokens``.

    Returns:
        The sampling batch (select a candidate's row from it) and the candidates, beam 0's first.
    """
    engine = monitor.engine
    steered = steer != "none"
    if steered:
        if not engine.kl:
            raise ValueError(f"steer={steer!r} needs the without-context pass: build the Scorer with kl=True, "
                             "or use steer='none'")
        for b in beams:  # every row's without-context pass is level with its tokens before they run in lockstep
            engine.flush_kl(b, [len(b.rows[0].ids)])
    batch = engine.merge(list(beams), list(shares))
    owner = [j for j, n in enumerate(shares) for _ in range(n)]
    n = len(batch)
    rows = list(batch.rows)
    start = [len(r.ids) for r in rows]
    done, lengths = [False] * n, [0] * n
    redone = [False] * n  # finished by writing exactly the cut-away tokens again
    live = list(range(n))  # the candidates still decoding: the rows of ``batch``, in order
    home: list[tuple[Batch, int] | None] = [None] * n  # (batch, row) where a candidate that left is parked
    for step in range(max(max_tokens, 0)):
        steering = steered and step < STEER_TOKENS
        logits = batch.next_logp
        if steering:
            without = torch.stack([r.without_next for r in batch.rows])
            logits, _ = steered_logits(batch.next_logp, without, steer, alpha)
        if step == 0 and ban:
            logits = logits.clone()
            logits[:, list(ban)] = float("-inf")
        tokens, active = _choose_live(engine, batch, decoding, generator, logits, live, n), [not done[i] for i in live]
        if steering and step + 1 < STEER_TOKENS and engine.levels(batch):  # both passes in one forward
            engine.step_level(batch, tokens, active)
        else:
            engine.step(batch, tokens, active=active)
            if steering and step + 1 < STEER_TOKENS:
                engine.flush_kl(batch, [len(r.ids) for r in batch.rows])
        for i in live:
            if rows[i].ended or rows[i].pending_sentences(final=False):
                done[i], lengths[i] = True, len(rows[i].ids) - start[i]
                redone[i] = _repeats(rows[i], start[i], redo)
        if all(done):
            break
        finished = [lengths[i] for i in range(n) if done[i] and not redone[i]]
        if cut_stragglers and 2 * len(finished) >= n and step + 1 >= 2 * max(finished) + STRAGGLER_SLACK:
            break
        if leave and any(done[i] for i in live):  # finished candidates leave the batch: the others decode without them
            # both sides are copied out, so no earlier batch (all its rows' caches) stays alive
            left = [(at, i) for at, i in enumerate(live) if done[i]]
            parked = engine.gather([(batch, at) for at, _ in left])
            for k, (_, i) in enumerate(left):
                home[i] = (parked, k)
            kept = [(at, i) for at, i in enumerate(live) if not done[i]]
            batch, live = engine.gather([(batch, at) for at, _ in kept]), [i for _, i in kept]
    if any(h is not None for h in home):  # all candidates together again, in their first order
        for at, i in enumerate(live):
            home[i] = (batch, at)
        batch = engine.gather(home)
    capped = [not d for d in done]
    finals = [r.ended or c for r, c in zip(batch.rows, capped)]
    events = monitor.score_finished(batch, premise, final=finals, first_only=True)
    out = []
    for i, evs in enumerate(events):
        row = batch.rows[i]
        ended = row.ended and (not evs or evs[-1].tokens[1] == len(row.ids))
        out.append(Candidate(i, owner[i], evs, ended, capped[i]))
    return batch, out


def _repeats(row, start: int, redo: Sequence[int]) -> bool:
    """Whether ``row``'s tokens after ``start`` are exactly ``redo`` (an ended row: ``redo`` then its end)."""
    if not redo:
        return False
    new = [int(t) for t in row.ids[start:]]
    return new[: len(redo)] == [int(t) for t in redo] and len(new) <= len(redo) + 1


def _choose_live(engine, batch: Batch, decoding: Decoding, generator: torch.Generator, logits: torch.Tensor,
                 live: list[int], n: int) -> torch.Tensor:
    """The next token of each row of ``batch`` (candidates ``live`` of ``n``): ``(len(live),)``.

    Sampling draws for all ``n`` candidates, as if none had left the batch, so each candidate's draws do not depend
    on when the others finished; a finished candidate's draw is thrown away.
    """
    if len(live) == n or not decoding.do_sample:
        return engine.choose(batch, decoding, generator, logits)
    full = logits.new_zeros((n, logits.shape[-1]))  # (n, V): a uniform distribution for the finished candidates
    full[live] = logits
    return engine.choose(batch, decoding, generator, full)[live]


__all__ = ["STEER_TOKENS", "STRAGGLER_SLACK", "Candidate", "sample_candidates"]
