"""``syncheck check`` (Provenance) with each support backend, on HaluEval records the verifier never saw.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.verifier_check --nli verifier,syncheck \\
        --results-md benchmarks/RESULTS.md

Every row is :class:`syncheck.checking.provenance.ProvenanceChecker` with ``syncheck check``'s defaults (BM25
relevance, every chunk joined into one premise, ``--task auto``) and only the support backend changed. Sets, fixed
before the verifier's first training run and inside its held-out ranges (:mod:`syncheck.training.sources`):

- QA distractor pairs from records 2000-2149 ("The answer is X." with the right answer or another span of the
  passage of its shape; the 224 answers of the earlier Provenance figures);
- dialogue records 5000-5149 and summarization records 5000-5099 (right and hallucinated responses).

The same shapes on later records check a choice once: ``--fresh`` (2500 / 5500 / 5500) checked the choice of the
default support made on the sets above, ``--confirm`` (3600 / 5850 / 5600) a choice made on the fresh sets,
``--recheck`` (3750 / 6000 / 5700) one made on the confirmation sets, ``--final`` (3900 / 6150 / 5800) one made on
the recheck sets: the last QA records of the held-out ranges that no figure had been taken on, 100 of them;
``--holdout`` (5550 / 6300 / 5900) a choice made on the first sets above, for the span reader in the support (QA
records between the knowledge-conflict runs, which no figure had used); ``--reserve`` (6400 / 6450 / 6000) the span
reader's gate to answers of one sentence (the last QA records no figure or conflict run had used); ``--unread``
(8300 / 8000 / 8300) records only HaluEval's full files hold (``python -m benchmarks.halueval.full DIR``);
``--latest`` the span reader's gate to bare answers that name the passage, on QA distractor pairs 8450-8599 and on
HaluEval QA's own right and hallucinated answers (as given) of records 8600-8749, the ``qa`` set; ``--further`` (pairs
8750-8899, qa 8900-9049) the reader's weight in the mean (``--means syncheck+verifier+reader@0.2``: a member's share
after ``@``, the others sharing the rest), chosen on the ``--latest`` sets; ``--beyond`` (pairs 9050-9199, qa
9200-9349) that weighted mean as the default, read against a margin on the ``qa`` set fixed before the reading;
``--onward`` (pairs 9650-9799, qa 9800-9949, dialogue 6900-7049, summarization 6500-6599) the defaults again once
the shipped verifier changed.
``--ragtruth-tasks QA,Summary,Data2txt`` adds every RAGTruth response of those tasks (sets ``ragtruth-qa``,
``ragtruth-summary``, ``ragtruth-data2txt``), and ``--nli crossfit:DIR`` checks each of them with the fold verifier of
:mod:`benchmarks.verifier_crossfit` that never trained on it: the check with a verifier trained on RAGTruth, read out
of fold. A mean that is the default support with only its verifier swapped reads summaries with that verifier alone,
as the check would with it shipped.
``--sets`` keeps some of them. Backends scored in separate runs join row by row: ``--from-rows A.jsonl,B.jsonl``.

AUROC (faithful = positive) with 95% bootstrap intervals over records, beside response length (shorter = faithful)
and word overlap on the same rows, and each backend's paired difference against word overlap.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Iterator

import numpy as np

from benchmarks.fod_table2 import read_rows
from benchmarks.halueval.pairs import answer_sentence, build_pairs
from benchmarks.ragtruth.data import TASKS
from benchmarks.results_md import command_line, measured_line, publish
from features.alignment.lexical import lexical_precision
from syncheck.checking.provenance import DEFAULT_NLI, ProvenanceChecker, default_summary_nli, same_support_spec
from syncheck.checking.support import mean_members, mean_of_supports, member_weights
from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference
from syncheck.training.sources import HALUEVAL_FIELDS, halueval_records

SECTION = "## Provenance with the verifier, on records it never saw"
#: ``(set, first record, records)``, fixed before the verifier was trained.
SETS = (("pairs", 2000, 150), ("dialogue", 5000, 150), ("summarization", 5000, 100))
#: The same shapes on records no figure has been taken on, for a check made once, after a choice made on :data:`SETS`.
FRESH_SETS = (("pairs", 2500, 150), ("dialogue", 5500, 150), ("summarization", 5500, 100))
#: The same shapes again on records no figure has been taken on, for a check of a choice made on :data:`FRESH_SETS`.
CONFIRM_SETS = (("pairs", 3600, 150), ("dialogue", 5850, 150), ("summarization", 5600, 100))
#: And again, for a choice made on :data:`CONFIRM_SETS`.
RECHECK_SETS = (("pairs", 3750, 150), ("dialogue", 6000, 150), ("summarization", 5700, 100))
#: And again, for a choice made on :data:`RECHECK_SETS` (QA: the 100 records 3900-3999, the last no figure had used).
FINAL_SETS = (("pairs", 3900, 100), ("dialogue", 6150, 150), ("summarization", 5800, 100))
#: And again, for the span reader in the support (QA 5550-5699: no conflict run reached past 5201 or began before 6700).
HOLDOUT_SETS = (("pairs", 5550, 150), ("dialogue", 6300, 150), ("summarization", 5900, 100))
#: And again, for the span reader checking one-sentence answers only (QA 6400-6549: past every conflict run's records).
RESERVE_SETS = (("pairs", 6400, 150), ("dialogue", 6450, 150), ("summarization", 6000, 100))
#: And again on records only HaluEval's full files hold (``python -m benchmarks.halueval.full DIR``, then
#: ``--halueval DIR``): QA past the conflict questions of records 8003-8283, summarization past 8000-8299.
UNREAD_SETS = (("pairs", 8300, 150), ("dialogue", 8000, 150), ("summarization", 8300, 100))
#: And again on full-file records no figure had read, for the span reader's gate to bare answers (QA only: dialogue and
#: summaries do not reach the reader), with HaluEval QA's own answers beside the pairs.
LATEST_SETS = (("pairs", 8450, 150), ("qa", 8600, 150))
#: And again, for the span reader's weight in the mean, chosen on :data:`LATEST_SETS`.
FURTHER_SETS = (("pairs", 8750, 150), ("qa", 8900, 150))
#: And again, for the reader's weighted mean as the default under a margin on HaluEval QA fixed before the reading.
BEYOND_SETS = (("pairs", 9050, 150), ("qa", 9200, 150))
#: And again, every shape, for the check's defaults once the shipped verifier changed (nothing had read these records).
ONWARD_SETS = (("pairs", 9650, 150), ("qa", 9800, 150), ("dialogue", 6900, 150), ("summarization", 6500, 100))


#: The later record sets by their option, with the suffix of their RESULTS section's title.
LATER_SETS = {"fresh": (FRESH_SETS, ", fresh records"), "confirm": (CONFIRM_SETS, ", confirmation records"),
              "recheck": (RECHECK_SETS, ", recheck records"), "final": (FINAL_SETS, ", final records"),
              "holdout": (HOLDOUT_SETS, ", holdout records"), "reserve": (RESERVE_SETS, ", reserve records"),
              "unread": (UNREAD_SETS, ", records past 8000"), "latest": (LATEST_SETS, ", records past 8450"),
              "further": (FURTHER_SETS, ", records past 8750"), "beyond": (BEYOND_SETS, ", records past 9050"),
              "onward": (ONWARD_SETS, ", records past 9650")}
#: Every set's name.
SET_NAMES = ("pairs", "qa", "dialogue", "summarization")
#: What ``--reader-every-answer`` adds to a span reader's column name, so its rows join beside the gated reader's.
EVERY_ANSWER = "-every-answer"


def record_sets(args: argparse.Namespace) -> tuple[tuple[tuple[str, int, int], ...], str]:
    """The sets the options name (:data:`SETS` unless one of :data:`LATER_SETS`) and their section title's suffix."""
    return next((LATER_SETS[k] for k in LATER_SETS if getattr(args, k, False)), (SETS, ""))


def described(sets: tuple[tuple[str, int, int], ...]) -> str:
    """``"pairs 2500-2649, dialogue ..."``: each set's first and last record."""
    return ", ".join(f"{name} {start}-{start + n - 1}" for name, start, n in sets)


def chosen_sets(args: argparse.Namespace) -> list[tuple[str, int, int | None]]:
    """``(set, first record, records)`` of the sets the options name; a RAGTruth task of ``--ragtruth-tasks`` holds
    every response of its task (``None`` records)."""
    sets = record_sets(args)[0]
    wanted = [s.strip() for s in args.sets.split(",") if s.strip()] if args.sets else [s[0] for s in sets]
    skip = getattr(args, "ragtruth_qa_skip", 0)
    ragtruth = [("ragtruth-qa", skip, args.ragtruth_qa)] if getattr(args, "ragtruth_qa", 0) else []
    tasks = [t.strip() for t in (getattr(args, "ragtruth_tasks", None) or "").split(",") if t.strip()]
    ragtruth += [(ragtruth_set(t), 0, None) for t in tasks if ragtruth_set(t) in wanted or not args.sets]
    return [s for s in sets if s[0] in wanted] + ragtruth


def set_label(name: str, start: int, limit: int | None) -> str:
    return f"{name} (every response)" if limit is None else f"{name} (records {start}-{start + limit - 1})"


def ragtruth_examples(paths: str, limit: int | None, skip: int = 0, task: str = "QA",
                      ids: list[str] | None = None) -> list[tuple[str, str | None, str, str, int]]:
    """``(group, question, context, answer, label)`` of ``limit`` (``None``: every) RAGTruth ``task`` responses after
    the first ``skip``, the files ``paths`` (comma-separated) read in turn, grouped by source document; label 1 = no
    annotated hallucination. ``ids``, when given, receives each row's response id (which a cross-fit's folds key)."""
    from benchmarks.ragtruth.data import read_ragtruth

    files = [p.strip() for p in paths.split(",") if p.strip()]
    missing = [p for p in files if not Path(p).is_file()] if files else ["(no file given)"]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not found: pass --ragtruth PATH/TO/ragtruth/dev.jsonl "
                                "(RAGTruth JSON lines, several comma-separated)")
    rows = [r for p in files for r in read_ragtruth(p, tasks=[task], limit=None)]
    rows = rows[skip:] if limit is None else rows[skip:skip + limit]
    if ids is not None:
        ids.extend(r.id for r in rows)
    return [(f"ragtruth-{r.source_id}", r.question, r.context, r.response, r.label) for r in rows]


def ragtruth_set(task: str) -> str:
    """The set name of a RAGTruth task's responses: ``ragtruth-qa``, ``ragtruth-summary``, ``ragtruth-data2txt``."""
    return f"ragtruth-{task.lower()}"


def summary_reader(mean: str) -> str | None:
    """The member that checks summaries under the support ``mean``: the check's own (the shipped verifier) where
    ``mean`` is the default support; the swapped member where it is the default with only its verifier member swapped
    for another verifier (``verifier:PATH``, ``crossfit:DIR``), as the check would read summaries with that verifier
    shipped; else ``None`` (the mean reads summaries itself)."""
    alone = default_summary_nli(mean)
    if alone:
        return alone
    members = mean_members(mean)
    swapped = [name for name, _ in members if name.startswith(("verifier:", "crossfit:"))]
    as_default = "+".join(("verifier" if name in swapped else name) + ("" if w is None else f"@{w}")
                          for name, w in members)
    return swapped[0] if len(swapped) == 1 and same_support_spec(as_default, DEFAULT_NLI) else None


class FoldCheckers:
    """``syncheck check`` with a cross-fitted verifier (``crossfit:DIR``, :mod:`benchmarks.verifier_crossfit`): each
    RAGTruth response checked with the fold verifier that never trained on it, everything else as the check does."""

    def __init__(self, spec: str, dtype: str | None = None):
        from benchmarks.ragtruth.alignment_feature import fold_dir, read_folds

        self.out = Path(spec.split(":", 1)[1])
        self.fold_of = read_folds(self.out)["fold_of"]
        self.checkers = {k: ProvenanceChecker(nli=f"verifier:{fold_dir(self.out, k)}", dtype=dtype)
                         for k in sorted(set(self.fold_of.values()))}

    def check_all(self, rows: list[tuple[str, str | None, str, str, int]], ids: list[str]) -> list:
        """The check's result for each row, by the fold of its response id in ``ids``.

        Raises:
            SystemExit: a row with no response id (not a RAGTruth set) or in none of the folds.
        """
        if len(ids) != len(rows) or any(i not in self.fold_of for i in ids):
            raise SystemExit(f"a cross-fitted verifier checks only the RAGTruth responses its folds were dealt from "
                             f"({self.out}): pass --ragtruth-tasks with the same --ragtruth files, and --sets of "
                             "those tasks only")
        return [self.checkers[self.fold_of[i]].check(question=q, context=c, answer=a)
                for (_, q, c, a, _), i in zip(rows, ids)]


def require_records(data_dir: str, name: str, end: int) -> None:
    """Raise ``SystemExit`` (saying where the full files come from) when ``name``'s file holds fewer than ``end``
    records."""
    path = Path(data_dir) / HALUEVAL_FIELDS["qa" if name == "pairs" else name][0]
    if not path.exists():
        raise SystemExit(f"{path} not found: pass --halueval, the HaluEval directory that holds it")
    with open(path, encoding="utf-8") as f:
        have = sum(1 for _ in f)
    if have < end:
        raise SystemExit(f"{path} holds {have} records and these sets read up to record {end - 1}: write HaluEval's "
                         "full files with `python -m benchmarks.halueval.full DIR` and pass --halueval DIR")


def examples(data_dir: str, name: str, start: int, limit: int) -> list[tuple[str, str | None, str, str, int]]:
    """``(group, question, context, answer, label)`` rows of one set."""
    require_records(data_dir, name, start + limit)
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


def joined_rows(paths: list[str]) -> list[dict]:
    """The rows of several ``--rows-out`` files, joined row by row within each set: each file adds its backends'
    columns. A file may leave out whole sets (a backend scored on some sets only); the sets it holds must hold the
    same answers in the same order as every other file's."""
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not found: pass the files --rows-out wrote")
    files = [read_rows(p) for p in paths]
    sets = list(dict.fromkeys(r["set"] for f in files for r in f))
    joined = []
    for name in sets:
        parts = [[r for r in f if r["set"] == name] for f in files]
        parts = [p for p in parts if p]
        if len({len(p) for p in parts}) > 1:
            raise ValueError(f"{', '.join(paths)} hold {[len(p) for p in parts]} rows of {name}: score the same "
                             "sets in each")
        for rows in zip(*parts):
            if len({(r["set"], r["group"], r["label"], r["length"]) for r in rows}) > 1:
                raise ValueError(f"{', '.join(paths)} differ at a row of {rows[0]['group']}: score the same sets in "
                                 "each")
            joined.append({k: v for r in rows for k, v in r.items()})
    return joined


def scored_sets(args: argparse.Namespace, backends: list[str]) -> Iterator[tuple[str, dict]]:
    """``(set label, columns)`` per set: ``label``, ``group``, ``overlap``, ``length`` and one column per backend,
    scored now (and written to ``--rows-out``) or read back from ``--from-rows``."""
    if args.from_rows:
        rows = joined_rows(args.from_rows.split(","))
        for name, start, limit in chosen_sets(args):
            part = [r for r in rows if r["set"] == name]
            if part:
                yield set_label(name, start, limit), {k: [r[k] for r in part] for k in part[0]}
        return
    checkers = {b: FoldCheckers(b, args.dtype) if b.startswith("crossfit:")
                else ProvenanceChecker(nli=b.removesuffix(EVERY_ANSWER), dtype=args.dtype) for b in backends}
    rows_out = open(args.rows_out, "w", encoding="utf-8") if args.rows_out else None
    tasks = {ragtruth_set(t): t for t in TASKS}
    for name, start, limit in chosen_sets(args):
        ids: list[str] = []
        rows = (ragtruth_examples(args.ragtruth, limit, start, tasks[name], ids) if name in tasks
                else examples(args.halueval, name, start, limit))
        columns: dict = {"set": [name] * len(rows), "group": [r[0] for r in rows], "label": [r[4] for r in rows],
                         "overlap": [lexical_precision(r[2], r[3]) for r in rows], "length": [len(r[3]) for r in rows]}
        for b, checker in checkers.items():
            results = (checker.check_all(rows, ids) if isinstance(checker, FoldCheckers)
                       else [checker.check(question=q, context=c, answer=a) for _, q, c, a, _ in rows])
            errors = [r.error for r in results if r.error]
            if errors:
                raise RuntimeError(f"{b} on {name}: {len(errors)} rows failed, e.g. {errors[0]}")
            columns[b] = [r.factuality for r in results]
        if rows_out:
            for i in range(len(rows)):
                rows_out.write(json.dumps({k: v[i] for k, v in columns.items()}) + "\n")
            rows_out.flush()
        yield set_label(name, start, limit), columns
    if rows_out:
        rows_out.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--halueval", default="../shared/data/halueval")
    ap.add_argument("--nli", default="verifier,syncheck", help="support backends, comma-separated")
    ap.add_argument("--means", default="",
                    help="also the mean of backends' supports, e.g. syncheck+verifier (comma-separated; each member "
                         "one of --nli); equal to --nli A+B with the joined premise, without scoring again")
    which = ap.add_mutually_exclusive_group()
    for option, (sets, title) in LATER_SETS.items():
        which.add_argument(f"--{option}", action="store_true", help=f"the {title[2:].replace(' records', '')} sets "
                           f"({described(sets)})")
    ap.add_argument("--sets", default=None,
                    help="only these sets, comma-separated (pairs, qa, dialogue, summarization)")
    ap.add_argument("--compare", default="",
                    help="paired differences between two columns, A~B (comma-separated; each one of --nli or "
                         "--means), beside each mean against its members")
    ap.add_argument("--dtype", default=None,
                    help="the backends' model dtype, e.g. bfloat16 (default: each one's own; a probe's is its head's)")
    ap.add_argument("--rows-out", default=None, help="also write each answer's label and supports to this JSONL")
    ap.add_argument("--from-rows", default=None,
                    help="read the supports --rows-out wrote instead of scoring (several files, comma-separated, are "
                         "joined row by row: each adds its backends)")
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/dev.jsonl",
                    help="RAGTruth as JSON lines (several files comma-separated, read in turn)")
    ap.add_argument("--ragtruth-qa", type=int, default=0, metavar="N",
                    help="also N RAGTruth QA responses (label: no annotated hallucination), after the sets")
    ap.add_argument("--ragtruth-qa-skip", type=int, default=0, metavar="K",
                    help="leave out the first K QA responses (of the --ragtruth files read in turn)")
    ap.add_argument("--ragtruth-tasks", default=None, metavar="TASKS",
                    help="also every response of these RAGTruth tasks (comma-separated: QA, Summary, Data2txt), as "
                         "sets ragtruth-qa, ragtruth-summary, ragtruth-data2txt; a crossfit:DIR backend (the fold "
                         "verifiers of benchmarks.verifier_crossfit) reads only these")
    ap.add_argument("--reader-every-answer", action="store_true",
                    help="the span reader checks every one-sentence answer, not only bare answers that name the "
                         "passage (as the check read them before that gate); its column is reader-every-answer, for "
                         "--means and for joining with a gated reader's rows by --from-rows")
    ap.add_argument("--results-md", default=None, help="write the section into this file (benchmarks/RESULTS.md)")
    args = ap.parse_args(argv)
    if args.reader_every_answer:
        from features.alignment.span_reader import SpanReaderScorer

        SpanReaderScorer.bare_answers_only = False
    tasks = {t.strip() for t in (args.ragtruth_tasks or "").split(",") if t.strip()}
    if tasks - set(TASKS):
        ap.error(f"--ragtruth-tasks: unknown {sorted(tasks - set(TASKS))}; choose from {', '.join(TASKS)}")
    if args.ragtruth_qa and "QA" in tasks:
        ap.error("--ragtruth-tasks QA reads every QA response: leave out --ragtruth-qa N, or QA from the tasks")
    unknown = set((args.sets or "").replace(" ", "").split(",")) - {
        "", "ragtruth-qa", *SET_NAMES, *(ragtruth_set(t) for t in TASKS)}
    if args.ragtruth_qa_skip and not args.ragtruth_qa:
        ap.error("--ragtruth-qa-skip K goes with --ragtruth-qa N: add the number of QA responses to read after the "
                 "first K")
    if args.ragtruth_qa_skip < 0 or args.ragtruth_qa < 0:
        ap.error("--ragtruth-qa and --ragtruth-qa-skip count responses: give numbers >= 0")
    if unknown:
        ap.error(f"--sets: unknown {sorted(unknown)}; choose from {', '.join(SET_NAMES)}, "
                 "ragtruth-qa (with --ragtruth-qa N), ragtruth-TASK (with --ragtruth-tasks)")
    t0 = time.perf_counter()
    backends = [b.strip() for b in args.nli.split(",") if b.strip()]
    if args.reader_every_answer:  # the reader's column is named apart: reader-every-answer
        backends = [b + EVERY_ANSWER if b.partition(":")[0] == "reader" else b for b in backends]
    means = [m.strip() for m in args.means.split(",") if m.strip()]
    for m in means:
        if any(name not in backends for name, _ in mean_members(m)):
            ap.error(f"--means {m}: every member must be one of --nli {args.nli}")
    columns = backends + means
    compare = [tuple(c.strip().split("~")) for c in args.compare.split(",") if c.strip()]
    for pair in compare:
        if len(pair) != 2 or any(c not in columns for c in pair):
            ap.error(f"--compare {'~'.join(pair)}: give A~B, each one of --nli or --means")
    lines = ["| set | answers | " + " | ".join(f"`--nli {b}`" for b in columns)
             + " | word overlap | length (shorter = faithful) | " + " | ".join(f"{b} − word overlap" for b in columns)
             + " |", "|" + " --- |" * (4 + 2 * len(columns))]
    paired: list[str] = []  # each mean against each of its members, paired over the same answers
    unscored: list[str] = []
    read_alone: list[str] = []  # means that read a set as the check reads it, not as the mean of their members
    for label, col in scored_sets(args, backends):
        y, groups = np.array(col["label"]), col["group"]
        overlap, length = np.array(col["overlap"]), -np.array(col["length"], dtype=float)
        # a backend scored on some sets only (joined from another run) has no column on the others
        scores = {b: np.array(col[b], dtype=float) for b in backends if b in col}
        summaries = col["set"][0] in ("summarization", ragtruth_set("Summary"))
        for m in means:
            parts = mean_members(m)
            alone = summary_reader(m) if summaries else None
            if alone:  # the check reads summaries under this support with another one, not the mean of its members
                if alone in scores:
                    scores[m] = scores[alone]
                    read_alone.append(f"- {label}: `{m}` is the check's default support, which checks summaries "
                                      f"with `{alone}` alone: its column is that one's")
            elif all(part in scores for part, _ in parts):
                scores[m] = mean_of_supports([scores[part] for part, _ in parts],
                                             member_weights([w for _, w in parts]))
        for b, s in scores.items():  # no score (the reader on an answer read as a summary): no opinion, 0.5
            if np.isnan(s).any():
                unscored.append(f"- {label}: `{b}` gave no score to {int(np.isnan(s).sum())} answers; they count as "
                                "0.5 in its column")
                scores[b] = np.where(np.isnan(s), 0.5, s)

        def auc(b: str) -> str:
            return cell(bootstrap_auroc(y, scores[b], groups=groups)) if b in scores else "not scored"

        def diff(a: str, b: np.ndarray | str) -> str | None:
            other = scores.get(b) if isinstance(b, str) else b
            if a not in scores or other is None:
                return None
            return cell(bootstrap_auroc_difference(y, scores[a], other, groups=groups), True)

        lines.append(" | ".join([f"| {label}", str(len(y))] + [auc(b) for b in columns]
                                + [cell(bootstrap_auroc(y, overlap, groups=groups)),
                                   cell(bootstrap_auroc(y, length, groups=groups))]
                                + [diff(b, overlap) or "not scored" for b in columns]) + " |")
        print(lines[-1], flush=True)
        pairs = [(m, name) for m in means for name, _ in mean_members(m)] + compare
        paired += [f"- {label}: {a} − {b} {d}" for a, b in pairs if (d := diff(a, b)) is not None]
    cmd = command_line("benchmarks.verifier_check", argv)
    body = "\n".join([f"{measured_line()} Command: `{cmd}` ({time.perf_counter() - t0:.0f} s).", "",
                      "`syncheck check` defaults, only the support backend changed. AUROC, faithful = positive, 95% "
                      "bootstrap over records. Every record here is outside the verifier's training ranges.", "",
                      *lines, *(["", *read_alone, *unscored] if read_alone or unscored else []),
                      *(["", "Paired differences (95% bootstrap over records):", *paired] if paired else [])])
    publish(body, args.results_md, SECTION + record_sets(args)[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
