# Gather-and-Aggregate reproduction. `snakemake --cores all` runs the study named by config.yaml
# (the micro study, on a laptop CPU); `--configfile workflow/configs/paper.yaml` the paper's.
import os

from snakemake.utils import min_version

min_version("9.0")


# The default study unless --configfile names another (a preset replaces it, not merges into it).
if not config:

    configfile: os.path.join(workflow.basedir, "config.yaml")



# The HTML report (`snakemake --report report.html`) opens on what the study is, findings first.
report: "workflow/report/workflow.rst"


# One "Missing metadata" warning, not one per output the workflow has not made here.
from gna.report.missing_metadata import quiet_missing_metadata

quiet_missing_metadata()


include: "workflow/rules/common.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/probes.smk"
include: "workflow/rules/scan.smk"
include: "workflow/rules/pruning.smk"
include: "workflow/rules/heads.smk"
include: "workflow/rules/memory.smk"
include: "workflow/rules/masking.smk"
include: "workflow/rules/hybrid.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/batch.smk"  # micro scale: several conditions per job (batch_conditions)
include: "workflow/rules/micro.smk"
include: "workflow/rules/validation.smk"  # `snakemake retrain_validation_models`: the fast scan's test models
include: "workflow/rules/check.smk"  # `snakemake check_figures`: against the committed figures/
include: "workflow/rules/plan.smk"  # `snakemake plan`: the resource plan, not part of all


rule all:
    input:
        all_targets(),
    default_target: True
