"""The open questions' rows of ``figures/findings.md``, quoted word for word in the README and in
``docs/open-questions.md`` between ``<!-- open_questions:begin -->`` and ``<!-- open_questions:end -->``,
so that a claim there is the verdict the run computed, with its n and intervals.

    python -m gna.questions.quote [figures/findings.md] [README.md docs/open-questions.md]
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from ..report.tolerance import VERDICT

BEGIN, END = "<!-- open_questions:begin (figures/findings.md; python -m gna.questions.quote) -->", \
    "<!-- open_questions:end -->"
PREFIX = "Open question: "


def rows(findings_md: str) -> list[tuple[str, str, str, str]]:
    """(question, model, verdict, evidence) of every "Open question:" claim of a findings.md text."""
    out, claim = [], ""
    for line in findings_md.splitlines():
        if line.startswith("## "):
            claim = line[3:].strip()
        elif claim.startswith(PREFIX) and (m := VERDICT.match(line)):
            out.append((claim[len(PREFIX):], m["model"], m["verdict"], line[m.end():].strip()))
    return out


def table(findings_md: str) -> str:
    lines = ["| open question | model | verdict | evidence: n, intervals [95%], tests |", "|---|---|---|---|"]
    lines += [f"| {q} | {m} | {v} | {e.replace('|', '/')} |" for q, m, v, e in rows(findings_md)]
    return "\n".join(lines) + "\n"


def quoted(text: str) -> str | None:
    """The block between the markers of ``text``, or None without them."""
    m = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, re.S)
    return m.group(1) if m else None


def update(path: Path, findings_md: str) -> bool:
    """Rewrite ``path``'s block from ``findings_md``; True where it changed."""
    text = Path(path).read_text()
    old = quoted(text)
    if old is None:
        raise ValueError(f"{path}: no {BEGIN} ... {END} block")
    new = text.replace(BEGIN + "\n" + old + END, BEGIN + "\n" + table(findings_md) + END)
    if new != text:
        Path(path).write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    findings = Path(args[0] if args else "figures/findings.md").read_text()
    for path in args[1:] or ["README.md", "docs/open-questions.md"]:
        print(f"{path}: {'updated' if update(Path(path), findings) else 'unchanged'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
