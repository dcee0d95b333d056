"""Errors a user can act on. Every message names the offending value and the valid range."""


class GnaError(Exception):
    """Base class: a problem with the user's input, not a bug."""


class UnknownArchitectureError(GnaError):
    """The model's architecture has no adapter."""


class LayerIndexError(GnaError, IndexError):
    """A layer index outside the model."""


class HeadIndexError(GnaError, IndexError):
    """A head index outside a mixer, or a mixer kind the layer does not have."""


class InterventionError(GnaError):
    """An intervention that cannot be applied as asked."""


class ProbeError(GnaError):
    """A probe set that cannot be scored (empty, malformed)."""


class ConfigError(GnaError):
    """A configuration value that fails validation."""
