"""Steering measured without a judge: knowledge-conflict QA, where only the passage gives the right answer.

The set (:mod:`syncheck.training.conflict_set`) swaps each HaluEval QA answer in its passage for another record's answer
of the same kind. ``--typing ner`` types names by what they are (spaCy's NER), so a person replaces a person; the
default, ``wh``, types them by the question's wh-word, as every run before it did, which lets absurd swaps through
(``benchmarks.studies.conflict_coherence`` counts them). ``--source xquad`` builds the set the same way from
XQuAD's English Wikipedia paragraphs (:mod:`syncheck.training.conflict_halves`): ``--half selection`` to choose
settings on, ``--half test`` to confirm them; the halves split the articles, a substitute comes from another article
of the same half, and ``--start`` counts the half's questions (``--source covid_qa``: COVID-QA's articles, the same
way). Per method and condition, each answer is read by string match (:func:`contains_answer`):

- ``swapped`` (the conflict): *faithful* = the answer gives the substitute (the passage's answer); *memory* = it
  gives the original answer; *neither*; *abstained* (FOD's abstention, or the abstention baseline refusing);
- ``original`` (the no-conflict control, the same records unswapped): *accuracy* = the answer gives the right answer.
  Steering must not break answers that were already right.

``abstain`` is not decoded: it is greedy's answer, refused when a sentence scores below ``tau1`` (exactly what
:class:`fod.baselines.AbstainGenerator` does), read from greedy's rows. Every difference from greedy comes with a
paired bootstrap 95% interval over records. FOD's replacements are counted: how many candidates were skipped as
non-answers, and how many chosen ones are questions or chit-chat (:func:`features.degeneracy.degeneracy`).

Runs resume: ``--out`` holds one JSON line per (condition, record, method); rerunning skips what is there.
``--report`` prints the tables from that file, and ``--write-results`` also writes them into RESULTS.md.

Usage::

    .venv/bin/python -m benchmarks.conflict_qa --start 6000 --limit 300 --out benchmarks/runs/conflict_smollm2.jsonl
    .venv/bin/python -m benchmarks.conflict_qa --start 6000 --limit 300 --out benchmarks/runs/conflict_smollm2.jsonl \\
        --report --write-results

On XQuAD's test half, every question it keeps::

    .venv/bin/python -m benchmarks.conflict_qa --source xquad --half test --start 0 --limit 300 \\
        --out benchmarks/runs/conflict_xquad_test_smollm2.jsonl

On 2 cores, two shards with one thread each finish sooner (seconds per answer are then those of one thread)::

    for k in 1 2; do OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.conflict_qa --shard $k/2 \\
        --out benchmarks/runs/conflict_smollm2.$k.jsonl & done; wait
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from benchmarks._common import bootstrap_paired_difference, interval
from benchmarks.fod_table2 import FOD_VARIANTS, SUPPORTED_VARIANTS, build, generate_one, read_rows
from benchmarks.results_md import measured_line, write_section
from benchmarks.run_stamp import run_stamp
from syncheck.training.conflict_halves import HALVES, QA_FILES, build_half_set, qa_file_path
from syncheck.training.conflict_set import (
    ConflictItem,
    Typer,
    build_conflict_set,
    contains_answer,
    kinds_summary,
    ner_typer,
)

SECTION = "## FOD on knowledge-conflict QA"
#: Each source's RESULTS.md section (the half is named after it).
SECTIONS = {"halueval": SECTION, "xquad": "## FOD on knowledge-conflict QA over Wikipedia paragraphs (XQuAD)",
            "covid_qa": "## FOD on knowledge-conflict QA over COVID-QA articles"}
CONDITIONS = ("swapped", "original")
DEFAULT_METHODS = ("greedy", "cad", "adacad", "fod")
DEFAULT_CONTROL = ("greedy", "cad", "adacad", "fod")
DEFAULT_DATA_DIR = "../shared/data/halueval"
#: Where each source's files are read from by default.
DATA_DIRS = {"halueval": DEFAULT_DATA_DIR, **{source: "../shared/data/qa" for source in QA_FILES}}
SOURCE_NAMES = {"halueval": "HaluEval QA", "xquad": "XQuAD's English Wikipedia paragraphs (SQuAD v1.1 dev)",
                "covid_qa": "COVID-QA's articles"}
#: derived from greedy's rows, never decoded
DERIVED = ("abstain",)


def conflict_typer(typing: str, spacy_model: str) -> Typer | None:
    """The typer of a conflict set's names: ``None`` for ``"wh"`` (the question's wh-word), spaCy's NER for
    ``"ner"``; a missing spaCy or pipeline ends the run with how to install it."""
    if typing == "wh":
        return None
    try:
        return ner_typer(spacy_model)
    except (ImportError, OSError) as exc:
        raise SystemExit(str(exc)) from None


def conflict_source(data_dir: str, config: dict) -> tuple[list[ConflictItem], str]:
    """The conflict set of a run's options (``source`` and ``half``, ``start``, ``limit``, ``seed``, and ``typing``
    with ``spacy_model``; runs written before ``typing`` existed were typed by wh-word, before ``source``, on
    HaluEval), and the words that say where it comes from."""
    typer = conflict_typer(config.get("typing", "wh"), config.get("spacy_model", "en_core_web_sm"))
    source, seed = config.get("source", "halueval"), config.get("seed", 0)
    if source == "halueval":
        items = build_conflict_set(data_dir, config["start"], config["limit"], seed, typer=typer)
        return items, f"HaluEval QA records {config['start']} on"
    half = build_half_set(qa_file_path(data_dir, source), config["half"], config["start"], config["limit"], seed,
                          typer)
    drops = "; ".join(f"{n} {why}" for why, n in sorted(half.drops.items()))
    return half.items, (f"the {config['half']} half of {SOURCE_NAMES[source]}, its questions {config['start']} on "
                        f"(the half keeps {half.kept} of its {half.records} questions; left out: {drops})")


def conflict_items(data_dir: str, config: dict) -> list[ConflictItem]:
    """The conflict set of a run's options (:func:`conflict_source`)."""
    return conflict_source(data_dir, config)[0]


def run_rows(paths: str) -> list[dict]:
    """The rows of one run file, or of several (comma-separated: the shards of one run)."""
    return [r for path in paths.split(",") if path for r in read_rows(path)]


def _done(path: str) -> set[tuple[str, str, str]]:
    out = set()
    for r in run_rows(path):
        out.add((r["condition"], r["id"], r["method"]))
    return out


def _replacements(trace: dict) -> list[dict]:
    """FOD's chosen replacements and the candidates it skipped, from its trace."""
    out = []
    for step in trace.get("steps", []):
        chosen = step.get("chosen")
        cands = step.get("candidates", [])
        out.append({"cut": step.get("cut"), "chosen_by": step.get("chosen_by"),
                    "chosen": cands[chosen]["text"] if chosen is not None and chosen < len(cands) else None,
                    "chosen_degenerate": cands[chosen].get("degenerate") if chosen is not None and chosen < len(cands)
                    else None,
                    "candidates": [{"text": c["text"], "score": c["score"], "degenerate": c.get("degenerate"),
                                    "pruned": c.get("pruned")} for c in cands]})
    return out


def run(args, items: list[ConflictItem], plan: list[tuple[str, str]]) -> None:
    """Decode every (condition, method) of ``plan`` for every item not already in ``args.out``."""
    from syncheck.scorer import Scorer

    done = _done(args.out)
    todo = [(it, cond, m) for it in items for cond, m in plan if (cond, it.id, m) not in done]
    if not todo:
        return
    scorer = Scorer(args.model, dtype=args.dtype, aggregator=args.aggregator)
    gens = build(scorer, sorted({m for _, m in plan}), support=args.support)
    from syncheck.aggregators.thresholds import resolve_threshold

    tau1 = resolve_threshold(scorer, "tau1", args.tau1)[0]
    stamp = run_stamp(args)
    from tqdm import tqdm

    with open(args.out, "a", encoding="utf-8") as out:
        for it, cond, m in tqdm(todo, desc="answers"):
            ctx = {"question": it.question, "context": it.context if cond == "swapped" else it.original_context}
            t = time.perf_counter()
            try:
                res, error = generate_one(gens[m], m, ctx, args), None
            except Exception as exc:  # one failed answer must not end the run: it is counted as an error
                res, error = None, f"{type(exc).__name__}: {exc}"
            dt = time.perf_counter() - t
            row = {"condition": cond, "id": it.id, "method": m, "model": args.model, "seconds": dt, "error": error,
                   "substitute": it.substitute, "original": it.original, "kind": it.kind, "tau1": tau1}
            if res is not None:
                tr = res.trace
                row.update({"text": res.text, "abstained": bool(tr.get("abstained")) or not res.sentences,
                            "sentences": [{"text": s.text, "score": s.score, "degenerate": s.degenerate}
                                          for s in res.sentences],
                            "stop": tr.get("stop"), "repairs": tr.get("repairs"),
                            "backtracks": tr.get("backtracks"), "replacements": _replacements(tr),
                            "skipped_non_answers": tr.get("skipped_non_answers")})
            row["run"] = stamp
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()


def judged(row: dict, tau1: float | None = None) -> dict[str, float]:
    """One answer's outcome: faithful / memory / neither / abstained (swapped) or accurate (original)."""
    text = row.get("text") or ""
    abstained = bool(row.get("abstained")) or row.get("error") is not None
    if tau1 is not None and not abstained:  # the abstention baseline, read from greedy's sentences
        abstained = any(s["score"] is not None and s["score"] < tau1 for s in row.get("sentences", []))
    sub = not abstained and contains_answer(text, row["substitute"])
    orig = not abstained and contains_answer(text, row["original"])
    if row["condition"] == "original":
        return {"accurate": float(orig), "abstained": float(abstained), "seconds": row["seconds"]}
    return {"faithful": float(sub), "memory": float(orig), "neither": float(not (sub or orig or abstained)),
            "abstained": float(abstained), "seconds": row["seconds"]}


def outcomes(rows: list[dict], ids: list[str], tau1: float | None) -> dict[tuple[str, str], dict[str, dict]]:
    """``{(condition, method): {id: outcome}}`` for the items ``ids``, with ``abstain`` derived from greedy."""
    wanted = set(ids)
    out: dict[tuple[str, str], dict[str, dict]] = {}
    for r in rows:
        if r["id"] not in wanted:
            continue
        out.setdefault((r["condition"], r["method"]), {})[r["id"]] = judged(r)
        if r["method"] == "greedy" and tau1 is not None:
            out.setdefault((r["condition"], "abstain"), {})[r["id"]] = judged(r, tau1)
    return out


def table(res: dict, condition: str, methods: list[str], measures: list[str]) -> list[str]:
    """A markdown table: each measure's share per method, and its paired difference from greedy."""
    base = res.get((condition, "greedy"), {})
    lines = ["| method | n | " + " | ".join(measures) + " | s / answer | "
             + " | ".join(f"{m} - greedy [95% CI]" for m in measures[:2]) + " |",
             "| --- " * (3 + len(measures) + len(measures[:2])) + "|"]
    for m in methods:
        got = res.get((condition, m))
        if not got:
            continue
        ids = [i for i in got if i in base] if m != "greedy" else list(got)
        n = len(got)
        shares = [sum(got[i][k] for i in got) / n for k in measures]
        secs = sum(got[i]["seconds"] for i in got) / n
        diffs = []
        for k in measures[:2]:
            if m == "greedy" or not ids:
                diffs.append("")
                continue
            d = bootstrap_paired_difference([[base[i][k]] for i in ids], [[got[i][k]] for i in ids], n=2000)
            diffs.append(interval(d, 3, signed=True))
        speed = "" if m == "abstain" else f"{secs:.2f}"
        lines.append(f"| {m} | {n} | " + " | ".join(f"{v:.3f}" for v in shares) + f" | {speed} | "
                     + " | ".join(diffs) + " |")
    return lines


def replacement_counts(rows: list[dict], ids: set[str]) -> tuple[int, int, int]:
    """(replacements chosen, of them questions or chit-chat, non-answer candidates skipped) over FOD's rows."""
    chosen = bad = skipped = 0
    for r in rows:
        if r["id"] not in ids or r["method"] not in FOD_VARIANTS or r.get("error"):
            continue
        skipped += int(r.get("skipped_non_answers") or 0)
        for rep in r.get("replacements") or []:
            if rep["chosen"] is not None:
                chosen += 1
                bad += rep.get("chosen_degenerate") in ("asks", "off_topic", "question")
    return chosen, bad, skipped


#: Why FOD did not give the passage's answer, in the order they are tested (:func:`failure_class`).
FAILURES = ("never flagged", "cut in the wrong place", "flagged, no candidate cleared tau2",
            "a candidate cleared tau2, still wrong")


def failure_class(row: dict) -> str:
    """Why one of FOD's answers on the conflict does not give the substitute.

    - *never flagged*: no sentence was flagged, so the greedy answer stands;
    - *cut in the wrong place*: the original answer (or no answer) sits before the first cut, in text that was
      kept: the sentence that went wrong passed, and a later one was flagged;
    - *flagged, no candidate cleared tau2*: every candidate was pruned (the fallback, or the prefix, was kept);
    - *a candidate cleared tau2, still wrong*: a replacement was chosen on its score and does not give it.
    """
    backtracks = row.get("backtracks") or []
    if not backtracks:
        return FAILURES[0]
    kept = (row.get("text") or "")[: backtracks[0]["char"]]
    if kept.strip() and (contains_answer(kept, row["original"]) or backtracks[0]["sentence_index"] > 0):
        return FAILURES[1]
    if not any(r.get("chosen_by") == "tau2" for r in row.get("replacements") or []):
        return FAILURES[2]
    return FAILURES[3]


def failure_table(rows: list[dict], ids: set[str], methods: list[str]) -> list[str]:
    """How many of each FOD variant's answers on the conflict miss the substitute, by :func:`failure_class`."""
    lines = ["| method | missed | " + " | ".join(FAILURES) + " |", "| --- " * (2 + len(FAILURES)) + "|"]
    for m in methods:
        missed = [r for r in rows if r["method"] == m and r["condition"] == "swapped" and r["id"] in ids
                  and not r.get("error") and not judged(r)["faithful"]]
        if m not in FOD_VARIANTS or not missed:
            continue
        counts = [sum(failure_class(r) == f for r in missed) for f in FAILURES]
        lines.append(f"| {m} | {len(missed)} | " + " | ".join(str(c) for c in counts) + " |")
    return lines


def changes_from_greedy(rows: list[dict], ids: set[str], methods: list[str]) -> list[str]:
    """Where each method's faithful share differs from greedy's, answer by answer: the questions it gains (greedy
    misses the passage's answer, it gives it) and loses, and for FOD how many of each came with a backtrack (a repair)
    rather than from the first decode alone (with a contrast ``decode``, that pass already differs from greedy)."""
    by_key = {(r["id"], r["method"]): r for r in rows
              if r["condition"] == "swapped" and r["id"] in ids and not r.get("error")}
    lines = ["| method | gains | of them with a repair | losses | of them with a repair | net |",
             "| --- | --- | --- | --- | --- | --- |"]
    for m in methods:
        if m in ("greedy", "abstain"):
            continue
        pairs = [(by_key[(i, "greedy")], r) for (i, method), r in by_key.items()
                 if method == m and (i, "greedy") in by_key]
        if not pairs:
            continue
        won = [r for g, r in pairs if judged(r)["faithful"] > judged(g)["faithful"]]
        lost = [r for g, r in pairs if judged(r)["faithful"] < judged(g)["faithful"]]
        fod = m in FOD_VARIANTS

        def repaired(rs: list[dict]) -> str:
            return str(sum(bool(r.get("backtracks")) for r in rs)) if fod else ""
        lines.append(f"| {m} | {len(won)} | {repaired(won)} | {len(lost)} | {repaired(lost)} | "
                     f"{len(won) - len(lost):+d} of {len(pairs)} |")
    return lines


def abstentions_beside_cad(rows: list[dict], ids: set[str]) -> list[str]:
    """For each FOD variant, its abstentions on the conflict beside CAD's answer to the same question: how many CAD
    answered with a bare entity (at most three words) and how many CAD answered with the passage's answer."""
    by_key = {(r["id"], r["method"]): r for r in rows if r["condition"] == "swapped" and not r.get("error")}
    lines = []
    for m in dict.fromkeys(r["method"] for r in rows):
        if m not in FOD_VARIANTS:
            continue
        cads = [by_key.get((i, "cad")) for (i, method), r in by_key.items()
                if method == m and i in ids and r.get("abstained")]
        if cads and all(cads):
            bare = sum(len((c.get("text") or "").split()) <= 3 for c in cads)
            faithful = int(sum(judged(c)["faithful"] for c in cads))
            lines.append(f"`{m}` abstained on {len(cads)} questions; there CAD answered with at most three words in "
                         f"{bare}, and with the passage's answer in {faithful}.")
    return lines


def against(res: dict, methods: list[str], base: str) -> list[str]:
    """Each FOD variant's faithful share against ``base``'s on the questions both answered, paired, with the answers
    it gains (``base`` misses the passage's answer, the variant gives it) and loses; none without a ``base`` run.
    Against CAD, whose tokens FOD's greedy phases take, it is the gain the repairs add; against ``fod``, what a
    variant adds to FOD's defaults."""
    ref = res.get(("swapped", base), {})
    lines = []
    for m in methods:
        got = res.get(("swapped", m), {})
        ids = [i for i in got if i in ref]
        if m in FOD_VARIANTS and m != base and ids:
            d = bootstrap_paired_difference([[ref[i]["faithful"]] for i in ids], [[got[i]["faithful"]] for i in ids],
                                            n=2000)
            gained = sum(got[i]["faithful"] > ref[i]["faithful"] for i in ids)
            lost = sum(got[i]["faithful"] < ref[i]["faithful"] for i in ids)
            lines.append(f"`{m}` − `{base}`, faithful, paired over {len(ids)} questions: "
                         f"{interval(d, 3, signed=True)}; {gained} gained, {lost} lost.")
    return lines


def report(args, items: list[ConflictItem], origin: str | None = None) -> str:
    rows = [r for r in run_rows(args.out) if r.get("model", args.model) == args.model]
    tau1 = _tau1(rows, args.tau1)
    ids = [it.id for it in items]
    res = outcomes(rows, ids, tau1)
    methods = [m for m in ["greedy", "abstain", *[m for m in args.methods if m != "greedy"],
                           *[m for m in args.ablations if m not in args.methods]] if (("swapped", m) in res)]
    methods = list(dict.fromkeys(methods))
    control = [m for m in dict.fromkeys(["greedy", "abstain", *args.control]) if ("original", m) in res]
    chosen, bad, skipped = replacement_counts([r for r in rows if r["condition"] == "swapped"], set(ids))
    lines = [
        f"{len(items)} knowledge-conflict questions from {origin or f'HaluEval QA records {args.start} on'} "
        f"({', '.join(f'{k} {v}' for k, v in kinds_summary(items).items())}); generator `{args.model}`, "
        f"shipped aggregator, candidates sampled at "
        f"{'temperature ' + str(args.temperature) if args.temperature else 'each method' + chr(39) + 's own temperature'} "  # noqa: E501
        f"(seed {args.seed}), at most {args.max_new_tokens} new tokens. {measured_line()}",
        "",
        "```bash",
        _command(args),
        "```",
        "",
        *([data_dir_line(args.source), ""] if args.data_dir != DATA_DIRS[args.source] else []),
        "### The conflict: the passage's answer against the model's memory",
        "",
        "faithful = the answer gives the passage's (swapped) answer; memory = it gives the original answer. "
        f"`abstain` is greedy refusing below tau1 = {tau1}. Differences paired over records.",
        "",
        *table(res, "swapped", methods, ["faithful", "memory", "neither", "abstained"]),
        *(["", *beside] if (beside := against(res, methods, "cad") + against(res, methods, "fod")) else []),
        "",
        f"FOD's replacements in this table: {chosen} chosen, {bad} of them a question, an echo of the question or "
        f"off the subject; {skipped} candidates skipped as non-answers.",
        "",
        "Why FOD's answers miss the passage's answer (`benchmarks.conflict_qa.failure_class`):",
        "",
        *failure_table(rows, set(ids), methods),
    ]
    lines += ["", "Answers each method changes from greedy's verdict (gains: greedy misses the passage's answer and "
              "the method gives it; losses: the reverse):", "", *changes_from_greedy(rows, set(ids), methods)]
    beside_cad = abstentions_beside_cad(rows, set(ids))
    if beside_cad:
        lines += ["", *beside_cad]
    if args.fluency_model:
        lines += ["", *fluency_lines(args, rows, items, "swapped", methods)]
    if control:
        lines += ["", "### The no-conflict control: the same records unswapped", "",
                  f"accurate = the answer gives {'HaluEval' if args.source == 'halueval' else 'the dataset'}'s right "
                  "answer, which the passage holds.", "",
                  *table(res, "original", control, ["accurate", "abstained"])]
        if args.fluency_model:
            lines += ["", *fluency_lines(args, rows, items, "original", control)]
    return "\n".join(lines)


def fluency_lines(args, rows: list[dict], items: list[ConflictItem], condition: str, methods: list[str]) -> list[str]:
    """Each method's answers' perplexity under ``--fluency-model`` (:mod:`benchmarks.answer_fluency`), given the
    passage the decoder read."""
    from benchmarks import answer_fluency

    if args.fluency_model == args.model:
        raise SystemExit(f"--fluency-model must differ from the decoder ({args.model}): a model finds its own greedy "
                         "text likely by construction. Use qwen2.5-coder-1.5b for smollm2-135m's answers, and back.")
    prompts = {(c, it.id): answer_fluency.PROMPT.format(
        context=it.context if c == "swapped" else it.original_context, question=it.question)
        for it in items for c in CONDITIONS}
    wanted = {it.id for it in items}
    rows = [r for r in rows if r["id"] in wanted and r["condition"] == condition and r["method"] in methods]
    lm = answer_fluency.scoring_model(args.fluency_model, args.fluency_dtype or "float32")
    cache = args.fluency_cache or answer_fluency.cache_path(args.out.split(",")[0])
    scores = answer_fluency.score_answers(lm, args.fluency_model, rows, prompts, cache=cache)
    decoded = [m for m in methods if m != "abstain"]
    return [f"Fluency: each answer's perplexity under `{args.fluency_model}` (which did not decode them), given the "
            "passage and the question (`benchmarks.answer_fluency`); pooled over a method's answers, abstentions "
            "left out, and its ratio to greedy's on the questions both answered.", "",
            *answer_fluency.fluency_table(rows, scores, args.fluency_model, condition, decoded), "",
            "The same ratio within one answer form (bare: at most "
            f"{answer_fluency.BARE_WORDS} words), since a bare name's tokens are less predictable than a sentence "
            "that copies the passage:", "",
            *answer_fluency.fluency_by_form_table(rows, scores, args.fluency_model, condition, decoded)]


def _tau1(rows: list[dict], given: float | None) -> float | None:
    """The abstention threshold: the one given, else the tuned ``tau1`` the run recorded."""
    if given is not None:
        return given
    return next((r["tau1"] for r in rows if r.get("tau1") is not None), None)


def _command(args) -> str:
    source = getattr(args, "source", "halueval")
    parts = ["--source", source, "--half", args.half] if source != "halueval" else []
    parts += ["--start", str(args.start), "--limit", str(args.limit),
             "--model", args.model, "--max-new-tokens", str(args.max_new_tokens), "--out", args.out]
    if args.data_dir != DATA_DIRS[source]:  # a machine's path: the line under the command says what DIR holds
        parts += ["--data-dir", "DIR"]
    if list(args.methods) != list(DEFAULT_METHODS):
        parts += ["--methods", ",".join(args.methods)]
    if list(args.control) != list(DEFAULT_CONTROL):
        parts += ["--control", ",".join(args.control)]
    if args.ablations:
        parts += ["--ablations", ",".join(args.ablations)]
    if args.shard != "1/1" or "," in args.out:
        parts += ["--shard", "K/N"]
    if args.title:
        parts += ["--title", args.title]
    if args.dtype:
        parts += ["--dtype", args.dtype]
    if args.seed != 0:  # the substitutes and the sampled candidates differ
        parts += ["--seed", str(args.seed)]
    if args.typing != "wh":  # the set itself differs: the command must rebuild it
        parts += ["--typing", args.typing, "--spacy-model", args.spacy_model]
    if set(SUPPORTED_VARIANTS) & {*args.methods, *args.control, *args.ablations}:
        parts += ["--support", args.support]
    if args.fluency_model:
        parts += ["--fluency-model", args.fluency_model] + (["--fluency-dtype", args.fluency_dtype]
                                                            if args.fluency_dtype else [])
    return ".venv/bin/python -m benchmarks.conflict_qa " + " ".join(shlex.quote(p) for p in parts)


def data_dir_line(source: str) -> str:
    """What the printed command's ``DIR`` holds."""
    if source == "halueval":
        return ("`DIR` holds HaluEval's full files (`python -m benchmarks.halueval.full DIR`), whose records 8000-9999 "
                "the shared first 8,000 lack.")
    return f"`DIR` holds `{QA_FILES[source]}`, as `../shared/data/qa` does."


def section_title(args) -> str:
    """The RESULTS.md section of a run: its source's (the half named), then the generator."""
    half = f", {args.half} half" if args.source != "halueval" else ""
    return f"{SECTIONS[args.source]}{half} ({args.model})"


def _methods(text: str) -> list[str]:
    from benchmarks.fod_table2 import METHODS

    names = [m for m in text.split(",") if m]
    bad = [m for m in names if m not in METHODS or m in DERIVED]
    if bad:
        raise SystemExit(f"unknown method(s) {bad}: choose from {[m for m in METHODS if m not in DERIVED]} "
                         "(abstain is read from greedy's answers)")
    return names


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", choices=tuple(DATA_DIRS), default="halueval",
                    help="the QA records swapped: HaluEval QA, XQuAD's Wikipedia paragraphs, COVID-QA's articles")
    ap.add_argument("--half", choices=HALVES, default=None,
                    help="with --source xquad or covid_qa (required): selection, to choose settings on, or test, to "
                         "confirm them (split by article)")
    ap.add_argument("--data-dir", default=None, help="the HaluEval directory (holds qa.jsonl), or with --source xquad "
                    "or covid_qa the shared QA directory (default: the source's under ../shared/data)")
    ap.add_argument("--start", type=int, default=None, help="first HaluEval QA record read (default 6000), or the "
                    "first question of the half (default 0)")
    ap.add_argument("--limit", type=int, default=300, help="conflict questions (fixed before the run)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the substitutes and of the sampled candidates")
    ap.add_argument("--typing", choices=("wh", "ner"), default="wh",
                    help="how names find their substitute: wh = by the question's wh-word and word count (lets absurd "
                         "swaps through); ner = by what they are, by spaCy's NER (needs spaCy and --spacy-model)")
    ap.add_argument("--spacy-model", default="en_core_web_sm", help="the spaCy pipeline of --typing ner")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default=None, help="model dtype (e.g. bfloat16 for Qwen2.5-Coder-1.5B)")
    ap.add_argument("--aggregator", default="default")
    ap.add_argument("--methods", type=_methods, default=list(DEFAULT_METHODS), help="comma-separated, on the conflict")
    ap.add_argument("--control", type=_methods, default=list(DEFAULT_CONTROL), help="comma-separated, unswapped")
    ap.add_argument("--ablations", type=_methods, default=[], help="more methods on the conflict (FOD's ablations)")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="answers are short: the answer is in the first "
                    "sentence or nowhere")
    ap.add_argument("--max-sentences", type=int, default=8)
    ap.add_argument("--num-samples", type=int, default=6)
    ap.add_argument("--num-beams", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=None,
                    help="the candidates' temperature (default: each method's own: FOD 0.7, reranking 1.0)")
    ap.add_argument("--tau1", type=float, default=None, help="the abstention baseline's threshold (default: tuned)")
    ap.add_argument("--support", default=None,
                    help="the support model of the fod-support methods (an alignment spec, e.g. reader, probe:DIR)")
    ap.add_argument("--out", required=True,
                    help="JSON lines, one per answer (resumed); for --report, several files comma-separated")
    ap.add_argument("--shard", default="1/1",
                    help="K/N: decode only every N-th question from the K-th (run N processes, each with its own --out "
                         "and OMP_NUM_THREADS=1, then --report with the N files)")
    ap.add_argument("--fluency-model", default=None,
                    help="also give each method's answer perplexity under this model, which must not be the decoder "
                         "(benchmarks.answer_fluency)")
    ap.add_argument("--fluency-dtype", default=None, help="the fluency model's dtype (default float32)")
    ap.add_argument("--fluency-cache", default=None,
                    help="JSONL of fluency scores, reused by later reports (default: beside the first --out file)")
    ap.add_argument("--report", action="store_true", help="only print the tables from --out")
    ap.add_argument("--write-results", action="store_true", help="also write the tables into benchmarks/RESULTS.md")
    ap.add_argument("--title", default=None, help="the RESULTS.md section (default: 'FOD on knowledge-conflict QA "
                    "(MODEL)', for XQuAD '... over Wikipedia paragraphs (XQuAD), HALF half (MODEL)')")
    args = ap.parse_args(argv)
    if (args.source == "halueval") != (args.half is None):
        ap.error("--half goes with --source xquad or covid_qa, and they need it: --half selection to choose settings "
                 "on, --half test to confirm them" if args.half is None else "--half needs --source xquad or covid_qa")
    args.data_dir = args.data_dir or DATA_DIRS[args.source]
    args.start = (6000 if args.source == "halueval" else 0) if args.start is None else args.start
    items, origin = conflict_source(args.data_dir, vars(args))
    if len(items) < args.limit:
        print(f"note: only {len(items)} conflict questions from record {args.start} on", file=sys.stderr)
    if not args.report:
        k, n = (int(v) for v in args.shard.split("/"))
        if not 1 <= k <= n or "," in args.out:
            raise SystemExit("--shard K/N needs 1 <= K <= N, and one --out file per shard")
        plan = [("swapped", m) for m in dict.fromkeys([*args.methods, *args.ablations])]
        plan += [("original", m) for m in args.control]
        run(args, items[k - 1 :: n], plan)
    text = report(args, items, origin)
    print(text)
    if args.write_results:
        title = f"## {args.title}" if args.title else section_title(args)
        write_section(Path(__file__).with_name("RESULTS.md"), title, text)
    return text


if __name__ == "__main__":
    main()
