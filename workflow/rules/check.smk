# `snakemake check_figures`: after the study, its tables and verdicts against the ones committed in
# figures/ (git HEAD): numbers within the tolerances of gna.report.tolerance, verdicts exactly.
# Byte identity holds on one machine; on another, this is the check (docs/reproducibility.md).


rule check_figures:
    input:
        findings=f"{FIGURES}/findings.md",
        study=lambda wc: all_targets(),
    output:
        "results/check_figures.md",
    params:
        folder=lambda wc, input: os.path.dirname(input.findings),
        reference="HEAD",
    log:
        "logs/check_figures.log",
    conda:
        CPU_ENV
    script:
        "../scripts/check_figures.py"
