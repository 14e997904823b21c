"""Write a benchmark's tables into its own section of a Markdown file (``--results-md FILE``: a dated note of
``benchmarks/notes/``), leaving the rest of the file alone. ``benchmarks/RESULTS.md`` holds the current figures only,
carried there by hand from the note that measured them.

The tables a command writes sit in a section of their own, at any heading level, found by its title: the
``"## Title"`` a benchmark names matches ``### Title`` or ``#### Title`` too. A section runs to the next heading of
its own level or above, or to a ``History`` heading, whichever comes first, so a rerun replaces its own tables and
never a topic's history. Headings inside a body are written for a ``##`` section and move down with it. A section
not found is appended at the end of the file.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Sequence

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*$", re.M)


def _level(heading: str) -> int:
    return len(heading) - len(heading.lstrip("#"))


def replace_section(text: str, section: str, body: str) -> str:
    """``text`` with the body of ``section`` (a heading such as ``"## Title"``) replaced by ``body``."""
    title = section.lstrip("#").strip()
    body = body.strip("\n")
    found = next((m for m in _HEADING.finditer(text) if m.group(2) == title), None)
    if found is None:
        return text.rstrip("\n") + f"\n\n{section}\n\n{body}\n"
    level = len(found.group(1))
    shift = level - _level(section)
    if shift:
        body = _HEADING.sub(lambda h: "#" * max(1, min(6, len(h.group(1)) + shift)) + " " + h.group(2), body)
    end = len(text)
    for m in _HEADING.finditer(text, found.end()):
        if len(m.group(1)) <= level or m.group(2) == "History":
            end = m.start()
            break
    rest = text[end:]
    return text[: found.end()] + "\n\n" + body + ("\n\n" + rest if rest else "\n")


def write_section(path: Path, section: str, body: str) -> None:
    """Replace (or append) ``section``'s body in the markdown file ``path`` (created when missing)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    path.write_text(replace_section(text, section, body), encoding="utf-8")


def publish(md: str, results_md: str | None, section: str) -> None:
    """Print the section's body ``md``, and write it into the file ``results_md`` as ``section`` when given."""
    print(md)
    if results_md:
        write_section(Path(results_md), section, md)


def git_commit() -> str:
    """The checkout's short commit (``"unknown"`` outside git)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def command_line(module: str, argv: Sequence[str] | None = None) -> str:
    """``python -m <module> <arguments>``, each argument quoted as a shell needs it (a set name with a space, a
    section title with ``#``), so the command a section states runs when pasted."""
    return f"python -m {module} " + shlex.join(sys.argv[1:] if argv is None else argv)


def measured_line() -> str:
    """``Measured <date> at commit <commit> on <machine> (<n> CPUs).``: what every results section states."""
    return (
        f"Measured {date.today().isoformat()} at commit {git_commit()} on {platform.machine()} ({os.cpu_count()} CPUs)."
    )

