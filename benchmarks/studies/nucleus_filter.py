"""Top-p from the most probable tokens (:class:`syncheck.decoding.NucleusWarper`) against transformers' sort of the
whole vocabulary (``TopPLogitsWarper``): the same filter? at what cost per call?

The distributions are a language model's own: its next-token log-probabilities at the last ``--positions`` positions
of ``benchmarks.monitor_overhead``'s prompt, taken ``--rows`` at a time as FOD samples its candidates. For each batch
both filters run side by side, interleaved, and their outputs are compared bit for bit; the table gives the time
per call as a ratio against transformers', how many outputs differ, and how many rows' nucleus runs past the head
(those go to transformers' sort). The same on random normal scores, whose nuclei sit far from any language model's.

Run::

    HF_HUB_OFFLINE=1 python -m benchmarks.studies.nucleus_filter [--model smollm2-135m --top-p 0.95]
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers.generation.logits_process import TopPLogitsWarper

from benchmarks.monitor_overhead import CONTEXT, QUESTIONS
from benchmarks.run_stamp import machine
from syncheck.decoding import NUCLEUS_HEAD, NucleusWarper


def compare(batches: list[torch.Tensor], top_p: float, repeats: int) -> tuple[float, float, int, int]:
    """(seconds per call of transformers', of the head's, outputs that differ, rows past the head)."""
    full, head = TopPLogitsWarper(top_p), NucleusWarper(top_p)
    ids = torch.zeros((batches[0].shape[0], 1), dtype=torch.long)
    spent = {"full": 0.0, "head": 0.0}
    differ = 0
    for _ in range(repeats):
        for scores in batches:
            for name, warper in (("full", full), ("head", head)):
                t0 = time.perf_counter()
                out = warper(ids, scores.clone())
                spent[name] += time.perf_counter() - t0
                if name == "full":
                    want = out
            differ += int(not torch.equal(out, want))
    calls = repeats * len(batches)
    past = sum(int((s.softmax(-1).sort(descending=True).values.cumsum(-1)[:, NUCLEUS_HEAD - 1] < top_p).sum())
               for s in batches)
    return spent["full"] / calls, spent["head"] / calls, differ // repeats, past


def main(argv: list[str] | None = None) -> list[str]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--positions", type=int, default=180, help="positions per prompt (a multiple of --rows)")
    ap.add_argument("--rows", type=int, default=6, help="rows per call (FOD's candidates)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--random-calls", type=int, default=300)
    args = ap.parse_args(argv)
    from syncheck.model.models import load_model

    lm = load_model(args.model)
    batches = []
    for q in QUESTIONS:
        ids = lm.tokenizer(f"{CONTEXT}\nQuestion: {q}\nAnswer:", return_tensors="pt").input_ids
        with torch.no_grad():
            logp = torch.log_softmax(lm.model(ids).logits[0, -args.positions:].float(), -1)
        batches += list(logp[: len(logp) // args.rows * args.rows].reshape(-1, args.rows, logp.shape[-1]))
    g = torch.Generator().manual_seed(0)
    random = [torch.randn(args.rows, batches[0].shape[-1], generator=g) * (1 + i % 8)
              for i in range(args.random_calls)]
    lines = [f"Machine: {machine()}; top-p {args.top_p}, {args.rows} rows per call, head {NUCLEUS_HEAD}.", "",
             "| scores | calls | transformers' ms/call | head's ms/call | head / transformers' | outputs that differ | "
             "rows past the head |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, data, repeats in ((f"{args.model}'s next tokens", batches, args.repeats), ("random normal", random, 1)):
        full, head, differ, past = compare(data, args.top_p, repeats)
        lines.append(f"| {name} | {len(data)} | {full * 1e3:.2f} | {head * 1e3:.2f} | {head / full:.2f}x | {differ} | "
                     f"{past} of {len(data) * args.rows} |")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
