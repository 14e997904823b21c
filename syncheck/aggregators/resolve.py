"""Which aggregator a scorer uses: what ``Scorer(aggregator=...)`` accepts, resolved for the model at hand.

``aggregator="default"`` (what ``Scorer``, ``Monitor``, ``FODGenerator`` and
the CLI use unless told otherwise) picks, in order:

1. the aggregator ``syncheck calibrate`` registered for this model's
   fingerprint (:mod:`syncheck.calibration.registry`);
2. an aggregator shipped for this model (:mod:`syncheck.shipped_models`), found by fingerprint or by name: the
   default (``default-aggregator``, SmolLM2-135M) or another model's (as ``syncheck calibrate`` wrote it:
   Qwen2.5-Coder-1.5B's, ``qwen2.5-coder-1.5b-aggregator``);
3. the shipped *portable* default (``portable-aggregator``):
   features whose meaning does not depend on the architecture (probabilities,
   normalised entropies, KL and PMI in nats, the string checks, alignment),
   trained on more than one model family. It warns once per model that a
   calibrated aggregator scores better, and names the command.

A directory or a fitted estimator is used as given, after checking that the
scorer produces its features.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from syncheck.aggregators.apply import (
    EstimatorScoreModel,
    FeatureMismatchError,
    check_features,
    expected_features,
    positive_column,
)
from syncheck.build_info import without_machine_paths
from syncheck.shipped_models import DEFAULT_AGGREGATOR, PORTABLE_AGGREGATOR, shipped_model_dir, shipped_models
from syncheck.user_warnings import user_stacklevel, warn_user

DEFAULT_SPEC = "default"
#: Models already warned about (the portable fallback and stale calibrations warn once per process).
_WARNED: set[tuple[str, str]] = set()


def default_aggregator_dir() -> Path:
    """Directory of the aggregator shipped for the default model (``smollm2-135m``)."""
    return shipped_model_dir(DEFAULT_AGGREGATOR)


def shipped_aggregator_dirs() -> list[Path]:
    """Directories of the aggregators shipped for particular models: the default's first, then the others."""
    return [m.directory for m in shipped_models("aggregator") if m.name != PORTABLE_AGGREGATOR]


def shipped_aggregator_dirs_for(name: str, fingerprint: str | None = None) -> list[tuple[Path, str | None]]:
    """The shipped aggregators trained on model ``name`` (or on a model with ``fingerprint``), with the model
    each names, in :func:`shipped_aggregator_dirs`' order."""
    from syncheck.aggregators.io import read_meta

    found = []
    for shipped_dir in shipped_aggregator_dirs():
        if not (shipped_dir / "meta.json").is_file():
            continue
        trained = read_meta(shipped_dir).get("scorer") or {}
        if (fingerprint and trained.get("fingerprint") == fingerprint) or trained.get("model") == name:
            found.append((shipped_dir, trained.get("model")))
    return found


def portable_aggregator_dir() -> Path:
    """Directory of the shipped portable aggregator (any causal LM)."""
    return shipped_model_dir(PORTABLE_AGGREGATOR)


def calibrate_hint(model_name: str) -> str:
    return f"`syncheck calibrate --model {model_name} --data LABELLED.jsonl`"


def scorer_config(scorer: Any) -> dict[str, Any]:
    """The parts of a :class:`~syncheck.scorer.Scorer` (or its :class:`~syncheck.pipeline.FeatureSetup`) an
    aggregator's features depend on (stored in meta.json)."""
    lid = getattr(scorer, "lid", None)
    alignment = getattr(scorer, "alignment", None)
    lm = getattr(scorer, "lm", None)
    return {
        "model": getattr(lm, "name", None),
        "fingerprint": _fingerprint(lm),
        "alignment": getattr(alignment, "name", None) if alignment is not None else None,
        "align_with_question": bool(getattr(scorer, "align_with_question", False)),
        "lid_layers": list(lid.layers) if lid is not None else None,
        "lid_k": int(lid.k) if lid is not None else None,
        "kl": bool(getattr(scorer, "kl", False)),
        "kl_threshold": getattr(scorer, "kl_threshold", None),
        "lookback": bool(getattr(scorer, "lookback", False)),
        "text_checks": bool(getattr(scorer, "text_checks", False)),
    }


def _fingerprint(lm: Any) -> str | None:
    try:
        return lm.fingerprint
    except AttributeError:
        return None


@dataclass(frozen=True)
class ResolvedAggregator:
    """What ``Scorer(aggregator=spec)`` scores with.

    Attributes:
        model: an object with ``score_features``, or ``None`` (no scores).
        probes: the probes whose features the featurizer must add before the aggregator.
        source: ``"calibrated"``, ``"default"``, ``"portable"``, ``"directory"``, ``"estimator"`` or ``None``.
    """

    model: Any | None
    probes: tuple[Any, ...] = ()
    source: str | None = None


def resolve_aggregator(spec: Any, setup: Any) -> ResolvedAggregator:
    """What ``Scorer(aggregator=spec)`` uses, for a model and its feature switches.

    Args:
        spec: ``"default"`` (see the module docstring), a directory written by
            ``syncheck train`` / ``syncheck calibrate``, a fitted estimator, or ``None``.
        setup: the model and its feature switches (:class:`syncheck.pipeline.FeatureSetup`: its model,
            ``feature_names`` and configuration are checked).

    Raises:
        FeatureMismatchError: an explicitly given aggregator needs features the scorer does not produce.
    """
    from syncheck.aggregators.io import load_aggregator

    if spec is None:
        return ResolvedAggregator(None)
    if isinstance(spec, str) and spec == DEFAULT_SPEC:
        found = _default_for(setup)
        if found is None:
            return ResolvedAggregator(None)
        agg, probes, source = found
    elif isinstance(spec, (str, Path)):
        agg = load_aggregator(spec)
        probes = usable_probes(agg, setup)
        check_features(agg, list(setup.feature_names) + [p.name for p in probes], "this scorer")
        source = "directory"
    elif hasattr(spec, "predict_proba"):
        agg = spec
        probes = usable_probes(agg, setup)
        check_features(agg, list(setup.feature_names) + [p.name for p in probes], "this scorer")
        positive_column(agg)
        source = "estimator"
    else:
        raise ValueError("aggregator must be 'default', a directory, a fitted estimator or None, got "
                         f"{type(spec).__name__}")
    _warn_on_config_drift(agg, scorer_config(setup))
    model = agg if hasattr(agg, "score_features") else EstimatorScoreModel(agg)
    return ResolvedAggregator(model, tuple(probes), source)


def resolve_final_model(flag: bool | None, aggregator: Any, setup: Any, probes: Sequence[Any]) -> Any | None:
    """The final (whole-answer) model ``Scorer(final_scores=flag)`` applies (:mod:`syncheck.aggregators.final`).

    ``None`` (default): the aggregator's ``final_model`` when it has one and ``setup`` (with the aggregator's
    ``probes``) produces every feature it reads, else none (with a warning when features are missing). ``True``:
    that model, or an error saying why there is none. ``False``: none.
    """
    from syncheck.aggregators.final import RELATIVE_PREFIX, relative_bases

    if flag is False:
        return None
    final = getattr(aggregator, "final_model", None)
    if final is None:
        if flag:
            raise ValueError("final_scores=True, but the aggregator has no final model (a final/ directory beside its "
                             "meta.json): leave final_scores unset, or fit an aggregator with one for the model "
                             "(`syncheck calibrate --model M --data LABELLED.jsonl`)")
        return None
    names = expected_features(final)
    needed = [n for n in names if not n.startswith(RELATIVE_PREFIX)] + relative_bases(names)
    produced = set(setup.feature_names) | {p.name for p in probes}
    missing = list(dict.fromkeys(n for n in needed if n not in produced))
    if missing:
        message = (f"the aggregator's final model reads features this scorer does not produce ({', '.join(missing)}): "
                   "final scores are off; score with the default features to have them")
        if flag:
            raise FeatureMismatchError(message)
        _warn_once(str(setup.lm.name), "final", message)
        return None
    return final


def _missing(agg: Any, setup: Any, probes: Sequence[Any]) -> list[str]:
    produced = set(setup.feature_names) | {p.name for p in probes}
    return [n for n in expected_features(agg) if n not in produced]


def _default_for(setup: Any) -> tuple[Any, list[Any], str] | None:
    """The calibrated, shipped or portable aggregator for ``setup``'s model (see the module docstring)."""
    from syncheck.aggregators.io import load_aggregator
    from syncheck.calibration.registry import calibrations_for_name, find_calibration

    name = str(getattr(setup.lm, "name", "model"))
    fingerprint = _fingerprint(setup.lm)
    skipped: list[str] = []
    calibrated = find_calibration(fingerprint) if fingerprint else None
    if calibrated is not None:
        agg, probes, missing = _load_for(calibrated, setup)
        if not missing:
            return agg, probes, "calibrated"
        skipped.append(f"the aggregator calibrated for it ({calibrated}) needs {', '.join(missing)}")
    else:
        stale = [e for e in calibrations_for_name(name) if e["exists"]]
        if stale:
            _warn_once(name, "stale", (
                f"the aggregator calibrated for {name!r} ({stale[-1]['path']}) was fitted on a model with fingerprint "
                f"{stale[-1]['fingerprint']}, and this one's is {fingerprint}: its config or weights changed, so it is "
                f"not used. Calibrate again: {calibrate_hint(name)}"))
    for shipped_dir, model in shipped_aggregator_dirs_for(name, fingerprint):
        agg, probes, missing = _load_for(shipped_dir, setup)
        if not missing:
            return agg, probes, "default"
        which = "the default aggregator" if shipped_dir == default_aggregator_dir() else \
            f"the aggregator shipped for {model}"
        skipped.append(f"{which} needs {', '.join(missing)}")
    portable_dir = portable_aggregator_dir()
    if (portable_dir / "meta.json").is_file():
        agg = load_aggregator(portable_dir)
        missing = _missing(agg, setup, [])
        if not missing:
            _warn_once(name, "portable", (
                f"no aggregator is calibrated for model {name!r}: sentences are scored by the portable default "
                "(features that mean the same for any model). An aggregator calibrated for this model scores "
                f"better: {calibrate_hint(name)}"))
            return agg, [], "portable"
        skipped.append(f"the portable aggregator needs {', '.join(missing)}")
    warnings.warn(
        "no faithfulness score: " + ("; ".join(skipped) or "syncheck's shipped aggregators are not installed")
        + ", which this scorer does not produce. Pass aggregator=None (--aggregator none) to silence this, or "
        f"calibrate one for this setup: {calibrate_hint(name)}.", UserWarning, stacklevel=user_stacklevel())
    return None


def _load_for(path: Any, setup: Any) -> tuple[Any, list[Any], list[str]]:
    """The aggregator at ``path``, the probes of it this setup can run, and the features it would still lack."""
    from syncheck.aggregators.io import load_aggregator

    agg = load_aggregator(path)
    probes = usable_probes(agg, setup)
    return agg, probes, _missing(agg, setup, probes)


def _warn_once(model_name: str, what: str, message: str) -> None:
    if (model_name, what) not in _WARNED:
        _WARNED.add((model_name, what))
        warn_user(message)


def usable_probes(agg: Any, setup: Any) -> list[Any]:
    """The aggregator's probes (``agg.probes``) whose input ``setup`` can compute for its model.

    A ``lookback_lens`` probe needs ``Scorer(lookback=True)``; a ``hidden_probe``
    needs layers and a hidden size this model has. Probes that cannot run are
    left out, so their feature shows up as missing with a hint.
    """
    from features.sentence_features import HIDDEN_VECTOR, LOOKBACK_VECTOR

    out = []
    for probe in getattr(agg, "probes", None) or []:
        if probe.input == LOOKBACK_VECTOR and not getattr(setup, "lookback", False):
            continue
        if probe.input == HIDDEN_VECTOR:
            layers = list(probe.layers or [])
            try:
                width = setup.lm.model.get_input_embeddings().weight.shape[1]
                depth = setup.lm.num_layers
            except (AttributeError, ValueError):  # no model whose hidden states could be read
                continue
            if not layers or max(layers) > depth or len(probe.coef_) != len(layers) * width:
                continue
        out.append(probe)
    return out


def probe_vector_layers(probes: Sequence[Any], vector_layers: Sequence[int], keep_vectors: bool) -> list[int]:
    """The hidden layers the featurizer must pool: a hidden-state probe's own layers when it has one."""
    from features.sentence_features import HIDDEN_VECTOR

    layers = list(vector_layers)
    for probe in probes:
        if probe.input == HIDDEN_VECTOR:
            if keep_vectors and layers and layers != list(probe.layers):
                warnings.warn(f"keeping hidden vectors of the probe's layers {list(probe.layers)}, not {layers}",
                              UserWarning, stacklevel=user_stacklevel())
            layers = list(probe.layers)
    return layers


def _warn_on_config_drift(agg: Any, current: Mapping[str, Any]) -> None:
    # meta.json names a model given by path by its file name (syncheck.build_info); one saved before that names its
    # path: compare both sides by file name
    trained = dict((getattr(agg, "meta", None) or {}).get("scorer") or {})
    trained["model"], current = without_machine_paths(trained.get("model")), {
        **current, "model": without_machine_paths(current.get("model"))}
    keys = ("alignment", "align_with_question", "lid_layers")
    if not (trained.get("fingerprint") and trained.get("fingerprint") == current.get("fingerprint")):
        keys = ("model",) + keys  # the same weights under another name or path are the same model
    drift = [f"{k} {trained[k]!r} (now {current.get(k)!r})" for k in keys
             if trained.get(k) is not None and current.get(k) is not None and trained.get(k) != current.get(k)]
    if drift:
        warnings.warn(
            "the aggregator was trained on features from a different scorer setup: " + ", ".join(drift)
            + "; its scores may be miscalibrated. Retrain with `syncheck train` on features from this setup.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


__all__ = ["DEFAULT_SPEC", "ResolvedAggregator", "default_aggregator_dir", "portable_aggregator_dir",
           "probe_vector_layers", "resolve_aggregator", "scorer_config", "usable_probes"]
