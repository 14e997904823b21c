"""The stamp every benchmark output row carries: the commit and the configuration that produced it.

``{"commit": "abc1234" (or "abc1234-dirty", or None outside a checkout), "config": {option: value}}``, with paths that
only mean something on one machine reduced to file names (:func:`syncheck.build_info.without_machine_paths`).
Compute it once per run and put it in each row under ``"run"``; readers match rows by their own keys and ignore it.
"""

from __future__ import annotations

import argparse
from typing import Any, Mapping

from syncheck.build_info import source_commit, without_machine_paths


def run_stamp(options: argparse.Namespace | Mapping[str, Any]) -> dict[str, Any]:
    """The stamp of a run with these parsed options (an ``argparse.Namespace`` or a mapping)."""
    config = vars(options) if isinstance(options, argparse.Namespace) else dict(options)
    return {"commit": source_commit(), "config": without_machine_paths(config)}


__all__ = ["run_stamp"]
