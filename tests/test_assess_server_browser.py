"""The assessment server's pages in real headless Chromium (selenium): two assessors at once
judging with the keyboard, a judgment changed, hostile texts inert, the organizer's progress
page, and the layout at 1280x800 (screenshot)."""

from __future__ import annotations

import csv
import io
from collections import Counter

import pytest
from browser import needs_chromium, start_browser, wait_for

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from assess_server_fixtures import Server, add_users, db_url, small_pool  # noqa: E402, F401

pytestmark = needs_chromium


def _login(driver, base, name, password):
    from selenium.webdriver.common.by import By

    driver.get(base + "/login")
    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "login").click()


def _shown(driver) -> str:
    from selenium.webdriver.common.by import By

    el = driver.find_element(By.ID, "pair-id")
    return el.text if driver.find_element(By.ID, "task").is_displayed() else ""


def _press(driver, key: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.TAG_NAME, "body").send_keys(key)


def test_two_assessors_judge_with_the_keyboard(tmp_path, cli, browser, db_url):  # noqa: F811
    from selenium.webdriver.common.by import By

    d = small_pool(tmp_path, cli, queries=2, docs=4, hostile=True)
    people = add_users(db_url, ["ann", "bob"])
    people.update(add_users(db_url, ["olga"], role="organizer"))
    server = Server(d["pool"], db_url, "--assessors", "2", log=tmp_path / "s.log").start()
    second = start_browser()
    try:
        drivers = {"ann": browser, "bob": second}
        for name, drv in drivers.items():
            drv.delete_all_cookies()
            _login(drv, server.url, name, people[name])
        for drv in drivers.values():
            wait_for(lambda drv=drv: drv.current_url.endswith("/assess") and _shown(drv))
        judged: dict[str, list[tuple[str, int]]] = {"ann": [], "bob": []}
        # turn about, each presses a digit key for the pair on their screen
        for step in range(5):
            for name, drv in drivers.items():
                pid = _shown(drv)
                label = 1 + (step + len(name)) % 5
                _press(drv, str(label))
                judged[name].append((pid, label))
                wait_for(lambda drv=drv, pid=pid: _shown(drv) not in ("", pid))
                # hostile texts stay text: no element injected, no script run
                assert drv.execute_script("return window.pwned === undefined")
                assert not drv.find_elements(By.CSS_SELECTOR, "#task script, #task img")
                marks = drv.find_elements(By.CSS_SELECTOR, "#query mark.q")
                assert len(marks) == 1 and marks[0].text.startswith("q")
        # ann changes her last judgment: u, then a digit
        _press(browser, "u")
        wait_for(lambda: browser.find_element(By.ID, "mode").text.startswith("Changing"))
        last_pid, last_label = judged["ann"][-1]
        assert _shown(browser) == last_pid
        chosen = browser.find_element(By.CSS_SELECTOR, "#scale button.chosen")
        assert chosen.get_attribute("data-label") == str(last_label)
        new_label = 1 if last_label != 1 else 2
        _press(browser, str(new_label))
        wait_for(lambda: browser.find_element(By.ID, "mode").text == "New pair")
        judged["ann"][-1] = (last_pid, new_label)

        # the layout at 1280x800
        browser.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False},
        )
        try:
            png = tmp_path / "assess-1280x800.png"
            browser.save_screenshot(str(png))
            _check_layout(browser, png)
        finally:
            browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

        # the judgments landed: ann's and bob's, each once, the change included
        out = tmp_path / "j.csv"
        assert cli("assess", "export", "--db", db_url, "-o", out).exit_code == 0
        rows = list(csv.DictReader(io.StringIO(out.read_text())))
        got = {(r["pair_id"], r["worker_id"]): int(r["label"]) for r in rows}
        want = {(p, n): lab for n, js in judged.items() for p, lab in js}
        assert got == want
        assert max(Counter((r["pair_id"], r["worker_id"]) for r in rows).values()) == 1

        # the organizer's progress page
        browser.find_element(By.ID, "logout").click()
        wait_for(lambda: browser.current_url.endswith("/login"))
        _login(browser, server.url, "olga", people["olga"])
        wait_for(lambda: browser.current_url.endswith("/progress"))
        table = browser.find_element(By.ID, "assessors")
        cells = {
            r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[1].text
            for r in table.find_elements(By.TAG_NAME, "tr")[1:]
        }
        assert cells == {"ann": "5", "bob": "5"}
        assert "10 judgments" in browser.find_element(By.ID, "summary").text
        assert browser.find_elements(By.CSS_SELECTOR, "#cohen tr")  # the agreement table is there
        # an assessor's session cannot see it
        second.get(server.url + "/progress")
        assert "organizers" in second.find_element(By.TAG_NAME, "body").text
    finally:
        second.quit()
        browser.delete_all_cookies()
        server.stop()


def _check_layout(driver, png) -> None:
    """At 1280x800 everything an assessor needs is on screen without scrolling, side by side
    with the recent judgments, nothing overlapping; the mention's highlight is painted."""
    from PIL import Image
    from selenium.webdriver.common.by import By

    assert driver.execute_script("return [window.innerWidth, window.innerHeight]") == [1280, 800]

    def box(css):
        r = driver.find_element(By.CSS_SELECTOR, css).rect
        return r["x"], r["y"], r["x"] + r["width"], r["y"] + r["height"]

    def inside(b):
        return b[0] >= 0 and b[1] >= 0 and b[2] <= 1280 and b[3] <= 800

    def apart(a, b):
        return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]

    parts = {c: box(c) for c in ("#query", "#candidate", "#scale", "aside.recent")}
    for css, b in parts.items():
        assert inside(b), (css, b)
    from cmrkit.judgments.scale import LIKERT

    shown = driver.find_elements(By.CSS_SELECTOR, "#scale button")
    assert [b.text for b in shown] == [f"{v} {name}" for v, name in LIKERT]  # the API's scale
    buttons = [b.rect for b in shown]
    assert len(buttons) == 5 and len({round(b["y"]) for b in buttons}) == 1  # one row
    assert all(b["x"] + b["width"] <= 1280 and b["y"] + b["height"] <= 800 for b in buttons)
    names = list(parts)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert apart(parts[a], parts[b]), (a, b)
    assert parts["aside.recent"][0] >= parts["#candidate"][2]  # beside, not below
    image = Image.open(png).convert("RGB")
    assert image.size == (1280, 800)
    x0, y0, x1, y1 = (int(v) for v in box("#query mark.q"))
    pixels = [image.getpixel((x, y)) for x in range(x0, x1) for y in range(y0, y1)]
    yellow = sum(1 for r, g, b in pixels if r > 230 and g > 200 and b < 150)  # #ffe066
    assert yellow > len(pixels) // 3, (yellow, len(pixels))
