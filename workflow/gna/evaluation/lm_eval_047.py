"""lm-eval 0.4.7 as the official code ran it, on the installed lm-eval (0.4.13).

The G&A code pins ``lm_eval==0.4.7``. Two kinds of difference reach our numbers:

* **Defaults** (``eval`` settings, :data:`OFFICIAL_SETTINGS`): 0.4.7's ``HFLM`` has
  ``add_bos_token=False`` (no BOS on any request; 0.4.13: ``None``, the tokenizer's default, which
  is a BOS for Llama, Llamba and Zamba2), takes ``max_length`` from the model config when none is
  given, and its ``simple_evaluate`` has ``fewshot_as_multiturn=False`` (0.4.13: ``True``).
* **Task definitions** (``eval.task_definitions``), compared over the two wheels' ``lm_eval/tasks/``
  for the paper's tasks:

  - ``swde`` version 0 -> 1: the prompt and the gold value are now ``.strip()``ped (the context and
    the target change): :func:`task_config` gives a version-0 variant under the same name.
  - ``bbh`` (``bbh_cot_fewshot``) 3.0 -> 4.0: another copy of the dataset (lukaemon/bbh ->
    SaylorTwift/bbh), the exemplars' "Let's think step by step." dropped and ``target_delimiter``
    "". At 0 shots (the official ``num_fewshot=0``) neither enters the prompt (description + question
    in both); a few-shot bbh under 0.4.7 definitions is refused (:func:`check_fewshot`).
  - ``mmlu``, ``gsm8k``, ``hellaswag``, ``piqa``, ``winogrande``, ``openbookqa``: a renamed dataset
    path of the same data; prompts and targets unchanged. ``arc_challenge_chat`` does not exist in
    0.4.7 (the paper's chat numbers come from some other chat setup: unknown).
"""
from __future__ import annotations

from functools import lru_cache

from ..errors import ConfigError

INSTALLED, LM_EVAL_047 = "installed", "lm_eval_0.4.7"
TASK_DEFINITIONS = (INSTALLED, LM_EVAL_047)
# The eval settings that reproduce lm-eval 0.4.7's defaults (the paper preset's values).
OFFICIAL_SETTINGS = {"add_bos_token": False, "fewshot_as_multiturn": False, "max_length": None,
                     "task_definitions": LM_EVAL_047}
# Tasks whose 0.4.7 exemplars we do not carry: fine at 0 shots only.
ZERO_SHOT_ONLY = ("bbh",)


@lru_cache(maxsize=None)
def swde_v0():
    """lm-eval's ``SWDE`` task as of 0.4.7 (version 0): prompt and value used as stored, unstripped."""
    from lm_eval.tasks.swde.task import SWDE

    class SWDEv0(SWDE):
        VERSION = 0

        def doc_to_text(self, doc):
            return doc["text"]

        def doc_to_target(self, doc):   # 0.4.13's process_results scores against this: doc["value"]
            return doc["value"]

    return SWDEv0


VARIANTS = {"swde": swde_v0}


def task_config(name: str, definitions: str):
    """What lm-eval is given for task ``name`` under ``definitions``: the name itself, or a task
    dict of the 0.4.7 variant (same task name, so rows and tables key it as before)."""
    if definitions not in TASK_DEFINITIONS:
        raise ConfigError(f"eval.task_definitions = {definitions!r} is not one of {list(TASK_DEFINITIONS)}")
    if definitions == LM_EVAL_047 and name in VARIANTS:
        return {"task": name, "class": VARIANTS[name]()}
    return name


def check_fewshot(tasks, definitions: str, shots_of) -> None:
    """Refuse a few-shot run of a task whose 0.4.7 exemplars we do not carry (``shots_of(task)``)."""
    if definitions != LM_EVAL_047:
        return
    for t in tasks:
        if t in ZERO_SHOT_ONLY and shots_of(t):
            raise ConfigError(f"eval.num_fewshot gives {t!r} {shots_of(t)} shots under eval.task_definitions = "
                              f"{LM_EVAL_047!r}: its 0.4.7 exemplars differ from the installed lm-eval's and "
                              "are not carried here (0 shots, the official setting, is the same prompt)")
