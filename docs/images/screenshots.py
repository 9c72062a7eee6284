"""Make the screenshots of the HTML view that docs/view.md shows (run by hand).

    python docs/images/screenshots.py

Renders two trees with ``ct.html``, opens them in Debian's headless chromium (through
selenium and /usr/bin/chromedriver, as tests/test_html_browser.py does) and writes
``html-view.png`` and ``html-view-open.png`` next to this file.
"""

from __future__ import annotations


def main() -> None:
    import pathlib
    import tempfile

    import numpy as np
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    import containers as ct

    @ct.container(children=["w", "b"], keep=["activation"])
    class Linear:
        w: np.ndarray
        b: np.ndarray
        activation: str = "relu"
        cache: dict = ct.field(default_factory=dict)

    @ct.container(children=["embed", "layers", "head"], keep=["name"], frozen=False)
    class Model:
        embed: np.ndarray
        layers: list
        head: Linear
        name: str = "mlp"

    rng = np.random.default_rng(0)
    tied = rng.standard_normal((32, 16)).astype("float32")
    layers = [
        Linear(rng.standard_normal((16, 16)).astype("float32") / 4, np.zeros(16, "float32"))
        for _ in range(3)
    ]
    broken = np.array([0.1, np.nan, 0.3, np.inf, -0.2], "float32")
    model = Model(tied, layers, Linear(tied, broken, "softmax"))

    here = pathlib.Path(__file__).resolve().parent
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tempfile.mkdtemp()}",
        "--hide-scrollbars",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        page = pathlib.Path(tempfile.mkdtemp()) / "view.html"
        page.write_text(
            '<!doctype html><meta charset="utf-8"><body style="margin:8px">'
            + ct.html(model)
            + "</body>",
            encoding="utf-8",
        )
        size = {"width": 760, "deviceScaleFactor": 1, "mobile": False}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**size, "height": 250})
        driver.get(page.as_uri())
        driver.save_screenshot(str(here / "html-view.png"))
        driver.find_element(By.CSS_SELECTOR, "[data-path='.layers[0]']").find_element(
            By.XPATH, ".."
        ).click()
        driver.find_element(By.CSS_SELECTOR, "[data-path='.layers[0].w']").click()
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**size, "height": 330})
        driver.save_screenshot(str(here / "html-view-open.png"))
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
