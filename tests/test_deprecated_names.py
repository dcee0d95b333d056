"""The library's old module names import for one release: each warns with a DeprecationWarning
naming the new module and gives the new module itself (its functions, and monkeypatching, are one)."""
import importlib
import subprocess
import sys

import pytest

from gna.deprecated_names import MOVED


@pytest.mark.parametrize("old,new", sorted(MOVED.items()))
def test_old_name_warns_and_is_the_new_module(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__.name == new


def test_the_public_names_users_import_stay():
    """The names the docs show (gna.scan.scan_heads, gna.interventions.*, gna.models.load_model,
    gna.evaluate's TaskSuite/evaluate through its old name) resolve, the stable ones without a warning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        from gna.interventions import ablate_heads, drop_layer, keep_heads, swap_layer, truncate  # noqa: F401
        from gna.models import describe, load_model  # noqa: F401
        from gna.scan import scan, scan_heads, top_k  # noqa: F401
    from gna.evaluation.lm_eval_bridge import TaskSuite, evaluate

    sys.modules.pop("gna.evaluate", None)
    with pytest.warns(DeprecationWarning):
        from gna.evaluate import TaskSuite as old_suite, evaluate as old_evaluate
    assert (old_suite, old_evaluate) == (TaskSuite, evaluate)


def test_from_import_of_an_old_name_in_a_fresh_interpreter():
    """``from gna.mixing import mixing_matrices`` as a user's script writes it, warnings as errors off
    and on: works with the warning, names the user's line."""
    code = ("import warnings\nwarnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    from gna.mixing import mixing_matrices\n"
            "import gna.patterns.mixing as m\n"
            "assert mixing_matrices is m.mixing_matrices\n"
            "[d] = [x for x in w if x.category is DeprecationWarning]\n"
            "print(d.filename, d.lineno)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["<string>", "4"]
