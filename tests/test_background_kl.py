"""The without-context pass beside decoding (syncheck.live.background): same sentences and features as the
synchronous flush, only emitted later; hooks of the decoding thread never see the worker's forward."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

import syncheck.live.background
from syncheck.decoding import Decoding
from syncheck.lid_reference import LIDReference
from syncheck.live.monitor import Monitor
from syncheck.model.passes import capture_hidden, response_ids_and_offsets
from syncheck.scorer import Scorer

CONTEXT = ["The Eiffel Tower was completed in 1889.", "It is 330 m tall."]
RESPONSE = ("It was completed in 1889. Dr. Smith moved to the U.S. Dept. of Energy. Café owners sell crêpes [1]. "
            "Prices rose 3.5%")


@pytest.fixture(scope="module")
def scorer(tiny_lm):
    rng = np.random.default_rng(0)
    ref = LIDReference(
        "t", {2: rng.normal(size=(40, 32)).astype("float32"), 4: rng.normal(size=(40, 32)).astype("float32")}, k=10
    )
    return Scorer(tiny_lm, lid=ref)


@pytest.fixture
def slow_worker(monkeypatch):
    """Each background forward takes 30 ms longer, so several decode steps pass while it runs."""
    run = syncheck.live.background.run_flush

    def slow(*args):
        time.sleep(0.03)
        return run(*args)

    monkeypatch.setattr(syncheck.live.background, "run_flush", slow)


def _steps(monitor, **kw):
    steps = list(monitor.steps(question="When?", context=CONTEXT, **kw))
    return steps, steps[-1].result


def assert_same_generation(a, b, tol=1e-5):
    assert a.text == b.text and a.token_ids == b.token_ids and a.stop_reason == b.stop_reason
    assert [(s.text, s.start, s.end) for s in a.sentences] == [(s.text, s.start, s.end) for s in b.sentences]
    for x, y in zip(a.sentences, b.sentences):
        assert x.features.keys() == y.features.keys()
        for k in x.features:
            assert abs(x.features[k] - y.features[k]) <= tol * max(1.0, abs(x.features[k])), k
        assert x.score == pytest.approx(y.score, abs=tol)
    assert a.response_score == pytest.approx(b.response_score, abs=tol)


def test_background_flush_gives_the_synchronous_features_only_later(scorer, slow_worker):
    ids, _ = response_ids_and_offsets(scorer.lm.tokenizer, RESPONSE)
    sync_steps, sync = _steps(Monitor(scorer, background_kl=False), forced_ids=ids)
    bg_steps, bg = _steps(Monitor(scorer, background_kl=True), forced_ids=ids)
    assert_same_generation(sync, bg)
    when = lambda steps: [i for i, s in enumerate(steps) for _ in s.events]  # noqa: E731
    assert len(when(bg_steps)) == len(when(sync_steps)) == 4
    assert when(bg_steps)[0] > when(sync_steps)[0]  # the first sentence waited for the worker
    assert [e.index for s in bg_steps for e in s.events] == [0, 1, 2, 3]
    assert "".join(s.text for s in bg_steps) == bg.text  # the text is shown as soon as ever


def test_background_flush_is_drained_before_a_stop_string_cuts_the_answer(scorer, slow_worker):
    ids, _ = response_ids_and_offsets(scorer.lm.tokenizer, RESPONSE)
    dec = Decoding(max_new_tokens=len(ids), stop=("Café",))
    _, sync = _steps(Monitor(scorer, background_kl=False), forced_ids=ids, decoding=dec)
    _, bg = _steps(Monitor(scorer, background_kl=True), forced_ids=ids, decoding=dec)
    assert sync.stop_reason == "stop" and len(sync.sentences) == 2
    assert_same_generation(sync, bg)


def test_background_flush_with_free_generation_and_sampling(scorer, slow_worker):
    dec = Decoding(max_new_tokens=40, do_sample=True, seed=3)
    _, sync = _steps(Monitor(scorer, background_kl=False), decoding=dec)
    _, bg = _steps(Monitor(scorer, background_kl=True), decoding=dec)
    assert_same_generation(sync, bg)


class ThreadNoting:
    """An alignment backend that notes which thread scored, slowly (as a model backend would)."""

    name = "thread-noting"

    def __init__(self):
        self.threads: list[str] = []

    def score(self, premises, claims, batch_size: int = 16):
        self.threads.append(threading.current_thread().name)
        time.sleep(0.02)
        return np.array([min(1.0, len(c) / 100) for c in claims])


@pytest.mark.filterwarnings("ignore:the aggregator was trained on features from a different")
def test_background_worker_scores_alignment_with_the_same_values(tiny_lm, slow_worker):
    """With a background worker the sentences' align_score is scored there, after the flush; features unchanged."""
    ids, _ = response_ids_and_offsets(tiny_lm.tokenizer, RESPONSE)
    sync_aligner, bg_aligner = ThreadNoting(), ThreadNoting()
    _, sync = _steps(Monitor(Scorer(tiny_lm, alignment=sync_aligner, align_with_question=True), background_kl=False),
                     forced_ids=ids)
    _, bg = _steps(Monitor(Scorer(tiny_lm, alignment=bg_aligner, align_with_question=True), background_kl=True),
                   forced_ids=ids)
    assert_same_generation(sync, bg)
    assert all("align_score" in s.features for s in bg.sentences)
    assert set(sync_aligner.threads) == {threading.current_thread().name}
    # every sentence finished before the end was scored on the worker; the last one, at the end, on this thread
    assert bg_aligner.threads[:-1] and all(t.startswith("syncheck-without-context") for t in bg_aligner.threads[:-1])


def test_background_is_the_default_on_cpu(scorer):
    assert Monitor(scorer).background is not None
    assert Monitor(scorer, background_kl=False).background is None


def test_captured_hidden_states_ignore_another_threads_forward(tiny_lm):
    model = tiny_lm.model
    other = torch.tensor([[5, 6, 7, 8, 9, 10, 11]], device=tiny_lm.device)
    with torch.inference_mode(), capture_hidden(model, [2]) as hidden:
        worker = threading.Thread(target=lambda: torch.inference_mode()(model)(input_ids=other))
        worker.start()
        worker.join()
        assert hidden == {}
        model(input_ids=torch.tensor([[5, 6, 7]], device=tiny_lm.device))
    assert hidden[2].shape[:2] == (1, 3)


def test_the_server_flushes_between_its_batched_steps(scorer):
    """Beside the pool's batched decode steps the worker thread measured slower (benchmarks/RESULTS.md)."""
    pytest.importorskip("pydantic")
    from syncheck.serve.generation import ChatRunner

    assert ChatRunner(scorer, decoders={}).monitor.background is None
