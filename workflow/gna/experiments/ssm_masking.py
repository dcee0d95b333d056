"""Masking the SSM's G&A heads on MMLU-format prompts (slides, section 5; PROTOCOL 6).

Per prompt, the chosen heads' token-mixing matrices are multiplied by a mask built from the
prompt's answer-choice segments (:func:`gna.patterns.ga_masks.segment_mmlu_prompt`):

- ``none``: all ones (the model itself, through the same masked code path);
- ``full``: the chosen heads are zeroed (they mix nothing);
- ``pattern``: the Gather head keeps only the entries inside each choice line, the Aggregate
  head only the final position's entries onto each choice's closing newline.

A prompt without answer choices (a knowledge cloze) has no pattern: ``pattern`` masks the
heads fully there, as ``full`` does (so knowledge tells whether the heads carry knowledge).
Scoring is :mod:`gna.probes.scoring` (exactly lm-eval's ``acc``) with one forward per batch.

The computation layer of the experiment ``ssm_masking``. One concept at three layers: this module
runs the masking, :mod:`gna.report.ssm_masking` tabulates and draws it, :mod:`gna.report.findings.ssm_masking`
judges it.
"""
from __future__ import annotations

import logging

import pandas as pd
import torch

from ..errors import ProbeError
from ..evaluation.items import scored_rows
from ..patterns.ga_masks import ga_head_masks, prompt_offsets, segment_mmlu_prompt, stack_masks
from ..interventions.masked_mixing import masked_mixers
from ..models import describe
from ..probes.scoring import encode, masked_choice_logprobs

log = logging.getLogger(__name__)

SSM_KINDS = ("mamba2", "discrete-mamba2")  # the SSM mixers masked_mixers can mask
MODES = ("none", "full", "pattern")


def ssm_ga_heads(ga: pd.DataFrame, kinds=SSM_KINDS) -> tuple[dict[str, list[list]], str]:
    """The top Gather and top Aggregate SSM heads of a scan's ``ga.csv``.

    Returns ``({"gather": [[layer, head, kind]], "aggregate": [[...]]}, how)``. ``how`` is
    ``"classified"`` when the scan classified both roles among its top SSM heads; otherwise a
    missing role falls back to the top-ranked SSM head of the earliest layer (Gather) or of the
    latest layer (Aggregate) among the top ones, and ``how`` says which role fell back.
    """
    ssm = ga[ga.kind.isin(kinds)].sort_values("rank")
    if ssm.empty:
        raise ProbeError(f"no maskable SSM head ({', '.join(kinds)}) among the scan's top heads "
                         f"(kinds there: {sorted(set(ga.kind))})")

    def row(r):
        return [int(r.layer), int(r["head"]), str(r.kind)]

    heads, fell_back = {}, []
    for role in ("gather", "aggregate"):
        hits = ssm[ssm.role == role] if "role" in ssm else ssm.iloc[:0]
        if not hits.empty:
            heads[role] = row(hits.iloc[0])
    for role, layer in (("gather", ssm.layer.min()), ("aggregate", ssm.layer.max())):
        if role in heads:
            continue
        # the earliest (Gather) or latest (Aggregate) layer's top head, else the next free one
        candidates = [row(r) for _, r in ssm[ssm.layer == layer].iterrows()] + [row(r) for _, r in ssm.iterrows()]
        free = [h for h in candidates if h not in heads.values()]
        if not free:
            raise ProbeError(f"only one SSM head among the scan's top heads: cannot pick a {role} head besides "
                             f"{heads}")
        heads[role] = free[0]
        fell_back.append(role)
    how = "classified" if not fell_back else "fallback:" + "+".join(fell_back)
    return {"gather": [heads["gather"]], "aggregate": [heads["aggregate"]]}, how


def named_ssm_heads(model, named: dict) -> dict[str, list[list]]:
    """The config's named heads ``{role: [[layer, head(, kind)], ...]}`` with each kind resolved
    from the model (a layer with one SSM mixer needs none); unknown layers/heads are refused."""
    desc = describe(model)
    out = {}
    for role in ("gather", "aggregate"):
        out[role] = []
        for ref in named[role]:
            mixer, head = desc.head(tuple(ref) if len(ref) == 3 else (int(ref[0]), int(ref[1])))
            if mixer.kind not in SSM_KINDS:
                raise ProbeError(f"named {role} head {list(ref)} is a {mixer.kind} head, not an SSM head "
                                 f"({', '.join(SSM_KINDS)})")
            out[role].append([mixer.layer, head, mixer.kind])
    return out


def head_label(heads: dict[str, list[list]]) -> str:
    return " ".join(f"{role}=" + ",".join(f"L{h[0]}H{h[1]}" for h in hs) for role, hs in heads.items())


def _roles_by_mixer(heads: dict[str, list[list]]) -> dict[tuple[int, str], dict[int, str]]:
    out: dict[tuple[int, str], dict[int, str]] = {}
    for role, hs in heads.items():
        for layer, head, kind in hs:
            out.setdefault((int(layer), kind), {})[int(head)] = role
    return out


def _segments(examples, tokenizer) -> list:
    """Each prompt's choice segments (None where it has none), on the very tokens ``encode`` makes."""
    out = []
    for ex in examples:
        try:
            out.append(segment_mmlu_prompt(*prompt_offsets(ex, tokenizer)))
        except ProbeError:
            out.append(None)
    return out


@torch.no_grad()
def masked_accuracy(model, tokenizer, examples: list[dict], heads: dict[str, list], mode: str,
                    batch_size: int = 16, name: str = "task") -> dict:
    """Accuracy (lm-eval's ``acc``) on multiple-choice ``examples`` ``{prompt, choices, answer}``
    with ``heads`` (role -> [[layer, head, kind], ...]) masked in ``mode``.

    Returns ``{"acc", "n", "with_pattern", "logprobs"}``: ``with_pattern`` counts prompts that had
    choice segments (the others are masked fully under ``pattern``); ``logprobs`` (N, C).
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {MODES}")
    enc = encode(examples, tokenizer, name=name)
    segs = _segments(examples, tokenizer)
    desc = describe(model)
    roles = _roles_by_mixer(heads)
    n_heads = {key: desc.mixer(*key).n_heads for key in roles}
    device = next(model.parameters()).device
    with masked_mixers(model, {key: torch.ones(1, n_heads[key], 1, 1) for key in roles}) as handle:
        # placeholder masks; every batch replaces them with its own (B, H, T, T)
        def set_masks(batch, rows: list[int]) -> None:
            T = batch.input_ids.shape[1]
            lengths = batch.attention_mask.sum(1).tolist()
            handle.update({key: stack_masks([ga_head_masks(segs[e], int(t), n_heads[key], r, mode)
                                             for e, t in zip(rows, lengths)], T).to(device)
                           for key, r in roles.items()})

        logprobs = masked_choice_logprobs(model, enc, batch_size, set_masks)
    correct = logprobs.argmax(-1) == enc.answers
    return {"acc": correct.double().mean().item(), "n": len(enc), "with_pattern": sum(s is not None for s in segs),
            "logprobs": logprobs}


def masking_rows(model, tokenizer, tasks: dict[str, list[dict]], heads: dict[str, list], mode: str,
                 batch_size: int, fields: dict, answers: list | None = None) -> pd.DataFrame:
    """Tidy rows (``fields`` + task, metric=acc, value, n, heads) of one masking condition. ``answers``:
    a list to which each task's per-question answers are appended (:func:`gna.evaluation.items.scored_rows`,
    ``fields`` and the condition in front), so that the findings can pair two modes question by question."""
    rows = []
    for task, examples in tasks.items():
        r = masked_accuracy(model, tokenizer, examples, heads, mode, batch_size, name=task)
        if answers is not None:
            answers.append(scored_rows(task, examples, r["logprobs"]).assign(**fields, condition=mode))
        log.info("%s %s: acc %.3f on %d (%d with choice segments)", mode, task, r["acc"], r["n"], r["with_pattern"])
        rows.append(dict(fields, condition=mode, task=task, metric="acc", value=r["acc"], n=r["n"],
                         with_pattern=r["with_pattern"], heads=head_label(heads)))
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------- task export

def _leaf_tasks(task_dict) -> dict:
    """lm-eval's (possibly nested, group -> tasks) task dict -> {task name: Task}."""
    out = {}
    for key, value in task_dict.items():
        if isinstance(value, dict):
            out.update(_leaf_tasks(value))
        else:
            out[getattr(key, "group_name", None) or str(key)] = value
    return out


def export_mc_examples(task: str, suite, limit: int | None = None) -> list[dict]:
    """The multiple-choice rows ``{id, task, prompt, choices, answer}`` lm-eval would score for
    ``task`` (a task or a group, e.g. ``mmlu``: each subtask's first ``limit`` documents), read off
    the requests lm-eval itself builds: ``prompt`` is the context (description and few-shot
    included), ``choices`` the continuations (target delimiter included), ``answer`` the gold index.

    ``suite``: a :class:`gna.evaluation.lm_eval_bridge.TaskSuite` (micro tasks from JSONL, or lm-eval's registry).
    Tasks whose choices have different contexts (Winogrande-style) are refused: their choices
    share no prompt to segment and mask.
    """
    from lm_eval.tasks import get_task_dict

    from ..errors import ConfigError

    resolved, manager = suite.resolve([task])
    rows = []
    for name, t in sorted(_leaf_tasks(get_task_dict(resolved, manager)).items()):
        if t.OUTPUT_TYPE != "multiple_choice":
            raise ConfigError(f"task {name!r} is {t.OUTPUT_TYPE!r}, not multiple_choice: it cannot be exported "
                              "for the masking experiment")
        t.build_all_requests(limit=limit)
        by_doc: dict[int, list] = {}
        for inst in t.instances:
            by_doc.setdefault(inst.doc_id, []).append(inst)
        for doc_id, insts in sorted(by_doc.items()):
            insts.sort(key=lambda i: i.idx)
            contexts = {i.arguments[0] for i in insts}
            if len(contexts) != 1:
                raise ConfigError(f"task {name!r}: the choices of document {doc_id} have {len(contexts)} different "
                                  "contexts (Winogrande-style); the masking experiment needs one shared prompt")
            doc = insts[0].doc
            gold, options = t.doc_to_target(doc), t.doc_to_choice(doc)
            if isinstance(gold, list):
                gold = gold[0]
            if isinstance(gold, str):
                gold = options.index(gold) if gold in options else int(gold)
            rows.append({"id": f"{name}-{doc_id:05d}", "task": name, "prompt": insts[0].arguments[0],
                         "choices": [i.arguments[1] for i in insts], "answer": int(gold)})
    if not rows:
        raise ConfigError(f"task {task!r} produced no documents")
    return rows


def masking_condition(mode: str, ga_path: str, task_paths: list[str], *, spec: dict, tasks: list[str],
                      batch_size: int, named: dict | None, fields: dict,
                      log: logging.Logger) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """One masking ``mode`` of rule ssm_masking: the SSM's G&A heads (``named``, else the scan's top ones
    in the ranking's ``ga_path``) masked on the exported multiple-choice ``tasks`` (one file each, ``task_paths``), with the
    job's provenance on every row."""
    from ..jobs.script_job import config_hash, provenance
    from ..models import load_model
    from ..probes.kv import read_jsonl

    model, tok = load_model(spec)
    if named:
        heads, how = named_ssm_heads(model, named), "named"
    else:
        heads, how = ssm_ga_heads(pd.read_csv(ga_path))
    if how.startswith("fallback"):
        log.warning("the scan classified no %s SSM head among its top ones: using the top-ranked SSM head of the "
                    "earliest (Gather) / latest (Aggregate) layer among them", how.split(":")[1])
    log.info("masking %s (%s)", heads, how)
    examples = {t: read_jsonl(path) for t, path in zip(tasks, task_paths)}
    answers = []
    rows = masking_rows(model, tok, examples, heads, mode, batch_size, fields, answers=answers)
    rows["selection"] = how
    rows["config_hash"] = config_hash([spec, tasks, heads, mode, {t: len(v) for t, v in examples.items()}])
    for k, v in provenance().items():
        rows[k] = v
    return rows, answers
