# The resource plan, before launch (not part of `all`): `snakemake plan` writes, for every job of
# the study's DAG, its estimated peak GPU memory, host memory and GPU hours (gna.plan), the
# per-rule summary and total GPU-hours, and whether profiles/slurm grants each job what it needs.
#   snakemake plan --configfile workflow/configs/paper.yaml --cores 1


rule plan:
    output:
        md="results/plan/plan.md",
        csv="results/plan/plan.csv",
    params:
        snakefile=workflow.main_snakefile,
        profile=os.path.join(workflow.basedir, "profiles/slurm"),
    log:
        "logs/plan.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../scripts/plan.py"
