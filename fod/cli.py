"""The ``fod`` command line: ``fod generate``, for one question or a JSONL file of them."""

from __future__ import annotations

import functools
import itertools
import json
import sys
from pathlib import Path
from typing import Any, Callable

import click

from fod import __version__
from fod.baselines import METHODS
from fod.config import DECODES, FOD_METHODS
from syncheck.cli.common import (
    CommandGroup,
    count_lines,
    device_option,
    dtype_option,
    model_option,
    preset_option,
    read_records,
    resume_point,
    write_rows,
)
from syncheck.records import has_text

#: what ``--method`` offers: FOD's methods (:data:`fod.config.FOD_METHODS`: FOD, FOD that only backtracks, the
#: paper's Algorithm 1) and every other decoder of :data:`fod.baselines.METHODS`
METHOD_NAMES = (*FOD_METHODS, *(name for name in METHODS if name != "fod"))


def decoder_class(method: str) -> type:
    """The decoder class of a ``--method`` name (those of :data:`fod.config.FOD_METHODS` are FOD's)."""
    return METHODS["fod" if method in FOD_METHODS else method]


#: the methods that take ``--alpha``: CAD, and FOD, whose greedy phases take CAD's tokens (``alpha`` in their
#: ``settings``)
ALPHA_METHODS = tuple(name for name, cls in METHODS.items() if "alpha" in cls.settings)
#: the methods that take ``--support``: FOD's (``FODGenerator(support=...)``)
SUPPORTED_METHODS = ("fod", "fod-bt")  # not fod-paper: the paper steers by the sentence score alone
#: the methods that take ``--decode``: those that read ``decode`` (FOD's greedy phases), but fod-paper, whose greedy
#: phase is the paper's plain greedy
DECODE_METHODS = tuple(name for name in METHOD_NAMES
                       if "decode" in decoder_class(name).settings and name != "fod-paper")


@click.group(cls=CommandGroup)
@click.version_option(__version__, prog_name="fod")
def main() -> None:
    """Faithfulness-oriented decoding of local LLMs."""
    from syncheck.cli.common import quiet_transformers

    quiet_transformers()


@main.command()
@click.option("--context", "context_path", type=click.File("r", encoding="utf-8"),
              help="File holding the retrieved context ('-' for standard input). A JSON list of strings is taken as "
                   "chunks. Goes with --question.")
@click.option("--question", help="The user's question (with --context).")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help='Answer every row of this JSONL file instead: {"id": ..., "context": "..." or ["chunk", ...], '
                   '"question": "..."} (the rows `syncheck score` reads; a "response" is ignored).')
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --input: output JSONL (one row per input line, same order). Default: standard output.")
@click.option("--resume", is_flag=True,
              help="With --input: continue an interrupted run, keeping the complete rows already in -o and answering "
                   "only the rest.")
@click.option("--method", default="fod", show_default=True, type=click.Choice(METHOD_NAMES),
              help="fod: faithfulness-oriented decoding with this library's defaults (docs/fod.md); fod-bt: FOD that "
                   "only backtracks; fod-paper: the paper's Algorithm 1 exactly (FODConfig.paper()); or a baseline.")
@preset_option
@model_option
@click.option("--aggregator", default="default", show_default=True,
              help="Aggregator directory, 'default' (calibrated for --model, else shipped, else portable), or "
                   "'none' (no scores: greedy/CAD only).")
@click.option("--tau1", default=None, type=click.FloatRange(0, 1),
              help="Backtrack threshold (FOD), abstention threshold (abstain). Default: the value tuned for the "
                   "aggregator (meta.json 'decoding'), else the paper's 0.7.")
@click.option("--tau2", default=None, type=click.FloatRange(0, 1),
              help="Sample pruning threshold (FOD). Default: the aggregator's tuned value, else the paper's 0.85.")
@click.option("-S", "--num-samples", default=6, show_default=True, type=click.IntRange(min=1))
@click.option("-K", "--num-beams", default=2, show_default=True, type=click.IntRange(min=1))
@click.option("--alpha", default=0.5, show_default=True, type=float,
              help=f"Contrast strength of the context-aware methods ({', '.join(ALPHA_METHODS)}).")
@click.option("--max-new-tokens", default=256, show_default=True, type=click.IntRange(min=1))
@click.option("--max-sentences", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the sampled candidates (fod, rerank).")
@click.option("--temperature", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Temperature of the sampled candidates. Default: the method's own (fod 0.7; fod-paper and rerank "
                   "1.0, the paper's).")
@click.option("--top-p", default=0.95, show_default=True, type=click.FloatRange(0, 1, min_open=True),
              help="Top-p of the sampled candidates (fod, rerank).")
@click.option("--stop", multiple=True, help="Stop string (repeatable): the answer ends before it.")
@click.option("--support", default=None,
              help="A support model FOD also steers by (fod, fod-bt): any alignment spec, e.g. reader (the shipped "
                   "span reader, for short answers that name an entity of the context), verifier, probe:<dir>. A "
                   "sentence it scores below 0.5 is flagged, and no candidate below 0.5 is chosen.")
@click.option("--decode", default=None, type=click.Choice(DECODES),
              help="What FOD's greedy phases decode on (fod, fod-bt): cad (CAD's tokens, the default), adacad, or "
                   "greedy (plain greedy tokens: with --support reader, FOD kept greedy's fluency; docs/fod.md).")
@device_option
@dtype_option
@click.option("--check/--no-check", default=True, show_default=True, help="Check the final answer with Provenance.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object instead of text (with --input, rows are always JSON).")
def generate(context_path, question, input_path, output_path, resume, method, model, aggregator, tau1, tau2,
             num_samples, num_beams, alpha, max_new_tokens, max_sentences, seed, temperature, top_p, stop, support,
             decode, device, dtype, check, as_json):
    """Answer --question from --context, or every question of --input, scoring each sentence; steer away from
    unfaithful ones."""
    _check_mode(context_path, question, input_path, output_path, resume)
    if support is not None and method not in SUPPORTED_METHODS:
        raise click.UsageError(f"--support steers {' and '.join(SUPPORTED_METHODS)} only; drop it, or use "
                               f"--method fod")
    if decode is not None and method not in DECODE_METHODS:
        raise click.UsageError(f"--decode sets what {' and '.join(DECODE_METHODS)} decode on; {method} decodes its "
                               f"own way: drop --decode, or use --method fod")
    context = None
    if context_path is not None:
        context = _parse_context(context_path.read())
        if not has_text(context):
            raise click.UsageError("the context is empty: pass a file with the retrieved text (--context FILE)")
    total = done = 0
    if input_path is not None:
        total = count_lines(input_path)
        done = resume_point(output_path, input_path, total, to_answer=True) if resume else 0
    click.echo(f"loading {model} ...", err=True)
    scorer, checker = _load_scorer(model, device, dtype, aggregator, check)
    answer = answerer(method, scorer, checker, tau1=tau1, tau2=tau2, num_samples=num_samples, num_beams=num_beams,
                      alpha=alpha, max_new_tokens=max_new_tokens, max_sentences=max_sentences, seed=seed,
                      temperature=temperature, top_p=top_p, stop=stop, support=support, decode=decode)
    if input_path is None:
        _print_result(answer(question=question, context=context), as_json)
        return
    rows = (_answer_row(item, answer, method)
            for item in itertools.islice(read_records(input_path, to_answer=True), done, None))
    write_rows(rows, output_path, total=total, done=done, resume=resume, desc="answering", verb="answered")


def _check_mode(context_path, question, input_path, output_path, resume) -> None:
    """Exactly one mode: ``--context FILE --question TEXT`` (one question) or ``--input FILE`` (a file of them)."""
    modes = "--context FILE --question TEXT (one question) or --input QUESTIONS.jsonl (a file of questions)"
    if context_path is None and input_path is None:
        raise click.UsageError(f"nothing to answer: give {modes}")
    if context_path is not None and input_path is not None:
        raise click.UsageError(f"--context and --input both given: give {modes}, not both")
    if input_path is not None and question is not None:
        raise click.UsageError('--question goes with --context: with --input every row carries its own "question"')
    if context_path is not None:
        if question is None:
            raise click.UsageError("--context needs --question TEXT: the question to answer from the context")
        for name, given in (("-o/--output", output_path is not None), ("--resume", resume)):
            if given:
                raise click.UsageError(f"{name} goes with --input QUESTIONS.jsonl; one question is printed instead")


def _load_scorer(model: str, device: str | None, dtype: str, aggregator: str, check: bool):
    """The scorer of ``--model``, with the Provenance checker of the final answer (``None`` with ``--no-check``)."""
    from syncheck.scorer import Scorer

    scorer = Scorer(model, device=device, dtype=dtype, aggregator=None if aggregator == "none" else aggregator)
    if not check:
        return scorer, None
    from fod.generator import FINAL_CHECK_TOP_K
    from syncheck.checking.provenance import ProvenanceChecker

    return scorer, ProvenanceChecker.for_scorer(scorer, top_k=FINAL_CHECK_TOP_K)


def answerer(
    method: str, scorer: Any, checker: Any, *, tau1: float | None, tau2: float | None, num_samples: int, num_beams: int,
    alpha: float, max_new_tokens: int, max_sentences: int, seed: int, temperature: float | None, top_p: float,
    stop: tuple[str, ...], support: str | None = None, decode: str | None = None,
) -> Callable[..., Any]:
    """The decoder of ``method``, built once: a function that answers ``(question=..., context=...)`` with it and
    returns its :class:`~fod.results.GenerationResult`.

    Every decoder of :data:`fod.baselines.METHODS` is built and called the same way, with one
    :class:`~fod.config.FODConfig` of the command's settings: each reads the ones in its ``settings`` (``tau1`` is
    the abstention threshold too), and a decoder that ``samples`` (fod, rerank) gets sampled candidates, the others
    greedy decoding. ``checker``: the final answer's checker, or ``None``. ``support``: FOD's support model (an
    alignment spec; :data:`SUPPORTED_METHODS` only). ``decode``: what FOD's greedy phases decode on
    (:data:`DECODE_METHODS` only); ``None``: the config's default.
    """
    from fod.config import FODConfig
    from syncheck.decoding import Decoding

    cls = decoder_class(method)
    base = FODConfig.for_method(method) if method in FOD_METHODS else FODConfig()
    if temperature is None and cls.samples:
        temperature = base.decoding_or(cls.candidate_sampling).temperature
    decoding = Decoding(max_new_tokens=max_new_tokens, stop=stop, **(
        {"do_sample": True, "temperature": temperature, "top_p": top_p, "seed": seed} if cls.samples else {}))
    given = {"tau1": tau1, "tau2": tau2, "num_samples": num_samples, "num_beams": num_beams,
             "max_sentences": max_sentences, "decoding": decoding,
             "alpha": alpha, **({"decode": decode} if decode is not None else {})}
    config = base.replace(**{name: value for name, value in given.items() if name in cls.settings})
    extra = {"support": support} if support is not None else {}
    return functools.partial(cls(scorer, checker=checker, **extra).generate, config=config)


def _answer_row(item, answer: Callable[..., Any], method: str) -> dict[str, Any]:
    """The output row of one input item: its answer's JSON with the item's ``id`` and ``error`` ``None``, or an
    error row (the same fields, empty) whose ``error`` says what to fix. Settings errors stop the run."""
    from fod.results import GenerationResult
    from syncheck.decoding import SettingsError
    from syncheck.records import RecordError

    if isinstance(item, RecordError):
        return {"id": item.record_id, **GenerationResult("", [], method).to_json(), "error": str(item)}
    try:
        result = answer(question=item.question, context=item.context)
    except SettingsError:
        raise  # the command's settings, the same for every row: the run stops with what to change
    except Exception as exc:  # one bad row must not stop the others
        error = (f"could not answer this row ({exc.__class__.__name__}: {exc}); check its context and question, or "
                 "answer it alone with `fod generate --context FILE --question TEXT` to see the whole error")
        return {"id": item.id, **GenerationResult("", [], method, warnings=list(item.warnings)).to_json(),
                "error": error}
    row = {"id": item.id, **result.to_json(), "error": None}
    row["warnings"] = [*item.warnings, *row["warnings"]]
    return row


def _print_result(result, as_json: bool) -> None:
    """One answer on standard output: its JSON object, or its text with each sentence's score."""
    if as_json:
        from syncheck.io import dumps_row, guard_row

        click.echo(dumps_row(guard_row(result.to_json())), nl=False)
        return
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    click.echo(result.text)
    click.echo("")
    for s in result.sentences:
        score = "  n/a" if s.score is None else f"{s.score:.2f}"
        final = "" if s.final_score is None else f" final {s.final_score:.2f}"
        click.echo(f"[{score}{final}] {s.text}")
    if result.response_score is not None:
        click.echo(f"response score: {result.response_score:.2f}")
    if "tau1" in result.trace:
        click.echo(f"\nthresholds: tau1 {result.trace['tau1']:.2f}, tau2 {result.trace['tau2']:.2f} "
                   f"({result.trace.get('thresholds_from')})", err=True)
    if result.trace.get("backtrack"):
        bt = result.trace["backtrack"]
        click.echo(f"\nbacktracked before sentence {bt['sentence_index'] + 1} (score {bt['score']:.2f}): {bt['text']}",
                   err=True)
    if result.final_check is not None:
        click.echo(f"\nProvenance factuality: {result.final_check.get('factuality')}", err=True)
    sys.stdout.flush()


def _parse_context(raw: str):
    """The ``--context`` file's text, or its chunks when it holds a JSON list of strings."""
    stripped = raw.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            return raw
        if isinstance(value, list) and all(isinstance(c, str) for c in value):
            return value
    return raw
