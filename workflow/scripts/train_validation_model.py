"""Train one of the fast scan's validation models (gna.micro.validation_models) into the rule's output."""
from gna.micro.train import train
from gna.jobs.script_job import job

with job(snakemake) as log:
    spec = snakemake.params.spec
    summary = train(spec["family"], dict(spec["model"]), dict(spec["train"]), snakemake.output[0], seed=spec["seed"])
    log.info("trained %s: %d steps (%s) in %.0f s; metrics %s", snakemake.wildcards.vmodel, summary["steps"],
             summary["stopped"], summary["seconds"], summary["metrics"])
