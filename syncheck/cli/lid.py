"""``syncheck lid-reference``: build the LID reference set of a model from records."""

from __future__ import annotations

from pathlib import Path

import click

from syncheck.cli.common import device_option, dtype_option, model_option, read_records


@click.command("lid-reference")
@click.argument("input_path", metavar="RECORDS.jsonl", required=False,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@model_option
@device_option
@dtype_option
@click.option("--layers", default=None, help="Comma-separated hidden-state layers (default: three middle layers).")
@click.option("-k", "k", default=20, show_default=True, type=click.IntRange(min=2), help="LID neighbourhood size.")
def lid_reference(input_path, model, device, dtype, layers, k):
    """Build and cache the LID reference set of a model.

    RECORDS.jsonl holds records in the `syncheck score` input format (ideally
    from your own domain); without it the bundled corpus is used. The set is
    saved in the cache and used by `syncheck score` from then on.
    """
    from syncheck.lid_reference import build_reference, bundled_records, default_lid_layers, describe, reference_path
    from syncheck.model.models import load_model
    from syncheck.records import Record

    lm = load_model(model, device=device, dtype=dtype)
    layer_list = [int(x) for x in layers.split(",")] if layers else default_lid_layers(lm.num_layers)
    records = (
        bundled_records() if input_path is None else [r for r in read_records(input_path) if isinstance(r, Record)]
    )
    ref = build_reference(lm, records, layer_list, k=k)
    path = ref.save(reference_path(lm))
    click.echo(f"saved {path}: {describe(ref)}")
