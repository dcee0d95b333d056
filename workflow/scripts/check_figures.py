"""results/check_figures.md: this run's figures/ tables and verdicts against the committed ones."""
from gna.io import write_text
from gna.jobs.script_job import job
from gna.report import tolerance

with job(snakemake) as log:
    p = snakemake.params
    committed = tolerance.committed_files(p.folder, p.reference)
    run = tolerance.folder_files(p.folder)
    differences = tolerance.compare(run, committed)
    text = tolerance.report(differences, len(committed), p.reference, tolerance.provenance(run, committed))
    log.info("\n%s", text)
    if differences:
        raise SystemExit(f"{len(differences)} differences from the committed {p.folder}/ beyond tolerance "
                         f"(all in {snakemake.log[0]}); first: {differences[0]}")
    write_text(text, snakemake.output[0])
