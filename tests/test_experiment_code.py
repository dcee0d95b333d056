"""An experiment's code is in one place: the rule file that declares it holds all its rules, the scripts
those rules run are its own, and few files outside them refer to it.

What an experiment's code is, read off the code and not off its name's occurrences: its rule file (the
one whose ``EXPERIMENT_REGISTRY.declare("<name>", ...)`` declares it), its rules (those the declaration
names, and those that write its results, ``results/<name>/``, or its figures, ``<figures>/<name>.*``),
the scripts those rules run (``script:``) and the library modules the declaration names (its findings,
its plan estimators). A file outside that code *refers to* the experiment where its code (not a comment
or docstring) reads the experiment's settings (``experiment_config("<name>")``, ``experiment_models``,
``EXPERIMENTS["<name>"]``, ``config["experiments"]["<name>"]``) or its outputs' paths. The same word
used otherwise (a variable, another experiment's setting of that name) is neither.
"""
from __future__ import annotations

import ast
import functools
import io
import re
import subprocess
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RULE = re.compile(r"^(?:rule|checkpoint)\s+(\w+)\s*:", re.M)
# Files outside its code that may refer to it (its rule file's helpers, workflow/rules/helpers/<its
# name>.smk, are its code): one, for the experiments another reads on purpose (the distilled teacher's
# scan reads hybrid_distillation's probe separator, the distillation the ranking seeds' ranking,
# hybrid attention top-k removal's unmodified model).
MAX_OUTSIDE = 1
# Stages that read every experiment's outputs by design, as the findings do: the confirmation re-scores
# the conditions each claim's experiment ran (workflow/rules/confirmation.smk and its helpers).
READERS = {"workflow/rules/confirmation.smk", "workflow/rules/helpers/confirmation.smk"}
# Its library: the modules its scripts import from the packages that hold experiments' computations
# and reports (not the machinery every script uses: jobs, io, models).
LIBRARY = ("gna.experiments", "gna.report", "gna.questions", "gna.hybrid")
EXEMPT = {"memory": "its rules are inference_memory's; a word every module that sizes anything uses"}


@dataclass
class Code:
    rule_file: str | None                       # the one that declares it
    rules: dict[str, str] = field(default_factory=dict)   # its rule -> the rule file holding it
    scripts: set[str] = field(default_factory=set)
    library: set[str] = field(default_factory=set)
    outside: set[str] = field(default_factory=set)          # other code files referring to it

    def helpers(self) -> str | None:
        """Its rule file's helpers file (workflow/rules/helpers/<name>.smk), whether or not it exists."""
        if self.rule_file is None:
            return None
        rule_file = Path(self.rule_file)
        return str(rule_file.parent / "helpers" / rule_file.name)

    def files(self) -> set[str]:
        return {self.rule_file, *self.rules.values(), *self.scripts, *self.library} - {None}


@functools.lru_cache(maxsize=None)
def code_text(path: Path) -> str:
    """``path``'s code without comments, and for Python without docstrings: what runs."""
    text = path.read_text()
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type != tokenize.COMMENT]
        text = tokenize.untokenize(tokens)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        text = re.sub(r"#[^\n]*", "", text)   # a rule file tokenize cannot read: its comments by line
    if path.suffix == ".py":
        lines = text.split("\n")
        for node in ast.walk(ast.parse(text)):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                for i in range(body[0].lineno - 1, body[0].end_lineno):
                    lines[i] = ""
        text = "\n".join(lines)
    return text


def rule_blocks(text: str) -> dict[str, str]:
    """Rule name -> its block (the lines after ``rule name:`` while indented)."""
    heads, out = list(RULE.finditer(text)), {}
    for i, m in enumerate(heads):
        lines = text[m.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)].split("\n")
        n = next((k for k, line in enumerate(lines[1:], 1) if line and not line[0].isspace()), len(lines))
        out[m.group(1)] = "\n".join(lines[:n])
    return out


def declaration(text: str, name: str) -> str | None:
    """The ``declare("<name>", ...)`` call of a rule file's text, parentheses balanced, or None."""
    m = re.search(rf"""\.declare\(\s*["']{name}["']""", text)
    if m is None:
        return None
    depth, i = 1, text.index("(", m.start()) + 1
    while depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[m.start():i]


def writes(name: str) -> re.Pattern:
    """A path among an experiment's outputs: its results folder, its logs, its figures and tables."""
    return re.compile(rf"""(?<!\w)(?:results|logs|figures|FIGURES\}})/{name}(?:/|\.\w+["'])""")


def reads_settings(name: str) -> re.Pattern:
    key = rf"""\(\s*["']{name}["']"""
    return re.compile(rf"""(?:experiment_config|experiment_models){key}|EXPERIMENTS(?:\.get{key}|\[["']{name}["']\])"""
                      rf"""|\[["']experiments["']\]\s*(?:\.get{key}|\[["']{name}["']\])""")


def module_file(dotted: str) -> str:
    return "workflow/" + dotted.replace(".", "/") + ".py"


def imported(root: Path, script: str) -> set[str]:
    """The files of the :data:`LIBRARY` modules ``script`` imports (``from gna.report import heads``:
    ``gna/report/heads.py``), relative to ``root``."""
    def file_of(dotted: str) -> str | None:
        for f in (module_file(dotted), module_file(dotted + ".__init__")):
            if (root / f).is_file():
                return f
        return None

    found = set()
    for node in ast.walk(ast.parse((root / script).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(LIBRARY):
            modules = [f for a in node.names if (f := file_of(f"{node.module}.{a.name}"))]
            found.update(modules or [file_of(node.module)])   # the modules imported, else the one imported from
        elif isinstance(node, ast.Import):
            found.update(file_of(a.name) for a in node.names if a.name.startswith(LIBRARY))
    found.discard(None)
    return found


def experiment_code(root: Path, files: list[str], name: str) -> Code:
    """``name``'s code in the repository at ``root`` (``files``: its code files, relative to it)."""
    texts = {f: code_text(root / f) for f in files}
    rule_files = [f for f in files if f.endswith(".smk")]
    rules = {rule: (f, block) for f in rule_files for rule, block in rule_blocks(texts[f]).items()}
    declared = [(f, d) for f in rule_files if (d := declaration(texts[f], name))]
    assert len(declared) <= 1, f"{name}: declared in {[f for f, _ in declared]}"
    rule_file, decl = declared[0] if declared else (None, "")
    own = {r for r in rules if re.search(rf"""["']{r}["']\s*:""", decl)}
    own |= {r for r, (_, block) in rules.items() if writes(name).search(block)}
    code = Code(rule_file, {r: rules[r][0] for r in sorted(own)})
    for r in own:
        m = re.search(r"""script:\s*["']([^"']+)["']""", rules[r][1])
        if m:
            code.scripts.add(str((root / rules[r][0]).parent.joinpath(m.group(1)).resolve().relative_to(root)))
    code.library = {module_file(m) for m in re.findall(r"""["'](gna\.[\w.]+):\w+["']""", decl)}
    code.library |= {f for script in code.scripts if (root / script).is_file() for f in imported(root, script)}
    refers = [writes(name), reads_settings(name)]
    code.outside = {f for f, t in texts.items() if f not in code.files() | {code.helpers()} | READERS
                    and any(p.search(t) for p in refers)}
    return code


def scattered(code: Code) -> list[str]:
    """What puts an experiment's code in more than one place (empty: nothing)."""
    wrong = [f"rule {r} is in {f}, not in {code.rule_file}" for r, f in code.rules.items() if f != code.rule_file]
    if len(code.outside) > MAX_OUTSIDE:
        wrong.append(f"{len(code.outside)} files outside its code refer to it: {sorted(code.outside)}")
    return wrong


def tracked_code_files() -> list[str]:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [f for f in tracked if f.endswith((".py", ".smk")) and not f.startswith(("tests/", "docs/"))
            and (ROOT / f).is_file()]


PAPER = sorted(yaml.safe_load((ROOT / "workflow/configs/paper.yaml").read_text())["experiments"])


@pytest.fixture(scope="module")
def files():
    return tracked_code_files()


@pytest.mark.parametrize("name", [e for e in PAPER if e not in EXEMPT])
def test_every_experiment_of_the_paper_preset_is_in_one_place(files, name):
    code = experiment_code(ROOT, files, name)
    assert code.rule_file, f"{name}: no rule file declares it"
    assert not scattered(code), f"{name}: " + "; ".join(scattered(code))
    for f in code.files():
        assert (ROOT / f).is_file(), f"{name}: {f} is not a file"


def test_kv_pairs_code_is_its_rules_scripts_and_findings_not_a_word_elsewhere(files):
    code = experiment_code(ROOT, files, "kv_pairs")
    assert code.rule_file == "workflow/rules/kv_pairs.smk"
    assert set(code.rules) == {"kv_pairs", "kv_pairs_figure"}
    assert code.scripts == {"workflow/scripts/kv_pairs.py", "workflow/scripts/kv_pairs_figure.py"}
    assert {"workflow/gna/report/heads.py", "workflow/gna/report/findings/heads.py"} <= code.library
    # the same word, unrelated: the micro world's dictionaries, the baselines' own setting of that name
    assert not {"workflow/gna/micro/world.py", "workflow/rules/baselines.smk"} & (code.files() | code.outside)


def synthetic(tmp_path: Path, rule_files: dict[str, str], python: dict[str, str]) -> tuple[Path, list[str]]:
    for f, text in {**rule_files, **python}.items():
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(text)
    return tmp_path, sorted([*rule_files, *python])


FOO = '''
rule foo:
    output: "results/foo/{model}.csv"
    script: "../scripts/foo.py"

rule foo_figure:
    input: rules.foo.output
    output: f"{FIGURES}/foo.png"
    script: "../scripts/foo_figure.py"

EXPERIMENT_REGISTRY.declare(
    "foo",
    plan={"foo": Estimator("gna.plan.job_estimates:evaluation")},
    findings=[Section(1, "gna.report.findings.foo:foo")],
)
'''


def test_an_experiment_in_one_place_is_found_whole(tmp_path):
    unrelated = 'BAR = config["bar"]["foo"]\n'   # another experiment's setting named foo
    root, files = synthetic(tmp_path, {"workflow/rules/foo.smk": FOO, "workflow/rules/bar.smk": unrelated},
                            {"workflow/scripts/foo.py": "x = 1\n", "workflow/gna/micro/world.py": "foo = 'foo'\n"})
    code = experiment_code(root, files, "foo")
    assert code.rule_file == "workflow/rules/foo.smk" and set(code.rules) == {"foo", "foo_figure"}
    assert code.scripts == {"workflow/scripts/foo.py", "workflow/scripts/foo_figure.py"}
    assert code.library == {"workflow/gna/plan/job_estimates.py", "workflow/gna/report/findings/foo.py"}
    assert not code.outside and not scattered(code)


def test_scattered_code_fails_a_rule_in_another_file_and_shared_files_reading_it(tmp_path):
    moved = FOO.split("rule foo_figure:")[0] + "EXPERIMENT_REGISTRY" + FOO.split("EXPERIMENT_REGISTRY")[1]
    other = 'rule foo_figure:\n    output: f"{FIGURES}/foo.png"\n    script: "../scripts/foo_figure.py"\n'
    shared = {f"workflow/gna/shared{i}.py": f'def f(config):\n    return config["experiments"]["foo"]["k"]\n'
              for i in range(MAX_OUTSIDE + 1)}
    shared["workflow/gna/doc_only.py"] = '"""Reads experiment_config("foo") in words only."""\n# results/foo/\n'
    root, files = synthetic(tmp_path, {"workflow/rules/foo.smk": moved, "workflow/rules/common.smk": other,
                                       "workflow/rules/plan.smk": 'x = experiment_config("foo")\n'}, shared)
    code = experiment_code(root, files, "foo")
    problems = scattered(code)
    assert any("rule foo_figure is in workflow/rules/common.smk" in p for p in problems), problems
    assert code.outside == {*list(shared)[:-1], "workflow/rules/plan.smk"}   # not the words in a docstring
    assert any("files outside its code refer to it" in p for p in problems), problems


def test_a_rule_files_helpers_file_is_its_code_and_common_holds_none_of_an_experiment(tmp_path, files):
    helper = 'def foo_k(model):\n    return experiment_config("foo")["k"]\n'
    root, synth = synthetic(tmp_path, {"workflow/rules/foo.smk": FOO, "workflow/rules/helpers/foo.smk": helper,
                                       "workflow/rules/helpers/bar.smk": helper.replace("foo_k", "bar_k")}, {})
    code = experiment_code(root, synth, "foo")
    assert code.outside == {"workflow/rules/helpers/bar.smk"}   # its own helpers file is not outside; another's is
    # in this repository: common.smk reads no experiment's settings or outputs (they sit in helpers/)
    for name in PAPER:
        assert "workflow/rules/common.smk" not in experiment_code(ROOT, files, name).outside, name
