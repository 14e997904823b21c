"""Labelled pairs from files: ``premise`` / ``hypothesis`` / ``label`` JSON lines (``.jsonl`` or ``.jsonl.gz``).

The format of the public NLI, fact-checking and summary-consistency pairs the shipped verifier learns from, and the
way a user adds their own labelled pairs to a domain verifier (``syncheck verifier train --pairs FILE``). Each line:

- ``premise``: the passage; ``hypothesis``: the claim checked against it;
- ``label``: 1 = the premise supports the claim, 0 = it does not (true/false and ``"entailment"`` /
  ``"neutral"`` / ``"contradiction"`` are read too: entailment = 1, the other two = 0);
- optional ``src``: the sub-source (the pair's ``kind``; default: the file's name), used to cap, drop and count
  sources.

A pair's group (what every split keeps on one side) is its sub-source and its premise: pairs that share a premise
share a group. :data:`KNOWN_SOURCES` gives the licence of each file of the shared pool (``../shared/data/nli/``);
a manifest lists every file with its rows per sub-source and licence (:func:`pair_file_record`).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from syncheck.jsonl import iter_jsonl
from syncheck.training.pairs import VerifierPair

#: Words a ``label`` may hold besides 0/1 and true/false.
LABEL_WORDS = {"entailment": 1, "supported": 1, "neutral": 0, "contradiction": 0, "unsupported": 0}


@dataclass(frozen=True)
class KnownSource:
    """A file of the shared pool: its licence as its provider states it, and how the package may use it.

    Attributes:
        licence: the licence (or "none stated", with what the text is).
        commercial: whether a model the package ships may learn from it (non-commercial sources may not).
        check: kept out of training as a check of the verifier that no training saw.
        drop: sub-sources of the file that a shipped model leaves out (non-commercial rows of a mixed file).
    """

    licence: str
    commercial: bool = True
    check: bool = False
    drop: tuple[str, ...] = ()


#: The files of ``../shared/data/nli/`` (by stem), as its README states them.
KNOWN_SOURCES: dict[str, KnownSource] = {
    "felsal_nli": KnownSource("MIT (felipessalvatore/NLI_datasets); its sick rows CC BY-NC-SA", drop=("sick",)),
    "snli": KnownSource("CC BY-SA 4.0"),
    "anli_dev": KnownSource("CC BY-NC 4.0", commercial=False),
    "fever_dev": KnownSource("none stated (FEVER: Wikipedia text, CC BY-SA)"),
    "climate_fever": KnownSource("none stated (Climate-FEVER)"),
    "covidfact": KnownSource("none stated (COVID-Fact)"),
    "healthver": KnownSource("none stated (HealthVer)"),
    "sufficient_facts": KnownSource("none stated (SufficientFacts)"),
    "factcg_cg2c": KnownSource("MIT (FactCG)"),
    "summacoz": KnownSource("Apache-2.0 (SummaCoz)"),
    "frank": KnownSource("MIT (FRANK)"),
    "qags": KnownSource("none stated (QAGS)"),
    "begin": KnownSource("per sub-folder (BEGIN)"),
    "summedits": KnownSource("Apache-2.0 (SummEdits)", check=True),
    "wice": KnownSource("ODC-BY (WiCE annotations)", check=True),
    "fever_symmetric": KnownSource("MIT (FEVER-Symmetric)", check=True),
}


def file_stem(path: str | Path) -> str:
    """``dir/snli.jsonl.gz`` -> ``snli``."""
    name = Path(path).name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name


def parse_label(value: Any, where: str) -> int:
    """A line's ``label`` as 0 or 1.

    Raises:
        ValueError: a label of another kind (the message names the line and the labels read).
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in LABEL_WORDS:
        return LABEL_WORDS[value.strip().lower()]
    raise ValueError(f"{where}: label {value!r} is not 0/1, true/false or entailment/neutral/contradiction; give "
                     "1 where the premise supports the hypothesis, 0 where it does not")


def premise_group(src: str, premise: str) -> str:
    return f"{src}-{hashlib.sha1(premise.encode('utf-8')).hexdigest()[:12]}"


def read_pair_file(path: str | Path, drop: Iterable[str] = ()) -> list[VerifierPair]:
    """Every pair of one file, in file order, less the sub-sources in ``drop``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a line without a ``premise`` and ``hypothesis`` string or with a label of another kind (the
            message names the file and line, and what to write there).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; --pairs takes JSON-lines files (.jsonl or .jsonl.gz) with "
                                "premise, hypothesis and label")
    stem, dropped, out = file_stem(path), set(drop), []
    for n, row in enumerate(iter_jsonl(path), 1):
        where = f"{path} line {n}"
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("premise", "hypothesis")):
            raise ValueError(f"{where}: give an object with 'premise' and 'hypothesis' strings and a 'label'")
        src = str(row.get("src") or stem)
        if src in dropped:
            continue
        label = parse_label(row.get("label"), where)
        if row["premise"].strip() and row["hypothesis"].strip():
            out.append(VerifierPair(row["premise"], row["hypothesis"], label, premise_group(src, row["premise"]), src))
    return out


def capped(pairs: Sequence[VerifierPair], per_source: int | None, seed: int = 0) -> list[VerifierPair]:
    """At most ``per_source`` pairs of each sub-source (``kind``), whole premise groups drawn with ``seed``, in the
    pairs' order; ``None``: all of them."""
    if per_source is None:
        return list(pairs)
    by_kind: dict[str, dict[str, int]] = {}
    for p in pairs:
        groups = by_kind.setdefault(p.kind, {})
        groups[p.group] = groups.get(p.group, 0) + 1
    keep: set[str] = set()
    for kind, groups in sorted(by_kind.items()):
        order = sorted(groups)
        random.Random(f"{seed}-cap-{kind}").shuffle(order)
        n = 0
        for g in order:
            if n >= per_source:
                break
            keep.add(g)
            n += groups[g]
    return [p for p in pairs if p.group in keep]


def pair_file_record(path: str | Path, pairs: Sequence[VerifierPair], drop: Iterable[str] = ()) -> dict[str, Any]:
    """What a manifest says of one pairs file (a source of ``data.sources``, :mod:`features.model_manifest`): its
    name, licence, rows, dropped sub-sources and rows (supported) per sub-source kept."""
    known = KNOWN_SOURCES.get(file_stem(path))
    rows: dict[str, dict[str, int]] = {}
    for p in pairs:
        r = rows.setdefault(p.kind, {"rows": 0, "supported": 0})
        r["rows"] += 1
        r["supported"] += p.label
    return {"name": Path(path).name,
            "licence": known.licence if known else "as its provider states (not a file of the shared pool)",
            "rows": len(pairs), **({"dropped": sorted(set(drop))} if drop else {}),
            "sources": dict(sorted(rows.items()))}


def shipping_problems(paths: Iterable[str | Path], drop: Iterable[str]) -> list[str]:
    """Why a model trained on these files (less the sub-sources ``drop``) may not ship: a non-commercial source, a
    non-commercial sub-source left in, or a check set trained on. Empty when it may."""
    dropped, problems = set(drop), []
    for path in paths:
        stem = file_stem(path)
        known = KNOWN_SOURCES.get(stem)
        if known is None:
            continue
        if not known.commercial:
            problems.append(f"{stem} is non-commercial ({known.licence})")
        if known.check:
            problems.append(f"{stem} is a check set that no training may see")
        left = sorted(set(known.drop) - dropped)
        if left:
            problems.append(f"{stem} keeps its non-commercial rows {left} (drop them with --drop-source)")
    return problems


__all__ = ["KNOWN_SOURCES", "KnownSource", "LABEL_WORDS", "capped", "file_stem", "pair_file_record", "parse_label",
           "premise_group", "read_pair_file", "shipping_problems"]
