"""Gather-and-Aggregate reproduction library.

Everything the Snakemake rules call lives here; the rules and scripts stay thin.
"""

__version__ = "0.1.0"
