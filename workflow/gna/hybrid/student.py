"""Build the hybrid student from a Llama-family teacher and a list of heads to keep.

Weight transfer follows goombalab/mohawk:
- ``configs/Llama/1B/bases/load.yaml``: embedding, MLPs, both layer norms and the final norm
  come from the teacher (the LM head too, when untied);
- ``tools/hybrid_weights_transfer.py``: a kept head ``h`` gets rows ``h`` of q_proj, rows of its
  GQA group ``h // (H / H_kv)`` of k_proj and v_proj (``repeat_interleave`` then index) and
  columns ``h`` of o_proj, so every kept head has its own K/V;
- the SSM mixer has ``n_v_heads`` = teacher heads and ``head_dim`` = teacher head_dim, so its
  matrix lines up with the teacher's attention head by head (stage 1). ``n_qk_heads`` defaults
  to the teacher's head count, as in mohawk's Llama configs (32/32 for Llama-3.2-1B's 32/8).

SSM initialisation (``ssm_init``):
- ``"random"`` (default): Llamba's random init, as mohawk's published Llama hybrid configs do
  (``initializer: default`` for x, B, C, out; ``load.yaml`` loads no attention weights into it);
- ``"attention"``: mohawk's optional ``init_ssm_from_attention`` loader
  (``utils/init_weights.py::init_ssm_from_attention_layer``: x <- V, B <- K, C <- Q, out_proj <- O,
  GQA groups repeated; Q/K only when ``d_state == head_dim``, else B, C stay random; here C also
  gets the 1/sqrt(head_dim) of the attention scores), with the reference's ``convolution:
  identity`` (last tap 1, bias 0) and ``z: identity`` (z rows 0, z_bias 1.27846, so silu = 1)
  initialisers: the mixer starts as an un-normalised linear attention. On the tiny test models
  it starts stage 1 lower but stage 2 higher than "random" (its output is not small).
"""
from __future__ import annotations

import random

import torch
from torch import nn

from ..errors import ConfigError, HeadIndexError
from ..models import describe
from ..models.description import ModelDescription
from ..models.llamba import LlambaConfig, LlambaForCausalLM
from ..models.hybrid_student import HybridConfig, HybridForCausalLM

Z_IDENTITY_BIAS = 1.278464542761  # silu(b) = b * sigmoid(b) = 1


def _teacher_layers(teacher: nn.Module) -> nn.ModuleList:
    layers = getattr(getattr(teacher, "model", None), "layers", None)
    ok = isinstance(layers, nn.ModuleList) and all(
        hasattr(l, "self_attn") and hasattr(l, "mlp") and hasattr(l.mlp, "gate_proj") for l in layers)
    if not ok:
        raise ConfigError(f"build_student needs a Llama-family teacher (model.layers[i].self_attn / .mlp."
                          f"gate_proj); got {type(teacher).__name__}")
    return layers


def _group_heads(desc: ModelDescription, kept_heads) -> list[list[int]]:
    per_layer: list[set[int]] = [set() for _ in range(desc.n_layers)]
    for ref in kept_heads:
        mixer, h = desc.head((int(ref[0]), int(ref[1]), "attention"))
        per_layer[mixer.layer].add(h)
    return [sorted(s) for s in per_layer]


def student_config(teacher: nn.Module, kept_heads, state_size: int = 64, n_qk_heads: int | None = None,
                   chunk_size: int = 128, combine: str = "sum") -> HybridConfig:
    """The student's config for ``teacher`` keeping ``kept_heads`` ``[(layer, head), ...]``."""
    tc, layers = teacher.config, _teacher_layers(teacher)
    desc = describe(teacher)
    attn = desc.mixer(0, "attention")
    H, hd, d = attn.n_heads, attn.head_dim, tc.hidden_size
    if (H * hd) % d:
        raise ConfigError(f"teacher heads x head_dim = {H} x {hd} is not a multiple of hidden size {d}: "
                          "a discrete Mamba-2 mixer cannot have one head per attention head")
    sa, mlp = layers[0].self_attn, layers[0].mlp
    return HybridConfig(
        vocab_size=tc.vocab_size, d_model=d, n_layer=desc.n_layers,
        tie_embeddings=bool(getattr(tc, "tie_word_embeddings", False)), pad_vocab_size_multiple=1,
        norm_epsilon=tc.rms_norm_eps,
        mlp_cfg=dict(intermediate_size=mlp.gate_proj.out_features, bias=mlp.gate_proj.bias is not None,
                     act_fn=tc.hidden_act),
        ssm_cfg=dict(d_state=state_size, n_v_heads=H, n_qk_heads=n_qk_heads or H, expand=H * hd // d,
                     chunk_size=chunk_size, activation="identity", bias=False),
        attn_heads=_group_heads(desc, kept_heads), head_dim=hd,
        attention_bias=sa.q_proj.bias is not None, attention_out_bias=sa.o_proj.bias is not None,
        rope_parameters=dict(tc.rope_parameters), max_position_embeddings=tc.max_position_embeddings,
        teacher_num_heads=H, combine=combine,
        bos_token_id=tc.bos_token_id, eos_token_id=tc.eos_token_id, pad_token_id=tc.pad_token_id)


def _rows(heads: list[int], hd: int) -> torch.Tensor:
    """Row indices of ``heads`` in a (heads x head_dim)-major projection."""
    return torch.cat([torch.arange(h * hd, (h + 1) * hd) for h in heads])


@torch.no_grad()
def _copy_attention(dst, src, heads: list[int], groups: int, hd: int) -> None:
    q, kv = _rows(heads, hd), _rows([h // groups for h in heads], hd)
    dst.q_proj.weight.copy_(src.q_proj.weight[q])
    dst.k_proj.weight.copy_(src.k_proj.weight[kv])
    dst.v_proj.weight.copy_(src.v_proj.weight[kv])
    dst.o_proj.weight.copy_(src.o_proj.weight[:, q])
    for name, idx in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
        if getattr(dst, name).bias is not None:
            getattr(dst, name).bias.copy_(getattr(src, name).bias[idx])
    if dst.o_proj.bias is not None:
        dst.o_proj.bias.copy_(src.o_proj.bias)


@torch.no_grad()
def _init_ssm_from_attention(mixer, attn, groups: int, hd: int) -> None:
    """x <- V, B <- K, C <- Q (when d_state == head_dim), out <- O; identity conv and gate."""
    H, n_qk, N, d_inner = mixer.n_heads, mixer.n_qk_heads, mixer.d_state, mixer.d_inner
    W = mixer.in_proj.weight
    per_qk = H // n_qk                        # value heads per B/C group
    lead = [g * per_qk for g in range(n_qk)]  # the teacher head whose Q/K a group takes
    W[:d_inner] = attn.v_proj.weight[_rows([h // groups for h in range(H)], hd)]
    if N == hd:
        W[d_inner:d_inner + n_qk * N] = attn.k_proj.weight[_rows([h // groups for h in lead], hd)]
        W[d_inner + n_qk * N:d_inner + 2 * n_qk * N] = attn.q_proj.weight[_rows(lead, hd)] * hd ** -0.5
    z = slice(d_inner + 2 * n_qk * N, 2 * d_inner + 2 * n_qk * N)
    W[z] = 0
    if mixer.z_bias is not None:
        mixer.z_bias.fill_(Z_IDENTITY_BIAS)
    mixer.conv1d.weight.zero_()
    mixer.conv1d.weight[..., -1] = 1
    if mixer.conv1d.bias is not None:
        mixer.conv1d.bias.zero_()
    mixer.out_proj.weight.copy_(attn.o_proj.weight)


@torch.no_grad()
def build_student(teacher: nn.Module, kept_heads, state_size: int = 64, *, n_qk_heads: int | None = None,
                  chunk_size: int = 128, combine: str = "sum", ssm_init: str = "random",
                  seed: int = 0, adapter_init: str = "identity") -> HybridForCausalLM:
    """A hybrid student of ``teacher``: every layer a discrete Mamba-2 mixer, plus the kept heads.

    ``kept_heads``: teacher attention heads ``[(layer, head), ...]`` (e.g. the top k of the KV
    ranking, or :func:`random_heads`). ``state_size``: the SSM's d_state. Same seed, same student.
    ``adapter_init`` (``combine="adapter"``): the adapter's Linear starts as the identity with zero
    bias (``"identity"``), or with ``nn.Linear``'s own random init (``"default"``: goombalab/mohawk's
    ``components/blocks/DoubleBlock.py::Adapter``, which nothing re-initialises).
    """
    if ssm_init not in ("attention", "random"):
        raise ConfigError(f"ssm_init={ssm_init!r} is not 'attention' or 'random'")
    if adapter_init not in ("identity", "default"):
        raise ConfigError(f"adapter_init={adapter_init!r} is not 'identity' or 'default'")
    config = student_config(teacher, kept_heads, state_size, n_qk_heads, chunk_size, combine)
    config._attn_implementation = getattr(teacher.config, "_attn_implementation", None) or "sdpa"
    torch.manual_seed(seed)
    ref = next(teacher.parameters())
    student = HybridForCausalLM(config).to(device=ref.device, dtype=ref.dtype).eval()
    t_layers = _teacher_layers(teacher)
    attn = describe(teacher).mixer(0, "attention")
    groups, hd = attn.kv_group, attn.head_dim
    student.backbone.embedding.weight.copy_(teacher.get_input_embeddings().weight)
    student.backbone.final_layernorm.weight.copy_(teacher.model.norm.weight)
    if not config.tie_embeddings:
        student.lm_head.weight.copy_(teacher.get_output_embeddings().weight)
        if student.lm_head.bias is not None:
            student.lm_head.bias.copy_(teacher.get_output_embeddings().bias)
    for layer, src, heads in zip(student.backbone.layers, t_layers, config.attn_heads):
        layer.input_layernorm.weight.copy_(src.input_layernorm.weight)
        layer.post_attention_layernorm.weight.copy_(src.post_attention_layernorm.weight)
        layer.mlp.load_state_dict(src.mlp.state_dict())
        if heads:
            _copy_attention(layer.attn, src.self_attn, heads, groups, hd)
        if ssm_init == "attention":
            _init_ssm_from_attention(layer.mixer, src.self_attn, groups, hd)
    for layer in student.backbone.layers:
        if layer.adapter is None:
            continue
        if adapter_init == "default":
            layer.adapter.out_proj.reset_parameters()  # kaiming-uniform weight, uniform bias
        else:  # here, not in _init_weights: transformers' init.copy_ skips a weight its Linear init flagged done
            layer.adapter.out_proj.weight.copy_(torch.eye(config.d_model))
            layer.adapter.out_proj.bias.zero_()
    return student


def to_llamba(student: HybridForCausalLM) -> LlambaForCausalLM:
    """The same model as a plain :class:`LlambaForCausalLM`; only for a student without kept heads."""
    cfg = student.config
    if cfg.kept_heads:
        raise ConfigError(f"to_llamba: the student keeps {len(cfg.kept_heads)} attention heads; a Llamba has none")
    fields = {k: getattr(cfg, k) for k in LlambaConfig.__annotations__ if k != "model_type"}
    llamba = LlambaForCausalLM(LlambaConfig(**fields)).to(student.dtype)
    llamba.load_state_dict(student.state_dict(), strict=True)
    return llamba.train(student.training)


def random_heads(teacher_desc: ModelDescription, k: int, seed: int) -> list[tuple[int, int]]:
    """``k`` attention heads drawn uniformly without replacement (the random-heads ablation)."""
    heads = [(m.layer, h) for m in teacher_desc.mixers if m.kind == "attention" for h in range(m.n_heads)]
    if not 0 <= k <= len(heads):
        raise HeadIndexError(f"cannot draw {k} heads: the model has {len(heads)} attention heads")
    return sorted(random.Random(seed).sample(heads, k))


def heads_from_ranking(ranking, k: int) -> list[tuple[int, int]]:
    """The top ``k`` attention heads of a scan ranking (rows with layer, head, kind, rank)."""
    rows = ranking.to_dict("records") if hasattr(ranking, "to_dict") else list(ranking)
    rows = sorted((r for r in rows if r.get("kind", "attention") == "attention"), key=lambda r: r["rank"])
    if k > len(rows):
        raise HeadIndexError(f"the ranking has {len(rows)} attention heads; asked for the top {k}")
    return [(int(r["layer"]), int(r["head"])) for r in rows[:k]]
