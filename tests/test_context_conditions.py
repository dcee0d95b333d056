"""The shared-context mixin's contract: every attribute it reads of its host is listed in
HOST_ATTRIBUTES, and a host lacking one is refused, naming it, before any answer is computed."""
import ast
from pathlib import Path

import pytest

from gna.evaluation import context_conditions as C

SOURCE = Path(C.__file__)


def host_reads(source: str, cls: str = "SharedContextConditions") -> set[str]:
    """What the class ``cls`` of ``source`` reads of ``self`` (and of ``super()``) beyond its own members."""
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    own = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    own |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    reads = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            reads.add(n.attr)
        elif (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Call)
              and getattr(n.value.func, "id", None) == "super"):
            reads.add(n.attr)
    return reads - own


def test_every_attribute_the_mixin_reads_of_its_host_is_listed():
    assert host_reads(SOURCE.read_text()) == set(C.HOST_ATTRIBUTES)


def test_the_listing_check_sees_a_new_read():
    extra = SOURCE.read_text().replace("check_host(self)\n", "check_host(self)\n        self.tokenizer\n", 1)
    assert host_reads(extra) - set(C.HOST_ATTRIBUTES) == {"tokenizer"}


class Host:
    def __init__(self, **skip):
        for name in C.HOST_ATTRIBUTES:
            if name not in skip:
                setattr(self, name, None)


@pytest.mark.parametrize("missing", sorted(C.HOST_ATTRIBUTES))
def test_a_host_lacking_one_attribute_is_refused_naming_it(missing):
    lm = type("LM", (C.SharedContextConditions, Host), {})(**{missing: True})
    with pytest.raises(TypeError, match=missing):
        lm._context_shared_answers([], [])


def test_a_complete_host_is_accepted():
    lm = type("LM", (C.SharedContextConditions, Host), {})()
    lm.conditions = []
    assert lm._context_shared_answers([], []) == []
