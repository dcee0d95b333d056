"""The adapter interface: one subclass per architecture family."""
from __future__ import annotations

from torch import nn

from ..description import Mixer, ModelDescription


class Adapter:
    family: str = ""
    examples: str = ""
    """Human-readable examples of models in the family, for error messages."""
    model_types: tuple[str, ...] = ()

    def __init__(self, model: nn.Module, **options):
        if options:
            from ...errors import ConfigError
            raise ConfigError(f"the {self.family} adapter takes no options; got {sorted(options)}")
        self.model = model

    @classmethod
    def matches(cls, model: nn.Module) -> bool:
        return getattr(model.config, "model_type", None) in cls.model_types

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
