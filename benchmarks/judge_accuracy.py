"""How far to trust the Table-2 judge: its ROC AUC on RAGTruth dev sentences with human span labels.

A seeded sample of sentences per task, half with an annotated unfaithful span and half without (unfaithful
sentences are rare, about 1 in 12, so a plain random sample of 20 held 3 and measured nothing). AUROC does not
depend on the class balance; accuracy is given per class (the judge's recall of faithful and of unfaithful
sentences at its 0.5 cut, the cut ``fod_table2`` counts a sentence as supported at) and as their mean, the
balanced accuracy. Sentences of one source document are resampled together in the bootstrap. The judge is asked exactly
as ``benchmarks.fod_table2`` asks it: question-aware on QA ("Question: Q /
Answer: sentence"), the sentence alone on Summary and Data2txt. Word overlap (share of the sentence's content words
in the context) stands beside it on the same sentences. Verdicts are cached in ``--judged`` (the same file format as
``fod_table2``), so reruns resume.

Usage::

    .venv/bin/python -m benchmarks.judge_accuracy --per-task 40 --judged judge_acc.jsonl
"""

from __future__ import annotations

import argparse
import random

import numpy as np

from benchmarks._common import claim_key
from benchmarks.fod_table2 import judge_dtype_name, judge_missing, read_judged
from syncheck.model.llm_judge import DEFAULT_PROMPT, JUDGE_PROMPTS


def sample_sentences(records: list, per_task: int, seed: int, skip: set | None = None) -> list[dict]:
    """``per_task`` sentences per task, half with an annotated unfaithful span, in a seeded order; ``skip`` holds
    (context, sentence) pairs left out of the pool."""
    from syncheck.featurize import alignment_claim

    rng = random.Random(seed)
    items = []
    for task in ("QA", "Summary", "Data2txt"):
        pool = []
        for r in records:
            if r.task != task:
                continue
            sents = r.sentences()
            for s, lab in zip(sents, r.sentence_labels(sents)):
                if skip and (r.context, s.text) in skip:
                    continue
                q = r.question if task == "QA" else ""
                pool.append({"task": task, "group": r.source_id, "context": r.context, "label": lab,
                             "claim": alignment_claim(s.text, q) if q else s.text, "sentence": s.text})
        rng.shuffle(pool)
        bad = [it for it in pool if not it["label"]][: per_task // 2]
        items += bad + [it for it in pool if it["label"]][: per_task - len(bad)]
    return items


def pooled_samples(records: list, per_task: int, seeds: list[int], exclude_seed: int | None = None) -> list[dict]:
    """The samples of ``seeds`` one after another, each disjoint from those before it (and from ``exclude_seed``'s
    sample, when given): ``[0, 1]`` gives seed 0's sentences, then what seed 1 samples from the rest."""
    taken: set = set()
    if exclude_seed is not None:
        taken = {(it["context"], it["sentence"]) for it in sample_sentences(records, per_task, exclude_seed)}
    items: list[dict] = []
    for seed in seeds:
        sample = sample_sentences(records, per_task, seed, skip=taken)
        taken |= {(it["context"], it["sentence"]) for it in sample}
        items += sample
    return items


def seed_list(text: str) -> list[int]:
    """``--seed``'s value: integers, comma-separated."""
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed takes integers, comma-separated (e.g. 0 or 0,1), not {text!r}")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/dev.jsonl")
    ap.add_argument("--per-task", type=int, default=40, help="sentences sampled per task, half unfaithful")
    ap.add_argument("--judge", default="llm-judge:qwen2.5-coder-1.5b")
    ap.add_argument("--judge-dtype", default="auto", help="auto: bfloat16 where native, else float32")
    ap.add_argument("--judged", required=True, help="cached verdicts (JSON lines); several, comma-separated, are all "
                    "read, and new verdicts go into the first")
    ap.add_argument("--seed", default=[0], type=seed_list,
                    help="sampling seed; several, comma-separated, pool their samples, each disjoint from the ones "
                         "before it (--seed 0,1: seed 0's sentences and --seed 1 --exclude-seed 0's)")
    ap.add_argument("--exclude-seed", type=int, default=None,
                    help="leave out the sentences that seed N samples (a disjoint sample to choose on)")
    ap.add_argument("--judge-prompt", default=DEFAULT_PROMPT, choices=sorted(JUDGE_PROMPTS),
                    help="an LLM judge's question wording (syncheck.model.llm_judge.JUDGE_PROMPTS)")
    ap.add_argument("--results-md", default=None, help="also write the table into this markdown file's --title section")
    ap.add_argument("--title", default="The judge's own accuracy", help="section heading in --results-md")
    args = ap.parse_args(argv)

    from benchmarks.ragtruth.data import read_ragtruth
    from features.alignment.lexical import lexical_precision
    from syncheck.stats import bootstrap_auroc

    records = read_ragtruth(args.ragtruth)
    seeds = args.seed
    items = pooled_samples(records, args.per_task, seeds, args.exclude_seed)
    files = args.judged.split(",")
    cache = {k: v for f in reversed(files) for k, v in read_judged(f, args.judge_dtype, args.judge_prompt).items()}
    todo = [it for it in items if claim_key(it["context"], it["claim"]) not in cache]
    if todo:
        judge_missing(args.judge, args.judge_dtype, {claim_key(it["context"], it["claim"]): (it["context"], it["claim"])
                                                     for it in todo}, files[0], cache, args.judge_prompt)
    lines: list[str] = []

    def emit(text: str) -> None:
        print(text)
        lines.append(text)

    sample = f"{len(items)} sentences, seed {','.join(map(str, seeds))}" + (
        f", none of seed {args.exclude_seed}'s" if args.exclude_seed is not None else "")
    emit(f"judge={args.judge} ({judge_dtype_name(args.judge_dtype)}, prompt {args.judge_prompt}); {sample}; "
         "label 1 = faithful (no annotated span); AUROC [95% CI, bootstrap over source documents]\n")
    emit("| task | sentences | unfaithful | judge AUROC | word overlap AUROC | faithful called supported | "
          "unfaithful called unsupported | balanced accuracy |")
    emit("| --- | --- | --- | --- | --- | --- | --- | --- |")
    summary = {}
    for task in ("QA", "Summary", "Data2txt", "all"):
        sel = [it for it in items if task == "all" or it["task"] == task]
        y = [it["label"] for it in sel]
        p = [cache[claim_key(it["context"], it["claim"])] for it in sel]
        wo = [lexical_precision(it["context"], it["sentence"]) for it in sel]
        g = [it["group"] for it in sel]
        if len(set(y)) < 2:
            continue
        j, jlo, jhi = bootstrap_auroc(y, p, groups=g, seed=seeds[0])
        w, wlo, whi = bootstrap_auroc(y, wo, groups=g, seed=seeds[0])
        tpr = float(np.mean([pi >= 0.5 for pi, yi in zip(p, y) if yi]))
        tnr = float(np.mean([pi < 0.5 for pi, yi in zip(p, y) if not yi]))
        summary[task] = {"judge": (j, jlo, jhi), "word_overlap": (w, wlo, whi), "faithful_recall": tpr,
                         "unfaithful_recall": tnr, "balanced_accuracy": (tpr + tnr) / 2, "n": len(sel)}
        emit(f"| {task} | {len(sel)} | {len(sel) - sum(y)} | {j:.3f} [{jlo:.3f}, {jhi:.3f}] | "
              f"{w:.3f} [{wlo:.3f}, {whi:.3f}] | {tpr:.3f} | {tnr:.3f} | {(tpr + tnr) / 2:.3f} |")
    if args.results_md:
        import shlex
        import sys
        from pathlib import Path

        from benchmarks.results_md import write_section

        command = "python -m benchmarks.judge_accuracy " + shlex.join(argv if argv is not None else sys.argv[1:])
        write_section(Path(args.results_md), f"## {args.title}", f"Command: `{command}`\n\n" + "\n".join(lines))
    return summary


if __name__ == "__main__":
    main()
