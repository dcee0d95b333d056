"""Print pip pins of pyproject.toml's lower bounds (transformers, lm-eval, scipy): the lowest supported
versions, which .ci/run installs into a second environment to run `pytest -m oldest`."""
import re
import sys
import tomllib
from pathlib import Path

PINNED = ("transformers", "lm-eval", "scipy")

deps = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["dependencies"]
for name in PINNED:
    spec = next((d for d in deps if re.match(rf"{re.escape(name)}(\[[^\]]*\])?\s*>=", d)), None)
    if spec is None:
        sys.exit(f"pyproject.toml states no lower bound (>=) for {name}")
    version = re.search(r">=\s*([\w.]+)", spec).group(1)
    print(f"{name}=={version}")
