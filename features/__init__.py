"""Feature calculators for SynCheck (pure functions), and the alignment backends.

Nothing here loads a model at import time. The feature calculators map
arrays (per-token statistics, hidden states, texts) to numbers and load no
model; the sentence splitter reads ``nupunkt``'s pre-trained English
parameters (shipped with that package) on first use. The model-based backends
of :mod:`features.alignment` (embedding, NLI, AlignScore, the cross-encoder
relevance scorer) load their model, from the hub or a local directory, when
they are built; the LLM judge is given a loaded model or a loader
(``syncheck.model.models.load_model``).

Each calculator documents its input shapes and its *sign convention*: whether
a higher value means the sentence is more faithful to the context (``+``) or
less (``-``).  The names of sentence features follow Table 4 of the SynCheck
paper (Wu et al., 2024).
"""

from features.sentence_features import sentence_features, sentence_vectors
from features.stats import SENTENCE_FEATURE_SIGNS, TokenStats

__all__ = ["TokenStats", "SENTENCE_FEATURE_SIGNS", "sentence_features", "sentence_vectors"]
