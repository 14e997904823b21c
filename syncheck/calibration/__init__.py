"""The calibration stage: from labelled records to an aggregator registered for one model.

:mod:`~syncheck.calibration.labels` reads labelled records (RAGTruth spans or syncheck labels; the one label rule),
:mod:`~syncheck.fitting` gives seeded grouped out-of-fold scores, :mod:`~syncheck.calibration.training`
is the one training path (the sentence aggregator, FOD's thresholds, the final model, the response verdict),
:mod:`~syncheck.calibration.calibrate` fits them for a model and :mod:`~syncheck.calibration.registry` keeps
the registry of calibrations by model fingerprint. Importing this package imports none of them.
"""
