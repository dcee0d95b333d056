"""The README's Quick start is what CI runs."""
import re
from pathlib import Path

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
