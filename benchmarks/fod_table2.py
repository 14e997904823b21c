"""FOD against its baselines on real RAG contexts, as the SynCheck paper's Table 2, with FOD's own ablations.

Contexts (the question and the documents only; stored answers are never read):

- RAGTruth dev, one record per source document, per task: ``QA`` (MS MARCO passages + question), ``Summary``
  (a news article; asked "Summarize the following news article."), ``Data2txt`` (a Yelp business as JSON; asked
  for an objective overview), interleaved so a partial run stays balanced;
- HaluEval QA records (the records ``benchmarks.fod_faithfulness`` uses, original contexts).

Methods: greedy, abstain, rerank, CAD, AdaCAD, FOD backtrack-only, FOD as the paper's Algorithm 1 exactly
(``fod-paper``: ``FODConfig.paper()``, its candidates at the paper's temperature 1.0 unless ``--temperature`` says
otherwise; rows stored under this name before it was exact ran the sentence cut, plain samples, beam search and no
fallback on this project's other defaults),
FOD with this project's defaults (``fod``:
greedy phases on CAD's tokens checked every few tokens, token-level backtrack, AdaCAD-steered candidates, repair
search, ``tau1`` fallback, degenerate stop), and one
ablation per change (``fod-sentence-cut``, ``fod-plain``, ``fod-prefix``, ``fod-best``, ``fod-no-degenerate``,
``fod-beam``, ``fod-no-meta``, ``fod-cad``: CAD-steered candidates, ``fod-s12``: 12 samples, ``fod-greedy-decode``:
plain greedy phases instead of CAD's tokens, ``fod-adacad-decode``: AdaCAD's tokens (alpha from the step's
divergence) instead of CAD's, ``fod-cad-decode``: CAD's tokens named explicitly (the default, kept for older runs),
``fod-t10``: candidates at the paper's temperature 1.0 instead of 0.7, ``fod-specifics``: a sentence naming what the
context lacks is flagged too, and their combinations).

Measures, per method and task, with a paired bootstrap over records for every difference from greedy:

- faithfulness: share of the answer's sentences the judge finds supported (P(supported) >= 0.5; pooled), and the
  judge's mean P(supported) (threshold-free: the judge ranks better than its 0.5 cut classifies), judged by
  ``--judge`` (an alignment scorer spec; default the Qwen2.5-Coder-1.5B yes/no judge, asked with the question on
  QA tasks); never the scorer the decoders steer by;
- unsupported specifics per answer (numbers, dates and names absent from the context): a model-free second measure;
- informativeness: distinct non-degenerate sentences per answer, and the share of answers that abstain or are
  empty (counted as 0 sentences);
- seconds per answer.

Runs resume: ``--out`` holds one JSON line per (task, record, method) answer, and ``--judged`` one per judged
claim; rerunning skips what is there. ``--report`` prints the tables from those files without generating.

Usage::

    .venv/bin/python -m benchmarks.fod_table2 --per-task 15 --out fod_smol.jsonl --judged judged.jsonl
    .venv/bin/python -m benchmarks.fod_table2 --report --out fod_smol.jsonl --judged judged.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shlex
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks._common import bootstrap_mean, bootstrap_paired_difference, claim_key
from benchmarks.run_stamp import run_stamp
from syncheck.model.llm_judge import DEFAULT_PROMPT, JUDGE_PROMPTS

TASKS = ("QA", "Summary", "Data2txt", "HaluEval-QA")
QUESTIONS = {"Summary": "Summarize the following news article.",
             "Data2txt": "Write an objective overview of the following local business, based only on the structured "
                         "data in JSON format."}
#: the FOD variants: generate() settings on top of FODGenerator's defaults, or of the settings of the FOD method a
#: ``"method"`` names (``FODConfig.for_method``)
FOD_VARIANTS = {
    "fod": {},
    "fod-bt": {"backtrack_only": True, "cut": "sentence"},
    "fod-paper": {"method": "fod-paper"},
    "fod-sentence-cut": {"cut": "sentence"},
    "fod-plain": {"steer": "none"},
    "fod-prefix": {"fallback": "prefix"},
    "fod-best": {"fallback": "best"},
    "fod-no-degenerate": {"stop_degenerate": False},
    "fod-no-meta": {"stop_degenerate": ("no_content", "repeat", "question")},
    "fod-beam": {"search": "beam"},
    "fod-cad": {"steer": "cad"},
    "fod-s12": {"num_samples": 12},
    "fod-greedy-decode": {"decode": "greedy"},
    "fod-t10": {"temperature": 1.0},
    "fod-specifics": {"flag_specifics": True},
    "fod-specifics-t10": {"flag_specifics": True, "temperature": 1.0},
    "fod-specifics-t10-greedy-decode": {"flag_specifics": True, "temperature": 1.0, "decode": "greedy"},
    "fod-cad-decode": {"decode": "cad"},
    "fod-adacad-decode": {"decode": "adacad"},
    "fod-specifics-cad-decode": {"flag_specifics": True, "decode": "cad"},
    "fod-a1": {"alpha": 1.0},
    # FOD with a support model (its generator is built with one: build(..., support=SPEC)), on CAD's tokens, ending
    # the answer before a sentence only the support model flagged that no candidate replaces (as its stored runs did;
    # "drop" acts only with unrepaired="end", pinned here whatever the default becomes)
    "fod-support": {"support_fallback": "drop", "decode": "cad", "unrepaired": "end"},
    "fod-support-keep": {"support_fallback": "keep", "decode": "cad"},  # ... keeping that sentence instead
    # ... and its greedy phases on plain greedy tokens, so an answer keeps greedy's form until a sentence is flagged
    "fod-support-keep-greedy-decode": {"support_fallback": "keep", "decode": "greedy"},
    # a flagged sentence no candidate replaces stays as decoded and decoding goes on (CAD's answer where no
    # candidate replaced a sentence), with and without the support model
    "fod-unrepaired-keep": {"unrepaired": "keep"},
    "fod-support-unrepaired-keep": {"support_fallback": "keep", "decode": "cad", "unrepaired": "keep"},
}
#: The variants whose generator reads a support model.
SUPPORTED_VARIANTS = ("fod-support", "fod-support-keep", "fod-support-keep-greedy-decode",
                      "fod-support-unrepaired-keep")
METHODS = ("greedy", "abstain", "rerank", "cad", "adacad", *FOD_VARIANTS)


def contexts(ragtruth: str, halueval: str, per_task: int, start: int = 4000,
             tasks: tuple[str, ...] = TASKS) -> list[dict]:
    """Up to ``per_task`` contexts of each of ``tasks`` (:data:`TASKS`), interleaved task by task."""
    by_task: dict[str, list[dict]] = defaultdict(list)
    seen = set()
    with open(ragtruth, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            key = (r["task_type"], r["source_id"])
            if key in seen or len(by_task[r["task_type"]]) >= per_task:
                continue
            seen.add(key)
            q = r.get("question") or QUESTIONS[r["task_type"]]
            by_task[r["task_type"]].append({"task": r["task_type"], "record": str(r["source_id"]), "question": q,
                                            "context": r["context"], "qa": r["task_type"] == "QA"})
    from benchmarks.halueval.pairs import build_pairs

    for p in build_pairs(halueval, limit=per_task * 3, start=start)[:per_task] if "HaluEval-QA" in tasks else ():
        by_task["HaluEval-QA"].append({"task": "HaluEval-QA", "record": str(p.record), "question": p.question,
                                       "context": p.context, "qa": True})
    out = []
    for i in range(per_task):
        out.extend(by_task[t][i] for t in TASKS if t in tasks and i < len(by_task[t]))
    return out


def build(scorer, methods, support: str | None = None):
    """A generator per method; the :data:`SUPPORTED_VARIANTS` share one that reads the support model ``support``
    (an alignment spec, required for them)."""
    from fod.baselines import METHODS as BASELINES
    from fod.generator import FODGenerator

    kw = {"checker": None}
    base = {m: g for m, g in BASELINES.items() if m != "fod"}
    gens = {m: base[m](scorer, **kw) for m in methods if m in base}
    if any(m in FOD_VARIANTS and m not in SUPPORTED_VARIANTS for m in methods):
        fod = FODGenerator(scorer, **kw)
        gens.update({m: fod for m in methods if m in FOD_VARIANTS and m not in SUPPORTED_VARIANTS})
    if any(m in SUPPORTED_VARIANTS for m in methods):
        if not support:
            raise SystemExit(f"{', '.join(m for m in methods if m in SUPPORTED_VARIANTS)} needs a support model: "
                             "pass --support SPEC (e.g. probe:DIR, verifier)")
        steered = FODGenerator(scorer, support=support, **kw)
        gens.update({m: steered for m in methods if m in SUPPORTED_VARIANTS})
    return gens


def generate_one(gen, method: str, ctx: dict, args):
    from fod.config import FODConfig
    from syncheck.decoding import Decoding

    texts = {"question": ctx["question"], "context": ctx["context"], "max_sentences": args.max_sentences}
    if method not in FOD_VARIANTS and method != "rerank":
        return gen.generate(**texts, decoding=Decoding(max_new_tokens=args.max_new_tokens))
    settings = {"num_samples": args.num_samples}
    if method in FOD_VARIANTS:
        settings.update(num_beams=args.num_beams, **FOD_VARIANTS[method])
    of_method = settings.pop("method", None)
    config = FODConfig.for_method(of_method) if of_method else None
    # a variant's own temperature, else the one asked for, else its settings' default (the method's own)
    temperature = (settings.pop("temperature", None) or args.temperature
                   or (config or FODConfig()).decoding_or(gen.candidate_sampling).temperature)
    sampled = Decoding(max_new_tokens=args.max_new_tokens, do_sample=True, temperature=temperature, top_p=0.95,
                       seed=args.seed)
    return gen.generate(**texts, config=config, decoding=sampled, **settings)


def _done(path: str) -> set[tuple[str, str, str]]:
    out = set()
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line of an interrupted run
                out.add((r["task"], r["record"], r["method"]))
    return out


def run_generation(args, ctxs: list[dict], methods: list[str]) -> None:
    from features.specifics import unsupported_specifics_count
    from syncheck.scorer import Scorer

    done = _done(args.out)
    todo = [(c, m) for c in ctxs for m in methods if (c["task"], c["record"], m) not in done]
    if not todo:
        return
    scorer = Scorer(args.model, dtype=args.dtype, aggregator=args.aggregator)
    gens = build(scorer, methods)
    stamp = run_stamp(args)
    from tqdm import tqdm

    with open(args.out, "a", encoding="utf-8") as out:
        for c, m in tqdm(todo, desc="answers"):
            t = time.perf_counter()
            res = generate_one(gens[m], m, c, args)
            dt = time.perf_counter() - t
            sents = [{"text": s.text, "score": s.score, "degenerate": s.degenerate,
                      "unsupported": unsupported_specifics_count(c["context"], s.text)[0]} for s in res.sentences]
            tr = res.trace
            out.write(json.dumps({
                "task": c["task"], "record": c["record"], "method": m, "model": args.model, "text": res.text,
                "sentences": sents, "seconds": dt, "abstained": bool(tr.get("abstained")) or not res.sentences,
                "backtracked": bool(tr.get("backtrack")) if m in FOD_VARIANTS else None,
                "repairs": tr.get("repairs"), "stop": tr.get("stop"),
                "steps": [{"cut": s.get("cut"), "chosen_by": s.get("chosen_by")} for s in tr.get("steps", [])],
                "run": stamp,
            }, ensure_ascii=False) + "\n")
            out.flush()


def make_judge(spec: str, dtype: str | None, prompt: str = DEFAULT_PROMPT):
    """The judge's alignment scorer; an LLM judge is loaded in ``dtype`` and asks with the prompt named ``prompt``."""
    from features.alignment import parse_alignment_spec
    from syncheck.alignment import make_alignment_scorer

    llm = parse_alignment_spec(spec)[0] == "llm-judge"
    kwargs = (({"dtype": dtype} if dtype else {}) | {"prompt": prompt}) if llm else {}
    return make_alignment_scorer(spec, **kwargs)


def run_judge(args, ctxs: list[dict]) -> dict[str, float]:
    """Judge every distinct (context, claim) of the answers; cached in ``--judged``."""
    from syncheck.featurize import alignment_claim

    cache = read_judged(args.judged, args.judge_dtype, args.judge_prompt)
    by_id = {(c["task"], c["record"]): c for c in ctxs}
    todo: dict[str, tuple[str, str]] = {}
    for r in read_rows(args.out):
        c = by_id.get((r["task"], r["record"]))
        if c is None:
            continue
        for s in r["sentences"]:
            claim = alignment_claim(s["text"], c["question"]) if c["qa"] else s["text"]
            k = claim_key(c["context"], claim)
            if k not in cache:
                todo[k] = (c["context"], claim)
    if todo and not args.report:
        judge_missing(args.judge, args.judge_dtype, todo, args.judged, cache, args.judge_prompt)
    return cache


def judge_dtype_name(dtype: str | None) -> str:
    """The dtype an LLM judge loads in, by name (``"auto"`` resolved for this machine)."""
    from syncheck.model.models import model_dtype

    return str(model_dtype(dtype or "float32")).removeprefix("torch.")


def read_judged(path: str, dtype: str | None = None, prompt: str = DEFAULT_PROMPT) -> dict[str, float]:
    """The verdicts a ``--judged`` file holds, by claim key (empty when the file does not exist yet).

    With ``dtype`` (a judge dtype name, ``"auto"`` resolved), a verdict recorded in another dtype is left out, so it is
    judged again; verdicts written before the dtype was recorded carry none and are kept (the file's name says it).
    Only verdicts asked with the judge prompt named ``prompt`` count; a verdict that names none was asked with the
    default prompt.
    """
    if not os.path.exists(path):
        return {}
    want = judge_dtype_name(dtype) if dtype is not None else None
    return {r["key"]: r["p"] for r in read_rows(path)
            if (want is None or r.get("dtype", want) == want) and r.get("prompt", DEFAULT_PROMPT) == prompt}


def judge_missing(spec: str, dtype: str | None, todo: dict[str, tuple[str, str]], path: str,
                  cache: dict[str, float], prompt: str = DEFAULT_PROMPT) -> None:
    """Judge ``todo`` (key -> (context, claim)) with the judge prompt named ``prompt``, one context's claims per call
    (an LLM judge then reads each context once); each verdict goes into ``cache`` and is appended to ``path`` as it
    comes."""
    from tqdm import tqdm

    by_context: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for k, (ctx, claim) in todo.items():
        by_context[ctx].append((k, claim))
    judge = make_judge(spec, dtype, prompt)
    name = judge_dtype_name(dtype)
    stamp = run_stamp({"judge": spec, "judge_dtype": name, "judge_prompt": prompt})
    with open(path, "a", encoding="utf-8") as out, tqdm(total=len(todo), desc="judge") as bar:
        for ctx, items in by_context.items():
            ps = judge.score([ctx] * len(items), [claim for _, claim in items])
            for (k, _), p in zip(items, ps):
                cache[k] = float(p)
                row = {"key": k, "p": float(p), "dtype": name}
                row |= {"prompt": prompt} if prompt != DEFAULT_PROMPT else {}
                out.write(json.dumps(row | {"run": stamp}) + "\n")
            out.flush()
            bar.update(len(items))


def read_rows(path: str) -> list[dict]:
    """The rows of a run file, gzipped or not (none when it does not exist; a torn last line of an interrupted run is
    skipped)."""
    rows = []
    if not path or not os.path.exists(path):
        return rows
    with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return rows


def report(args, ctxs: list[dict], methods: list[str], judged: dict[str, float],
           lines: list[str] | None = None) -> dict:
    """Print the tables (and append them to ``lines``); return the figures by (task, method)."""

    def emit(text: str) -> None:
        print(text)
        if lines is not None:
            lines.append(text)

    from syncheck.featurize import alignment_claim

    rows = {(r["task"], r["record"], r["method"]): r for r in read_rows(args.out)}
    summary = {}
    for task in (*TASKS, "all"):
        tasks = TASKS if task == "all" else (task,)
        # records every method answered and every sentence judged (a paired comparison needs the same records)
        recs = [c for c in ctxs if c["task"] in tasks and all((c["task"], c["record"], m) in rows for m in methods)]
        per: dict[str, dict[str, list]] = {m: defaultdict(list) for m in methods}
        usable, judged_records = [], 0
        for c in recs:
            # the judged share needs every sentence of every method judged; the model-free measures need nothing
            verdicts = {}
            for m in methods:
                r = rows[(c["task"], c["record"], m)]
                claims = [alignment_claim(s["text"], c["question"]) if c["qa"] else s["text"] for s in r["sentences"]]
                keys = [claim_key(c["context"], cl) for cl in claims]
                verdicts[m] = [judged[k] for k in keys] if all(k in judged for k in keys) else None
            all_judged = all(v is not None for v in verdicts.values())
            judged_records += all_judged
            usable.append(c)
            for m in methods:
                r, d = rows[(c["task"], c["record"], m)], per[m]
                # the informative sentences: distinct (first occurrence) and not degenerate
                first: dict[str, int] = {}
                for i, s in enumerate(r["sentences"]):
                    if not s.get("degenerate"):
                        first.setdefault(s["text"].strip().lower(), i)
                distinct = set(first)
                if all_judged:
                    d["supported"].append([float(p >= 0.5) for p in verdicts[m]])
                    d["supported_informative"].append([float(verdicts[m][i] >= 0.5) for i in sorted(first.values())])
                    d["judge_p"].append(list(verdicts[m]))
                d["informative"].append([0.0 if r["abstained"] else float(len(distinct))])
                d["abstained"].append([float(r["abstained"])])
                d["specifics"].append([float(sum(s["unsupported"] for s in r["sentences"]))])
                d["seconds"].append([r["seconds"]])
                if r.get("backtracked") is not None:
                    d["backtracked"].append([float(r["backtracked"])])
        if not usable:
            continue
        emit(f"\n### {task} ({len(usable)} records; judged: {judged_records})\n")
        emit("| method | faithful sentences [95% CI] | vs greedy, paired [95% CI] | faithful informative sentences "
             "| vs greedy | judge P(supported), mean | vs greedy | unsupported specifics / answer | vs greedy "
             "| informative sentences / answer | vs greedy | abstained | backtracked | s / answer |")
        emit("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        g = per["greedy"]
        for m in methods:
            d = per[m]
            f, lo, hi = bootstrap_mean(d["supported"], seed=args.seed) if d["supported"] else (float("nan"),) * 3
            row = {"faithful": f, "ci": [lo, hi], "records": len(usable), "judged_records": judged_records}
            cells = []
            fi = (bootstrap_mean(d["supported_informative"], seed=args.seed)[0] if d["supported_informative"]
                  else float("nan"))
            jp = bootstrap_mean(d["judge_p"], seed=args.seed)[0] if d["judge_p"] else float("nan")
            for name in ("supported", "supported_informative", "judge_p", "specifics", "informative"):
                if m == "greedy" or not d[name]:
                    cells.append("-")
                    continue
                diff, dlo, dhi = bootstrap_paired_difference(g[name], d[name], seed=args.seed)
                cells.append(f"{diff:+.3f} [{dlo:+.3f}, {dhi:+.3f}]")
                row[f"{name}_vs_greedy"] = [diff, dlo, dhi]
            spec = float(np.mean([v[0] for v in d["specifics"]]))
            inf = float(np.mean([v[0] for v in d["informative"]]))
            ab = float(np.mean([v[0] for v in d["abstained"]]))
            bt = f"{np.mean([v[0] for v in d['backtracked']]):.2f}" if d["backtracked"] else "-"
            sec = float(np.mean([v[0] for v in d["seconds"]]))
            row.update(specifics=spec, informative=inf, abstained=ab, seconds=sec)
            row["faithful_informative"], row["judge_p"] = fi, jp
            summary[(task, m)] = row
            emit(f"| {m} | {f:.3f} [{lo:.3f}, {hi:.3f}] | {cells[0]} | {fi:.3f} | {cells[1]} | {jp:.3f} | {cells[2]} "
                 f"| {spec:.2f} | {cells[3]} | {inf:.2f} | {cells[4]} | {ab:.2f} | {bt} | {sec:.1f} |")
    return summary


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/dev.jsonl")
    ap.add_argument("--halueval", default="../shared/data/halueval")
    ap.add_argument("--per-task", type=int, default=15, help="contexts per task (4 tasks)")
    ap.add_argument("--tasks", default=",".join(TASKS),
                    help="which tasks' contexts, comma-separated (e.g. QA,Summary,Data2txt with --ragtruth "
                         "dev_extra.jsonl: contexts the default aggregator never trained on)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default=None, help="e.g. bfloat16 for Qwen")
    ap.add_argument("--aggregator", default="default", help="the scorer's aggregator (default: resolved for the model)")
    ap.add_argument("--judge", default="llm-judge:qwen2.5-coder-1.5b", help="alignment scorer spec of the judge")
    ap.add_argument("--judge-prompt", default=DEFAULT_PROMPT, choices=sorted(JUDGE_PROMPTS),
                    help="an LLM judge's question wording (syncheck.model.llm_judge.JUDGE_PROMPTS)")
    ap.add_argument("--judge-dtype", default="auto",
                    help="dtype of an LLM judge (auto: bfloat16 where the hardware has it natively, else float32)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--max-sentences", type=int, default=4)
    ap.add_argument("--num-samples", type=int, default=6)
    ap.add_argument("--num-beams", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=None,
                    help="the candidates' temperature (default: each method's own: FOD 0.7, reranking 1.0)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", required=True, help="answers, one JSON line per (task, record, method); resumed")
    ap.add_argument("--judged", required=True, help="judge verdicts, one JSON line per claim; resumed")
    ap.add_argument("--no-judge", action="store_true", help="generate only")
    ap.add_argument("--report", action="store_true", help="print the tables from --out and --judged, nothing else")
    ap.add_argument("--results-md", default=None,
                    help="also write the tables into this markdown file's --title section")
    ap.add_argument("--title", default=None,
                    help="section heading in --results-md (default: the model and record count)")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown or "greedy" not in methods:
        raise SystemExit(f"unknown methods {sorted(unknown)} (choose from {METHODS}; greedy is required)")
    tasks = tuple(x for x in args.tasks.split(",") if x)
    if not tasks or set(tasks) - set(TASKS):
        raise SystemExit(f"--tasks {args.tasks!r}: choose from {','.join(TASKS)}")
    ctxs = contexts(args.ragtruth, args.halueval, args.per_task, tasks=tasks)
    t0 = time.perf_counter()
    if not args.report:
        Path(args.out).touch()
        run_generation(args, ctxs, methods)
    if args.no_judge:
        return {}
    judged = run_judge(args, ctxs)
    answered = [r for r in read_rows(args.out) if r["method"] in methods and (r["task"], r["record"]) in
                {(c["task"], c["record"]) for c in ctxs}]
    header = (f"model={args.model} judge={args.judge} ({judge_dtype_name(args.judge_dtype)}, "
              f"prompt {args.judge_prompt}, question-aware on QA tasks) "
              f"max_new_tokens={args.max_new_tokens} max_sentences={args.max_sentences} S={args.num_samples} "
              f"K={args.num_beams} T={args.temperature} cpu={platform.machine()} "
              f"generation={sum(r['seconds'] for r in answered) / 60:.1f} min over {len(answered)} answers "
              f"(resumed runs add up) this run={(time.perf_counter() - t0) / 60:.1f} min")
    print(header)
    lines = [f"`{header}`"]
    summary = report(args, ctxs, methods, judged, lines)
    if args.results_md:
        from benchmarks.results_md import write_section

        title = args.title or f"{args.model}: {len(ctxs)} contexts, {len(methods)} methods"
        command = "python -m benchmarks.fod_table2 " + shlex.join(argv if argv is not None else sys.argv[1:])
        write_section(Path(args.results_md), f"## {title}", f"Command: `{command}`\n\n" + "\n".join(lines))
    return summary


if __name__ == "__main__":
    main()
