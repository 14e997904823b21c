"""The accelerator group (``pytest -m cuda``): the parity tests, the pool, FOD and the server, re-run on a GPU.

Every test here is a test of another module, imported, so its body is written once: pytest collects an imported
test function in this module and gives it this module's fixtures. ``tiny_lm`` below overrides the CPU model of
``conftest.py`` with the same tiny random Llama placed on :data:`DEVICE`, and the fixtures the imported tests need
(``tiny_scorer``, ``monitor``, ``lookback_scorer``, ``server``) are imported with them, so they are rebuilt on it.

What runs on the device:

- live = offline: the monitor's features equal offline scoring of the same tokens (``test_monitor``, the lookback
  and probe signals in ``test_new_signals``);
- lookback = eager attention, batched = one by one, left-padded beams = one row (``test_new_signals``,
  ``test_scoring_tiny``, ``test_live``);
- pooled = solo: the decode pool's streams equal each stream run alone (``test_pool``);
- the without-context pass on a worker thread = between decode steps, and hooks that ignore the worker's forward
  (``test_background_kl``);
- FOD forced to backtrack, and CAD against transformers' classifier-free guidance (below and ``test_baselines``);
- ``syncheck serve --device``: a streamed completion with scored sentences, FOD, and eight concurrent streams that
  equal their sequential results (``test_serve``).

The group is skipped, with its reason, where the device is missing: CI has no GPU. ``SYNCHECK_TEST_DEVICE`` picks
the device (default ``cuda``; ``cuda:1``, or ``cpu`` to check the group's own plumbing on a machine without one).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

DEVICE = os.environ.get("SYNCHECK_TEST_DEVICE", "cuda")


def _available(device: str) -> bool:
    kind = torch.device(device).type
    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "mps":
        return torch.backends.mps.is_available()
    return kind == "cpu"


pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not _available(DEVICE), reason=f"no {DEVICE} device here (set SYNCHECK_TEST_DEVICE to pick one)"
    ),
]

# The imported fixtures and tests below resolve ``tiny_lm`` and ``server`` to this module's versions.
from conftest import Server, make_model  # noqa: E402
from test_background_kl import (  # noqa: E402,F401
    scorer,
    slow_worker,
    test_background_flush_gives_the_synchronous_features_only_later,
    test_captured_hidden_states_ignore_another_threads_forward,
)
from test_baselines import test_cad_equals_transformers_classifier_free_guidance  # noqa: E402,F401
from test_live import (  # noqa: E402,F401
    test_merged_left_padded_beams_decode_like_separate_beams,
    test_select_then_continue_equals_straight_decoding,
    test_stopped_rows_keep_their_tokens_while_others_continue,
)
from test_monitor import (  # noqa: E402,F401
    test_greedy_monitor_picks_the_same_tokens_as_model_generate,
    test_live_features_equal_offline_features_for_the_same_tokens,
    tiny_scorer,
)
from test_new_signals import (  # noqa: E402,F401
    lookback_scorer,
    test_batched_padded_lookback_equals_one_by_one,
    test_live_equals_offline_for_the_new_signals,
    test_lookback_of_left_padded_beams_equals_one_row_decoding,
)
from test_pool import monitor, test_pooled_runs_joining_and_leaving_equal_each_run_alone  # noqa: E402,F401
from test_scoring_tiny import (  # noqa: E402,F401
    test_batched_scoring_equals_one_by_one,
    test_hidden_state_hook_equals_output_hidden_states,
    test_padded_batch_forward_equals_unpadded_forward,
)

try:  # the server's tests need its optional extras
    from test_serve import (  # noqa: F401
        test_eight_concurrent_streams_each_equal_their_sequential_result,
        test_fod_streams_only_accepted_sentences,
        test_models_health_and_a_streamed_completion_with_scored_sentence_events,
    )
except pytest.skip.Exception:
    pass


@pytest.fixture(scope="module")
def tiny_lm(tiny_tokenizer):
    """conftest's tiny random Llama, on :data:`DEVICE`."""
    from syncheck.model.models import load_model

    return load_model(make_model(len(tiny_tokenizer)), tiny_tokenizer, device=DEVICE, name="tiny-llama")


@pytest.fixture(scope="module")
def server(serve_dir, tmp_path_factory):
    """``syncheck serve`` on :data:`DEVICE` (the server's tests above run against it)."""
    srv = Server(str(serve_dir), "tiny", tmp_path_factory.mktemp("serve-cache"), "--max-concurrent", "4",
                 "--device", DEVICE)
    yield srv
    srv.stop()


def test_the_group_runs_on_the_device(tiny_lm, tiny_scorer):  # noqa: F811 (the imported fixture)
    assert tiny_lm.device.type == torch.device(DEVICE).type
    assert tiny_scorer.lm is tiny_lm  # the imported fixtures were rebuilt on this module's model


def test_fod_forced_to_backtrack_runs_on_the_device_and_its_sentences_score_as_offline(tiny_lm):
    from test_monitor import assert_same_features

    from fod.generator import FODGenerator
    from syncheck.scorer import Scorer

    scorer = Scorer(tiny_lm, lid=None)  # noqa: F811 (not the imported fixture)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fod = FODGenerator(scorer, checker=None, max_sentence_tokens=12)
    context = ["The Eiffel Tower was completed in 1889 for the World's Fair.", "It is 330 metres tall."]
    out = fod.generate(question="How tall?", context=context, num_samples=3, max_sentences=2, tau1=1.0,
                       decoding={"max_new_tokens": 24, "do_sample": True, "top_p": 0.95, "seed": 0})
    assert out.trace["backtrack"] is not None  # tau1 = 1.0: the first scored sentence is backtracked
    if out.sentences:
        offline = scorer.score(context=context, response=out.text, question="How tall?")
        assert [s.text for s in offline.sentences] == [s.text for s in out.sentences]
        assert_same_features(offline.sentences, out.sentences, tol=1e-3)
