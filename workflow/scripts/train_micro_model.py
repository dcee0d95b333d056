"""Train one micro model from scratch (gna.micro.train) into the rule's output directory."""

from gna.micro.train import train
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    train_config = dict(p.train)
    train_config["world"] = {**p.world, **train_config.get("world", {})}   # micro.world, then the model's own
    summary = train(p.family, dict(p.model), train_config, snakemake.output[0], seed=p.seed)
    log.info("trained %s: %d steps (%s) in %.0f s; metrics %s", snakemake.wildcards.model, summary["steps"],
             summary["stopped"], summary["seconds"], summary["metrics"])
