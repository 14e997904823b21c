"""The installed packages speak to users: no error, docstring, comment or ``--help`` names ``benchmarks``, which is
not installed (errors point to ``syncheck calibrate`` / ``syncheck train``; measured figures stay out of the text, which
names the section of RESULTS.md in the source repository behind a default)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("features", "syncheck", "fod")
WORD = re.compile(r"\bbenchmarks\b", re.IGNORECASE)


def test_library_never_names_benchmarks():
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for package in LIBRARY for path in sorted((ROOT / package).rglob("*.py"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if WORD.search(line)]
    assert not hits, "the library names `benchmarks` (not installed for users):\n" + "\n".join(hits)


def test_check_help_states_no_benchmark_paths():
    from click.testing import CliRunner

    from syncheck.cli.check import check

    text = CliRunner().invoke(check, ["--help"], terminal_width=200).output
    assert "Usage:" in text
    for bad in ("benchmark", "RESULTS.md", ".py"):
        assert bad not in text, f"`syncheck check --help` names {bad!r}"


#: A measured figure in the library's text (``0.876``): docstrings and comments describe behaviour and name the
#: RESULTS.md section behind a default; the figures live in RESULTS.md and the notes, where they are kept current.
FIGURE = re.compile(r"\b0\.\d{3}")
MAX_FIGURES = 5


def docstrings_and_comments(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of every comment and docstring (module, class, function, attribute) of a Python file."""
    source = path.read_text(encoding="utf-8")
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            is_doc = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str)
            if is_doc and (i == 0 and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                          ast.AsyncFunctionDef))
                           or i > 0 and isinstance(body[i - 1], (ast.Assign, ast.AnnAssign))):
                out.append((stmt.lineno, stmt.value.value))
    return out


def test_docstrings_and_comments_state_no_measured_figures():
    hits = [f"{path.relative_to(ROOT)}:{line}: {match}"
            for package in LIBRARY for path in sorted((ROOT / package).rglob("*.py"))
            for line, text in docstrings_and_comments(path) for match in FIGURE.findall(text)]
    assert len(hits) <= MAX_FIGURES, (
        f"{len(hits)} three-decimal figures in the library's docstrings and comments (at most {MAX_FIGURES}): "
        "name the RESULTS.md section instead (\"RESULTS.md in the source repository, \\\"Sentence score\\\"\"):\n"
        + "\n".join(hits))
