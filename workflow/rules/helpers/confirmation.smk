# The confirmation stage's helpers and names (its rules: workflow/rules/confirmation.smk; the Snakefile
# reads a step's helpers after common.smk and before the step rule files, as Snakemake's linter keeps a
# rule file's functions in a file of their own).
from functools import cache

from gna.confirmation.budget import check_budget, worst_case
from gna.external import archive_marker
from gna.experiments.head_selection import KEEPING_CONDITIONS

CONFIRMATION = experiment_config("confirmation")
CONFIRM_DIR = "results/confirmation"
FRESH_MMLU = f"{CONFIRM_DIR}/benchmarks/mmlu/tasks"
FRESH_SUITE = f"{CONFIRM_DIR}/benchmarks/suite/tasks"
# the local suite's tasks the study's roles read, without the suffix (the fresh suite draws them)
FRESH_KNOWLEDGE = [t[: -len(SUITE_SUFFIX)] for t in tasks_of("knowledge") if t in LOCAL_SUITE_TASKS]
FRESH_RETRIEVAL = [t[: -len(SUITE_SUFFIX)] for t in tasks_of("retrieval") if t in LOCAL_SUITE_TASKS]
FRESH_SUITE_TASKS = list(dict.fromkeys(FRESH_KNOWLEDGE + FRESH_RETRIEVAL))


def confirmation_claims(model):
    return CONFIRMATION["claims_by_model"].get(model, CONFIRMATION["claims"])


def confirmation_rule(model):
    """What the pick follows for ``model``: its claims, the caps, its budget share, the CPU rates."""
    c = CONFIRMATION
    return {"claims": confirmation_claims(model), "fig3_layers": c["fig3_layers"], "fig3_fallback": c["fig3_fallback"],
            "caps": c["caps"], "cpu_core_hours": c["budget"]["cpu_core_hours"] * budget_share(model),
            "seconds_per_item": c["seconds_per_item"][model]}


@cache
def confirmation_worst():
    """Model -> the CPU core-hours its caps could cost at most (gna.confirmation.budget.worst_case); the config
    is fixed once parsed, so computed once."""
    return {m: worst_case(CONFIRMATION, m, n_layers(m), confirmation_claims(m), KV_ENDS,
                          len(random_draws("topk_removal"))) for m in CONFIRMATION.get("models", [])}


def budget_share(model):
    """A model's share of the confirmation's budget: what its caps could cost, of every model's."""
    worst = confirmation_worst()
    return worst[model] / sum(worst.values())


# Fig. 4's ends: the fewest and the most pairs the screen ran
KV_ENDS = ((min(experiment_config("kv_pairs")["pairs"]), max(experiment_config("kv_pairs")["pairs"]))
           if experiment_config("kv_pairs") else ())


def fresh_kv_probes(model):
    """{task name: probe file} of the fresh KV prompts at Fig. 4's ends and top-k's control pairs."""
    control = [config["scan"]["n_pairs"]] if experiment_config("topk_removal").get("kv_control") else []
    pairs = sorted(set(KV_ENDS) | set(control))
    return {probe_task_name(n, s): probe_path(n, s, model=model) for n in pairs for s in CONFIRMATION["kv_probe_seeds"]}


def screen_inputs(wc):
    """The screen's files the pick reads, for the claims confirmed on the model."""
    m, claims, out = wc.model, confirmation_claims(wc.model), {}
    if {"fig2", "fig3", "table1"} & set(claims):
        out["gradual"] = expand(GRADUAL_ANSWERS, model=m, depth=range(1, n_layers(m) + 1))
        out["minimal"] = f"results/pruning/{m}.minimal.json"
    if "fig3" in claims:
        out["individual"] = expand(INDIVIDUAL_ANSWERS, model=m, layer=range(n_layers(m)))
    if "table1" in claims:
        out["keeping"] = expand(KEEPING_ANSWERS, model=m, source="scan", condition=KEEPING_CONDITIONS)
        out["keeping_tables"] = expand("results/head_keeping/{model}/scan/{condition}.csv", model=m,
                                       condition=KEEPING_CONDITIONS)
    if "fig4" in claims:
        out["kv"] = expand("results/kv_pairs/{model}/{condition}.answers.csv", model=m,
                           condition=["full", "no_aggregate"])
        out["kv_tables"] = [f"results/kv_pairs/{m}/no_aggregate.csv"]
    if "topk" in claims:
        files = topk_outputs("topk_removal")[m]
        out["topk"] = [f.replace(".csv", ".answers.csv") for f in files]
        out["topk_tables"] = files
    return out


def confirmed_answers(wc):
    """The fresh answers of every claim the picks hold (read once the picks are written)."""
    import json

    out = []
    for m in CONFIRMATION["models"]:
        plan = json.load(open(checkpoints.confirmation_pick.get(model=m).output[0]))
        out += [f"{CONFIRM_DIR}/{m}/{claim}.answers.csv" for claim, c in plan["claims"].items() if c["conditions"]]
    return out


def confirmation_settings():
    """The verdict rule's settings (the layer-pruning experiment's, the schema's defaults where the study
    has none: gna.report.findings.verdicts.with_settings) and the confirmation's own lines."""
    from gna.report.findings.verdicts import with_settings

    pruning = experiment_config("layer_pruning")
    st = with_settings({k: pruning.get(k) for k in ("tolerance", "collapse", "mmlu_chance", "knowledge_chance",
                                                    "smallest_effect")})
    # the six knowledge tasks' mean chance where the study names none (gna.confirmation.budget)
    st["knowledge_chance"] = st["knowledge_chance"] or knowledge_chance()
    return {**st, "knowledge_share": CONFIRMATION["knowledge_share"], "growth": CONFIRMATION["growth"]}


def knowledge_chance():
    """The knowledge role's chance: its tasks' chances' mean (confirmation_chances)."""
    chances, tasks = confirmation_chances(), tasks_of("knowledge")
    return sum(chances[t] for t in tasks) / max(len(tasks), 1)


def confirmation_chances():
    """Task -> chance accuracy: MMLU's letter the study's mmlu_chance, the knowledge tasks theirs, the rest 0."""
    from gna.confirmation.budget import KNOWLEDGE_CHANCE

    out = {t: confirmation_settings()["mmlu_chance"] for t in tasks_of("mmlu")}
    out.update({t: KNOWLEDGE_CHANCE.get(t[: -len(SUITE_SUFFIX)], 0.0) for t in tasks_of("knowledge")})
    return out
