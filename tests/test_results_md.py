"""benchmarks/results_md.py: a rerun rewrites its own section of RESULTS.md and nothing else (no model, no data)."""

from __future__ import annotations

import shlex

from benchmarks.results_md import replace_section, write_section


def test_a_top_level_section_runs_to_the_next_one():
    text = "# R\n\n## A (run 1)\n\nold\n\n## Next\n\nkeep\n"
    assert replace_section(text, "## A (run 1)", "new\n") == "# R\n\n## A (run 1)\n\nnew\n\n## Next\n\nkeep\n"


def test_a_nested_section_keeps_the_history_and_the_next_topic():
    text = ("# R\n\n## Topic\n\n### A (run 1)\n\nold\n\n### History\n\n#### A (run 0)\n\nolder\n\n"
            "## Other topic\n\nkeep\n")
    got = replace_section(text, "## A (run 1)", "new\n\n### sub\n\nrow")
    assert got == ("# R\n\n## Topic\n\n### A (run 1)\n\nnew\n\n#### sub\n\nrow\n\n### History\n\n#### A (run 0)\n\n"
                   "older\n\n## Other topic\n\nkeep\n")


def test_a_section_in_a_history_stops_at_the_next_entry_and_demotes_its_headings():
    text = "## T\n\n### History\n\n#### B (run 4)\n\nold\n\n##### qa\n\nx\n\n#### B (run 3)\n\nolder\n"
    got = replace_section(text, "## B (run 4)", "### qa\n\nnew")
    assert got == "## T\n\n### History\n\n#### B (run 4)\n\n##### qa\n\nnew\n\n#### B (run 3)\n\nolder\n"


def test_a_missing_section_is_appended_and_a_missing_file_created(tmp_path):
    assert replace_section("# R\n", "## New", "body") == "# R\n\n## New\n\nbody\n"
    path = tmp_path / "RESULTS.md"
    write_section(path, "## New", "body\n")
    assert path.read_text(encoding="utf-8") == "# Benchmark results\n\n## New\n\nbody\n"
    write_section(path, "## New", "again")
    assert path.read_text(encoding="utf-8") == "# Benchmark results\n\n## New\n\nagain\n"


def test_a_title_must_match_whole():
    text = "## A (run 1) and more\n\nx\n\n## A (run 1)\n\nold\n"
    assert replace_section(text, "## A (run 1)", "new") == "## A (run 1) and more\n\nx\n\n## A (run 1)\n\nnew\n"


def test_the_command_a_section_states_quotes_what_a_shell_would_split():
    from benchmarks.results_md import command_line

    cmd = command_line("benchmarks.verifier_quality", ["--sets", "RAGTruth QA,RAGTruth Summary", "--results-section",
                                                       "### The verifier (per task)", "--limit", "3"])
    assert cmd == ("python -m benchmarks.verifier_quality --sets 'RAGTruth QA,RAGTruth Summary' "
                   "--results-section '### The verifier (per task)' --limit 3")
    assert shlex.split(cmd)[3:] == ["--sets", "RAGTruth QA,RAGTruth Summary", "--results-section",
                                    "### The verifier (per task)", "--limit", "3"]
