"""Options and input reading shared by the commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterable, Iterator

import click

from syncheck.jsonl import is_blank
from syncheck.records import Record, RecordError, read_jsonl

model_option = click.option(
    "--model",
    default="smollm2-135m",
    show_default=True,
    help="Alias (smollm2-135m), hub id, local directory or .gguf file.",
)
device_option = click.option("--device", default=None, help="torch device, e.g. cpu, cuda, cuda:1, mps.")
dtype_option = click.option(
    "--dtype", default="float32", show_default=True, type=click.Choice(["float32", "bfloat16", "float16", "auto"]),
    help="Weights dtype; 'auto': bfloat16 where the device computes it natively (a GPU, a CPU with AMX or "
         "AVX512-BF16), else float32.")

#: Named setups of ``--model`` and ``--dtype``: ``quality`` scores with Qwen2.5-Coder-1.5B (in bfloat16 where the
#: hardware computes it natively, else float32: emulated bfloat16 is several times slower), with the aggregator
#: calibrated for it (``syncheck calibrate --preset quality --data ...``; the portable one until then).
#: ``bash scripts/setup.sh --with-qwen`` installs the model. An explicit ``--model`` or ``--dtype`` still wins.
#: ``nli`` and ``summary_nli`` are read by ``syncheck check`` alone: with ``quality`` its support is the mean of the
#: verifier, Qwen as a yes/no judge, and the probe head shipped for Qwen (:data:`QUALITY_CHECK_SUPPORT`), and
#: summaries are checked by the verifier, as the default checks them (RESULTS.md in the source repository, "The answer
#: check"); an explicit ``--nli`` or ``--summary-nli`` still wins.
QUALITY_CHECK_SUPPORT = "verifier+llm-judge:qwen2.5-coder-1.5b+probe"
PRESETS = {"default": {"model": "smollm2-135m", "dtype": "float32"},
           "quality": {"model": "qwen2.5-coder-1.5b", "dtype": "auto", "nli": QUALITY_CHECK_SUPPORT,
                       "summary_nli": "verifier"}}


def _apply_preset(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        ctx.default_map = {**(ctx.default_map or {}), **PRESETS[value]}
    return value


preset_option = click.option(
    "--preset", type=click.Choice(sorted(PRESETS)), default=None, is_eager=True, expose_value=False,
    callback=_apply_preset,
    help="Model and dtype in one word: 'default' (smollm2-135m, float32) or 'quality' (qwen2.5-coder-1.5b, "
         "dtype auto; scored by the aggregator shipped for it, calibrated on RAGTruth dev; for 'syncheck check', "
         f"--nli {QUALITY_CHECK_SUPPORT} --summary-nli verifier). --model, --dtype, --nli and --summary-nli override "
         "it.")

#: Exit status of every error a user can cause (bad input, options, files): click's usage-error status.
USER_ERROR_EXIT = 2
#: Exit status of a batch command (score, check, fod generate --input) whose every row failed: the output still has
#: a row for each, with its error
ALL_ROWS_FAILED_EXIT = 1


class UserError(click.ClickException):
    """A mistake the user can fix: shown as one line, exit status :data:`USER_ERROR_EXIT`."""

    exit_code = USER_ERROR_EXIT

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def _user_error_types() -> tuple[type[BaseException], ...]:
    from syncheck.aggregators.apply import FeatureMismatchError
    from syncheck.calibration.labels import LabelError
    from syncheck.decoding import SettingsError
    from syncheck.model.models import ModelNotFoundError
    from syncheck.model.passes import ResponseTooLongError

    return (
        FeatureMismatchError, SettingsError, LabelError, ResponseTooLongError, ModelNotFoundError, FileNotFoundError,
        IsADirectoryError, PermissionError,
    )


class CommandGroup(click.Group):
    """A click group whose commands end every user error in one line and exit status 2, never a traceback:
    click's own errors get status 2, and the library's user-error exceptions (a feature mismatch between an
    aggregator and the scorer, a bad decoding setting, bad labels, a missing file) become :class:`UserError`."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except click.ClickException as exc:
            exc.exit_code = USER_ERROR_EXIT
            raise
        except _user_error_types() as exc:
            raise UserError(str(exc)) from None


def read_records(path: Path, *, to_answer: bool = False) -> Iterator[Record | RecordError]:
    """Records of a JSONL file, in order; bad lines (invalid UTF-8 or JSON, bad fields) come as errors.

    ``to_answer``: the rows are questions to answer, not responses to score (:func:`syncheck.records.parse_record`).
    """
    with open(path, "rb") as f:
        for _, item in read_jsonl(f, to_answer=to_answer):
            yield item


def count_lines(path: Path) -> int:
    """Rows :func:`read_records` yields for ``path``: its lines that are not blank."""
    with open(path, "rb") as f:
        return sum(1 for line in f if not is_blank(line))


def resume_point(output_path: Path | None, input_path: Path, total: int, *, to_answer: bool = False) -> int:
    """``--resume``: the rows of an interrupted run's output that are kept (the file is cut to them, and checked
    against the ids of ``input_path``); the run goes on from there. A mismatch ends the command with what to do."""
    from syncheck.io import ResumeError, output_id, prepare_resume

    if output_path is None:
        raise click.UsageError("--resume needs -o OUTPUT.jsonl: the file of the interrupted run")
    try:
        done = prepare_resume(output_path, [output_id(item) for item in read_records(input_path, to_answer=to_answer)])
    except ResumeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"resuming: {done} of {total} rows already in {output_path}", err=True)
    return done


def write_rows(rows: Iterable[dict], output_path: Path | None, *, total: int, done: int = 0, resume: bool = False,
               group_size: int = 1, desc: str = "scoring", verb: str = "scored",
               show: Callable[[dict], None] | None = None) -> None:
    """Write ``rows`` (the rows after the ``done`` already in the file) as JSON lines, with a progress bar on
    standard error, then a summary line there: how many rows failed. When every row of the output failed (those
    kept from an interrupted run included), the command says so and exits with :data:`ALL_ROWS_FAILED_EXIT`.

    Args:
        output_path: the output file (appended to with ``resume``), or ``None`` for standard output.
        total: rows of the whole input (the bar's length).
        group_size: rows per commit (:class:`~syncheck.io.RowWriter`).
        desc: the bar's label (``scoring``, ``answering``).
        verb: what the command did to a row, for the summary (``scored``, ``answered``).
        show: called with every row as written (e.g. to print it).
    """
    from tqdm import tqdm

    from syncheck.io import RowWriter

    kept_errors = _errors_in(output_path) if done else 0
    out = open(output_path, "a" if resume else "w", encoding="utf-8") if output_path else sys.stdout
    writer = RowWriter(out, group_size=group_size, start=done)
    first_error = None
    try:
        with tqdm(total=total, initial=done, unit="row", desc=desc, file=sys.stderr, disable=None) as bar:
            for row in rows:
                row = writer.write(row)
                first_error = first_error or row.get("error")
                if show is not None:
                    show(row)
                bar.update(1)
        writer.flush()
    finally:
        if output_path:
            out.close()
    kept = f" ({done} kept from the interrupted run, {total - done} {verb} now)" if done else ""
    click.echo(f"{total} rows{kept}, {writer.errors} {'new ' if done else ''}with errors"
               + (f"; wrote {output_path}" if output_path else ""), err=True)
    failed = writer.errors + kept_errors
    if total and failed == total:
        click.echo(f"every row failed ({failed} of {total}): each row's error says why"
                   + (f"; the first: {first_error}" if first_error else ""), err=True)
        raise click.exceptions.Exit(ALL_ROWS_FAILED_EXIT)


def _errors_in(output_path: Path) -> int:
    """Rows with an error among the complete rows already in ``output_path`` (kept by ``--resume``)."""
    from syncheck.io import complete_rows

    return sum(row.get("error") is not None for row in complete_rows(output_path)[0])


def quiet_transformers() -> None:
    """Keep transformers' weight-loading progress bars and info logs off the terminal (our own bars remain)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
