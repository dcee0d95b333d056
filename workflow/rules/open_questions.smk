# The questions the paper leaves open, answered (gna.report.findings.open_questions;
# docs/open-questions.md), each from the tables its experiment wrote: head_pairs.smk,
# probe_formats.smk, ranking_seeds.smk, ga_paths.smk and mohawk_export.smk hold their rules.


# An experiment that takes its heads from the ranking across formats or over seeds needs that experiment's settings.
for _exp in EXPERIMENTS:
    _choice = experiment_config(_exp).get("ranking", "single")
    _needs = {"across_formats": "probe_formats", "over_seeds": "ranking_seeds"}.get(_choice)
    if _needs and not experiment_config(_needs):
        raise ValueError(f"experiments.{_exp}.ranking = {_choice} needs experiments.{_needs} (its settings)")


# The open questions' answers, each from the tables its experiment wrote (n/a where it did not run).
EXPERIMENT_REGISTRY.declare("open_questions", always=True,
                            findings=[Section(70, "gna.report.findings.open_questions:open_questions")])
