"""A verifier's training set: every source of pairs in one recipe, cut to the model's window and checked for artefacts.

:class:`DataRecipe` names what goes in; :func:`build_pairs` makes the pairs in a fixed order (the same recipe and
seed always give the same pairs):

1. labelled HaluEval rows of the training ranges (:mod:`syncheck.training.sources`), with the synthetic pairs of the
   same records: distractor answers for QA, FactCC-style edits of the faithful summaries, document sentences and
   their edits (:mod:`syncheck.training.synthetic`), and answers a model wrote (:mod:`syncheck.training.writer_pairs`);
   then knowledge-conflict pairs (the answer swapped in its passage) of QA records of the first QA training range;
2. labelled pairs from files (:mod:`syncheck.training.pair_files`): the public NLI, fact-checking and summary
   pairs, or a user's own, capped per sub-source;
3. a user's labelled records, one pair per sentence;
4. a user's documents: their sentences and edits of them.

Then every premise is cut to the window the scorer would check the claim against (:func:`syncheck.training.pairs.
fitted`), and the claim-only artefact check thins the pairs until the claims alone carry no label
(:mod:`syncheck.training.artefacts`).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

from syncheck.jsonl import iter_jsonl
from syncheck.training.artefacts import THINNING
from syncheck.training.conflict_set import build_conflict_set
from syncheck.training.pair_files import capped, pair_file_record, read_pair_file
from syncheck.training.pairs import VerifierPair
from syncheck.training.sources import (
    HALUEVAL_FIELDS,
    HALUEVAL_TRAIN,
    halueval_pairs,
    halueval_records,
    labelled_record_pairs,
    read_documents,
)
from syncheck.training.synthetic import (
    ANSWER_FORMS,
    conflict_distractor_pairs,
    conflict_pairs,
    distractor_pairs,
    document_sentence_pairs,
    summary_edit_pairs,
)


@dataclass(frozen=True)
class DataRecipe:
    """What a verifier trains on.

    Attributes:
        halueval: HaluEval's directory (``None``: no HaluEval rows).
        halueval_records: records taken per HaluEval file, the first ones of its training ranges
            (:data:`~syncheck.training.sources.HALUEVAL_TRAIN`).
        writer_records: QA records (the first of the QA training ranges) a model answers (:mod:`.writer`);
            0 or no ``writer`` model: none.
        writer: the model that writes answers (a name :func:`syncheck.model.models.load_model` takes), or ``None``.
        labelled: a user's labelled record files (the ``syncheck score`` format with labels).
        documents: a user's documents (``.txt`` files, folders, or JSON lines with ``context``).
        sentences_per_document: document sentences (each with an edit) per document.
        distractors_per_record: distractor answers per HaluEval QA record, each with the right answer in its own
            answer form (at most :data:`~syncheck.training.synthetic.ANSWER_FORMS`' length).
        conflict_records: knowledge-conflict items (four pairs each; :func:`~syncheck.training.synthetic.
            conflict_pairs`) made from the QA records of the first QA training range, the first ones that can be
            swapped; substitutes come from the answers of that range. 0: none.
        conflict_distractors: per knowledge-conflict item, distractor answers in the swapped passage against the
            substitute (:func:`~syncheck.training.synthetic.conflict_distractor_pairs`); 0: none.
        pairs: files of labelled ``premise`` / ``hypothesis`` / ``label`` pairs (:mod:`.pair_files`).
        pairs_per_source: at most this many pairs of each sub-source of ``pairs`` (whole premise groups, drawn with
            ``seed``); ``None``: all.
        drop_sources: sub-sources of ``pairs`` left out (e.g. ``sick``, non-commercial).
        thinning: how the claim-only artefact check thins the pairs
            (:data:`~syncheck.training.artefacts.THINNING`): ``"balance"`` (the labels made even in each score
            tenth; what built the shipped verifier) or ``"ratio"`` (each tenth in the labels' overall ratio, for
            labelled rows with few unsupported ones).
        seed: every random choice.
    """

    halueval: str | None = None
    halueval_records: dict[str, int] = field(default_factory=lambda: {"qa": 3000, "dialogue": 3000,
                                                                      "summarization": 1500})
    writer_records: int = 0
    writer: str | None = None
    labelled: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()
    sentences_per_document: int = 1
    distractors_per_record: int = 1
    conflict_records: int = 0
    conflict_distractors: int = 0
    pairs: tuple[str, ...] = ()
    pairs_per_source: int | None = None
    drop_sources: tuple[str, ...] = ()
    thinning: str = "balance"
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.distractors_per_record <= len(ANSWER_FORMS):
            raise ValueError(f"distractors_per_record must be 1 to {len(ANSWER_FORMS)} (each distractor takes its "
                             f"own answer form), got {self.distractors_per_record}")
        if self.conflict_records < 0:
            raise ValueError(f"conflict_records must be 0 or more, got {self.conflict_records}")
        if not 0 <= self.conflict_distractors <= len(ANSWER_FORMS):
            raise ValueError(f"conflict_distractors must be 0 to {len(ANSWER_FORMS)} (each distractor takes its own "
                             f"answer form), got {self.conflict_distractors}")
        if self.conflict_distractors and not self.conflict_records:
            raise ValueError("conflict_distractors needs conflict_records: the distractors are made in the "
                             "swapped passages of those items")
        if self.pairs_per_source is not None and self.pairs_per_source < 1:
            raise ValueError(f"pairs_per_source must be 1 or more (or None for all), got {self.pairs_per_source}")
        if self.drop_sources and not self.pairs:
            raise ValueError("drop_sources names sub-sources of pairs files: give the files (pairs) too")
        if self.thinning not in THINNING:
            raise ValueError(f"thinning must be one of {THINNING}, got {self.thinning!r}")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if self.distractors_per_record == 1:  # the recipes built before the option existed read the same
            del out["distractors_per_record"]
        if self.thinning == "balance":
            del out["thinning"]
        if self.conflict_records == 0:
            del out["conflict_records"]
        if self.conflict_distractors == 0:
            del out["conflict_distractors"]
        for key in ("pairs", "pairs_per_source", "drop_sources"):  # recipes built before pairs files read the same
            if not out[key]:
                del out[key]
        out["halueval_train_ranges"] = {k: [list(r) for r in v] for k, v in HALUEVAL_TRAIN.items()}
        return out


def first_records(ranges, n: int) -> tuple[tuple[int, int], ...]:
    """The first ``n`` record numbers of ``ranges``, as ranges."""
    out, left = [], n
    for a, b in ranges:
        if left <= 0:
            break
        take = min(b - a, left)
        out.append((a, a + take))
        left -= take
    return tuple(out)


def halueval_synthetic(recipe: DataRecipe, subset: str) -> Iterator[VerifierPair]:
    """Synthetic pairs of the HaluEval records the recipe trains on."""
    _, ctx_f, q_f, good_f, _ = HALUEVAL_FIELDS[subset]
    ranges = first_records(HALUEVAL_TRAIN[subset], recipe.halueval_records.get(subset, 0))
    for i, row in halueval_records(recipe.halueval, subset, ranges):
        group = f"halueval-{subset}-{i}"
        if subset == "qa":
            yield from distractor_pairs(row[ctx_f], row[q_f], row[good_f], group, recipe.seed,
                                        recipe.distractors_per_record)
        if subset == "summarization":
            yield from summary_edit_pairs(row[good_f], row[ctx_f], group, recipe.seed)
        if subset in ("qa", "summarization"):
            yield from document_sentence_pairs(row[ctx_f], group, recipe.seed, recipe.sentences_per_document)


def conflict_training_pairs(recipe: DataRecipe) -> list[VerifierPair]:
    """The knowledge-conflict pairs of the recipe: items from the first QA training range only."""
    start, end = HALUEVAL_TRAIN["qa"][0]
    items = build_conflict_set(recipe.halueval, start, recipe.conflict_records, recipe.seed, end=end)
    pairs = []
    for it in items:
        group = f"halueval-qa-{it.record}"
        pairs += conflict_pairs(it, group, recipe.seed)
        if recipe.conflict_distractors:
            pairs += conflict_distractor_pairs(it, group, recipe.seed, recipe.conflict_distractors)
    return pairs


def writer_records(recipe: DataRecipe) -> Iterator[tuple[str, str, str, str]]:
    _, ctx_f, q_f, good_f, _ = HALUEVAL_FIELDS["qa"]
    for i, row in halueval_records(recipe.halueval, "qa", first_records(HALUEVAL_TRAIN["qa"], recipe.writer_records)):
        yield f"halueval-qa-{i}", row[ctx_f], row[q_f], row[good_f]


def build_pairs(recipe: DataRecipe, load_writer: Callable[[str], Any] | None = None,
                progress: bool = True) -> tuple[list[VerifierPair], list[str]]:
    """Every pair of the recipe (before windows and rebalancing), and the reasons labelled records were skipped."""
    pairs: list[VerifierPair] = []
    skipped: list[str] = []
    if recipe.halueval:
        for subset in HALUEVAL_FIELDS:
            n = recipe.halueval_records.get(subset, 0)
            if n > 0:
                pairs += halueval_pairs(recipe.halueval, subset, first_records(HALUEVAL_TRAIN[subset], n))
                pairs += halueval_synthetic(recipe, subset)
        if recipe.conflict_records > 0:
            pairs += conflict_training_pairs(recipe)
        if recipe.writer and recipe.writer_records > 0:
            if load_writer is None:
                from syncheck.model.models import load_model as load_writer
            pairs += _written(load_writer(recipe.writer), writer_records(recipe), progress)
    pairs += pair_file_pairs(recipe)
    if recipe.labelled:
        got, skipped = labelled_record_pairs(recipe.labelled)
        pairs += got
    for group, text in read_documents(recipe.documents):
        pairs += document_sentence_pairs(text, f"doc-{group}", recipe.seed, recipe.sentences_per_document)
    if not pairs:
        raise ValueError("the recipe gives no training pairs: pass pairs files, documents, labelled records or "
                         "HaluEval's directory")
    return pairs, skipped


def pair_file_pairs(recipe: DataRecipe) -> list[VerifierPair]:
    """The pairs of the recipe's pairs files, less its dropped sub-sources, capped per sub-source."""
    pairs: list[VerifierPair] = []
    for path in recipe.pairs:
        pairs += read_pair_file(path, recipe.drop_sources)
    return capped(pairs, recipe.pairs_per_source, recipe.seed)


#: The name and licence a manifest gives the pairs made from a user's labelled records and documents, unless the
#: training command names them (``--labelled-name``, ``--labelled-licence``).
YOURS = ("your labelled records and documents", "yours")


def named_sources(sources: list[dict[str, Any]], name: str | None, licence: str | None) -> list[dict[str, Any]]:
    """``sources`` with the user's records and documents (:data:`YOURS`) under ``name`` and ``licence`` where given."""
    return [{**s, "name": name or s["name"], "licence": licence or s["licence"]} if s.get("name") == YOURS[0] else s
            for s in sources]


def data_sources(recipe: DataRecipe, pairs: list[VerifierPair]) -> list[dict[str, Any]]:
    """Where ``pairs`` (the ones trained on) came from, for a manifest's ``data.sources``: each pairs file with its
    licence and rows per sub-source, then HaluEval and a user's records and documents with the pairs made from
    them."""
    from syncheck.training.pair_files import file_stem

    out, from_files = [], set()
    for path in recipe.pairs:
        srcs = {str(row.get("src") or file_stem(path)) for row in iter_jsonl(path) if isinstance(row, dict)}
        mine = [p for p in pairs if p.kind in srcs and p.kind not in from_files]
        from_files |= srcs
        out.append(pair_file_record(path, mine, [d for d in recipe.drop_sources if d in srcs]))
    halueval: dict[str, dict[str, int]] = {}
    yours: dict[str, dict[str, int]] = {}
    for p in pairs:
        if p.kind not in from_files:
            rows = (halueval if p.group.startswith("halueval-") else yours).setdefault(p.kind, {"rows": 0})
            rows["rows"] += 1
    for name, licence, kinds in (("HaluEval (qa, dialogue, summarization: the training ranges)", "MIT", halueval),
                                 (*YOURS, yours)):
        if kinds:
            out.append({"name": name, "licence": licence, "rows": sum(k["rows"] for k in kinds.values()),
                        "sources": dict(sorted(kinds.items()))})
    return out


def _written(loaded: Any, records: Iterator[tuple[str, str, str, str]], progress: bool) -> list[VerifierPair]:
    from syncheck.training.writer_pairs import writer_pairs

    return list(writer_pairs(loaded, list(records), progress=progress))


def split_groups(pairs: list[VerifierPair], dev_share: float, seed: int = 0
                 ) -> tuple[list[VerifierPair], list[VerifierPair]]:
    """``(train, dev)``: a ``dev_share`` of the groups, drawn with ``seed``, goes to dev."""
    groups = sorted({p.group for p in pairs})
    rng = random.Random(f"{seed}-dev")
    dev = set(rng.sample(groups, int(round(dev_share * len(groups))))) if dev_share > 0 else set()
    return [p for p in pairs if p.group not in dev], [p for p in pairs if p.group in dev]


__all__ = ["DataRecipe", "build_pairs", "data_sources", "first_records", "pair_file_pairs", "split_groups"]
