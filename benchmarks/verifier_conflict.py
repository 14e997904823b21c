"""Whether a support model sees the answers that name the wrong entity: stored knowledge-conflict answers, scored again.

FOD steers by the sentence score, and on knowledge-conflict QA its misses are bare answers that name another entity
of the passage (or the model's memory) and still score about 0.99. Before a support model steers FOD, it should tell
those answers from the ones that give the passage's answer. This reads answers that ``benchmarks.conflict_qa``
already decoded (``benchmarks/runs/conflict_*.jsonl.gz``) and scores each one again, with no decoding:

- **label:** the answer gives the passage's answer (the substitute, by whole-word match) = 1, else 0; abstentions and
  failed rows are left out;
- **scores:** the sentence score the run stored (the least of the answer's sentences: what FOD steers by), and each
  ``--support`` model on (the swapped passage, ``"Question: Q\\nAnswer: A"``), max over windows; beside word
  overlap with the passage and length (shorter = faithful) on the same answers.

AUROC with 95% bootstrap intervals over questions, over all answers and then by answer form: bare answers (at
most :data:`benchmarks.answer_fluency.BARE_WORDS` words, where FOD's misses are) and sentences. Then an offline
proxy for *preferring* what the support model supports: per question, of the stored methods' answers, keep the
one it scores highest, and count how often that gives the passage's answer, beside each method's own rate on the
same questions. It is a proxy, not FOD: FOD would choose among its own candidates while decoding.

Run::

    python -m benchmarks.verifier_conflict --runs benchmarks/runs/conflict_qwen_fresh2.1.jsonl.gz+\\
benchmarks/runs/conflict_qwen_fresh2.2.jsonl.gz --support verifier
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import numpy as np

from benchmarks.answer_fluency import answer_form
from benchmarks.conflict_qa import conflict_items, run_rows
from benchmarks.results_md import command_line, measured_line, publish
from benchmarks.verifier_check import cell
from features.alignment.lexical import lexical_precision
from syncheck.alignment import make_alignment_scorer
from syncheck.featurize import alignment_claim
from syncheck.stats import bootstrap_auroc
from syncheck.training.conflict_set import contains_answer

SECTION = "## Does a support model see FOD's wrong-entity answers? Stored conflict answers, scored again"


def labelled_answers(paths: str, halueval: str) -> list[dict]:
    """The swapped-condition answers of one run (shards joined by ``+``), with their question, passage and label."""
    rows = [r for r in run_rows(paths.replace("+", ",")) if r["condition"] == "swapped"]
    if not rows:
        raise ValueError(f"{paths}: no swapped-condition rows; pass the files benchmarks.conflict_qa --out wrote")
    if "run" not in rows[0]:
        raise ValueError(f"{paths}: its rows do not name their run's records (written before run configs were "
                         f"stored); pass a run file whose rows carry 'run'")
    config = rows[0]["run"]["config"]
    items = {it.id: it for it in conflict_items(halueval, config)}
    out = []
    for r in rows:
        item = items.get(r["id"])
        if item is None:
            raise ValueError(f"{r['id']} is not in the conflict set of records {config['start']}+ of {halueval}")
        if r.get("error") or r.get("abstained") or not (r.get("text") or "").strip():
            continue
        scores = [s["score"] for s in r.get("sentences", []) if s.get("score") is not None]
        out.append({"id": r["id"], "method": r["method"], "text": r["text"].strip(), "question": item.question,
                    "context": item.context, "label": int(contains_answer(r["text"], item.substitute)),
                    "sentence score": min(scores) if scores else float("nan")})
    return out


def preferred_rates(answers: list[dict], column: str) -> tuple[int, dict[str, float], float]:
    """Questions answered by every method; each method's passage-answer rate on them; the rate when, per question,
    the answer with the highest ``column`` is kept (ties: the first method by name)."""
    by_q: dict[str, dict[str, dict]] = defaultdict(dict)
    for a in answers:
        by_q[a["id"]][a["method"]] = a
    methods = sorted({a["method"] for a in answers})
    full = [q for q, got in by_q.items() if len(got) == len(methods)]
    if not full:
        return 0, {}, float("nan")
    rates = {m: float(np.mean([by_q[q][m]["label"] for q in full])) for m in methods}
    kept = [max((by_q[q][m] for m in methods), key=lambda a: a[column])["label"] for q in full]
    return len(full), rates, float(np.mean(kept))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True,
                    help="run files, comma-separated; the shards of one run joined by '+'")
    ap.add_argument("--support", default="verifier",
                    help="alignment specs, comma-separated (verifier, verifier:DIR, probe:DIR)")
    ap.add_argument("--halueval", default="../shared/data/halueval")
    ap.add_argument("--results-md", default=None)
    ap.add_argument("--rows-out", default=None,
                    help="write every scored answer (its id, method, text, label and scores) here, as JSON lines")
    args = ap.parse_args(argv)
    rows_out = open(args.rows_out, "w", encoding="utf-8") if args.rows_out else None
    t0 = time.perf_counter()
    supports = [s.strip() for s in args.support.split(",") if s.strip()]
    scorers = {s: make_alignment_scorer(s) for s in supports}
    columns = ["sentence score", *supports, "word overlap", "length"]
    lines = ["| run | answers (passage's answer) | " + " | ".join(columns) + " |", "|" + " --- |" * (2 + len(columns))]
    prefer = ["| run | questions | methods' own rates | "
              + " | ".join(f"keep the answer {s} rates highest" for s in ["sentence score", *supports]) + " |",
              "|" + " --- |" * (4 + len(supports))]
    for run in [r for r in args.runs.split(",") if r]:
        answers = labelled_answers(run, args.halueval)
        for s, scorer in scorers.items():
            got = scorer.score([a["context"] for a in answers],
                               [alignment_claim(a["text"], a["question"]) for a in answers])
            for a, x in zip(answers, got):
                a[s] = float(x)
        for a in answers:
            a["word overlap"] = lexical_precision(a["context"], a["text"])
            a["length"] = -float(len(a["text"]))
        for a in answers if rows_out else []:
            rows_out.write(json.dumps({"run": run, **{k: v for k, v in a.items() if k != "context"}}) + "\n")
        y = np.array([a["label"] for a in answers])
        groups = [a["id"] for a in answers]
        name = run.split("+")[0].rsplit("/", 1)[-1].replace(".1.jsonl.gz", "").replace(".jsonl.gz", "")
        for form in ("all", "bare", "sentence"):
            part = [i for i, a in enumerate(answers) if form == "all" or answer_form(a["text"]) == form]
            label = name if form == "all" else f"{name}, {form} answers"
            lines.append(f"| {label} | {len(part)} ({int(y[part].sum())}) | " + " | ".join(
                cell(bootstrap_auroc(y[part], np.array([answers[i][c] for i in part], dtype=float),
                                     groups=[groups[i] for i in part])) for c in columns) + " |")
            print(lines[-1], flush=True)
        n, rates, by_sentence_score = preferred_rates(answers, "sentence score")
        kept = [by_sentence_score] + [preferred_rates(answers, s)[2] for s in supports]
        own = ", ".join(f"{m} {v:.3f}" for m, v in rates.items())
        prefer.append(f"| {name} | {n} | {own} | " + " | ".join(f"{k:.3f}" for k in kept) + " |")
        print(prefer[-1], flush=True)
    if rows_out:
        rows_out.close()
    cmd = command_line("benchmarks.verifier_conflict", argv)
    body = "\n".join([
        f"{measured_line()} Command: `{cmd}` ({time.perf_counter() - t0:.0f} s).", "",
        "Answers already decoded on knowledge-conflict QA (swapped passages), scored again without decoding. AUROC: "
        "the answer gives the passage's answer (positive) against one that does not; 95% bootstrap over questions. "
        "Every record here is outside the verifier's training ranges.", "", *lines, "",
        "Per question, the passage-answer rate of each method, and of keeping whichever stored answer a score "
        "rates highest (an offline proxy for preferring it, not a decoder):", "", *prefer])
    publish(body, args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
