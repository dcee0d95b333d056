"""One stage of retrieval-guided hybrid distillation (1 matrices, 2 hidden states, 3 logits).

Stage 1 (rule distill_matrices) aligns the SSM mixers of a student without attention: it is
shared by every k and selection of a state size. Stage 2 builds the student with its kept heads
(top-k of the KV ranking, or k random heads drawn with the variant's seed) around the stage-1 mixers; stage 3 continues stage 2.
Resumable: checkpoints go to params.ckpt (not an output), the output appears complete or not at all.
"""
import shutil
import time

import pandas as pd

from gna.experiments.distill_data import (checkpoint_dir, input_stamp, make_stream, seq_len_of, stage_data,
                                          stage_steps)
from gna.hybrid import build_student, distill, heads_from_ranking, random_heads, stage_options
from gna.io import atomic_path, write_json
from gna.models import describe, load_model
from gna.pipeline import first_input, job

with job(snakemake) as log:
    p, wc, i = snakemake.params, snakemake.wildcards, snakemake.input
    run = dict(p.run)
    stage, state, seed = run["stage"], int(wc.state), int(run["seed"])
    k, selection = (int(wc.k), wc.selection) if stage > 1 else (0, "none")
    teacher, tok = load_model(p.spec)

    def local(path):
        spec = {"path": path, "dtype": p.spec["dtype"], "device": p.spec["device"]}
        return load_model(spec, with_tokenizer=False)[0]

    if stage == 3:
        student = local(i.previous)
        heads = student.config.kept_heads
    else:
        if k == 0:
            heads = []
        elif selection == "ranked":
            heads = heads_from_ranking(pd.read_csv(i.ranking), k)
        else:  # selection "random<draw>": the heads are drawn with seed <draw> (the student's init and
            # data keep the run's seed, so the draws differ in their heads only)
            heads = random_heads(describe(teacher), k, int(selection.removeprefix("random") or seed))
        student = build_student(teacher, heads, state, chunk_size=run["chunk_size"], combine=run["combine"],
                                ssm_init=run["ssm_init"], seed=seed, adapter_init=run.get("adapter_init", "identity"))
        if stage == 2:  # the stage-1 mixers (the rest are the teacher's copies, or the kept heads)
            aligned = {n: t for n, t in local(i.previous).state_dict().items() if ".mixer." in n}
            missing = [n for n in student.state_dict() if ".mixer." in n and n not in aligned]
            if missing:
                raise ValueError(f"stage-1 student {i.previous} lacks mixer weights {missing[:3]}: other state size?")
            student.load_state_dict(aligned, strict=False)
    log.info("stage %d (%s): %s student, state %d, kept heads %s", stage, run["name"], selection, state, heads)
    data_cfg = stage_data(run["data"], stage)  # the rule passes this stage's data already; by_stage: see there
    data = make_stream(data_cfg, tok, p.micro_data, seed, purpose=f"stage{stage}",
                       shards=first_input(snakemake, "tokens"))
    steps = stage_steps(run["steps"], run["tokens"], int(data_cfg.get("batch_size", 16)), seq_len_of(data_cfg))
    # the checkpoint folder ignores the budgets and the memory knobs: a job that ran out of memory
    # resumes from its checkpoints with a smaller micro_batch_size / vocab_chunk
    ident = {key: v for key, v in run.items() if key not in ("steps", "tokens", "micro_batch_size", "vocab_chunk")}
    ckpt = checkpoint_dir(p.ckpt, {**ident, "teacher": p.spec, "heads": [list(h) for h in heads], "state": state,
                                   "selection": selection, "inputs": input_stamp(getattr(i, "previous", []), i.teacher)})
    save_every = int(snakemake.config["experiments"]["hybrid_distillation"].get("save_every", 50))  # not a param
    start = time.time()
    result = distill(teacher, student, stage, data, steps, run["lr"], ckpt, resume=True, max_tokens=run["tokens"],
                     seed=seed, save_every=save_every, micro_batch_size=run.get("micro_batch_size"),
                     vocab_chunk=run.get("vocab_chunk"), **stage_options(run, stage))
    losses = result["losses"] or [float("nan")]
    log.info("stage %d: %d steps, %d tokens, loss %.4f -> %.4f (resumed from step %d), %.1f s", stage,
             result["step"], result["tokens"], losses[0], losses[-1], result["resumed_from"], time.time() - start)
    with atomic_path(snakemake.output[0], directory=True) as tmp:
        student.eval().save_pretrained(tmp)
        tok.save_pretrained(tmp)
        write_json({"stage": stage, "name": run["name"], "steps": result["step"], "tokens": result["tokens"],
                    "losses": result["losses"], "resumed_from": result["resumed_from"], "kept_heads": heads,
                    "selection": selection, "state_size": state, "k": k, "lr": run["lr"],
                    "seconds": time.time() - start}, tmp / "distill.json")
    shutil.rmtree(ckpt, ignore_errors=True)  # the output holds the student now
