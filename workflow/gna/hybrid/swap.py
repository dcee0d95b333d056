"""The layer swap of Fig. 7: run a teacher's decoder layer inside an (aligned) SSM student.

``align_student`` makes the micro counterpart of Llamba-8B-unaligned: a Llamba distilled from
the transformer by MOHAWK stages 1-2 only (matrices, then hidden states; no end-to-end stage),
so its layer i is a drop-in for the teacher's layer i. Then, for each i::

    with swap_teacher_layer(student, teacher, i):
        evaluate(student)
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..interventions import swap_layer
from ..models import adapter_for
from ..models.cache_names import causal_mask_without_cache
from ..models.llamba import LlambaForCausalLM
from .distillation import distill
from .student import build_student, to_llamba


class AttentionLayerShim(nn.Module):
    """A Llama-family decoder layer callable as a Llamba layer: ``shim(h, attention_mask=None) -> h``.

    ``h``: (batch, T, d_model); ``attention_mask``: (batch, T) with 1 for real tokens, or None
    (a prepared 4D mask, as the teacher's own model passes, is used as it is). RoPE positions
    are 0..T-1 and the causal mask is built by transformers' ``create_causal_mask`` from the
    layer's own config, i.e. exactly as the teacher's model builds them, so the layer computes
    what it computes inside the teacher.
    """

    def __init__(self, layer: nn.Module, rotary_emb: nn.Module, config=None):
        super().__init__()
        self.layer, self.rotary_emb = layer, rotary_emb
        self.config = config if config is not None else layer.self_attn.config
        self.layer_idx = getattr(layer.self_attn, "layer_idx", None)

    def forward(self, hidden_states, attention_mask=None, **kwargs):
        position_ids = torch.arange(hidden_states.shape[1], device=hidden_states.device)[None]
        mask = causal_mask_without_cache(self.config, hidden_states, attention_mask, position_ids)
        out = self.layer(hidden_states, attention_mask=mask, position_ids=position_ids,
                         position_embeddings=self.rotary_emb(hidden_states, position_ids), use_cache=False)
        return out[0] if isinstance(out, tuple) else out


def swap_teacher_layer(student: nn.Module, teacher: nn.Module, layer: int):
    """Context: the teacher's whole decoder layer ``layer`` runs in place of the student's."""
    shim = AttentionLayerShim(adapter_for(teacher).layers()[layer], teacher.model.rotary_emb)
    return swap_layer(student, layer, shim)


def align_student(teacher: nn.Module, data, out_dir, steps: tuple[int, int], lr: tuple[float, float] = (1e-3, 1e-3),
                  state_size: int = 64, *, max_tokens: tuple | None = None, chunk_size: int = 128,
                  ssm_init: str = "random", seed: int = 0, save_every: int = 50,
                  resume: bool = True) -> LlambaForCausalLM:
    """MOHAWK stages 1 and 2 only: a Llamba aligned layer by layer to ``teacher``.

    ``data`` as for :func:`gna.hybrid.distillation.distill` (used by both stages; a callable or a
    re-iterable). Checkpoints go to ``out_dir/stage1`` and ``out_dir/stage2``; a rerun resumes.
    """
    student = build_student(teacher, [], state_size, chunk_size=chunk_size, ssm_init=ssm_init, seed=seed)
    budgets = max_tokens or (None, None)
    for stage in (1, 2):
        distill(teacher, student, stage, data, steps[stage - 1], lr[stage - 1], Path(out_dir) / f"stage{stage}",
                resume, max_tokens=budgets[stage - 1], seed=seed, save_every=save_every)
    return to_llamba(student).eval()


def write_aligned_student(out_dir: str, teacher_input: str, tokens_dir: str | None, *, spec: dict, ckpt: str,
                          steps: list | None, tokens: list | None, lr: list[float], state_size: int, chunk_size: int,
                          data: dict, seed: int, micro_data: str | None, log) -> None:
    """Rule align_student: :func:`align_student` on the teacher ``spec`` (``teacher_input`` its files, stamped
    into the resumable checkpoint's key), its stream from ``data`` (``tokens_dir``: the web tokens, None on
    micro data), written with the teacher's tokenizer and its budgets (``distill.json``) to ``out_dir`` at
    once; the checkpoint removed after."""
    import shutil

    from ..io import atomic_path, write_json
    from ..models import load_model
    from .study.data import checkpoint_dir, input_stamp, make_stream, seq_len_of, stage_steps

    teacher, tok = load_model(spec)
    stream = make_stream(data, tok, micro_data, seed, purpose="align", shards=tokens_dir)
    steps_cfg, tokens = list(steps or [None, None]), list(tokens or [None, None])
    steps = tuple(stage_steps(steps_cfg[s], tokens[s], int(data.get("batch_size", 16)), seq_len_of(data))
                  for s in (0, 1))
    ckpt = checkpoint_dir(ckpt, {"teacher": spec, "lr": list(lr), "state_size": state_size, "chunk_size": chunk_size,
                                 "data": data, "seed": seed, "inputs": input_stamp(teacher_input)})
    log.info("aligning a Llamba to %s: steps %s, lr %s, state %d", spec["path"], steps, lr, state_size)
    llamba = align_student(teacher, stream, ckpt, steps=steps, lr=tuple(lr), state_size=state_size,
                           max_tokens=tuple(tokens), chunk_size=chunk_size, seed=seed)
    with atomic_path(out_dir, directory=True) as tmp:
        llamba.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        write_json({"steps": steps, "tokens": tokens, "lr": list(lr), "state_size": state_size}, tmp / "distill.json")
    shutil.rmtree(ckpt, ignore_errors=True)
