"""HaluEval (Li et al., 2023) loaders and benchmark builders. Data is read from a directory given by the caller."""
