"""A Llamba aligned layer by layer to a transformer (MOHAWK stages 1-2, no end-to-end stage):
the micro counterpart of Llamba-8B-unaligned for the layer swap (Fig. 7)."""

import shutil

from gna.hybrid.study.data import checkpoint_dir, input_stamp, make_stream, seq_len_of, stage_steps
from gna.hybrid.swap import align_student
from gna.io import atomic_path, write_json
from gna.models import load_model
from gna.jobs.script_job import first_input, job

with job(snakemake) as log:
    p = snakemake.params
    teacher, tok = load_model(p.spec)
    data = make_stream(p.data, tok, p.micro_data, p.seed, purpose="align", shards=first_input(snakemake, "tokens"))
    steps_cfg, tokens = list(p.steps or [None, None]), list(p.tokens or [None, None])
    steps = tuple(stage_steps(steps_cfg[s], tokens[s], int(p.data.get("batch_size", 16)), seq_len_of(p.data))
                  for s in (0, 1))
    ckpt = checkpoint_dir(p.ckpt, {"teacher": p.spec, "lr": list(p.lr), "state_size": p.state_size,
                                   "chunk_size": p.chunk_size, "data": p.data, "seed": p.seed,
                                   "inputs": input_stamp(snakemake.input.teacher)})
    log.info("aligning a Llamba to %s: steps %s, lr %s, state %d", p.spec["path"], steps, p.lr, p.state_size)
    llamba = align_student(teacher, data, ckpt, steps=steps, lr=tuple(p.lr), state_size=p.state_size,
                           max_tokens=tuple(tokens), chunk_size=p.chunk_size, seed=p.seed)
    with atomic_path(snakemake.output[0], directory=True) as tmp:
        llamba.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        write_json({"steps": steps, "tokens": tokens, "lr": list(p.lr), "state_size": p.state_size},
                   tmp / "distill.json")
    shutil.rmtree(ckpt, ignore_errors=True)
