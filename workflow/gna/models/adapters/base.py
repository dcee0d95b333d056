"""The adapter interface: one subclass per architecture family."""
from __future__ import annotations

import re

from torch import nn

from ..description import Mixer, ModelDescription


class Adapter:
    family: str = ""
    examples: str = ""
    """Human-readable examples of models in the family, for error messages."""
    model_types: tuple[str, ...] = ()
    layer_returns_tuple: bool = False
    """True where the model's loop reads ``layer(...)[0]`` (Falcon-H1): a skipped layer must then
    return ``(hidden,)``, not the bare tensor (see :class:`gna.interventions.SkipLayer`)."""

    def __init__(self, model: nn.Module, **options):
        if options:
            from ...errors import ConfigError
            raise ConfigError(f"the {self.family} adapter takes no options; got {sorted(options)}")
        self.model = model

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


# Class-name fragments of token-mixing modules (attention, SSMs, recurrences, long convolutions).
# MLPs, MoE blocks, norms, dropouts and activations match none of them.
_MIXER_NAME = re.compile(r"attention|attn|mamba|mixer|ssm|recurren|rwkv|retention|deltanet|hyena|lightning",
                         re.IGNORECASE)


def _mixes_tokens(module: nn.Module) -> bool:
    """Does ``module`` (or anything inside it) mix information across positions?

    By its class name, an SSM's ``A_log`` parameter, or a depthwise ``Conv1d`` (the short causal
    convolution of Mamba-style mixers): an MLP mixes channels only and has none of these.
    """
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
