"""Evaluating a model, interventions applied, with lm-eval.

- :mod:`.lm_eval_bridge`: an in-memory model through ``lm_eval.simple_evaluate`` into tidy rows.
- :mod:`.lm_eval_047`: lm-eval 0.4.7's settings and prompt formats on the installed lm-eval.

May import: ``errors``, ``interventions.vocabulary``, ``micro.lm_eval_tasks``.
"""
