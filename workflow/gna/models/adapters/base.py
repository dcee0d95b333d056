"""The adapter interface: one subclass per architecture family, the one place a family is described.

An adapter says, for its family: which models it is (``model_types``, or a structural match),
how to read its structure off a ``config.json`` alone (:meth:`Adapter.structure`: the study's
config is checked with it when the workflow is parsed, before anything loads), how to find its
decoder layers and mixers in a loaded model (:meth:`Adapter.layers`, :meth:`Adapter.mixers`), and
how to build a tiny random-init model of it for tests and the micro study (``builds``,
:meth:`Adapter.tiny_config`). Importing an adapter needs no torch: only the methods that take a
loaded model touch it.
"""
from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ..description import Mixer, ModelDescription

if TYPE_CHECKING:
    from torch import nn


class Adapter:
    family: str = ""
    examples: str = ""
    """Human-readable examples of models in the family, for error messages."""
    model_types: tuple[str, ...] = ()
    layer_returns_tuple: bool | int = False
    """True where the model's loop reads ``layer(...)[0]`` (Falcon-H1): a skipped layer must then
    return ``(hidden,)``, not the bare tensor (see :class:`gna.interventions.SkipLayer`); a number
    where the loop unpacks that many items (Bamba: 2, hidden and attention weights)."""
    fallback: bool = False
    """Matched by structure after every other adapter had its turn (the generic attention decoder)."""
    builds: dict[str, str] = {}
    """Models of the family gna can build from scratch (``gna.models.tiny``, the micro study): name ->
    the name of its transformers config class (a name, so that importing the adapter needs no
    transformers)."""

    def __init__(self, model: nn.Module, **options):
        self.check_options(options)
        self.model = model

    # ---------------------------------------------------------------- from a config.json, no torch

    @classmethod
    def matches_config(cls, cfg: dict) -> bool:
        """Is ``cfg`` (a config.json as a dict) of this family?"""
        return cfg.get("model_type") in cls.model_types

    @classmethod
    def check_options(cls, options: dict) -> None:
        if options:
            raise ConfigError(f"adapter_options: the {cls.family} adapter takes no options; got {sorted(options)}")

    @classmethod
    def structure(cls, cfg: dict, **options) -> tuple[int, int]:
        """``(n_layers, total heads)`` from a config.json alone (no torch, no weights): the numbers
        :meth:`describe` gives once the model is loaded (tests/test_families.py checks that both agree
        for every family). ``options`` are the adapter's; a bad one raises a ConfigError whose message
        begins with its key in the model entry (``adapter_options.channel_group = ...``).

        By default the sum of :meth:`layer_heads`: a family states its heads once, there; one whose
        layers are not known before loading overrides this instead."""
        per_layer = cls.layer_heads(cfg, **options)
        if per_layer is None:
            raise NotImplementedError(f"{cls.family}: neither layer_heads nor structure reads a config.json")
        return structure_from(per_layer)

    @classmethod
    def layer_heads(cls, cfg: dict, **options) -> list[list[tuple[str, int]]] | None:
        """Per layer, its mixers as ``(kind, n_heads)``, from a config.json alone: what the study's
        named heads are checked against when the workflow is parsed (None: not known before loading,
        only the layer range is checked). The sum of heads is :meth:`structure`'s total."""
        return None

    @classmethod
    def config_description(cls, cfg: dict, **options) -> ModelDescription | None:
        """A :class:`ModelDescription` without modules, from :meth:`layer_heads`: its ``head(ref)``
        resolves and range-checks a head as the loaded model's does."""
        per_layer = cls.layer_heads(cfg, **options)
        if per_layer is None:
            return None
        mixers = [Mixer(layer=i, kind=kind, n_heads=n, head_dim=0, out_proj=None)
                  for i, layer in enumerate(per_layer) for kind, n in layer]
        return ModelDescription(cls.family, len(per_layer), mixers)

    # ---------------------------------------------------------------- tiny models of the family

    @classmethod
    def config_class(cls, name: str):
        return getattr(importlib.import_module("transformers"), cls.builds[name])

    @classmethod
    def tiny_kwargs(cls, name: str, hidden: int, layers: int, heads: int) -> dict[str, Any]:
        """The config fields of a tiny ``name`` beyond the common ones (vocabulary, width, depth, ids)."""
        raise NotImplementedError

    @classmethod
    def tiny_config(cls, name: str, vocab_size: int = 128, hidden: int = 32, layers: int = 2, heads: int = 4,
                    **overrides):
        """A small config of ``name`` (one of :attr:`builds`); ``overrides`` go to the config class verbatim."""
        common = dict(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
        kw = cls.tiny_kwargs(name, hidden=hidden, layers=layers, heads=heads)
        return cls.config_class(name)(**{**common, **kw, **overrides})

    # ---------------------------------------------------------------- a loaded model

    @classmethod
    def matches(cls, model: nn.Module) -> bool:
        return getattr(model.config, "model_type", None) in cls.model_types

    @classmethod
    def refusal(cls, model: nn.Module) -> str | None:
        """Why this adapter must not describe ``model`` although it looks like its family, or None.

        Used in the "unsupported architecture" error, and to refuse a forced ``family`` that does
        not fit (a model the adapters do not fully understand is refused, never half-described).
        """
        return None

    def layers(self) -> nn.ModuleList:
        """The decoder layers, in order; interventions swap entries of this list."""
        raise NotImplementedError

    def mixers(self) -> list[Mixer]:
        raise NotImplementedError

    def describe(self) -> ModelDescription:
        # Computed once: while an intervention has swapped layers out, the structure must
        # still be read off the original modules.
        if getattr(self, "_description", None) is None:
            self._description = ModelDescription(self.family, len(self.layers()), self.mixers())
        return self._description


def structure_from(per_layer: list[list[tuple[str, int]]]) -> tuple[int, int]:
    """``(n_layers, total heads)`` of :meth:`Adapter.layer_heads`' per-layer mixers."""
    return len(per_layer), sum(n for layer in per_layer for _, n in layer)


def interleaved_mixers(layers, cfg, name: str) -> list[Mixer]:
    """Mixers of a stack whose every layer has exactly one of ``self_attn`` (``o_proj`` input: the
    attention heads) and ``mamba`` (a transformers Mamba-2 mixer, ``out_proj`` input after the gated
    norm: its heads), the other None (Granite-4.0-H, Bamba); anything else is refused."""
    from ...errors import UnknownArchitectureError

    out = []
    for i, layer in enumerate(layers):
        attn, mamba = getattr(layer, "self_attn", None), getattr(layer, "mamba", None)
        others = other_token_mixers(layer, known=("self_attn", "mamba"))
        if (attn is None) == (mamba is None) or others:
            raise UnknownArchitectureError(
                f"{name} layer {i} is neither one self_attn nor one mamba mixer"
                + (f"; other token mixers: {', '.join(others)}" if others else ""))
        path = f"model.layers.{i}"
        if attn is not None:
            out.append(Mixer(layer=i, kind="attention", n_heads=cfg.num_attention_heads, head_dim=attn.head_dim,
                             kv_heads=cfg.num_key_value_heads, out_proj=attn.o_proj,
                             out_proj_path=f"{path}.self_attn.o_proj", module=attn))
        else:
            out.append(Mixer(layer=i, kind="mamba2", n_heads=mamba.num_heads, head_dim=mamba.head_dim,
                             out_proj=mamba.out_proj, out_proj_path=f"{path}.mamba.out_proj", module=mamba))
    return out


def n_layers_of(cfg: dict) -> int | None:
    """A config.json's depth, under the names transformers and the Mamba checkpoints use."""
    return cfg.get("num_hidden_layers") or cfg.get("n_layer")


# Class-name fragments of token-mixing modules (attention, SSMs, recurrences, long convolutions).
# MLPs, MoE blocks, norms, dropouts and activations match none of them.
# "ssm" only where no letter precedes it: GptOssMLP and SeedOssMLP are feed-forward blocks.
_MIXER_NAME = re.compile(r"attention|attn|mamba|mixer|(?<![a-z])ssm|recurren|rwkv|retention|deltanet|hyena|lightning",
                         re.IGNORECASE)


def _mixes_tokens(module: nn.Module) -> bool:
    """Does ``module`` (or anything inside it) mix information across positions?

    By its class name, an SSM's ``A_log`` parameter, or a depthwise ``Conv1d`` (the short causal
    convolution of Mamba-style mixers): an MLP mixes channels only and has none of these.
    """
    from torch import nn

    for m in module.modules():
        if _MIXER_NAME.search(type(m).__name__) or "A_log" in dict(m.named_parameters(recurse=False)):
            return True
        if isinstance(m, nn.Conv1d) and m.groups > 1:
            return True
    return False


def other_token_mixers(layer: nn.Module, known: tuple[str, ...]) -> list[str]:
    """Children of a decoder ``layer``, besides the ``known`` ones, that mix tokens, as
    ``"name (Class)"``: an adapter that describes only ``known`` must refuse a layer that has any."""
    return [f"{name} ({type(child).__name__})" for name, child in layer.named_children()
            if name not in known and child is not None and _mixes_tokens(child)]
