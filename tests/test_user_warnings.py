"""Warnings name the user's line, whatever depth of syncheck's own calls they are raised at."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

from syncheck.aggregators import resolve
from syncheck.user_warnings import user_stacklevel, warn_user


def test_a_warning_raised_under_several_syncheck_frames_names_the_calling_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolve._warn_once("a-model-no-one-warned-about", "portable", "calibrate one")  # warn_user under _warn_once
        agg = SimpleNamespace(meta={"scorer": {"alignment": "lexical", "model": "m"}})
        resolve._warn_on_config_drift(agg, {"alignment": "verifier", "model": "m"})
    assert [w.filename for w in caught] == [__file__, __file__]
    assert "alignment 'lexical' (now 'verifier')" in str(caught[1].message)


def test_the_level_counts_the_frames_of_the_caller_only_when_it_is_not_syncheck():
    def direct():
        return user_stacklevel()

    assert direct() == 2  # this test's frame is the caller's caller: not syncheck's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_user("from here")
    assert caught[0].filename == __file__ and caught[0].category is UserWarning
