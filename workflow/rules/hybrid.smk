# Layer swap (Fig. 7) and retrieval-guided hybrid distillation (the follow-up paper).
# Reads config["experiments"]:
#   layer_swap.teacher           the transformer whose decoder layers are swapped in
#   layer_swap.student           an SSM of the config aligned to it (paper: llamba-8b-unaligned); when
#                                absent, one is made here: rule align_student (MOHAWK stages 1-2)
#   layer_swap.{steps,tokens,lr,state_size,data}   align_student's budgets ([stage 1, stage 2])
#   hybrid_distillation.teacher  the transformer distilled (paper: llama-1b)
#   hybrid_distillation.k        kept attention heads, top-k of the teacher's KV ranking
#   hybrid_distillation.state_size        SSM state of the k sweep
#   hybrid_distillation.state_sizes, state_k   the state-size sweep, at k = state_k
#   hybrid_distillation.random_heads      also the same budgets of random heads: true (every k > 0),
#                                         or the list of k to do it for
#   hybrid_distillation.random_seeds      the draws of those random heads (one student per k and draw)
#   hybrid_distillation.{steps,tokens,lr} per stage [1 matrices, 2 hidden states, 3 logits]
#   hybrid_distillation.data     {source: micro | web, batch_size, seq_len?, corpus?, sources?}
#   hybrid_distillation.gpus_per_stage, nodes   ranks of every stage job (1 x 1: one process)
#   hybrid_distillation.sharding  replicated (data-parallel) or sharded (FSDP2) ranks; auto: the plan picks
#   hybrid_distillation.kv_separator   the follow-up's KV separator (" "), for the teacher's ranking and
#                                the hybrids' KV score; hybrid_distillation.kv_eval_seeds: that score's probe
#                                seeds (default kv_probe.seed + 1, 2, 3, never the ranking's); the score is the
#                                mean over them, their min-max its spread
#
# Distillation checkpoints: every stage's output is a complete student directory (written
# atomically at the end; DVC tracks it with results/). While a stage runs, its resumable
# checkpoints live in <output>.ckpt/ (NOT an output: Snakemake deletes the outputs of a failed or
# killed job, and would delete them with it); a rerun resumes from the newest complete one, and
# they are removed once the stage's output is written. hybrid_distillation.save_every (steps between
# checkpoints) is read by the script from the config, not a param: changing it changes no result,
# so it must not rerun the stages.

from gna.hybrid.study.variants import parse_variant

LAYER_SWAP = experiment_config("layer_swap")
DISTILL = experiment_config("hybrid_distillation")
STAGE_NAMES = {1: "matrices", 2: "hidden_states", 3: "end_to_end"}


# The students, by name (gna.hybrid.study.variants: k{k}-s{state}-ranked, k{k}-s{state}-random{draw}).
DISTILL_VARIANTS = distill_variants(DISTILL)


# What each stage runs with (budgets: steps, or tokens -> steps; see gna.hybrid.study.data);
# none without the experiment.
DISTILL_STAGE = {
    stage: {"stage": stage, "name": STAGE_NAMES[stage],
            "steps": (DISTILL.get("steps") or [None] * 3)[stage - 1],
            "tokens": (DISTILL.get("tokens") or [None] * 3)[stage - 1],
            "lr": DISTILL["lr"][stage - 1],
            "data": _distill_data_at(DISTILL["data"], stage),
            "seed": DISTILL.get("seed", config["seed"]), "chunk_size": DISTILL["chunk_size"],
            "ssm_init": DISTILL["ssm_init"], "combine": DISTILL["combine"],
            # memory knobs (micro-batches, stage 3's KL in chunks of positions): only when set, so a
            # config without them keeps its params and reruns nothing
            **{key: DISTILL[key] for key in ("micro_batch_size", "vocab_chunk") if DISTILL[key] is not None},
            # mohawk's optimizer and stage-2 settings (gna.hybrid.distillation.stage_options): only when set,
            # per stage where a list of 3 is given; adapter_init and stage2_trainable matter in stage 2 only,
            # stage1_trainable in stage 1
            **{key: _distill_at(DISTILL[key], stage) for key in ("weight_decay", "schedule", "grad_clip")
               if DISTILL.get(key) is not None},
            **({"no_decay": DISTILL["no_decay"]} if DISTILL.get("no_decay") else {}),
            **{key: DISTILL[key] for key in ("stage2_trainable", "adapter_init")
               if stage == 2 and DISTILL.get(key) is not None},
            **({"stage1_trainable": DISTILL["stage1_trainable"]}
               if stage == 1 and DISTILL.get("stage1_trainable") is not None else {})}
    for stage in (1, 2, 3) if DISTILL
}
HYBRID_OUTPUTS = ([f"results/hybrid/{DISTILL['teacher']}/{v}.csv" for v in ["teacher", *DISTILL_VARIANTS]]
                  if DISTILL else [])
LAYER_SWAP_STUDENT = ((model_input(LAYER_SWAP["student"]) if LAYER_SWAP.get("student")
                       else [f"results/hybrid/{LAYER_SWAP['teacher']}/aligned"]) if LAYER_SWAP else [])
LAYER_SWAP_CONDITIONS = (["none"] + [f"layer{i}" for i in range(n_layers(LAYER_SWAP["teacher"]))]
                         if LAYER_SWAP else [])
# The follow-up ranks the teacher's heads, and scores the hybrids' KV retrieval, with its own
# separator ("is {answer}"); the hybrids are scored on prompts of another seed than the ranking's.
DISTILL_SEPARATOR = (config["kv_probe"]["separator"] if DISTILL.get("kv_separator") is None
                     else DISTILL["kv_separator"])
KV_EVAL_SEEDS = other_probe_seeds(DISTILL.get("kv_eval_seeds"))
if DISTILL and config["kv_probe"]["seed"] in KV_EVAL_SEEDS:
    raise ValueError(f"experiments.hybrid_distillation.kv_eval_seeds = {KV_EVAL_SEEDS} holds kv_probe.seed: the "
                     "hybrids' KV retrieval would be scored on the prompts their heads were selected on")
DISTILL_RANKING = ("results/scan/{teacher}.ranking.csv" if DISTILL_SEPARATOR == config["kv_probe"]["separator"]
                   else "results/scan_distill/{teacher}.ranking.csv")
# hybrid_distillation.ranking: the kept heads by the ranking across probe formats or over probe seeds (probe_formats.smk, ranking_seeds.smk)
if DISTILL.get("ranking", "single") != "single":
    DISTILL_RANKING = ranking_file(DISTILL["ranking"], "{teacher}")
if DISTILL.get("ranking") == "over_seeds" and set(KV_EVAL_SEEDS) & set(experiment_config("ranking_seeds").get("seeds") or []):
    raise ValueError(f"experiments.hybrid_distillation.ranking = over_seeds ranks on probe seeds "
                     f"{experiment_config('ranking_seeds')['seeds']}, which kv_eval_seeds {KV_EVAL_SEEDS} share: the "
                     "hybrids' KV retrieval would be scored on the prompts their heads were selected on")
# The hybrids' KV probes, and mohawk's KV-Ret's (top-1 over the vocabulary, gna.probes.top1) on its own
# number of pairs (mohawk: 50): the students keep their teacher's tokenizer, so the teacher's value rule
# (kv_values) names the files of both
KV_EVAL_PROBES = lambda teacher: [probe_path(seed=s, separator=DISTILL_SEPARATOR, model=teacher)
                                  for s in KV_EVAL_SEEDS]
KV_TOP1_PROBES = lambda teacher: [probe_path(n_pairs=DISTILL.get("kv_top1_pairs"), seed=s,
                                             separator=DISTILL_SEPARATOR, model=teacher) for s in KV_EVAL_SEEDS]

# Paper scale reads web data (fineweb-edu, finemath): rule distill_tokens tokenizes each mix once into
# results/distill_data/<teacher>/<split>-<digest>/, where the Hub is reachable; every job below reads those
# shards offline and a resumed stage starts at its step (gna.hybrid.study.token_shards). The micro corpus
# is generated inside the jobs: no token folders.
TOKEN_SETS = token_sets(config)

# Every stage job runs on gpus_per_stage x nodes ranks (gna.hybrid.study.stage_ranks; the script starts
# them with torchrun, or srun on several nodes: then one task per GPU). Not params: the number of ranks
# changes no result (to the rounding of the gradients' sums), and a stage resumes on any number of ranks.
DISTILL_GPUS, DISTILL_NODES = stage_world(DISTILL)
# The distillation is the study's longest chain (stage 1 -> 2 -> 3 -> evaluation per student): its jobs
# go first whenever they are ready, and the short ones fill in around them instead of trailing it.
DISTILL_PRIORITY = 1
if DISTILL:
    check_split([DISTILL_STAGE[s]["data"].get("batch_size", 16) for s in DISTILL_STAGE], DISTILL_GPUS * DISTILL_NODES)
# What a stage job asks of Slurm (gna.hybrid.study.stage_ranks.launch_resources): the GPUs per node,
# hybrid_distillation.cpus_per_rank cores per rank, one task per rank across nodes. Locally, Snakemake
# counts the job's ranks as its threads.
DISTILL_LAUNCH = launch_resources(DISTILL_GPUS, DISTILL_NODES, cpus_per_rank(DISTILL), bool(GPUS))
DISTILL_THREADS = max(THREADS, DISTILL_GPUS * DISTILL_NODES)


# On a cluster executor, a stage whose profile runtime (over its attempts) is shorter than the plan's
# hours is refused once the DAG is built, before any job is submitted (gna.plan.submission).
onstart:
    from gna.plan.submission import refuse_overlong

    if DISTILL:
        try:
            refuse_overlong(workflow, config)
        except GnaError as e:
            exit_with_config_error(e)


rule align_student:
    input:
        teacher=lambda wc: model_input(wc.teacher),
        tokens=tokens_of(TOKEN_SETS, "align"),
    output:
        directory("results/hybrid/{teacher}/aligned"),
    wildcard_constraints:
        teacher=r"[^/]+",
    params:
        spec=lambda wc: model_spec(wc.teacher),
        ckpt=lambda wc: f"results/hybrid/{wc.teacher}/aligned.ckpt",
        steps=LAYER_SWAP.get("steps"),
        tokens=LAYER_SWAP.get("tokens"),
        lr=LAYER_SWAP.get("lr", [1e-3, 1e-3]),
        state_size=lambda wc: LAYER_SWAP["state_size"],
        chunk_size=lambda wc: LAYER_SWAP["chunk_size"],
        data=LAYER_SWAP.get("data", {"source": "micro"}),
        seed=config["seed"],
        micro_data=MICRO_DATA,
    # the layer swap's chain (align, then swap every layer) is the study's second longest: first
    # when ready, like the distillation, or it trails the run on one core
    priority: DISTILL_PRIORITY
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/hybrid/{teacher}/aligned.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/align_student.py"


rule layer_swap:
    input:
        teacher=lambda wc: model_input(wc.teacher),
        student=LAYER_SWAP_STUDENT,
    output:
        "results/layer_swap/{teacher}/{condition}.csv",
        answers="results/layer_swap/{teacher}/{condition}.answers.csv",
    wildcard_constraints:
        teacher=r"[^/]+",
        condition=r"none|layer\d+",
    params:
        teacher=lambda wc: model_spec(wc.teacher),
        student=lambda wc: (model_spec(LAYER_SWAP["student"]) if LAYER_SWAP.get("student")
                            else local_spec(f"results/hybrid/{wc.teacher}/aligned")),
        tasks=tasks_of("mmlu", "knowledge"),
        fields=lambda wc: result_fields(LAYER_SWAP.get("student") or f"{wc.teacher}-aligned", "layer_swap",
                                        teacher=wc.teacher, condition=wc.condition),
        **lm_eval_params(),
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/layer_swap/{teacher}/{condition}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/layer_swap.py"


rule layer_swap_figure:
    input:
        expand("results/layer_swap/{teacher}/{condition}.csv", condition=LAYER_SWAP_CONDITIONS,
               teacher=[LAYER_SWAP["teacher"]] if LAYER_SWAP else []),
    output:
        png=report(f"{FIGURES}/layer_swap.png", caption="../report/layer_swap.rst", category="Hybrids"),
        pdf=f"{FIGURES}/layer_swap.pdf",
        csv=f"{FIGURES}/layer_swap.csv",
        md=f"{FIGURES}/layer_swap.md",
    params:
        mmlu=tasks_of("mmlu"),
        knowledge=tasks_of("knowledge"),
    log:
        "logs/figures/layer_swap.log",
    conda:
        CPU_ENV
    script:
        "../scripts/layer_swap_figure.py"


rule distill_matrices:
    # Stage 1 aligns each SSM mixer's matrix to the teacher's attention matrix: the kept heads take
    # no part in it (they are copies of the teacher's, trained from stage 2 on), so one stage-1
    # student per state size serves every k and selection.
    input:
        teacher=lambda wc: model_input(wc.teacher),
        tokens=tokens_of(TOKEN_SETS, "stage1"),
    output:
        directory("results/hybrid/{teacher}/s{state}/stage1"),
    wildcard_constraints:
        teacher=r"[^/]+",
        state=r"\d+",
    params:
        spec=lambda wc: model_spec(wc.teacher),
        ckpt=lambda wc: f"results/hybrid/{wc.teacher}/s{wc.state}/stage1.ckpt",
        run=lambda wc: DISTILL_STAGE[1],
        micro_data=MICRO_DATA,
    priority: DISTILL_PRIORITY
    threads: DISTILL_THREADS
    resources:
        gpu=DISTILL_LAUNCH["gpu"],
        **{k: v for k, v in DISTILL_LAUNCH.items() if k != "gpu"},
    log:
        "logs/hybrid/{teacher}/s{state}/stage1.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/distill_matrices.py"


rule distill_stage:
    # Stage 2 builds the student (kept heads: top-k of the ranking, or k random ones) around the
    # stage-1 mixers and aligns each layer's output; stage 3 distils it end to end on logits.
    input:
        teacher=lambda wc: model_input(wc.teacher),
        ranking=lambda wc: (DISTILL_RANKING.format(teacher=wc.teacher)
                            if wc.stage == "2" and wc.selection == "ranked" and int(wc.k) > 0 else []),
        previous=lambda wc: (f"results/hybrid/{wc.teacher}/s{wc.state}/stage1" if wc.stage == "2"
                             else f"results/hybrid/{wc.teacher}/k{wc.k}-s{wc.state}-{wc.selection}/stage2"),
        tokens=lambda wc: tokens_of(TOKEN_SETS, f"stage{wc.stage}"),
    output:
        directory("results/hybrid/{teacher}/k{k}-s{state}-{selection}/stage{stage}"),
    wildcard_constraints:
        teacher=r"[^/]+",
        k=r"\d+",
        state=r"\d+",
        selection=r"ranked|random\d+",
        stage="2|3",
    params:
        spec=lambda wc: model_spec(wc.teacher),
        ckpt=lambda wc: f"results/hybrid/{wc.teacher}/k{wc.k}-s{wc.state}-{wc.selection}/stage{wc.stage}.ckpt",
        run=lambda wc: DISTILL_STAGE[int(wc.stage)],
        micro_data=MICRO_DATA,
    priority: DISTILL_PRIORITY
    threads: DISTILL_THREADS
    resources:
        gpu=DISTILL_LAUNCH["gpu"],
        **{k: v for k, v in DISTILL_LAUNCH.items() if k != "gpu"},
    log:
        "logs/hybrid/{teacher}/k{k}-s{state}-{selection}/stage{stage}.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/distill_stage.py"


rule evaluate_hybrid:
    input:
        model=lambda wc: (model_input(wc.teacher) if wc.variant == "teacher"
                          else [f"results/hybrid/{wc.teacher}/{wc.variant}/stage3"]),
        probes=lambda wc: KV_EVAL_PROBES(wc.teacher),
        top1_probes=lambda wc: KV_TOP1_PROBES(wc.teacher),
        tokens=tokens_of(TOKEN_SETS, "heldout"),
    output:
        "results/hybrid/{teacher}/{variant}.csv",
        answers="results/hybrid/{teacher}/{variant}.answers.csv",
    wildcard_constraints:
        teacher=r"[^/]+",
        variant=f"teacher|{VARIANT_WILDCARD}",
    params:
        spec=lambda wc: (model_spec(wc.teacher) if wc.variant == "teacher"
                         else local_spec(f"results/hybrid/{wc.teacher}/{wc.variant}/stage3")),
        tasks=tasks_of("mmlu", "knowledge", "retrieval"),
        fields=lambda wc: result_fields(f"{wc.teacher}-hybrid" if wc.variant != "teacher" else wc.teacher,
                                        "hybrid_distillation", teacher=wc.teacher, variant=wc.variant),
        **lm_eval_params(),
        kv_seeds=KV_EVAL_SEEDS,
        data=lambda wc: DISTILL["data"],
        heldout_batches=lambda wc: DISTILL["heldout_batches"],
        seed=DISTILL.get("seed", config["seed"]),
    priority: DISTILL_PRIORITY
    threads: THREADS
    resources:
        **MODEL_RESOURCES,
    log:
        "logs/hybrid/{teacher}/{variant}.eval.log",
    conda:
        MODEL_ENV
    script:
        "../scripts/evaluate_hybrid.py"


rule distill_tokens:
    # CPU only; reads the Hub's data sets. Where the cluster's nodes are offline, run
    # `snakemake --cores 16 distill_data` on a host that is online first (docs/paper-dag.md, "Distillation data").
    input:
        teacher=lambda wc: model_input(wc.teacher),  # its tokenizer
    output:
        directory("results/distill_data/{teacher}/{name}"),
    wildcard_constraints:
        teacher=r"[^/]+",
        name=r"(train|heldout)-[0-9a-f]{10}",
    params:
        spec=lambda wc: model_spec(wc.teacher),
        # data (the mix), split, seed, rows (gna.hybrid.study.token_sets)
        tokens=lambda wc, output: {k: v for k, v in TOKEN_SETS[output[0]].items() if k != "readers"},
    threads: max(THREADS, 8)
    log:
        "logs/distill_data/{teacher}/{name}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/distill_tokens.py"


rule distill_data:
    # a target: the prepared distillation tokens, nothing else
    input:
        list(TOKEN_SETS),


rule hybrid_tables:
    input:
        HYBRID_OUTPUTS,
    output:
        png=report(f"{FIGURES}/hybrid_heads.png", caption="../report/hybrid_heads.rst", category="Hybrids"),
        pdf=f"{FIGURES}/hybrid_heads.pdf",
        csv=f"{FIGURES}/hybrid_heads.csv",
        md=f"{FIGURES}/hybrid_heads.md",
        state_csv=f"{FIGURES}/hybrid_state_size.csv",
        state_md=report(f"{FIGURES}/hybrid_state_size.md", caption="../report/hybrid_state_size.rst",
                        category="Hybrids"),
    params:
        teacher=lambda wc: DISTILL["teacher"],
        paper_key=lambda wc: paper_keys([DISTILL["teacher"]])[DISTILL["teacher"]],
        state_size=lambda wc: DISTILL["state_size"],
        state_k=DISTILL.get("state_k"),
        roles=task_roles("topk"),
    log:
        "logs/figures/hybrid_tables.log",
    conda:
        CPU_ENV
    script:
        "../scripts/hybrid_tables.py"


EXPERIMENT_REGISTRY.declare(
    "layer_swap",
    targets=lambda: [f"{FIGURES}/layer_swap.png", f"{FIGURES}/layer_swap.md",
                     *expand("results/layer_swap/{teacher}/{condition}.answers.csv", condition=LAYER_SWAP_CONDITIONS,
                             teacher=[LAYER_SWAP["teacher"]] if LAYER_SWAP else [])],
    batched={"layer_swap": lambda wc: ()},
    plan={"layer_swap": Estimator("gna.plan.job_estimates:swapped_layer", experiment="layer_swap"),
          "align_student": Estimator("gna.plan.job_estimates:aligned_student", experiment="layer_swap")},
    findings=[Section(60, "gna.report.findings.layer_swap:layer_swap",
                      {"answers": "results/layer_swap/{teacher}/{condition}.answers.csv",
                       "tasks": {"mmlu": tasks_of("mmlu"), "knowledge": tasks_of("knowledge")}})],
)
# A stage batch holds one stage of one state size (stage 3 reads stage 2), and only where a stage is
# one process (gpus_per_stage x nodes = 1): on ranks, each stage is its own launch. A student's
# evaluation waits only for the students of its own state size (its name says it), the teacher alone.
EXPERIMENT_REGISTRY.declare(
    "hybrid_distillation",
    targets=lambda: [f"{FIGURES}/hybrid_heads.png", f"{FIGURES}/hybrid_heads.md", f"{FIGURES}/hybrid_state_size.md",
                     *answers_beside(HYBRID_OUTPUTS)],
    batched={**({"distill_matrices": lambda wc: (),
                 "distill_stage": lambda wc: (wc["teacher"], wc["state"], wc["stage"])}
                if DISTILL and DISTILL_GPUS * DISTILL_NODES == 1 else {}),
             **({"evaluate_hybrid": lambda wc: (wc["teacher"], wc["variant"] if wc["variant"] == "teacher"
                                                else parse_variant(wc["variant"]).state)} if DISTILL else {})},
    # the stages every student's chain takes by wildcard
    batch_inputs=lambda: ([f"results/hybrid/{DISTILL['teacher']}/{v}/stage{stage}" for v in DISTILL_VARIANTS
                           for stage in (2, 3)]
                          + [f"results/hybrid/{DISTILL['teacher']}/s{s}/stage1"
                             for s in dict.fromkeys(parse_variant(v).state for v in DISTILL_VARIANTS)]
                          if DISTILL else []),
    launch={rule: (DISTILL_THREADS, DISTILL_LAUNCH) for rule in ("distill_matrices", "distill_stage")},
    plan={"distill_matrices": Estimator("gna.plan.job_estimates:distillation_stage", experiment="hybrid_distillation"),
          "distill_stage": Estimator("gna.plan.job_estimates:distillation_stage", experiment="hybrid_distillation"),
          "evaluate_hybrid": Estimator("gna.plan.job_estimates:distilled_student", experiment="hybrid_distillation"),
          "distill_tokens": Estimator("gna.plan.job_estimates:tokenized_data")},
    # each random student's KV score from its result table: ranked vs random judged with the draw as the unit
    findings=[Section(61, "gna.report.findings.hybrid_distillation:distillation",
                      {"results": f"results/hybrid/{DISTILL['teacher']}/{{variant}}.csv" if DISTILL else None,
                       "seeds": list((DISTILL or {}).get("random_seeds") or []),
                       "state_size": (DISTILL or {}).get("state_size"),
                       # each student's answers (its KV top-1 per prompt and probe seed among them): the
                       # gains paired student against student
                       "answers": f"results/hybrid/{DISTILL['teacher']}/{{variant}}.answers.csv" if DISTILL else None,
                       "tasks": {"knowledge": tasks_of("knowledge")}})],
)
