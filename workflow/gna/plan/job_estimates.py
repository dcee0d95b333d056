"""How the plan sizes one job, by the kind of work it does: an experiment's rule file names one of
these for each of its model-running rules (``Estimator`` in gna.experiments.registry), with its
options; each takes the study (``gna.plan.jobs.Study``) and the job's wildcards, and, where the rule
file names its experiment, that experiment's settings as ``exp``."""
from __future__ import annotations

import math

from ..evaluation import local_mmlu
from ..hybrid.study.stage_ranks import stage_world
from ..hybrid.study.variants import parse_variant
from ..probes.kv import is_probe_task, parse_probe_task
from . import estimate as E
from .estimate import GB, Estimate
from .ranks import training_estimate


def _eval_job(s, info, tasks, layers=None, repeats=1, extra_models=()) -> Estimate:
    secs, peak = E.eval_tasks(s.hw, info, tasks, s.eval, layers, repeats)
    extra = sum(i.weight_bytes for i in extra_models)
    return Estimate(gpu_gb=(peak + extra) / GB, host_gb=E.host_gb(s.hw, info, *extra_models),
                    hours=(secs + E.load_seconds(s.hw, info, *extra_models)) / 3600)


def _minimal(s, info) -> int:
    """The minimal model's depth where the study has found it, else the deepest it can be."""
    return s.minimal_depth(info.name) or info.n_layers - 1


def evaluation(s, wc: dict, roles, layers=None, repeats: int = 1) -> Estimate:
    """The model's lm-eval tasks of ``roles`` (or, a mapping, of ``roles[wildcards experiment]``):
    ``layers`` None (all), "depth" (the job's), "minimal" (the minimal model: its depth where the study
    has found it, else all layers but one), "minimal_minus_layer" (the minimal model without the job's
    layer: a layer past the minimal depth is a job that only starts and says so)."""
    info = s.info(wc["model"])
    tasks = s.tasks(*(roles[wc["experiment"]] if isinstance(roles, dict) else roles))
    if layers == "minimal_minus_layer":
        found = s.minimal_depth(info.name)
        if found is not None and int(wc["layer"]) >= found:  # gna's individual_pruning: n/a, no model loaded
            return Estimate(gpu_gb=0.0, host_gb=E.host_gb(s.hw), hours=s.hw.job_overhead_s / 3600)
        depth = (found or info.n_layers) - 1
    else:
        depth = {None: None, "depth": int(wc.get("depth", 0)), "minimal": _minimal(s, info)}[layers]
    return _eval_job(s, info, tasks, layers=depth, repeats=repeats)


def evaluation_and_probe(s, wc: dict, exp: dict, roles, probe_for: str) -> Estimate:
    """:func:`evaluation` of the tasks of ``roles`` (or, a mapping, of ``roles[wildcards experiment]``), and
    where the experiment scores its KV control (``exp["kv_control"]``; a rule that runs several experiments:
    for the jobs of ``probe_for``), the KV probe at the scan's n_pairs beside them."""
    e = evaluation(s, wc, roles)
    if exp.get("kv_control") and wc.get("experiment", probe_for) == probe_for:
        info = s.info(wc["model"])
        secs, _ = E.probe_scoring(s.hw, info, int(s.config["kv_probe"]["n_examples"]), [int(s.config["scan"]["n_pairs"])],
                                  int(s.eval["batch_size"]))
        e.hours += secs / 3600
    return e


def critical_heads(s, wc: dict, roles) -> Estimate:
    """Every head of the critical layers ablated alone in the minimal model, the tasks of ``roles`` each: two
    layers, the most the tested rule keeps (it may keep one or none, which the plan cannot know before the
    removals run), so an upper bound."""
    info = s.info(wc["model"])
    per_layer = {}
    for (layer, kind, h) in info.heads_by_layer:
        if kind == "attention" or layer not in per_layer:
            per_layer[layer] = h
    return _eval_job(s, info, s.tasks(*roles), layers=_minimal(s, info), repeats=2 * max(per_layer.values()))


def head_scan(s, wc: dict) -> Estimate:
    """The scan of the job's model by its method (scan.method_by_model, else scan.method)."""
    sc, info = s.config["scan"], s.info(wc["model"])
    secs, peak = E.head_scan(s.hw, info, int(s.config["kv_probe"]["n_examples"]), int(sc["n_pairs"]),
                             int(sc["batch_size"]), int(sc["max_rows"]), int(sc["classify_top"]),
                             int(sc["classify_examples"]), method=sc.get("method_by_model", {}).get(wc["model"], sc["method"]),
                             candidates=int(sc["candidates"]),
                             guard_sample=E.guard_draws(int(sc["guard_sample"]), sc.get("guard_level")),
                             graddrop=bool(sc["atp_graddrop"]))
    return E.loaded(s.hw, info, secs, peak)


def probe_pairs(s, wc: dict, exp: dict) -> Estimate:
    """KV probes of every number of ``exp["pairs"]`` on each of its probe seeds (three by default)."""
    info = s.info(wc["model"])
    seeds = exp["probe_seeds"]
    pairs = list(exp["pairs"]) * (3 if seeds is None else max(1, len(seeds)))
    n = min(int(s.config["kv_probe"]["n_examples"]), exp.get("n_examples") or math.inf)   # its first n prompts
    secs, peak = E.probe_scoring(s.hw, info, int(n), pairs, int(s.eval["batch_size"]))
    return E.loaded(s.hw, info, secs, peak)


def masked_positions(s, wc: dict, exp: dict) -> Estimate:
    """MMLU once unmasked and once per masked position set (``exp["position_sets"]``)."""
    return _eval_job(s, s.info(wc["model"]), s.tasks("mmlu"), repeats=1 + len(exp["position_sets"]))


def masked_mixers(s, wc: dict, exp: dict) -> Estimate:
    """The experiment's tasks (else MMLU and the knowledge tasks but winogrande), once unmasked and,
    for a masking mode, once masked."""
    tasks = exp.get("tasks") or [t for t in s.tasks("mmlu", "knowledge") if t != "winogrande"]
    return _eval_job(s, s.info(wc["model"]), tasks, repeats=1 if wc.get("mode") == "none" else 2)


def swapped_layer(s, wc: dict, exp: dict) -> Estimate:
    """The student with one teacher layer swapped in: both models loaded, MMLU and knowledge."""
    student = s.info(exp["student"]) if exp.get("student") else E.student_info(s.info(exp["teacher"]), 0, 64)
    return _eval_job(s, student, s.tasks("mmlu", "knowledge"), extra_models=(s.info(wc["teacher"]),))


def aligned_student(s, wc: dict, exp: dict) -> Estimate:
    """Stages 1 and 2 of aligning a student, one after the other, resumable."""
    budget = {**exp, "tokens": list(exp.get("tokens") or []) + [0]}
    e1 = training_estimate(s, wc["teacher"], budget, 1, 0, 64)
    e2 = training_estimate(s, wc["teacher"], budget, 2, 0, 64)
    return Estimate(gpu_gb=max(e1.gpu_gb, e2.gpu_gb), host_gb=e1.host_gb, hours=e1.hours + e2.hours, resumable=True)


def mmlu_sample(s, wc: dict) -> Estimate:
    """Both local MMLU formats over the sample (benchmarks.mmlu.size)."""
    info = s.info(wc["model"])
    secs, peak = E.eval_tasks(s.hw, info, list(local_mmlu.TASKS),
                              {**s.eval, "limit": s.config["benchmarks"]["mmlu"]["size"]})
    return E.loaded(s.hw, info, secs, peak)


def baseline_task(s, wc: dict) -> Estimate:
    """One unmodified model on one task (rule baseline): a KV probe (``kv_n<pairs>``,
    :func:`gna.probes.kv.probe_task_name`) of kv_probe.n_examples prompts, a local MMLU format over its
    sample (benchmarks.mmlu.size), or a local suite task over its sample (experiments.baselines.size
    where set, else benchmarks.suite.size: one number or that task's entry)."""
    info, task = s.info(wc["model"]), wc["task"]
    if is_probe_task(task):
        secs, peak = E.probe_scoring(s.hw, info, int(s.config["kv_probe"]["n_examples"]), [parse_probe_task(task)[0]],
                                     int(s.eval["batch_size"]))
        return E.loaded(s.hw, info, secs, peak)
    secs, peak = E.eval_tasks(s.hw, info, [task], s.baseline_eval)   # its sample: the baselines' task limits
    return E.loaded(s.hw, info, secs, peak)


def distillation_stage(s, wc: dict, exp: dict) -> Estimate:
    """One stage (stage 1: the matrices, no kept heads) on the stage's ranks."""
    stage, k = int(wc.get("stage", 1)), int(wc.get("k", 0))
    return training_estimate(s, wc["teacher"], exp, stage, k, int(wc["state"]), stage_world(exp))


def distilled_student(s, wc: dict, exp: dict) -> Estimate:
    """A student (or the teacher) on MMLU, knowledge and retrieval, the KV probes and the held-out perplexity."""
    t = s.info(wc["teacher"])
    if wc["variant"] == "teacher":
        info = t
    else:
        v = parse_variant(wc["variant"])
        info = E.student_info(t, v.k, v.state)
    e = _eval_job(s, info, s.tasks("mmlu", "knowledge", "retrieval"))
    data = exp.get("data") or {}
    held = int(exp["heldout_batches"]) * int(data.get("batch_size", 8)) * int(data.get("seq_len", 2048))
    seeds = exp["kv_eval_seeds"]
    n_pairs = int(s.config["scan"]["n_pairs"])
    top1 = exp.get("kv_top1_pairs") or n_pairs   # mohawk's top-1 beside the multiple choice
    kv, _ = E.probe_scoring(s.hw, info, int(s.config["kv_probe"]["n_examples"]),
                            [n_pairs, int(top1)] * (3 if seeds is None else max(1, len(seeds))))
    e.hours += (kv + held * info.flops_per_token(1024) / E.rate(s.hw, info)) / 3600
    ppl = E.heldout_perplexity(s.hw, info, int(data.get("batch_size", 8)), int(data.get("seq_len", 2048)))
    e.gpu_gb = max(e.gpu_gb, ppl / GB)
    return e


def tokenized_data(s, wc: dict) -> Estimate:
    """CPU: stream, tokenize and pack the web data once."""
    from ..hybrid.study.token_sets import token_sets

    entry = token_sets(s.config)[f"results/distill_data/{wc['teacher']}/{wc['name']}"]
    tokens = entry["rows"] * entry["data"]["seq_len"]
    return Estimate(gpu=False, gpu_gb=0.0, host_gb=8.0, hours=tokens / E.TOKENIZE_RATE / 3600 + 0.1)


def mixing_patterns(s, wc: dict) -> Estimate:
    """One model, a few prompts' mixing matrices."""
    info = s.info(wc["model"])
    return Estimate(gpu_gb=(info.weight_bytes + 4 * GB) / GB, host_gb=E.host_gb(s.hw, info),
                    hours=(E.load_seconds(s.hw, info) + s.hw.light_work_s) / 3600)


def models_loaded(s, wc: dict, exp: dict) -> Estimate:
    """The experiment's models loaded one after the other, little work on each."""
    infos = [s.info(m) for m in exp.get("models", [])]
    big = max(infos, key=lambda i: i.params) if infos else None
    return Estimate(gpu_gb=(big.weight_bytes + 4 * GB) / GB if big else 1.0,
                    host_gb=E.host_gb(s.hw, big) if big else 4.0,
                    hours=(sum(E.load_seconds(s.hw, i) for i in infos) + s.hw.light_work_s) / 3600)
