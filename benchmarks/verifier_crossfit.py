"""Verifiers cross-fitted on RAGTruth: each sentence scored by a fold verifier that never trained on its response.

The shipped verifier never saw RAGTruth. To ask what RAGTruth's own labels teach it, without ever scoring a row
with a verifier that trained on it, the records are dealt into folds grouped by source document, and fold ``k``'s
verifier goes on training the shipped verifier (``syncheck verifier train --init verifier``) on the labelled
sentences of the other folds only. Every sentence's score then comes from the verifier of its own fold, so the
aggregator in :mod:`benchmarks.ragtruth.feature_gain` (``--alignment crossfit:<dir>``) never sees a verifier score
of a row that verifier trained on.

Recipe, fixed before the first run (2026-11-28): 3 folds over ``dev`` + ``dev_extra``, grouped by ``source_id``
(:func:`syncheck.fitting.grouped_folds`, seed 0); each fold's pairs as ``syncheck verifier train --labelled`` makes
them (question-aware claims, the window that shares the claim's words, the artefact check's thinning, no dev
share); 2 epochs, learning rate 3e-5, batch 16, 256 tokens, 30% mismatched negatives (the trainer's default).
``--halueval DIR`` puts HaluEval's training rows (``--halueval-records``, ``--distractors``) beside every fold's
sentences, so that a verifier learning RAGTruth keeps what it knew of HaluEval.

The table gives, per task, sentence AUROC (faithful = positive) of the cross-fitted verifiers and the shipped one,
with the claim as :class:`syncheck.Scorer` forms it (the sentence alone), beside word overlap and length, with 95%
bootstrap intervals over source documents and the paired differences. QA is given a second time with
question-aware claims (``"Question: Q\\nAnswer: S"``), the form the verifiers trained on.

    HF_HUB_OFFLINE=1 python -m benchmarks.verifier_crossfit --out ~/.cache/syncheck/verifier-crossfit \\
        --results-md benchmarks/RESULTS.md

Each fold's directory is a resumable ``syncheck verifier train`` output; a finished fold is not trained again, and
scores are cached per verifier (by its weights' sha256) and pair. ``--scores-out FILE.jsonl.gz`` also writes every
sentence's cross-fitted score (both claim forms, keyed by a hash, no text): ``crossfit:FILE.jsonl.gz`` then stands
for the folds directory in :mod:`benchmarks.ragtruth.feature_gain`, with no verifier to load.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks._common import interval
from benchmarks.ragtruth.alignment_feature import (
    FOLDS_FILE,
    cached_scores,
    crossfit_scores,
    fold_dir,
    read_folds,
    write_score_file,
)
from benchmarks.ragtruth.data import TASKS, RAGTruthRecord, read_ragtruth_files
from benchmarks.results_md import measured_line, publish
from features.alignment.lexical import lexical_precision
from syncheck.build_info import without_machine_paths
from syncheck.featurize import alignment_claim
from syncheck.fitting import grouped_folds
from syncheck.jsonl import iter_jsonl
from syncheck.model.prompts import format_context
from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference
from syncheck.training.artefacts import THINNING

SECTION = "## Verifiers cross-fitted on RAGTruth: each sentence scored by a verifier that never trained on it"
#: The section of a run whose artefact check thins to the labels' ratio (``--thinning ratio``).
SECTION_RATIO = "## Verifiers cross-fitted on RAGTruth, the artefact check thinning to the labels' ratio"
#: The training settings a finished fold is reused for only when they are the same.
TRAINING_KEYS = ("init", "epochs", "learning_rate", "batch_size", "max_length", "max_steps")


def assign_folds(records: Sequence[RAGTruthRecord], n_folds: int, seed: int) -> dict[str, int]:
    """``{record id: fold}``, folds grouped by source document."""
    folds = grouped_folds([r.source_id for r in records], n_folds, seed)
    return {records[i].id: k for k, (_, test) in enumerate(folds) for i in test}


def train_folds(out: Path, paths: str, records: Sequence[RAGTruthRecord], n_folds: int, seed: int, settings: Any,
                progress: bool = True, echo=print, thinning: str = "balance",
                replay: dict[str, Any] | None = None) -> dict[str, int]:
    """Train (or finish training) each fold's verifier into ``out/fold-<k>``; returns ``{record id: fold}``.

    ``replay`` (``{"halueval": DIR, "halueval_records": {file: n}, "distractors": n}``) puts the same HaluEval
    training rows beside every fold's RAGTruth sentences, as ``syncheck verifier train --halueval`` makes them
    (HaluEval is no RAGTruth record, so no fold sees another's responses through it).

    Raises:
        SystemExit: ``out`` holds folds dealt from other records or with other settings (the message says what to do).
    """
    from features.model_manifest import MANIFEST
    from syncheck.training.verifier_build import build_verifier
    from syncheck.training.verifier_dataset import DataRecipe

    fold_of = assign_folds(records, n_folds, seed)
    spec = {"folds": n_folds, "seed": seed, "thinning": thinning, "fold_of": fold_of,
            "training": {k: getattr(settings, k) for k in TRAINING_KEYS}, "replay": replay}
    out.mkdir(parents=True, exist_ok=True)
    if (out / FOLDS_FILE).exists():
        held = read_folds(out)
        changed = sorted(k for k in spec if held.get(k) != spec[k])  # a key a run before it lacks reads as None
        if changed:
            raise SystemExit(f"{out} holds folds dealt or trained otherwise ({', '.join(changed)} differ); pass a new "
                             "--out, or the options that built it")
    else:
        (out / FOLDS_FILE).write_text(json.dumps({"ragtruth": paths, **spec}, indent=1) + "\n", encoding="utf-8")
    raw = {str(row["id"]): row for path in paths.split(",") if path for row in iter_jsonl(path)}
    for k in range(max(fold_of.values()) + 1):
        d = fold_dir(out, k)
        if (d / MANIFEST).exists():
            echo(f"fold {k}: done ({d})")
            continue
        d.mkdir(exist_ok=True)
        labelled = d / "labelled.jsonl"
        with open(labelled, "w", encoding="utf-8") as f:
            for rid, fold in fold_of.items():
                if fold != k:
                    f.write(json.dumps(raw[rid], ensure_ascii=False) + "\n")
        echo(f"fold {k}: training on the {sum(v != k for v in fold_of.values())} records of the other folds")
        t0 = time.perf_counter()
        command = (f"syncheck verifier train fold-{k} --labelled labelled.jsonl --init {settings.init} "
                   f"--epochs {settings.epochs} --learning-rate {settings.learning_rate} --dev-share 0 --seed {seed}"
                   + (f" --thinning {thinning}" if thinning != "balance" else "")
                   + (" --halueval HALUEVAL --halueval-records "
                      + ",".join(f"{f}={n}" for f, n in replay["halueval_records"].items())
                      + f" --distractors {replay['distractors']}" if replay else ""))
        extra = ({"halueval": replay["halueval"], "halueval_records": dict(replay["halueval_records"]),
                  "distractors_per_record": replay["distractors"]} if replay else {})
        build_verifier(d, DataRecipe(labelled=(str(labelled),), thinning=thinning, seed=seed, **extra), settings,
                       command=command,
                       dev_share=0.0, progress=progress, echo=echo)
        folds = read_folds(out)
        folds.setdefault("train_seconds", {})[str(k)] = round(time.perf_counter() - t0)
        (out / FOLDS_FILE).write_text(json.dumps(folds, indent=1) + "\n", encoding="utf-8")
    return fold_of


def fold_lines(out: Path) -> list[str]:
    """One line per fold: its pairs before and after the artefact check, and its training time."""
    from features.model_manifest import read_manifest

    folds = read_folds(out)
    lines = []
    for k in range(max(folds["fold_of"].values()) + 1):
        manifest = read_manifest(fold_dir(out, k))
        check = manifest["data"]["artefact_check"]
        seconds = folds.get("train_seconds", {}).get(str(k))
        lines.append(f"- fold {k}: {check['pairs_after']} of {check['pairs_before']} pairs kept by the artefact check "
                     f"(claim-only AUROC {check['claim_only_auroc_before']:.3f} before, "
                     f"{check['claim_only_auroc_after']:.3f} after)"
                     + (f", {seconds} s of training" if seconds is not None else "")
                     + (f", built at {manifest['training']['commit'][:7]}" if manifest["training"]["commit"] else ""))
    return lines


def sentence_units(records: Sequence[RAGTruthRecord]) -> dict[str, list]:
    """Columns of the scored sentences: record id, task, source, premise, sentence, question-aware claim, label."""
    cols: dict[str, list] = {k: [] for k in ("id", "task", "source", "premise", "text", "claim_q", "label")}
    for r in records:
        sentences = r.sentences()
        for s, label in zip(sentences, r.sentence_labels(sentences)):
            if s.text.strip():
                for key, value in (("id", r.id), ("task", r.task), ("source", r.source_id),
                                   ("premise", format_context(r.context)), ("text", s.text),
                                   ("claim_q", alignment_claim(s.text, r.question)), ("label", label)):
                    cols[key].append(value)
    return cols


def table(units: dict[str, list], crossfit: dict[str, np.ndarray], shipped: dict[str, np.ndarray],
          n_boot: int) -> str:
    lines = ["| task (claim) | sentences | unfaithful | cross-fitted | the verifier they started from | word overlap | "
             "length (shorter = faithful) | cross-fitted − started from | cross-fitted − word overlap |",
             "|" + " --- |" * 9]
    task = np.array(units["task"])
    y = np.array(units["label"])
    groups = np.array(units["source"])
    overlap = np.array([lexical_precision(p, t) for p, t in zip(units["premise"], units["text"])])
    length = -np.array([len(t) for t in units["text"]], dtype=float)
    rows = [(t, "sentence", "text") for t in TASKS] + [("QA", "question-aware", "claim_q")]
    for t, form, key in rows:
        m = task == t
        if m.sum() == 0 or len(set(y[m])) < 2:
            continue
        kw = {"groups": groups[m], "n": n_boot}
        c, s = crossfit[key][m], shipped[key][m]
        lines.append("| " + " | ".join([
            f"{t} ({form})", str(int(m.sum())), str(int((y[m] == 0).sum())),
            *(interval(bootstrap_auroc(y[m], v, **kw), 3) for v in (c, s, overlap[m], length[m])),
            *(interval(bootstrap_auroc_difference(y[m], c, v, **kw), 3, signed=True) for v in (s, overlap[m]))]) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from syncheck.cache import cache_dir
    from syncheck.training.verifier_training import TrainSettings

    ap = argparse.ArgumentParser(prog="python -m benchmarks.verifier_crossfit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/dev.jsonl,../shared/data/ragtruth/dev_extra.jsonl",
                    help="RAGTruth JSON lines, comma-separated")
    ap.add_argument("--out", required=True, type=Path, help="the folds' verifiers (resumable)")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", default="verifier", help="the verifier each fold goes on training")
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--learning-rate", type=float, default=3e-5)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--thinning", choices=THINNING, default="balance",
                    help="how the artefact check thins each fold's pairs (syncheck verifier train --thinning)")
    ap.add_argument("--halueval", default=None,
                    help="HaluEval's directory: its training rows go beside every fold's sentences (replay)")
    ap.add_argument("--halueval-records", default="qa=600,dialogue=1000,summarization=400",
                    help="with --halueval: records per HaluEval file, as syncheck verifier train takes them")
    ap.add_argument("--distractors", type=int, default=3, choices=(1, 2, 3),
                    help="with --halueval: distractor answers per HaluEval QA record")
    ap.add_argument("--max-steps", type=int, default=-1, help="steps per fold (-1: the epochs decide); smoke runs")
    ap.add_argument("--limit", type=int, default=None, help="records read per task (smoke runs)")
    ap.add_argument("--work-dir", type=Path, default=None,
                    help="score cache (default: <syncheck cache>/ragtruth-bench)")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--scores-out", type=Path, default=None,
                    help="also write each sentence's cross-fitted score here (.jsonl.gz; keys and scores, no text)")
    ap.add_argument("--results-md", default=None, help="write the section into this file (benchmarks/RESULTS.md)")
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args(argv)
    from syncheck.training.sources import parse_record_counts

    try:
        counts = parse_record_counts(args.halueval_records)
    except ValueError as exc:
        ap.error(f"--halueval-records {args.halueval_records!r}: {exc}")
    replay = ({"halueval": args.halueval, "halueval_records": counts,
               "distractors": args.distractors} if args.halueval else None)
    if args.scores_out and args.scores_out.suffix != ".gz":
        ap.error(f"--scores-out {args.scores_out}: name a .jsonl.gz file (keys and scores, gzipped)")
    t0 = time.perf_counter()
    from syncheck.training.verifier_training import init_base

    records = read_ragtruth_files(args.ragtruth, args.limit)
    settings = TrainSettings(base=init_base(args.init), init=args.init,
                             max_length=args.max_length, epochs=args.epochs, batch_size=args.batch_size,
                             learning_rate=args.learning_rate, max_steps=args.max_steps, seed=args.seed)
    train_folds(args.out, args.ragtruth, records, args.folds, args.seed, settings, args.progress,
                thinning=args.thinning, replay=replay)
    work_dir = args.work_dir or cache_dir() / "ragtruth-bench"
    units = sentence_units(records)
    crossfit, shipped = {}, {}
    start_spec = "verifier" if args.init == "verifier" else f"verifier:{args.init}"
    for key in ("text", "claim_q"):
        crossfit[key] = crossfit_scores(args.out, units["id"], units["premise"], units[key], work_dir)
        shipped[key] = cached_scores(start_spec, work_dir, units["premise"], units[key])
    fold_of = read_folds(args.out)["fold_of"]
    if args.scores_out:
        written = write_score_file(args.scores_out, units["premise"] * 2, units["text"] + units["claim_q"],
                                   np.concatenate([crossfit["text"], crossfit["claim_q"]]),
                                   [fold_of[i] for i in units["id"]] * 2)
        print(f"{written} cross-fitted scores ({len(units['id'])} sentences, two claim forms) in {args.scores_out}")
    given = sys.argv[1:] if argv is None else argv
    cmd = "python -m benchmarks.verifier_crossfit " + " ".join(shlex.quote(without_machine_paths(a)) for a in given)
    body = "\n".join([
        f"{measured_line()} Command: `{cmd}` ({time.perf_counter() - t0:.0f} s in this run). "
        f"{len(records)} responses from {len(set(r.source_id for r in records))} source documents in "
        f"{max(fold_of.values()) + 1} folds; each fold's verifier went on training `{args.init}` for {args.epochs:g} "
        f"epochs on the other folds' labelled sentences"
        + (f" and HaluEval's training rows ({args.halueval_records}, {args.distractors} distractors)" if replay else "")
        + f" (artefact check thinning: `{args.thinning}`).",
        "",
        *fold_lines(args.out),
        "",
        "Sentence AUROC, faithful = positive, 95% bootstrap over source documents; the differences are paired on the "
        "same sentences. No sentence is scored by a verifier that trained on its response.",
        "",
        table(units, crossfit, shipped, args.bootstrap),
    ])
    publish(body, args.results_md, SECTION_RATIO if args.thinning == "ratio" else SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
