"""The dataflow page in a real headless browser: Debian's chromium, driven by Selenium.

The browser is the system's (``/usr/bin/chromium`` and ``/usr/bin/chromedriver``, from the
``chromium`` and ``chromium-driver`` packages that ``.ci/run`` installs); nothing is
downloaded at run time (Selenium Manager is not asked: the driver's path is given). Where
they are missing the tests are skipped, saying so.

Screenshots go to ``test-artifacts/ui/`` at the repository root (ignored by git); the run's
summary prints the directory.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
ARTIFACTS = Path(os.environ.get("FRONTIER_UI_ARTIFACTS", REPO / "test-artifacts" / "ui"))
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WRITTEN: list[Path] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if WRITTEN:
        terminalreporter.write_line(
            f"dataflow page screenshots ({len(WRITTEN)}): {ARTIFACTS}/ "
            + ", ".join(p.name for p in WRITTEN)
        )


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (it is in the dev extra: pip install -e '.[dev]')"
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if absent:
        return (
            f"no browser: {', '.join(absent)} missing (install Debian's chromium and "
            "chromium-driver, as .ci/run does: apt-get install -y chromium chromium-driver)"
        )
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless chromium (one per module), with its console log kept."""
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1600,1000",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_script_timeout(10)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def screenshot(browser: Any, request: pytest.FixtureRequest) -> Callable[[str], Path]:
    """Save the page as ``test-artifacts/ui/<test>-<name>.png`` (printed in the summary)."""

    def save(name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{request.node.name}-{name}.png"
        assert browser.save_screenshot(str(path)), path
        WRITTEN.append(path)
        return path

    return save


def console_errors(browser: Any) -> list[str]:
    """The console's errors since the last call (the log is drained by reading it)."""
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def wait_for(browser: Any, check: Callable[[Any], Any], timeout: float, what: str) -> Any:
    """``check(browser)``'s first truthy value within ``timeout`` seconds (polled every 20 ms)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check(browser)
        if value:
            return value
        if time.monotonic() > deadline:
            state = browser.execute_script("return JSON.stringify(window.frontierUI || null)")
            raise AssertionError(f"{what}: not within {timeout} s (page state: {state})")
        time.sleep(0.02)


def page_state(browser: Any) -> Any:
    """The page's own counters (``window.frontierUI``)."""
    return json.loads(browser.execute_script("return JSON.stringify(window.frontierUI)"))
