"""`syncheck report`: a self-contained, XSS-safe HTML page, rendered in headless Chromium."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from click.testing import CliRunner

from syncheck.cli import main
from syncheck.report import build_report, colour, read_labels, score_source

EVIL = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
CTX = ["The tower was completed in 1889.", "It is 330 metres tall.", f"Chunk with markup {EVIL}"]
SENTENCES = ["The tower was completed in 1889.", "It is 330 m tall.", f"It says {EVIL} here.", "It is painted gold."]


def make_rows(n=12, with_score=False, seed=0):
    """Scored rows + input rows: labels, subsets, Provenance fields, an error row and hostile text."""
    rng = np.random.default_rng(seed)
    scored, inputs = [], []
    for i in range(n):
        label = i % 2
        picks = [SENTENCES[(i + k) % len(SENTENCES)] for k in range(3)]
        response = "  ".join(picks)
        sents, pos = [], 0
        for text in picks:
            start = response.index(text, pos)
            pos = start + len(text)
            value = float(np.clip(rng.normal(0.7 if label else 0.4, 0.2), 0, 1))
            sent = {"text": text, "start": start, "end": pos,
                    "features": {"min_prob": 0.01, "mean_prob": 0.5, "mean_contrastive_kl": 1.2, "align_score": value}}
            if with_score:
                sent["score"] = value
            sents.append(sent)
        row = {"id": f"q{i}", "sentences": sents, "warnings": [], "error": None, "label": label,
               "subset": "qa" if i % 3 else "dialogue"}
        if i == 1:
            row["id"] = f"q1{EVIL}"
            row["warnings"] = [f"a warning with {EVIL}"]
            row.update(
                sources=[{"index": 0, "weight": 0.2, "support": 0.3}, {"index": 1, "weight": 0.8, "support": 0.9}],
                best_source=1,
                factuality=0.77,
            )
        if i == 2:
            row.update(sentences=[], error=f"empty response {EVIL}")
            response = ""
        scored.append(row)
        inputs.append({"id": row["id"], "context": CTX, "question": f"Q {EVIL}?", "response": response})
    return scored, inputs


def n_sentences(rows, limit=None):
    return sum(len(r["sentences"]) for r in rows[:limit])


class _Counter(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sent = self.scripts = self.imgs = self.best = 0

    def handle_starttag(self, tag, attrs):
        cls = (dict(attrs).get("class") or "").split()
        self.sent += tag == "span" and "sent" in cls
        self.best += tag == "div" and "best" in cls
        self.scripts += tag == "script"
        self.imgs += tag == "img"


def count(html):
    c = _Counter()
    c.feed(html)
    return c


def test_report_escapes_all_text_and_loads_nothing_external():
    scored, inputs = make_rows()
    for r in scored:
        r.pop("label")
    html = build_report(scored, inputs)
    c = count(html)
    assert c.scripts == 1 and c.imgs == 0  # our own script only; no labels, so no plot
    assert "&lt;script&gt;window.__pwned" in html and "window.__pwned = 1</script>" not in html
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "the page must not load anything from the network"
    assert c.sent == n_sentences(scored)


def test_labels_add_roc_and_calibration_per_subset():
    scored, inputs = make_rows(n=30)
    html = build_report(scored, inputs)
    assert html.count('src="data:image/png;base64,') == 1
    for subset in ("all", "qa", "dialogue"):
        assert f"<td>{subset}</td>" in html
    assert "response length" in html and "word overlap" in html and "95%" in html


def test_labels_file_overrides_row_labels(tmp_path):
    scored, inputs = make_rows(n=10)
    for r in scored:
        r.pop("label"), r.pop("subset")
    path = tmp_path / "labels.csv"
    path.write_text(
        "id,label,subset\n" + "".join(f"{r['id']},{i % 2},set{i % 2}\n" for i, r in enumerate(scored)), encoding="utf-8"
    )
    labels = read_labels(path)
    assert labels["q0"] == (0, "set0")
    html = build_report(scored, inputs, labels)
    assert "label: 1 faithful · set1" in html
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "q0", "label": "maybe"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="must be 1 .faithful. or 0"):
        read_labels(bad)


def test_colour_source_and_fallbacks():
    with_score, _ = make_rows(with_score=True)
    plain, _ = make_rows()
    assert score_source(with_score) == "score" and score_source(plain) == "align_score"
    bare = [{"id": 1, "sentences": [{"text": "a", "start": 0, "end": 1, "features": {"mean_prob": 0.3}}]}]
    assert score_source(bare) == "mean_prob"
    assert "Colour: <code>align_score</code>" in build_report(plain) and "a fallback" in build_report(plain)
    assert "Colour: <code>score</code>" in build_report(with_score)
    assert colour(0.0) != colour(1.0) and colour(None) == "#e5e7eb"


def test_context_best_source_errors_and_warnings_are_visible():
    scored, inputs = make_rows()
    html = build_report(scored, inputs)
    c = count(html)
    assert c.best == 1 and "best-supporting source" in html and "support 0.9" in html
    assert "Error:</b> empty response &lt;script&gt;" in html
    assert "a warning with &lt;script&gt;" in html
    assert "factuality: 0.77" in html
    assert "It is 330 metres tall." in html  # context from the input file
    no_input = build_report([dict(r, context=CTX) for r in scored])  # context from a `context` field
    assert "It is 330 metres tall." in no_input


def test_input_that_does_not_match_is_refused():
    scored, inputs = make_rows()
    with pytest.raises(ValueError, match="row 1: scored id"):
        build_report(scored, [dict(i, id="other") for i in inputs])
    with pytest.raises(ValueError, match="has 11 rows"):
        build_report(scored, inputs[:-1])


def test_report_command(tmp_path):
    scored, inputs = make_rows(n=8)
    sp, ip, out = tmp_path / "scored.jsonl", tmp_path / "in.jsonl", tmp_path / "r.html"
    sp.write_text("".join(json.dumps(r) + "\n" for r in scored), encoding="utf-8")
    ip.write_text("".join(json.dumps(r) + "\n" for r in inputs), encoding="utf-8")
    result = CliRunner().invoke(main, ["report", str(sp), "--input", str(ip), "-o", str(out), "--max-rows", "5"])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert count(html).sent == n_sentences(scored, 5) and "showing the first 5" in html


def _chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it with apt-get (Debian package `chromium`)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return exe


def _run_chromium(exe, profile, *args):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-quic", f"--user-data-dir={profile}",
             "--hide-scrollbars", "--window-size=1200,1600"]
    return subprocess.run([exe, *flags, *args], capture_output=True, timeout=120, check=True)


def test_report_renders_in_headless_chromium(tmp_path):
    from PIL import Image

    exe = _chromium()
    scored, inputs = make_rows(n=20)
    page = tmp_path / "report.html"
    page.write_text(build_report(scored, inputs), encoding="utf-8")
    (tmp_path / "profile").mkdir()
    shot = tmp_path / "shot.png"
    _run_chromium(exe, tmp_path / "profile", f"--screenshot={shot}", page.as_uri())
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert pixels.shape[0] >= 1000 and pixels.var() > 200, "the screenshot is blank"
    dom = _run_chromium(exe, tmp_path / "profile", "--dump-dom", page.as_uri()).stdout.decode("utf-8")
    c = count(dom)
    assert c.sent == n_sentences(scored)
    assert c.imgs == 1  # the plots; the hostile <img> stayed text
    assert "__pwned" in dom and "window.__pwned = 1</script>" not in dom


def test_png_bytes_are_valid():
    """The embedded plot is a decodable PNG."""
    import base64

    from PIL import Image

    scored, inputs = make_rows(n=20)
    html = build_report(scored, inputs)
    data = re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1)
    img = Image.open(io.BytesIO(base64.b64decode(data)))
    assert img.format == "PNG" and img.size[0] > 500


def test_a_sentence_final_score_is_shown_beside_its_live_score():
    from syncheck.report import build_row

    row = {"id": 1, "sentences": [{"text": "It is tall.", "start": 0, "end": 11, "score": 0.4, "final_score": 0.8,
                                   "features": {"mean_prob": 0.5}}]}
    view = build_row(0, row, {}, "score", None)
    sentence = next(sv for _, sv in view.segments if sv is not None)
    assert sentence.features[:2] == [("score", "0.4"), ("final score", "0.8")] and sentence.value == 0.4
