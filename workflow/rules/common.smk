# Helpers shared by the rules: config validation, model sources, task roles, output lists.
import os
import re

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from gna.config import checks as config_checks
from gna.evaluation.local_mmlu import TASKS as LOCAL_MMLU_TASKS
from gna.errors import ConfigError, ProbeError
from gna.evaluation.local_suite import SUFFIX as SUITE_SUFFIX, TASKS as LOCAL_SUITE_TASKS
from gna.experiments.registry import Estimator, Registry, Section
from gna.experiments.topk import k_list as topk_k_list
from gna.hybrid.study.variants import WILDCARD as VARIANT_WILDCARD
from gna.hybrid.study.variants import distill_variants
from gna.hybrid.study.stage_ranks import check_split, cpus_per_rank, launch_resources, stage_world
from gna.hybrid.study.token_sets import token_sets, tokens_of
from gna.probes.kv import generate_kv_probe, probe_task_name
from gna.probes.values import DEFAULT_RULE, VALUE_RULES, choose_rule, rule_tag

# One torch thread per job: two threads on a loaded 2-core machine ran 13-17x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Jobs never reach the hub; the rules that fetch (external.smk) do, unless the user set this themselves.
HUB_OFFLINE_SET_BY_USER = os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("0", "", "false", "no", "off")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# The paper's published numbers, which the tables set beside ours (gna.report.common.published_dir).
os.environ.setdefault("GNA_PUBLISHED", os.path.join(workflow.basedir, "data", "published"))


def _sorted_keys(value):
    """The same value with every mapping's keys in sorted order (lists keep theirs)."""
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    return [_sorted_keys(v) for v in value] if isinstance(value, list) else value


# Snakemake compares a job's params as text: with the config's key order in them, reordering
# equal settings in a YAML file would rerun every evaluation. Mapping order means nothing here.
_canonical = _sorted_keys(dict(config))
config.clear()
config.update(_canonical)
# Fills in the schema's defaults (gna.config.schema): below, the rules read those keys directly.
try:
    validate(config, schema="../schemas/config.schema.yaml")
except WorkflowError:  # one line naming the key and the rule, not the failing part of the schema
    raise config_checks.schema_error(config, os.path.join(workflow.basedir, "workflow/schemas/config.schema.yaml")) from None

SCAN_MODELS = config["scan"]["models"]
EXPERIMENTS = config["experiments"]
EVAL = config["eval"]
# Where the study writes its tables, figures and findings (check_figures holds each folder to its commit).
FIGURES = config["figures"]

# What a job that runs a model asks for: every such block writes
#     threads: THREADS
#     resources: **MODEL_RESOURCES
#     conda: MODEL_ENV
# (gna.plan.gpu_rules and the SLURM profile know these blocks by MODEL_RESOURCES); the others
# run in CPU_ENV.
THREADS = config["threads_per_job"]
GPUS = config["gpus_per_job"]
MODEL_RESOURCES = {"gpu": GPUS}
CPU_ENV = "../../envs/cpu.yaml"
MODEL_ENV = "../../envs/gpu.yaml" if GPUS else CPU_ENV


def shipped_path(path):
    """A config path is relative to the working directory; where nothing is there, to the
    repository (which ships data/: the micro models and tasks), so --directory works."""
    if path is None or os.path.isabs(path) or os.path.exists(path):
        return path
    in_repo = os.path.join(workflow.basedir, path)
    return in_repo if os.path.exists(in_repo) else path


def model_source(name):
    """The directory (or HF id) a model is loaded from: a model the workflow builds (random) or
    converts (gguf) lies in results/models/<name>."""
    m = config["models"][name]
    return f"results/models/{name}" if "random" in m or "gguf" in m else shipped_path(m["path"])


def name_pattern(names):
    """A wildcard constraint matching exactly ``names`` (and nothing when there are none)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


if config["tasks"].get("micro_data"):
    config["tasks"]["micro_data"] = shipped_path(config["tasks"]["micro_data"])
SHAPES = config_checks.check(config, model_source)


def n_layers(name):
    return SHAPES[name][0]


# The local MMLU tasks (benchmarks.smk builds them from the pinned test set): where the study's
# tasks name one, every evaluation job reads the sample there.
LOCAL_MMLU_DIR = "results/benchmarks/mmlu/tasks"


# The tasks built from the pinned benchmark files (benchmarks.smk, its local_suite rule): those
# benchmarks.suite.tasks names and those the study's tasks name (<lm-eval task>_local).
LOCAL_SUITE_DIR = "results/benchmarks/suite/tasks"
# the baselines' own, larger samples of the same tasks (experiments.baselines.size), where they have them
BASELINE_SUITE_TASKS = "results/benchmarks/suite-baselines/tasks"


def suite_tasks():
    """The lm-eval tasks the local suite builds (benchmarks.suite.tasks, then the study's), or none."""
    named = [t[: -len(SUITE_SUFFIX)] for t in tasks_of("mmlu", "knowledge", "retrieval", "arc_regular", "arc_chat")
             if t in LOCAL_SUITE_TASKS]
    return list(dict.fromkeys(config["benchmarks"]["suite"]["tasks"] + named))


def study_reads_suite():
    return bool(set(LOCAL_SUITE_TASKS) & set(tasks_of("mmlu", "knowledge", "retrieval", "arc_regular", "arc_chat")))


def local_task_inputs():
    """The local task files the study's evaluations read (the local MMLU sample, the suite's manifest), or none."""
    mmlu = [f"{LOCAL_MMLU_DIR}/mmlu_sample.jsonl"] if set(LOCAL_MMLU_TASKS) & set(tasks_of("mmlu", "knowledge")) else []
    return mmlu + ([f"{LOCAL_SUITE_DIR}/manifest.json"] if study_reads_suite() else [])


def model_input(name):
    """Snakemake input for a job that runs a model: its directory if local (so changes rerun), else
    nothing; and the local task files its evaluations read."""
    src = model_source(name)
    return ([src] if src.startswith("results/") or os.path.isdir(src) else []) + local_task_inputs()


# The study's dtype and device, which every model loads with.
DTYPE_DEVICE = {"dtype": config["dtype"], "device": config["device"]}


def model_spec(name):
    """The ModelSpec fields of a model entry (see gna.models.ModelSpec)."""
    m = config["models"][name]
    spec = {"path": model_source(name), **DTYPE_DEVICE}
    for key in ("revision", "tokenizer", "family", "attn_implementation", "adapter_options"):
        if key in m:
            spec[key] = m[key]
    return spec


def local_spec(path):
    """The ModelSpec of a model this workflow wrote (a student): its directory, the study's dtype and device."""
    return {**DTYPE_DEVICE, "path": path}


def tasks_of(*roles):
    """Task names playing ``roles`` (mmlu, knowledge, retrieval, arc_regular, arc_chat)."""
    out = []
    for role in roles:
        value = config["tasks"].get(role) or []
        if isinstance(value, dict):  # retrieval: {paper name: task(s)}
            value = [t for v in value.values() for t in ([v] if isinstance(v, str) else v)]
        out += [value] if isinstance(value, str) else list(value)
    return list(dict.fromkeys(out))


def task_roles(kind):
    """Columns of a results table -> their tasks; names follow the published tables."""
    if kind == "arc":
        return {"arc_challenge": tasks_of("arc_regular"), "arc_challenge_chat": tasks_of("arc_chat")}
    retrieval = config["tasks"].get("retrieval") or {}
    roles = {"mmlu": tasks_of("mmlu")}
    roles.update({name: [t] if isinstance(t, str) else list(t) for name, t in retrieval.items()})
    if kind == "topk":
        roles["knowledge"] = tasks_of("knowledge")
        control = topk_kv_probe("topk_removal", None)
        if control:   # the positive control's column: the probe's task name is the same for every model
            roles["kv"] = [control[0]]
    else:
        roles = {"mmlu": tasks_of("mmlu"), "knowledge": tasks_of("knowledge")}
    return roles


def eval_params():
    """The lm-eval settings of an evaluation job (gna.experiments.run): eval, and the chat tasks."""
    local = {"local_mmlu_dir": LOCAL_MMLU_DIR} if set(LOCAL_MMLU_TASKS) & set(tasks_of("mmlu", "knowledge")) else {}
    if study_reads_suite():
        local["local_suite_dir"] = LOCAL_SUITE_DIR
    return {**EVAL, "chat_tasks": config["tasks"].get("chat_tasks", []), **local}


MICRO_DATA = config["tasks"].get("micro_data")


def lm_eval_params():
    """The params every job that evaluates through lm-eval ends with: the settings, the micro task files."""
    return {"eval": eval_params(), "micro_data": MICRO_DATA}


def result_fields(model, experiment, teacher=None, **extra):
    """The columns that name an evaluation job's rows (gna.evaluation.lm_eval_bridge.tidy): model, teacher where there is
    one, experiment, the job's own ``extra``, and the study's seed."""
    return {"model": model, **({"teacher": teacher} if teacher else {}), "experiment": experiment, **extra,
            "seed": config["seed"]}


SEPARATORS = {"space": " ", "nosep": ""}


def _tokenizer_on_disk(name):
    """The tokenizer.json of a model (or of its ``tokenizer``) in a directory the study does not write,
    or None: a rule's output (results/) or a hub id is not read while the DAG is built."""
    m = config["models"][name]
    src = shipped_path(m.get("tokenizer")) or (None if "random" in m or "gguf" in m else model_source(name))
    path = os.path.join(src, "tokenizer.json") if src else None
    return path if path and not src.startswith("results/") and os.path.isfile(path) else None


_KV_VALUES = {}


def kv_values(name, separator=None):
    """The value rule (gna.probes.values) of the KV probes model ``name`` is scored on, with ``separator``
    (default kv_probe's): its kv_values; "auto" (the default) tests its tokenizer where it is on disk
    (0-99, else 10-99 where one value's tokens would be a prefix of another's) and is 0-99 otherwise,
    which the job checks when it encodes the probe. None: the default rule."""
    if name is None:
        return DEFAULT_RULE
    sep = config["kv_probe"]["separator"] if separator is None else separator
    chosen = config["models"][name].get("kv_values", "auto")
    if chosen != "auto":
        return chosen
    if (name, sep) not in _KV_VALUES:
        path = _tokenizer_on_disk(name)
        if path is None:
            _KV_VALUES[name, sep] = DEFAULT_RULE
        else:
            from tokenizers import Tokenizer

            p = config["kv_probe"]
            prompt = generate_kv_probe(1, 1, p["seed"], fmt=p["format"])[0]["prompt"]
            try:
                _KV_VALUES[name, sep] = choose_rule(Tokenizer.from_file(path), prompt, sep, what=name)
            except ProbeError as e:
                raise ConfigError(f"models.{name}.kv_values (auto): {e}") from None
    return _KV_VALUES[name, sep]


for _name in config["models"]:  # while the rules are read: a tokenizer no rule suits is one line (Snakefile)
    kv_values(_name)


def probe_name(n_pairs, seed=None, separator=None, model=None):
    """A KV probe set's name: the config's format, ``seed``, ``separator`` (default: kv_probe's) and the
    value rule of ``model`` (kv_values; named only where it is not the paper's 0-99)."""
    p = config["kv_probe"]
    sep = p["separator"] if separator is None else separator
    tag = {v: k for k, v in SEPARATORS.items()}.get(sep)
    if tag is None:
        raise ValueError(f"KV probe separator {sep!r} is not one of {list(SEPARATORS.values())}")
    return f"kv-{p['format']}-n{n_pairs}-s{p['seed'] if seed is None else seed}-{tag}{rule_tag(kv_values(model, sep))}"


def probe_path(n_pairs=None, seed=None, separator=None, model=None):
    """The KV probe set file (written by kv_probe) of ``n_pairs`` (default: the scan's), ``seed`` and
    ``separator`` (defaults: kv_probe's), its values drawn by ``model``'s rule (kv_values)."""
    n = config["scan"]["n_pairs"] if n_pairs is None else n_pairs
    return f"results/probes/{probe_name(n, seed, separator, model)}.examples.jsonl"


def experiment_config(name):
    """An experiment's settings, validated (the schema's defaults in); {} where the study does not run it."""
    return EXPERIMENTS.get(name, {})


def experiment_models(name):
    return EXPERIMENTS[name]["models"] if name in EXPERIMENTS else []


def k_values(experiment, model):
    """The model's k: its k_by_model entry, else k; where the experiment gives k_shares, those shares of the
    model's heads (gna.experiments.topk.k_of_share)."""
    e = EXPERIMENTS[experiment]
    if e.get("k_shares") is not None:
        if e.get("kinds_by_model") or e.get("k_by_model") or e.get("k") is not None:
            raise ConfigError(f"experiments.{experiment}.k_shares counts every head of a model: give it alone, "
                              "without k, k_by_model or kinds_by_model")
        return topk_k_list(e["k_shares"], SHAPES[model][1], model)
    return e.get("k_by_model", {}).get(model, e["k"])


def paper_keys(models):
    """Names of the models in the published tables (data/published), where they are the paper's."""
    return {m: config["models"][m].get("paper_key", "") for m in models}


# Each experiment declares, in its own rules' file (gna.experiments.registry), its final targets, batched
# rules, plan estimators and findings sections. The shared rules loop over it.
EXPERIMENT_REGISTRY = Registry()


def all_targets():
    """The final outputs of the experiments the study runs, and its findings."""
    return EXPERIMENT_REGISTRY.targets(EXPERIMENTS) + [f"{FIGURES}/findings.md"]


def other_probe_seeds(seeds):
    """KV probe seeds an experiment scores heads on: ``seeds`` (its config's; null: unset), by default
    three draws other than the ranking's (kv_probe.seed), so the heads were not selected on those prompts."""
    return [config["kv_probe"]["seed"] + i for i in (1, 2, 3)] if seeds is None else list(seeds)


RANKING_FILES = {"single": "results/scan/{model}.ranking.csv",
                 "across_formats": "results/questions/formats/{model}.ranking.csv",
                 "over_seeds": "results/questions/seeds/{model}.ranking.csv"}


# used by topk_removal.smk and hybrid.smk
def ranking_file(choice, model):
    """The ranking an experiment takes its heads from (its ``ranking``: single, the scan's; across_formats,
    by the worst rank over probe formats, probe_formats.smk; over_seeds, by the mean rank over probe
    seeds, ranking_seeds.smk)."""
    return RANKING_FILES[choice or "single"].format(model=model)


# used by pruning.smk, head_keeping.smk and the confirmation: a gradual depth's per-question answers
# (gna.evaluation.items), which the findings pair: Figs. 2-3 across depths and layers, Table 1's heads
# kept against the minimal model
GRADUAL_ANSWERS = "results/pruning/{model}/gradual/depth{depth}.answers.csv"


# used by hybrid_attention.smk, row_sweep.smk and hybrid.smk
def answers_beside(results):
    """The answers file beside each of a job's result files: targets too, since the findings read them
    (and a target is what makes a job that lacks its answers run again)."""
    return [f.removesuffix(".csv") + ".answers.csv" for f in results]
