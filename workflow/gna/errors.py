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


class StudyConfigError(ConfigError, ValueError):
    """A study config that names what does not exist or cannot run (gna.config.checks)."""


class DeviceError(ConfigError):
    """A job asked for a device (``device: cuda``) this machine or this torch build lacks."""


class ModelLoadError(GnaError):
    """A model's files could not be loaded (truncated weights, missing files, a bad config.json);
    the message names its config key where known, its path or id, and the loader's reason."""


def check_fields(cls, d: dict, what: str | None = None) -> None:
    """Refuse keys of ``d`` that are not fields of the dataclass ``cls``, naming them."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ConfigError(f"unknown {what or cls.__name__} field(s) {unknown}; known: {sorted(names)}")


def user_os_error(e: BaseException) -> bool:
    """An OSError the user's machine or paths cause (full disk, quota, no permission, read-only
    filesystem, a file where a directory must be): the message is for the user, not a bug report."""
    import errno

    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS,
                                                  errno.ENOTDIR, errno.EISDIR, errno.EEXIST)
