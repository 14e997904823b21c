"""Cost of the live monitor against plain ``model.generate``, side by side in one process.

For each prompt and round, interleaved: plain greedy ``model.generate`` (the
baseline), the monitor with the without-context pass deferred to sentence ends
(the design syncheck uses), and the monitor with the without-context pass in
lockstep (one extra batch-1 forward per token; :func:`lockstep_generate` drives the monitor that way here, as the
library no longer offers it). All three produce the same
number of tokens (the monitor's count is passed to ``generate`` as
``min_new_tokens``/``max_new_tokens``). The deferred pass is timed both ways it
can run: on a worker thread beside the next decode steps (the default on CPU)
and between two decode steps (the default elsewhere); see
:mod:`syncheck.live.background`. After the timings, an untimed run of each
prints how many tokens past a sentence's end its event came. The monitor runs the default
configuration: every default feature (KL, PMI, string checks, alignment), the
hidden states of the probe's layers and the default aggregator's score of each
sentence.

Beside its seconds, every timed run counts the generator model's forward passes
(:class:`~benchmarks.forward_count.ForwardCount`: each call of the whole causal LM once, whatever its batch, the
without-context flushes on a worker thread included; an ``align_score`` backend's own model is not counted), and the
table gives them per run and per token of the run's answer (:func:`answer_tokens`); FOD's lines give its forwards
over greedy's beside its time ratio. A count is not moved by the machine's load, where a timed ratio is.

Every timed run starts cold, as ``generate`` does: the engines' prompt prefix
caches (:mod:`syncheck.live.prefix_cache`) are cleared before it, so no run
skips its prefill because an earlier round used the same prompt (a reused
prefill would flatter the monitors' ratios). The row "prompt prefix cached"
runs the deferred monitor a second time on the same prompt without clearing:
what a caller asking again over the same documents pays. One untimed round of
every method comes first (``--warmup-rounds``), so that no method pays for the
kernels, attention plans and memory pools built the first time a shape is met
while another reuses them.

With ``--lookback``, the monitor recording every head's lookback ratio (a second copy of the model, whose attention is
switched to the
recording wrapper) is timed too. With ``--fod``, FOD (S=6, K=2) and greedy
FOD-interface generation are timed the same way, and FOD forced to backtrack once at the first sentence
(:func:`backtrack_at_first_sentence`), which then repairs that sentence and decodes the rest greedily: the cost of one
repair. With ``--alignment SPEC`` (e.g. ``verifier``), both deferred monitors are timed again with their
``align_score`` from that backend, question-aware, and each one's cost per sentence over its lexical row is printed:
with a worker thread, the sentences' alignment runs there after the flush (:mod:`syncheck.live.background`).

Usage::

    .venv/bin/python -m benchmarks.monitor_overhead [--tokens 128] [--rounds 3] [--prompts 2] [--lookback] [--fod] \\
        [--alignment verifier]

On an accelerator, a random-weight model of a real shape measures the same
ratios without a download (speed does not depend on the weights; the portable
aggregator scores its sentences)::

    .venv/bin/python -m benchmarks.monitor_overhead --shape llama3-8b --device cuda --dtype bfloat16 --fod
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from benchmarks.forward_count import ForwardCount
from benchmarks.run_stamp import machine

CONTEXT = (
    "The Kestrel Navigation canal opened in 1794 and linked the wool mills of Kestrelford to the port of Aldmouth, "
    "32 km to the south. It was engineered by Josiah Marlowe, who designed its eleven locks and the 240 m Brindle "
    "tunnel. Shipping cloth by barge cost less than half of what packhorses had charged, and the town's output "
    "doubled within a decade. After the railway reached Kestrelford in 1852 the canal lost most of its traffic; the "
    "last commercial barge unloaded in 1931. Volunteers of the Kestrel Canal Trust restored the locks between 1978 "
    "and 1989, and the towpath is now part of a long-distance footpath. About 40,000 people visit each year, most of "
    "them between May and September, when trip boats run from the Marlowe Basin every afternoon. "
) * 3
QUESTIONS = [
    "Describe the history of the Kestrel Navigation canal in detail.",
    "Who built the Kestrel Navigation, and what happened to it later?",
    "What can visitors do at the canal today, and how did it get there?",
]


_DEVICE = "cpu"


_ENGINES: list = []  # the live engines whose prompt prefix caches every timed run clears first
_MODELS: list = []  # the generator models (``torch.nn.Module``) whose forwards every timed run counts


#: the row of the deferred monitor run a second time on the same prompt, its documents' prefix cached
WARM = "monitor (deferred KL), prompt prefix cached"
#: the row of FOD forced to repair once (:func:`backtrack_at_first_sentence`)
FORCED = "FOD S=6, forced to backtrack at the first sentence"


def _timed(fn, cold: bool = True):
    """Seconds ``fn`` takes, the forwards of the generator models (:data:`_MODELS`) it runs, and what it returns;
    ``cold``: clear every engine's prompt prefix cache first."""
    from benchmarks.random_shape import synchronize

    for engine in _ENGINES if cold else ():
        for cache in engine.prefix_caches:
            cache.clear()
    with ForwardCount(*_MODELS) as forwards:
        synchronize(_DEVICE)
        t = time.perf_counter()
        out = fn()
        synchronize(_DEVICE)
        seconds = time.perf_counter() - t
    return seconds, forwards.n, out


def answer_tokens(result, tokenizer) -> int:
    """How many tokens a run's answer has: its token ids where the method keeps them (the monitor), else its text
    encoded again (FOD and its greedy, both the same way: whole sentences only, so an unfinished last sentence's
    tokens are not counted; on random weights the round trip through text may count otherwise than the decoding)."""
    if result.token_ids:
        return len(result.token_ids)
    return len(tokenizer.encode(result.text, add_special_tokens=False))


def lockstep_generate(monitor, question: str, decoding: dict):
    """``monitor.generate``, with the without-context pass run in lockstep: flushed after every token that does not
    end the answer (one extra batch-1 forward per token), not once per finished sentence; the same features.
    ``monitor`` must flush between steps (``background_kl=False``) and ``decoding`` have no stop strings."""
    run = monitor.run(question=question, context=CONTEXT, decoding=decoding)
    while run.result is None:
        monitor.engine.step(run.batch, run.choose())
        if not run.row.ended and run.tokens + 1 < run.budget:  # the last token's flush is the answer's final one
            monitor.engine.flush_kl(run.batch, [len(run.row.ids)])
        run.advance()
    return run.result


@contextlib.contextmanager
def backtrack_at_first_sentence():
    """Inside it, FOD flags the answer's first greedy sentence whatever its score, and does not keep it as it was:
    exactly one backtrack and one repair (with ``tau1`` 0, nothing else is flagged)."""
    from fod.generator import _Run

    flagged, kept_as_is = _Run.flagged, _Run._kept_as_is

    def first_flagged(run, events):
        hit = flagged(run, events)  # (also checks that every sentence has a score)
        return events[0] if events and events[0].index == 0 else hit

    _Run.flagged = first_flagged
    _Run._kept_as_is = lambda run, ev: kept_as_is(run, ev) and ev.index != 0
    try:
        yield
    finally:
        _Run.flagged, _Run._kept_as_is = flagged, kept_as_is


def _event_lags(monitor, questions, budget) -> list[int]:
    """Per sentence event, how many tokens the monitor had decoded past the sentence's last token when it came
    (the final events, emitted when generation stops, are left out)."""
    lags = []
    for q in questions:
        for decoded, step in enumerate(monitor.steps(question=q, context=CONTEXT, decoding=budget), start=1):
            lags.extend(decoded - ev.tokens[1] for ev in step.events if not ev.final)
    return lags


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--fod", action="store_true", help="also time FOD (S=6, K=2) against greedy")
    ap.add_argument("--lookback", action="store_true", help="also time the monitor recording lookback ratios")
    ap.add_argument("--alignment", action="append", default=[],
                    help="also time the monitor with this align_score backend, question-aware (repeatable; e.g. "
                         "verifier)")
    ap.add_argument("--shape", default=None, help="random weights of a real shape instead of --model "
                                                   "(benchmarks/random_shape.py: llama2-7b, llama3-8b, qwen2.5-7b)")
    ap.add_argument("--tokenizer", default=None, help="with --shape: a saved tokenizer's folder "
                                                       "(default: SmolLM2's, embedded)")
    ap.add_argument("--device", default=None, help="e.g. cuda")
    ap.add_argument("--dtype", default="float32", help="float32, bfloat16, float16")
    ap.add_argument("--warmup-rounds", type=int, default=1, help="untimed rounds of every method per prompt first")
    args = ap.parse_args(argv)

    import warnings

    from syncheck.live.monitor import Monitor
    from syncheck.model.passes import prompt_pair
    from syncheck.scorer import Scorer

    global _DEVICE
    _DEVICE = args.device or "cpu"

    def model():
        if args.shape is None:
            return args.model
        from benchmarks.random_shape import random_model

        return random_model(args.shape, tokenizer=args.tokenizer, device=args.device, dtype=args.dtype)

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="no aggregator is calibrated")  # a random model: portable default
        scorer = Scorer(model(), device=args.device, dtype=args.dtype)  # the default configuration and aggregator
    lm = scorer.lm
    deferred, lockstep = Monitor(scorer), Monitor(scorer, background_kl=False)
    # the default flushes the without-context pass on a worker thread on CPU, between decode steps elsewhere
    # (syncheck.live.background): the other way is timed beside it
    other = Monitor(scorer, background_kl=deferred.background is None)
    OTHER = ("monitor (deferred KL, flushed between steps)" if other.background is None
             else "monitor (deferred KL, flushed beside decoding)")
    _ENGINES[:] = [deferred.engine, lockstep.engine, other.engine]
    _MODELS[:] = [lm.model]
    times: dict[str, list[float]] = {
        "generate": [], "monitor (deferred KL)": [], OTHER: [], "monitor (lockstep KL)": [], WARM: [],
    }
    # kernels, attention plans and the allocator's pools are built the first time a shape is met (on CPU as on an
    # accelerator): whichever method met a shape first would pay for it, so untimed rounds of every method come first
    warmup = args.warmup_rounds
    if args.lookback:
        with_lookback = Monitor(Scorer(model(), device=args.device, dtype=args.dtype, lookback=True, aggregator=None,
                                       vectors=True))
        times["monitor + lookback (deferred KL)"] = []
        _ENGINES.append(with_lookback.engine)
        _MODELS.append(with_lookback.engine.lm.model)  # its own copy of the model
    # per backend, both ways of running the deferred work, each against its lexical-alignment row above
    aligned: dict[str, Monitor] = {}
    baseline_of: dict[str, str] = {}
    for spec in args.alignment:
        with warnings.catch_warnings():  # trained on lexical align_score: the drift warning is expected here
            warnings.filterwarnings("ignore", message="the aggregator was trained on features from a different")
            warnings.filterwarnings("ignore", message="no aggregator is calibrated")
            with_spec = Scorer(lm, alignment=spec, align_with_question=True, device=args.device, dtype=args.dtype)
        for row, background in (("monitor (deferred KL)", None), (OTHER, other.background is not None)):
            aligned[f"{row}, align_score by {spec}"] = Monitor(with_spec, background_kl=background)
            baseline_of[f"{row}, align_score by {spec}"] = row
    for name, mon in aligned.items():
        times[name] = []
        _ENGINES.append(mon.engine)
    sentences = []
    if args.fod:
        from fod.baselines import GreedyGenerator
        from fod.generator import FODGenerator

        fod, greedy = FODGenerator(scorer), GreedyGenerator(scorer)
        forced = FODGenerator(scorer)
        _ENGINES.extend([fod.engine, greedy.engine, forced.engine])
        sampled = {"max_new_tokens": args.tokens, "do_sample": True, "top_p": 0.95, "seed": 0}
        times.update({"greedy (FOD interface)": [], "FOD S=6 K=2": [], FORCED: []})
        backtracked = []
    budget = {"max_new_tokens": args.tokens}
    prompt_tokens = []
    tokens = []
    # Every monitor picks the same tokens as the others in float32. In bfloat16 on an accelerator a batched pass may
    # round a near-tie the other way (random weights make near-ties common), so agreement is counted, not asserted.
    agree: list[bool] = []
    # per run, beside its seconds: the generator's forward passes and its answer's tokens
    forwards: dict[str, list[int]] = {name: [] for name in times}
    answer: dict[str, list[int]] = {name: [] for name in times}

    def one_round(q: str, ids: torch.Tensor, keep: bool) -> None:
        """Every method once on question ``q``, interleaved; ``keep``: record the times (else a warm-up round)."""
        run: dict[str, tuple[float, int, int]] = {}  # per method: seconds, the generator's forwards, answer tokens

        def timed(name: str, fn, cold: bool = True):
            seconds, count, out = _timed(fn, cold)
            n_out = out.shape[-1] - ids.shape[-1] if isinstance(out, torch.Tensor) else answer_tokens(out, lm.tokenizer)
            run[name] = (seconds, count, n_out)
            return out

        gen = timed("monitor (deferred KL)", lambda: deferred.generate(question=q, context=CONTEXT, decoding=budget))
        # the same prompt again: this time its documents' keys and values are in the prefix cache
        timed(WARM, lambda: deferred.generate(question=q, context=CONTEXT, decoding=budget), cold=False)
        n = len(gen.token_ids)
        kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n, do_sample=False)
        timed("generate", lambda: lm.model.generate(ids, **kw))
        gen2 = timed("monitor (lockstep KL)", lambda: lockstep_generate(lockstep, q, budget))
        gen4 = timed(OTHER, lambda: other.generate(question=q, context=CONTEXT, decoding=budget))
        if args.lookback:
            gen3 = timed("monitor + lookback (deferred KL)",
                         lambda: with_lookback.generate(question=q, context=CONTEXT, decoding=budget))
        aligned_ids = [timed(name, lambda: mon.generate(question=q, context=CONTEXT, decoding=budget)).token_ids
                       for name, mon in aligned.items()]
        if args.fod:
            timed("greedy (FOD interface)", lambda: greedy.generate(question=q, context=CONTEXT, decoding=budget))
            res = timed("FOD S=6 K=2", lambda: fod.generate(question=q, context=CONTEXT, num_samples=6, num_beams=2,
                                                              decoding=sampled))
            # tau1 0: only the first sentence is flagged; the repair keeps the best candidate (fallback tau1 = 0),
            # greedy goes on
            with backtrack_at_first_sentence():
                res_w = timed(FORCED, lambda: forced.generate(question=q, context=CONTEXT, tau1=0.0, num_samples=6,
                                                              num_beams=2, decoding=sampled, stop_degenerate=False))
            assert len(res_w.trace["backtracks"]) == 1 and res_w.trace["repairs"] == 1, res_w.trace
        if not keep:
            return
        tokens.append(n)
        sentences.append(len(gen.sentences))
        agree.extend(ids5 == gen.token_ids for ids5 in aligned_ids)
        agree.append(gen2.token_ids == gen.token_ids)
        agree.append(gen4.token_ids == gen.token_ids)
        if args.lookback:
            agree.append(gen3.token_ids == gen.token_ids)
        if args.fod:
            backtracked.append(res.trace["backtrack"] is not None)
        for name, (t, f, k) in run.items():
            times[name].append(t)
            forwards[name].append(f)
            answer[name].append(k)

    for q in QUESTIONS[: args.prompts]:
        with_ids = prompt_pair(lm, CONTEXT, q, args.tokens).with_context
        prompt_tokens.append(len(with_ids))
        ids = torch.tensor([with_ids], device=lm.device)
        for _ in range(warmup):
            one_round(q, ids, keep=False)
        for _ in range(args.rounds):
            one_round(q, ids, keep=True)

    base = sum(times["generate"])
    device = (
        torch.cuda.get_device_name(lm.device) if lm.device.type == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    )
    print(f"machine: {machine()}")
    print(f"model={lm.name} dtype={args.dtype} device={device} torch={torch.__version__} "
          f"prompt tokens={statistics.mean(prompt_tokens):.0f} new tokens={statistics.mean(tokens):.0f} "
          f"({args.prompts} prompts x {args.rounds} interleaved rounds)\n")
    if not all(agree):
        print(f"note: the monitors picked the same tokens in {sum(agree)} of {len(agree)} runs ({args.dtype} "
              "rounding of near-ties; every run had the same max_new_tokens, so a run whose tokens differ may stop "
              "at a "
              f"different length)\n")
    print("| run | total s | tokens/s | vs generate | per round | forwards per run | forwards per answer token |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    summary: dict = {"monitors_agree": sum(agree) / max(len(agree), 1)}
    for name, ts in times.items():
        total = sum(ts)
        ratio = total / base if name.startswith(("generate", "monitor")) else None
        per_run = statistics.mean(forwards[name])
        per_token = sum(forwards[name]) / max(sum(answer[name]), 1)
        summary[name] = {"seconds": total, "ratio_vs_generate": ratio, "forwards": forwards[name],
                         "answer_tokens": answer[name], "forwards_per_run": per_run, "forwards_per_token": per_token}
        tps = sum(tokens) / total if ratio is not None else float("nan")
        per = [t / g for t, g in zip(ts, times["generate"])]
        spread = f"{min(per):.2f}-{max(per):.2f}x" if ratio is not None else ""
        print(f"| {name} | {total:.1f} | {tps:.1f} | {'' if ratio is None else f'{ratio:.2f}x'} | {spread} | "
              f"{per_run:.1f} | {per_token:.2f} |")
    if aligned:
        print("\n| monitor, align_score backend | ms per sentence over the same monitor with lexical align_score | "
              "vs that monitor |")
        print("| --- | --- | --- |")
        for name, row in baseline_of.items():
            lexical = sum(times[row])
            extra = (sum(times[name]) - lexical) / max(sum(sentences), 1)
            summary[name].update(extra_s_per_sentence=extra, vs_lexical_monitor=sum(times[name]) / lexical)
            print(f"| {name} | {1000 * extra:.1f} | {sum(times[name]) / lexical:.2f}x |")
        print(f"\n({sum(sentences)} sentences in the timed runs)")
    # how late each design hands a sentence over: untimed runs, every event's lag in tokens after its sentence's
    # last token (at least one: a sentence is complete when the next one begins)
    lags = {name: _event_lags(mon, QUESTIONS[: args.prompts], budget)
            for name, mon in (("monitor (deferred KL)", deferred), (OTHER, other))}
    print("\n| run | sentence events | tokens after the sentence's end: median | max |")
    print("| --- | --- | --- | --- |")
    for name, lag in lags.items():
        summary[name]["event_lag_tokens"] = statistics.median(lag) if lag else None
        print(f"| {name} | {len(lag)} | {statistics.median(lag) if lag else float('nan'):.1f} | "
              f"{max(lag, default=0)} |")
    if args.fod:
        g = sum(times["greedy (FOD interface)"])
        r = sum(times["FOD S=6 K=2"]) / g
        w = sum(times[FORCED]) / g
        fg = sum(forwards["greedy (FOD interface)"])
        rf, wf = sum(forwards["FOD S=6 K=2"]) / fg, sum(forwards[FORCED]) / fg
        summary.update(fod_vs_greedy=r, fod_forced_backtrack_vs_greedy=w, fod_forwards_vs_greedy=rf,
                       fod_forced_backtrack_forwards_vs_greedy=wf)
        from syncheck.aggregators.thresholds import resolve_thresholds

        tau1, tau2, src = resolve_thresholds(scorer)
        summary.update(tau1=tau1, tau2=tau2)
        print(f"\nFOD (S=6, K=2, tau1={tau1}, tau2={tau2} from {src}) / greedy: {r:.2f}x, {rf:.2f}x the forwards "
              f"(backtracked in {sum(backtracked)} of {len(backtracked)} runs)")
        print(f"FOD (S=6) forced to backtrack once, at the first sentence, then repair and go on / greedy: {w:.2f}x, "
              f"{wf:.2f}x the forwards")
    return summary


if __name__ == "__main__":
    main()
