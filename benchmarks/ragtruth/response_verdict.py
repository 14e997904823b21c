"""Response-level verdict on RAGTruth: the learned verdict against min and mean of the sentence scores.

    HF_HUB_OFFLINE=1 python -m benchmarks.ragtruth.response_verdict --data PATH/TO/ragtruth/dev.jsonl \\
        [--results-md benchmarks/RESULTS.md] [--plot reliability.png] [--save syncheck/data/aggregators/default]

Nested, grouped cross-validation by ``source_id`` (:func:`syncheck.fitting.grouped_folds`):

- outer folds: every sentence of fold ``k`` is scored by the default recipe (the shipped aggregator's features,
  probe and estimator, :mod:`syncheck.aggregators.recipe`) fitted on the other folds;
- for each outer fold ``k``, inner folds over the other folds give *their* sentences scores from recipes fitted
  without fold ``k`` and without their own inner fold; the response verdict
  (:class:`syncheck.aggregators.response.ResponseVerdict`) is fitted on those and applied to fold ``k``'s outer
  scores. Neither the sentence scores of a test response nor the verdict that reads them saw its document.

Per task (QA, Summary, Data2txt; one verdict for all three, as shipped): response AUROC with a 95% bootstrap
interval over source documents, the Brier score (for scores that are probabilities) and response F1 (hallucinated =
positive, threshold tuned on the other folds, :func:`benchmarks.ragtruth.evaluate.response_f1`), beside min, mean,
response length and word overlap on the same responses; then the reliability table of the learned verdict.
``--relative`` adds the verdict over the final (whole-answer) sentence scores, from a recipe that also reads each
feature minus its response's mean (:mod:`features.relative`; a live monitor can compute them only once the answer is
complete, :mod:`syncheck.aggregators.final`); with ``--save DIR`` it also writes that final model and its verdict to
``DIR/final``. ``--alignment SPEC`` (e.g. ``verifier``) asks what another ``align_score`` backend adds to the verdict
(:mod:`benchmarks.ragtruth.alignment_feature`): one row reads the response's mean and least score by it beside the
verdict's statistics, another is the verdict over sentence scores whose recipe also reads it (a second nesting).
Features come from the same cache as :mod:`benchmarks.ragtruth.run` (run with ``--no-lid --no-lookback
--no-embedding``: the default needs none of them).
"""

from __future__ import annotations

import argparse
import platform
import shlex
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from benchmarks._common import interval
from benchmarks.ragtruth.data import TASKS
from benchmarks.ragtruth.evaluate import fold_of_rows, oof_stacked, probe_folds, response_f1
from benchmarks.ragtruth.scoring import SentenceTable
from syncheck.aggregators.final import FINAL_RELATIVE_FEATURES
from syncheck.aggregators.recipe import DEFAULT_FEATURES, DEFAULT_KIND, DEFAULT_PARAMS, DEFAULT_PROBES
from syncheck.aggregators.response import pad_scores, response_stats
from syncheck.fitting import Fold, grouped_folds
from syncheck.stats import bootstrap_auroc

SECTION = "## Response-level verdict: learned against min and mean"
#: Row label of the verdict that is shipped (the one compared with min for the default).
LEARNED = "learned verdict (LR on score statistics)"
MIN = "min of sentence scores (the old default)"
MEAN = "mean of sentence scores"
RELATIVE = "learned verdict over the final (whole-answer) sentence scores (features also read against the response)"
RELATIVE_MEANS = "learned verdict over the final sentence scores + the response's mean support features"
#: Features whose deviation from the response's mean ``--relative`` adds to the recipe (defined with the final model).
RELATIVE_FEATURES = FINAL_RELATIVE_FEATURES
#: Sentence features whose response mean an extended verdict may read (``"means"``): the support features.
MEAN_FEATURES = ("local_support", "pmi_mean", "align_score", "mean_contrastive_kl")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.ragtruth.response_verdict", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--data", default="../shared/data/ragtruth/dev.jsonl", help="RAGTruth JSONL")
    p.add_argument("--work-dir", default=None, help="feature cache (default: <syncheck cache>/ragtruth-bench, as "
                                                    "run.py)")
    p.add_argument("--model", default="smollm2-135m", help="scoring model")
    p.add_argument("--dtype", default="float32", help="its dtype (the feature cache is per model and dtype)")
    p.add_argument("--limit", type=int, default=None, help="responses read per task (default: all)")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0, help="fold assignment and model seeds")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of each 95%% interval")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--tau", type=float, default=None,
                   help="the verdict's 'doubtful sentence' threshold (default: FOD's tau1 of the aggregator in --save, "
                        "else of the shipped default)")
    p.add_argument("--relative", action="store_true",
                   help="add a row: the verdict over final sentence scores, whose recipe also reads each feature minus "
                        "its response's mean (syncheck.aggregators.final); with --save, write that model to DIR/final")
    p.add_argument("--results-md", default=None, help="write the tables into this file's section (--results-section)")
    p.add_argument("--results-section", default=SECTION, help="the heading of that section (default: %(default)r)")
    p.add_argument("--alignment", default=None,
                   help="an align_score backend (e.g. verifier) whose scores the verdict reads in two more rows")
    p.add_argument("--plot", default=None, help="write a reliability plot (PNG) of the learned verdict here")
    p.add_argument("--save", default=None,
                   help="fit the verdict on every response's out-of-fold sentence scores and write response.json into "
                        "this directory (the shipped default's: syncheck/data/aggregators/default)")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------- responses
@dataclass
class Responses:
    """One entry per response with at least one scored sentence; ``rows[i]`` are its sentence rows in the table."""

    rows: list[np.ndarray]
    label: np.ndarray  # 1 faithful, 0 hallucinated
    task: np.ndarray
    source: np.ndarray
    words: np.ndarray
    overlap: np.ndarray  # share of the response's content words found in the context
    #: ``(n, k)`` response means of the sentence features in :data:`MEAN_FEATURES` (NaN-free; see :meth:`of`)
    means: np.ndarray | None = None
    #: ``(n, 2k)`` the response's mean and least value of each feature named to :meth:`of` as ``aligned``
    aligned: np.ndarray | None = None

    @classmethod
    def of(cls, table: SentenceTable, aligned: Sequence[str] = ()) -> "Responses":
        from features.alignment.lexical import lexical_precision

        order = np.argsort(table.response, kind="stable")
        ids, starts = np.unique(table.response[order], return_index=True)
        rows = np.split(order, starts[1:])
        recs = [table.records[i] for i in ids]
        names = [n for n in MEAN_FEATURES if n in table.features]
        means = np.asarray([[np.nanmean(table.features[n][r]) if np.isfinite(table.features[n][r]).any() else 0.0
                             for n in names] for r in rows]).reshape(len(rows), len(names))
        extra = np.asarray([[f(table.features[n][r]) for n in aligned for f in (np.mean, np.min)] for r in rows],
                           dtype=float).reshape(len(rows), 2 * len(aligned))
        return cls(rows, np.asarray([r.label for r in recs], dtype=np.int64), np.asarray([r.task for r in recs]),
                   np.asarray([r.source_id for r in recs]), np.asarray([len(r.response.split()) for r in recs], float),
                   np.asarray([lexical_precision(r.context, r.response) for r in recs], float), means, extra)

    def __len__(self) -> int:
        return len(self.rows)

    def side(self, which: np.ndarray) -> dict[str, np.ndarray]:
        """Response-level columns of the responses ``which`` that an extended verdict may read."""
        return {"task": self.task[which], "words": self.words[which], "overlap": self.overlap[which],
                "means": self.means[which], "aligned": self.aligned[which]}

    def scores(self, sentence_scores: np.ndarray, which: np.ndarray | None = None) -> np.ndarray:
        """NaN-padded sentence scores of the responses ``which`` (default all), for :class:`ResponseVerdict`."""
        idx = range(len(self)) if which is None else which
        return pad_scores([sentence_scores[self.rows[i]] for i in idx])


# ---------------------------------------------------------------------------- nested out-of-fold scores
def sentence_scores(table: SentenceTable, folds: Sequence[Fold], seed: int, extra: Sequence[str] = ()) -> np.ndarray:
    """Out-of-fold P(faithful) of every sentence by the default recipe over ``folds`` (rows in no test part: 0);
    ``extra``: features of the table read besides the recipe's."""
    names = [n for n in DEFAULT_FEATURES if n in table.features] + list(extra)
    probes = [p for p in DEFAULT_PROBES if p in table.vectors]
    cache = probe_folds(table, folds, probes, seed)
    return oof_stacked(table, folds, DEFAULT_KIND, names, probes, seed, DEFAULT_PARAMS, cache)


def inner_folds(table: SentenceTable, train: np.ndarray, n_splits: int, seed: int) -> list[Fold]:
    """Grouped folds over the rows ``train`` only, as indices into the whole table."""
    return [(train[a], train[b]) for a, b in grouped_folds(table.source[train], n_splits, seed)]


#: A response model: (training score matrix, labels, training side columns (task, words, overlap), test matrix, test
#: side columns) -> P(faithful)
Fitter = Callable[[np.ndarray, np.ndarray, dict, np.ndarray, dict], np.ndarray]


def verdict_fitter(tau: float, **params: Any) -> Fitter:
    """The shipped verdict (:func:`syncheck.calibration.training.fit_response_verdict`; ``params``: the estimator's
    others, e.g. ``link``)."""
    from syncheck.calibration.training import fit_response_verdict

    def fit(X, y, _side, X_test, _test_side):
        return fit_response_verdict(X, y, tau, **params).predict_proba(X_test)[:, 1]

    return fit


def extended_fitter(tau: float, extra: Sequence[str], boosted: bool = False) -> Fitter:
    """The verdict's statistics plus response-level columns (``task`` one-hot, ``words``, word ``overlap`` with the
    context, ``means`` of the support features, the ``aligned`` columns of :class:`Responses`), LR or small
    boosting."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def columns(X, side):
        cols = [response_stats(X, tau)]
        if "task" in extra:
            cols.append(np.column_stack([side["task"] == t for t in TASKS]).astype(float))
        if "words" in extra:
            cols.append(np.log1p(side["words"])[:, None])
        if "overlap" in extra:
            cols.append(side["overlap"][:, None])
        if "means" in extra:
            cols.append(side["means"])
        if "aligned" in extra:
            cols.append(side["aligned"])
        return np.hstack(cols)

    def fit(X, y, side, X_test, test_side):
        model = (HistGradientBoostingClassifier(max_depth=2, max_iter=100, learning_rate=0.05, random_state=0)
                 if boosted else make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)))
        return model.fit(columns(X, side), y).predict_proba(columns(X_test, test_side))[:, 1]

    return fit


def nested_scores(table: SentenceTable, resp: Responses, n_folds: int, seed: int, fitters: dict[str, Fitter],
                  extra: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(outer out-of-fold sentence scores, each response's outer fold, each fitter's out-of-fold P(faithful));
    ``extra``: features the sentence recipe reads besides its own."""
    folds = grouped_folds(table.source, n_folds, seed)
    outer = sentence_scores(table, folds, seed, extra)
    resp_fold = fold_of_rows(folds, len(table))[[rows[0] for rows in resp.rows]]  # folds group whole documents
    learned = {name: np.zeros(len(resp)) for name in fitters}
    for k, (train, _) in enumerate(folds):
        inner = sentence_scores(table, inner_folds(table, train, n_folds - 1, seed), seed, extra)
        tr, te = np.flatnonzero(resp_fold != k), np.flatnonzero(resp_fold == k)
        side_tr, side_te = resp.side(tr), resp.side(te)
        for name, fit in fitters.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                learned[name][te] = fit(
                    resp.scores(inner, tr), resp.label[tr], side_tr, resp.scores(outer, te), side_te
                )
    return outer, resp_fold, learned


# ---------------------------------------------------------------------------- figures
@dataclass
class Cell:
    auroc: tuple[float, float, float]
    brier: float | None
    f1: float


def task_cells(resp: Responses, score: np.ndarray, fold: np.ndarray, n_boot: int, probability: bool) -> dict[str, Cell]:
    """Per task: AUROC [CI] of P(faithful)-oriented ``score``, Brier (probabilities only), F1 of flagging
    hallucinated."""
    out = {}
    for task in TASKS:
        m = resp.task == task
        y = resp.label[m]
        if len(set(y.tolist())) < 2:
            continue
        brier = float(np.mean((score[m] - y) ** 2)) if probability else None
        out[task] = Cell(bootstrap_auroc(y, score[m], n=n_boot, groups=resp.source[m]), brier,
                         response_f1(1 - y, score[m], fold[m]))
    return out


def reliability(
    y: np.ndarray, p: np.ndarray, bins: int = 10
) -> list[tuple[float, float, float | None, float | None, int]]:
    """Equal-width bins of ``p``: (lo, hi, mean predicted, observed share of ``y == 1``, count)."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    out = []
    for b in range(bins):
        m = which == b
        out.append((float(edges[b]), float(edges[b + 1]), float(p[m].mean()) if m.any() else None,
                    float(y[m].mean()) if m.any() else None, int(m.sum())))
    return out


def expected_calibration_error(table: list[tuple[float, float, float | None, float | None, int]]) -> float:
    n = sum(r[4] for r in table)
    return float(sum(r[4] * abs(r[2] - r[3]) for r in table if r[4]) / max(n, 1))


def plot_reliability(path: Path, y: np.ndarray, curves: dict[str, np.ndarray]) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.plot([0, 1], [0, 1], color="#d1d5db", lw=1)
    for name, p in curves.items():
        rows = [r for r in reliability(y, p) if r[4]]
        ax.plot([r[2] for r in rows], [r[3] for r in rows], marker="o", ms=4, label=name)
    ax.set_xlabel("predicted P(response faithful)")
    ax.set_ylabel("observed share faithful")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7.5, frameon=False, loc="upper left")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(header: list[str], rows: dict[str, dict[str, Cell]], reliabilities: dict[str, list], counts: dict) -> str:
    """The response table, then a reliability table for each ``{row name: reliability(...)}``."""
    tasks = [t for t in TASKS if any(t in c for c in rows.values())]
    lines = list(header) + [
        "", "Response level, per task (AUROC [95% CI] of P(faithful); Brier score of P(faithful) against the response "
        "label, lower = better, only for scores that are probabilities; F1 in % of flagging hallucinated responses "
        "at a "
        "threshold tuned on the other folds). Responses (hallucinated): "
        + "; ".join(f"{t} {counts[t][0]} ({counts[t][1]})" for t in tasks) + ".", "",
        "| response score | " + " | ".join(f"{t} AUROC | {t} Brier | {t} F1" for t in tasks) + " | mean AUROC |",
        "| --- | " + " | ".join("--- | --- | ---" for _ in tasks) + " | --- |"]
    for name, cells in rows.items():
        parts = []
        for t in tasks:
            c = cells.get(t)
            parts.append("- | - | -" if c is None else
                         f"{interval(c.auroc)} | {'-' if c.brier is None else f'{c.brier:.3f}'} | {c.f1:.1f}")
        mean = np.mean([cells[t].auroc[0] for t in tasks if t in cells])
        lines.append(f"| {name} | " + " | ".join(parts) + f" | {mean:.3f} |")
    for verdict_row, rel in reliabilities.items():
        lines += ["", f"Reliability of the {verdict_row} (all tasks, out-of-fold; 10 equal-width bins of the predicted "
                  f"P(faithful); expected calibration error {expected_calibration_error(rel):.3f}):", "",
                  "| bin | mean predicted | observed faithful | responses |", "| --- | --- | --- | --- |"]
        for lo, hi, pred, obs, n in rel:
            lines.append(f"| {lo:.1f}-{hi:.1f} | " + (f"{pred:.3f} | {obs:.3f}" if n else "- | -") + f" | {n} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- main
def report(table: SentenceTable, args: argparse.Namespace, timing: dict[str, float] | None = None,
           command: str = "") -> dict[str, Any]:
    """Every figure of the module on a scored table: prints the markdown, writes the section / plot / response.json."""
    t0 = time.perf_counter()
    tau = args.tau if args.tau is not None else default_tau(args.save)
    aligned = []
    if args.alignment:
        from benchmarks.ragtruth.alignment_feature import add_alignment_feature

        aligned = [add_alignment_feature(table, args.alignment, Path(args.work_dir or default_work_dir()))]
    resp = Responses.of(table, aligned)
    fitters = {LEARNED: verdict_fitter(tau=tau),
               "learned verdict, identity link": verdict_fitter(tau=tau, link="identity"),
               "learned verdict + task (one-hot)": extended_fitter(tau, ["task"]),
               "learned verdict + response words": extended_fitter(tau, ["words"]),
               "learned verdict + the response's word overlap": extended_fitter(tau, ["overlap"]),
               "learned verdict + the response's mean support features": extended_fitter(tau, ["means"]),
               "small boosting (depth 2) on the statistics + task": extended_fitter(tau, ["task"], boosted=True)}
    if aligned:
        fitters[f"learned verdict + the response's mean and least `{aligned[0]}`"] = extended_fitter(tau, ["aligned"])
    outer, fold, learned = nested_scores(table, resp, args.folds, args.seed, fitters)
    if aligned:  # the sentence recipe reads the backend's score too: a second nesting
        learned.update(nested_scores(table, resp, args.folds, args.seed, {
            f"learned verdict over sentence scores whose recipe also reads `{aligned[0]}`": verdict_fitter(tau=tau)},
            aligned)[2])
    final = None
    if args.relative:  # the same verdict over final sentence scores, which also read each feature against its response
        final, _, got = nested_scores(
            table,
            resp,
            args.folds,
            args.seed,
            {RELATIVE: verdict_fitter(tau=tau), RELATIVE_MEANS: extended_fitter(tau, ["means"])},
            add_relative_columns(table),
        )
        learned.update(got)
    low = np.asarray([outer[r].min() for r in resp.rows])
    mean = np.asarray([outer[r].mean() for r in resp.rows])
    n_sent = np.asarray([len(r) for r in resp.rows], dtype=float)
    scores = {**{name: (p, True) for name, p in learned.items()},
              MIN: (low, True), MEAN: (mean, True),
              "response length in sentences (trivial; fewer = faithful)": (-n_sent, False),
              "response length in words (trivial; fewer = faithful)": (-resp.words, False),
              "word overlap with the context (trivial)": (resp.overlap, False)}
    scores.update(support_blends(table, resp, learned[RELATIVE if final is not None else LEARNED]))
    rows = {name: task_cells(resp, s, fold, args.bootstrap, prob) for name, (s, prob) in scores.items()}
    rel = reliability(resp.label, learned[LEARNED])
    reliabilities = {LEARNED: rel}
    if final is not None:
        reliabilities[RELATIVE] = reliability(resp.label, learned[RELATIVE])
    counts = {t: (int((resp.task == t).sum()), int(((resp.task == t) & (resp.label == 0)).sum())) for t in TASKS}

    def mean_auroc(name: str) -> float:
        return float(np.mean([c.auroc[0] for c in rows[name].values()]))

    saved = None
    if args.save:
        saved = save_verdict(resp, outer, tau, args)
        if final is not None:
            save_final(table, resp, final, tau, args)
        from syncheck.aggregators.io import META_FILE
        from syncheck.aggregators.manifest import write_aggregator_manifest

        if (Path(args.save) / META_FILE).is_file():  # an aggregator's directory: its files changed, list them again
            write_aggregator_manifest(args.save)
    t_eval = time.perf_counter() - t0
    timing = dict(timing or {}, evaluation=t_eval)
    header = [
        f"Regenerate: `HF_HUB_OFFLINE=1 .venv/bin/{command}` (features from the cache of `benchmarks.ragtruth.run "
        "--no-lid --no-lookback --no-embedding`; a rerun only evaluates).",
        "",
        f"Protocol: nested {args.folds}-fold cross-validation grouped by `source_id`. Sentence scores: the default "
        "recipe (XGB over the default features + the stacked hidden-state probe) fitted on the other outer folds "
        "(RAGTruth rows only; the shipped aggregator also saw HaluEval and generated rows). Response verdicts: fitted, "
        "for each outer fold, on the other folds' responses with inner out-of-fold sentence scores (recipes that saw "
        "neither the outer nor their own inner fold), one verdict for all three tasks; tested on the outer fold's "
        f"scores. Statistics: min, mean of the two lowest, mean (logit), std, share and count below tau = {tau}, "
        "log(1 + sentences). Trivial rows on the same responses. Intervals: 1000-fold bootstrap over source documents."
        f" Machine: {platform.machine()}, 2 CPU cores (shared), python {platform.python_version()}; wall time "
        + ", ".join(f"{k} {v:.0f} s" for k, v in timing.items()) + ".",
    ]
    if final is not None:
        header[-1] += (" Final row: the same nesting, with sentence scores from the recipe that also reads "
                       + ", ".join(f"`rel:{n}`" for n in RELATIVE_FEATURES) + " (each minus its response's mean, "
                       "`features.relative`); `--save` fits that model on every sentence into DIR/final and its "
                       "verdict on every response's out-of-fold final scores: the shipped `response_score`.")
    md = markdown(header, rows, reliabilities, counts)
    verdict = (f"Mean AUROC over the tasks: learned {mean_auroc(LEARNED):.3f}, min {mean_auroc(MIN):.3f}, "
               f"mean {mean_auroc(MEAN):.3f}" + (f", final {mean_auroc(RELATIVE):.3f}" if final is not None else "")
               + ".")
    md += "\n" + verdict + "\n"
    print(md)
    if args.results_md:
        from benchmarks.results_md import write_section

        write_section(Path(args.results_md), args.results_section, md)
    if args.plot:
        plot_reliability(Path(args.plot), resp.label, {LEARNED: learned[LEARNED], MIN: low, MEAN: mean})
    return {"rows": {n: {t: {"auroc": list(c.auroc), "brier": c.brier, "f1": c.f1} for t, c in cells.items()}
                     for n, cells in rows.items()},
            "mean_auroc": {n: mean_auroc(n) for n in rows}, "reliability": rel, "counts": counts,
            "saved": str(saved) if saved else None, "markdown": md}


#: weights of the response's mean ``local_support`` in :func:`support_blends`
BLEND_WEIGHTS = (0.25, 0.5, 0.75)


def support_blends(table: SentenceTable, resp: Responses, verdict: np.ndarray) -> dict[str, tuple[np.ndarray, bool]]:
    """Rows of the shipped verdict averaged with the response's mean ``local_support`` (weights
    :data:`BLEND_WEIGHTS`), and that mean alone: what a check that leans on the lexical support for answers without a
    question (summaries) would score here. Not probabilities. Empty when the table has no ``local_support``."""
    names = [n for n in MEAN_FEATURES if n in table.features]
    if "local_support" not in names:
        return {}
    from syncheck.checking.support import lean_on_lexical

    support = resp.means[:, names.index("local_support")]
    out = {f"shipped verdict averaged with the mean `local_support`, weight {w}":
           (lean_on_lexical(verdict, support, w), False) for w in BLEND_WEIGHTS}
    out["mean `local_support` of the response"] = (support, False)
    return out


def default_tau(save: str | None = None) -> float:
    """FOD's tau1 of the aggregator in ``save`` when there is one, else of the shipped default (0.45 when neither
    is installed)."""
    from syncheck.aggregators import default_aggregator_dir, read_meta

    for path in ([save] if save else []) + [default_aggregator_dir()]:
        try:
            return float(read_meta(path).get("decoding", {}).get("tau1", 0.45))
        except (FileNotFoundError, ValueError):
            continue
    return 0.45


def save_verdict(resp: Responses, outer: np.ndarray, tau: float, args: argparse.Namespace) -> Path:
    """Fit the verdict on every response's out-of-fold sentence scores and write ``response.json`` into ``--save``
    (the library's training path: :func:`syncheck.calibration.training.write_response_verdict`)."""
    from syncheck.aggregators.response import RESPONSE_FILE
    from syncheck.calibration.training import write_response_verdict

    write_response_verdict(resp.scores(outer), resp.label, tau, args.save,
                           data="RAGTruth dev, every response; sentence scores out-of-fold (default recipe, "
                                f"{args.folds} folds grouped by source_id, seed {args.seed})",
                           command="python -m benchmarks.ragtruth.response_verdict --save DIR")
    return Path(args.save) / RESPONSE_FILE


def add_relative_columns(table: SentenceTable) -> list[str]:
    """Add ``rel:<name>`` (each of :data:`RELATIVE_FEATURES` minus its response's mean) to ``table``; the names the
    final model reads besides the default recipe's."""
    from syncheck.aggregators.final import relative_columns

    rel = relative_columns(table.features, table.response, RELATIVE_FEATURES)
    table.features.update(rel)
    return list(rel)


def save_final(table: SentenceTable, resp: Responses, final: np.ndarray, tau: float, args: argparse.Namespace) -> Path:
    """Fit the final (whole-answer) sentence model on every sentence, and its verdict on every response's out-of-fold
    final scores; write both into ``--save``/final (:mod:`syncheck.aggregators.final`), by the library's training path
    (:func:`syncheck.calibration.training.fit_final_model`).

    The model reads the default features, their ``rel:`` forms and the parent aggregator's ``hidden_probe`` score; it
    is trained on that probe's out-of-fold scores (as the stacked default is), and applied to the score of the probe
    saved beside ``--save``."""
    from syncheck.aggregators import read_meta
    from syncheck.calibration.training import fit_final_model, recipe_info, save_final_model, write_response_verdict

    names = [n for n in DEFAULT_FEATURES if n in table.features]
    vectors = {p: table.vectors[p] for p in DEFAULT_PROBES if p in table.vectors}
    model = fit_final_model(table.matrix(names), names, table.response, vectors, table.label, table.source,
                            seed=args.seed, bases=RELATIVE_FEATURES)
    training = {"data": "RAGTruth dev, every sentence; probe scores out-of-fold (5 folds grouped by source_id)",
                "sentences": int(len(table)), "faithful": int(table.label.sum()),
                "recipe": recipe_info(DEFAULT_KIND, DEFAULT_PARAMS, relative=list(RELATIVE_FEATURES),
                                      probes_read=list(vectors)),
                "command": "python -m benchmarks.ragtruth.response_verdict --relative --save DIR"}
    try:
        scorer = read_meta(args.save).get("scorer")
    except (FileNotFoundError, ValueError):
        scorer = None
    out = save_final_model(model, args.save, training=training, scorer=scorer)
    write_response_verdict(resp.scores(final), resp.label, tau, out,
                           data="RAGTruth dev, every response; final sentence scores out-of-fold "
                                f"({args.folds} folds grouped by source_id, seed {args.seed})",
                           command=training["command"])
    return out


def cached_table(args: argparse.Namespace) -> SentenceTable:
    """The scored sentences of ``--data`` (one file, or several comma-separated, pooled) from run.py's feature
    cache (scored now when missing)."""
    from benchmarks.ragtruth.data import read_ragtruth_files
    from benchmarks.ragtruth.scoring import ScoringConfig, score_ragtruth, sentence_table

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    records = read_ragtruth_files(args.data, limit=args.limit)
    config = ScoringConfig(model=args.model, lid=False, lookback=False, embedding=False, batch_size=args.batch_size,
                           dtype=args.dtype)
    return sentence_table(records, score_ragtruth(records, config, Path(args.work_dir or default_work_dir())))


def default_work_dir() -> Path:
    """run.py's feature cache, where the alignment scores are cached too."""
    from syncheck.cache import cache_dir

    return cache_dir() / "ragtruth-bench"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    started = time.perf_counter()
    table = cached_table(args)
    command = "python -m benchmarks.ragtruth.response_verdict " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    return report(table, args, {"scoring (cached)": time.perf_counter() - started}, command)


if __name__ == "__main__":
    main()
