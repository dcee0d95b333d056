# Helpers of the rules in workflow/rules/hybrid.smk. The Snakefile reads workflow/rules/helpers/*.smk
# after common.smk and before the rule files (Snakemake's linter keeps functions out of a rule file).
def _distill_at(value, stage):
    """A per-stage setting: the stage's entry of a list of 3, or the value itself."""
    return value[stage - 1] if isinstance(value, list) else value


def _distill_data_at(data, stage):
    """data with its by_stage[stage - 1] overrides merged in (gna.hybrid.study.data.stage_data)."""
    if data.get("by_stage") is None:
        return data
    return {**{k: v for k, v in data.items() if k != "by_stage"}, **(data["by_stage"][stage - 1] or {})}
