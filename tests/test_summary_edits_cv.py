"""The summary-edits benchmark: edits train, never test, and never train on their own test article."""

from __future__ import annotations

import dataclasses

import numpy as np

from benchmarks.ragtruth.data import RAGTruthRecord
from benchmarks.studies import summary_edits_cv as se
from tests.test_response_verdict import synthetic_table


def edited_table():
    real = synthetic_table()
    edits = synthetic_table(seed=1)
    keep = edits.task == "Summary"
    return real, edits.subset(keep)


def test_edits_join_training_folds_only_and_never_with_their_own_test_article():
    real, edits = edited_table()
    table = se.concat(real, edits)
    assert len(table) == len(real) + len(edits) and table.response[len(real):].min() >= len(real.records)
    without, with_edits = se.folds_with_edits(table, len(real), seed=0)
    for (train0, test0), (train1, test1) in zip(without, with_edits):
        assert (test0 == test1).all() and test1.max() < len(real)  # test rows are real
        assert (train0 < len(real)).all() and set(train0) <= set(train1)
        added = train1[train1 >= len(real)]
        assert len(added) and not set(table.source[added]) & set(table.source[test1])


def test_figures_read_real_rows_per_task_with_the_paired_difference_and_markdown_has_both_levels():
    real, edits = edited_table()
    table = se.concat(real, edits)
    per_seed = se.evaluate(table, len(real), [0, 1], n_boot=20)
    assert set(per_seed[0]) == {"QA", "Summary", "Data2txt"}
    cell = per_seed[0]["Summary"]
    assert cell["responses"] == 18 and cell["sentences"] == int((real.task == "Summary").sum())
    assert {"sentence: with", "sentence: without", "response: with - without", "response: word overlap"} <= set(cell)
    md = se.markdown(per_seed, ["header"])
    assert md.count("| Summary |") == 2 and "mean over seeds 0,1" in md


def test_every_edit_of_a_faithful_summary_marks_its_edited_sentence_unfaithful():
    article = ("Mayor Jane Smith opened the bridge on Monday. The bridge cost 40 million dollars. "
               "It links Riverside to Oakton. Smith said the city was proud.")
    summary = "Jane Smith opened the bridge on Monday. It cost 40 million dollars."
    rec = RAGTruthRecord("r1", "s1", "Summary", "m", "Summarize.", article, summary, ())
    edits = se.edited_records([rec, dataclasses.replace(rec, id="r2", spans=((0, 5),)),
                               dataclasses.replace(rec, id="r3", task="QA")], seed=0, per_kind=1)
    assert edits and all(e.id.startswith("r1-edit-") and e.source_id == "s1" for e in edits)
    for e in edits:
        labels = e.sentence_labels()
        assert labels.count(0) == 1 and e.response != summary
    assert np.mean([len(e.sentences()) for e in edits]) >= 2
