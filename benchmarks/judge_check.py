"""Provenance's final check with an LLM yes/no judge as its support model, on HaluEval records no one tuned on.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.judge_check --sets pairs,dialogue --start 2000 --limit 150 \\
        [--judge llm-judge:qwen2.5-coder-1.5b] [--dtype float32] [--claims paper,answer,sentences] \\
        [--with-default] [--results-md benchmarks/RESULTS.md]

Each answer gets the factuality ``syncheck check --nli llm-judge:MODEL --claim FORM`` gives it: BM25 relevance,
every chunk joined into one premise, the judge's P(Yes) to "Does the premise support the hypothesis?" (the maximum
over premise windows), for each claim form asked (``--claims``): Provenance's claim ("The answer to question Q is
A."), the answer alone, or each sentence on its own (the answer as supported as its least supported sentence). The
judge reads no likelihood of the answer's own words, so it cannot favour one writer's prose the way the SynCheck
score does on HaluEval, whose faithful answers were written by people and whose hallucinated ones by ChatGPT
(RESULTS.md, "What the final check reads on HaluEval").

Rows are cached as JSON lines under ``<work dir>/judge-check`` (``--work-dir``, default the syncheck cache), one
file per set, first record, judge, dtype and window: a rerun checks only what is missing, and a row that failed
keeps its ``error``. ``--with-default`` adds the default check (``syncheck check`` with no options) on the same
answers, from ``benchmarks.check_signals``'s row cache under ``<work dir>/check-signals`` (scored where missing), and
the
mean of the two checks' probabilities: a fixed rule, fitted on nothing.
Each figure is ROC AUC (label 1 = faithful) with a 95% bootstrap interval over records, beside response length and
word overlap on the same rows and the published figures of Provenance (Sankararaman et al., 2024), Table 3.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks.check_signals import cached_rows, checked_as_default, row_cache, score_rows
from benchmarks.provenance_check import PUBLISHED, SET_TITLES, halueval_examples
from benchmarks.provenance_offline import parse_run_args
from benchmarks.results_md import publish
from benchmarks.run_stamp import run_stamp
from features.alignment.lexical import lexical_precision
from syncheck.checking.support import CLAIMS, answer_claims
from syncheck.stats import bootstrap_auroc

SECTION = "### Provenance's final check with an LLM judge: the last `judge_check` run"
DEFAULT_JUDGE = "llm-judge:qwen2.5-coder-1.5b"
SETS = ("pairs", "dialogue", "summarization")


def section(sets: Sequence[str]) -> str:
    """The RESULTS.md section a run on ``sets`` writes (each set list has its own, so one run keeps another's)."""
    return SECTION if list(sets) == ["pairs", "dialogue"] else f"{SECTION} on {', '.join(sets)}"


def cache_path(work: Path, subset: str, start: int, judge: str, dtype: str, premise_tokens: int | None) -> Path:
    tag = judge.replace(":", "-").replace("/", "_")
    window = f"-w{premise_tokens}" if premise_tokens else ""
    return work / f"{subset}-{start}-{tag}-{dtype}{window}-forms.jsonl"


def record_premise(context: str) -> str:
    """The premise ``syncheck check`` judges an answer against by default: every chunk, joined in context order."""
    from syncheck.checking.provenance import joined_premise, split_context

    chunks = split_context(context)
    return joined_premise(chunks, range(len(chunks)))


def judge_rows(examples: list, cache: Path, judge: str, dtype: str, premise_tokens: int | None,
               forms: Sequence[str] = ("paper",)) -> list[dict[str, Any]]:
    """One row per example with ``factuality`` per claim form (``forms``, from
    :data:`syncheck.checking.support.CLAIMS`), cached in ``cache`` by id; a cached row lacking a form is judged again
    in every form asked. The answers of one record are judged together (:func:`judge_record`)."""
    done = cached_rows(cache)
    todo: dict[tuple[str, str], list] = {}  # answers of one record that share its context are judged together
    for e in examples:
        if e.id not in done or any(f not in (done[e.id].get("factuality") or {}) for f in forms):
            todo.setdefault((e.group, e.context), []).append(e)
    if todo:
        from syncheck.alignment import make_alignment_scorer

        kwargs = {"max_premise_tokens": premise_tokens} if premise_tokens else {}
        scorer = make_alignment_scorer(judge, dtype=dtype, **kwargs)
        stamp = run_stamp({"judge": judge, "dtype": dtype, "premise_tokens": premise_tokens, "forms": list(forms)})
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("a") as out:
            for n, group in enumerate(todo.values(), 1):
                for row in judge_record(scorer, group, forms):
                    row["run"] = stamp
                    done[row["id"]] = row
                    out.write(json.dumps(row) + "\n")
                out.flush()
                if n % 5 == 0 or n == len(todo):
                    print(f"  judged {n} of {len(todo)} records", file=sys.stderr, flush=True)
    return [done[e.id] for e in examples]


def judge_record(scorer: Any, group: list, forms: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of answers that share one context, judged against its one joined premise.

    One judge call per claim form takes every claim of every answer in that form (claims of like length pad little
    in the judge's batch), so the judge computes the premise's key/value cache once per window for all of them.
    Each answer's factuality in a form is what ``syncheck check --nli JUDGE --claim FORM`` gives it alone (the least
    supported of its claims; tested in tests/test_provenance.py), up to float rounding. A failure is each row's
    ``error``.
    """
    t0 = time.perf_counter()
    premise = record_premise(group[0].context)
    claims = {(e.id, f): answer_claims(e.response, e.question or None, f) for e in group for f in forms}
    error, support = None, {}
    try:
        for f in forms:
            unique = list(dict.fromkeys(c for e in group for c in claims[e.id, f]))
            support.update(zip(unique, scorer.score([premise] * len(unique), unique, batch_size=64).tolist()))
    except Exception as exc:  # one bad record must not stop the others
        error = f"{exc.__class__.__name__}: {exc}"
    seconds = round((time.perf_counter() - t0) / len(group), 3)
    return [{"id": e.id, "group": e.group, "label": e.label, "context": e.context, "response": e.response,
             "error": error, "seconds": seconds,
             "claims": {f: claims[e.id, f] for f in forms},
             "support": {f: [support.get(c) for c in claims[e.id, f]] for f in forms},
             "factuality": {f: None if error else min(support[c] for c in claims[e.id, f]) for f in forms}}
            for e in group]


def default_scores(examples: list, work: Path, subset: str, start: int) -> dict[str, float]:
    """``{id: support}`` of ``syncheck check``'s default (``--task auto``) on the same answers (check_signals' row
    cache)."""
    rows = score_rows(examples, row_cache(work, subset, start))
    question_of = {e.id: e.question for e in examples}
    return {r["id"]: checked_as_default(r, question_of[r["id"]])
            for r in rows if r["error"] is None and r["sentences"]}


def evaluate(subset: str, rows: list[dict[str, Any]], default: dict[str, float] | None, judge: str,
             forms: Sequence[str], n_boot: int, seed: int) -> list[str]:
    rows = [r for r in rows if r["error"] is None and (default is None or r["id"] in default)]
    y = np.asarray([r["label"] for r in rows])
    groups = [r["group"] for r in rows]
    judged = {f: np.asarray([r["factuality"][f] for r in rows]) for f in forms}
    scores: dict[str, np.ndarray] = {f"`syncheck check --nli {judge} --claim {f}`": judged[f] for f in forms}
    if default is not None:
        checked = np.asarray([default[r["id"]] for r in rows])
        scores["`syncheck check` default (SynCheck support; `--task auto`: the verdict over final scores, leaning on "
               "the mean `local_support` for summaries)"] = checked
        for f in forms:
            scores[f"mean of the default and the judge (`--claim {f}`; equal weights, nothing fitted)"] = (
                judged[f] + checked) / 2
    scores["baseline: response length (shorter = faithful)"] = -np.asarray([len(r["response"]) for r in rows], float)
    scores["baseline: word overlap (response vs context)"] = np.asarray(
        [lexical_precision(r["context"], r["response"]) for r in rows])
    secs = np.asarray([r["seconds"] for r in rows])
    lines = [f"**{SET_TITLES[subset]}** ({len(rows)} answers, {int(y.sum())} faithful; judge {secs.mean():.1f} s "
             "per answer):", "", "| check | AUROC [95% CI] |", "| --- | --- |"]
    for name, s in scores.items():
        auc, lo, hi = bootstrap_auroc(y, s, n=n_boot, groups=groups, seed=seed)
        lines.append(f"| {name} | {auc:.3f} [{lo:.2f}, {hi:.2f}] |")
    if PUBLISHED.get(subset) is not None:
        lines.append(f"| reference: Provenance (Sankararaman et al., 2024), Table 3 (its NLI models, full set) | "
                     f"{PUBLISHED[subset]} |")
    return lines + [""]


def main(argv: Sequence[str] | None = None) -> dict[str, list[str]]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.judge_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--halueval-dir", default="../shared/data/halueval")
    ap.add_argument("--sets", default="pairs,dialogue", help=f"comma-separated, from {SETS}")
    ap.add_argument("--start", type=int, default=2000, help="first HaluEval record read (records < 2000 are tuned on)")
    ap.add_argument("--limit", type=int, default=150, help="records read per set")
    ap.add_argument("--judge", default=DEFAULT_JUDGE, help="an llm-judge[:MODEL] (or other --nli) spec")
    ap.add_argument("--dtype", default="float32", help="the judge's dtype (bfloat16 where the CPU has it natively)")
    ap.add_argument("--premise-tokens", type=int, default=None, help="judge premise window (default: the judge's)")
    ap.add_argument("--claims", default="paper",
                    help=f"comma-separated claim forms the judge reads each answer in, from {CLAIMS}")
    ap.add_argument("--with-default", action="store_true", help="add the default check on the same answers")
    ap.add_argument("--work-dir", default=None, help="row caches' root (default: the syncheck cache)")
    args = parse_run_args(ap, argv)
    from syncheck.cache import cache_dir

    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in sets if s not in SETS]
    if unknown:
        ap.error(f"unknown set(s) {unknown}; choose from {SETS}")
    forms = [f.strip() for f in args.claims.split(",") if f.strip()]
    if not forms or any(f not in CLAIMS for f in forms):
        ap.error(f"--claims {args.claims!r}: choose one or more of {CLAIMS}")
    t0 = time.perf_counter()
    work = Path(args.work_dir) if args.work_dir else cache_dir()
    out: dict[str, list[str]] = {}
    for subset in sets:
        examples = halueval_examples(args.halueval_dir, subset, args.start, args.limit, args.seed)
        cache = cache_path(work / "judge-check", subset, args.start, args.judge, args.dtype, args.premise_tokens)
        rows = judge_rows(examples, cache, args.judge, args.dtype, args.premise_tokens, forms)
        default = default_scores(examples, work / "check-signals", subset, args.start) if args.with_default else None
        out[subset] = evaluate(subset, rows, default, args.judge, forms, args.bootstrap, args.seed)
        print("\n".join(out[subset]), flush=True)
    command = "benchmarks.judge_check " + " ".join(argv if argv is not None else sys.argv[1:])
    head = [f"Regenerate: `HF_HUB_OFFLINE=1 .venv/bin/python -m {command}` "
            f"({time.perf_counter() - t0:.0f} s this run; rows are cached). HaluEval records {args.start}-"
            f"{args.start + args.limit - 1}; judge `{args.judge}` in {args.dtype}"
            + (f", premise window {args.premise_tokens} tokens" if args.premise_tokens else "")
            + f"; {platform.machine()}. Label 1 = faithful; 95% CI over records.", ""]
    publish("\n".join(head + [line for lines in out.values() for line in lines]), args.results_md, section(sets))
    return out


if __name__ == "__main__":
    main()
