"""Faithfulness and informativeness of the decoding methods (as the SynCheck paper's Table 2).

Data: HaluEval QA records whose right answer occurs in the knowledge text
(the records of :func:`benchmarks.halueval.pairs.build_pairs`), in two settings:

- ``original``: the knowledge text as it is;
- ``counterfactual``: every occurrence of the right answer in the knowledge is
  replaced by the right answer of another record with the same shape (a year
  for a year, a name for a name; as the paper's F-100-anti swaps entities), so
  a model that answers from memory is unfaithful. ``entity`` = share of answers
  that carry the context's (new) entity; ``memory`` = share that carry the
  original one.

Methods: greedy, abstention (threshold tau1), reranking (S samples), CAD
(alpha 0.5), FOD backtrack-only, FOD full (S 6, K 2: the paper's settings;
tau1/tau2 default to the values tuned for the aggregator, see
:mod:`syncheck.aggregators.thresholds`; the paper's are 0.7/0.85), and, when
``--methods`` names it, ``fod-paper``: FOD as the paper's Algorithm 1
(``FODConfig.paper()``). Faithfulness = share of generated sentences the judge
(an alignment scorer, ``--judge``) finds supported by the context (score >= 0.5),
pooled over the answers, with a 95% bootstrap interval over records;
informativeness = sentences per answer and the abstention rate.

Usage::

    .venv/bin/python -m benchmarks.fod_faithfulness --data-dir PATH/TO/halueval --limit 20
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from collections import defaultdict

import numpy as np
import torch

from benchmarks._common import bootstrap_mean, bootstrap_paired_difference
from benchmarks.run_stamp import run_stamp
from fod.config import FOD_METHODS

#: the methods a run decodes unless ``--methods`` says otherwise
DEFAULT_METHODS = ("greedy", "abstain", "rerank", "cad", "fod-bt", "fod")
METHODS = (*DEFAULT_METHODS, "fod-paper")


def counterfactual_contexts(pairs, seed: int = 0) -> list[tuple[str, str] | None]:
    """Per pair: (context with the answer swapped for another record's same-shape answer, that answer)."""
    by_shape = defaultdict(list)
    for p in pairs:
        by_shape[p.shape].append(p.answer)
    rng = random.Random(f"{seed}-counterfactual")
    out = []
    for p in pairs:
        options = [a for a in by_shape[p.shape] if a.lower() != p.answer.lower() and a.lower() not in p.context.lower()]
        if not options:
            out.append(None)
            continue
        new = rng.choice(sorted(set(options)))
        out.append((p.context.replace(p.answer, new), new))
    return out


class CachedJudge:
    """The support judge, asked once per distinct (context, question, sentence): methods often share sentences."""

    def __init__(self, scorer, with_question: bool) -> None:
        self.scorer, self.with_question, self.cache = scorer, with_question, {}

    def supported(self, context: str, question: str, sentences: list[str]) -> list[float]:
        from syncheck.featurize import alignment_claim

        claims = [alignment_claim(s, question) if self.with_question else s for s in sentences]
        todo = sorted({c for c in claims if (context, c) not in self.cache})
        if todo:
            for c, v in zip(todo, self.scorer.score([context] * len(todo), todo)):
                self.cache[(context, c)] = float(v >= 0.5)
        return [self.cache[(context, c)] for c in claims]


def build_generators(scorer, tau1: float | None):
    from fod.baselines import AbstainGenerator, CADGenerator, GreedyGenerator, RerankGenerator
    from fod.generator import FODGenerator

    kw = {"checker": None}  # the judge below checks faithfulness
    return {
        "greedy": GreedyGenerator(scorer, **kw),
        "abstain": AbstainGenerator(scorer, threshold=tau1, **kw),
        "rerank": RerankGenerator(scorer, **kw),
        "cad": CADGenerator(scorer, alpha=0.5, **kw),
        **{name: FODGenerator(scorer, **kw) for name in FOD_METHODS},
    }


def run_method(gen, name: str, question: str, context: str, args) -> object:
    from fod.config import FODConfig
    from syncheck.decoding import Decoding

    texts = {"question": question, "context": context, "max_sentences": args.max_sentences}
    # the sampled candidates of FOD's beam search and of reranking
    sampled = Decoding(max_new_tokens=args.max_new_tokens, do_sample=True, temperature=args.temperature, top_p=0.95,
                       seed=args.seed)
    if name in FOD_METHODS:
        return gen.generate(**texts, config=FODConfig.for_method(name), tau1=args.tau1, tau2=args.tau2,
                            num_samples=args.num_samples, num_beams=args.num_beams, decoding=sampled)
    if name == "rerank":
        return gen.generate(**texts, num_samples=args.num_samples, decoding=sampled)
    return gen.generate(**texts, decoding=Decoding(max_new_tokens=args.max_new_tokens))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="../shared/data/halueval")
    ap.add_argument("--limit", type=int, default=20, help="QA records read (records without a usable answer span are "
                                                          "skipped)")
    ap.add_argument("--start", type=int, default=4000, help="first QA record (away from the records the default "
                                                            "aggregator trains on)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--judge", default="embedding", help="alignment scorer spec judging support (see "
                                                         "make_alignment_scorer)")
    ap.add_argument("--judge-with-question", action="store_true",
                    help="the judge checks 'Question: Q / Answer: sentence' instead of the sentence alone")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--max-sentences", type=int, default=3)
    ap.add_argument("--tau1", type=float, default=None, help="default: tuned for the aggregator, else the paper's 0.7")
    ap.add_argument("--tau2", type=float, default=None, help="default: tuned for the aggregator, else the paper's 0.85")
    ap.add_argument("--num-samples", type=int, default=6)
    ap.add_argument("--num-beams", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of FOD's and reranking's "
                                                                   "samples")
    ap.add_argument("--out", default=None, help="also write one JSON line per answer (text, sentences, judgements, "
                                                "trace)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    from benchmarks.halueval.pairs import build_pairs
    from syncheck.alignment import make_alignment_scorer
    from syncheck.scorer import Scorer

    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise SystemExit(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    pairs = build_pairs(args.data_dir, limit=args.limit, seed=args.seed, start=args.start)
    cf = counterfactual_contexts(pairs, args.seed)
    scorer = Scorer(args.model)
    judge = CachedJudge(make_alignment_scorer(args.judge), args.judge_with_question)
    gens = build_generators(scorer, args.tau1)
    t_start = time.perf_counter()

    results: dict[tuple[str, str], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    stamp = run_stamp(args)
    for p, c in zip(pairs, cf):
        settings = [("original", p.context, p.answer, None)]
        if c is not None:
            settings.append(("counterfactual", c[0], c[1], p.answer))
        for setting, context, target, memory in settings:
            for m in methods:
                t = time.perf_counter()
                res = run_method(gens[m], m, p.question, context, args)
                dt = time.perf_counter() - t
                sents = [s.text for s in res.sentences]
                supported = judge.supported(context, p.question, sents)
                r = results[(setting, m)]
                r["supported"].append(supported)
                r["n_sentences"].append(len(sents))
                r["abstained"].append(float(bool(res.trace.get("abstained"))))
                if m in FOD_METHODS:
                    r["backtracked"].append(float(res.trace.get("backtrack") is not None))
                r["seconds"].append(dt)
                text = res.text.lower()
                r["entity"].append(float(target.lower() in text))
                if memory is not None:
                    r["memory"].append(float(memory.lower() in text))
                if out is not None:
                    out.write(json.dumps({"record": p.record, "setting": setting, "method": m,
                                          "question": p.question, "target": target, "text": res.text,
                                          "sentences": [{"text": s.text, "score": s.score} for s in res.sentences],
                                          "supported": supported, "seconds": dt,
                                          "trace": res.trace, "run": stamp}, ensure_ascii=False,
                                         default=str) + "\n")
    if out is not None:
        out.close()

    wall = time.perf_counter() - t_start
    from syncheck.aggregators.thresholds import resolve_thresholds

    tau1, tau2, tau_from = resolve_thresholds(scorer, args.tau1, args.tau2)
    print(
        f"tau1={tau1} tau2={tau2} ({tau_from}) S={args.num_samples} K={args.num_beams} temperature={args.temperature}"
    )
    print(f"model={args.model} judge={args.judge}{' (question-aware)' if args.judge_with_question else ''} "
          f"torch={torch.__version__} cpu={platform.machine()} "
          f"records={len(pairs)} (counterfactual {sum(c is not None for c in cf)}) wall={wall / 60:.1f} min\n")
    print("| setting | method | faithful sentences [95% CI] | vs greedy, paired [95% CI] | sentences / answer | "
          "abstained "
          "| backtracked | answer has context entity | answer has memorised entity | s / answer |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    summary = {}
    for setting in ("original", "counterfactual"):
        for m in methods:
            r = results.get((setting, m))
            if not r:
                continue
            f, lo, hi = bootstrap_mean(r["supported"], seed=args.seed)
            mem = f"{np.mean(r['memory']):.2f}" if r["memory"] else "-"
            bt = f"{np.mean(r['backtracked']):.2f}" if r["backtracked"] else "-"
            base = results.get((setting, "greedy"))
            vs = "-"
            if base and m != "greedy":
                d, dlo, dhi = bootstrap_paired_difference(base["supported"], r["supported"], seed=args.seed)
                vs = f"{d:+.3f} [{dlo:+.3f}, {dhi:+.3f}]"
            print(f"| {setting} | {m} | {f:.3f} [{lo:.3f}, {hi:.3f}] | {vs} | {np.mean(r['n_sentences']):.2f} | "
                  f"{np.mean(r['abstained']):.2f} | {bt} | {np.mean(r['entity']):.2f} | {mem} | "
                  f"{np.mean(r['seconds']):.1f} |")
            summary[(setting, m)] = {"faithful": f, "ci": (lo, hi), "sentences": float(np.mean(r["n_sentences"])),
                                     "abstained": float(np.mean(r["abstained"])), "entity": float(np.mean(r["entity"]))}
    return summary


if __name__ == "__main__":
    main()
