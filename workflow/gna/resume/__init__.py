"""A long job's partial state: what a head scan or an evaluation finished, kept so that a job
stopped at any point resumes from it, with outputs byte-identical to an uninterrupted run's.

- :mod:`.store`: :class:`~.store.PartialState` (one sqlite file per job, one transaction per
  finished unit of work), :func:`~.store.resuming` (a job's state, removed when it succeeds) and
  :func:`~.store.section` (what the resumable loops ask for: ``None`` outside a resuming job).
- :mod:`.keys`: what a job's state is keyed by (its input files, settings, the library's code and
  the package versions) and where it lives (beside the job's first output, never inside one).

May import: ``errors``; nothing that computes (the scan and the evaluation import this).
"""
