"""Dashboard fixtures: a fast password hasher, and a real Chromium driven by Playwright against `live_server`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Debian's chromium as root in a closed network: no sandbox, no GPU, and no background calls to Google's hosts.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(autouse=True)
def fast_password_hasher(settings: Any) -> None:
    # Signing in is what these tests do most; the production hasher costs a second a time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """KAGENT_CHROMIUM, else /usr/bin/chromium. No browser is a failure, never a skip: bin/test installs one."""
    path = os.environ.get("KAGENT_CHROMIUM") or "/usr/bin/chromium"
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"No Chromium at {path!r}. Install Debian's chromium (apt-get install chromium) or set KAGENT_CHROMIUM "
            "to a Chromium/Chrome executable; the dashboard's browser tests need a real browser.",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="package")
def browser(chromium_path: str) -> Iterator[Any]:
    """One Chromium for the dashboard's tests; each test gets its own context (cookies, storage) from it.

    Playwright's sync API keeps an asyncio loop running in this thread while it is started, and Django refuses
    ORM calls from a thread with a running loop; the ORM calls a browser test makes are plain sync calls.
    """
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
            try:
                yield browser
            finally:
                browser.close()


def new_page(browser: Any, live_server: Any, **context_options: Any) -> Any:
    context = browser.new_context(base_url=live_server.url, **context_options)
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors  # checked by the tests: a page that throws is a failure
    return page


DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 900}}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
}


@pytest.fixture
def page(browser: Any, live_server: Any) -> Iterator[Any]:
    """A desktop-sized page whose relative URLs go to the live server."""
    page = new_page(browser, live_server, **DESKTOP)
    yield page
    page.context.close()


@pytest.fixture
def phone_page(browser: Any, live_server: Any) -> Iterator[Any]:
    """A phone-sized page (390x844, touch), as on a recent iPhone."""
    page = new_page(browser, live_server, **PHONE)
    yield page
    page.context.close()


SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def screenshot(page: Any, name: str, *, full_page: bool = True) -> None:
    """A screenshot kept as a test artifact: var/screenshots/<name>.png (the whole page, or what is in view)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)
