"""Knowledge-conflict sets from extractive QA files: the split into halves by document, the swap within a half, the
drops by reason, and the benchmark end to end on a tiny file of its own."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest
from conftest import needs_data, shared_data_dir

from syncheck.training.conflict_halves import HALVES, build_half_set, document_half, qa_file_records
from syncheck.training.conflict_set import DROPS, QARecord, contains_answer, swap_records

#: one question per town: when it was founded (a year), and who founded it (a two-word name)
TOWNS = [("Alderton", 1850, "John Smith"), ("Brackwell", 1721, "Mary Jones"), ("Corrigan", 1905, "Peter Brown"),
         ("Dunmore", 1688, "Anne Clark"), ("Easthaven", 1799, "Hugh Wilson"), ("Farnley", 1833, "Rose Taylor"),
         ("Glenbrook", 1911, "Owen Lewis"), ("Hartfield", 1777, "Ruth Evans")]


def qa_rows(towns=TOWNS) -> list[dict]:
    """Rows in the shared QA files' form: each town its own article, with a question whose answer the passage gives
    twice, one whose answer the question already holds, and one whose answer is a phrase no typing reads."""
    rows = []
    for town, year, founder in towns:
        context = (f"{town} is a small town. It was founded in {year} by {founder}. In {year} it had one street; "
                   f"it grew slowly ever since.")
        answers = [(f"When was {town} founded?", str(year)), (f"Who founded {town}?", founder + "."),
                   (f"Was {town} founded in {year} or in 1600?", str(year)), (f"What is {town}?", "a small town")]
        rows += [{"src": "towns", "id": f"{town}-{k}", "title": town, "context": context, "question": q,
                  "answers": [{"text": a, "start": context.find(a)}]} for k, (q, a) in enumerate(answers)]
    return rows


def write_qa_file(path, rows) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def test_a_document_s_half_is_a_pure_function_of_its_name_and_the_seed():
    names = [f"Article_{i}" for i in range(200)]
    halves = [document_half(n) for n in names]
    assert halves == [document_half(n) for n in names] and set(halves) == set(HALVES)
    assert 70 < halves.count("test") < 130  # about half each
    assert [document_half(n, seed=7) for n in names] != halves  # another seed, another split


def test_substitutes_come_from_other_documents_only():
    records = [QARecord(f"r{i}", i, "When did it open?", f"It opened in {y}. Later, in {z}, it closed.", str(y), d)
               for i, (y, z, d) in enumerate([(1901, 1950, "a"), (1902, 1951, "a"), (1903, 1952, "b")])]
    drops = Counter()
    items = list(swap_records(records, drops=drops))
    by_id = {it.id: it for it in items}
    assert by_id["r0"].substitute == "1903" and by_id["r1"].substitute == "1903"  # never the other answer of "a"
    assert by_id["r2"].substitute in ("1901", "1902")
    assert not drops


def test_a_half_set_swaps_every_occurrence_draws_within_the_half_and_counts_its_drops(tmp_path):
    path = tmp_path / "towns.jsonl.gz"
    write_qa_file(path, qa_rows())
    for half in HALVES:
        towns = {r.document for r in qa_file_records(path, half)}
        got = build_half_set(path, half)
        assert got.records == 4 * len(towns) and got.kept == len(got.items)
        assert got.drops[DROPS[0]] == len(towns) and got.drops[DROPS[2]] == len(towns)
        assert sum(got.drops.values()) + got.kept == got.records
        answers = {r.answer: r.document for r in qa_file_records(path, half)}
        for it in got.items:
            assert answers[it.substitute] != answers[it.original]  # another article of the same half
            assert it.context.count(it.substitute) == it.original_context.count(it.original)  # every occurrence
            assert not contains_answer(it.context, it.original)
            assert it.original[-1] != "."  # "Mary Jones." is read as "Mary Jones"
        assert [r.record for r in qa_file_records(path, half)] == list(range(got.records))
        later = build_half_set(path, half, start=5, limit=2)
        assert later.items == [it for it in got.items if it.record >= 5][:2]  # a slice of the same set
    with pytest.raises(ValueError, match="selection"):
        build_half_set(path, "dev")


@needs_data("qa/xquad_en.jsonl.gz")
def test_the_xquad_halves_split_the_articles_and_the_test_half_keeps_enough_questions():
    path = shared_data_dir() / "qa" / "xquad_en.jsonl.gz"
    documents = {half: {r.document for r in qa_file_records(path, half)} for half in HALVES}
    assert documents["selection"] and not documents["selection"] & documents["test"]
    test = build_half_set(path, "test")
    assert len(test.items) >= 150
    answers = {r.answer: r.document for r in qa_file_records(path, "test")}
    assert all(answers[it.substitute] in documents["test"] for it in test.items)


def test_the_conflict_benchmark_runs_on_a_half_of_a_qa_file(tmp_path, tiny_dir):
    """benchmarks.conflict_qa --source xquad on a tiny file, the control included, resumed on a second call."""
    from benchmarks import conflict_qa

    write_qa_file(tmp_path / "xquad_en.jsonl.gz", qa_rows())
    half = document_half("Alderton")
    out = tmp_path / "x.jsonl"
    args = ["--source", "xquad", "--half", half, "--data-dir", str(tmp_path), "--limit", "2", "--model",
            str(tiny_dir), "--methods", "greedy", "--control", "greedy", "--max-new-tokens", "4", "--out", str(out)]
    text = conflict_qa.main(args)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 2 and all(r["error"] is None and r["id"].startswith("towns-") for r in rows)
    assert rows[0]["run"]["config"]["source"] == "xquad" and rows[0]["run"]["config"]["half"] == half
    assert f"the {half} half of XQuAD" in text and "left out: " in text
    assert f"--source xquad --half {half} --start 0 --limit 2" in text
    assert "`DIR` holds `xquad_en.jsonl.gz`" in text
    assert conflict_qa.section_title(conflict_qa.argparse.Namespace(source="xquad", half=half, model="m")) == (
        f"## FOD on knowledge-conflict QA over Wikipedia paragraphs (XQuAD), {half} half (m)")
    conflict_qa.main(args)
    assert len(out.read_text().splitlines()) == 4  # resumed: nothing decoded again
    for wrong in (["--source", "xquad"], ["--half", "test"]):
        with pytest.raises(SystemExit):
            conflict_qa.main([*wrong, "--out", str(out)])
