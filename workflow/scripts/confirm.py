"""One claim's picked conditions scored on the fresh items (gna.confirmation.fresh_answers)."""
import json

from gna.confirmation.fresh_answers import score_claim
from gna.experiments.run import write_answers
from gna.jobs.script_job import job
from gna.models import load_model

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    plan = json.load(open(snakemake.input.pick))
    answers = score_claim(load_model(p.spec), p.spec, plan["claims"][w.claim], plan["tasks"], dict(p.kv_probes),
                          p.eval, p.fields, log=log.info)
    write_answers(answers, snakemake.output.answers)
