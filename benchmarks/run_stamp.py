"""The stamp every benchmark output row carries: the commit and the configuration that produced it.

``{"commit": "abc1234" (or "abc1234-dirty", or None outside a checkout), "config": {option: value}}``, with paths that
only mean something on one machine reduced to file names (:func:`syncheck.build_info.without_machine_paths`).
Compute it once per run and put it in each row under ``"run"``; readers match rows by their own keys and ignore it.
"""

from __future__ import annotations

import argparse
import os
import platform
from typing import Any, Mapping

from syncheck.build_info import source_commit, without_machine_paths


def run_stamp(options: argparse.Namespace | Mapping[str, Any]) -> dict[str, Any]:
    """The stamp of a run with these parsed options (an ``argparse.Namespace`` or a mapping)."""
    config = vars(options) if isinstance(options, argparse.Namespace) else dict(options)
    return {"commit": source_commit(), "config": without_machine_paths(config)}


def cpu_name() -> str:
    """The processor's model name as the kernel reports it (``/proc/cpuinfo``), else :func:`platform.processor`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine() -> str:
    """One line naming what a speed figure was measured on: the CPU, the cores this process may use, and torch's
    version and threads. Speed ratios move with the machine (a CPU with slower memory gains more from batching), so
    every speed benchmark prints it beside its figures."""
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu_name()}, {cores} cores; torch {torch.__version__}, {torch.get_num_threads()} threads"


__all__ = ["cpu_name", "machine", "run_stamp"]
