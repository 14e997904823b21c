"""The local and Ray runners give the same rows, byte for byte, in input order (tiny model saved to a temp dir)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from syncheck.cli import main
from syncheck.cli.common import read_records
from syncheck.runners.local import score_local

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module")
def input_file(tmp_path_factory):
    ctx = ["The tower is 330 m tall.", "It opened in 1889 for the World's Fair."]
    lines = [json.dumps({"id": f"r{i}", "context": ctx, "question": "How tall?",
                         "response": "It is 330 m tall. It opened in 1889. " * (1 + i % 3)}) for i in range(13)]
    lines[2] = "{not json"
    lines[4] = json.dumps({"id": "empty", "context": ctx, "response": ""})
    lines[7] = json.dumps({"id": "r1", "context": ctx, "response": "A duplicate id."})
    lines[9] = json.dumps({"id": "huge", "context": ctx, "response": "the tower is very tall " * 200})
    path = tmp_path_factory.mktemp("runners") / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    """A local Ray instance on 2 CPUs (the workers share the tests' syncheck cache)."""
    if os.environ.get("CI"):
        import ray
    else:
        ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")
    cache = str(tmp_path_factory.getbasetemp() / "syncheck-cache")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"SYNCHECK_CACHE": cache, "HF_HUB_OFFLINE": "1"}})
    yield ray
    ray.shutdown()


def run_cli(args):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result


def test_local_engine_is_the_scorer(tiny_dir, input_file):
    rows = list(score_local(read_records(input_file), {"model": str(tiny_dir), "batch_size": 3, "lid": None}))
    assert len(rows) == 13 and rows[2]["id"] is None and "not valid JSON" in rows[2]["error"]
    assert any("duplicate id" in w for w in rows[7]["warnings"])


def test_ray_runner_output_is_identical_to_local_and_resumes(tiny_dir, input_file, tmp_path, ray_session):
    """One Ray run (2 replicas, the LID reference set shared by a task) that also resumes a torn file.

    The local run writes the reference file. The Ray run starts from its first row plus a torn second line,
    so it recomputes the first batch (3 rows; the kept row is not written again) and scores the other 12:
    the result must be the local file, byte for byte.
    """
    base = ["score", str(input_file), "--model", str(tiny_dir), "--batch-size", "3", "--lid"]
    t0 = time.perf_counter()
    run_cli([*base, "-o", str(tmp_path / "local.jsonl")])
    local = (tmp_path / "local.jsonl").read_bytes()
    part = tmp_path / "ray.jsonl"
    part.write_bytes(local[: local.index(b"\n") + 30])  # row 1 and a torn row 2
    t1 = time.perf_counter()
    result = run_cli(
        [*base, "-o", str(part), "--engine", "ray", "--num-replicas", "2", "--ray-batch-size", "2", "--resume"]
    )
    t2 = time.perf_counter()
    print(f"\nlocal engine {t1 - t0:.1f} s, ray engine (2 replicas, Ray already up) {t2 - t1:.1f} s")
    assert "resuming: 1 of 13 rows" in result.output
    assert part.read_bytes() == local
    rows = [json.loads(line) for line in local.decode("utf-8").splitlines()]
    assert len(rows) == 13
    assert [r["error"] is not None for r in rows] == [i in (2, 4, 9) for i in range(13)]
    assert any("duplicate id" in w for w in rows[7]["warnings"])
    assert any(k.startswith("lid_layer_") for k in rows[0]["sentences"][0]["features"])


def test_missing_ray_says_how_to_install(tiny_dir, input_file, tmp_path, monkeypatch):
    from syncheck.runners.ray_runner import RayNotInstalledError, import_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setitem(sys.modules, "ray.data", None)
    with pytest.raises(RayNotInstalledError, match=r"pip install 'syncheck\[ray\]'"):
        import_ray()
    result = CliRunner().invoke(main, ["score", str(input_file), "--model", str(tiny_dir), "--engine", "ray",
                                       "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code != 0 and "pip install 'syncheck[ray]'" in result.output


def test_the_old_engines_path_gives_the_runners_themselves_with_a_deprecation_warning():
    code = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from syncheck.engines import ENGINES
    from syncheck.engines.ray_engine import score_ray
    import syncheck.engines.local as local
import syncheck.runners.local
import syncheck.runners.ray_runner
assert ENGINES == ("local", "ray") and local is syncheck.runners.local
assert score_ray is syncheck.runners.ray_runner.score_ray
assert [str(w.message) for w in caught if w.category is DeprecationWarning and "syncheck.runners" in str(w.message)]
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
