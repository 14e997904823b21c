"""A linear probe on a frozen causal LM as a verifier, on HaluEval QA distractor pairs.

The shipped verifier (MiniLM, 22M parameters) cannot tell the passage's answer from another entity of the same
passage given as the answer (AUROC 0.600). Does a larger model that loads offline already know, with nothing trained
but a logistic regression on its states? For each (passage, question-aware answer) the LM reads one prompt::

    Premise: <passage>

    Question: <question>
    Answer: The answer is <entity>.

    Is the answer supported by the premise? Answer Yes or No.
    Answer:

and the probe reads the last token's hidden states of ``--layers`` (concatenated), scaled, into a logistic
regression (``C`` = ``--c``) fitted on the distractor pairs of ``--train`` records (inside the verifier's training
ranges). It is scored on ``--test`` records (outside them), beside the model's zero-shot Yes-minus-No logit at the
same position, word overlap of the answer with the passage, and, with ``--verifier``, the shipped verifier. AUROC
counts the right answer as positive, with 95% bootstrap intervals over records and paired differences.

Run::

    HF_HUB_OFFLINE=1 python -m benchmarks.verifier_probe --model qwen2.5-coder-1.5b --dtype bfloat16 \\
        --train 0-200 --test 2000-2250 --verifier
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from benchmarks.run_stamp import machine
from syncheck.model.probe_verifier import PROBE_PROMPT as PROMPT  # the prompt the probe backend reads


@dataclass(frozen=True)
class ProbeUnit:
    """One answer of a distractor pair: its record, passage, question-aware claim and label (1 = the right answer)."""

    record: int
    premise: str
    claim: str
    answer: str
    label: int


def pair_units(data_dir: str, start: int, end: int) -> list[ProbeUnit]:
    """Both answers of each distractor pair of HaluEval QA records ``start .. end - 1``."""
    from benchmarks.halueval.pairs import answer_sentence, build_pairs
    from syncheck.featurize import alignment_claim

    units = []
    for p in build_pairs(data_dir, limit=end - start, start=start):
        for entity, label in ((p.answer, 1), (p.distractor, 0)):
            text = answer_sentence(entity)
            units.append(ProbeUnit(p.record, p.context, alignment_claim(text, p.question), text, label))
    return units


@torch.no_grad()
def probe_inputs(lm: Any, units: Sequence[ProbeUnit], layers: Sequence[int], max_length: int = 384,
                 progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per unit: the last prompt token's hidden states of ``layers`` (concatenated), and the Yes-minus-No logit."""
    from tqdm import tqdm

    tok, model = lm.tokenizer, lm.model.eval()
    yes, no = tok.encode(" Yes", add_special_tokens=False)[0], tok.encode(" No", add_special_tokens=False)[0]
    states, margins = [], []
    for u in tqdm(units, disable=not progress, desc="probe inputs", unit="answer"):
        ids = tok(PROMPT.format(premise=u.premise, claim=u.claim), return_tensors="pt", truncation=True,
                  max_length=max_length).input_ids.to(lm.device)
        out = model(input_ids=ids, output_hidden_states=True)
        states.append(torch.cat([out.hidden_states[k][0, -1] for k in layers]).float().cpu().numpy())
        logits = out.logits[0, -1].float()
        margins.append(float(logits[yes] - logits[no]))
    return np.asarray(states), np.asarray(margins)


def fit_probe(x: np.ndarray, y: np.ndarray, c: float) -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000)).fit(x, y)


def record_range(text: str) -> tuple[int, int]:
    """``"START-END"`` -> ``(START, END)``: HaluEval QA records START to END - 1 (argparse reports a bad one)."""
    start, end = (int(v) for v in text.split("-"))
    if not 0 <= start < end:
        raise ValueError(f"{text!r}: give START-END with START < END, e.g. 0-200")
    return start, end


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from features.alignment.lexical import lexical_precision
    from syncheck.model.models import load_model
    from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/halueval", help="HaluEval's directory")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--train", type=record_range, default=(0, 200), help="records START-END the probe is fitted on")
    ap.add_argument("--test", type=record_range, default=(2000, 2250), help="records START-END it is scored on")
    ap.add_argument("--layers", default="-1,-8", help="hidden-state layers the probe reads (comma-separated)")
    ap.add_argument("--c", type=float, default=0.05, help="the logistic regression's inverse regularisation")
    ap.add_argument("--verifier", action="store_true", help="score the shipped verifier on the test units too")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    lm = load_model(args.model, dtype=args.dtype)
    layers = [int(v) for v in args.layers.split(",")]
    train, test = pair_units(args.data, *args.train), pair_units(args.data, *args.test)
    x_train, _ = probe_inputs(lm, train, layers, progress=True)
    x_test, margin = probe_inputs(lm, test, layers, progress=True)
    y_train = np.array([u.label for u in train])
    y, groups = np.array([u.label for u in test]), [u.record for u in test]
    scores = {"probe": fit_probe(x_train, y_train, args.c).predict_proba(x_test)[:, 1],
              "zero-shot Yes - No logit": margin,
              "word overlap (trivial)": np.array([lexical_precision(u.premise, u.answer) for u in test])}
    if args.verifier:
        from features.alignment.verifier import VerifierScorer
        from syncheck.shipped_models import VERIFIER, shipped_model_dir

        scores["shipped verifier"] = VerifierScorer(shipped_model_dir(VERIFIER), progress=False).score(
            [u.premise for u in test], [u.claim for u in test])
    print(f"machine: {machine()}")
    print(f"model {lm.name} ({args.dtype}), layers {layers}, C {args.c}; fitted on {len(train)} answers of records "
          f"{args.train[0]}-{args.train[1] - 1}, scored on {len(test)} of records {args.test[0]}-{args.test[1] - 1}; "
          f"{time.perf_counter() - t0:.0f} s\n")
    print("| score | AUROC [95% CI] | probe − this |")
    print("| --- | --- | --- |")
    out: dict[str, Any] = {}
    for name, s in scores.items():
        auc = bootstrap_auroc(y, s, groups=groups)
        diff = bootstrap_auroc_difference(y, scores["probe"], s, groups=groups) if name != "probe" else None
        out[name] = {"auroc": auc, "probe_minus": diff}
        print(f"| {name} | {auc[0]:.3f} [{auc[1]:.3f}, {auc[2]:.3f}] | "
              + ("" if diff is None else "{:+.3f} [{:+.3f}, {:+.3f}]".format(*diff)) + " |")
    return out


if __name__ == "__main__":
    main()
