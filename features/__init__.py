"""Pure feature calculators for SynCheck.

Nothing in this package loads a model or touches the file system: every
function maps arrays (per-token statistics, hidden states, texts) to numbers.
Each calculator documents its input shapes and its *sign convention*: whether
a higher value means the sentence is more faithful to the context (``+``) or
less (``-``).  The names of sentence features follow Table 4 of the SynCheck
paper (Wu et al., 2024).
"""

from features.stats import TokenStats, SENTENCE_FEATURE_SIGNS
from features.sentence_features import sentence_features, sentence_vectors

__all__ = ["TokenStats", "SENTENCE_FEATURE_SIGNS", "sentence_features", "sentence_vectors"]
