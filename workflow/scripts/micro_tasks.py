"""Write the micro study's evaluation task files (JSONL per task + world.json)."""
from gna.micro.tasks import write_tasks
from gna.jobs.script_job import job

with job(snakemake) as log:
    paths = write_tasks(snakemake.output[0], snakemake.params.world)
    log.info("wrote %d task files into %s", len(paths), snakemake.output[0])
