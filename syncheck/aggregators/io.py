"""Save and load aggregators without pickle.

A saved aggregator is a directory:

- ``meta.json``: ``kind`` (``lr`` | ``xgb`` | ``mlp``), ``feature_names`` (in
  input order), ``classes``, ``threshold``, the estimator's parameters, a
  description of the training data, the scorer configuration the features
  came from (model, alignment backend, LID layers), library versions, ``syncheck_version`` and ``commit`` (the
  git commit of a syncheck that runs from a checkout, with ``-dirty`` when tracked files differ; ``null`` when
  installed); paths are reduced to file names, so no machine's paths are written
  (:func:`syncheck.build_info.without_machine_paths`);
- the weights: ``model.json`` (LR: scaler, coefficients, intercept as JSON),
  ``model.json`` + ``scaler.json`` (XGBoost's own JSON format + the scaler),
  or ``model.safetensors`` (MLP weights and scaler, float64);
- optionally ``response.json``: the learned response-level verdict over the aggregator's sentence scores
  (:mod:`syncheck.aggregators.response`), restored as ``agg.response_model`` (``None`` when absent);
- optionally ``final/``: the final (whole-answer) sentence model that reads this aggregator's features and probe
  scores (:mod:`syncheck.aggregators.final`), a saved aggregator itself, restored as ``agg.final_model``;
- optionally ``probes.safetensors``: the linear probes (:mod:`syncheck.probes`)
  whose scores are among the aggregator's features, their configuration
  (name, layers, C) in ``meta.json``'s ``"probes"``.

Floats round-trip exactly (JSON keeps ``repr`` digits, safetensors raw bytes),
so a loaded aggregator predicts exactly as the saved one (tested).
"""

from __future__ import annotations

import json
import platform
import shutil
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from syncheck.aggregators.base import BaseAggregator
from syncheck.aggregators.boosted import XGBAggregator
from syncheck.aggregators.linear import LogisticAggregator
from syncheck.aggregators.mlp import MLPAggregator
from syncheck.aggregators.response import RESPONSE_FILE, load_response_model
from syncheck.build_info import __version__, source_commit, without_machine_paths

if TYPE_CHECKING:  # syncheck.probes imports this package (for the logistic function)
    from syncheck.probes import LinearProbe

FORMAT = "syncheck-aggregator"
FORMAT_VERSION = 1
META_FILE = "meta.json"
PROBES_FILE = "probes.safetensors"
#: Directory of the final model beside an aggregator's ``meta.json`` (:mod:`syncheck.aggregators.final`).
FINAL_DIR = "final"

#: kind -> estimator class.
KINDS: dict[str, type[BaseAggregator]] = {"lr": LogisticAggregator, "xgb": XGBAggregator, "mlp": MLPAggregator}


def make_aggregator(kind: str, **params: Any) -> BaseAggregator:
    """An unfitted aggregator of ``kind`` (``"lr"``, ``"xgb"`` or ``"mlp"``)."""
    try:
        return KINDS[kind](**params)
    except KeyError:
        raise ValueError(f"unknown aggregator kind {kind!r}; choose from {sorted(KINDS)}") from None


def library_versions() -> dict[str, str]:
    """Versions of Python and the libraries a saved aggregator depends on."""
    out = {"python": platform.python_version()}
    for dist in ("syncheck", "scikit-learn", "xgboost", "numpy", "safetensors", "torch", "transformers"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def save_aggregator(
    agg: BaseAggregator,
    path: str | Path,
    *,
    training: Mapping[str, Any] | None = None,
    scorer: Mapping[str, Any] | None = None,
    decoding: Mapping[str, Any] | None = None,
    probes: Sequence["LinearProbe"] = (),
) -> Path:
    """Write a fitted aggregator to directory ``path`` (created if needed); returns it.

    Args:
        training: a JSON-able description of the training data (source, sizes, split, seed).
        scorer: the scorer configuration its features came from (see
            :func:`syncheck.aggregators.resolve.scorer_config`).
        decoding: thresholds tuned for decoding with this aggregator (``tau1``, ``tau2`` and how they
            were chosen; see :mod:`syncheck.aggregators.thresholds`); FOD and abstention use them when not given any.
        probes: fitted probes whose features the aggregator reads (saved beside it, restored by
            :func:`load_aggregator` as ``agg.probes``).

    A ``response.json`` and a ``final/`` model already in ``path`` are removed: they were fitted on another
    aggregator's sentence scores (``syncheck calibrate`` fits an aggregator together with both).
    """
    if not isinstance(agg, BaseAggregator) or not hasattr(agg, "threshold_"):
        raise ValueError("save_aggregator needs a fitted syncheck aggregator (LogisticAggregator, XGBAggregator, "
                         "MLPAggregator)")
    names = getattr(agg, "feature_names_in_", None)
    if names is None:
        raise ValueError("the aggregator does not know its feature names: fit it on a DataFrame or pass "
                         "feature_names=[...]")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    params = {k: v for k, v in agg.get_params().items() if k != "feature_names"}
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": agg.kind,
        "feature_names": [str(n) for n in names],
        "classes": [c.item() if hasattr(c, "item") else c for c in agg.classes_],
        "threshold": float(agg.threshold_),
        "params": params,
        "n_iter": getattr(agg, "n_iter_", None),
        "training": dict(training or {}),
        "scorer": dict(scorer or {}),
        "syncheck_version": __version__,
        "commit": source_commit(),
        "versions": library_versions(),
    }
    if decoding:
        meta["decoding"] = dict(decoding)
    if probes:
        from safetensors.numpy import save_file

        meta["probes"] = [p.config() for p in probes]
        save_file(
            {f"{p.name}.{k}": np.ascontiguousarray(v, dtype=np.float64) for p in probes for k, v in p.state().items()},
            str(out / PROBES_FILE),
        )
    elif (out / PROBES_FILE).exists():
        (out / PROBES_FILE).unlink()
    if (out / RESPONSE_FILE).exists():  # a response verdict was fitted on the previous aggregator's sentence scores
        (out / RESPONSE_FILE).unlink()
    if (out / FINAL_DIR).is_dir():  # so was a final model (it reads this aggregator's probe scores)
        shutil.rmtree(out / FINAL_DIR)
    scaler = {"mean": agg.scaler_mean_.tolist(), "scale": agg.scaler_scale_.tolist()}
    if isinstance(agg, LogisticAggregator):
        _write_json(out / "model.json", {"scaler": scaler, "coef": agg.coef_.tolist(), "intercept": agg.intercept_})
    elif isinstance(agg, XGBAggregator):
        _write_json(out / "scaler.json", scaler)
        agg.booster_.save_model(str(out / "model.json"))
    elif isinstance(agg, MLPAggregator):
        from safetensors.numpy import save_file

        tensors = {
            "scaler_mean": agg.scaler_mean_, "scaler_scale": agg.scaler_scale_,
            "W1": agg.W1_, "b1": agg.b1_, "W2": agg.W2_, "b2": np.array([agg.b2_]),
        }
        save_file(
            {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in tensors.items()}, str(out / "model.safetensors")
        )
    else:  # pragma: no cover - KINDS covers every subclass
        raise ValueError(f"cannot save aggregator kind {agg.kind!r}")
    written = {"lr": {"model.json"}, "xgb": {"model.json", "scaler.json"}, "mlp": {"model.safetensors"}}[agg.kind]
    for stale in {"model.json", "scaler.json", "model.safetensors"} - written:  # another kind saved here before
        (out / stale).unlink(missing_ok=True)
    _write_json(out / META_FILE, without_machine_paths(meta))
    return out


def read_meta(path: str | Path) -> dict[str, Any]:
    """``meta.json`` of a saved aggregator, checked."""
    meta_path = Path(path) / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(
            f"{meta_path} not found: an aggregator is a directory written by `syncheck train` "
            "(or syncheck.aggregators.save_aggregator)"
        )
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT or meta.get("kind") not in KINDS:
        raise ValueError(f"{meta_path} is not a syncheck aggregator (format {meta.get('format')!r}, kind "
                         f"{meta.get('kind')!r})")
    if int(meta.get("format_version", 0)) > FORMAT_VERSION:
        raise ValueError(f"{meta_path} has format version {meta['format_version']}; upgrade syncheck to read it")
    return meta


def load_aggregator(path: str | Path) -> BaseAggregator:
    """Restore an aggregator saved by :func:`save_aggregator`; ``.meta`` holds its ``meta.json``."""
    path = Path(path)
    meta = read_meta(path)
    agg = KINDS[meta["kind"]](feature_names=list(meta["feature_names"]), **meta["params"])
    names = np.asarray(meta["feature_names"], dtype=object)
    agg.feature_names_in_ = names
    agg.n_features_in_ = len(names)
    agg.classes_ = np.asarray(meta["classes"])
    agg.threshold_ = float(meta["threshold"])
    if meta.get("n_iter") is not None:
        agg.n_iter_ = int(meta["n_iter"])
    if isinstance(agg, LogisticAggregator):
        state = json.loads((path / "model.json").read_text(encoding="utf-8"))
        _set_scaler(agg, state["scaler"])
        agg.coef_ = np.asarray(state["coef"], dtype=np.float64)
        agg.intercept_ = float(state["intercept"])
    elif isinstance(agg, XGBAggregator):
        import xgboost

        _set_scaler(agg, json.loads((path / "scaler.json").read_text(encoding="utf-8")))
        booster = xgboost.Booster()
        booster.load_model(str(path / "model.json"))
        agg.booster_ = booster
    else:
        from safetensors.numpy import load_file

        t = load_file(str(path / "model.safetensors"))
        agg.scaler_mean_, agg.scaler_scale_ = t["scaler_mean"], t["scaler_scale"]
        agg.W1_, agg.b1_, agg.W2_, agg.b2_ = t["W1"], t["b1"], t["W2"], float(t["b2"][0])
    d = len(names)
    if agg.scaler_mean_.shape != (d,) or agg.scaler_scale_.shape != (d,):
        raise ValueError(f"{path}: the scaler has {agg.scaler_mean_.shape} entries but meta.json names {d} features")
    agg.meta = meta
    agg.probes = load_probes(path, meta)
    agg.response_model = load_response_model(path)
    agg.final_model = load_final_model(path)
    return agg


def load_final_model(path: str | Path) -> BaseAggregator | None:
    """The final model stored in ``path/final`` (``None`` when there is none)."""
    final = Path(path) / FINAL_DIR
    return load_aggregator(final) if (final / META_FILE).is_file() else None


def load_probes(path: Path, meta: Mapping[str, Any]) -> list["LinearProbe"]:
    """The probes stored beside an aggregator (``[]`` when it has none)."""
    configs = meta.get("probes") or []
    if not configs:
        return []
    from safetensors.numpy import load_file

    from syncheck.probes import LinearProbe

    if not (path / PROBES_FILE).is_file():
        raise FileNotFoundError(f"{path / PROBES_FILE} not found, but meta.json lists probes "
                                f"{[c['name'] for c in configs]}")
    tensors = load_file(str(path / PROBES_FILE))
    return [LinearProbe.from_state(c, {k: tensors[f"{c['name']}.{k}"] for k in ("mean", "scale", "coef", "intercept")})
            for c in configs]


def _set_scaler(agg: BaseAggregator, scaler: Mapping[str, Any]) -> None:
    agg.scaler_mean_ = np.asarray(scaler["mean"], dtype=np.float64)
    agg.scaler_scale_ = np.asarray(scaler["scale"], dtype=np.float64)


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, sort_keys=False) + "\n", encoding="utf-8")
