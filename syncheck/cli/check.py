"""``syncheck check``: Provenance answer check for every record of a JSONL file."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Iterable, Iterator

import click
from click.core import ParameterSource

from syncheck.cli.common import (
    UserError,
    count_lines,
    device_option,
    dtype_option,
    preset_option,
    read_records,
    resume_point,
    write_rows,
)


@click.command()
@click.argument("input_path", metavar="INPUT.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output JSONL (one row per input line, same order). Default: standard output.")
@click.option("--relevance", default=None,
              help="Relevance scorer: bm25, minilm, cross-encoder[:<hub id or dir>] (paper: mxbai-rerank-base-v1). "
                   "Default: bm25 (the best offline one measured).")
@click.option("--nli", default=None,
              help="Support scorer: syncheck[:<model>] (SynCheck's own score of the answer given each source), "
                   "verifier[:<dir>] (the cross-encoder shipped in the package, or one `syncheck verifier train` "
                   "wrote; a QA answer checked whole with its question, a summary sentence by sentence), "
                   "reader[:<dir>] (the span reader shipped in the package: the share of the span it reads as the "
                   "answer that the answer names; in a mean it checks only bare answers that name the context), "
                   "probe:<dir> (a head `syncheck verifier train --probe` fitted on a causal LM's states, read like "
                   "the verifier), embedding, lexical, llm-judge[:<model>], nli:<hub id or dir>, alignscore[:<ckpt>], "
                   "or several joined by + (the mean of their supports, e.g. syncheck+llm-judge:qwen2.5-coder-1.5b; "
                   "member@w gives one its share w of the mean, the others sharing the rest). "
                   "Default: syncheck+verifier+reader@0.2 (the best offline one measured; with --model, "
                   "syncheck:<model>; summaries: see --summary-nli; paper: "
                   "nli:vectara/hallucination_evaluation_model).")
@click.option("--summary-nli", default=None,
              help="Support scorer of the answers checked as summaries (see --task), any --nli spec. Default: "
                   "verifier where --nli is the default (measured better on summaries), else --nli's.")
@click.option("--summary-statistic", default=None, type=click.Choice(["mean", "min"]),
              help="How a verifier-kind summary support (verifier, probe) reads a summary from its sentences' "
                   "scores: mean (the default, measured better on HaluEval summaries) or min (the least supported "
                   "sentence's).")
@click.option("--summary-lexical-weight", default=None, type=click.FloatRange(0, 1),
              help="Weight of a summary's mean local support (the share of each sentence's words one context "
                   "sentence holds) in a verifier-kind summary support's reading of it. Default 0.5 (measured "
                   "better on HaluEval and RAGTruth summaries); 0 reads the verifier alone.")
@preset_option
@click.option("--model", default=None,
              help="Scoring model of the syncheck support backend: alias (smollm2-135m, qwen2.5-coder-1.5b), hub id, "
                   "directory or .gguf (default: the embedded default; --preset quality: qwen2.5-coder-1.5b). "
                   "Other --nli backends name their own model.")
@click.option("--top-k", default=None, type=click.IntRange(min=1), help="Keep the K most relevant chunks (TopK).")
@click.option("--top-p", default=1.0, show_default=True, type=click.FloatRange(0, 1, min_open=True),
              help="Keep the minimal most-relevant chunks whose relevance probability reaches P (TopP; unless "
                   "--top-k). "
                   "1.0 keeps every chunk: the measured best with the joined premise.")
@click.option("--aggregation", default="max", show_default=True, type=click.Choice(["min", "max", "weighted"]),
              help="How the sources' supports combine into the answer's factuality.")
@device_option
@dtype_option
@click.option("--batch-size", default=16, show_default=True, type=click.IntRange(min=1), help="Pairs per NLI batch.")
@click.option("--claim", default="paper", show_default=True,
              type=click.Choice(["paper", "answer", "sentences"]),
              help='What an --nli backend that reads no question checks. paper: "The answer to question Q is A." '
                   "(Provenance); answer: the answer alone (measured better with --nli lexical); sentences: each "
                   "sentence on its own, the answer as supported as its least supported sentence (measured worse "
                   "than the whole answer on summaries with the Qwen judge).")
@click.option("--premise", default=None, type=click.Choice(["each", "joined"]),
              help="each: every selected source is checked on its own and --aggregation combines them (the paper); "
                   "joined: the selected sources, in context order, are one premise, checked once. "
                   "Default: joined, the measured best.")
@click.option("--query", default=None, type=click.Choice(["question", "question+answer"]),
              help="What relevance ranks the chunks against: the question (the paper) or the question and the "
                   "answer (the answer alone when there is no question). Default: question, the measured best.")
@click.option("--task", default="auto", show_default=True, type=click.Choice(["auto", "qa", "summary"]),
              help="What the answers are. summary: summaries of their documents; the syncheck support then also leans "
                   "on each answer's lexical support (half its weight). qa: answers to their questions. auto: a "
                   "summary where the row has no question or its question asks for one (\"Summarize the document.\"), "
                   "else qa.")
@click.option("--trust-remote-code", is_flag=True,
              help="Let an nli:<id> model run its own code (needed by vectara/hallucination_evaluation_model).")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run: keep the complete rows already in -o and check only the rest.")
def check(input_path, output_path, relevance, nli, summary_nli, summary_statistic, summary_lexical_weight, model, top_k,
          top_p, aggregation, device, dtype, batch_size, claim, premise, query, task, trust_remote_code, resume):
    """Check each answer of INPUT.jsonl against its context (Provenance).

    Each input line: {"id": ..., "context": "..." or ["chunk", ...],
    "question": "..." (optional), "response": "..."}. Each output line:
    {"id", "factuality", "sources": [{"index", "weight", "support"}], "best_source", "warnings", "error"}.
    Exits with status 1 when every row failed.
    """
    from syncheck.checking.provenance import (
        DEFAULT_NLI,
        DEFAULT_PREMISE,
        DEFAULT_QUERY,
        DEFAULT_RELEVANCE,
        ProvenanceChecker,
    )

    total = count_lines(input_path)
    done = resume_point(output_path, input_path, total) if resume else 0
    sources = click.get_current_context().get_parameter_source
    if sources("summary_nli") == ParameterSource.DEFAULT_MAP and sources("nli") == ParameterSource.COMMANDLINE:
        summary_nli = None  # the preset's summary support goes with its own --nli; the user's --nli checks them all
    takes_model = nli is None or nli == "syncheck"
    nli = nli or DEFAULT_NLI
    from_command_line = sources("model") == ParameterSource.COMMANDLINE
    if model and from_command_line and not takes_model:  # a preset's model only applies where it can
        raise UserError(f"--model sets the model of the syncheck support, not of --nli {nli}; name the model in the "
                        "--nli spec instead (e.g. syncheck:<model>, llm-judge:<model>) and drop --model")
    if model and takes_model:
        nli = support_with_model(nli, model)
    if click.get_current_context().get_parameter_source("dtype") == ParameterSource.DEFAULT:
        dtype = None  # float32 for every model, but a probe reads its LM in the dtype its head was fitted in
    try:
        checker = ProvenanceChecker(
            relevance or DEFAULT_RELEVANCE, nli, top_k=top_k, top_p=top_p, aggregation=aggregation,
            device=device, dtype=dtype, batch_size=batch_size, trust_remote_code=trust_remote_code,
            claim=claim, premise=premise or DEFAULT_PREMISE, query=query or DEFAULT_QUERY, task=task,
            summary_nli=summary_nli, summary_statistic=summary_statistic, summary_lexical_weight=summary_lexical_weight,
        )
    except (OSError, ValueError) as exc:  # unknown spec or a model that cannot be loaded: say why, no traceback
        raise click.ClickException(str(exc)) from None
    items = itertools.islice(read_records(input_path), done, None)
    write_rows(checked_rows(checker, items), output_path, total=total, done=done, resume=resume, desc="checking",
               verb="checked")


def checked_rows(checker: Any, items: Iterable[Any]) -> Iterator[dict]:
    """The output row of each item, in order: its check, with the warnings reading it gave (e.g. a duplicate id)."""
    items, again = itertools.tee(items)
    for item, result in zip(again, checker.check_records(items)):
        row = result.to_json()
        error = row.pop("error")
        yield {**row, "warnings": list(getattr(item, "warnings", ())), "error": error}


def support_with_model(nli: str, model: str) -> str:
    """The support spec when ``--model`` names the scoring model: ``syncheck:<model>`` alone, since the verifier's share
    of the default was measured with the default model only; the default itself when ``model`` is the default model
    (``--preset default``), so naming it changes nothing."""
    from syncheck.checking.provenance import DEFAULT_NLI
    from syncheck.model.models import DEFAULT_MODEL

    return nli if (nli, model) == (DEFAULT_NLI, DEFAULT_MODEL) else f"syncheck:{model}"
