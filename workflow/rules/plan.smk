# The resource plan, before launch (not part of `all`): `snakemake plan` writes, for every job of
# the study's DAG (and of the targets its experiments build on demand, as baseline_table), its estimated peak GPU memory, host memory and GPU hours (gna.plan), the
# per-rule summary and total GPU-hours, and whether profiles/slurm grants each job what it needs.
#   snakemake plan --configfile workflow/configs/paper.yaml --cores 1


rule plan:
    input:  # a change to the cluster profile, or (params) to the study's config, remakes the plan
        os.path.join(workflow.basedir, "profiles/slurm/config.yaml"),
        os.path.join(workflow.basedir, "profiles/slurm/gpu.yaml"),
    output:
        md="results/plan/plan.md",
        csv="results/plan/plan.csv",
    params:
        snakefile=workflow.main_snakefile,
        profile=lambda wc, input: os.path.dirname(input[0]),
        study=config,
        # the confirmation's most (its caps at full depth, behind its checkpoint), beside its own budget
        confirmation=lambda wc: confirmation_worst(),
    log:
        "logs/plan.log",
    conda:
        CPU_ENV
    script:
        "../scripts/plan.py"
