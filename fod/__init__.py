"""fod: faithfulness-oriented decoding (SynCheck paper, Algorithm 1) over the syncheck monitor.

The generator lands with the live monitor; this package holds its CLI entry point.
"""

__version__ = "0.1.0"
