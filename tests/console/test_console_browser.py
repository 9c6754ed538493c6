"""The live console in a real headless browser (Debian's chromium + chromium-driver through Selenium;
``scripts/_setup.sh`` installs them): the page loads, shows the demo-like graph's islands, its figures
change between two reads, and the Cancel button ends the graph.

With ``ATOLL_CONSOLE_SCREENSHOT=path`` the page is saved there (how ``docs/console.png`` was made)."""
from __future__ import annotations

import json
import os
import shutil
import urllib.request

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from atoll import console
from atoll.materializer import graph_registry

from .conftest import demo_like


def _chromium():
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    assert binary and driver, "chromium and chromedriver are needed (scripts/_setup.sh installs them with apt-get)"
    o = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1000,640"):
        o.add_argument(arg)
    o.binary_location = binary
    return webdriver.Chrome(options=o, service=Service(driver))


@pytest.fixture
def browser():
    d = _chromium()
    yield d
    d.quit()


@pytest.fixture
def server(no_leaked_threads):
    s = console.serve(port=0)
    yield s
    s.stop()


def test_page_shows_islands_live_figures_and_cancels(mat, server, browser):
    graph_registry.clear_ended()
    done = demo_like().run(mat)
    graph = graph_registry.graphs()[-1].graph
    assert graph.is_running

    api = json.loads(urllib.request.urlopen(server.url + "api/graphs", timeout=10).read())
    # ours by name: a graph of an earlier test that is still ending may be listed before it
    ours = [g for g in api if g["name"] == graph.name]
    assert len(ours) == 1 and {i["name"] for i in ours[0]["islands"]} >= {"enrich", "aggregate"}, api

    browser.get(server.url)
    # the page redraws its tables at each refresh: a cell found just before one is stale when it is read (read again)
    wait = WebDriverWait(browser, 30, ignored_exceptions=(StaleElementReferenceException,))
    section = wait.until(lambda d: d.find_element(By.ID, f"graph-{graph.id}"))
    # the drawing: one box per island, with the stages
    wait.until(lambda d: len(section.find_elements(By.CSS_SELECTOR, "svg g.island")) == 3)
    boxes = {g.get_attribute("data-island") for g in section.find_elements(By.CSS_SELECTOR, "svg g.island")}
    assert boxes == {"enrich", "aggregate", f"{graph.name}-island-0"}
    assert "tumbling_window" in section.find_element(By.CSS_SELECTOR, "svg").text

    def out_of(name):
        cells = section.find_elements(By.CSS_SELECTOR, f'tr[data-island="{name}"] td.out')
        return cells[0].text if cells else None

    first = wait.until(lambda d: out_of("enrich"))
    second = wait.until(lambda d: (lambda t: t if t and t != first else None)(out_of("enrich")))
    assert first != second  # the figures change between two reads
    wait.until(lambda d: section.find_element(By.CSS_SELECTOR, 'text.figures[data-island="aggregate"]').text)
    rate = wait.until(lambda d: (lambda t: t if t not in ("", "–") else None)(
        section.find_element(By.CSS_SELECTOR, 'tr[data-island="aggregate"] td.rate-in').text))
    assert rate != "0"

    if os.environ.get("ATOLL_CONSOLE_SCREENSHOT"):
        browser.save_screenshot(os.environ["ATOLL_CONSOLE_SCREENSHOT"])

    section.find_element(By.CSS_SELECTOR, "button.cancel").click()
    assert graph.wait(30), "the cancel button did not end the graph"
    assert done.exception(10) is not None
    wait.until(lambda d: section.find_element(By.CSS_SELECTOR, ".state").text != "running")
    assert not section.find_element(By.CSS_SELECTOR, "button.cancel").is_enabled()
