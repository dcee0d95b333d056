"""Causal-LM families of transformers that no adapter describes, each with the reason.

The G&A analyses need a decoder-only language model whose token mixers are softmax attention,
Mamba-1 or Mamba-2 (alone, interleaved or in parallel), each described head for head by an adapter
(gna/models/adapters/, one file per family). Everything else in transformers' causal-LM table is
refused by name, with its reason, here; tests/test_family_walk.py walks the table and fails on a
family that is neither described nor listed. Importing this needs no torch.
"""
from __future__ import annotations

import re

_ENCODER = ("an encoder (BERT-style) or encoder-decoder architecture run as a decoder, not a decoder-only "
            "language model")
_MULTIMODAL = "a multimodal model whose causal-LM class wraps a vision or audio encoder: load its text decoder"
_RECURRENT = "its token mixer is a recurrence that is neither Mamba-1 nor Mamba-2"


def _no_adapter_yet(where: str) -> str:
    return (f"an attention decoder whose heads live in {where}, a layout no adapter describes yet "
            "(adding it is one file in gna/models/adapters/)")


REFUSED: dict[str, str] = {
    **{t: _ENCODER for t in (
        "bart", "bert", "bert-generation", "big_bird", "bigbird_pegasus", "blenderbot", "blenderbot-small",
        "camembert", "cpmant", "data2vec-text", "electra", "ernie", "marian", "mbart", "megatron-bert", "mvp",
        "pegasus", "plbart", "prophetnet", "reformer", "rembert", "roberta", "roberta-prelayernorm", "roc_bert",
        "roformer", "trocr", "whisper", "xlm", "xlm-roberta", "xlm-roberta-xl", "xlnet", "xmod")},
    **{t: _MULTIMODAL for t in (
        "fuyu", "gemma3", "gemma3n", "gemma4", "gemma4_unified", "git", "got_ocr2", "moss_transcribe_diarize",
        "musicgen", "musicgen_melody")},
    "blt": "Byte Latent Transformer: byte-level local encoder and decoder with cross-attention around a global "
           "transformer, not one decoder stack",
    **{t: "Llama-3.2-Vision's text model: cross-attention layers (to image features) between its self-attention "
          "layers" for t in ("mllama", "mllama_text_model")},
    "moshi": "Moshi's text decoder projects through MoshiLinear (per-codebook weights, no in_features); no adapter "
             "describes it yet",
    "bloom": _no_adapter_yet("transformer.h[i].self_attention.dense (ALiBi)"),
    "codegen": _no_adapter_yet("transformer.h[i].attn.out_proj (fused, interleaved QKV)"),
    "ctrl": _no_adapter_yet("transformer.h[i].multi_head_attention.dense"),
    "falcon": _no_adapter_yet("transformer.h[i].self_attention.dense (Falcon-7B/40B; Falcon-H1 and Falcon-Mamba "
                              "have adapters)"),
    "gpt_bigcode": _no_adapter_yet("transformer.h[i].attn.c_proj (multi-query)"),
    "gpt_neo": _no_adapter_yet("transformer.h[i].attn.attention.out_proj (local and global layers)"),
    "gpt_neox": _no_adapter_yet("gpt_neox.layers[i].attention.dense (Pythia, GPT-NeoX)"),
    "gpt_neox_japanese": _no_adapter_yet("gpt_neox_japanese.layers[i].attention.dense"),
    "gptj": _no_adapter_yet("transformer.h[i].attn.out_proj (attention and MLP in parallel)"),
    "openai-gpt": _no_adapter_yet("transformer.h[i].attn.c_proj (Conv1D, post-norm)"),
    "mpt": _no_adapter_yet("transformer.blocks[i].attn.out_proj (ALiBi)"),
    "opt": _no_adapter_yet("model.decoder.layers[i].self_attn.out_proj"),
    "xglm": _no_adapter_yet("model.layers[i].self_attn.out_proj"),
    "biogpt": _no_adapter_yet("biogpt.layers[i].self_attn.out_proj"),
    "persimmon": _no_adapter_yet("model.layers[i].self_attn.dense"),
    "modernbert-decoder": _no_adapter_yet("model.layers[i].attn.Wo"),
    "jetmoe": "mixture-of-attention-heads: each token's heads are picked by a router (JetMoeAttention's experts), "
              "so a head is not a fixed slice of one projection",
    "hrm_text": "Hierarchical Reasoning Model: two recurrent transformer modules iterated in a loop, not one "
                "decoder stack",
    "deepseek_v4": "DeepSeek-V4: hyper-connections (several residual streams mixed per layer) around its attention; "
                   "its layers do not read and write one hidden state",
    "longcat_flash": "LongCat-Flash: two attention blocks per layer (self_attn is a ModuleList) with shortcut-"
                     "connected MoE; no adapter describes that layout yet",
    "inkling_text": "short convolutions beside attention and MLP in every layer (attn_sconv, mlp_sconv): token "
                    "mixers that are neither attention nor Mamba",
    "inkling2_text": "attention-residual blocks and short convolutions beside attention: token mixers that are "
                     "neither attention nor Mamba",
    "inkling2_loop_text": "Inkling-2 with looped layers: attention-residual blocks, short convolutions beside "
                          "attention, and layers run several times: token mixers that are neither attention nor "
                          "Mamba",
    "dory": "Dory: a recurrent-depth model (a section of layers run in several loops) whose layers interpolate the "
            "hidden state towards an L2-normalised update (nGPT) instead of adding to it: a head's output is not an "
            "additive term of one pass's residual stream",
    "lara_mini": _RECURRENT + " (Gated DeltaNet layers beside attention)",
    "qwen3_next": _RECURRENT + " (Gated DeltaNet layers beside attention)",
    "qwen3_5": _RECURRENT + " (Gated DeltaNet layers beside attention)",
    "qwen3_5_text": _RECURRENT + " (Gated DeltaNet layers beside attention)",
    "qwen3_5_moe": _RECURRENT + " (Gated DeltaNet layers beside attention)",
    "qwen3_5_moe_text": _RECURRENT + " (Gated DeltaNet layers beside attention)",
    "olmo_hybrid": _RECURRENT + " (Gated DeltaNet layers beside attention)",
    "kimi_linear": _RECURRENT + " (Kimi delta attention layers beside MLA attention)",
    "bailing_hybrid": _RECURRENT + " (delta-attention layers beside attention)",
    "minimax": _RECURRENT + " (lightning attention, a linear attention, beside softmax attention)",
    "lfm2": _RECURRENT + " (LFM2's gated short convolutions beside attention)",
    "lfm2_moe": _RECURRENT + " (LFM2's gated short convolutions beside attention)",
    "lfm3": _RECURRENT + " (LFM3's short convolutions beside attention)",
    "recurrent_gemma": _RECURRENT + " (Griffin's RG-LRU)",
    "rwkv": _RECURRENT + " (RWKV time mixing)",
    "xlstm": _RECURRENT + " (mLSTM)",
    "zamba": "Zamba-7B-v1: a multi-head Mamba-1 variant (n_mamba_heads) and a shared attention block entered "
             "through a per-layer linear; no adapter describes it yet (Zamba2 has one)",
}
"""transformers model type -> why no adapter describes it."""

NOT_IN_LOWEST_SUPPORTED = frozenset({"dory", "inkling2_loop_text", "inkling2_text", "lara_mini", "lfm3"})
"""Refused model types that the lowest supported transformers (pyproject.toml's bound) does not have yet."""


LINEAR_ATTENTION = re.compile(r"delta|linear|lightning|retention|gated_?la", re.IGNORECASE)
"""Class names of token mixers that sit at ``self_attn`` but are recurrences (Kimi-Linear's and
Bailing-hybrid's delta attention, MiniMax's lightning attention): no attention pattern to read, no
softmax heads to describe. The model types above are refused by name before loading; a loaded
model of a type no entry names is refused by this, by the attention adapter."""


def refusal_of(model_type: str | None) -> str | None:
    return REFUSED.get(model_type or "")
