"""Calibrate an aggregator for one model: score labelled records with it, fit, report, tune FOD, register.

>>> from syncheck.calibration.calibrate import calibrate
>>> result = calibrate("Qwen/Qwen2.5-7B-Instruct", "ragtruth/dev.jsonl")   # doctest: +SKIP
>>> print(result.summary())                                                # doctest: +SKIP

Steps (``syncheck calibrate`` runs the same function; every fit is :mod:`syncheck.calibration.training`'s, the
one training path that ``syncheck train`` shares):

1. Read labelled records (:mod:`syncheck.calibration.labels`: RAGTruth spans, or
   syncheck's ``label`` / ``sentence_labels``), from one file or several pooled.
2. Score them with the model, teacher-forced, every default feature on and each
   sentence's hidden-state vector kept (:class:`~syncheck.scorer.Scorer`).
   Scored rows are appended to ``DIR/scored.jsonl`` as they come, so an
   interrupted run resumes where it stopped.
3. Held-out report: 5-fold cross-validation grouped by source document of the
   default recipe (:mod:`syncheck.aggregators.recipe`: boosted trees over the
   default features with the model's own hidden-state probe stacked under
   them), as sentence ROC AUC with a 95% bootstrap interval, beside sentence
   length, word overlap and the portable default on the same sentences.
4. Fit on every sentence; FOD's ``tau1`` / ``tau2``: tuned on the model's
   own sampled answers when ``generations`` > 0 (labelled by ``judge``, an
   alignment backend spec), else on the out-of-fold scores of step 3.
5. The response-level verdict (:class:`~syncheck.aggregators.response.ResponseVerdict`): fitted on every
   record's out-of-fold sentence scores against its label (faithful when no sentence is labelled unfaithful),
   with ``tau`` at the tuned ``tau1``; its held-out report is a grouped 5-fold CV of the verdict over those
   scores, beside the minimum of the sentence scores and the trivial baselines (answer length, sentence count,
   word overlap); per task, the verdict the scorer will use is checked against the best of those
   (:func:`verdict_margins`: at least :data:`VERDICT_MARGIN` above it, or the report says to prefer the baseline).
6. The final (whole-answer) model (:mod:`syncheck.aggregators.final`): the same recipe over the features, their
   deviations from the response's mean, fitted on every sentence, with its own
   verdict over the records' out-of-fold final scores; held out as in steps 3 and 5 (report rows ``final: ...``).
7. Write the aggregator (and ``response.json``, and ``final/``) to ``DIR`` (``meta.json`` names the model and its
   fingerprint) with its manifest (:mod:`syncheck.aggregators.manifest`: the data's licence is for you to state in
   it before you ship it) and register it for the model's fingerprint, so that
   ``Scorer(model)``, ``FODGenerator(model)`` and the CLI use it with no flag.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from tqdm import tqdm

from syncheck.calibration.labels import LabelError, LabelledRecord, read_labelled_files

#: Answers generated per labelled record for threshold tuning are at most this long.
GENERATION_TOKENS = 128

#: A response verdict is worth shipping for a task when its held-out AUROC beats the best trivial baseline on the
#: same responses (answer length, sentence count, word overlap) by at least this much.
VERDICT_MARGIN = 0.05


@dataclass
class CalibrationResult:
    """What :func:`calibrate` wrote and measured."""

    path: Path
    model: str
    fingerprint: str
    records: int
    sentences: int
    faithful: int
    heldout: list[dict[str, Any]]  # {"name", "auroc", "lo", "hi", "task"}; response-level rows have "level"
    decoding: dict[str, Any] | None
    seconds: float
    skipped: list[str] = field(default_factory=list)
    registered: bool = True

    def summary(self) -> str:
        lines = [f"calibrated {self.model} (fingerprint {self.fingerprint}) on {self.sentences} sentences of "
                 f"{self.records} records ({self.faithful} faithful, {self.sentences - self.faithful} unfaithful) "
                 f"in {self.seconds:.0f} s; wrote {self.path}" + (" and registered it" if self.registered else ""),
                 "held-out sentence ROC AUC [95% CI], 5-fold CV grouped by source document:"]
        for task in dict.fromkeys(r["task"] for r in self.heldout):
            lines.append(f"  {task}:")
            for r in (r for r in self.heldout if r["task"] == task):
                name = f"response: {r['name']}" if r.get("level") == "response" else r["name"]
                lines.append(f"    {name:<54} {r['auroc']:.3f} [{r['lo']:.2f}, {r['hi']:.2f}]")
        margins = self.verdict_margins()
        if margins:
            lines.append(f"response verdict against the best trivial baseline, held out (ship where the margin is at "
                         f"least {VERDICT_MARGIN}):")
        for m in margins:
            verdict = f"response verdict {m['verdict']:.3f} against {m['baseline']} {m['baseline_auroc']:.3f}"
            if m["ok"]:
                lines.append(f"  {m['task']}: {verdict}: {m['margin']:+.3f}, above the {VERDICT_MARGIN} margin")
            else:
                lines.append(f"  {m['task']}: {verdict}: {m['margin']:+.3f}, under the {VERDICT_MARGIN} margin: on "
                             f"this task read response_score as no better than {m['baseline']}, and prefer that "
                             "rule (or more labelled responses of the task)")
        if self.decoding:
            lines.append(f"FOD thresholds: tau1 {self.decoding['tau1']:.2f}, tau2 {self.decoding['tau2']:.2f} "
                         f"({self.decoding.get('data', '')})")
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)} records: " + "; ".join(self.skipped[:5])
                         + (" ..." if len(self.skipped) > 5 else ""))
        return "\n".join(lines)

    def verdict_margins(self) -> list[dict[str, Any]]:
        """Per task, the response verdict the scorer uses (the final model's where one was fitted) against the best
        trivial baseline on the same held-out responses: ``{"task", "verdict", "baseline", "baseline_auroc",
        "margin", "ok"}``, ``ok`` when the margin is at least :data:`VERDICT_MARGIN`."""
        return verdict_margins(self.heldout)


def verdict_margins(heldout: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """See :meth:`CalibrationResult.verdict_margins`; ``heldout`` holds report rows as :func:`calibrate` writes."""
    out = []
    for task in dict.fromkeys(r["task"] for r in heldout):
        rows = {r["name"]: r["auroc"] for r in heldout if r["task"] == task and r.get("level") == "response"}
        verdict = rows.get("final: learned verdict (held out)", rows.get("learned verdict (held out)"))
        trivial = {name: auc for name, auc in rows.items() if "(trivial" in name}
        if verdict is None or not trivial:
            continue
        baseline = max(trivial, key=trivial.__getitem__)
        margin = verdict - trivial[baseline]
        out.append({"task": task, "verdict": verdict, "baseline": baseline.split(" (trivial")[0],
                    "baseline_auroc": trivial[baseline], "margin": round(margin, 4),
                    "ok": margin >= VERDICT_MARGIN - 1e-9})
    return out


def calibrate(
    model: Any,
    data: str | Path | Sequence[str | Path] | Sequence[LabelledRecord],
    *,
    output: str | Path | None = None,
    kind: str = "xgb",
    tokenizer: Any = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str = torch.float32,
    alignment: str = "lexical",
    generations: int = 0,
    judge: str | None = None,
    limit: int | None = None,
    batch_size: int = 2,
    seed: int = 0,
    register: bool = True,
    progress: bool = True,
) -> CalibrationResult:
    """Fit, evaluate and register an aggregator for ``model`` (see the module docstring).

    Args:
        model: anything :func:`syncheck.model.models.load_model` accepts.
        data: a JSONL path of labelled records, several paths (read in order, pooled, and grouped by source
            document as one set), or :class:`~syncheck.calibration.labels.LabelledRecord` objects.
        output: where to write (default: ``<cache>/calibrations/<model>-<fingerprint>``).
        kind: ``xgb`` (the default recipe), ``lr`` or ``mlp``.
        alignment: the ``align_score`` backend the aggregator will be used with.
        generations: answers of the model to sample for tuning FOD's thresholds (0: tune on held-out scores).
        judge: alignment backend spec that labels those answers' sentences (default: ``alignment``).
        limit: labelled records read at most.
        register: register the result for the model's fingerprint.

    Raises:
        ValueError: no usable labelled sentences, or only one label among them.
    """
    from syncheck.aggregators import KINDS
    from syncheck.aggregators.manifest import write_aggregator_manifest
    from syncheck.aggregators.recipe import DEFAULT_FEATURES
    from syncheck.aggregators.resolve import scorer_config
    from syncheck.build_info import without_machine_paths
    from syncheck.calibration import training as fit
    from syncheck.calibration.registry import default_calibration_dir, register_calibration
    from syncheck.model.models import load_model
    from syncheck.scorer import Scorer
    from syncheck.shipped_models import base_licences

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    started = time.perf_counter()
    lm = load_model(model, tokenizer, device=device, dtype=dtype)
    if isinstance(data, (str, Path)):
        data = [data]
    paths = [Path(p) for p in data if isinstance(p, (str, Path))]
    if paths and len(paths) == len(data):
        records, skipped = read_labelled_files(paths, limit)
        data_name = ",".join(str(p) for p in paths)
    elif paths:
        raise TypeError("data must be paths of labelled JSONL files, or LabelledRecord objects, not a mix of both")
    else:
        records, skipped, data_name = list(data)[:limit], [], "labelled records given in Python"
    if not records:
        raise ValueError(f"no usable labelled records in {data_name} (RAGTruth records, or syncheck records with "
                         "'label' / 'sentence_labels' / 'spans'): " + "; ".join(skipped[:3]))
    out = Path(output) if output is not None else default_calibration_dir(lm.name, lm.fingerprint)
    scorer = Scorer(lm, alignment=alignment, vectors=True, aggregator=None, batch_size=batch_size)
    rows = _score_resumable(scorer, records, out / "scored.jsonl", progress)
    names = [n for n in DEFAULT_FEATURES if n in scorer.feature_names]
    table = _sentence_rows(records, rows, names, skipped)
    if len(set(table["y"].tolist())) < 2:
        raise ValueError(f"all {len(table['y'])} labelled sentences carry label {int(table['y'][0])}: calibration "
                         "needs faithful and unfaithful sentences: add records with hallucinated sentences (spans, or "
                         "label 0) and "
                         "clean ones (label 1)")
    params = fit.recipe_params(kind)
    probes = fit.probe_templates(["hidden_probe"], list(scorer.featurizer.vector_layers))
    vectors = {"hidden_probe": table["hidden"]}
    oof = fit.sentence_oof(table["X"], names, vectors, table["y"], table["groups"], kind=kind, params=params,
                           probes=probes, seed=seed, progress=progress)
    heldout = _heldout_report(table, oof, names, seed)
    model_fit = fit.fit_sentence_model(table["X"], names, vectors, table["y"], table["groups"], kind=kind,
                                       params=params, probes=probes, seed=seed)
    training = {
        "data": data_name,
        "records": len(rows), **fit.label_counts(table["y"]), "seed": seed,
        "recipe": fit.recipe_info(kind, params, probes=["hidden_probe"], features=names),
        "heldout": heldout, "command": "syncheck calibrate",
    }
    config = scorer_config(scorer)
    decoding = _decoding_from(table["y"], oof, "out-of-fold scores of the labelled sentences (5 folds grouped by "
                                                "source document): answers written by the data's authors, not this "
                                                "model")
    fit.save_sentence_model(model_fit, out, training=training, scorer=config, decoding=decoding)
    if generations > 0:
        tuned = _decoding_on_generations(lm, out, records, generations, judge or alignment, alignment, seed, progress)
        if tuned is not None:
            decoding = tuned
            fit.save_sentence_model(model_fit, out, training=training, scorer=config, decoding=decoding)
    tau = float((decoding or {}).get("tau1", 0.45))
    heldout += _fit_response_verdict(table, oof, tau, seed, out)
    heldout += _fit_final_model(table, names, vectors, kind, params, tau, seed, out, config,
                                str(training["data"]), progress)
    write_aggregator_manifest(out, sources=[{"name": without_machine_paths(data_name), "licence": "as its provider "
                                             "states", "rows": int(len(table["y"]))}], licences=base_licences(lm.name))
    if register:
        register_calibration(lm.name, lm.fingerprint, out)
    return CalibrationResult(out, lm.name, lm.fingerprint, len(rows), int(len(table["y"])), int(table["y"].sum()),
                             heldout, decoding, time.perf_counter() - started, skipped, register)


def _score_resumable(scorer: Any, records: Sequence[LabelledRecord], path: Path, progress: bool) -> list[dict]:
    """Scored rows (``ScoredResponse.to_json(vectors=True)``) of ``records``, in order, continuing ``path``.

    ``path`` is written as ``syncheck score -o`` writes (:class:`syncheck.io.RowWriter`) and resumed the same way
    (:func:`syncheck.io.prepare_resume`); ``path`` with suffix ``.json`` records the scorer's setup (model
    fingerprint, alignment, ...), and rows scored with another setup, or for other records, are scored again.
    """
    from syncheck.aggregators.resolve import scorer_config
    from syncheck.io import ResumeError, RowWriter, complete_rows, prepare_resume

    setup_path = path.with_suffix(".json")
    setup = json.loads(json.dumps(scorer_config(scorer)))
    if path.exists() and (not setup_path.is_file() or json.loads(setup_path.read_text(encoding="utf-8")) != setup):
        path.unlink()
    try:
        done = prepare_resume(path, [r.record.id for r in records])
    except ResumeError:  # rows of another data file: start over
        path.unlink()
        done = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    setup_path.write_text(json.dumps(setup, indent=1), encoding="utf-8")
    rows = complete_rows(path)[0] if done else []
    with open(path, "a", encoding="utf-8") as f, tqdm(total=len(records), initial=done, desc="scoring",
                                                       disable=not progress) as bar:
        writer = RowWriter(f, group_size=scorer.batch_size, start=done)
        for res in scorer.score_records([r.record for r in records[done:]]):
            rows.append(writer.write(res.to_json(vectors=True)))
            bar.update(1)
        writer.flush()
    return rows


def _sentence_rows(records: Sequence[LabelledRecord], rows: Sequence[dict], names: Sequence[str],
                   skipped: list[str]) -> dict[str, np.ndarray]:
    """Arrays over every labelled sentence: ``X``, ``hidden``, ``y``, ``groups``, ``chars``, ``overlap``, ``task``,
    ``record`` (the index of its record)."""
    from features.alignment.lexical import lexical_precision as word_overlap
    from features.sentences import Span
    from syncheck.featurize import fill_text_checks
    from syncheck.model.prompts import format_context
    from syncheck.results import decode_vectors

    X, H, y, groups, chars, words, overlap, task, record = [], [], [], [], [], [], [], [], []
    for k, (rec, row) in enumerate(zip(records, rows)):
        if row.get("error") is not None or not row.get("sentences"):
            skipped.append(f"id {rec.record.id}: {row.get('error') or 'no sentences'}")
            continue
        spans = [Span(s["text"], s["start"], s["end"]) for s in row["sentences"]]
        try:
            labels = rec.labels_for(spans)
        except LabelError as exc:
            skipped.append(str(exc))
            continue
        context = format_context(rec.record.context)
        for s, label in zip(row["sentences"], labels):
            feats = fill_text_checks(s["features"], context, s["text"])  # rows scored before a string check existed
            X.append([float(feats[n]) for n in names])
            H.append(decode_vectors(s)["hidden"])
            y.append(label)
            groups.append(rec.group)
            chars.append(len(s["text"]))
            words.append(len(s["text"].split()))
            overlap.append(word_overlap(context, s["text"]))
            task.append(rec.task or "all")
            record.append(k)
    if not y:
        raise ValueError("no labelled sentence could be scored: " + "; ".join(skipped[:3]))
    return {
        "X": np.asarray(X, dtype=np.float64), "hidden": np.stack(H).astype(np.float64),
        "y": np.asarray(y, dtype=np.int64), "groups": np.asarray(groups), "chars": np.asarray(chars, dtype=np.float64),
        "words": np.asarray(words, dtype=np.float64), "overlap": np.asarray(overlap, dtype=np.float64),
        "task": np.asarray(task),
        "record": np.asarray(record, dtype=np.int64),
    }


def _heldout_report(table: dict[str, np.ndarray], oof: np.ndarray, names: Sequence[str], seed: int) -> list[dict]:
    """AUROC with bootstrap intervals (resampling documents) of the calibrated recipe and the baselines, per task."""
    signals = {"sentence length (shorter = faithful)": -table["chars"],
               "word overlap with the context": table["overlap"]}
    portable = _portable_scores(table["X"], names)
    if portable is not None:
        signals["portable default (as shipped)"] = portable
    signals["calibrated (this model's recipe + probe)"] = oof
    return _auroc_rows(table["y"], table["groups"], table["task"], signals, seed)


def _auroc_rows(y: np.ndarray, groups: np.ndarray, task: np.ndarray, signals: dict[str, np.ndarray], seed: int,
                **fields: Any) -> list[dict]:
    """Report rows: each signal's AUROC with a 95% bootstrap interval (resampling ``groups``), over all rows and per
    task when there are several; a task whose rows hold one label is left out. ``fields`` are added to every row."""
    from syncheck.stats import bootstrap_auroc

    names = sorted(set(task.tolist()) - {"all"})
    out = []
    for t in ["all"] + names if len(set(task.tolist())) > 1 else ["all"]:
        keep = np.ones(len(y), bool) if t == "all" else task == t
        if len(set(y[keep].tolist())) < 2:
            continue
        for name, score in signals.items():
            auc, lo, hi = bootstrap_auroc(y[keep], score[keep], groups=groups[keep], seed=seed)
            out.append({"task": t, **fields, "name": name, "auroc": round(auc, 4), "lo": round(lo, 4),
                        "hi": round(hi, 4)})
    return out


def _fit_response_verdict(table: dict[str, np.ndarray], oof: np.ndarray, tau: float, seed: int,
                          out: Path, label: str = "") -> list[dict]:
    """Fit and write the response verdict on the records' out-of-fold sentence scores; its held-out report rows
    (names prefixed with ``label``).

    Nothing is written (and no rows returned) when the records' labels hold one class only.
    """
    from syncheck.aggregators.response import pad_scores
    from syncheck.calibration.training import fit_response_verdict, write_response_verdict
    from syncheck.fitting import out_of_fold

    records = list(dict.fromkeys(table["record"].tolist()))
    at = {r: np.flatnonzero(table["record"] == r) for r in records}
    X = pad_scores([oof[at[r]].tolist() for r in records])
    y = np.asarray([int(table["y"][at[r]].min()) for r in records])
    groups = np.asarray([table["groups"][at[r][0]] for r in records])
    task = np.asarray([table["task"][at[r][0]] for r in records])
    if len(set(y.tolist())) < 2:
        return []
    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        return fit_response_verdict(X[train], y[train], tau).predict_proba(X[test])[:, 1]

    learned = out_of_fold(fit_predict, y, groups, seed=seed, fill=0.5)
    signals = {label + "learned verdict (held out)": learned, label + "min of sentence scores": np.nanmin(X, axis=1)}
    if not label:  # the trivial baselines on the same responses, once
        words = np.asarray([table["words"][at[r]].sum() for r in records])
        signals.update({
            "answer length in words (trivial; fewer = faithful)": -words,
            "sentences (trivial; fewer = faithful)": -np.asarray([len(at[r]) for r in records], dtype=np.float64),
            "word overlap with the context (trivial; sentence mean)": np.asarray(
                [table["overlap"][at[r]].mean() for r in records])})
    rows = _auroc_rows(y, groups, task, signals, seed, level="response")
    write_response_verdict(X, y, tau, out, data="every calibration record's out-of-fold sentence scores (5 folds "
                                                "grouped by source document)",
                           command="syncheck calibrate", heldout=rows)
    return rows


def _fit_final_model(table: dict[str, np.ndarray], names: Sequence[str],
                     vectors: dict[str, np.ndarray], kind: str, params: dict[str, Any], tau: float, seed: int,
                     out: Path, config: dict[str, Any], data: str, progress: bool) -> list[dict]:
    """Fit and write the final (whole-answer) model into ``out/final`` (:mod:`syncheck.aggregators.final`), as the
    shipped default's was fitted (:func:`syncheck.calibration.training.fit_final_model`): the recipe over the live
    features, their ``rel:`` forms and the out-of-fold probe score; then its verdict over the records'
    out-of-fold final scores. Returns the held-out report rows (sentence and response, prefixed ``final: ``)."""
    from syncheck.calibration.training import fit_final_model, recipe_info, save_final_model

    final = fit_final_model(table["X"], names, table["record"], vectors, table["y"], table["groups"], kind=kind,
                            params=params, seed=seed, out_of_fold=True, progress=progress)
    assert final.oof is not None
    rows = _auroc_rows(table["y"], table["groups"], table["task"], {"final: calibrated final score": final.oof}, seed)
    final_dir = save_final_model(final, out, scorer=config, training={
        "data": data, "sentences": int(len(table["y"])), "seed": seed, "command": "syncheck calibrate",
        "recipe": recipe_info(kind, params, relative=final.relative, probes_read=list(vectors)),
        "heldout": rows})
    return rows + _fit_response_verdict(table, final.oof, tau, seed, final_dir, label="final: ")


def _portable_scores(X: np.ndarray, names: Sequence[str]) -> np.ndarray | None:
    from syncheck.aggregators import load_aggregator, portable_aggregator_dir

    if not (portable_aggregator_dir() / "meta.json").is_file():
        return None
    agg = load_aggregator(portable_aggregator_dir())
    if any(n not in names for n in agg.feature_names_in_):
        return None
    return agg.predict_proba(X[:, [list(names).index(n) for n in agg.feature_names_in_]])[:, 1]


def _decoding_from(y: np.ndarray, scores: np.ndarray, data: str) -> dict[str, Any] | None:
    """FOD's thresholds tuned on ``scores`` (:func:`syncheck.calibration.training.tune_decoding`); ``None`` when
    the labels hold one class only."""
    from syncheck.calibration.training import tune_decoding

    try:
        return tune_decoding(y, scores, data)
    except ValueError:
        return None


def _decoding_on_generations(lm: Any, path: Path, records: Sequence[LabelledRecord], n: int, judge_spec: str,
                             alignment: str, seed: int, progress: bool) -> dict[str, Any] | None:
    """FOD thresholds from the calibrated aggregator's scores of ``n`` of the model's own answers, labelled by
    ``judge_spec``; ``None`` (keep the held-out thresholds) when those labels hold one class only."""
    import warnings

    from syncheck.alignment import make_alignment_scorer
    from syncheck.decoding import Decoding
    from syncheck.featurize import alignment_claim
    from syncheck.live.monitor import Monitor
    from syncheck.model.prompts import format_context
    from syncheck.scorer import Scorer

    monitor = Monitor(Scorer(lm, alignment=alignment, aggregator=path))
    judge = make_alignment_scorer(judge_spec)
    seen: set[tuple[str, str]] = set()
    jobs = []
    for rec in records:
        key = (format_context(rec.record.context), rec.record.question or "")
        if key not in seen:
            seen.add(key)
            jobs.append(rec.record)
        if len(jobs) >= n:
            break
    labels: list[int] = []
    scores: list[float] = []
    for k, rec in enumerate(tqdm(jobs, desc="generating for thresholds", disable=not progress)):
        decoding = Decoding(max_new_tokens=GENERATION_TOKENS, do_sample=k % 2 == 1, top_p=0.95 if k % 2 else 1.0,
                            seed=seed + k)
        gen = monitor.generate(question=rec.question, context=rec.context, decoding=decoding)
        sentences = [s for s in gen.sentences if s.score is not None]
        if not sentences:
            continue
        premise = format_context(rec.context)
        support = judge.score([premise] * len(sentences), [alignment_claim(s.text, rec.question) for s in sentences])
        labels += [int(float(v) >= 0.5) for v in support]
        scores += [float(s.score) for s in sentences]
    decoding = _decoding_from(np.asarray(labels), np.asarray(scores),
                              f"the calibrated aggregator's scores of {len(scores)} sentences of {len(jobs)} answers "
                              f"of this model (greedy and sampled), labelled by {judge_spec}")
    if decoding is None:
        warnings.warn(f"the {len(scores)} generated sentences got one label only from {judge_spec}; FOD's thresholds "
                      "stay tuned on the held-out scores", UserWarning, stacklevel=3)
    return decoding


__all__ = ["CalibrationResult", "calibrate"]
