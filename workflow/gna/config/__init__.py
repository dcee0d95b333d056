"""A study's config, read and checked when Snakemake parses the workflow.

- :mod:`.study`: which file is the study and what ``--config key=value`` changes (the Snakefile).
- :mod:`.schema`: the schema's defaults, for code that builds a config by hand.
- :mod:`.checks`: what JSON Schema cannot express (models, families, shapes, layers, heads).
- :mod:`.task_names`: do the task names exist (micro tasks or the installed lm-eval's).
- :mod:`.architectures`: the paper models' shipped ``config.json`` files, read offline.
- :mod:`.options`: a setting as a command-line option of `gna scan`, as the schema states it.

Every ``snakemake`` call imports this package, so nothing here imports torch at module level.
May import: ``errors``, ``io``, ``models`` (adapters, tiny configs, and the hybrid student's
architecture, which registers its model type; torch only inside functions), ``micro.tasks``,
``external`` (the pinned artifacts a GGUF entry names), ``evaluation.local_mmlu`` and ``evaluation.local_suite`` (their task names),
``hybrid.study`` (the layer swap's and the distillation's own checks; torch-free).
"""
