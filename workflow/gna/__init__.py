"""Gather-and-Aggregate reproduction library.

Everything the Snakemake rules call lives here; the rules and scripts stay thin. One folder per
responsibility:

- ``config``: a study's config, read and checked at parse time
- ``jobs``: a Snakemake job's life (job context, batched conditions, devices)
- ``resume``: a long job's partial state, so a stopped scan or evaluation resumes
- ``models``: loading, one adapter per architecture, the models the library implements
- ``external``: what a study takes from outside, pinned by version and sha256, and its fetch
- ``probes``: the KV probe and how a model is scored on it
- ``interventions``: head ablation, layer swaps, masked mixing (never edit weights)
- ``scan``: the head scan (exact ablation, attribution estimate, their rankings)
- ``patterns``: token-mixing matrices, Gather/Aggregate roles, G&A masks
- ``evaluation``: the lm-eval bridge
- ``experiments``: one module per experiment's computation
- ``questions``: the open questions the paper leaves
- ``hybrid``: retrieval-aware hybrid distillation
- ``micro``: the micro study's world, tasks and models
- ``plan``: the resource plan of a study
- ``report``: tables, figures and findings

beside ``errors`` (what a user can act on), ``io`` (atomic outputs) and ``cli`` (the ``gna``
command).
"""

__version__ = "0.1.0"
