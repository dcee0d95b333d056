"""Train one micro model from scratch (gna.micro.train) into the rule's output directory."""
from gna.micro.train import train
from gna.pipeline import job

with job(snakemake) as log:
    spec = snakemake.params.spec
    summary = train(spec["family"], spec["model"], spec["train"], snakemake.output[0], seed=spec["seed"])
    log.info("trained %s: %d steps (%s) in %.0f s; metrics %s", snakemake.wildcards.model, summary["steps"],
             summary["stopped"], summary["seconds"], summary["metrics"])
