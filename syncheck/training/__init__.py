"""Training syncheck's own models, the verifier, the span reader and the probe, and the synthetic data they learn from.

The commands are ``syncheck verifier train`` (``--probe MODEL`` for a probe), ``syncheck verifier reader`` and
``syncheck verifier average``. The models they write are read at scoring time by :mod:`features.alignment.verifier`,
:mod:`features.alignment.span_reader` and :mod:`syncheck.model.probe_verifier`; nothing here runs when text is scored.

- the pairs: :mod:`~syncheck.training.pairs` (a verifier's training example), :mod:`~syncheck.training.sources`
  (HaluEval's training and held-out ranges, a user's labelled records and documents),
  :mod:`~syncheck.training.pair_files` (labelled pairs from files), :mod:`~syncheck.training.synthetic` (pairs
  labelled by construction) with :mod:`~syncheck.training.spans` (same-shape entity spans),
  :mod:`~syncheck.training.summary_edits` (FactCC-style summary edits) and :mod:`~syncheck.training.conflict_set`
  (knowledge-conflict QA, and from XQuAD's paragraphs in halves: :mod:`~syncheck.training.conflict_halves`),
  :mod:`~syncheck.training.writer_pairs` (answers a model wrote),
  :mod:`~syncheck.training.artefacts` (the claim-only check and rebalancing) and
  :mod:`~syncheck.training.verifier_dataset` (the recipe that puts them together);
- the verifier: :mod:`~syncheck.training.verifier_training` (transformers' ``Trainer``, the export),
  :mod:`~syncheck.training.verifier_build` (the resumable steps of ``syncheck verifier train``) and
  :mod:`~syncheck.training.verifier_averaging` (weight-space averages);
- the probe: :mod:`~syncheck.training.probe_verifier_build`; the span reader: :mod:`~syncheck.training.reader_training`.

Importing this package imports none of them.
"""
