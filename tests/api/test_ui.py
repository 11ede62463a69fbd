"""The memory inspector (``/ui``) in a real headless Chromium against a real ``sleepmem
serve``: browse a scope, search it, open a memory's explanation, edit it (a new version
with trust 'human'), pin and unpin it, mark another memory wrong, run a re-consolidation
dry run, forget a memory and get its receipt, and settle a conflict set by keeping one
side; a wrong key is refused on screen.

Screenshots go to ``$SLEEPMEM_TEST_ARTIFACTS/ui`` (default ``test-artifacts/ui``), kept as
CI artifacts. Needs Debian's ``chromium`` and the ``playwright`` library (no browser
download); skipped only off CI when Chromium is absent.
"""

from __future__ import annotations

import json
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
from support import stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
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
    """A real ``sleepmem serve`` with auth on, holding one consolidated conversation in
    which the user's email and a trusted CRM record disagree (a conflict set)."""
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
                         "I'm allergic to peanuts.",
                         "My email is ann@home.example, use that.")
        ] + [
            {**scope, "session": "s1", "kind": "tool_result", "role": "tool",
             "meta": {"source": "crm", "trusted": True},
             "content": json.dumps({"profile": {"user": USER, "email": "ann@work.example"}})},
            {**scope, "session": "s1", "kind": "session_end", "role": "system", "content": ""},
        ]
        assert httpx.post(f"{url}/v1/events", json=events, headers=auth,
                          timeout=10).status_code == 202

        def consolidated() -> bool:
            listed = httpx.get(f"{url}/v1/inspect/memories", params=scope, headers=auth,
                               timeout=5).json()
            return len(listed["memories"]) >= 2 and len(listed["conflicts"]) == 1

        assert wait_for(consolidated, timeout=60, poll=0.3)
        yield url
    finally:
        stop(proc, signal.SIGINT)
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


def rows_with(page: object, text: str) -> object:
    return page.locator("#memories tbody tr", has_text=text)  # type: ignore[attr-defined]


def row(page: object, memory_id: str) -> object:
    return page.locator(f'#memories tbody tr[data-id="{memory_id}"]')  # type: ignore[attr-defined]


def done(page: object, text: str) -> None:
    """Every action ends by reloading the list, reopening the memory, then this notice."""
    page.locator("#notice", has_text=text).wait_for(timeout=15_000)  # type: ignore[attr-defined]


class TestTheInspectorInABrowser:
    def test_browse_search_explain_edit_pin_mark_wrong_forget_and_resolve(
        self, server: str, browser: object
    ) -> None:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
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
        conflict = page.locator("#conflicts .conflict")
        assert conflict.count() == 1
        assert conflict.locator(".side").count() == 2
        assert "home.example" in conflict.inner_text() and "work.example" in conflict.inner_text()
        shot(page, "1-browse")

        page.fill("#query", "Where does Ann live?")
        page.click("#search")
        page.wait_for_selector('#memories[data-view="search: Where does Ann live?"]')
        found = page.locator("#memories tbody tr td:nth-child(2)").all_inner_texts()
        assert found and "Berlin" in found[0], found
        shot(page, "2-search")

        page.click("#show-all")
        page.wait_for_selector('#memories[data-view="list"]')
        rows_with(page, "Berlin").first.click()
        page.locator("#detail-body").wait_for(state="visible", timeout=10_000)
        assert "Berlin" in page.locator("#d-versions").inner_text()
        assert "I live in Berlin" in page.locator("#d-events").inner_text()
        assert "ADD" in page.locator("#d-audits").inner_text()
        original = page.locator("#d-id").inner_text()
        shot(page, "3-explain")

        # Edit: the statement becomes a new version with trust 'human'; the old one stays
        # in the history as superseded.
        page.click("#edit")
        assert "Berlin" in page.input_value("#edit-text")
        page.fill("#edit-text", "The user lives in Berlin-Kreuzberg.")
        page.fill("#edit-reason", "more precise")
        page.click("#save-edit")
        done(page, "Saved as version 2")
        edited = page.locator("#d-id").inner_text()
        assert edited != original
        assert page.locator("#d-trust").inner_text() == "human"
        assert "written by a person" in page.locator("#d-why").inner_text()
        versions = page.locator("#d-versions").inner_text()
        assert "Kreuzberg" in versions and "superseded" in versions
        assert "edited by a person: more precise" in page.locator("#d-audits").inner_text()
        assert "superseded" in row(page, original).inner_text()
        assert "active" in row(page, edited).inner_text()
        shot(page, "4-edit")

        # Pin, then unpin: the list and the detail say so each time.
        page.click("#pin")
        done(page, "Pinned")
        assert page.locator("#pin").inner_text() == "Unpin"
        assert "pinned" in row(page, edited).inner_text()
        assert "pinned" in page.locator("#d-status").inner_text()
        assert "PIN" in page.locator("#d-audits").inner_text()
        shot(page, "5-pin")
        page.click("#pin")
        done(page, "Unpinned")
        assert page.locator("#pin").inner_text() == "Pin"
        assert "pinned" not in row(page, edited).inner_text()

        # Mark wrong: the window-seat preference stops being current.
        rows_with(page, "window").first.click()
        page.locator("#d-versions", has_text="window").wait_for(timeout=10_000)
        seat = page.locator("#d-id").inner_text()
        page.click("#wrong")
        done(page, "Marked wrong")
        assert "superseded" in row(page, seat).inner_text()
        assert "INVALIDATE" in page.locator("#d-audits").inner_text()
        assert page.locator("#edit").is_disabled()  # history is not corrected
        shot(page, "6-mark-wrong")

        page.click("#dry-run")
        page.locator("#jobs tbody tr", has_text="done").first.wait_for(timeout=30_000)
        assert "dry run" in page.locator("#jobs tbody").inner_text()
        shot(page, "7-dry-run")

        page.locator(f'#memories tbody tr[data-id="{edited}"]').click()
        page.locator("#d-id", has_text=edited).wait_for(timeout=10_000)
        page.click("#forget")
        page.locator("#receipt-box").wait_for(state="visible", timeout=15_000)
        receipt = page.locator("#receipt").inner_text()
        assert edited in receipt and "content_hash" in receipt
        assert "Berlin" not in receipt  # a receipt holds ids and counts, never content
        # Locator waits, not page functions: the page's CSP forbids evaluating strings.
        for gone_id in (edited, original):  # the edit and the version before it
            page.locator(f'#memories tbody tr[data-id="{gone_id}"]').wait_for(
                state="detached", timeout=15_000
            )
        shot(page, "8-forgotten")
        gone = httpx.get(f"{server}/v1/memories/{edited}/explain",
                         headers={"Authorization": f"Bearer {KEY}"}, timeout=5)
        assert gone.status_code == 404
        remaining = page.locator("#memories tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.id)"
        )
        assert remaining and edited not in remaining

        # The conflict set: keep the address the user gave; the CRM's is invalidated.
        home = conflict.locator(".side", has_text="home.example")
        work = conflict.locator(".side", has_text="work.example")
        kept, other = home.get_attribute("data-id"), work.get_attribute("data-id")
        assert kept and other
        shot(page, "9-conflict")
        home.locator("button.keep").click()
        done(page, "resolved")
        assert page.locator("#conflicts .conflict").count() == 0
        assert "active" in row(page, kept).inner_text()
        assert "superseded" in row(page, other).inner_text()
        assert page.locator("#d-id").inner_text() == kept
        assert page.locator("#d-trust").inner_text() == "human"
        assert "RESOLVE" in page.locator("#d-audits").inner_text()
        assert "confirmed by a person" in page.locator("#d-why").inner_text()
        shot(page, "10-conflict-resolved")
        loser = httpx.get(f"{server}/v1/memories/{other}",
                          headers={"Authorization": f"Bearer {KEY}"}, timeout=5).json()
        assert loser["status"] == "superseded" and loser["superseded_by"] == kept
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
        shot(page, "11-wrong-key")
        page.close()
