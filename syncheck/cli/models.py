"""``syncheck models``: the models syncheck ships (:mod:`syncheck.shipped_models`), from their manifests."""

from __future__ import annotations

import json
from typing import Any

import click


def model_rows(check: bool = False) -> list[dict[str, Any]]:
    """One row per shipped model: its name, kind, purpose, directory, size in bytes (every file), weights file and
    its sha256, base, training command and commit, and (``check``) what its files get wrong against the manifest."""
    from features.model_manifest import schema_problems, weights_sha256
    from syncheck.shipped_models import SHIPPED, data_dir

    rows = []
    for model in SHIPPED:
        manifest = model.manifest()
        training = manifest.get("training") or {}
        row = {"name": model.name, "kind": model.kind, "purpose": manifest.get("purpose"),
               "directory": f"syncheck/data/{model.path}",
               "size": sum(f["size"] for f in manifest["files"].values()), "weights": manifest["weights"],
               "sha256": weights_sha256(manifest), "base": manifest.get("base"),
               "command": training.get("command"), "commit": training.get("commit")}
        if check:
            row["problems"] = schema_problems(manifest, data_dir().joinpath(*model.path.split("/")))
        rows.append(row)
    return rows


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per model (with its directory, "
                                                      "base, training command and commit).")
@click.option("--check", is_flag=True, help="Also hash every file against its manifest; exit with status 1 when one "
                                            "is missing, changed or unlisted.")
def models(as_json: bool, check: bool) -> None:
    """List the models syncheck ships: name, kind, size, the sha256 of its weights, and what it is for.

    Each lives in the package (syncheck/data), with a manifest of its files, data, licences and the command that
    rebuilds it (docs/shipped-models.md has a card for each).
    """
    rows = model_rows(check)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        width = max(len(r["name"]) for r in rows)
        kinds = max(len(r["kind"]) for r in rows)
        for r in rows:
            click.echo(f"{r['name']:<{width}}  {r['kind']:<{kinds}}  {_size(r['size']):>8}  sha256 {r['sha256'][:12]} "
                       f"({r['weights']})")
            click.echo(f"{'':<{width}}  {r['purpose']}")
            for problem in r.get("problems", []):
                click.echo(f"{'':<{width}}  problem: {problem}")
    if check and any(r["problems"] for r in rows):
        raise SystemExit(1)
