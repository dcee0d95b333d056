"""The README is the front door: its Quick start is what CI runs, it stays short, and every page of
the manual (docs/, a MkDocs site) is reachable from the site's nav. Neither speaks of issues or rounds."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [line for block in re.findall(r"```(?:bash|sh)\n(.*?)```", section, re.S)
            for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    commands = quick_start_commands()
    assert len(commands) == 2, commands
    assert "snakemake --cores all" in commands[0] and "pytest" in commands[1]
    ci = (ROOT / ".ci/run").read_text()
    assert commands[1].replace(" -q", "") in ci.replace(" -q", "")


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    for section in ("## Quick start", "## What the micro study shows", "## Where to go next"):
        assert section in readme
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):          # every link into the manual resolves
        assert (ROOT / link).is_file(), link


def nav_pages(nav) -> list[str]:
    out = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        out += nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_every_manual_page_is_in_the_nav_and_ci_builds_the_site_strictly():
    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    pages = set(nav_pages(cfg["nav"]))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk == pages, sorted(on_disk ^ pages)
    assert "mkdocs build --strict" in (ROOT / ".ci/run").read_text()


def test_no_issue_numbers_or_rounds_in_the_readme_the_manual_or_the_code():
    """A reader has no tracker: the reason belongs in the sentence, not an issue number."""
    words = re.compile(r"\bissue \d+|\bissue's\b|\bthis round\b|\b(first|second|last) round\b|\brounds?\b of",
                       re.I)
    code = [p for d in ("workflow", "tests", "benchmarks", "data", ".ci") for p in sorted((ROOT / d).rglob("*"))
            if p.suffix in {".py", ".smk", ".md", ".yaml", ".rst", ".sh"} and "__pycache__" not in p.parts]
    for path in [ROOT / "README.md", ROOT / "Snakefile", ROOT / "config.yaml",
                 *sorted((ROOT / "docs").rglob("*.md")), *code]:
        if path == Path(__file__):
            continue
        hits = words.findall(path.read_text())
        assert not hits, (path.name, hits)
