"""Choosing the response verdict's form by nested grouped cross-validation, over several fold seeds.

    HF_HUB_OFFLINE=1 python -m benchmarks.ragtruth.verdict_choice \\
        --data DATA/ragtruth/dev.jsonl,DATA/ragtruth/dev_extra.jsonl --seeds 0,1,2 [--results-md benchmarks/RESULTS.md]

The candidate forms of ``response_score``, simplest first (:data:`FORMS`): the mean and the minimum of the final
(whole-answer) sentence scores, the learned verdict over them (the shipped form), and the same three over the live
sentence scores. Each is scored by the nesting of :mod:`benchmarks.ragtruth.response_verdict` (the sentence recipes
never saw a test response's document; the verdicts are fitted on inner out-of-fold scores), once per fold seed.
Beside them, on the same responses, the trivial rules (:data:`TRIVIAL`): answer length in words, the number of
sentences and word overlap with the context, each in the direction that ranks better on the *other* folds.

Per task the table gives each form's AUROC as the mean over fold seeds with their range, seed 0's 95% bootstrap
interval over source documents, the paired difference from answer length (seed 0, paired bootstrap), and for the
forms that are probabilities the Brier score and the expected calibration error (10 bins).

The choice (:func:`choose`), fixed before the run:

1. the best form is the one with the highest seed-mean AUROC;
2. a simpler form replaces it when the paired 95% interval of (best - simpler) holds 0 (seed 0);
3. a chosen form that does not beat answer length by :data:`MARGIN` (seed means) is not shipped for that task: the
   task falls back to the candidate or trivial rule with the highest seed-mean AUROC, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks.ragtruth.data import TASKS
from benchmarks.ragtruth.response_verdict import (
    Responses,
    add_relative_columns,
    cached_table,
    default_tau,
    expected_calibration_error,
    nested_scores,
    reliability,
    verdict_fitter,
)
from benchmarks.ragtruth.scoring import SentenceTable
from benchmarks.run_stamp import run_stamp
from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference

SECTION = "## Response verdict: which form, over fold seeds"
#: Candidate forms, simplest first: (name, sentence scores read, statistic)
FORMS = (
    ("mean of final scores", "final", "mean"),
    ("min of final scores", "final", "min"),
    ("learned verdict over final scores (shipped form)", "final", "verdict"),
    ("mean of live scores", "live", "mean"),
    ("min of live scores", "live", "min"),
    ("learned verdict over live scores", "live", "verdict"),
)
#: Trivial rules: (name, column of :class:`Responses` or ``"sentences"``)
TRIVIAL = (("answer length in words", "words"), ("number of sentences", "sentences"),
           ("word overlap with the context", "overlap"))
LENGTH = "answer length in words"
#: How much a shipped form must beat answer length by, per task (seed-mean AUROC).
MARGIN = 0.05


@dataclass
class FormFigures:
    """One form's figures on one task."""

    seeds: list[float] = field(default_factory=list)  # AUROC per fold seed
    ci: tuple[float, float, float] | None = None  # seed 0, bootstrap over documents
    minus_length: tuple[float, float, float] | None = None  # seed 0, paired
    brier: float | None = None
    ece: float | None = None

    @property
    def mean(self) -> float:
        return float(np.mean(self.seeds))


def better_direction(values: np.ndarray, label: np.ndarray, fold: np.ndarray) -> np.ndarray:
    """``values`` or ``-values`` per outer fold, whichever ranks faithful responses higher on the other folds."""
    from sklearn.metrics import roc_auc_score

    out = np.empty_like(values, dtype=float)
    for k in np.unique(fold):
        train = fold != k
        sign = 1.0 if len(set(label[train].tolist())) < 2 or roc_auc_score(label[train], values[train]) >= 0.5 else -1.0
        out[fold == k] = sign * values[fold == k]
    return out


def form_scores(table: SentenceTable, resp: Responses, folds: int, seed: int, tau: float,
                relative: Sequence[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every form's out-of-fold P(faithful) per response for one fold seed, and each response's outer fold."""
    out: dict[str, np.ndarray] = {}
    fold = None
    for kind, extra in (("live", ()), ("final", relative)):
        outer, fold, learned = nested_scores(table, resp, folds, seed, {"verdict": verdict_fitter(tau=tau)}, extra)
        for name, read, stat in FORMS:
            if read != kind:
                continue
            if stat == "verdict":
                out[name] = learned["verdict"]
            else:
                agg = np.min if stat == "min" else np.mean
                out[name] = np.asarray([agg(outer[r]) for r in resp.rows])
    return out, fold


def trivial_scores(resp: Responses, fold: np.ndarray) -> dict[str, np.ndarray]:
    cols = {"words": resp.words, "overlap": resp.overlap,
            "sentences": np.asarray([len(r) for r in resp.rows], dtype=float)}
    return {name: better_direction(cols[col], resp.label, fold) for name, col in TRIVIAL}


def choose(figures: dict[str, FormFigures], margin: float = MARGIN) -> tuple[str, str]:
    """(the rule shipped for one task, why), by the rule of the module docstring."""
    forms = [name for name, _, _ in FORMS if name in figures]
    best = max(forms, key=lambda n: figures[n].mean)
    chosen, why = best, "highest seed-mean AUROC"
    for name in forms[: forms.index(best)]:  # simpler ones, simplest first
        diff = figures[f"{best} - {name}"].ci if f"{best} - {name}" in figures else None
        if diff is not None and diff[1] <= 0.0 <= diff[2]:
            chosen, why = name, f"as good as {best} (paired interval holds 0), and simpler"
            break
    length = figures[LENGTH].mean
    if figures[chosen].mean - length < margin:
        rules = forms + [name for name, _ in TRIVIAL if name in figures]
        fallback = max(rules, key=lambda n: figures[n].mean)
        return fallback, (f"{chosen} beats answer length by {figures[chosen].mean - length:+.3f} < {margin}: "
                          f"falls back to the best rule on held-out folds")
    return chosen, why


def evaluate(table: SentenceTable, seeds: Sequence[int], folds: int, n_boot: int, tau: float,
             log=print) -> dict[str, dict[str, FormFigures]]:
    """Per task, per form or trivial rule (and per ``"best - simpler"`` pair): the figures."""
    from sklearn.metrics import roc_auc_score

    resp = Responses.of(table)
    relative = add_relative_columns(table)
    per_task: dict[str, dict[str, FormFigures]] = {t: {} for t in TASKS}
    for i, seed in enumerate(seeds):
        started = time.perf_counter()
        scores, fold = form_scores(table, resp, folds, seed, tau, relative)
        trivial = trivial_scores(resp, fold)
        for task in TASKS:
            m = resp.task == task
            y = resp.label[m]
            if len(set(y.tolist())) < 2:
                continue
            groups = resp.source[m]
            for name, s in {**scores, **trivial}.items():
                fig = per_task[task].setdefault(name, FormFigures())
                if i == 0:
                    fig.ci = bootstrap_auroc(y, s[m], n=n_boot, groups=groups)
                    fig.seeds.append(fig.ci[0])
                    if name != LENGTH:
                        fig.minus_length = bootstrap_auroc_difference(y, s[m], trivial[LENGTH][m], n=n_boot,
                                                                      groups=groups)
                    if name in scores:
                        fig.brier = float(np.mean((s[m] - y) ** 2))
                        fig.ece = expected_calibration_error(reliability(y, s[m]))
                else:
                    fig.seeds.append(float(roc_auc_score(y, s[m])))
            if i == 0:
                names = [n for n, _, _ in FORMS]
                for a in names:
                    for b in names[: names.index(a)]:
                        per_task[task][f"{a} - {b}"] = FormFigures(
                            ci=bootstrap_auroc_difference(y, scores[a][m], scores[b][m], n=n_boot, groups=groups))
        log(f"seed {seed}: {time.perf_counter() - started:.0f} s")
    return per_task


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def markdown(per_task: dict[str, dict[str, FormFigures]], counts: dict[str, tuple[int, int]], seeds: Sequence[int],
             header: list[str]) -> tuple[str, dict[str, tuple[str, str]]]:
    lines = header[:]
    choices = {}
    for task in TASKS:
        figs = per_task[task]
        if not figs:
            continue
        n, bad = counts[task]
        lines += ["", f"#### {task} ({n} responses, {bad} hallucinated)", "",
                  f"| rule | AUROC, mean over seeds {','.join(map(str, seeds))} [range] | seed 0 [95% CI] | "
                  "- answer length, seed 0 [95% CI] | Brier | ECE |", "| --- | --- | --- | --- | --- | --- |"]
        for name in [n for n, _, _ in FORMS] + [n for n, _ in TRIVIAL]:
            f = figs.get(name)
            if f is None:
                continue
            ml = "" if f.minus_length is None else (f"{f.minus_length[0]:+.3f} [{f.minus_length[1]:+.3f}, "
                                                    f"{f.minus_length[2]:+.3f}]")
            lines.append(f"| {name} | {f.mean:.3f} [{min(f.seeds):.3f}-{max(f.seeds):.3f}] | {f.ci[0]:.3f} "
                         f"[{f.ci[1]:.2f}, {f.ci[2]:.2f}] | {ml} | {_f(f.brier)} | {_f(f.ece)} |")
        choices[task] = choose(figs)
        lines += ["", f"Chosen for {task}: **{choices[task][0]}** ({choices[task][1]})."]
    return "\n".join(lines) + "\n", choices


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ragtruth.verdict_choice",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/ragtruth/dev.jsonl,../shared/data/ragtruth/dev_extra.jsonl",
                   help="RAGTruth JSONL files, comma-separated (their responses are pooled)")
    p.add_argument("--work-dir", default=None, help="feature cache (default: <syncheck cache>/ragtruth-bench)")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seeds", default="0,1,2", help="fold assignments (comma-separated)")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--limit", type=int, default=None, help="responses read per task and file (default: all)")
    p.add_argument("--batch-size", type=int, default=2, help="scoring batch, when the cache lacks a response")
    p.add_argument("--tau", type=float, default=None, help="the verdict's threshold statistic (default: tau1)")
    p.add_argument("--results-md", default=None, help="write the tables into this file's section " + repr(SECTION))
    p.add_argument("--json", default=None, help="also write the figures and the choices as JSON here")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    started = time.perf_counter()
    table = cached_table(args)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    tau = args.tau if args.tau is not None else default_tau()
    per_task = evaluate(table, seeds, args.folds, args.bootstrap, tau)
    resp = Responses.of(table)
    counts = {t: (int((resp.task == t).sum()), int(((resp.task == t) & (resp.label == 0)).sum())) for t in TASKS}
    command = "python -m benchmarks.ragtruth.verdict_choice " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    stamp = run_stamp(args)
    header = [
        f"Regenerate: `HF_HUB_OFFLINE=1 .venv/bin/{command}` (features from the cache of `benchmarks.ragtruth.run "
        "--no-lid --no-lookback --no-embedding`). "
        f"{len(resp)} responses over {len(set(resp.source.tolist()))} source documents; nested {args.folds}-fold CV "
        f"grouped by `source_id`, fold seeds {args.seeds}; sentence recipes fitted on RAGTruth rows only; "
        f"tau = {tau}. Commit {stamp['commit']}, {time.strftime('%Y-%m-%d')}, {platform.machine()} "
        f"(2 CPU cores), {time.perf_counter() - started:.0f} s. Trivial rules in the direction that ranks better on "
        "the other folds.",
    ]
    md, choices = markdown(per_task, counts, seeds, header)
    print(md)
    if args.results_md:
        from benchmarks.results_md import write_section

        write_section(Path(args.results_md), SECTION, md)
    out = {"run": stamp, "counts": counts, "choices": {t: list(c) for t, c in choices.items()},
           "figures": {t: {n: {"seeds": f.seeds, "ci": f.ci, "minus_length": f.minus_length, "brier": f.brier,
                               "ece": f.ece} for n, f in figs.items()} for t, figs in per_task.items()}}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
