"""One-off studies: each measured something once, and a dated note of ``benchmarks/notes/`` holds its reading.

They run as ``python -m benchmarks.studies.NAME``; no shipped default rests on one of them alone."""
