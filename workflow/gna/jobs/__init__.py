"""A Snakemake job's life, from the script's first line to its exit.

- :mod:`.script_job`: the job context every script opens (log file, threads, determinism, the
  device check, provenance) and how a job ends (one line for the user's error, no teardown).
- :mod:`.condition_batches`: several conditions of one rule run in one process (rule ``batch``).
- :mod:`.devices`: is the device a job asks for on this machine.

May import: ``errors``, ``io``, ``models.loading`` (a model job names its config keys), ``resume`` (a
job's partial state); nothing that computes (the scan, interventions, reports import this, not the other way round).
"""
