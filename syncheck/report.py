"""A self-contained HTML report of scored rows (SynCheck paper, Figure 8 style).

Each response is shown with its sentences coloured by a per-sentence value in
``[0, 1]`` (higher = more faithful, green; lower = red), chosen in this order:

1. ``score`` — the aggregator's estimate that the sentence is faithful;
2. ``align_score`` — fallback when no sentence has a ``score``: how well the
   context supports the sentence (lexical backend: share of its content words
   found in the context);
3. ``mean_prob`` — fallback when neither is present.

The report says which one it used. A row's value for the ROC and calibration
plots is its ``response_score``, else its ``factuality`` (Provenance), else the
minimum over its sentences of the colouring value (a response is as faithful
as its worst sentence). Labels (1 = faithful, 0 = unfaithful, read by
:func:`syncheck.calibration.labels.parse_label`) come from a labels file, else a ``label``
field of the scored row, else of the input row (a row label that rule refuses
is left out); ``subset`` fields group the curves.

All text goes through Jinja2 autoescaping; images are inline base64 PNGs and
the CSS/JS are inline, so the file works offline and loads nothing.
"""

from __future__ import annotations

import base64
import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from syncheck.calibration.labels import LabelError, parse_label
from syncheck.jsonl import read_jsonl
from syncheck.stats import bootstrap_auroc

SCORE_SOURCES: dict[str, str] = {
    "score": "sentence score from the aggregator (estimated probability that the sentence is faithful)",
    "align_score": (
        "how well the context supports the sentence (a fallback: this file has no aggregator scores; "
        "`syncheck score --aggregator ...` adds them)"
    ),
    "mean_prob": "mean probability of the sentence's tokens (a fallback: this file has neither scores nor align_score)",
}


@dataclass
class SentenceView:
    text: str
    value: float | None
    colour: str
    features: list[tuple[str, str]]


@dataclass
class ChunkView:
    index: int
    text: str
    best: bool = False
    support: str | None = None
    weight: str | None = None


@dataclass
class RowView:
    n: int
    id: Any
    segments: list[tuple[str, SentenceView | None]] = field(default_factory=list)
    n_sentences: int = 0
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    badges: list[tuple[str, str]] = field(default_factory=list)
    context: list[ChunkView] = field(default_factory=list)
    question: str | None = None


# ---------------------------------------------------------------------------- reading
def read_jsonl_rows(path: Path) -> list[dict[str, Any]]:
    """JSON objects of a JSONL file (blank lines skipped; an unreadable line becomes ``{}``, keeping positions)."""
    return [obj if isinstance(obj, dict) else {} for _, obj in read_jsonl(path)]  # a bad line: a JSONLineError


def read_labels(path: Path) -> dict[Any, tuple[int, str | None]]:
    """``{id: (label, subset)}`` from JSONL (``{"id", "label", "subset"?}``) or CSV/TSV with those columns.

    Labels are read by :func:`syncheck.calibration.labels.parse_label` (1 / "faithful", 0 / "unfaithful" /
    "hallucinated").

    Raises:
        ValueError: an entry without ``id`` or ``label``; :class:`~syncheck.calibration.labels.LabelError` (a
            ``ValueError``): a label :func:`~syncheck.calibration.labels.parse_label` refuses.
    """
    if path.suffix.lower() in (".csv", ".tsv"):
        with open(path, newline="", encoding="utf-8") as f:
            entries = list(csv.DictReader(f, delimiter="\t" if path.suffix.lower() == ".tsv" else ","))
    else:
        entries = read_jsonl_rows(path)
    labels: dict[Any, tuple[int, str | None]] = {}
    for n, e in enumerate(entries, 1):
        if "id" not in e or "label" not in e:
            raise ValueError(f"{path} entry {n}: needs 'id' and 'label' (1 = faithful, 0 = unfaithful)")
        labels[str(e["id"])] = (parse_label(e["label"], f"{path} entry {n}"), e.get("subset") or None)
    return labels


# ---------------------------------------------------------------------------- values and colours
def score_source(rows: Sequence[dict[str, Any]]) -> str:
    """Which per-sentence value colours the report (see the module docstring)."""
    sentences = [s for r in rows for s in (r.get("sentences") or [])]
    if any(_number(s.get("score")) is not None for s in sentences):
        return "score"
    if any(_number((s.get("features") or {}).get("align_score")) is not None for s in sentences):
        return "align_score"
    return "mean_prob"


def sentence_value(sentence: dict[str, Any], source: str) -> float | None:
    raw = sentence.get("score") if source == "score" else (sentence.get("features") or {}).get(source)
    return _number(raw)


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else None


def colour(value: float | None) -> str:
    """Background for a value in [0, 1]: red (0) - yellow - green (1), lightened for legible text; grey if None."""
    if value is None:
        return "#e5e7eb"
    from matplotlib import colormaps

    r, g, b, _ = colormaps["RdYlGn"](float(np.clip(value, 0.0, 1.0)))
    mix = 0.55  # share of the colour; the rest is white
    return "#{:02x}{:02x}{:02x}".format(*(round(255 * (mix * c + 1 - mix)) for c in (r, g, b)))


def response_value(row: dict[str, Any], source: str) -> float | None:
    """A row's value for ROC/calibration: response_score, else factuality, else min sentence value."""
    for key in ("response_score", "factuality"):
        if _number(row.get(key)) is not None:
            return _number(row[key])
    values = [v for v in (sentence_value(s, source) for s in row.get("sentences") or []) if v is not None]
    return min(values) if values else None


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


# ---------------------------------------------------------------------------- views
def _chunks(row: dict[str, Any], inp: dict[str, Any]) -> list[ChunkView]:
    ctx = inp.get("context", row.get("context"))
    if ctx is None:
        return []
    texts = (
        [ctx]
        if isinstance(ctx, str)
        else [c if isinstance(c, str) else json.dumps(c) for c in ctx]
        if isinstance(ctx, list)
        else [str(ctx)]
    )
    chunks = [ChunkView(i, t) for i, t in enumerate(texts)]
    best = row.get("best_source")
    for src in row.get("sources") or []:
        if isinstance(src, dict) and isinstance(src.get("index"), int) and 0 <= src["index"] < len(chunks):
            c = chunks[src["index"]]
            c.support = _fmt(src["support"]) if _number(src.get("support")) is not None else None
            c.weight = _fmt(src["weight"]) if _number(src.get("weight")) is not None else None
    if isinstance(best, int) and not isinstance(best, bool) and 0 <= best < len(chunks):
        chunks[best].best = True
    return chunks


def build_row(
    n: int, row: dict[str, Any], inp: dict[str, Any], source: str, label: tuple[int, str | None] | None
) -> RowView:
    view = RowView(n=n, id=row.get("id"), error=row.get("error"), warnings=[str(w) for w in row.get("warnings") or []])
    if not row:
        view.error = "this line of the scored file is not a JSON object"
    question = inp.get("question", row.get("question"))
    view.question = question if isinstance(question, str) else None
    sentences = [s for s in row.get("sentences") or [] if isinstance(s, dict)]
    response = inp.get("response") if isinstance(inp.get("response"), str) else None
    if response is not None and any(response[s.get("start", 0):s.get("end", 0)] != s.get("text") for s in sentences):
        view.warnings.append("the input row's response does not match the scored sentences: showing the sentences only")
        response = None
    pos = 0
    for s in sentences:
        value = sentence_value(s, source)
        feats = [(k, _fmt(v)) for k, v in (s.get("features") or {}).items()]
        if "final_score" in s:  # the whole-answer score (syncheck.aggregators.final)
            feats.insert(0, ("final score", _fmt(s["final_score"])))
        if "score" in s:
            feats.insert(0, ("score", _fmt(s["score"])))
        sv = SentenceView(str(s.get("text", "")), value, colour(value), feats)
        if response is not None:
            view.segments.append((response[pos:s["start"]], None))
            pos = s["end"]
        elif view.segments:
            view.segments.append((" ", None))
        view.segments.append((sv.text, sv))
    if response is not None and sentences:
        view.segments.append((response[pos:], None))
    elif response is not None and response.strip():
        clipped = response if len(response) <= 400 else f"{response[:400]} … ({len(response) - 400} more characters)"
        view.segments = [(clipped, None)]  # not scored: shown as plain text
    view.n_sentences = len(sentences)
    for key, name in (("response_score", "response score"), ("factuality", "factuality")):
        if _number(row.get(key)) is not None:
            view.badges.append((name, _fmt(row[key])))
    if label is not None:
        view.badges.append(
            ("label", ("1 faithful" if label[0] else "0 hallucinated") + (f" · {label[1]}" if label[1] else ""))
        )
    view.context = _chunks(row, inp)
    return view


# ---------------------------------------------------------------------------- metrics and plots
def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def subset_plots(subsets: dict[str, dict[str, np.ndarray]], value_name: str = "syncheck") -> dict[str, Any]:
    """AUC (95% bootstrap CI) of the score beside the length and word-overlap baselines, per subset, and one
    PNG with a column per subset: ROC curve on top, calibration plot below."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import roc_curve

    table, notes, drawable = [], [], []
    for name, d in subsets.items():
        y = d["label"]
        if len(y) < 2 or y.min() == y.max():
            notes.append(f"{name}: {len(y)} labelled rows, all {'faithful' if len(y) and y[0] else 'hallucinated'} — "
                         "ROC and calibration need both labels")
            continue
        cells = []
        for key in ("score", "length", "overlap"):
            keep = ~np.isnan(d[key])
            if keep.sum() >= 2 and 0 < y[keep].sum() < keep.sum():
                auc, lo, hi = bootstrap_auroc(y[keep], d[key][keep])
                cells.append((f"{auc:.3f}", f"[{lo:.2f}, {hi:.2f}]"))
            else:
                cells.append(("–", ""))
        table.append({"name": name, "n": len(y), "positives": int(y.sum()), "cells": cells})
        drawable.append(name)
    image = None
    if drawable:
        cols = len(drawable)
        if cols == 1:  # ROC and calibration side by side
            fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.3), squeeze=False)
            axes = [[axes[0][0]], [axes[0][1]]]
        else:
            fig, axes = plt.subplots(2, cols, figsize=(3.3 * cols + 0.6, 6.4), squeeze=False)
        for c, name in enumerate(drawable):
            d = subsets[name]
            y, s = d["label"], d["score"]
            ax = axes[0][c]
            ax.plot([0, 1], [0, 1], color="#d1d5db", lw=1)
            keep = ~np.isnan(d["length"])
            fl, tl, _ = roc_curve(y[keep], d["length"][keep])
            ax.plot(fl, tl, color="#9ca3af", lw=1.2, ls="--", label="length")
            fpr, tpr, _ = roc_curve(y, s)
            ax.plot(fpr, tpr, color="#15803d", lw=2, label=value_name)
            ax.set_title(f"{name}: ROC", fontsize=10)
            ax.set_xlabel("false positive rate", fontsize=8.5)
            ax.set_ylabel("true positive rate" if c == 0 else "", fontsize=8.5)
            if c == 0:
                ax.legend(loc="center right", fontsize=7.5, frameon=False)
            ax = axes[1][c]
            if s.min() >= 0 and s.max() <= 1:
                frac, mean = calibration_curve(y, s, n_bins=min(10, max(2, len(y) // 5)))
                ax.plot([0, 1], [0, 1], color="#d1d5db", lw=1)
                ax.plot(mean, frac, marker="o", ms=4, color="#1d4ed8")
                ax.set_title(f"{name}: calibration", fontsize=10)
                ax.set_xlabel("predicted score", fontsize=8.5)
                ax.set_ylabel("observed share faithful" if c == 0 or cols == 1 else "", fontsize=8.5)
            else:
                ax.text(0.5, 0.5, "scores outside [0, 1]:\nno calibration plot", ha="center", va="center", fontsize=9)
                ax.set_axis_off()
            for ax in (axes[0][c], axes[1][c]):
                ax.set_xlim(-0.02, 1.02)
                ax.set_ylim(-0.02, 1.02)
                ax.tick_params(labelsize=7.5)
                ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        image = _png(fig)
    return {"table": table, "notes": notes, "image": image, "names": drawable, "value_name": value_name}


def _overlap(context: Any, text: str) -> float:
    from features.alignment.lexical import lexical_precision

    if isinstance(context, list):
        context = "\n".join(c for c in context if isinstance(c, str))
    return lexical_precision(context, text) if isinstance(context, str) and text else float("nan")


# ---------------------------------------------------------------------------- render
def build_report(
    scored: Sequence[dict[str, Any]],
    inputs: Sequence[dict[str, Any]] | None = None,
    labels: dict[Any, tuple[int, str | None]] | None = None,
    *,
    title: str = "syncheck report",
    max_rows: int = 1000,
) -> str:
    """The report's HTML.

    Args:
        scored: rows of ``syncheck score`` output.
        inputs: the input rows, same order (one per scored row); supplies the
            response text between sentences, the context and labels.
        labels: ``{str(id): (label, subset)}`` (see :func:`read_labels`).
        max_rows: rows drawn (metrics use all rows).

    Raises:
        ValueError: ``inputs`` has another length than ``scored`` or its ids differ.
    """
    import jinja2

    if inputs is not None:
        if len(inputs) != len(scored):
            raise ValueError(f"the input has {len(inputs)} rows but the scored file {len(scored)}; pass the input that "
                             "was scored")
        for n, (r, i) in enumerate(zip(scored, inputs), 1):
            rid, iid = r.get("id"), i.get("id")
            if not r.get("error") and isinstance(iid, (str, int, float)) and rid != iid:  # error rows may lack ids
                raise ValueError(f"row {n}: scored id {json.dumps(rid)} but input id {json.dumps(iid)}; pass the input "
                                 "that was scored")
    inputs = inputs or [{} for _ in scored]
    source = score_source(scored)
    value_name = next(
        (k for k in ("response_score", "factuality") if any(_number(r.get(k)) is not None for r in scored)),
        f"lowest sentence {source}",
    )
    views, groups = [], {}
    for n, (row, inp) in enumerate(zip(scored, inputs), 1):
        lab = (labels or {}).get(str(row.get("id")))
        if lab is None and ("label" in row or "label" in inp):
            try:
                lab = (
                    parse_label(row.get("label", inp.get("label")), f"row {n}"),
                    row.get("subset", inp.get("subset")),
                )
            except LabelError:
                lab = None
        if n <= max_rows:
            views.append(build_row(n, row, inp, source, lab))
        value = response_value(row, source)
        if lab is not None and value is not None and not row.get("error"):
            text = (
                inp.get("response")
                if isinstance(inp.get("response"), str)
                else " ".join(s.get("text", "") for s in row.get("sentences") or [])
            )
            for key in {"all", str(lab[1])} if lab[1] else {"all"}:
                g = groups.setdefault(key, {"label": [], "score": [], "length": [], "overlap": []})
                g["label"].append(lab[0])
                g["score"].append(value)
                g["length"].append(float(len(text)))
                g["overlap"].append(_overlap(inp.get("context", row.get("context")), text))
    subsets = {
        k: {f: np.asarray(v, dtype=float) for f, v in g.items()}
        for k, g in sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0]))
    }
    env = jinja2.Environment(loader=jinja2.PackageLoader("syncheck", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template("report.html.j2").render(
        title=title,
        rows=views,
        total=len(scored),
        n_errors=sum(1 for r in scored if r.get("error") or not r),
        n_warnings=sum(1 for r in scored if r.get("warnings")),
        n_sentences=sum(len(r.get("sentences") or []) for r in scored),
        source=source,
        source_text=SCORE_SOURCES[source],
        gradient=[colour(v) for v in np.linspace(0, 1, 11)],
        plots=subset_plots(subsets, value_name) if subsets else None,
        n_labelled=len(groups.get("all", {}).get("label", [])),
    )


def write_report(scored_path: Path, output: Path, input_path: Path | None = None, labels_path: Path | None = None,
                 max_rows: int = 1000) -> Path:
    """Read the files, render and write the report; returns ``output``."""
    scored = read_jsonl_rows(scored_path)
    inputs = read_jsonl_rows(input_path) if input_path else None
    labels = read_labels(labels_path) if labels_path else None
    html = build_report(scored, inputs, labels, title=f"syncheck report — {scored_path.name}", max_rows=max_rows)
    output.write_bytes(html.encode("utf-8", errors="replace"))  # an unpaired surrogate from the input becomes '?'
    return output
