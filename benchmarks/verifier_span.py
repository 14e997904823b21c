"""An extractive span reader on MiniLM as a verifier, on HaluEval QA distractor pairs.

The shipped verifier (a MiniLM cross-encoder) cannot tell the passage's answer from another entity of the same
passage given as the answer (AUROC 0.600); a linear probe on Qwen2.5-Coder-1.5B can (0.878), but costs a 1.5B forward
per answer. Does the same small encoder see it when it is trained to *point at* the answer instead of to classify a
pair? The reader is all-MiniLM-L6-v2 with a fresh start/end head (``AutoModelForQuestionAnswering``), trained by
transformers' ``Trainer`` on HaluEval QA training records whose right answer occurs verbatim in the passage.

A claim's score is what share of the reader's answer the claim names: over the reader's best spans (the top 20
starts by the top 20 ends, at most 30 tokens, inside the passage), softmax over start + end logits, the expected
share of a span's normalised words that the claim contains. Sign convention ``+``: higher = the claim gives the
passage's answer. It needs a question; HaluEval QA always has one.

Scored on the distractor pairs of ``--test`` records (outside the verifier's training ranges), beside word overlap
and, with ``--verifier``, the shipped verifier; ``--dev`` records (inside the training ranges, left out of the
reader's training) are where a recipe may be chosen. AUROC counts the right answer as positive, with 95% bootstrap
intervals over records and paired differences.

Run::

    HF_HUB_OFFLINE=1 python -m benchmarks.verifier_span --out DIR --test 2000-2250 --verifier
"""

from __future__ import annotations

import argparse
import re
import string
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from benchmarks.run_stamp import machine
from benchmarks.verifier_probe import pair_units, record_range

#: Spans the reader weighs per claim: the best starts by the best ends.
TOP = 20
#: The longest span, in tokens.
MAX_SPAN = 30
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalised_words(text: str) -> list[str]:
    """SQuAD's answer normalisation: lower case, no punctuation or articles, split on white space."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return _ARTICLES.sub(" ", text).split()


def answer_examples(data_dir: str, ranges: Sequence[tuple[int, int]]) -> list[tuple[str, str, int, int]]:
    """``(question, passage, answer's first character, answer's length)`` of HaluEval QA records in ``ranges``
    whose right answer occurs verbatim (ignoring case) in the passage; the first occurrence is the target."""
    from syncheck.verifier.sources import halueval_records

    out = []
    for _, row in halueval_records(data_dir, "qa", ranges):
        at = row["knowledge"].lower().find(row["right_answer"].strip().lower())
        if at >= 0 and row["right_answer"].strip():
            out.append((row["question"], row["knowledge"], at, len(row["right_answer"].strip())))
    return out


class SpanDataset(torch.utils.data.Dataset):
    """Tokenised ``[CLS] question [SEP] passage [SEP]`` with the answer's start and end token; an answer cut off by
    truncation points at ``[CLS]``."""

    def __init__(self, examples: Sequence[tuple[str, str, int, int]], tokenizer: Any, max_length: int) -> None:
        self.examples, self.tokenizer, self.max_length = list(examples), tokenizer, max_length

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> dict[str, Any]:
        question, passage, at, n = self.examples[i]
        enc = self.tokenizer(question, passage, truncation="only_second", max_length=self.max_length,
                             return_offsets_mapping=True)
        seq, offsets = enc.sequence_ids(), enc.pop("offset_mapping")
        start = end = 0
        for k, (sid, (a, b)) in enumerate(zip(seq, offsets)):
            if sid != 1:
                continue
            if a <= at < b and start == 0:
                start = k
            if a < at + n <= b:
                end = k
        if end < start:
            start = end = 0
        return {**enc, "start_positions": start, "end_positions": end}


def train_reader(examples: Sequence[tuple[str, str, int, int]], out: Path, *, learning_rate: float, epochs: float,
                 batch_size: int, max_length: int, seed: int = 0) -> tuple[Any, Any]:
    from transformers import (
        AutoModelForQuestionAnswering,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    from features.alignment.embedding import default_encoder_path
    from features.alignment.hf_utils import hub_kwargs

    torch.manual_seed(seed)
    path = default_encoder_path()
    tokenizer = AutoTokenizer.from_pretrained(path, **hub_kwargs())
    model = AutoModelForQuestionAnswering.from_pretrained(path, attention_probs_dropout_prob=0.0, **hub_kwargs())
    args = TrainingArguments(output_dir=str(out / "checkpoints"), per_device_train_batch_size=batch_size,
                             learning_rate=learning_rate, num_train_epochs=epochs, warmup_steps=0.1,
                             lr_scheduler_type="linear", logging_steps=20, save_steps=100, save_total_limit=1,
                             seed=seed, data_seed=seed, report_to=[], dataloader_num_workers=0,
                             remove_unused_columns=False, dataloader_pin_memory=torch.cuda.is_available())
    trainer = Trainer(model=model, args=args, train_dataset=SpanDataset(examples, tokenizer, max_length),
                      data_collator=DataCollatorWithPadding(tokenizer))
    from transformers.trainer_utils import get_last_checkpoint

    last = get_last_checkpoint(args.output_dir) if Path(args.output_dir).is_dir() else None
    trainer.train(resume_from_checkpoint=last)
    model.save_pretrained(out / "reader")
    tokenizer.save_pretrained(out / "reader")
    return model.eval(), tokenizer


def claim_share(span: str, claim_words: set[str]) -> float:
    words = normalised_words(span)
    return sum(w in claim_words for w in words) / len(words) if words else 0.0


@torch.no_grad()
def reader_scores(model: Any, tokenizer: Any, questions: Sequence[str], passages: Sequence[str],
                  claims: Sequence[str], max_length: int = 384) -> np.ndarray:
    """Per claim: the expected share of the reader's answer span (over its best spans) that the claim names."""
    out = np.zeros(len(claims))
    for i, (q, p, c) in enumerate(zip(questions, passages, claims)):
        enc = tokenizer(q, p, truncation="only_second", max_length=max_length, return_offsets_mapping=True,
                        return_tensors="pt")
        seq, offsets = enc.sequence_ids(0), enc.pop("offset_mapping")[0].tolist()
        logits = model(**enc)
        inside = torch.tensor([s == 1 for s in seq])
        start = logits.start_logits[0].masked_fill(~inside, -1e9)
        end = logits.end_logits[0].masked_fill(~inside, -1e9)
        starts = start.topk(min(TOP, int(inside.sum()))).indices.tolist()
        ends = end.topk(min(TOP, int(inside.sum()))).indices.tolist()
        spans = [(a, b) for a in starts for b in ends if a <= b < a + MAX_SPAN]
        if not spans:
            continue
        weights = torch.softmax(torch.tensor([float(start[a] + end[b]) for a, b in spans]), 0).tolist()
        words = set(normalised_words(c))
        out[i] = sum(w * claim_share(p[offsets[a][0]:offsets[b][1]], words) for w, (a, b) in zip(weights, spans))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from benchmarks.halueval.pairs import build_pairs
    from features.alignment.lexical import lexical_precision
    from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/halueval", help="HaluEval's directory")
    ap.add_argument("--out", required=True, help="directory for the reader and its checkpoints (resumable)")
    ap.add_argument("--train", default="0-2000,4000-4800", help="QA records the reader trains on (START-END, ...)")
    ap.add_argument("--dev", type=record_range, default=(4800, 5000), help="records START-END to choose a recipe on")
    ap.add_argument("--test", type=record_range, default=(2000, 2250), help="records START-END it is scored on")
    ap.add_argument("--learning-rate", type=float, default=1e-4)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=384)
    ap.add_argument("--sets", default="dev,test", help="which record sets to score (dev, test or both)")
    ap.add_argument("--verifier", action="store_true", help="score the shipped verifier on the test units too")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = Path(args.out)
    ranges = [record_range(r) for r in args.train.split(",")]
    examples = answer_examples(args.data, ranges)
    reader_dir = out / "reader"
    if (reader_dir / "config.json").exists():
        from transformers import AutoModelForQuestionAnswering, AutoTokenizer

        model = AutoModelForQuestionAnswering.from_pretrained(reader_dir).eval()
        tokenizer = AutoTokenizer.from_pretrained(reader_dir)
    else:
        model, tokenizer = train_reader(examples, out, learning_rate=args.learning_rate, epochs=args.epochs,
                                        batch_size=args.batch_size, max_length=args.max_length)
    t_train = time.perf_counter() - t0
    print(f"machine: {machine()}")
    print(f"reader trained on {len(examples)} answers of QA records {args.train} ({t_train:.0f} s); lr "
          f"{args.learning_rate}, {args.epochs} epochs, batch {args.batch_size}, max {args.max_length} tokens\n")
    result: dict[str, Any] = {}
    for name, rng in (("dev", args.dev), ("test", args.test)):
        if name not in args.sets.split(","):
            continue
        units = pair_units(args.data, *rng)
        question_of = {p.record: p.question for p in build_pairs(args.data, limit=rng[1] - rng[0], start=rng[0])}
        questions = [question_of[u.record] for u in units]
        y, groups = np.array([u.label for u in units]), [u.record for u in units]
        scores = {"span reader": reader_scores(model, tokenizer, questions, [u.premise for u in units],
                                               [u.answer for u in units], args.max_length),
                  "word overlap (trivial)": np.array([lexical_precision(u.premise, u.answer) for u in units])}
        if args.verifier and name == "test":
            from features.alignment.verifier import VerifierScorer

            scores["shipped verifier"] = VerifierScorer(progress=False).score([u.premise for u in units],
                                                                              [u.claim for u in units])
        print(f"### {name}: distractor pairs of records {rng[0]}-{rng[1] - 1} ({len(units)} answers)\n")
        print("| score | AUROC [95% CI] | span reader − this |")
        print("| --- | --- | --- |")
        for key, s in scores.items():
            auc = bootstrap_auroc(y, s, groups=groups)
            diff = (bootstrap_auroc_difference(y, scores["span reader"], s, groups=groups)
                    if key != "span reader" else None)
            result[f"{name}:{key}"] = {"auroc": auc, "reader_minus": diff}
            print(f"| {key} | {auc[0]:.3f} [{auc[1]:.3f}, {auc[2]:.3f}] | "
                  + ("" if diff is None else "{:+.3f} [{:+.3f}, {:+.3f}]".format(*diff)) + " |")
        print()
    print(f"{time.perf_counter() - t0:.0f} s in all")
    return result


if __name__ == "__main__":
    main()
