"""Signal groups shared by the benchmarks' ablations (drop one group, keep one group)."""

from __future__ import annotations

from typing import Callable

#: group name -> which feature names belong to it.
SIGNAL_GROUPS: dict[str, Callable[[str], bool]] = {
    "likelihood": lambda n: n in ("min_prob", "mean_prob"),
    "entropy": lambda n: n in ("max_entropy", "mean_entropy"),
    "LID": lambda n: n.startswith("lid_layer_"),
    "KL (context influence)": lambda n: n in ("mean_contrastive_kl", "large_kl_pos"),
    "PMI (context grounding)": lambda n: n.startswith("pmi_"),
    "lookback (ratio, lens)": lambda n: n in ("lookback_ratio", "lookback_lens"),
    "unsupported specifics": lambda n: n == "unsupported_specifics",
    "novel bigrams": lambda n: n == "novel_bigram_share",
    "alignment (align_score)": lambda n: n == "align_score",
    "hidden-state probe": lambda n: n == "hidden_probe",
}
