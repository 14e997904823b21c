"""The README and the MkDocs site: the site builds strictly, the README stays short, and every relative link
in README.md, docs/*.md, benchmarks/RESULTS.md, benchmarks/README.md and the notes (benchmarks/notes/*.md) points to
a file that exists and, with a #anchor, to a heading of that file."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 200
FIRST_PYTHON_WITHIN = 60

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files() -> list[Path]:
    benchmarks = ROOT / "benchmarks"
    return [README, *sorted(DOCS.glob("*.md")), benchmarks / "RESULTS.md", benchmarks / "README.md",
            *sorted((benchmarks / "notes").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks; inline code spans blanked out."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, re.sub(r"`[^`]*`", "``", line)))
    return out


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lowercase, punctuation except '-' and ' ' dropped,
    spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 ... suffixes for repeated headings."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def relative_links(path: Path) -> list[tuple[int, str]]:
    links = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
                continue
            links.append((number, target))
    return links


def test_mkdocs_builds_strictly(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]' (scripts/setup.sh installs it)")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "site" / "api" / "index.html").is_file()


def test_readme_is_short_and_opens_with_python():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; at most {MAX_README_LINES}"
    first = next((i for i, line in enumerate(lines, 1) if line.strip().startswith("```python")), None)
    assert first is not None and first <= FIRST_PYTHON_WITHIN, (
        f"README.md's first ```python block is at line {first}; it must open within the first {FIRST_PYTHON_WITHIN}")


def test_readme_keeps_the_setup_and_test_commands():
    text = README.read_text(encoding="utf-8")
    assert "bash scripts/setup.sh && .venv/bin/syncheck score examples/rag_examples.jsonl" in text
    assert "\n.venv/bin/python -m pytest -q\n" in text


def test_readme_python_blocks_parse():
    text = README.read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        compile(block, "README.md", "exec")


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    broken = []
    for number, target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{path.name}:{number}: {target} (no such file)")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{path.name}:{number}: {target} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_github_slug():
    assert github_slug("Provenance's final check with an LLM judge, and the quality preset's check (2026-11-25)") == (
        "provenances-final-check-with-an-llm-judge-and-the-quality-presets-check-2026-11-25")
    assert github_slug("Serving: `syncheck serve` under load") == "serving-syncheck-serve-under-load"
    assert github_slug("Final scores read the yes/no fields of a JSON record (2026-11-25)") == (
        "final-scores-read-the-yesno-fields-of-a-json-record-2026-11-25")
