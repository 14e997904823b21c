"""``syncheck check`` (Provenance) with each support backend, on HaluEval records the verifier never saw.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.verifier_check --nli verifier,syncheck \\
        --results-md benchmarks/RESULTS.md

Every row is :class:`syncheck.checking.provenance.ProvenanceChecker` with ``syncheck check``'s defaults (BM25
relevance, every chunk joined into one premise, ``--task auto``) and only the support backend changed. Sets, fixed
before the verifier's first training run and inside its held-out ranges (:mod:`syncheck.verifier.sources`):

- QA distractor pairs from records 2000-2149 ("The answer is X." with the right answer or another span of the
  passage of its shape; the 224 answers of the earlier Provenance figures);
- dialogue records 5000-5149 and summarization records 5000-5099 (right and hallucinated responses).

AUROC (faithful = positive) with 95% bootstrap intervals over records, beside response length (shorter = faithful)
and word overlap on the same rows, and each backend's paired difference against word overlap.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from benchmarks.halueval.pairs import answer_sentence, build_pairs
from benchmarks.provenance_offline import publish
from benchmarks.results_md import measured_line
from features.alignment.lexical import lexical_precision
from syncheck.checking.provenance import ProvenanceChecker
from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference
from syncheck.verifier.sources import HALUEVAL_FIELDS, halueval_records

SECTION = "## Provenance with the verifier, on records it never saw"
#: ``(set, first record, records)``, fixed before the verifier was trained.
SETS = (("pairs", 2000, 150), ("dialogue", 5000, 150), ("summarization", 5000, 100))


def examples(data_dir: str, name: str, start: int, limit: int) -> list[tuple[str, str | None, str, str, int]]:
    """``(group, question, context, answer, label)`` rows of one set."""
    if name == "pairs":
        return [(f"pairs-{p.record}", p.question, p.context, answer_sentence(e), label)
                for p in build_pairs(data_dir, limit=limit, start=start)
                for e, label in ((p.answer, 1), (p.distractor, 0))]
    _, ctx_f, q_f, good_f, bad_f = HALUEVAL_FIELDS[name]
    return [(f"{name}-{i}", row[q_f] if q_f else None, row[ctx_f], row[f], label)
            for i, row in halueval_records(data_dir, name, [(start, start + limit)])
            for f, label in ((good_f, 1), (bad_f, 0))]


def cell(auc: tuple[float, float, float], signed: bool = False) -> str:
    return ("{:+.3f} [{:+.3f}, {:+.3f}]" if signed else "{:.3f} [{:.3f}, {:.3f}]").format(*auc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--halueval", default="../shared/data/halueval")
    ap.add_argument("--nli", default="verifier,syncheck", help="support backends, comma-separated")
    ap.add_argument("--results-md", default=None, help="write the section into this file (benchmarks/RESULTS.md)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    backends = [b.strip() for b in args.nli.split(",") if b.strip()]
    checkers = {b: ProvenanceChecker(nli=b) for b in backends}
    lines = ["| set | answers | " + " | ".join(f"`--nli {b}`" for b in backends)
             + " | word overlap | length (shorter = faithful) | " + " | ".join(f"{b} − word overlap" for b in backends)
             + " |", "|" + " --- |" * (4 + 2 * len(backends))]
    for name, start, limit in SETS:
        rows = examples(args.halueval, name, start, limit)
        y = np.array([r[4] for r in rows])
        groups = [r[0] for r in rows]
        overlap = np.array([lexical_precision(r[2], r[3]) for r in rows])
        length = -np.array([len(r[3]) for r in rows], dtype=float)
        scores = {}
        for b, checker in checkers.items():
            results = [checker.check(question=q, context=c, answer=a) for _, q, c, a, _ in rows]
            errors = [r.error for r in results if r.error]
            if errors:
                raise RuntimeError(f"{b} on {name}: {len(errors)} rows failed, e.g. {errors[0]}")
            scores[b] = np.array([r.factuality for r in results])
        lines.append(" | ".join([f"| {name} (records {start}-{start + limit - 1})", str(len(rows))]
                                + [cell(bootstrap_auroc(y, scores[b], groups=groups)) for b in backends]
                                + [cell(bootstrap_auroc(y, overlap, groups=groups)),
                                   cell(bootstrap_auroc(y, length, groups=groups))]
                                + [cell(bootstrap_auroc_difference(y, scores[b], overlap, groups=groups), True)
                                   for b in backends]) + " |")
        print(lines[-1], flush=True)
    cmd = "python -m benchmarks.verifier_check " + " ".join(sys.argv[1:] if argv is None else argv)
    body = "\n".join([f"{measured_line()} Command: `{cmd}` ({time.perf_counter() - t0:.0f} s).", "",
                      "`syncheck check` defaults, only the support backend changed. AUROC, faithful = positive, 95% "
                      "bootstrap over records. Every record here is outside the verifier's training ranges.", "",
                      *lines])
    publish(body, args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
