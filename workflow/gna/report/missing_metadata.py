"""``snakemake --report`` before a run (results/ empty, figures/ as committed) warned once per
output without a run's records: ~160 identical "Missing metadata" lines. One is enough."""
from __future__ import annotations

import logging

PREFIX = "Missing metadata for file "


class OneMissingMetadataWarning(logging.Filter):
    """Lets the first "Missing metadata" warning through, reworded to say what it means, and
    drops the rest (other records pass unchanged)."""

    def __init__(self):
        super().__init__()
        self.seen = 0

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(PREFIX):
            return True
        self.seen += 1
        if self.seen > 1:
            return False
        first = message[len(PREFIX):].split(". ")[0]
        record.msg, record.args = (f"No run records for {first} and the other outputs the workflow has not made "
                                   "here: the report leaves them out (run the workflow first to include them). "
                                   "Further such warnings are not shown."), ()
        return True


def quiet_missing_metadata(logger_name: str = "snakemake.logging") -> OneMissingMetadataWarning:
    """Install the filter on Snakemake's logger (once; returns it)."""
    logger = logging.getLogger(logger_name)
    for f in logger.filters:
        if isinstance(f, OneMissingMetadataWarning):
            return f
    f = OneMissingMetadataWarning()
    logger.addFilter(f)
    return f
