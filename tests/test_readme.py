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


MAX_WORDS, MAX_LINE = 1500, 180


def test_the_readme_is_a_front_door():
    """About six minutes' reading: words and line length capped (a cap on lines let one 1,500-character
    table cell pass); its sections in order; every link into the manual resolves."""
    readme = (ROOT / "README.md").read_text()
    words = len(readme.split())
    assert words <= MAX_WORDS, f"README.md: {words} words, over {MAX_WORDS}: move detail into docs/"
    long = [(n, len(line)) for n, line in enumerate(readme.splitlines(), 1) if len(line) > MAX_LINE]
    assert not long, f"README.md lines over {MAX_LINE} characters (line, length): {long}"
    sections = ["## Quick start", "## Your model", "## What the studies show", "## Where to go next"]
    assert [readme.index(s) for s in sections] == sorted(readme.index(s) for s in sections)
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):          # every link into the manual resolves
        assert (ROOT / link).is_file(), link
    assert "![" in readme.split("## Quick start")[0] and "figures/ga_heatmaps.png" in readme  # the mechanism first


def verdict_rows(readme: str) -> list[list[str]]:
    block = readme.split("<!-- verdicts:begin", 1)[1].split("<!-- verdicts:end -->", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[3:] if line.startswith("|")]


def test_the_readmes_verdict_summary_is_the_findings_verdicts():
    """Each row of the README's short table (claim, model, verdict, one number) names a claim of
    figures/findings.md or figures/real/findings.md by the start of its heading, a model there, and
    that model's verdict, word for word; its number is one of the evidence's."""
    from gna.report.quote import rows

    found = [r for f in ("figures/findings.md", "figures/real/findings.md")
             for r in rows((ROOT / f).read_text(), "")]
    table = verdict_rows((ROOT / "README.md").read_text())
    assert len(table) >= 6
    for claim, model, verdict, number in table:
        match = [r for r in found if r[0].startswith(claim) and r[1] == model]
        assert len(match) == 1, (claim, model)
        _, _, theirs, evidence = match[0]
        assert theirs.split(" (")[0] == verdict, (claim, model, theirs)
        numbers = re.findall(r"\d+\.\d+", number)
        assert numbers and all(n in evidence for n in numbers), (claim, model, number)


def your_model_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Your model", 1)[1].split("\n## ", 1)[0]
    return [line for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines()
            if line.strip()]


def test_the_your_model_commands_run_as_written_on_a_local_model(tmp_path, smollm2_dir):
    """The first screen's `gna describe` and `gna scan` on a Hub id, run on SmolLM2-135M-Instruct (from
    its pinned GGUF, the tests' stand-in for the Hub id) on the CPU: the id replaced by the directory,
    `--device cuda` by cpu, and the scan's probe shrunk (options given last win)."""
    import shlex

    from gna.cli import main

    commands = your_model_commands()
    assert [c.split()[:2] for c in commands] == [["gna", "describe"], ["gna", "scan"]], commands
    hub_id = commands[0].split()[2]
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", hub_id) and "--device cuda" in commands[1]
    for command in commands:
        argv = [str(smollm2_dir) if a == hub_id else "cpu" if a == "cuda" else a for a in shlex.split(command)[1:]]
        argv = [str(tmp_path / a) if a.startswith("scan-") else a for a in argv]
        if argv[0] == "scan":
            argv += ["--n-examples", "4", "--method", "atp", "--classify-top", "1", "--classify-examples", "2",
                     "--force"]
        assert main(argv) == 0, command
    assert (tmp_path / "scan-smollm2" / "explorer.html").is_file()


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


def test_the_printed_scan_is_the_committed_runs_output():
    """The ranking the first screen shows is what `gna scan` printed on the committed run
    (benchmarks/results/cli_scan_smollm2/): the printed lines verbatim in the README, and the table
    among them is the command's own formatting of that run's ga.csv, its baseline line the ranking's."""
    import pandas as pd

    from gna.cli import top_heads_table

    run = ROOT / "benchmarks/results/cli_scan_smollm2"
    printed = (run / "printed.txt").read_text()
    section = (ROOT / "README.md").read_text().split("## Your model", 1)[1].split("\n## ", 1)[0]
    assert f"```text\n{printed}```" in section
    ranking, ga = pd.read_csv(run / "ranking.csv"), pd.read_csv(run / "ga.csv")
    assert top_heads_table(ranking, ga) in printed
    base = ranking.iloc[0]
    assert (f"KV probe of {base.n_examples} prompts x 10 pairs (paper); baseline accuracy "
            f"{base.baseline_accuracy:.3f} (chance {base.chance_accuracy:.3f})") in printed
    assert len(ranking) == 270 and ranking["rank"].tolist() == list(range(1, 271))   # every head ablated
    for role in ("gather", "aggregate"):
        named = ga[ga.role == role]
        assert (f"top {role} head: none among the top {len(ga)} heads" in printed) == named.empty
