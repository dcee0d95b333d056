"""Retrieval-aware hybrid distillation (Bick et al. 2026, arXiv 2602.11374), and what else is built on
its students: the layer swap (Fig. 7). One package, in two parts:

- :mod:`.study` (torch-free): the study's students by name, each stage's data and token budget, the
  web tokens prepared once and read offline, the ranks a stage runs on. The Snakefile and the plan
  import it when Snakemake parses the workflow.
- torch: the students (:mod:`.student`), the MOHAWK-style stages (:mod:`.distillation`, their losses
  :mod:`.stage_losses` and settings :mod:`.stage_settings`), their ranks and precision
  (:mod:`.distributed`, :mod:`.sharding`, :mod:`.precision`), one stage as a job
  (:mod:`.stage_job`, started in the job's process or on its ranks by :mod:`.stage_launch`) and the
  swap (:mod:`.swap`).

The student's architecture and adapter are models like any other: :mod:`gna.models.hybrid_student`
and :mod:`gna.models.adapters.hybrid_student`. This file imports nothing: importing :mod:`.study`
runs it first, and must not pay torch's import (import from the modules: ``from
gna.hybrid.student import build_student``, ``from gna.hybrid.distillation import distill``).
May import: ``errors``, ``io``, ``models``, ``interventions``, ``patterns``, ``micro`` and
``probes.scoring`` (the distillation data, inside functions), ``plan.jobs`` (the sharding the plan
chose for a stage, inside a function).
"""
