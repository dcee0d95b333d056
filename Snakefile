# Gather-and-Aggregate reproduction. `snakemake --cores all` runs the study named by config.yaml
# (the micro study, on a laptop CPU); `--configfile workflow/configs/paper.yaml` the paper's.
import glob
import os

from snakemake.utils import min_version

min_version("9.0")


# The study: config.yaml unless --configfile names a preset (a preset replaces config.yaml, not
# merges into it) or a file that extends one; `--config key=value` then changes that key of the study in use, as in any
# Snakemake workflow (Snakemake merges it into the config files). Errors in the study config end
# in one line naming the file, key or rule (gna.config.study), with no Python frames.
from gna.errors import GnaError
from gna.config.study import check_study, check_yaml_file, exit_with_config_error, study_from_files, typed_overrides

try:
    for path in workflow.config_settings.configfiles:  # presets: Snakemake has read them, without these checks
        check_yaml_file(path)
    # A file with `extends: <preset>` (docs/own-model.md): the preset with that file's models and
    # experiments in place of its own, the rest merged; `--config` on top, as Snakemake lays it.
    _extended = study_from_files(workflow.config_settings.configfiles, workflow.basedir,
                                 workflow.config_settings.config)
    if _extended is not None:
        check_study(_extended, workflow.config_settings.configfiles)
        config.clear()
        config.update(_extended)
    if not workflow.config_settings.configfiles:
        check_yaml_file(os.path.join(workflow.basedir, "config.yaml"))

        configfile: os.path.join(workflow.basedir, "config.yaml")

    typed_overrides(config, workflow.config_settings.config)
except GnaError as e:
    exit_with_config_error(e)


# The HTML report (`snakemake --report report.html`) opens on what the study is, findings first.
report: "workflow/report/workflow.rst"


# One "Missing metadata" warning, not one per output the workflow has not made here.
from gna.report.missing_metadata import quiet_missing_metadata

quiet_missing_metadata()


# The rule files: common.smk (the config, and helpers every step uses) first; then each step's rule
# file, in any order (each declares its experiments to EXPERIMENT_REGISTRY: gna.experiments.registry;
# docs/adding-an-experiment.md), so a new one is picked up where it lies; batch.smk last, as `rule all`
# comes last: it batches the rules they declare (micro scale's batch_conditions).
STEP_RULE_FILES = sorted(path for path in glob.glob(os.path.join(workflow.basedir, "workflow", "rules", "*.smk"))
                         if os.path.basename(path) not in ("common.smk", "batch.smk"))
try:
    include: "workflow/rules/common.smk"
    for _step_helpers in sorted(glob.glob(os.path.join(workflow.basedir, "workflow", "rules", "helpers", "*.smk"))):
        include: _step_helpers
    for _step_rules in STEP_RULE_FILES:
        include: _step_rules
    include: "workflow/rules/batch.smk"
except GnaError as e:  # a config value refused while the rules are read: one line
    exit_with_config_error(e)


rule all:
    input:
        all_targets(),
    default_target: True


# A dry run asked for the declarations (gna.plan.dag_jobs) gets them.
EXPERIMENT_REGISTRY.dump(EXPERIMENTS)
