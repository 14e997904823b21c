"""What sharing one LM between the members of a mean support saves: ``syncheck check --preset quality``'s support.

The quality preset checks answers with ``verifier+llm-judge:qwen2.5-coder-1.5b+probe``: the judge and the probe both
run Qwen2.5-Coder-1.5B. :func:`syncheck.checking.provenance.make_support` loads it once for both
(:func:`syncheck.model.models.shared_loader`). This builds the support both ways in one process, side by side:

- ``each loads its own``: every member built on its own, as before the sharing (one Qwen per member that runs it);
- ``shared``: ``make_support(spec)``, as ``syncheck check`` builds it.

For each it reports the seconds to build the support (model loads included; one untimed load first, so both read
the model from a warm file cache), the bytes of model weights the support holds (distinct tensors), the seconds to
score the first ``--limit`` rows of ``--data`` (each answer against its context, with its question), and whether both
give the same scores. Needs ``bash scripts/setup.sh --with-qwen``.

Run::

    HF_HUB_OFFLINE=1 python -m benchmarks.studies.shared_lm_cost [--data examples/rag_examples.jsonl --limit 2]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from benchmarks.run_stamp import machine
from syncheck.checking.provenance import make_support
from syncheck.checking.support import MeanSupport
from syncheck.cli.common import QUALITY_CHECK_SUPPORT


def modules(obj: Any, depth: int = 6) -> Iterator[torch.nn.Module]:
    """The torch modules ``obj`` holds, ``depth`` attributes (or list items) down."""
    if isinstance(obj, torch.nn.Module):
        yield obj
        return
    if depth == 0:
        return
    children = obj if isinstance(obj, (list, tuple)) else list(getattr(obj, "__dict__", {}).values())
    for child in children:
        yield from modules(child, depth - 1)


def weight_bytes(support: Any) -> int:
    """Bytes of the distinct parameter and buffer tensors ``support``'s models hold (a shared model counts once)."""
    seen: dict[int, int] = {}
    for module in modules(support):
        for t in [*module.parameters(), *module.buffers()]:
            seen[t.data_ptr()] = t.numel() * t.element_size()
    return sum(seen.values())


def build(spec: str, mode: str, dtype: str) -> Any:
    if mode == "shared":
        return make_support(spec, dtype=dtype)
    return MeanSupport([make_support(part.strip(), dtype=dtype) for part in spec.split("+")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nli", default=QUALITY_CHECK_SUPPORT, help="the mean support to build")
    ap.add_argument("--dtype", default="auto", help="the models' dtype (the quality preset's: auto)")
    ap.add_argument("--data", default="examples/rag_examples.jsonl", help="rows with context, question, response")
    ap.add_argument("--limit", type=int, default=2, help="rows scored")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in Path(args.data).read_text(encoding="utf-8").splitlines()[: args.limit]]
    premises = [r["context"] if isinstance(r["context"], str) else "\n\n".join(r["context"]) for r in rows]
    answers, questions = [r["response"] for r in rows], [r.get("question") for r in rows]
    print(machine())
    build(args.nli, "shared", args.dtype)  # untimed: the model files into the page cache
    gc.collect()
    out: dict[str, tuple[float, int, float, np.ndarray]] = {}
    for mode in ("each loads its own", "shared"):
        t0 = time.perf_counter()
        support = build(args.nli, mode, args.dtype)
        built = time.perf_counter() - t0
        t0 = time.perf_counter()
        scores = np.asarray(support.score(premises, answers, questions=questions), dtype=float)
        out[mode] = (built, weight_bytes(support), time.perf_counter() - t0, scores)
        del support
        gc.collect()
    base = out["each loads its own"]
    print(f"\n`--nli {args.nli}`, dtype {args.dtype}, {len(rows)} rows of {args.data}\n")
    print("| support | build s (loads included) | model weights held | score s "
          "| vs each loads its own (build, weights) |")
    print("| --- | --- | --- | --- | --- |")
    for mode, (built, held, scored, _) in out.items():
        print(f"| {mode} | {built:.1f} | {held / 2**20:,.1f} MiB | {scored:.1f} | {built / base[0]:.2f}x, "
              f"{held / base[1]:.2f}x |")
    same = np.allclose(out["shared"][3], base[3], atol=1e-6)
    print(f"\nthe same scores: {same} ({np.round(out['shared'][3], 4).tolist()})")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
