"""The calibration stage: from labelled records to an aggregator registered for one model.

:mod:`~syncheck.calibration.labels` reads labelled records (RAGTruth spans or syncheck labels; the one label rule),
:mod:`~syncheck.calibration.folds` gives seeded grouped out-of-fold scores, :mod:`~syncheck.calibration.calibrate`
fits the aggregator and :mod:`~syncheck.calibration.calibrations` keeps the registry of calibrations by model
fingerprint. Importing this package imports none of them.
"""
