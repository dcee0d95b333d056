"""Fig. 7: the aligned SSM with the teacher's whole decoder layer i swapped in (or none); evaluate."""

from contextlib import nullcontext

from gna.experiments.run import evaluation_rows, write_answers
from gna.hybrid.swap import swap_teacher_layer
from gna.io import write_csv
from gna.models import load_model
from gna.jobs.script_job import job

with job(snakemake) as log:
    p, cond = snakemake.params, snakemake.wildcards.condition
    teacher, _ = load_model(p.teacher, with_tokenizer=False)
    student, tok = load_model(p.student)
    layer = None if cond == "none" else int(cond.removeprefix("layer"))
    log.info("student %s, teacher layer swapped in: %s", p.student["path"], layer)
    with swap_teacher_layer(student, teacher, layer) if layer is not None else nullcontext():
        answers = []
        rows = evaluation_rows(p.student, p.tasks, [], p.eval, p.micro_data, p.fields, model=(student, tok),
                               answers=answers)
    swapped = {"layer": -1 if layer is None else layer, "intervention": "none" if layer is None else f"swap=L{layer}"}
    write_csv(rows.assign(**swapped), snakemake.output[0])
    write_answers([a.assign(**swapped) for a in answers], snakemake.output.answers)
