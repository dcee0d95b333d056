"""Fig. 2: one model truncated to a depth (its first n layers), evaluated on MMLU and knowledge.
In a batch, a model's depths are evaluated together: one forward of the model per request batch,
each depth read off it (gna.experiments.shared_conditions)."""

from gna.experiments.run import write_answers
from gna.experiments.shared_conditions import Evaluation, run_one
from gna.io import write_csv


def plan(snakemake, log):
    p = snakemake.params
    return Evaluation(p.spec, p.tasks, p.interventions, p.eval, p.micro_data, p.fields,
                      finish=lambda rows, answers: (write_csv(rows, snakemake.output[0]),
                                                    write_answers(answers, snakemake.output.answers)))


if __name__ == "__main__":
    run_one(snakemake, plan)
