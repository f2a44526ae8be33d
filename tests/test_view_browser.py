"""`agentdata view` in a real browser: headless Chromium (Debian's package) driven by selenium.

Open a run, filter it, open a trajectory, read the rendered conversation and the SFT view, and check that
the XSS payloads stored in a problem and a model's answer ran nothing; then the same on the static export
opened from disk. Skipped with the reason when Chromium is missing, except where AGENTDATA_REQUIRE_BROWSER
is set (CI sets it: there a missing browser is a failure). With AGENTDATA_VIEW_SCREENSHOTS=DIR each view
is saved there as a PNG (the screenshots in docs/view.md).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from agentdata.view.api import ViewerData
from agentdata.view.catalog import open_artifacts
from agentdata.view.mask import Tokenizers
from tests.view_fixtures import XSS_ANSWER, XSS_QUESTION

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
SCREENSHOTS = os.environ.get("AGENTDATA_VIEW_SCREENSHOTS")

if not (CHROMIUM and CHROMEDRIVER):
    if os.environ.get("AGENTDATA_REQUIRE_BROWSER"):
        raise RuntimeError("AGENTDATA_REQUIRE_BROWSER is set but chromium/chromedriver are missing")
    pytest.skip(
        "headless Chromium is not installed (apt-get install -y chromium chromium-driver)", allow_module_level=True
    )
try:
    import selenium  # noqa: F401
except ImportError:
    if os.environ.get("AGENTDATA_REQUIRE_BROWSER"):
        raise
    pytest.skip("selenium is not installed (pip install -e '.[dev]')", allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,860"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def workspace(view_workspace):
    return view_workspace


@pytest.fixture(scope="module")
def data(workspace, tokenizer, tmp_path_factory) -> ViewerData:
    broken = tmp_path_factory.mktemp("broken") / "cut.parquet"
    broken.write_bytes(workspace.sft.read_bytes()[:300])  # a file cut short: one line on the page
    paths = [workspace.run, workspace.other_run, workspace.sft, workspace.pool, workspace.eval_dir, workspace.train]
    return ViewerData(open_artifacts([*paths, broken]), Tokenizers(tokenizer=tokenizer))


@pytest.fixture(scope="module")
def url(data) -> str:
    import uvicorn

    from agentdata.view.server import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(data), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    server.should_exit = True
    thread.join(timeout=10)


def wait_ready(driver, after: int = 0) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    def ready(driver) -> bool:
        return driver.execute_script(
            "const p = document.getElementById('page');"
            "return !!p && p.dataset.ready === '1' && Number(p.dataset.render) > arguments[0];",
            after,
        )

    WebDriverWait(driver, 60).until(ready)


def render_number(driver) -> int:
    return int(driver.execute_script("const p = document.getElementById('page'); return p ? p.dataset.render : 0;"))


def visit(driver, address: str) -> None:
    driver.get(address)
    wait_ready(driver)


def act(driver, action) -> None:
    """Do something that moves to another view (a click, a form), then wait for it to be drawn."""
    before = render_number(driver)
    action()
    wait_ready(driver, before)


def snap(driver, name: str) -> None:
    """With AGENTDATA_VIEW_SCREENSHOTS=DIR: the view as DIR/NAME.png, in 64 colours (small enough for the docs)."""
    if SCREENSHOTS:
        from PIL import Image

        path = Path(SCREENSHOTS) / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(path))
        Image.open(path).convert("RGB").quantize(colors=64).save(path, optimize=True)


def no_script_ran(driver) -> None:
    """The payloads set window.__xss when they run; none may have, and none may be live elements."""
    from selenium.webdriver.common.by import By

    assert driver.execute_script("return window.__xss === undefined")
    scripts = [s.get_attribute("src") for s in driver.find_elements(By.TAG_NAME, "script")]
    assert all(src and ("static/app.js" in src or "/data/" in src) for src in scripts), scripts
    assert not driver.find_elements(By.CSS_SELECTOR, "main img:not(.plot), main b, a[href^='javascript']")
    assert driver.find_element(By.ID, "error").text == ""


def page_errors(driver) -> list[str]:
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and "favicon.ico" not in entry["message"]
    ]


def key_of(data: ViewerData, path: Path) -> str:
    return next(a.key for a in data.catalog if a.path.resolve() == Path(path).resolve())


# --------------------------------------------------------------------------- served


def test_open_a_run_filter_it_and_read_a_trajectory_and_its_sft_view(browser, url, data, workspace):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    visit(browser, url)
    snap(browser, "home")
    damaged = browser.find_element(By.CSS_SELECTOR, ".card .damaged").text
    assert "cut.parquet" in damaged and "Parquet" in damaged and "\n" not in damaged
    run = key_of(data, workspace.run)
    card = browser.find_element(By.CSS_SELECTOR, f".card[data-key='{run}'] a")
    act(browser, card.click)
    snap(browser, "run")
    browser.find_element(By.NAME, "q").send_keys("12 * 13")
    Select(browser.find_element(By.NAME, "correct")).select_by_value("false")
    act(browser, browser.find_element(By.ID, "apply").click)
    expected = data.rows(run, {"q": "12 * 13", "correct": "false"})
    assert browser.find_element(By.ID, "total").text.startswith(f"{expected['total']} rows match")
    rows = browser.find_elements(By.CSS_SELECTOR, "#rows tr.link")
    assert len(rows) == expected["total"] > 0
    assert all("What is 12 * 13?" in row.text and "wrong" in row.text for row in rows)
    act(browser, rows[0].click)
    snap(browser, "trajectory")
    assert browser.find_element(By.CSS_SELECTOR, ".turn.user .text").text == "What is 12 * 13?"
    assert browser.find_element(By.CSS_SELECTOR, ".turn.assistant pre.call").text == "print(12 * 13)"
    assert browser.find_element(By.CSS_SELECTOR, ".turn.assistant pre.output").text == "156"
    assert browser.find_element(By.CSS_SELECTOR, "#final-answer .text").text == "157"
    assert browser.find_element(By.CSS_SELECTOR, "h1 .badge.bad").text == "wrong"
    system = browser.find_element(By.CSS_SELECTOR, ".turn.system details")
    assert system.get_attribute("open") is None  # the system prompt is folded
    act(browser, browser.find_element(By.ID, "show-sft").click)
    snap(browser, "sft-view")
    trained = "".join(e.text for e in browser.find_elements(By.CSS_SELECTOR, "#mask .tok.trained"))
    masked = browser.execute_script(
        "return [...document.querySelectorAll('#mask .tok.masked')].map(e => e.textContent).join('')"
    )
    assert "print(12 * 13)" in trained and "\\boxed{157}" in trained
    assert "```output\n156\n```" in masked and "What is 12 * 13?" in masked
    assert not page_errors(browser)


def test_the_xss_payloads_stay_text_everywhere(browser, url, data, workspace):
    from selenium.webdriver.common.by import By

    run = key_of(data, workspace.run)
    hostile = data.rows(run, {"q": "onerror"})["rows"][0]
    visit(browser, f"{url}#/a/{run}?q=onerror")
    no_script_ran(browser)
    assert XSS_QUESTION[:60] in browser.find_element(By.ID, "rows").text
    visit(browser, f"{url}#/a/{run}/r/{hostile['_row']}")
    browser.execute_script("document.querySelector('.turn.user').scrollIntoView()")  # the question and the answer
    snap(browser, "xss")
    no_script_ran(browser)
    assert browser.find_element(By.CSS_SELECTOR, ".turn.user .text").text == XSS_QUESTION
    assert XSS_ANSWER in browser.find_element(By.ID, "conversation").text
    visit(browser, f"{url}#/a/{run}/r/{hostile['_row']}?view=sft")
    no_script_ran(browser)
    visit(browser, f"{url}#/a/{run}/p/{hostile['problem_id']}")
    no_script_ran(browser)
    assert browser.find_element(By.ID, "question").text == XSS_QUESTION
    visit(browser, f"{url}#/a/{key_of(data, workspace.pool)}")
    no_script_ran(browser)
    assert not page_errors(browser)


def test_every_other_view_renders(browser, url, data, workspace):
    from selenium.webdriver.common.by import By

    pool = data.artifact(key_of(data, workspace.pool))
    visit(browser, f"{url}#/a/{pool.key}")
    snap(browser, "pool")
    dropped = pool.table().index.filter(pool.table().index["status"] != "in pool")["problem_id"][0]
    visit(browser, f"{url}#/a/{pool.links['profile']}/p/{dropped}")
    snap(browser, "problem")
    assert "95% interval" in browser.find_element(By.ID, "pass-rate").text
    assert "out of band" in browser.find_element(By.ID, "pass-rate").text
    assert browser.find_element(By.ID, "drop-reason").text.endswith("out_of_band")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#samples .card")) == 4
    sft = key_of(data, workspace.sft)
    visit(browser, f"{url}#/a/{sft}/curate")
    snap(browser, "curate")
    report = data.curate(sft)
    reason, count = next(iter(report["dropped"].items()))
    act(browser, browser.find_element(By.CSS_SELECTOR, f"#drops tr[data-reason='{reason}'] a").click)
    assert browser.find_element(By.ID, "total").text.startswith(f"{count} rows match")
    first, second = key_of(data, workspace.run), key_of(data, workspace.other_run)
    visit(browser, f"{url}#/compare/{first}/{second}?show=all")
    snap(browser, "compare")
    counts = data.compare(first, second, "all")["counts"]
    assert f"gained by B {counts['gained']}" in browser.find_element(By.ID, "compare-counts").text
    visit(browser, f"{url}#/a/{key_of(data, workspace.train)}")
    snap(browser, "train")
    metrics = {chart.get_attribute("data-metric") for chart in browser.find_elements(By.CSS_SELECTOR, "#charts .chart")}
    assert {"reward", "entropy", "eval/avg@4"} <= metrics
    visit(browser, f"{url}#/a/{key_of(data, workspace.eval_dir)}")
    snap(browser, "eval")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#eval-results tr")) == 3  # a header and two models
    assert not page_errors(browser)


# --------------------------------------------------------------------------- exported, opened from disk


def test_the_static_export_opens_from_disk(browser, data, workspace, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from agentdata.view.export import export_site

    export_site(data, tmp_path / "site", limit=100)
    home = (tmp_path / "site" / "index.html").as_uri()
    visit(browser, home)
    assert len(browser.find_elements(By.CSS_SELECTOR, ".card")) == len(data.catalog.artifacts)
    run = key_of(data, workspace.run)
    act(browser, browser.find_element(By.CSS_SELECTOR, f".card[data-key='{run}'] a").click)
    Select(browser.find_element(By.NAME, "correct")).select_by_value("false")
    act(browser, browser.find_element(By.ID, "apply").click)
    expected = data.rows(run, {"correct": "false"})["total"]
    assert browser.find_element(By.ID, "total").text.startswith(f"{expected} rows match")  # filtered in the page
    browser.find_element(By.NAME, "q").send_keys("print(21 * 4)")
    act(browser, browser.find_element(By.ID, "apply").click)
    assert browser.find_element(By.ID, "total").text.startswith(
        f"{data.rows(run, {'correct': 'false', 'q': 'print(21 * 4)'})['total']} rows"
    )
    act(browser, browser.find_element(By.CSS_SELECTOR, "#rows tr.link").click)
    assert browser.find_element(By.CSS_SELECTOR, ".turn.assistant pre.output").text == "84"
    act(browser, browser.find_element(By.ID, "show-sft").click)
    assert "print(21 * 4)" in "".join(e.text for e in browser.find_elements(By.CSS_SELECTOR, "#mask .tok.trained"))
    hostile = data.rows(run, {"q": "onerror"})["rows"][0]
    visit(browser, f"{home}#/a/{run}/r/{hostile['_row']}")
    no_script_ran(browser)
    assert browser.find_element(By.CSS_SELECTOR, ".turn.user .text").text == XSS_QUESTION
    visit(browser, f"{home}#/a/{run}/p/{hostile['problem_id']}")
    no_script_ran(browser)
    visit(browser, f"{home}#/compare/{run}/{key_of(data, workspace.other_run)}?show=flipped")
    assert browser.find_element(By.ID, "compare-counts").text
    assert not page_errors(browser)
