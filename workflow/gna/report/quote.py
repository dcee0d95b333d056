"""Findings quoted word for word in the manual, so that a claim there is the verdict
the run computed, with its n and intervals. Each block sits between
``<!-- NAME:begin (SOURCE; python -m gna.report.quote) -->`` and ``<!-- NAME:end -->``:
``open_questions`` holds the micro study's "Open question:" claims, ``real_findings`` every claim of
the real-model study (``figures/real/``), the paper's Llama-3.1-8B beside each.

    python -m gna.report.quote [ROOT]    # rewrite every block of the manual's pages
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .tolerance import VERDICT


@dataclass(frozen=True)
class Block:
    """A quoted block: ``source`` the findings.md it quotes (from the repository root), ``prefix``
    the claims it takes (those that begin with it, the prefix dropped; empty: every claim)."""
    name: str
    source: str
    prefix: str
    header: str

    @property
    def begin(self) -> str:
        return f"<!-- {self.name}:begin ({self.source}; python -m gna.report.quote) -->"

    @property
    def end(self) -> str:
        return f"<!-- {self.name}:end -->"


OPEN_QUESTIONS = Block("open_questions", "figures/findings.md", "Open question: ",
                       "| open question | model | verdict | evidence: n, intervals [95%], tests |")
REAL_FINDINGS = Block("real_findings", "figures/real/findings.md", "",
                      "| claim of the paper | model | verdict | evidence: n, 95% intervals, the paper's Llama-3.1-8B |")
BLOCKS = (OPEN_QUESTIONS, REAL_FINDINGS)
PAGES = ("docs/open-questions.md", "docs/real-models.md")


def rows(findings_md: str, prefix: str = OPEN_QUESTIONS.prefix) -> list[tuple[str, str, str, str]]:
    """(claim, model, verdict, evidence) of every claim of a findings.md text that begins with ``prefix``."""
    out, claim = [], ""
    for line in findings_md.splitlines():
        if line.startswith("## "):
            claim = line[3:].strip()
        elif claim.startswith(prefix) and (m := VERDICT.match(line)):
            out.append((claim[len(prefix):], m["model"], m["verdict"] + (m["note"] or ""), line[m.end():].strip()))
    return out


def table(findings_md: str, block: Block = OPEN_QUESTIONS) -> str:
    lines = [block.header, "|---|---|---|---|"]
    lines += [f"| {q} | {m} | {v} | {e.replace('|', '/')} |" for q, m, v, e in rows(findings_md, block.prefix)]
    return "\n".join(lines) + "\n"


def quoted(text: str, block: Block = OPEN_QUESTIONS) -> str | None:
    """The block's text in ``text`` (between its markers), or None without them."""
    m = re.search(re.escape(block.begin) + r"\n(.*?)" + re.escape(block.end), text, re.S)
    return m.group(1) if m else None


def update(path: Path, findings_md: str, block: Block = OPEN_QUESTIONS) -> bool:
    """Rewrite ``path``'s block from ``findings_md``; True where it changed."""
    text = Path(path).read_text()
    old = quoted(text, block)
    if old is None:
        raise ValueError(f"{path}: no {block.begin} ... {block.end} block")
    new = text.replace(block.begin + "\n" + old + block.end, block.begin + "\n" + table(findings_md, block) + block.end)
    if new != text:
        Path(path).write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else ".")
    for block in BLOCKS:
        pages = [page for page in PAGES if block.begin in (root / page).read_text()]
        if pages and not (root / block.source).is_file():
            print(f"error: {', '.join(pages)} quote {block.source}, which does not exist: run its study first",
                  file=sys.stderr)
            return 2
        for page in pages:
            changed = update(root / page, (root / block.source).read_text(), block)
            print(f"{page} ({block.name}): {'updated' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
