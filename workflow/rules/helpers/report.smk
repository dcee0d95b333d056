# Helpers of the rules in workflow/rules/report.smk. The Snakefile reads workflow/rules/helpers/*.smk
# after common.smk and before the rule files (Snakemake's linter keeps functions out of a rule file).
# The findings' n per role.
def findings_task_sizes(tasks, kv_prompts):
    """Each role's questions in a study whose tasks are local files (imported when the rule runs)."""
    from gna.report.findings.sampled import task_sizes

    return task_sizes(tasks, kv_prompts)


def findings_local_sizes(study):
    """Each role's questions in a study whose tasks are local samples (the real preset's): its knowledge
    suite and retrieval tasks are not of the MMLU sample's size."""
    from gna.plan.jobs import local_task_docs
    from gna.report.findings.sampled import local_sizes

    return local_sizes(study["tasks"], local_task_docs(study))
