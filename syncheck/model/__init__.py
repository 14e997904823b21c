"""The model stage: loading a model and running it over a prompt.

:mod:`~syncheck.model.models` loads a model by alias, hub id, path or GGUF file; :mod:`~syncheck.model.prompts`
builds the with-context and the without-context prompt in one place; :mod:`~syncheck.model.passes` runs the two
teacher-forced forwards of offline scoring and reduces them to per-token statistics;
:mod:`~syncheck.model.attention` records lookback ratios; :mod:`~syncheck.model.kv` cuts, selects and pads KV
caches for the live engine; :mod:`~syncheck.model.forward_cache` hands a cache to a forward across transformers'
rename of ``past_key_values``; :mod:`~syncheck.model.fingerprint` names a model's weights;
:mod:`~syncheck.model.llm_judge` is the LLM-judge alignment backend. Importing this package imports none of
them (nor torch).
"""
