"""benchmarks/runs/ carries only what the results cite: every file there is cited by benchmarks/RESULTS.md, a note of
benchmarks/notes/, the README or docs/ (by its name, its folder, or a pattern such as ``conflict_qwen_alpha.*``), and
the folder stays under 2 MB."""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "runs"
MAX_BYTES = 2_000_000
CITING = [ROOT / "benchmarks" / "RESULTS.md", *sorted((ROOT / "benchmarks" / "notes").glob("*.md")), ROOT / "README.md",
          *sorted((ROOT / "docs").glob("*.md"))]


def run_files() -> list[Path]:
    """The files of benchmarks/runs/ that git tracks (every file there when this is no git checkout)."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "benchmarks/runs"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
        files = [ROOT / name for name in out.split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        files = []
    return files or sorted(p for p in RUNS.rglob("*") if p.is_file())


def is_cited(path: Path, text: str, patterns: list[str]) -> bool:
    rel = path.relative_to(RUNS).as_posix()
    plain = rel.removesuffix(".gz")
    names = {rel, plain, Path(plain).name}
    if any(name in text for name in names) or (path.parent != RUNS and f"runs/{path.parent.name}/" in text):
        return True
    return any(fnmatch.fnmatch(name, pattern) for name in names for pattern in patterns)


def test_every_run_file_is_cited_and_the_folder_is_small():
    text = "\n".join(p.read_text(encoding="utf-8") for p in CITING)
    # patterns as written: `conflict_qwen_alpha.*`, `refill_32_rounds3_*.log`, `conflict_smollm2_alpha.K.jsonl`
    patterns = [Path(p).name.replace(".K.", ".*.") for p in re.findall(r"[\w./-]*(?:\*|\.K\.)[\w.*/-]*", text)]
    files = run_files()
    assert files, "benchmarks/runs/ holds no file: the results cite run files there"
    uncited = [p.relative_to(ROOT).as_posix() for p in files if not is_cited(p, text, patterns)]
    assert not uncited, "files nothing cites (delete them, or cite them in benchmarks/RESULTS.md or a note):\n" + \
        "\n".join(uncited)
    total = sum(p.stat().st_size for p in files)
    assert total <= MAX_BYTES, f"benchmarks/runs/ holds {total:,} bytes; keep it under {MAX_BYTES:,} (gzip run files)"


def test_new_runs_stay_out_of_git():
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "benchmarks/runs/a_new_run.jsonl"],
                             capture_output=True, timeout=30)
    assert ignored.returncode in (0, 128), "add `benchmarks/runs/` to .gitignore"  # 128: not a git checkout
