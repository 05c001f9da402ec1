"""coding_app() in a real browser: headless Chromium driven by Selenium against
the app running in a background R process on 127.0.0.1.

One coder codes the 20 drawn texts by keys and clicks, marks one uncodable and
changes one code by going back; the R process is killed mid-way and started
again, and nothing is lost; two coders then code at once with overlap; a third
adjudicates their disagreements; read_codes() must then give, row by row,
what was clicked, and feed label_regression() as it is.
"""

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCREENSHOT = Path(os.environ.get("CODING_APP_SCREENSHOT", ROOT / "build" / "test-results" / "coding-app.png"))
N_TEXTS = 20
N_DOUBLE = 5  # overlap 0.25 of 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """The app in its own R process (and process group, so that a kill takes all of it)."""

    def __init__(self, file, *task):
        self.port = free_port()
        self.log = open(Path(file).with_suffix(f".{self.port}.log"), "w")
        self.process = subprocess.Popen(["Rscript", str(HERE / "serve.R"), str(file), str(self.port), *task],
                                        stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(self.url(), timeout=2).read()
                return
            except OSError:
                if self.process.poll() is not None or time.time() > deadline:
                    raise RuntimeError("the app did not start: " + Path(self.log.name).read_text())
                time.sleep(0.2)

    def url(self, query=""):
        return f"http://127.0.0.1:{self.port}/{query}"

    def kill(self):
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()


def chromium():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1200,680",
                 "--user-data-dir=" + tempfile.mkdtemp(prefix="chromium-")]:
        options.add_argument(flag)
    return webdriver.Chrome(service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"),
                            options=options)


def ana_code(row):
    return "no" if row % 3 == 0 else "yes"


def ben_code(row):
    """Ben disagrees with Ana on even rows."""
    code = ana_code(row)
    return ("yes" if code == "no" else "no") if row % 2 == 0 else code


class Coder:
    """One coder's browser tab, and what they clicked: {row: label, or None for cannot code}."""

    def __init__(self, driver, url, name):
        self.driver, self.name, self.clicked = driver, name, {}
        driver.switch_to.new_window("tab")
        self.handle = driver.current_window_handle
        driver.get(url)
        self.wait_for_screen()

    def focus(self):
        self.driver.switch_to.window(self.handle)

    def wait_for_screen(self, previous_unit=None):
        def ready(driver):
            texts = driver.find_elements(By.CSS_SELECTOR, ".nl-text")
            if texts:
                unit = texts[0].get_attribute("data-unit")
                buttons = driver.find_elements(By.CSS_SELECTOR, ".nl-label, #nl-save")
                return unit != previous_unit and buttons and buttons[0].is_enabled()
            return bool(driver.find_elements(By.CSS_SELECTOR, ".nl-welcome h1"))
        WebDriverWait(self.driver, 20).until(ready)

    def done(self):
        self.focus()
        headings = self.driver.find_elements(By.CSS_SELECTOR, ".nl-welcome h1")
        return bool(headings) and headings[0].text.startswith(("Done", "Nothing"))

    def unit(self):
        return self.driver.find_element(By.CSS_SELECTOR, ".nl-text").get_attribute("data-unit")

    def row(self):
        return int(re.match(r"Text (\d+)\.", self.driver.find_element(By.CSS_SELECTOR, ".nl-text").text).group(1))

    def count(self):
        return self.driver.find_element(By.CSS_SELECTOR, ".nl-count").text

    def code(self, label, by_key, note=None):
        row, unit = self.row(), self.unit()
        if note:
            self.driver.find_element(By.ID, "nl-note").send_keys(note)
        if by_key:
            ActionChains(self.driver).send_keys("1" if label == "yes" else "2").perform()
        else:
            self.driver.find_element(By.CSS_SELECTOR, f".nl-label[data-value='{label}']").click()
        self.clicked[row] = label
        self.wait_for_screen(unit)
        return row

    def cannot_code(self, reason):
        row, unit = self.row(), self.unit()
        self.driver.find_element(By.ID, "nl-reason").send_keys(reason)
        self.driver.find_element(By.ID, "nl-cannot").click()
        self.clicked[row] = None
        self.wait_for_screen(unit)
        return row


def rscript(*args):
    return subprocess.run(["Rscript", *map(str, args)], check=True, capture_output=True, text=True).stdout


def test_coding_app_codes_resumes_shares_and_adjudicates():
    workdir = Path(tempfile.mkdtemp(prefix="coding-app-"))
    file = workdir / "codes.sqlite"
    driver = chromium()
    app = App(file)
    try:
        # --- one coder: keys and clicks, one text uncodable, one code changed by going back
        ana = Coder(driver, app.url("?coder=ana"), "ana")
        assert ana.count() == f"1 of {N_TEXTS}"
        model_probs = rscript("-e", "source('%s'); cat(format(browser_data()$.prob_yes))" % (HERE / "sample.R"))
        page = driver.page_source
        assert not any(p in page for p in model_probs.split()), "a model probability reached the page"
        uncodable_row = None
        for step in range(12):
            if step == 6:
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(SCREENSHOT))
            if step == 4:
                uncodable_row = ana.cannot_code("The text is cut off")
                continue
            row = ana.row()
            ana.code(ana_code(row), by_key=step % 2 == 0, note="ana-private-note" if step == 1 else None)
            if step == 7:
                # back to this text: its code is shown; change it, then on to the next new text
                unit = ana.unit()
                driver.find_element(By.ID, "nl-back").click()
                ana.wait_for_screen(unit)
                assert ana.row() == row
                assert driver.find_element(By.CSS_SELECTOR, ".nl-chosen").get_attribute("data-value") == ana_code(row)
                changed = "no" if ana_code(row) == "yes" else "yes"
                ana.code(changed, by_key=False)
                assert ana.clicked[row] == changed
        assert ana.count() == f"13 of {N_TEXTS}"
        # phone width: nothing wider than the screen, the labels on it
        driver.set_window_size(390, 844)
        time.sleep(0.3)
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        assert driver.find_element(By.CSS_SELECTOR, ".nl-label").is_displayed()
        driver.save_screenshot(str(SCREENSHOT.with_name("coding-app-phone.png")))
        driver.set_window_size(1200, 680)

        # --- kill the app mid-way: every code made so far is in the file
        app.kill()
        with sqlite3.connect(file) as db:
            saved = db.execute("SELECT count(DISTINCT unit) FROM codes WHERE coder = 'ana'").fetchone()[0]
        assert saved == 12

        # --- started again: Ana resumes where she stopped, Ben codes at the same time
        app = App(file)
        ana_before = dict(ana.clicked)
        ana.focus()
        driver.get(app.url("?coder=ana"))
        ana.wait_for_screen()
        assert ana.count() == f"13 of {N_TEXTS}"
        ben = Coder(driver, app.url("?coder=ben"), "ben")
        assert "ana-private-note" not in driver.page_source
        for turn in range(100):
            coder = (ana, ben)[turn % 2]
            coder.focus()
            if coder.done():
                if ana.done() and ben.done():
                    break
                continue
            rule = ana_code if coder is ana else ben_code
            coder.code(rule(coder.row()), by_key=turn % 4 < 2)
        assert ana.done() and ben.done()
        assert set(ana_before.items()) <= set(ana.clicked.items())
        assert len(ana.clicked) + len(ben.clicked) == N_TEXTS + N_DOUBLE, (ana.clicked, ben.clicked)
        assert set(ana.clicked) | set(ben.clicked) == set(ana.clicked) | set(ben.clicked)
        assert len(set(ana.clicked) | set(ben.clicked)) == N_TEXTS

        # --- adjudication: both codes on screen, a third decision recorded
        both = set(ana.clicked) & set(ben.clicked)
        disagree = {row for row in both if ana.clicked[row] != ben.clicked[row]}
        assert len(both) == N_DOUBLE and disagree
        eve = Coder(driver, app.url("?coder=eve&adjudicate=1"), "eve")
        decided = {}
        while not eve.done():
            shown = driver.find_element(By.CSS_SELECTOR, ".nl-others").text
            assert "ana" in shown and "ben" in shown
            decided[eve.row()] = "no"
            eve.code("no", by_key=len(decided) % 2 == 0)
        assert set(decided) == disagree

        # --- read_codes(), row by row, against the clicks
        result = json.loads(rscript(HERE / "check.R", file))
        final = {}
        for row in set(ana.clicked) | set(ben.clicked):
            codes = [c.clicked[row] for c in (ana, ben) if row in c.clicked]
            final[row] = decided[row] if row in decided else codes[0]
        kept = {r[".row"]: r for r in result["kept"]}
        assert set(kept) == set(final)
        for row, code in final.items():
            if code is None:
                assert kept[row][".status"] == "uncodable" and kept[row][".reason"] == "The text is cut off"
                assert "code" not in kept[row]
            else:
                assert kept[row]["code"] == code, row
                assert kept[row][".status"] == ("adjudicated" if row in decided else "coded")
        by_coder = {(r[".row"], r[".coder"]): r for r in result["by_coder"]}
        clicked = {(row, c.name): code for c in (ana, ben) for row, code in c.clicked.items()}
        assert set(by_coder) == set(clicked)
        for key, code in clicked.items():
            assert by_coder[key].get("code") == code and by_coder[key][".uncodable"] == (code is None)
            assert by_coder[key][".seconds"] >= 0
        assert len(result["coef"]) == 2 and all(isinstance(c, float) for c in result["coef"])
        assert isinstance(result["humans"][0], float)
    finally:
        driver.quit()
        if app.process.poll() is None:
            app.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def test_coding_app_codes_typed_fields():
    """A schema's fields: choices, yes/no, a number and a short text, saved by Enter or the button."""
    workdir = Path(tempfile.mkdtemp(prefix="coding-fields-"))
    file = workdir / "codes.sqlite"
    driver = chromium()
    app = App(file, "fields")
    try:
        coder = Coder(driver, app.url("?coder=ana"), "ana")
        expected = {}
        for i, (stance, local, signatures, gist) in enumerate([("against", True, 412, "bus lanes"),
                                                               ("mixed", False, None, "")]):
            row, unit = coder.row(), coder.unit()
            driver.find_element(By.CSS_SELECTOR, f"input[name=nl-field-stance][value={stance}]").click()
            driver.find_element(By.CSS_SELECTOR, f"input[name=nl-field-local][value={str(local).lower()}]").click()
            if signatures is not None:
                driver.find_element(By.CSS_SELECTOR, "[data-field=signatures] input").send_keys(str(signatures))
            text = driver.find_element(By.CSS_SELECTOR, "[data-field=gist] input")
            text.send_keys(gist)
            if i == 0:
                text.send_keys(Keys.ENTER)
            else:
                driver.find_element(By.ID, "nl-save").click()
            coder.wait_for_screen(unit)
            expected[row] = {"stance": stance, "local": local, "signatures": signatures, "gist": gist or None}
        assert coder.count() == "3 of 3"
        rows = json.loads(rscript("-e", "cat(jsonlite::toJSON(newrllama4::read_codes('%s'), na = 'null'))" % file))
        got = {r[".row"]: r for r in rows}
        for row, fields in expected.items():
            for name, value in fields.items():
                assert got[row].get(name) == value, (row, name)
        (left,) = {1, 2, 3} - set(expected)
        assert got[left][".status"] == "not coded"
    finally:
        driver.quit()
        if app.process.poll() is None:
            app.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    started = time.time()
    test_coding_app_codes_resumes_shares_and_adjudicates()
    test_coding_app_codes_typed_fields()
    print(f"passed in {time.time() - started:.0f} s")
