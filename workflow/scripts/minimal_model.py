"""Gather the gradual-pruning depths; find the minimal model (where MMLU still holds, judged on each
question's answer) and the depths around Fig. 2's fall, its candidates."""
import pandas as pd

from gna.experiments.pruning import depth_table, fall_candidates, minimal_depth
from gna.io import write_csv, write_json
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    table = pd.concat([pd.read_csv(f) for f in snakemake.input.depths], ignore_index=True)
    answers = {int(d): pd.read_csv(f, dtype={"item": str, "target": str})
               for d, f in zip(p.depths, snakemake.input.answers)}
    depth = minimal_depth(table, p.mmlu, p.tolerance, answers=answers)
    depths, fall = depth_table(table, p.mmlu, p.tolerance, answers), fall_candidates(table, p.mmlu)
    log.info("minimal depth %d (tolerance %.3f, paired intervals)\n%s\nlargest fall below depth %d (%.3f); "
             "candidates %s", depth, p.tolerance, depths.to_string(index=False), fall["fall"], fall["fall_drop"],
             fall["candidates"])
    write_csv(table, snakemake.output.table)
    write_json({"minimal_depth": depth, "tolerance": p.tolerance, "test": "paired",
                "rule": "the smallest depth from which no depth's MMLU drop from the full model is beyond the "
                        "tolerance by point estimate with its paired 95% interval wholly above zero", **fall,
                "depths": depths.to_dict(orient="records")}, snakemake.output.minimal)
