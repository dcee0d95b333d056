"""The confirmation's pick for one model, from the screen's files only (gna.confirmation.pick)."""
from gna.confirmation.pick import pick
from gna.confirmation.screen import screen_of
from gna.io import write_json
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    screen = screen_of(dict(snakemake.input.items()), dict(p.items()))
    plan = pick(screen, p.rule, p.settings)
    plan["tasks"] = screen["tasks"]
    for claim, c in plan["claims"].items():
        log.info("%s: %d conditions, %.2f CPU core-hours; parts: %s", claim, len(c["conditions"]), c["cpu_core_hours"],
                 "; ".join(f"{x['name']} n {x['n']} (needs {x['n_needed']})" for x in c["parts"]))
    write_json(plan, snakemake.output[0])
