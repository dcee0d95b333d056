"""The head explorer: one self-contained page per scanned model (gna.report.explorer, gna scan --html,
rule head_explorer), opened in a real browser (Debian's chromium + chromium-driver, driven by
selenium): no console error, no network, hovering a query token changes the highlighted weights to
that token's row of the mixing matrix, sorting and filtering the ranking work; a screenshot is kept.

Without a browser the browser tests skip, unless GNA_REQUIRE_BROWSER=1 (.ci/run), where they fail.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from gna.models import describe, load_model
from gna.probes.kv import generate_kv_probe
from gna.report import explorer

pytestmark = pytest.mark.oldest  # also run on the lowest supported transformers (.ci/run)

ROOT = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("GNA_SCREENSHOTS", ROOT / "logs" / "screenshots"))


def ranking_of(heads, roles=None):
    rows = [{"model": "m", "layer": l, "head": h, "kind": k, "accuracy": 0.5 + 0.01 * i, "drop": 0.4 - 0.01 * i,
             "rank": i + 1, "baseline_accuracy": 0.9, "probe_check": "passed", "v_transformers": "x"}
            for i, (l, h, k) in enumerate(heads)]
    ranking = pd.DataFrame(rows)
    ga = ranking.head(3).assign(role=(roles or ["gather", "aggregate", "-"]), gather_score=0.5, aggregate_score=0.4)
    return ranking, ga


@pytest.fixture(scope="module")
def micro_pages(tmp_path_factory):
    """Pages of the shipped micro transformer and micro hybrid (Zamba2: attention and Mamba-2 heads),
    each offering the other beside it."""
    out = tmp_path_factory.mktemp("explorer")
    datas = {}
    for name in ("micro-llama", "micro-zamba2"):
        model, tok = load_model({"path": str(ROOT / "data/models" / name), "device": "cpu"})
        heads = [(m.layer, h, m.kind) for m in describe(model).mixers for h in range(min(m.n_heads, 2))]
        ranking, ga = ranking_of(heads)
        prompts = [e["prompt"] for e in generate_kv_probe(4, 3, seed=0, fmt="compact")]
        datas[name] = explorer.explorer_data(name, ranking, ga, explorer.head_patterns(model, tok, prompts, heads),
                                             "compact format, 4 pairs")
    pages = {}
    for name, other in (("micro-llama", "micro-zamba2"), ("micro-zamba2", "micro-llama")):
        pages[name] = explorer.write([datas[name], datas[other]], out / f"{name}.explorer.html")
    return pages, datas


def test_patterns_are_the_mixing_matrices_rows_summing_to_one(micro_pages):
    _, datas = micro_pages
    for name, data in datas.items():
        kinds = set()
        for prompt in data["patterns"]:
            T = len(prompt["tokens"])
            for key, mat in prompt["matrices"].items():
                kinds.add(key.split()[1])
                m = torch.tensor(mat, dtype=torch.float) / data["scale"]
                assert m.shape == (T, T)
                assert torch.all(m.triu(1) == 0), (name, key)          # causal: nothing read from the future
                rows = m.sum(-1)[1:]                                     # (row 0 of an SSM head is its diagonal only)
                assert torch.allclose(rows, torch.ones_like(rows), atol=T * 1e-3), (name, key)
        assert kinds == ({"attention"} if name == "micro-llama" else {"attention", "mamba2"}), kinds


def test_the_page_is_self_contained(micro_pages):
    pages, _ = micro_pages
    html = pages["micro-llama"].read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)        # no CDN, no remote asset
    assert "fetch(" not in html and "XMLHttpRequest" not in html and "import(" not in html
    data = json.loads(re.search(r'<script type="application/json" id="gna-data">(.*?)</script>', html, re.S).group(1))
    assert [d["name"] for d in data] == ["micro-llama", "micro-zamba2"]


def test_a_script_end_tag_in_a_token_cannot_break_the_page():
    ranking, ga = ranking_of([(0, 0, "attention")], ["gather"])
    patterns = [{"tokens": ["</script>", "<b>"], "matrices": {"L0H0 attention": [[1000, 0], [500, 500]]}}]
    html = explorer.render([explorer.explorer_data("</script><b>x", ranking, ga, patterns)])
    assert html.count("</script>") == 2 and "<title>Head explorer: &lt;/script&gt;&lt;b&gt;x</title>" in html


# --- in a real browser ---------------------------------------------------------------------------

def chromium_paths():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return browser, driver


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    path, driver_path = chromium_paths()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        path = None
    if not (path and driver_path):
        if os.environ.get("GNA_REQUIRE_BROWSER") == "1":
            pytest.fail("GNA_REQUIRE_BROWSER=1 but chromium, chromedriver or selenium is missing")
        pytest.skip("no chromium + chromedriver (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = path
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1600,1100",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(driver_path))
    # No network at view time: the page must work with every request refused.
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                                "downloadThroughput": 0, "uploadThroughput": 0})
    yield driver
    driver.quit()


def console_problems(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def highlighted(driver, pane: int) -> list[float]:
    return [float(w) for w in driver.execute_script(
        f"return [...document.querySelectorAll('[data-pane=\"{pane}\"] .tok')].map(s => s.dataset.w)")]


def hover(driver, element):
    from selenium.webdriver.common.action_chains import ActionChains
    ActionChains(driver).move_to_element(element).perform()


@pytest.mark.parametrize("name", ["micro-llama", "micro-zamba2"])
def test_the_page_in_chromium(browser, micro_pages, name):
    from selenium.webdriver.common.by import By
    pages, datas = micro_pages
    browser.get(pages[name].as_uri())
    assert console_problems(browser) == []
    panes = browser.find_elements(By.CSS_SELECTOR, ".pane")
    other = next(n for n in datas if n != name)
    assert [p.find_element(By.TAG_NAME, "h2").text for p in panes] == [name, other]
    data = datas[name]
    tokens = panes[0].find_elements(By.CSS_SELECTOR, ".tok")
    first = data["patterns"][0]
    assert len(tokens) == len(first["tokens"])
    assert highlighted(browser, 0) == [0.0] * len(tokens)           # nothing highlighted before a hover
    head = panes[0].find_element(By.CSS_SELECTOR, ".head-select").get_attribute("value")
    mat = first["matrices"][head]
    for q in (len(tokens) - 1, len(tokens) // 2):
        hover(browser, tokens[q])
        got = highlighted(browser, 0)
        assert got == pytest.approx([w / data["scale"] for w in mat[q]], abs=1e-3), q   # that token's row
        assert "query" in tokens[q].get_attribute("class")
    # the table: sorting by drop reverses the rank order (drops fall with rank here), filtering by kind
    rank_of = lambda: [int(r.text.split()[0].lstrip("\u25cf ")) for r in
                       panes[0].find_elements(By.CSS_SELECTOR, "table.ranking tbody tr")]
    assert rank_of() == sorted(rank_of())
    panes[0].find_element(By.CSS_SELECTOR, 'th[data-col="drop"]').click()
    assert rank_of() == sorted(rank_of(), reverse=True)
    kinds = {r["kind"] for r in data["ranking"]}
    kind_select = panes[0].find_element(By.CSS_SELECTOR, ".filter-kind")
    for kind in kinds:
        browser.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
                               kind_select, kind)
        assert len(rank_of()) == sum(r["kind"] == kind for r in data["ranking"])
    browser.execute_script("arguments[0].value = ''; arguments[0].dispatchEvent(new Event('input'))", kind_select)
    # the right pane: the other model, its own hover
    other_tokens = panes[1].find_elements(By.CSS_SELECTOR, ".tok")
    hover(browser, other_tokens[-1])
    assert sum(highlighted(browser, 1)) > 0.5
    hover(browser, tokens[len(tokens) - 1])
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"explorer-{name}.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    assert console_problems(browser) == []


def test_the_table_shows_a_fast_scans_estimate_beside_the_exact_numbers():
    ranking, ga = ranking_of([(0, 0, "attention"), (0, 1, "attention"), (1, 0, "attention")])
    ranking = ranking.assign(atp_magnitude=[3.0, 2.0, 1.0], fast_estimate=[0.3, 0.2, 0.1], unrelated=1)
    data = explorer.explorer_data("m", ranking, ga, [])
    assert {"rank", "kind", "role", "drop", "atp_magnitude", "fast_estimate"} <= set(data["columns"])
    assert "unrelated" not in data["columns"] and data["ranking"][0]["fast_estimate"] == 0.3
    assert data["roles"] == {"gather": ["L0H0 attention"], "aggregate": ["L0H1 attention"]}
    assert data["provenance"]["v_transformers"] == "x" and data["provenance"]["probe_check"] == "passed"


def test_gna_scan_html_writes_the_page_and_another_scan_compares_with_it(tiny_model_dir, tmp_path, capsys):
    from gna.cli import main
    small = ["--format", "compact", "--n-examples", "6", "--pairs", "4", "--batch-size", "6", "--classify-top", "3",
             "--classify-examples", "3", "--force", "--html", "--html-prompts", "2", "--html-top", "3"]
    assert main(["scan", tiny_model_dir("llama"), "--out", str(tmp_path / "a"), "--name", "a", *small]) == 0
    data = json.loads((tmp_path / "a/patterns.json").read_text())
    assert data["name"] == "a" and len(data["patterns"]) == 2 and len(data["patterns"][0]["matrices"]) >= 3
    assert (tmp_path / "a/explorer.html").read_text().count('"name":"') == 1
    # a bad --compare is refused before the model loads
    assert main(["scan", tiny_model_dir("mamba2"), "--out", str(tmp_path / "b"), *small, "--compare",
                 str(tmp_path)]) == 2
    assert "no patterns.json there" in capsys.readouterr().err and not (tmp_path / "b").exists()
    assert main(["scan", tiny_model_dir("mamba2"), "--out", str(tmp_path / "b"), "--name", "b", *small, "--compare",
                 str(tmp_path / "a")]) == 0
    page = (tmp_path / "b/explorer.html").read_text()
    names = re.findall(r'"name":"(\w+)"', page)
    assert names[0] == "b" and "a" in names
