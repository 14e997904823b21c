"""``syncheck score``: per-sentence features for every record of a JSONL file."""

from __future__ import annotations

import itertools
from pathlib import Path

import click

from syncheck.cli.common import (
    count_lines,
    device_option,
    dtype_option,
    model_option,
    preset_option,
    read_records,
    resume_point,
    write_rows,
)


def _alignment_spec(value: str) -> str:
    """Validate an ``--alignment`` spec by its form (the backend loads later, with the scorer)."""
    from features.alignment import parse_alignment_spec

    if value != "none":
        try:
            parse_alignment_spec(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


@click.command()
@click.argument("input_path", metavar="INPUT.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output JSONL (one row per input line, same order). Default: standard output.")
@preset_option
@model_option
@device_option
@dtype_option
@click.option(
    "--batch-size", default=4, show_default=True, type=click.IntRange(min=1), help="Records per forward pass."
)
@click.option("--max-length", default=None, type=click.IntRange(min=16), help="Cap on prompt+response tokens (default: "
                                                                              "model window).")
@click.option(
    "--alignment",
    default="lexical",
    show_default=True,
    callback=lambda _ctx, _param, value: _alignment_spec(value),
    help="Backend of the align_score feature: lexical, embedding[:<encoder>], llm-judge[:<model>], "
    "nli:<hub id or dir>, alignscore[:<ckpt path or hub id>], verifier[:<dir>], probe:<dir>, or none.",
)
@click.option("--align-with-question", is_flag=True,
              help="align_score checks 'Question: Q / Answer: <sentence>' against the context, not the sentence alone "
                   "(for short answers such as 'The answer is X.'; rows without a question use the sentence). "
                   "Meant for "
                   "model backends (llm-judge, nli, alignscore): the lexical backend would also count the question's "
                   "words.")
@click.option("--lid/--no-lid", default=False, show_default=True,
              help="Compute the lid_layer_<L> features (a reference set is built on first use; not used by the "
                   "default aggregator).")
@click.option("--no-kl", is_flag=True, help="Skip the without-context pass (no KL and PMI features).")
@click.option("--lookback", is_flag=True,
              help="Record each attention head's attention to the context (lookback_ratio; the lookback_lens probe's "
                   "input). Not used by the default aggregator.")
@click.option("--no-text-checks", is_flag=True, help="Skip the string checks (unsupported_specifics, "
                                                     "novel_bigram_share, local_support).")
@click.option("--vectors", is_flag=True,
              help="Also write each sentence's probe vectors (base64 float32), to train a probe with `syncheck train`.")
@click.option("--show", is_flag=True, help="Also print a per-sentence table to standard output.")
@click.option("--engine", default="local", show_default=True, type=click.Choice(["local", "ray"]),
              help="local: this process; ray: Ray Data actors, one model replica each (pip install 'syncheck[ray]').")
@click.option("--ray-address", default=None,
              help="--engine ray: cluster address (ray://HOST:10001 or auto). Default: $RAY_ADDRESS, else a local Ray.")
@click.option("--num-replicas", default=1, show_default=True, type=click.IntRange(min=1),
              help="--engine ray: model replicas (actors); each loads the model once.")
@click.option("--ray-batch-size", default=4, show_default=True, type=click.IntRange(min=1),
              help="--engine ray: scoring batches (of --batch-size records) per actor call.")
@click.option("--ray-cpus-per-replica", default=1.0, show_default=True, type=click.FloatRange(min=0.1),
              help="--engine ray: CPUs reserved per replica (Ray sets its torch threads to this).")
@click.option("--ray-gpus-per-replica", default=0.0, show_default=True, type=click.FloatRange(min=0.0),
              help="--engine ray: GPUs per replica (use with --device cuda).")
@click.option("--aggregator", default="default", show_default=True,
              help="Sentence scores: 'default' (the aggregator `syncheck calibrate` registered for --model, else the "
                   "one shipped for smollm2-135m when that is the model, else the shipped portable one), a directory "
                   "written by `syncheck train` / `syncheck calibrate`, or none (features only).")
@click.option("--response-aggregation", default=None, type=click.Choice(["learned", "min", "mean"]),
              help="response_score = learned (the aggregator's response verdict: P(the whole response is faithful), "
                   "trained on response labels), min (the least faithful sentence decides) or mean of the sentence "
                   "scores. Default: learned when the aggregator has a response model (the shipped default does), "
                   "else min. With final scores, it aggregates those, with the final model's verdict.")
@click.option("--final-scores/--no-final-scores", default=None,
              help="Also score each sentence with the aggregator's final (whole-answer) model, which reads each "
                   "feature against the response's own level: final_score beside the live score, and response_score "
                   "from those. Default: when the aggregator has one (the shipped default does) and its features are "
                   "on.")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run: keep the complete rows already in -o and score only the rest.")
def score(
    input_path, output_path, model, device, dtype, batch_size, max_length, alignment, align_with_question, lid, no_kl,
    lookback, no_text_checks, vectors, show, engine, ray_address, num_replicas, ray_batch_size, ray_cpus_per_replica,
    ray_gpus_per_replica, aggregator, response_aggregation, final_scores, resume,
):
    """Compute SynCheck's per-sentence features for INPUT.jsonl.

    Each input line: {"id": ..., "context": "..." or ["chunk", ...],
    "question": "..." (optional), "response": "..."}.
    """
    total = count_lines(input_path)
    scorer_kwargs = dict(
        model=model,
        device=device,
        dtype=dtype,
        alignment=None if alignment == "none" else alignment,
        align_with_question=align_with_question,
        lid="auto" if lid else None,
        kl=not no_kl,
        lookback=lookback,
        text_checks=not no_text_checks,
        vectors=vectors,
        max_length=max_length,
        batch_size=batch_size,
        aggregator=None if aggregator == "none" else aggregator,
        response_aggregation=response_aggregation,
        final_scores=final_scores,
    )
    done = resume_point(output_path, input_path, total) if resume else 0
    # Restart on a batch boundary so every batch holds the same records as in an uninterrupted run (features
    # depend on batch composition in their last bits); rows of a half-written batch that are already in the
    # file are recomputed for that but not written again.
    start = done - done % batch_size
    items = itertools.islice(read_records(input_path), start, None)
    click.echo(f"loading model {model} ({engine} engine) ...", err=True)
    if engine == "ray":
        from syncheck.runners.ray_runner import RayNotInstalledError, import_ray, score_ray

        try:
            import_ray()
        except RayNotInstalledError as exc:
            raise click.ClickException(str(exc)) from None
        rows = score_ray(
            items, scorer_kwargs, address=ray_address, num_replicas=num_replicas, ray_batch_size=ray_batch_size,
            num_cpus_per_replica=ray_cpus_per_replica, num_gpus_per_replica=ray_gpus_per_replica,
        )
    else:
        from syncheck.runners.local import score_local

        rows = score_local(items, scorer_kwargs)
    write_rows(itertools.islice(rows, done - start, None), output_path, total=total, done=done, resume=resume,
               group_size=batch_size, show=_show if show else None)


def _show(row: dict) -> None:
    lead = f"  response_score={row['response_score']:.2f}" if row.get("response_score") is not None else ""
    click.echo(f"\n== {row['id']}{lead}" + (f"  ERROR: {row['error']}" if row["error"] else ""))
    for w in row["warnings"]:
        click.echo(f"   warning: {w}")
    for s in row["sentences"]:
        f = s["features"]
        cols = "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in f.items())
        lead = f"[{s['score']:.2f}] " if "score" in s else ""
        click.echo(f"  - {lead}{s['text'][:90]}\n      {cols}")
