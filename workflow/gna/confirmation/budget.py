"""What a confirmation's caps could cost at most, stated and checked before the screen has run (the
pick, after it, spends at most its budget; this bounds what the config allows it to ask).

The bound counts each picked condition at full depth (the pick knows the depths only from the screen)
and at every cap: Fig. 2's three depths from one forward; Fig. 3 the minimal model and ``fig3_layers``
removals; Table 1 the minimal model and four keepings; Fig. 4 the full and ablated model at both ends'
pair counts; top-k k = 0 and the ranked removal on retrieval and knowledge, each random draw on
retrieval only.
"""
from __future__ import annotations

from ..errors import ConfigError

# the six knowledge tasks' chance (lm-eval's choices: ARC, OpenBookQA, HellaSwag 4; PIQA, WinoGrande 2)
KNOWLEDGE_CHANCE = {"arc_easy": 0.25, "arc_challenge": 0.25, "piqa": 0.5, "winogrande": 0.5, "openbookqa": 0.25,
                    "hellaswag": 0.25}


def worst_case(conf: dict, model: str, n_layers: int, claims: list[str], kv_ends: tuple, n_draws: int) -> float:
    """The CPU core-hours ``model``'s confirmation could take at most under ``conf``'s caps and rates."""
    caps, r = conf["caps"], conf["seconds_per_item"][model]
    both = caps["mmlu"] * r["mmlu"] + caps["knowledge"] * r["knowledge"]
    retrieval = caps["retrieval"] * r["retrieval"]
    seconds = {"fig2": caps["mmlu"] * r["mmlu"],
               "fig3": (1 + conf["fig3_layers"]) * both,
               "table1": 5 * both,
               "fig4": 2 * caps["kv"] * r["kv"] * sum(kv_ends) if kv_ends else 0.0,
               "topk": 2 * (retrieval + caps["knowledge"] * r["knowledge"]) + n_draws * retrieval}
    return sum(seconds[c] for c in claims) / 3600


def check_budget(conf: dict, worst: dict[str, float]) -> None:
    """Refuse caps that could cost more than the confirmation's budget, in one line naming the keys."""
    total, budget = sum(worst.values()), conf["budget"]["cpu_core_hours"]
    if total > budget:
        raise ConfigError(f"config error: experiments.confirmation.caps could cost {total:,.1f} CPU core-hours "
                          f"({', '.join(f'{m} {h:,.1f}' for m, h in worst.items())}), over its "
                          f"budget.cpu_core_hours = {budget:g}: lower the caps or raise the budget")


def plan_lines(conf: dict, worst: dict[str, float]) -> list[str]:
    """The plan's section on the confirmation: what its caps could cost at most per model, against its budget."""
    caps = ", ".join(f"{role} {n}" for role, n in conf["caps"].items())
    return ["", "## Confirmation (behind its pick)", "",
            f"The jobs after the pick (gna.confirmation) exist once the screen has run; at most, every picked "
            f"condition at full depth and at its cap ({caps} items a condition): "
            + ", ".join(f"{m} {h:,.1f}" for m, h in worst.items())
            + f" CPU core-hours, **{sum(worst.values()):,.1f}** of its own budget of "
            f"{conf['budget']['cpu_core_hours']:g} (`experiments.confirmation.budget.cpu_core_hours`, beyond the "
            f"screen's); the pick spends at most that budget, in the paper's order."]
