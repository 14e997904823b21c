"""The ``fod`` command line: ``fod generate``."""

from __future__ import annotations

import json
import sys

import click

from fod import __version__
from syncheck.cli.common import CommandGroup, device_option, dtype_option, model_option, preset_option


@click.group(cls=CommandGroup)
@click.version_option(__version__, prog_name="fod")
def main() -> None:
    """Faithfulness-oriented decoding of local LLMs."""
    from syncheck.cli.common import quiet_transformers

    quiet_transformers()


@main.command()
@click.option("--context", "context_path", required=True, type=click.File("r", encoding="utf-8"),
              help="File holding the retrieved context ('-' for standard input). A JSON list of strings is taken as chunks.")
@click.option("--question", required=True, help="The user's question.")
@click.option("--method", default="fod", show_default=True, type=click.Choice(["fod", "fod-bt", "greedy", "abstain", "rerank", "cad"]))
@preset_option
@model_option
@click.option("--aggregator", default="default", show_default=True, help="Aggregator directory, 'default' (calibrated for --model, else shipped, else portable), or "
                   "'none' (no scores: greedy/CAD only).")
@click.option("--tau1", default=None, type=click.FloatRange(0, 1),
              help="Backtrack threshold (FOD), abstention threshold (abstain). Default: the value tuned for the "
                   "aggregator (meta.json 'decoding'), else the paper's 0.7.")
@click.option("--tau2", default=None, type=click.FloatRange(0, 1),
              help="Sample pruning threshold (FOD). Default: the aggregator's tuned value, else the paper's 0.85.")
@click.option("-S", "--num-samples", default=6, show_default=True, type=click.IntRange(min=1))
@click.option("-K", "--num-beams", default=2, show_default=True, type=click.IntRange(min=1))
@click.option("--alpha", default=0.5, show_default=True, type=float, help="CAD contrast strength.")
@click.option("--max-new-tokens", default=256, show_default=True, type=click.IntRange(min=1))
@click.option("--max-sentences", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the sampled candidates (fod, rerank).")
@click.option("--temperature", default=1.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Temperature of the sampled candidates (fod, rerank).")
@click.option("--top-p", default=0.95, show_default=True, type=click.FloatRange(0, 1, min_open=True),
              help="Top-p of the sampled candidates (fod, rerank).")
@click.option("--stop", multiple=True, help="Stop string (repeatable): the answer ends before it.")
@device_option
@dtype_option
@click.option("--check/--no-check", default=True, show_default=True, help="Check the final answer with Provenance.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def generate(context_path, question, method, model, aggregator, tau1, tau2, num_samples, num_beams, alpha,
             max_new_tokens, max_sentences, seed, temperature, top_p, stop, device, dtype, check, as_json):
    """Answer QUESTION from the context, scoring each sentence; steer away from unfaithful ones."""
    from fod.baselines import METHODS
    from syncheck.scorer import Scorer

    raw = context_path.read()
    context = _parse_context(raw)
    if not (context if isinstance(context, str) else "".join(context)).strip():
        raise click.UsageError("the context is empty: pass a file with the retrieved text (--context FILE)")
    click.echo(f"loading {model} ...", err=True)
    scorer = Scorer(model, device=device, dtype=dtype, aggregator=None if aggregator == "none" else aggregator)
    checker = None
    if check:
        from syncheck.provenance import ProvenanceChecker

        from fod.generator import FINAL_CHECK_TOP_K

        checker = ProvenanceChecker.for_scorer(scorer, top_k=FINAL_CHECK_TOP_K)
    from syncheck.decoding import Decoding

    greedy = Decoding(max_new_tokens=max_new_tokens, stop=stop)
    sampled = Decoding(max_new_tokens=max_new_tokens, do_sample=True, temperature=temperature, top_p=top_p,
                       seed=seed, stop=stop)
    common = {"checker": checker}
    texts = {"question": question, "context": context, "max_sentences": max_sentences}
    if method in ("fod", "fod-bt"):
        result = METHODS["fod"](scorer, **common).generate(
            **texts, tau1=tau1, tau2=tau2, num_samples=num_samples, num_beams=num_beams, decoding=sampled,
            backtrack_only=method == "fod-bt")
    elif method == "abstain":
        result = METHODS["abstain"](scorer, threshold=tau1, **common).generate(**texts, decoding=greedy)
    elif method == "cad":
        result = METHODS["cad"](scorer, alpha=alpha, **common).generate(**texts, decoding=greedy)
    elif method == "rerank":
        result = METHODS["rerank"](scorer, **common).generate(**texts, num_samples=num_samples, decoding=sampled)
    else:
        result = METHODS["greedy"](scorer, **common).generate(**texts, decoding=greedy)
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
        click.echo(f"\nbacktracked before sentence {bt['sentence_index'] + 1} (score {bt['score']:.2f}): {bt['text']}", err=True)
    if result.final_check is not None:
        click.echo(f"\nProvenance factuality: {result.final_check.get('factuality')}", err=True)
    sys.stdout.flush()


def _parse_context(raw: str):
    stripped = raw.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            return raw
        if isinstance(value, list) and all(isinstance(c, str) for c in value):
            return value
    return raw
