"""The verifier alone (no other feature), on records it never saw, beside word overlap and length on the same rows.

Sets (every record range fixed before the verifier's first training run, :mod:`syncheck.training.sources`):

- HaluEval QA records 2000-2499 (held out): ``qa``, the right against the hallucinated answer; ``pairs``, the right
  answer against another span of the same passage, both as "The answer is X." (:mod:`benchmarks.halueval.pairs`);
- HaluEval dialogue records 5000-5499 and summarization records 5000-5299 (held out);
- RAGTruth ``dev`` and ``dev_extra``, sentence by sentence, per task (the verifier never trained on RAGTruth);
- ``--pairs FILE``: labelled pairs (:mod:`syncheck.training.pair_files`), one set per file, one unit per pair, e.g.
  the check sets no verifier trains on (``summedits``, ``wice``, ``fever_symmetric`` of ``../shared/data/nli/``).
  Their table adds balanced accuracy at 0.5 and the claim-only model (tf-idf of the claim alone, out of fold,
  :func:`syncheck.training.artefacts.claim_only_scores`), which tells how much of a set the claim alone gives away.

Claims are question-aware where there is a question (``"Question: Q\\nAnswer: S"``, the dialogue history as the
question). A summary is scored sentence by sentence against its document, and its score is the **minimum** over its
sentences (one unsupported sentence makes it unfaithful; fixed before the first run, the mean is shown beside it).
AUROC counts faithful as the positive class, with 95% bootstrap intervals over records (RAGTruth: over source
documents), and the paired difference against word overlap.

``--alignment crossfit:DIR`` (RAGTruth units only) scores each unit with the fold verifier of
:mod:`benchmarks.verifier_crossfit` (``--out DIR``) that never trained on its record: the reading of a verifier
trained on RAGTruth, out of fold, as sentences or (``--responses``) as ``syncheck check`` reads the responses.

``--against SPEC`` scores the same units with a second backend (the shipped verifier, when a rebuild is the
candidate) and adds the paired difference against it, with the shipping rule's verdict (:func:`shipping_verdict`):
a candidate ships when its paired interval against the shipped one is above 0 on the set it was built for and no
set's interval lies wholly below 0. On summary sets the rule also reads the mean over sentences and the mean leaning
on local support, each against the same reading of the other backend, since those are what ``syncheck check`` uses.
A point bound on each set's fall would stop a candidate for a fall smaller than that set's own interval.

Run::

    HF_HUB_OFFLINE=1 python -m benchmarks.verifier_quality --halueval ../shared/data/halueval \\
        --ragtruth ../shared/data/ragtruth/dev.jsonl,../shared/data/ragtruth/dev_extra.jsonl \\
        --results-md benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks._common import interval
from benchmarks.halueval.pairs import answer_sentence, build_pairs
from benchmarks.ragtruth.data import TASKS, read_ragtruth_files
from benchmarks.results_md import command_line, measured_line, publish
from features.alignment import parse_alignment_spec
from features.alignment.lexical import lexical_precision
from features.sentences import split_sentences
from syncheck.alignment import make_alignment_scorer
from syncheck.checking.support import held_locally, lean_on_lexical, verifier_claims
from syncheck.featurize import alignment_claim
from syncheck.model.prompts import format_context
from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference
from syncheck.training.sources import HALUEVAL_EVAL, HALUEVAL_FIELDS, HALUEVAL_HELD_OUT, halueval_records

SECTION = "## The verifier alone, on records it never saw"
#: The sets whose units are summaries read sentence by sentence: the column leaning on local support is theirs.
SUMMARY_SETS = ("summarization", "RAGTruth Summary")


@dataclass
class Unit:
    """One scored unit: a response (or a sentence) with its claims; its score is the min (or mean) over claims."""

    set: str
    group: str
    premise: str
    text: str
    claims: list[str]
    label: int
    record: str = ""
    scores: list[float] = field(default_factory=list)
    against: list[float] = field(default_factory=list)


def parse_records(specs: list[str]) -> dict[str, tuple[int, int]]:
    """``["summarization=8000-8300", ...]`` -> ``{subset: (start, end)}``, each range inside the verifier's held-out
    records (:data:`~syncheck.training.sources.HALUEVAL_HELD_OUT`), so no figure is read on its training data."""
    ranges = {}
    for spec in specs:
        subset, _, span = spec.partition("=")
        start, _, end = span.partition("-")
        if subset not in HALUEVAL_HELD_OUT or not (start.isdigit() and end.isdigit()) or int(start) >= int(end):
            raise SystemExit(f"--records {spec!r}: write SUBSET=START-END with SUBSET one of "
                             f"{sorted(HALUEVAL_HELD_OUT)} and START < END (records [START, END))")
        a, b = int(start), int(end)
        if not any(lo <= a and b <= hi for lo, hi in HALUEVAL_HELD_OUT[subset]):
            raise SystemExit(f"--records {spec!r} is not inside the verifier's held-out {subset} records "
                             f"{HALUEVAL_HELD_OUT[subset]}; the verifier trained on the others")
        ranges[subset] = (a, b)
    return ranges


def halueval_units(data_dir: str, records: dict[str, tuple[int, int]] | None = None) -> list[Unit]:
    """The HaluEval sets, each on its evaluation records (:data:`HALUEVAL_EVAL`, or ``records`` per subset)."""
    ranges = {**HALUEVAL_EVAL, **(records or {})}
    units: list[Unit] = []
    for subset in ("qa", "dialogue", "summarization"):
        _, ctx_f, q_f, good_f, bad_f = HALUEVAL_FIELDS[subset]
        for i, row in halueval_records(data_dir, subset, [ranges[subset]]):
            for f, label in ((good_f, 1), (bad_f, 0)):
                text = row[f].strip()
                if q_f is not None:
                    claims = [alignment_claim(text, row[q_f])]
                else:
                    claims = [s.text for s in split_sentences(text) if s.text.strip()] or [text]
                units.append(Unit(subset, f"{subset}-{i}", row[ctx_f], text, claims, label))
    start, end = ranges["qa"]
    for p in build_pairs(data_dir, limit=end - start, start=start):
        for entity, label in ((p.answer, 1), (p.distractor, 0)):
            text = answer_sentence(entity)
            units.append(Unit("pairs", f"pairs-{p.record}", p.context, text, [alignment_claim(text, p.question)],
                              label))
    return units


def ragtruth_units(paths: str, responses: bool = False) -> list[Unit]:
    """RAGTruth's sentences, one unit each; with ``responses``, its responses, each read as ``syncheck check`` reads
    an answer with a verifier (:func:`~syncheck.checking.support.verifier_claims`: a summary sentence by sentence,
    any other answer whole), labelled faithful when it has no annotated span."""
    units = []
    for r in read_ragtruth_files(paths):
        sentences, premise = r.sentences(), format_context(r.context)  # the cross-fit's premise, so its cache serves
        if responses:
            units.append(Unit(f"RAGTruth {r.task}", r.source_id, premise, r.response,
                              verifier_claims(r.response, r.question), r.label, record=r.id))
            continue
        for s, label in zip(sentences, r.sentence_labels(sentences)):
            if s.text.strip():
                units.append(Unit(f"RAGTruth {r.task}", r.source_id, premise, s.text,
                                  [alignment_claim(s.text, r.question)], label, record=r.id))
    return units


def pair_units(paths: list[str]) -> list[Unit]:
    """The pairs of each file as units of the set named for the file (one claim each, grouped by premise)."""
    from syncheck.training.pair_files import file_stem, read_pair_file

    return [Unit(file_stem(path), p.group, p.premise, p.claim, [p.claim], p.label)
            for path in paths for p in read_pair_file(path)]


def set_rows(units: list[Unit], name: str) -> tuple[list[Unit], np.ndarray, list[str], np.ndarray]:
    """The units of one set, their labels, groups and word overlap (the trivial baseline every table shows)."""
    us = [u for u in units if u.set == name]
    return (us, np.array([u.label for u in us]), [u.group for u in us],
            np.array([lexical_precision(u.premise, u.text) for u in us]))


def pair_table(units: list[Unit], set_names: list[str], name: str = "verifier") -> str:
    """Balanced accuracy at 0.5 of the backend, and the claim-only model's AUROC, on each pairs set."""
    from sklearn.metrics import balanced_accuracy_score

    from syncheck.training.artefacts import claim_only_scores
    from syncheck.training.pairs import VerifierPair

    lines = [f"| set | units | supported | {name} AUROC | {name} balanced accuracy (0.5) | word overlap AUROC | "
             "claim-only AUROC (out of fold) |", "| --- " * 7 + "|"]
    for set_name in set_names:
        us, y, groups, overlap = set_rows(units, set_name)
        if not us:
            continue
        scores = np.array([min(u.scores) for u in us])
        claim_only = claim_only_scores([VerifierPair(u.premise, u.text, u.label, u.group, u.set) for u in us])
        lines.append(f"| {set_name} | {len(us)} | {y.mean():.2f} | {auroc(y, scores, groups)} | "
                     f"{balanced_accuracy_score(y, scores >= 0.5):.3f} | "
                     f"{auroc(y, overlap, groups)} | "
                     f"{auroc(y, claim_only, groups)} |")
    return "\n".join(lines)


def auroc(y: np.ndarray, scores: np.ndarray, groups: np.ndarray) -> str:
    """ROC AUC of ``scores`` with its 95% interval (resampling ``groups`` together), as a table cell."""
    return interval(bootstrap_auroc(y, scores, groups=groups), 3)


def first_per_set(units: list[Unit], limit: int | None, skip: int = 0) -> list[Unit]:
    """The units of each set after its first ``skip``, at most ``limit`` of them (``None``: all)."""
    seen: dict[str, int] = {}
    out = []
    for u in units:
        seen[u.set] = seen.get(u.set, 0) + 1
        if skip < seen[u.set] and (limit is None or seen[u.set] <= skip + limit):
            out.append(u)
    return out


def score_units(units: list[Unit], scorer, batch_size: int, attr: str = "scores") -> None:
    """Score every claim of ``units`` with ``scorer`` into each unit's ``attr`` list."""
    premises, claims = claim_pairs(units)
    assign_scores(units, scorer.score(premises, claims, batch_size=batch_size), attr)


def claim_pairs(units: list[Unit]) -> tuple[list[str], list[str]]:
    """The (premise, claim) pair of every claim of ``units``, in order, as two lists."""
    return [u.premise for u in units for _ in u.claims], [c for u in units for c in u.claims]


def assign_scores(units: list[Unit], flat, attr: str) -> None:
    """Hand the flat scores of every claim of ``units``, in order, to each unit's ``attr`` list."""
    k = 0
    for u in units:
        setattr(u, attr, [float(x) for x in flat[k : k + len(u.claims)]])
        k += len(u.claims)


def score_units_crossfit(units: list[Unit], out: Path, work_dir: Path, batch_size: int, attr: str = "scores") -> dict:
    """Score each RAGTruth unit with the verifier of its record's fold in ``out`` (:mod:`benchmarks.verifier_crossfit`),
    which never trained on it (:func:`~benchmarks.ragtruth.alignment_feature.crossfit_scores`, cached per verifier
    and pair in ``work_dir``, so pairs the cross-fit scored are not scored again); returns fold 0's manifest.

    Raises:
        SystemExit: a unit that is no RAGTruth record of the folds (HaluEval, a pairs file, other RAGTruth files).
    """
    from benchmarks.ragtruth.alignment_feature import crossfit_scores, fold_dir
    from features.model_manifest import read_manifest

    outside = [u for u in units if not u.record]
    if outside:
        raise SystemExit(f"{len(outside)} units ({outside[0].set}, ...) are no RAGTruth record: a cross-fitted "
                         f"backend reads only the RAGTruth files its folds were dealt from (--ragtruth, without "
                         "--halueval or --pairs)")
    ids = [u.record for u in units for _ in u.claims]
    premises, claims = claim_pairs(units)
    assign_scores(units, crossfit_scores(out, ids, premises, claims, work_dir, batch_size), attr)
    return read_manifest(fold_dir(out, 0))


def shipping_verdict(diffs: dict[str, tuple[float, float, float]], target: str = "pairs") -> str:
    """The shipping rule on paired differences ``{set: (candidate − shipped, lo, hi)}``: the candidate ships when
    ``target``'s interval is above 0 and no set's interval lies wholly below 0."""
    if target not in diffs:
        return f"no verdict: the set the rule reads ({target}) was not measured"
    worse = [name for name, (_, _, hi) in diffs.items() if hi < 0]
    if diffs[target][1] <= 0:
        return f"do not ship: the paired interval on {target} is not above 0"
    if worse:
        return "do not ship: the paired interval lies below 0 on " + ", ".join(worse)
    return f"ship: better on {target} (paired interval above 0), and no set is worse beyond its interval"


def table(units: list[Unit], set_names: list[str], against: str | None = None,
          diffs: dict[str, tuple[float, float, float]] | None = None, name: str = "verifier") -> str:
    """The table of the backend ``name``; with ``against``, a column of the paired difference against it (min over
    claims), which is also put into ``diffs`` per set."""
    lines = [f"| set | units | {name} (min) | {name} (mean) | word overlap | length (shorter = faithful) | "
             f"{name} − word overlap | mean − word overlap | mean − min | mean leaning on local support | "
             "leaning − mean |"
             + (f" `{against}` (min) | {name} − `{against}` | mean: {name} − `{against}` | "
                f"leaning: {name} − `{against}` |" if against else ""),
             "| --- " * 11 + "|" + (" --- | --- | --- | --- |" if against else "")]
    for name in set_names:
        us, y, groups, overlap = set_rows(units, name)
        if not us:
            continue
        v_min = np.array([min(u.scores) for u in us])
        v_mean = np.array([np.mean(u.scores) for u in us])
        length = -np.array([len(u.text) for u in us], dtype=float)
        row = [name, str(len(us)), auroc(y, v_min, groups),
               auroc(y, v_mean, groups), auroc(y, overlap, groups),
               auroc(y, length, groups),
               interval(bootstrap_auroc_difference(y, v_min, overlap, groups=groups), 3, signed=True),
               interval(bootstrap_auroc_difference(y, v_mean, overlap, groups=groups), 3, signed=True),
               interval(bootstrap_auroc_difference(y, v_mean, v_min, groups=groups), 3, signed=True)]
        summary = name in SUMMARY_SETS  # the summary support leaning on each sentence's local support, as the check's
        if summary:
            local = [held_locally(u.premise, u.claims) for u in us]  # each summary's sentences' local support, once
            lean = leaning(us, "scores", local)
            row += [auroc(y, lean, groups),
                    interval(bootstrap_auroc_difference(y, lean, v_mean, groups=groups), 3, signed=True)]
        else:
            row += ["-", "-"]
        if against:
            other = np.array([min(u.against) for u in us])
            readings = {name: (v_min, other)}
            if summary:  # the readings `syncheck check` takes of a summary, each against the same reading of the other
                readings[f"{name} (mean)"] = (v_mean, np.array([np.mean(u.against) for u in us]))
                readings[f"{name} (leaning)"] = (lean, leaning(us, "against", local))
            paired = {key: bootstrap_auroc_difference(y, a, b, groups=groups) for key, (a, b) in readings.items()}
            if diffs is not None:
                diffs.update(paired)
            row += [auroc(y, other, groups)] + [
                interval(paired[key], 3, signed=True) if key in paired else "-"
                for key in (name, f"{name} (mean)", f"{name} (leaning)")]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def leaning(units: list[Unit], attr: str, local: list) -> np.ndarray:
    """Each summary's mean claim score (``attr``) leaning on its sentences' ``local`` support, as the check reads it."""
    return np.array([lean_on_lexical(np.mean(getattr(u, attr)), held) for u, held in zip(units, local)])


def built_from(manifest: dict) -> str:
    """A verifier's or a probe verifier's weights hash and the commit that built it, from its manifest
    (:mod:`features.model_manifest`)."""
    from features.model_manifest import weights_sha256

    digest = weights_sha256(manifest) or "?"
    commit = ((manifest.get("training") or {}).get("commit") or "?")[:7]
    kind = "head" if manifest.get("kind") == "probe-verifier" else "weights"
    return f"{kind} sha256 {digest[:12]} (built at {commit})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--halueval", help="HaluEval's directory")
    ap.add_argument("--ragtruth", help="RAGTruth JSON lines, comma-separated")
    ap.add_argument("--pairs", default=None,
                    help="labelled pairs files (premise, hypothesis, label), comma-separated: one set per file")
    ap.add_argument("--alignment", default="verifier",
                    help="the backend to measure (default: the shipped verifier); crossfit:DIR, the fold verifiers of "
                         "benchmarks.verifier_crossfit, each on the RAGTruth records it never trained on")
    ap.add_argument("--work-dir", type=Path, default=None,
                    help="with --alignment crossfit:DIR, the score cache (default: <syncheck cache>/ragtruth-bench)")
    ap.add_argument("--against", default=None,
                    help="a second backend on the same units (e.g. verifier, when --alignment is a rebuild): adds the "
                         "paired difference and the shipping rule's verdict")
    ap.add_argument("--max-length", type=int, default=None,
                    help="tokens per (window, claim) pair for a verifier backend (default: what it was trained at)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--limit", type=int, default=None, help="units per set (smoke runs)")
    ap.add_argument("--skip", type=int, default=0,
                    help="skip the first N units of each set (a check on units a --limit run left untouched)")
    ap.add_argument("--records", action="append", default=[], metavar="SUBSET=START-END",
                    help="HaluEval records [START, END) of one subset instead of its evaluation sample (inside the "
                         "verifier's held-out records; repeat per subset), e.g. summarization=8000-8300")
    ap.add_argument("--responses", action="store_true",
                    help="RAGTruth units are responses, each read as `syncheck check` reads it with a verifier (a "
                         "summary sentence by sentence), not sentences")
    ap.add_argument("--sets", default=None, help="only these sets, comma-separated (e.g. 'RAGTruth Summary')")
    ap.add_argument("--results-md", default=None, help="write the section into this file (benchmarks/RESULTS.md)")
    ap.add_argument("--results-section", default=SECTION, help="the heading of the section it writes")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    crossfit = Path(args.alignment.split(":", 1)[1]) if args.alignment.startswith("crossfit:") else None
    scorer = None if crossfit else make_alignment_scorer(
        args.alignment, **({"max_length": args.max_length} if args.max_length else {}))
    records = {**HALUEVAL_EVAL, **parse_records(args.records)}
    units = (halueval_units(args.halueval, records) if args.halueval else []) + (
        ragtruth_units(args.ragtruth, args.responses) if args.ragtruth else [])
    pair_paths = [p.strip() for p in args.pairs.split(",") if p.strip()] if args.pairs else []
    from_pairs = pair_units(pair_paths)
    pair_sets = list(dict.fromkeys(u.set for u in from_pairs))
    units += from_pairs
    if args.sets:
        units = [u for u in units if u.set in {name.strip() for name in args.sets.split(",")}]
    if args.limit or args.skip:
        units = first_per_set(units, args.limit, args.skip)
    if crossfit:
        from syncheck.cache import cache_dir

        manifest = score_units_crossfit(units, crossfit, args.work_dir or cache_dir() / "ragtruth-bench",
                                        args.batch_size)
    else:
        score_units(units, scorer, args.batch_size)
        manifest = getattr(scorer, "manifest", {}) or {}
    if args.against:
        score_units(units, make_alignment_scorer(args.against), args.batch_size, "against")
    sets = ["pairs", "qa", "dialogue", "summarization"] + [f"RAGTruth {t}" for t in TASKS] + pair_sets
    diffs: dict[str, tuple[float, float, float]] = {}
    backend = "cross-fitted" if crossfit else parse_alignment_spec(args.alignment)[0]
    cmd = command_line("benchmarks.verifier_quality", argv)
    # the HaluEval ranges of the sets scored (the pairs are QA records)
    read = [f"{k} {a}-{b - 1}" for k, (a, b) in records.items()
            if any(u.set in (k, "pairs" if k == "qa" else k) for u in units)]
    body = "\n".join([
        f"{measured_line()} Command: `{cmd}` ({time.perf_counter() - t0:.0f} s). Backend `{args.alignment}`"
        + (f", {built_from(manifest)}." if manifest else "."),
        "",
        "HaluEval units are responses (a summary's score is the min over its sentences, the mean beside it)"
        + (", on records " + ", ".join(read) if read else "") + "; RAGTruth units are "
        + ("responses (a summary's sentences each a claim, any other response one claim)" if args.responses
           else "sentences") + ". AUROC, faithful = positive, 95% bootstrap over records or source documents. "
        "Every range here is outside the verifier's training data.",
        "",
        table(units, sets, args.against, diffs, backend),
    ] + (["", "Pairs sets: balanced accuracy and the claim-only model.", "",
          pair_table(units, pair_sets, backend)] if pair_sets else []) + (
        ["", f"Shipping rule (a paired interval against `{args.against}`): {shipping_verdict(diffs)}."]
         if args.against else []))
    publish(body, args.results_md, args.results_section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
