"""The local page in a real browser: headless Chromium (Debian's ``chromium``)
driven by Selenium through Debian's ``chromedriver``, against a daemon
syncing with devserver.

* each action end to end: *keep live*, *take other*, *merge by hand* from
  the conflict's page; the server's file afterwards, the archived copy gone
  from both sides, the overview back to "No conflicts" and the status to 0;
* a live update: a new conflict made while the overview is open appears
  without a reload (server-sent events);
* 320 px wide: nothing wider than the window; the keyboard alone (Tab to
  the action, Enter) settles a conflict; every request goes to the page's
  own origin.

Screenshots of each state go to ``artifacts/panel/``.  Missing programs make
the tests FAIL with a pointer to ``.ci/desktop-deps.sh`` (never a silent skip).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon_helpers import isolated_env, seed_daemon, wait_for  # noqa: F401
from panel_helpers import LOCAL, REL, REMOTE, Conflicted, make_conflict

pytestmark = [pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "artifacts" / "panel"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium (1100×900), driven through Debian's chromedriver only."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: run `bash .ci/desktop-deps.sh .venv` (installs chromium "
                    "and chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="ohsync-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1100,900", f"--user-data-dir={profile}", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def shot(driver: Any, name: str) -> Path:
    """Save a screenshot of the whole page into the artifacts folder."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    height = driver.execute_script("return Math.max(document.body.scrollHeight, 400)")
    width = driver.get_window_size()["width"]
    driver.set_window_size(width, min(int(height) + 120, 2400))
    driver.save_screenshot(str(path))
    return path


def open_page(c: Conflicted, driver: Any) -> str:
    """Open the page the way `ohsync panel` does: the address from `ohsync panel --url`."""
    r = c.daemon.cli("panel", "--url")
    assert r.returncode == 0, r.stderr
    url = r.stdout.strip()
    assert url.startswith("http://127.0.0.1:") and "/auth#" in url
    driver.get(url)
    wait_for(lambda: driver.find_elements("id", "overall"), timeout=20, what="the overview")
    assert url.split("#", 1)[1] not in driver.current_url  # the secret left the address bar
    return url.split("/auth#")[0]


def click(driver: Any, by: str, value: str, what: str) -> None:
    """Click the element once it is there (the live page may redraw it meanwhile: look again)."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt() -> bool:
        found = driver.find_elements(by, value)
        if not found:
            return False
        try:
            found[0].click()
        except StaleElementReferenceException:
            return False
        return True

    wait_for(attempt, timeout=20, what=what)


def text_of(driver: Any, element_id: str) -> str:
    found = driver.find_elements("id", element_id)
    return found[0].text if found else ""


def open_conflict(c: Conflicted, driver: Any) -> None:
    click(driver, "link text", REL, "the conflict's link")
    wait_for(lambda: driver.find_elements("id", "keep-live"), timeout=20, what="the conflict's page")


def settled(c: Conflicted, driver: Any, expected: bytes) -> None:
    """The action's answer, the server's file, the archived copy gone, 0 conflicts."""
    wait_for(lambda: "verified on the server" in text_of(driver, "action-result"), timeout=60,
             what="the action's answer", interval=0.2)
    assert c.server(REL) == expected
    assert (c.setup.mirror / REL).read_bytes() == expected
    assert c.server(c.archived) is None and not (c.setup.mirror / c.archived).exists()
    assert c.status()["conflicts"] == 0


def test_keep_live_from_the_page(seed_daemon, browser) -> None:
    c = make_conflict(seed_daemon)
    open_page(c, browser)
    assert REL in text_of(browser, "conflict-list")
    overall = text_of(browser, "overall")
    assert "1 conflict needs you" in overall and "compare both versions below" in overall
    assert "ohsync panel" not in overall  # this is the panel: no pointer to itself
    shot(browser, "overview-one-conflict")
    open_conflict(c, browser)
    table = browser.find_element("id", "diff")
    assert "bread and butter" in table.text and "rye bread" in table.text
    assert browser.find_elements("css selector", "tr.row-change")  # the differing line is marked
    assert browser.find_elements("css selector", "tr.row-insert")  # "tea" only in the other version
    shot(browser, "conflict-side-by-side")
    browser.find_element("id", "keep-live").click()
    settled(c, browser, LOCAL)
    shot(browser, "conflict-kept-live")
    click(browser, "id", "back", "the way back")
    wait_for(lambda: browser.find_elements("id", "no-conflicts"), timeout=20, what="No conflicts")
    shot(browser, "overview-no-conflicts")


def test_take_other_from_the_page(seed_daemon, browser) -> None:
    c = make_conflict(seed_daemon)
    open_page(c, browser)
    open_conflict(c, browser)
    browser.find_element("id", "take-other").click()
    settled(c, browser, REMOTE)
    assert ".trash/" in text_of(browser, "action-result")  # says where the replaced version is
    shot(browser, "conflict-took-other")
    trash = c.setup.srv.tree(c.setup.repo_id)
    assert trash.get("/.trash/" + REL) == LOCAL  # the replaced live version is archived, not dropped


def test_merge_by_hand_from_the_page(seed_daemon, browser) -> None:
    c = make_conflict(seed_daemon)
    open_page(c, browser)
    open_conflict(c, browser)
    browser.find_element("id", "merge").click()
    editor = wait_for(lambda: browser.find_elements("id", "editor"), timeout=10, what="the editor")[0]
    prefilled = editor.get_property("value")
    assert "<<<<<<< live" in prefilled and "bread and butter" in prefilled and "rye bread" in prefilled
    shot(browser, "conflict-merge-editor")
    merged = "milk\nrye bread and butter\neggs\ntea\n"
    editor.clear()
    editor.send_keys(merged)
    browser.find_element("id", "save-merge").click()
    settled(c, browser, merged.encode())
    shot(browser, "conflict-merged")


def test_a_new_conflict_appears_without_reload(seed_daemon, browser) -> None:
    c = make_conflict(seed_daemon)
    open_page(c, browser)
    browser.execute_script("window.__sameDocument = true")
    wait_for(lambda: text_of(browser, "live") == "live", timeout=20, what="the event stream")
    # a second file edited on both sides while the page stays open
    rel2 = "notes/shopping.txt"
    d, srv, repo = c.daemon, c.setup.srv, c.setup.repo_id
    (c.setup.mirror / rel2).write_bytes(b"one\n")
    wait_for(lambda: srv.tree(repo).get("/" + rel2) == b"one\n", timeout=60, what="the new file on the server")
    assert d.cli("pause").returncode == 0
    (c.setup.mirror / rel2).write_bytes(b"one here\n")
    srv.put_file(repo, "/" + rel2, b"one there\n")
    assert d.cli("resume").returncode == 0
    wait_for(lambda: rel2 in text_of(browser, "conflict-list"), timeout=60, what="the new conflict on the open page",
             interval=0.2)
    assert browser.execute_script("return window.__sameDocument === true")  # no reload happened
    assert "Conflicts (2)" in browser.find_element("id", "h-conflicts").text
    shot(browser, "overview-live-update")


def test_narrow_window_and_keyboard_only(seed_daemon, browser) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    c = make_conflict(seed_daemon)
    browser.set_window_size(320, 800)
    origin = open_page(c, browser)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= \
        browser.execute_script("return window.innerWidth")
    shot(browser, "overview-320px")
    # the keyboard alone: Tab to the conflict's link, Enter; Tab to "Keep the live version", Enter
    body = browser.find_element("tag name", "body")
    body.click()

    def tab_to(element_id: str | None, link_text: str | None = None, limit: int = 40) -> None:
        for _ in range(limit):
            ActionChains(browser).send_keys(Keys.TAB).perform()
            active = browser.switch_to.active_element
            if (element_id and active.get_attribute("id") == element_id) or (link_text and active.text == link_text):
                return
        raise AssertionError(f"Tab never reached {element_id or link_text}")

    tab_to(None, REL)
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    wait_for(lambda: browser.find_elements("id", "keep-live"), timeout=20, what="the conflict's page")
    assert browser.execute_script("return document.documentElement.scrollWidth") <= \
        browser.execute_script("return window.innerWidth")
    shot(browser, "conflict-320px")
    tab_to("keep-live")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    settled(c, browser, LOCAL)
    shot(browser, "conflict-320px-resolved")
    # no request to anything but the page's own origin (chrome://, data: and about: are the
    # browser's own new-tab page, never a request out)
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if not url.startswith(("chrome://", "chrome-untrusted://", "about:", "data:")):
                urls.append(url)
    assert urls and all(u.startswith(origin + "/") for u in urls), [u for u in urls if not u.startswith(origin)]


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A valid PNG of one colour (zlib and struct only)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_an_image_conflict_shows_both_thumbnails_and_takes_the_other(seed_daemon, browser) -> None:
    rel = "Files/chart.png"
    ours, theirs = _png(60, 30, (200, 40, 40)), _png(30, 60, (40, 90, 200))
    setup = seed_daemon(files={rel: _png(10, 10, (0, 0, 0))})
    d = setup.start(wait="idle")
    assert d.cli("pause").returncode == 0
    (setup.mirror / rel).write_bytes(ours)
    setup.srv.put_file(setup.repo_id, "/" + rel, theirs)
    assert d.cli("resume").returncode == 0
    items = wait_for(lambda: json.loads(d.cli("conflicts", "--json").stdout), timeout=90, what="the conflict")
    c = Conflicted(setup, d, items[0]["archived"])
    d.wait_state("idle", "attention", timeout=60)
    open_page(c, browser)
    click(browser, "link text", rel, "the conflict's link")
    wait_for(lambda: browser.find_elements("id", "take-other"), timeout=20, what="the conflict's page")
    loaded = "return arguments[0].complete && arguments[0].naturalWidth"
    thumbs = wait_for(lambda: [i for i in browser.find_elements("css selector", "img.thumb")
                               if browser.execute_script(loaded, i)],
                      timeout=20, what="two loaded thumbnails")
    sizes = sorted(browser.execute_script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", i)
                   for i in thumbs)
    assert sizes == [[30, 60], [60, 30]]
    assert not browser.find_elements("id", "merge")  # no editor for a binary file
    assert "SHA-256" in browser.find_element("id", "main").text
    shot(browser, "conflict-image")
    browser.find_element("id", "take-other").click()
    wait_for(lambda: "verified on the server" in text_of(browser, "action-result"), timeout=60, what="the answer")
    assert setup.srv.tree(setup.repo_id)["/" + rel] == theirs and (setup.mirror / rel).read_bytes() == theirs
    assert d.status()["conflicts"] == 0


def test_activity_memory_and_held_deletions(seed_daemon, browser) -> None:
    from selenium.webdriver.support.ui import Select

    from daemon_helpers import DEMO_LIBRARY

    c = make_conflict(seed_daemon, tree=DEMO_LIBRARY, safety={"max_delete_files": 2})
    open_page(c, browser)
    # activity, filtered by kind
    browser.find_element("id", "nav-activity").click()
    wait_for(lambda: browser.find_elements("id", "activity-list"), timeout=20, what="the activity list")
    assert "conflict" in text_of(browser, "activity-list") and "download" in text_of(browser, "activity-list")
    Select(browser.find_element("id", "filter-kind")).select_by_value("conflict")
    wait_for(lambda: "download" not in text_of(browser, "activity-list") and REL in text_of(browser, "activity-list"),
             timeout=20, what="only the conflict's lines")
    shot(browser, "activity-conflicts")
    # memory: search, then read one entity
    browser.find_element("id", "nav-memory").click()
    box = wait_for(lambda: browser.find_elements("id", "memory-q"), timeout=20, what="the search box")[0]
    box.send_keys("哈希表")
    box.submit()
    results = wait_for(lambda: browser.find_elements("css selector", "#memory-results li a"), timeout=30,
                       what="search results")
    results[0].click()
    wait_for(lambda: browser.find_elements("css selector", "#memory-results article pre"), timeout=20,
             what="the entity's text")
    assert "哈希" in browser.find_element("id", "memory-results").text
    shot(browser, "memory-read")
    # held deletions appear live, and Confirm carries them out
    browser.find_element("id", "nav-overview").click()
    wait_for(lambda: browser.find_elements("id", "overall"), timeout=20, what="the overview")
    gone = ["preferences/沟通风格偏好.md", "preferences/作息与提醒偏好.md", "knowledge/校园服务入口速查.md"]
    for rel in gone:
        (c.setup.mirror / rel).unlink()
    assert c.daemon.cli("refresh").returncode == 0
    wait_for(lambda: all(rel in browser.find_element("id", "h-held").find_element("xpath", "..").text for rel in gone),
             timeout=60, what="the held deletions", interval=0.2)
    # the daemon's "error" event (held deletions) is news on a live stream, not a lost connection
    assert text_of(browser, "live") == "live"
    shot(browser, "overview-held-deletions")
    click(browser, "id", "confirm-deletes", "Confirm these deletions")
    wait_for(lambda: all("/" + rel not in c.setup.srv.tree(c.setup.repo_id) for rel in gone), timeout=60,
             what="the deletions carried out on the server")
    wait_for(lambda: not browser.find_elements("id", "confirm-deletes"), timeout=30, what="the held list gone")


def test_held_deletions_restored_from_the_page(seed_daemon, browser) -> None:
    from daemon_helpers import DEMO_LIBRARY

    c = make_conflict(seed_daemon, tree=DEMO_LIBRARY, safety={"max_delete_files": 2})
    mirror, srv, repo = c.setup.mirror, c.setup.srv, c.setup.repo_id
    gone = {rel: (mirror / rel).read_bytes() for rel in
            ("preferences/沟通风格偏好.md", "preferences/作息与提醒偏好.md", "knowledge/校园服务入口速查.md")}
    open_page(c, browser)
    for rel in gone:
        (mirror / rel).unlink()
    assert c.daemon.cli("refresh").returncode == 0
    wait_for(lambda: browser.find_elements("id", "restore-deletes"), timeout=60, what="the held deletions",
             interval=0.2)
    click(browser, "id", "restore-deletes", "Restore these files")
    wait_for(lambda: "3 file(s) restored" in text_of(browser, "flash"), timeout=60, what="the answer", interval=0.2)
    assert all((mirror / rel).read_bytes() == data for rel, data in gone.items())
    assert all(srv.tree(repo)["/" + rel] == data for rel, data in gone.items())  # never deleted on the server
    wait_for(lambda: not browser.find_elements("id", "restore-deletes"), timeout=60, what="the held list gone")
    wait_for(lambda: c.status()["held_deletes"] == 0, timeout=60, what="nothing held")
    shot(browser, "overview-held-restored")
