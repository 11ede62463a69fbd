"""The memory inspector (``/ui``) in a real headless Chromium against a real ``sleepmem
serve``: browse a scope, search it, open a memory's explanation, run a re-consolidation
dry run, forget a memory and get its receipt; a wrong key is refused on screen.

Screenshots go to ``$SLEEPMEM_TEST_ARTIFACTS/ui`` (default ``test-artifacts/ui``), kept as
CI artifacts. Needs Debian's ``chromium`` and the ``playwright`` library (no browser
download); skipped only off CI when Chromium is absent.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support import wait_for

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("SLEEPMEM_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "ui"
KEY = "inspector-key-7f3a"
TENANT, AGENT, USER = "acme", "concierge", "ann"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

if CHROMIUM is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)
import playwright.sync_api as playwright_api  # noqa: E402  (a dev dependency)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``sleepmem serve`` with auth on, holding one consolidated conversation."""
    tmp = tmp_path_factory.mktemp("ui")
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "SLEEPMEM_DATA_DIR": str(tmp / "data"),
        "SLEEPMEM_PORT": str(port),
        "SLEEPMEM_HOST": "127.0.0.1",
        "SLEEPMEM_EMBEDDER": "hashing",
        "SLEEPMEM_AUTH_ENABLED": "true",
        "SLEEPMEM_API_KEYS": f'{{"{TENANT}": "{KEY}"}}',
        "SLEEPMEM_TICK_SECONDS": "0.25",
        "SLEEPMEM_LOG_LEVEL": "WARNING",
    }
    for name in ("SLEEPMEM_REDIS_URL", "SLEEPMEM_DATABASE_URL", "SLEEPMEM_QDRANT_URL"):
        env.pop(name, None)
    log = (tmp / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-c", "from sleepmem.cli import main; main()", "serve"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp,
    )
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {KEY}"}
    scope = {"tenant": TENANT, "agent": AGENT, "user": USER}

    def up() -> bool:
        try:
            return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        assert wait_for(up, timeout=90, poll=0.2), (tmp / "serve.log").read_text()
        events = [
            {**scope, "session": "s1", "kind": "message", "role": "user", "content": text}
            for text in ("Hi, I'm Ann and I live in Berlin.",
                         "I always prefer a window seat.",
                         "I'm allergic to peanuts.")
        ] + [{**scope, "session": "s1", "kind": "session_end", "role": "system", "content": ""}]
        assert httpx.post(f"{url}/v1/events", json=events, headers=auth,
                          timeout=10).status_code == 202

        def consolidated() -> bool:
            listed = httpx.get(f"{url}/v1/inspect/memories", params=scope, headers=auth,
                               timeout=5).json()
            return len(listed["memories"]) >= 2

        assert wait_for(consolidated, timeout=60, poll=0.3)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield launched
        launched.close()


def shot(page: object, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    return path


class TestTheInspectorInABrowser:
    def test_browse_search_explain_dry_run_and_forget(self, server: str, browser: object) -> None:
        page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(f"{server}/ui")
        page.fill("#api-key", KEY)
        page.dispatch_event("#api-key", "change")
        page.fill("#tenant", TENANT)
        page.fill("#agent", AGENT)
        page.fill("#user", USER)
        page.click("#load")
        rows = page.locator("#memories tbody tr")
        rows.first.wait_for(timeout=10_000)
        statements = page.locator("#memories tbody tr td:nth-child(2)").all_inner_texts()
        assert any("Berlin" in s for s in statements), statements
        assert any("peanut" in s.lower() for s in statements), statements
        shot(page, "1-browse")

        page.fill("#query", "Where does Ann live?")
        page.click("#search")
        page.wait_for_selector('#memories[data-view="search: Where does Ann live?"]')
        found = page.locator("#memories tbody tr td:nth-child(2)").all_inner_texts()
        assert found and "Berlin" in found[0], found
        shot(page, "2-search")

        page.click("#show-all")
        page.wait_for_timeout(300)
        berlin = page.locator("#memories tbody tr", has_text="Berlin").first
        berlin.click()
        page.locator("#detail-body").wait_for(state="visible", timeout=10_000)
        assert "Berlin" in page.locator("#d-versions").inner_text()
        assert "I live in Berlin" in page.locator("#d-events").inner_text()
        assert "ADD" in page.locator("#d-audits").inner_text()
        memory_id = page.locator("#d-id").inner_text()
        shot(page, "3-explain")

        page.click("#dry-run")
        page.locator("#jobs tbody tr", has_text="done").first.wait_for(timeout=30_000)
        assert "dry run" in page.locator("#jobs tbody").inner_text()
        shot(page, "4-dry-run")

        page.click("#forget")
        page.locator("#receipt-box").wait_for(state="visible", timeout=15_000)
        receipt = page.locator("#receipt").inner_text()
        assert memory_id in receipt and "content_hash" in receipt
        assert "Berlin" not in receipt  # a receipt holds ids and counts, never content
        # Locator waits, not page functions: the page's CSP forbids evaluating strings.
        page.locator(f'#memories tbody tr[data-id="{memory_id}"]').wait_for(
            state="detached", timeout=15_000
        )
        shot(page, "5-forgotten")
        gone = httpx.get(f"{server}/v1/memories/{memory_id}/explain",
                         headers={"Authorization": f"Bearer {KEY}"}, timeout=5)
        assert gone.status_code == 404
        remaining = page.locator("#memories tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.id)"
        )
        assert remaining and memory_id not in remaining
        page.close()

    def test_a_wrong_key_is_refused_on_screen(self, server: str, browser: object) -> None:
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto(f"{server}/ui")
        page.fill("#api-key", "not-the-key")
        page.dispatch_event("#api-key", "change")
        page.fill("#tenant", TENANT)
        page.click("#load")
        page.locator("#error", has_text="401").wait_for(timeout=15_000)
        assert page.locator("#memories tbody tr").count() == 0
        shot(page, "6-wrong-key")
        page.close()
