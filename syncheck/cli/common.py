"""Options and input reading shared by the commands."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import click

from syncheck.records import Record, RecordError, read_jsonl

model_option = click.option(
    "--model",
    default="smollm2-135m",
    show_default=True,
    help="Alias (smollm2-135m), hub id, local directory or .gguf file.",
)
device_option = click.option("--device", default=None, help="torch device, e.g. cpu, cuda, cuda:1, mps.")
dtype_option = click.option(
    "--dtype", default="float32", show_default=True, type=click.Choice(["float32", "bfloat16", "float16"])
)


def read_records(path: Path) -> Iterator[Record | RecordError]:
    """Records of a JSONL file, in order; bad lines (invalid UTF-8 or JSON, bad fields) come as errors."""
    with open(path, "rb") as f:
        for _, item in read_jsonl(f):
            yield item


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def quiet_transformers() -> None:
    """Keep transformers' weight-loading progress bars and info logs off the terminal (our own bars remain)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
