"""The HTML view as a person sees it: a real headless Chromium opens the page, unfolds a
node by clicking, reads its text, copies a path, follows a "same as" link, and reports
no console error; a real notebook executed with nbclient (a real kernel) holds the view.

Debian's ``chromium`` and ``chromium-driver`` packages provide the browser and its
driver (``.ci/run`` installs them when missing); nothing is downloaded. Without them the
browser tests skip, except under CI (``CI`` set), where they fail. Screenshots are kept
in ``tmp/artifacts/`` (or ``$CONTAINERS_ARTIFACTS``).
"""

from __future__ import annotations

import os
import pathlib
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import containers as ct

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ROOT = pathlib.Path(__file__).resolve().parent.parent
ARTIFACTS = pathlib.Path(os.environ.get("CONTAINERS_ARTIFACTS", ROOT / "tmp" / "artifacts"))


@ct.container(children=["w", "b"], keep=["name"])
class Dense:
    w: Any
    b: Any
    name: str = "dense"
    cache: dict = ct.field(default_factory=dict)


@ct.container(frozen=False)
class MLP:
    layers: list
    head: Any = None


def mlp() -> MLP:
    """Three layers, the last two sharing a bias; a head with a NaN and an inf."""
    rng = np.random.default_rng(0)
    shared = rng.standard_normal(16).astype("float32")
    return MLP(
        [
            Dense(rng.standard_normal((16, 16)).astype("float32"), np.zeros(16, "float32"), "in"),
            Dense(rng.standard_normal((16, 16)).astype("float32"), shared, "mid"),
            Dense(rng.standard_normal((16, 8)).astype("float32"), shared, "out"),
        ],
        head=Dense(np.array([0.5, np.nan, np.inf, -1.0], "float32"), np.array(1.0), "head"),
    )


def page(tree: Any, **options: Any) -> pathlib.Path:
    """``ct.html(tree)`` in a complete HTML file, as a notebook export would hold it."""
    path = pathlib.Path(tempfile.mkdtemp()) / "view.html"
    path.write_text(
        '<!doctype html><html><head><meta charset="utf-8"><title>view</title></head>'
        f"<body>{ct.html(tree, **options)}</body></html>",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium driven by selenium through Debian's chromedriver."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} or {CHROMEDRIVER} is missing: .ci/run installs them")
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp()
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1000,700",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[str]:
    """The console's errors since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_a_person_unfolds_reads_copies_and_follows_links(browser: Any):
    """Open the view, click a folded layer open, read its rows, click a key (its path is
    reported copied), click a 'same as' mark (the original opens); no console error;
    the screenshot is kept."""
    from selenium.webdriver.common.by import By

    browser.get(page(mlp()).as_uri())
    layer = browser.find_element(
        By.CSS_SELECTOR, "details:has(> summary [data-path='.layers[1]'])"
    )
    assert layer.get_attribute("open") is None  # folded at depth 2
    assert not layer.find_element(By.CSS_SELECTOR, ".ct-kids").is_displayed()
    summary = layer.find_element(By.TAG_NAME, "summary")
    assert "Dense" in summary.text
    assert "272 params \u00b7 1.1 KiB" in summary.text  # its bias (shared) is counted here
    summary.click()
    assert layer.get_attribute("open") == "true"
    rows = layer.find_element(By.CSS_SELECTOR, ".ct-kids").text
    assert "w float32[16,16]" in rows
    assert "b float32[16]" in rows
    assert "name kept 'mid'" in rows
    assert "cache reset {}" in rows

    key = browser.find_element(By.CSS_SELECTOR, "[data-path='.head.w']")
    key.click()
    toast = browser.find_element(By.CSS_SELECTOR, ".ct-toast")
    assert toast.text == "copied .head.w"
    head = browser.find_element(By.CSS_SELECTOR, "details:has(> summary [data-path='.head'])")
    assert "1 NaN" in head.text
    assert "1 inf" in head.text

    mark = browser.find_element(By.CSS_SELECTOR, "[data-goto]")
    assert mark.get_attribute("textContent") == "same as .layers[1].b"
    assert mark.is_displayed() is False  # inside the folded third layer
    browser.find_element(By.CSS_SELECTOR, "[data-path='.layers[2]']").find_element(
        By.XPATH, ".."
    ).click()
    mark.click()
    target = browser.find_element(By.ID, mark.get_attribute("data-goto"))
    assert target.is_displayed()
    assert "ct-flash" in str(target.get_attribute("class"))

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "html_view_mlp.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 1000
    assert console_errors(browser) == []


def test_a_large_tree_opens_in_the_browser(browser: Any):
    """100,000 leaves: the page loads, shows the count of what is cut, no console error."""
    from selenium.webdriver.common.by import By

    tree = {"xs": [np.float32(i) for i in range(100_000)], "w": np.ones((3, 3))}
    browser.get(page(tree).as_uri())
    xs = browser.find_element(By.CSS_SELECTOR, "details:has(> summary [data-path=\"['xs']\"])")
    assert xs.get_attribute("open") is None  # a wide node starts folded
    xs.find_element(By.TAG_NAME, "summary").click()
    more = browser.find_element(By.CSS_SELECTOR, ".ct-more")
    assert more.text.startswith("\u2026 99,003 more not shown")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".ct-row")) < 1100
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "html_view_large.png"))
    assert console_errors(browser) == []


def test_hostile_strings_run_no_script_in_the_browser(browser: Any):
    """A key and a value that are script tags stay text: no alert, no console error."""
    from selenium.webdriver.common.by import By

    hostile = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    browser.get(page({hostile: hostile}).as_uri())
    assert browser.execute_script("return window.pwned === undefined")
    assert hostile in browser.find_element(By.CSS_SELECTOR, ".ct-view").text
    assert console_errors(browser) == []


# --- a real notebook ---------------------------------------------------------------------------

NOTEBOOK_CELLS = [
    "import numpy as np\nimport containers as ct\n%load_ext containers",
    (
        "@ct.container(children=['w', 'b'])\n"
        "class Dense:\n"
        "    w: np.ndarray\n"
        "    b: np.ndarray\n"
        "    name: str = 'fc'\n"
        "layer = Dense(np.ones((3, 4), 'float32'), np.zeros(4, 'float32'))\n"
        "layer"
    ),
    "ct.display({'layers': [layer], 'step': 3})",
    "print(layer)",
]


def test_an_executed_notebook_holds_the_html_view():
    """nbclient runs a notebook in a real kernel: a container ending a cell after
    %load_ext containers, and ct.display(...), come out as the HTML view, with the text
    view beside it; print keeps the short repr."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in NOTEBOOK_CELLS]
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    layer_out = nb.cells[1].outputs[0]
    assert layer_out["output_type"] == "execute_result"
    assert 'class="ct-view"' in layer_out["data"]["text/html"]
    assert "float32[3,4]" in layer_out["data"]["text/html"]
    assert layer_out["data"]["text/plain"].startswith("Dense(w=float32[3,4], b=float32[4]")
    shown = nb.cells[2].outputs[0]["data"]
    assert "16 params" in shown["text/html"]
    assert shown["text/plain"].startswith("{  # 16 params, 64 B")
    assert nb.cells[3].outputs[0]["text"].startswith("Dense(w=array([[1., 1., 1., 1.],")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(ARTIFACTS / "html_view.ipynb"))


def test_a_deep_tree_is_one_chain_of_folds_in_the_browser(browser: Any):
    """A chain of 10,000 lists: Chromium's parser keeps every fold inside its parent
    (past 512 nested elements it would hang them elsewhere), and the deepest says how
    to see the rest."""
    deep: list[Any] = []
    cur = deep
    for _ in range(10_000):
        cur.append([])
        cur = cur[0]
    browser.get(page(deep, expand_depth=10**6, max_nodes=10**6).as_uri())
    count, deepest = browser.execute_script(
        "var all = document.querySelectorAll('details'), best = 0;"
        "all.forEach(function (d) { var n = 0, p = d.parentElement;"
        "  while (p) { if (p.tagName === 'DETAILS') n++; p = p.parentElement; }"
        "  if (n > best) best = n; });"
        "return [all.length, best];"
    )
    assert deepest == count - 1  # each fold inside the one before
    last = browser.find_elements("css selector", "details")[-1]
    assert "nested deeper than" in last.get_attribute("textContent")
    assert console_errors(browser) == []
