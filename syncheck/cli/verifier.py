"""``syncheck verifier train``: fit a verifier for a domain, and ``syncheck verifier info``: what a verifier was built
from.

``train`` writes, in its output directory, in order (each step is skipped when its output is already there for the
same recipe, so an interrupted run picks up where it stopped):

1. ``pairs.jsonl`` and ``dev_pairs.jsonl``: the training pairs (documents, labelled records, HaluEval's training
   ranges, answers a model wrote), cut to the scorer's windows and thinned by the claim-only artefact check, and a
   share of the source documents held out; ``data.json``: the recipe and the check's figures;
2. ``checkpoints/``: transformers ``Trainer`` checkpoints (a run resumes from the last one);
3. ``verifier.safetensors``, ``config.json``, ``manifest.json`` (:mod:`features.model_manifest`): the verifier
   (``--alignment verifier:<dir>`` in ``syncheck score``, ``calibrate`` and ``check``).

With ``--probe MODEL`` it fits a probe verifier instead (:mod:`syncheck.training.probe_verifier_build`): step 2 caches
the frozen LM's hidden states under ``states/``, and step 3 writes ``head.json`` and ``manifest.json``
(``--alignment probe:<dir>``).

``syncheck verifier average OUT A B`` writes a verifier whose weights average A's and B's
(:mod:`syncheck.training.verifier_averaging`).

``syncheck verifier reader`` fits a span reader (:mod:`syncheck.training.reader_training`): ``checkpoints/``, then
``reader.safetensors``, ``config.json`` and ``manifest.json`` (``--alignment reader:<dir>``).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from syncheck.cli.common import CommandGroup


@click.group(cls=CommandGroup)
def verifier() -> None:
    """Train and inspect verifiers: cross-encoders giving P(the context supports the claim)."""


@verifier.command()
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--documents", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="your documents, unlabelled (.txt files, folders of them, or .jsonl with 'context'): their "
                   "sentences and edits of them become pairs")
@click.option("--labelled", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="labelled records in the `syncheck score` format with label, sentence_labels or RAGTruth labels")
@click.option("--labelled-name", default=None,
              help="what the manifest calls the --labelled records and --documents [default: your labelled records "
                   "and documents]")
@click.option("--labelled-licence", default=None,
              help="their licence, as the manifest states it [default: yours]")
@click.option("--pairs", "pair_files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="labelled pairs: JSON lines (.jsonl or .jsonl.gz) of premise, hypothesis, label (1 = supported) "
                   "and an optional src; e.g. the files of ../shared/data/nli/")
@click.option("--pairs-per-source", type=click.IntRange(1), default=None,
              help="at most this many pairs of each sub-source (src) of the --pairs files [default: all]")
@click.option("--drop-source", "drop_sources", multiple=True,
              help="a sub-source (src) of the --pairs files to leave out, e.g. sick (non-commercial)")
@click.option("--halueval", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="HaluEval's directory: adds its training ranges (never its held-out ranges)")
@click.option("--halueval-records", default="qa=3000,dialogue=3000,summarization=1500", show_default=True,
              help="records per HaluEval file, the first of its training ranges")
@click.option("--writer", default=None, help="a model that answers HaluEval QA questions for model-written pairs "
                                             "(e.g. smollm2-135m); off by default")
@click.option("--writer-records", default=0, show_default=True, help="QA records the writer answers")
@click.option("--sentences-per-document", default=1, show_default=True)
@click.option("--distractors", "distractors_per_record", type=click.IntRange(1, 3), default=1, show_default=True,
              help="distractor answers per HaluEval QA record (another entity of the passage as the answer)")
@click.option("--conflict-records", default=0, show_default=True, type=click.IntRange(0),
              help="knowledge-conflict items (four pairs each: the answer swapped in its passage) from HaluEval QA's "
                   "first training range; they teach the model to read the passage, not its own memory")
@click.option("--conflict-distractors", default=0, show_default=True, type=click.IntRange(0, 3),
              help="per knowledge-conflict item, distractor answers (another entity of the swapped passage) against "
                   "the substitute; needs --conflict-records")
@click.option("--thinning", type=click.Choice(["balance", "ratio"]), default="balance", show_default=True,
              help="how the claim-only artefact check thins pairs: even labels in each score tenth (balance), or "
                   "each tenth in the labels' overall ratio (ratio: keeps labelled rows with few unsupported ones)")
@click.option("--base", default=None, help="the encoder to start from (default: the packaged all-MiniLM-L6-v2)")
@click.option("--init", default=None,
              help="go on training this verifier ('verifier': the shipped one, or a verifier directory) instead of "
                   "a fresh head on the base, for a domain with few labelled rows; or start a fresh head on a span "
                   "reader's encoder ('reader': the shipped one, or a reader directory)")
@click.option("--max-length", default=None, type=int,
              help="tokens per (context window, claim) pair [default: 256; with --probe, 1536]")
@click.option("--probe", "probe_model", default=None,
              help="fit a probe on this frozen causal LM's hidden states instead of training a cross-encoder (e.g. "
                   "qwen2.5-coder-1.5b); --epochs, --learning-rate, --max-steps, --base and --init do not apply")
@click.option("--layers", default="-1,-8", show_default=True, help="with --probe: the hidden states it reads")
@click.option("--c", "probe_c", default=0.05, show_default=True,
              help="with --probe: the logistic regression's inverse regularisation")
@click.option("--dtype", default="bfloat16", show_default=True, help="with --probe: the LM's dtype")
@click.option("--epochs", default=1.0, show_default=True)
@click.option("--batch-size", default=16, show_default=True)
@click.option("--learning-rate", default=5e-5, show_default=True)
@click.option("--max-steps", default=-1, show_default=True, help="stop after this many steps (-1: the epochs decide)")
@click.option("--sampling", type=click.Choice(["random", "length"]), default="random", show_default=True,
              help="training order: random, or batches of pairs of similar length (faster on pools of short pairs)")
@click.option("--dev-share", default=0.05, show_default=True, help="share of source documents held out as dev")
@click.option("--seed", default=0, show_default=True)
@click.option("--device", default=None, help="torch device for the writer (training uses what Trainer finds)")
@click.option("--progress/--no-progress", default=True, show_default=True)
def train(out: Path, documents, labelled, labelled_name, labelled_licence, pair_files, pairs_per_source, drop_sources,
          halueval, halueval_records,
          writer, writer_records,
          sentences_per_document, distractors_per_record, conflict_records, conflict_distractors, thinning, base, init,
          max_length, probe_model, layers, probe_c, dtype, epochs, batch_size, learning_rate, max_steps, sampling,
          dev_share, seed, device, progress) -> None:
    """Fit a verifier into OUT from labelled pairs, your documents and labelled records (and HaluEval's training
    ranges)."""
    from syncheck.training.sources import parse_record_counts
    from syncheck.training.verifier_build import build_verifier
    from syncheck.training.verifier_dataset import DataRecipe
    from syncheck.training.verifier_training import TrainSettings

    try:
        counts = parse_record_counts(halueval_records)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--halueval-records")
    try:
        recipe = DataRecipe(
            halueval=str(halueval) if halueval else None, halueval_records=counts, writer=writer,
            writer_records=writer_records, labelled=tuple(map(str, labelled)), documents=tuple(map(str, documents)),
            sentences_per_document=sentences_per_document, distractors_per_record=distractors_per_record,
            conflict_records=conflict_records, conflict_distractors=conflict_distractors,
            pairs=tuple(map(str, pair_files)), pairs_per_source=pairs_per_source, drop_sources=tuple(drop_sources),
            thinning=thinning, seed=seed)
    except ValueError as exc:
        raise click.UsageError(str(exc))
    if not (recipe.halueval or recipe.labelled or recipe.documents or recipe.pairs):
        raise click.UsageError("give something to train on: --pairs, --documents, --labelled or --halueval")
    command = given_command(click.get_current_context())
    if probe_model:
        if base or init:
            raise click.UsageError("--probe reads a frozen LM: drop --base and --init")
        from syncheck.training.probe_verifier_build import build_probe

        try:
            layer_ids = [int(v) for v in layers.split(",")]
        except ValueError:
            raise click.BadParameter("give hidden-state indices joined by commas, e.g. -1,-8", param_hint="--layers")
        manifest = build_probe(out, recipe, probe_model, dtype=dtype, layers=layer_ids, c=probe_c,
                               max_premise_tokens=max_length or 1536, batch_size=batch_size, command=command,
                               dev_share=dev_share, device=device, progress=progress, echo=click.echo)
        click.echo(f"probe verifier written to {out} ({model_size(manifest) / 1e3:.0f} KB); use it with "
                   f"--alignment probe:{out}")
        return
    if init:
        from syncheck.training.verifier_training import init_base

        try:
            start_base = init_base(init)
        except (OSError, ValueError) as exc:
            raise click.BadParameter(f"{exc} (or pass 'verifier' or 'reader' for the shipped ones)",
                                     param_hint="--init")
        if base and base != start_base:
            raise click.BadParameter(f"{init} was trained on the base {start_base!r}; leave --base out to go on "
                                     "training it, or drop --init to start a fresh head on another base",
                                     param_hint="--base")
        base = start_base
    settings = TrainSettings(**({"base": base} if base else {}), init=init, max_length=max_length or 256,
                             epochs=epochs, batch_size=batch_size, learning_rate=learning_rate, max_steps=max_steps,
                             sampling=None if sampling == "random" else sampling, seed=seed)
    try:
        manifest = build_verifier(out, recipe, settings, command=command, dev_share=dev_share, device=device,
                                  progress=progress, echo=click.echo, labelled_as=(labelled_name, labelled_licence))
    except (FileExistsError, ValueError) as exc:  # another recipe in OUT; pairs that give no training set
        raise click.ClickException(str(exc))
    click.echo(f"verifier written to {out} ({model_size(manifest) / 1e6:.1f} MB); use it with "
               f"--alignment verifier:{out}")


@verifier.command()
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--halueval", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="HaluEval's directory: its QA training ranges' right answers are examples")
@click.option("--halueval-records", default=2800, show_default=True, type=click.IntRange(0),
              help="the first QA records of HaluEval's training ranges to read")
@click.option("--conflict/--no-conflict", default=False, show_default=True,
              help="with --halueval or --qa: also a knowledge-conflict copy of each record whose answer can be swapped")
@click.option("--qa", "qa_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="the extractive QA directory (../shared/data/qa: XQuAD's Wikipedia paragraphs, COVID-QA's "
                   "articles): the questions of --qa-half's documents are examples")
@click.option("--qa-half", type=click.Choice(["selection", "test"]), default="selection", show_default=True,
              help="with --qa: which half of its documents (split by article) to read; leave the other for checks")
@click.option("--answers", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON lines of your own {question, context, answer} (or SQuAD's answers list); answers not in "
                   "their context are skipped")
@click.option("--base", default=None, help="the encoder to start from (default: the packaged all-MiniLM-L6-v2)")
@click.option("--max-length", default=384, show_default=True, help="tokens per (question, passage window) input")
@click.option("--epochs", default=2.0, show_default=True)
@click.option("--batch-size", default=16, show_default=True)
@click.option("--learning-rate", default=1e-4, show_default=True)
@click.option("--max-steps", default=-1, show_default=True, help="stop after this many steps (-1: the epochs decide)")
@click.option("--seed", default=0, show_default=True)
@click.option("--progress/--no-progress", default=True, show_default=True)
def reader(out: Path, halueval, halueval_records, conflict, qa_dir, qa_half, answers, base, max_length, epochs,
           batch_size, learning_rate, max_steps, seed, progress) -> None:
    """Fit a span reader into OUT: it points at the passage's answer to a question (``--alignment reader:OUT``)."""
    from syncheck.jsonl import iter_jsonl
    from syncheck.training.conflict_halves import QA_FILES, QA_LICENCES, SPLIT_SEED, qa_file_path
    from syncheck.training.reader_training import (
        CONFLICT_RECIPE,
        ReaderSettings,
        build_reader,
        halueval_answers,
        halueval_conflicts,
        qa_file_answers,
        qa_file_conflicts,
        record_answers,
    )
    from syncheck.training.sources import HALUEVAL_TRAIN
    from syncheck.training.verifier_dataset import first_records

    if not (halueval or answers or qa_dir):
        raise click.UsageError("give something to train on: --answers, --halueval or --qa")
    right = halueval_answers(halueval, halueval_records) if halueval else []
    conflicts = halueval_conflicts(halueval, halueval_records) if halueval and conflict else []
    qa_sources = []  # (name, licence, examples)
    for source in QA_FILES if qa_dir is not None else ():
        path, licence = qa_file_path(qa_dir, source), QA_LICENCES[source]
        qa_sources.append((f"{QA_FILES[source]}, the {qa_half} half of its documents", licence,
                           qa_file_answers(path, qa_half)))
        if conflict:
            qa_sources.append((f"knowledge-conflict copies of {QA_FILES[source]}'s {qa_half} half", licence,
                               qa_file_conflicts(path, qa_half)))
    skipped, own_answers = 0, []
    for path in answers:
        own, n = record_answers(iter_jsonl(path))
        own_answers, skipped = own_answers + own, skipped + n
    examples = right + conflicts + [e for _, _, rows in qa_sources for e in rows] + own_answers
    if skipped:
        click.echo(f"{skipped} rows skipped: no question, or the answer is not in the context", err=True)
    settings = ReaderSettings(**({"base": base} if base else {}), max_length=max_length, epochs=epochs,
                              batch_size=batch_size, learning_rate=learning_rate, max_steps=max_steps, seed=seed)
    ranges = first_records(HALUEVAL_TRAIN["qa"], halueval_records) if halueval else ()
    data = {"halueval": str(halueval) if halueval else None, "halueval_qa_ranges": [list(r) for r in ranges],
            "conflict_answers": len(conflicts),
            "conflict_recipe": CONFLICT_RECIPE if conflicts else None, "answers_files": [str(p) for p in answers],
            "qa": str(qa_dir) if qa_dir else None, "qa_half": qa_half if qa_dir else None,
            "qa_split_seed": SPLIT_SEED if qa_dir else None, "skipped": skipped,
            "sources": [{"name": name, "licence": licence, "rows": len(rows)} for name, licence, rows in (
                ("HaluEval QA (the right answers of its training ranges)", "MIT", right),
                ("knowledge-conflict copies of those HaluEval QA records", "MIT", conflicts),
                *qa_sources,
                ("your answers files", "yours", own_answers)) if rows]}
    try:
        manifest = build_reader(out, examples, settings, command=given_command(click.get_current_context()),
                                data=data, progress=progress)
    except ValueError as exc:
        raise click.UsageError(str(exc))
    click.echo(f"reader written to {out} ({model_size(manifest) / 1e6:.1f} MB); use it with "
               f"--alignment reader:{out}")


@verifier.command()
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.argument("verifiers", nargs=-1, required=True, metavar="VERIFIER...")
@click.option("--weights", default=None, help="one weight per verifier, joined by commas, summing to 1 "
              "(default: equal weights)")
def average(out: Path, verifiers: tuple[str, ...], weights: str | None) -> None:
    """Write into OUT a verifier whose weights average those of VERIFIER... (directories, or 'shipped').

    The verifiers must share their base, head and frozen tensors: for example one trained on your domain and the
    shipped one. The average scores at the cost of one verifier.
    """
    from features.model_manifest import weights_sha256
    from syncheck.shipped_models import VERIFIER, shipped_model_dir
    from syncheck.training.verifier_averaging import average_verifiers

    dirs = [shipped_model_dir(VERIFIER) if v == "shipped" else Path(v) for v in verifiers]
    for d in dirs:
        if not d.is_dir():
            raise click.BadParameter(f"{d} is not a directory: give verifier directories, or 'shipped'",
                                     param_hint="VERIFIER...")
    try:
        shares = [float(w) for w in weights.split(",")] if weights else [1 / len(dirs)] * len(dirs)
    except ValueError:
        raise click.BadParameter("give numbers joined by commas, e.g. 0.5,0.5", param_hint="--weights")
    try:
        manifest = average_verifiers(dirs, shares, out, command=given_command(click.get_current_context()))
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc))
    click.echo(f"verifier written to {out} ({model_size(manifest) / 1e6:.1f} MB, sha256 "
               f"{weights_sha256(manifest)[:12]}); use it with --alignment verifier:{out}")


def model_size(manifest: dict) -> int:
    """Bytes of a model's files, as its manifest lists them."""
    return sum(f["size"] for f in manifest["files"].values())


def given_command(ctx: click.Context) -> str:
    """The command line as given (the options set on it, in the command's order), for the manifest."""
    from click.core import ParameterSource

    words = [f"syncheck verifier {ctx.info_name}"]
    for param in ctx.command.params:
        if ctx.get_parameter_source(param.name) != ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[param.name]
        if isinstance(param, click.Argument):
            words += [shlex.quote(str(v)) for v in (value if isinstance(value, (tuple, list)) else [value])]
        elif param.is_flag:
            words.append(param.opts[0] if value else param.secondary_opts[0])
        else:
            words += [f"{param.opts[0]} {shlex.quote(str(v))}" for v in (value if param.multiple else [value])]
    return " ".join(words)


def _flat(value: object, prefix: str = "") -> dict[str, object]:
    """A manifest's fields as ``{"a.b.c": value}`` (lists kept whole)."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, object] = {}
    for key, sub in value.items():
        out.update(_flat(sub, f"{prefix}.{key}" if prefix else str(key)))
    return out


def manifest_differences(a: dict, b: dict) -> list[str]:
    """The fields where two manifests differ, one ``field: a -> b`` line each (``absent`` where one lacks it)."""
    fa, fb = _flat(a), _flat(b)
    missing = object()

    def shown(value: object) -> str:
        return "absent" if value is missing else json.dumps(value)

    return [f"{key}: {shown(fa.get(key, missing))} -> {shown(fb.get(key, missing))}"
            for key in sorted(set(fa) | set(fb)) if fa.get(key, missing) != fb.get(key, missing)]


def _read_any_manifest(directory: Path | None) -> dict:
    """The manifest of a verifier, span reader or probe verifier directory (default: the shipped verifier), in the
    current schema (an older one upgraded)."""
    from features.model_manifest import read_manifest
    from syncheck.shipped_models import VERIFIER, shipped_model_dir

    try:
        return read_manifest(directory or shipped_model_dir(VERIFIER), ["verifier", "span-reader", "probe-verifier"])
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc))


@verifier.command()
@click.argument("directory", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--against", default=None, metavar="DIR|shipped",
              help="another verifier or probe directory, or 'shipped' (the shipped verifier): print only the fields "
                   "where the two manifests differ, e.g. to check a rebuild by the shipped manifest's own command")
def info(directory: Path | None, against: str | None) -> None:
    """Print a verifier's or a probe's manifest (default: the shipped verifier)."""
    manifest = _read_any_manifest(directory)
    if against is None:
        click.echo(json.dumps(manifest, indent=2))
        return
    if against != "shipped" and not Path(against).is_dir():
        raise click.BadParameter(f"{against!r} is not a directory: give a verifier or probe directory, or 'shipped'",
                                 param_hint="--against")
    other = _read_any_manifest(None if against == "shipped" else Path(against))
    lines = manifest_differences(manifest, other)
    click.echo("\n".join(lines) if lines else "the manifests are the same")
    click.echo(f"{len(lines)} of {len(set(_flat(manifest)) | set(_flat(other)))} fields differ "
               f"({directory or 'the shipped verifier'} -> {against})")
