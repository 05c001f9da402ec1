"""coding_app() in a real browser: headless Chromium driven by Selenium against
the app running in a background R process on 127.0.0.1.

A page from another machine is refused, whatever it sends. One coder codes
the 20 drawn texts by keys and clicks, marks one uncodable and changes one
code by going back; the R process is killed mid-way and started again, and
nothing is lost; two coders then code at once with overlap; a third
adjudicates their disagreements; read_codes() must then give, row by row,
what was clicked, and feed label_regression() as it is. Then typed fields and
a read-only file; a named team's links, and the gate against a forged login
header and another site's page (through raw Shiny websockets, as an
attacker's script opens them) and a link renewed in an open tab; and two
R processes on one file, whose coders ask for its last free text at once.
"""

import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import websocket  # websocket-client, which selenium depends on
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCREENSHOT = Path(os.environ.get("CODING_APP_SCREENSHOT", ROOT / "build" / "test-results" / "coding-app.png"))
N_TEXTS = 20
N_DOUBLE = 5  # overlap 0.25 of 20
NOTE = "ana-private-note 12"  # digits: typed into the note, they must not code
DRAFT = "typed before going back"
# seconds each app process of the two-process test holds a claim open between its read and its write
CLAIM_DELAY = 1.5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """The app in its own R process (and process group, so that a kill takes all of it)."""

    def __init__(self, file, *task, file_modes_apply=False, env=None, port=None):
        self.port = port or free_port()
        self.log = open(Path(file).with_suffix(f".{self.port}.log"), "w")
        command = ["Rscript", str(HERE / "serve.R"), str(file), str(self.port), *task]
        if file_modes_apply and os.geteuid() == 0:
            # root writes to read-only files; without these capabilities it heeds file modes as their owner
            command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *command]
        self.process = subprocess.Popen(command, env=env,
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
    """Ben disagrees with Ana on rows divisible by four (two of the five coded twice)."""
    code = ana_code(row)
    return ("yes" if code == "no" else "no") if row % 4 == 0 else code


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
        # one script reads the screen at one moment: Shiny may replace the text between two WebDriver calls,
        # which left the second holding a stale element
        def ready(driver):
            return driver.execute_script("""
                const text = document.querySelector('.nl-text');
                if (!text) return document.querySelector('.nl-welcome h1') !== null;
                const button = document.querySelector('.nl-label, #nl-save');
                return text.getAttribute('data-unit') !== arguments[0] && button !== null && !button.disabled;
            """, previous_unit)
        WebDriverWait(self.driver, 20).until(ready)

    def done(self):
        self.focus()
        headings = self.driver.find_elements(By.CSS_SELECTOR, ".nl-welcome h1")
        # "No text is free now": the last ones are on the other coder's screen
        return bool(headings) and headings[0].text.startswith(("Done", "Nothing", "No text is free"))

    def unit(self):
        return self.driver.find_element(By.CSS_SELECTOR, ".nl-text").get_attribute("data-unit")

    def row(self):
        return int(re.match(r"Text (\d+)\.", self.driver.find_element(By.CSS_SELECTOR, ".nl-text").text).group(1))

    def count(self):
        return self.driver.find_element(By.CSS_SELECTOR, ".nl-count").text

    def code(self, label, by_key, note=None):
        row, unit = self.row(), self.unit()
        if note:
            box = self.driver.find_element(By.ID, "nl-note")
            box.send_keys(note)
            # digits typed in the note are the note's, not codes
            assert box.get_attribute("value") == note and self.unit() == unit
        if by_key:
            ActionChains(self.driver).send_keys("1" if label == "yes" else "2").perform()
        else:
            self.driver.find_element(By.CSS_SELECTOR, f".nl-label[data-value='{label}']").click()
        self.clicked[row] = label
        self.wait_for_screen(unit)
        return row

    def cannot_code(self, reason):
        """Cannot code: "other", in words (a set category needs no words)."""
        row, unit = self.row(), self.unit()
        Select(self.driver.find_element(By.ID, "nl-reason")).select_by_value("other")
        self.driver.find_element(By.ID, "nl-other").send_keys(reason)
        self.driver.find_element(By.ID, "nl-cannot").click()
        self.clicked[row] = None
        self.wait_for_screen(unit)
        return row


def code_in_turns(coders, label, turns=100):
    """The coders take turns until each is done, each clicking `label(coder, row)` (by key on half the turns)."""
    for turn in range(turns):
        coder = coders[turn % len(coders)]
        coder.focus()
        if coder.done():
            if all(other.done() for other in coders):
                break
            continue
        coder.code(label(coder, coder.row()), by_key=turn % 4 < 2)
    assert all(coder.done() for coder in coders)


def rscript(*args):
    return subprocess.run(["Rscript", *map(str, args)], check=True, capture_output=True, text=True).stdout


def shiny_socket(app, search="", header=(), origin=None):
    """A raw Shiny websocket, as a script (or another site's page) opens it: the init message with the
    address's query; `origin`, as a browser would send it, the app's own unless given."""
    ws = websocket.create_connection(f"ws://127.0.0.1:{app.port}/websocket/", header=list(header),
                                     origin=origin or app.url().rstrip("/"), timeout=20)
    ws.send(json.dumps({"method": "init", "data": {".clientdata_url_search": search,
                                                   ".clientdata_output_screen_hidden": False}}))
    return ws


def socket_event(ws, event):
    ws.send(json.dumps({"method": "update", "data": {"nl_event": dict(event, nonce=time.time())}}))


def received(ws):
    """What the server sends for the messages sent so far: until it is idle again (its reply to each
    message ends with {"busy": "idle"} and the values that follow), then quiet for a moment."""
    messages = []
    ws.settimeout(20)
    try:
        while True:
            messages.append(ws.recv())
            if '"busy":"idle"' in messages[-1]:
                ws.settimeout(0.3)
    except websocket.WebSocketTimeoutException:
        return "\n".join(messages)


def test_coding_app_codes_resumes_shares_and_adjudicates():
    workdir = Path(tempfile.mkdtemp(prefix="coding-app-"))
    file = workdir / "codes.sqlite"
    driver = chromium()
    app = App(file)
    try:
        # --- nobody named: a page from another machine (passed on by a proxy) is refused, and a crafted
        # start event opens neither coding nor adjudication
        ws = shiny_socket(app, header=["X-Forwarded-For: 192.168.1.7"])
        messages = received(ws)
        assert "This app serves only the computer it runs on" in messages
        for adjudicate in [False, True]:
            socket_event(ws, {"type": "start", "coder": "mallory", "adjudicate": adjudicate})
            socket_event(ws, {"type": "code", "unit": 1, "value": {"code": "yes"}, "note": ""})
            messages += received(ws)
        ws.close()
        with sqlite3.connect(file) as db:
            texts = [t for (t,) in db.execute("SELECT text FROM texts")]
            assert db.execute("SELECT count(*) FROM codes").fetchone()[0] == 0
            assert db.execute("SELECT count(*) FROM coders").fetchone()[0] == 0
        assert "mallory" not in messages and "Adjudicating" not in messages
        assert not any(text[:30] in messages for text in texts)

        # --- one coder: keys and clicks, one text uncodable, one code changed by going back
        ana = Coder(driver, app.url("?coder=ana"), "ana")
        assert ana.count() == f"1 of {N_TEXTS}"
        model_probs = rscript("-e", "source('%s'); cat(format(browser_data()$.prob_yes))" % (HERE / "sample.R"))
        page = driver.page_source
        assert not any(p in page for p in model_probs.split()), "a model probability reached the page"
        uncodable_row = draft_row = None
        for step in range(12):
            if step == 6:
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(SCREENSHOT))
            if step == 4:
                uncodable_row = ana.cannot_code("The text is cut off")
                continue
            row = ana.row()
            if step == 2:
                # a held key repeats: the repeats code nothing (a code would disable the buttons at once)
                assert driver.find_element(By.CSS_SELECTOR, ".nl-saved").text.startswith("\u2713 Saved: text")
                driver.execute_script("document.body.dispatchEvent(new KeyboardEvent('keydown',"
                                      " {key: '1', repeat: true, bubbles: true}))")
                assert driver.find_element(By.CSS_SELECTOR, ".nl-label").is_enabled() and ana.row() == row
            if step == 9:
                # a note typed before Back is there again on return
                unit = ana.unit()
                driver.find_element(By.ID, "nl-note").send_keys(DRAFT)
                driver.find_element(By.ID, "nl-back").click()
                ana.wait_for_screen(unit)
                back_unit = ana.unit()
                driver.find_element(By.ID, "nl-skip").click()
                ana.wait_for_screen(back_unit)
                assert ana.row() == row and driver.find_element(By.ID, "nl-note").get_attribute("value") == DRAFT
                draft_row = row
            if step == 11:
                # the connection drops just after going back: the page reconnects to a new session,
                # which finds Ana's place in the file and does not replay her last click (Back)
                unit = ana.unit()
                driver.find_element(By.ID, "nl-back").click()
                ana.wait_for_screen(unit)
                driver.execute_script("window.nlDropped = false; $(document).on('shiny:disconnected',"
                                      " function () { window.nlDropped = true; });"
                                      " document.querySelector('.nl-text').classList.add('nl-old');"
                                      " Shiny.shinyapp.$socket.close()")
                # the new session draws its own screen over the old one
                WebDriverWait(driver, 30).until(lambda d: d.execute_script(
                    "return window.nlDropped && Shiny.shinyapp.isConnected()"
                    " && !document.getElementById('shiny-disconnected-overlay')"
                    " && !!document.querySelector('.nl-text:not(.nl-old)')"))
                ana.wait_for_screen()
                assert ana.row() == row
            if step == 10:
                # a coder's crafted request for the adjudication screen changes nothing
                driver.execute_script("Shiny.setInputValue('nl_event', {type: 'view', view: 'adjudicate',"
                                      " nonce: Math.random()}, {priority: 'event'})")
            ana.code(ana_code(row), by_key=step % 2 == 0, note=NOTE if step == 1 else None)
            if step == 10:
                assert not driver.find_elements(By.CSS_SELECTOR, ".nl-others, .nl-views")
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

        def ana_units():
            with sqlite3.connect(file) as db:
                return db.execute("SELECT count(DISTINCT unit), count(*) FROM codes WHERE coder = 'ana'").fetchone()
        # counted while the app is down: once it is back, the page may write its waiting click at once
        written = ana_units()
        assert written[0] == 12
        # Ana clicks while it is down: the click waits in the page, which reconnects by itself once the app
        # is back, and is written once
        WebDriverWait(driver, 20).until(lambda d: not d.execute_script("return Shiny.shinyapp.isConnected()"))
        down_row = ana.row()
        driver.find_element(By.CSS_SELECTOR, ".nl-label[data-value='yes']").click()
        ana.clicked[down_row] = "yes"

        # --- started again: Ana resumes where she stopped, Ben codes at the same time
        app = App(file, port=app.port)
        WebDriverWait(driver, 60).until(lambda d: ana_units()[0] == 13)
        WebDriverWait(driver, 20).until(lambda d: d.execute_script("return sessionStorage.getItem('nl-pending')")
                                        is None)
        assert ana_units() == (13, written[1] + 1)
        ana_before = dict(ana.clicked)
        ana.focus()
        driver.get(app.url("?coder=ana"))
        ana.wait_for_screen()
        assert ana.count() == f"14 of {N_TEXTS}"
        ben = Coder(driver, app.url("?coder=ben"), "ben")
        assert NOTE not in driver.page_source
        code_in_turns([ana, ben], lambda coder, row: (ana_code if coder is ana else ben_code)(row))
        assert set(ana_before.items()) <= set(ana.clicked.items())
        assert len(ana.clicked) + len(ben.clicked) == N_TEXTS + N_DOUBLE, (ana.clicked, ben.clicked)
        assert set(ana.clicked) | set(ben.clicked) == set(ana.clicked) | set(ben.clicked)
        assert len(set(ana.clicked) | set(ben.clicked)) == N_TEXTS

        # --- adjudication: both codes on screen, a third decision recorded
        both = set(ana.clicked) & set(ben.clicked)
        disagree = {row for row in both if ana.clicked[row] != ben.clicked[row]}
        assert len(both) == N_DOUBLE and disagree
        # an adjudicator never gets a text they coded: Ana coded every one of the overlap's
        ana_adjudicating = Coder(driver, app.url("?coder=ana&adjudicate=1"), "ana")
        assert driver.find_element(By.CSS_SELECTOR, ".nl-welcome h1").text == "Nothing to adjudicate"
        eve = Coder(driver, app.url("?coder=eve&adjudicate=1"), "eve")
        # the team screen before adjudication: the open disagreements listed
        driver.find_element(By.CSS_SELECTOR, ".nl-view[data-view=team]").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-team"))
        assert f"Open disagreements ({len(disagree)})" in driver.find_element(By.CSS_SELECTOR, ".nl-team").text
        assert len(driver.find_elements(By.CSS_SELECTOR, ".nl-disagreements li")) == len(disagree)
        driver.set_window_size(1200, 760)
        driver.save_screenshot(str(SCREENSHOT.with_name("coding-team.png")))
        driver.set_window_size(1200, 680)
        driver.find_element(By.CSS_SELECTOR, ".nl-view[data-view=adjudicate]").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-others"))
        decided = {}
        while not eve.done():
            shown = driver.find_element(By.CSS_SELECTOR, ".nl-others").text
            assert "ana" in shown and "ben" in shown
            decided[eve.row()] = "no"
            eve.code("no", by_key=len(decided) % 2 == 0)
        assert set(decided) == disagree
        # a decision revisited: its form holds the decision, and a new one replaces it
        driver.find_element(By.CSS_SELECTOR, ".nl-pick.nl-decided").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-label"))
        assert driver.find_element(By.CSS_SELECTOR, ".nl-label.nl-chosen").get_attribute("data-value") == "no"
        revisited = eve.row()
        eve.code("yes", by_key=False)
        decided[revisited] = "yes"

        # --- the team screen: progress per coder, agreement so far, open disagreements, the CSV
        driver.find_element(By.CSS_SELECTOR, ".nl-view[data-view=team]").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-team"))
        team = driver.find_element(By.CSS_SELECTOR, ".nl-team").text
        assert f"{N_TEXTS} of {N_TEXTS} texts done" in team and "Open disagreements (0)" in team
        assert "Krippendorff's alpha" in team and f"Coded twice: {N_DOUBLE} of the {N_DOUBLE} planned" in team
        rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, ".nl-table tbody tr")]
        assert [r.split()[:2] for r in rows] == [["ana", str(len(ana.clicked))], ["ben", str(len(ben.clicked))]]
        driver.set_window_size(390, 844)
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        driver.set_window_size(1200, 680)
        href = driver.find_element(By.ID, "codes_csv").get_attribute("href")
        history = list(csv.DictReader(io.StringIO(urllib.request.urlopen(href, timeout=20).read().decode())))
        with sqlite3.connect(file) as db:
            assert len(history) == db.execute("SELECT count(*) FROM codes").fetchone()[0]
        assert {r[".coder"] for r in history} == {"ana", "ben", "eve"}
        assert all(float(r[".seconds"]) >= 0 for r in history)
        # the decided codes beside it: one row per text, how each was reached
        href = driver.find_element(By.ID, "decided_csv").get_attribute("href")
        texts = list(csv.DictReader(io.StringIO(urllib.request.urlopen(href, timeout=20).read().decode())))
        assert len(texts) == N_TEXTS and len({r[".row"] for r in texts}) == N_TEXTS
        assert all(r[".how"] == "adjudicated" and r["code"] == decided[int(r[".row"])]
                   for r in texts if int(r[".row"]) in decided)

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
                assert kept[row][".status"] == "uncodable" and kept[row][".reason"] == "other: The text is cut off"
                assert "code" not in kept[row]
            else:
                assert kept[row]["code"] == code, row
                assert kept[row][".status"] == ("adjudicated" if row in decided else "coded")
        assert kept[draft_row][".note"] == DRAFT
        by_coder = {(r[".row"], r[".coder"]): r for r in result["by_coder"]}
        clicked = {(row, c.name): code for c in (ana, ben) for row, code in c.clicked.items()}
        assert set(by_coder) == set(clicked)
        for key, code in clicked.items():
            assert by_coder[key].get("code") == code and by_coder[key][".uncodable"] == (code is None)
            assert by_coder[key][".seconds"] >= 0
        assert len(result["coef"]) == 2 and all(isinstance(c, float) for c in result["coef"])
        # a number, not null: JSON writes a whole number (an alpha of exactly 0, which the clicks
        # gave in the clean-checkout run after review_sample()'s floor of five rows a stratum) as an int
        assert isinstance(result["humans"][0], (int, float))
    finally:
        driver.quit()
        if app.process.poll() is None:
            app.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def test_coding_app_codes_typed_fields_and_keeps_a_code_it_could_not_write():
    """A schema's fields: choices, yes/no, a number and a short text, saved by Enter or the button; a
    number outside the schema's bounds refused, and said so; with
    the file read-only, the form survives a reload (the tab keeps it); the page says the code was not saved
    and keeps it, and it is saved once the file is writable again."""
    workdir = Path(tempfile.mkdtemp(prefix="coding-fields-"))
    file = workdir / "codes.sqlite"
    driver = chromium()
    app = App(file, "fields", file_modes_apply=True)
    try:
        coder = Coder(driver, app.url("?coder=ana"), "ana")
        expected = {}
        for i, (stance, local, signatures, gist) in enumerate([("against", True, 412, "bus lanes"),
                                                               ("mixed", False, None, "")]):
            row, unit = coder.row(), coder.unit()
            driver.find_element(By.CSS_SELECTOR, f"input[name=nl-field-stance][value={stance}]").click()
            driver.find_element(By.CSS_SELECTOR, f"input[name=nl-field-local][value={str(local).lower()}]").click()
            if i == 0:
                # a number under the schema's minimum is refused on the server, and the page says why
                box = driver.find_element(By.CSS_SELECTOR, "[data-field=signatures] input")
                box.send_keys("-7")
                driver.find_element(By.ID, "nl-save").click()
                WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "nl-problem"))
                assert "signatures must be at least 0" in driver.find_element(By.ID, "nl-problem").text
                box.clear()
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

        # the file read-only (WAL writes beside it, so its folder too): the code stays, with the reason
        row, unit = coder.row(), coder.unit()
        driver.find_element(By.CSS_SELECTOR, "input[name=nl-field-stance][value=for]").click()
        driver.find_element(By.CSS_SELECTOR, "input[name=nl-field-local][value=true]").click()
        driver.find_element(By.CSS_SELECTOR, "[data-field=signatures] input").send_keys("7")
        # the form in progress is kept in the tab: a reload draws the text from the file and the form from the tab
        driver.refresh()
        coder.wait_for_screen()
        assert coder.unit() == unit
        assert driver.find_element(By.CSS_SELECTOR, "input[name=nl-field-stance][value=for]").is_selected()
        assert driver.find_element(By.CSS_SELECTOR, "input[name=nl-field-local][value=true]").is_selected()
        assert driver.find_element(By.CSS_SELECTOR, "[data-field=signatures] input").get_attribute("value") == "7"
        os.chmod(file, 0o444)
        os.chmod(workdir, 0o555)
        try:
            driver.find_element(By.ID, "nl-save").click()
            WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "nl-problem"))
            assert "Not saved" in driver.find_element(By.ID, "nl-problem").text
            assert coder.unit() == unit and driver.find_element(By.ID, "nl-save").is_enabled()
            assert driver.find_element(By.CSS_SELECTOR, "input[name=nl-field-stance][value=for]").is_selected()
            driver.save_screenshot(str(SCREENSHOT.with_name("coding-app-not-saved.png")))
        finally:
            os.chmod(workdir, 0o700)
            os.chmod(file, 0o644)
        with sqlite3.connect(file) as db:
            assert db.execute("SELECT count(*) FROM codes").fetchone()[0] == 2
        driver.find_element(By.ID, "nl-save").click()
        coder.wait_for_screen(unit)
        assert coder.done() and "Saved" in driver.find_element(By.CSS_SELECTOR, ".nl-saved").text
        expected[row] = {"stance": "for", "local": True, "signatures": 7, "gist": None}

        rows = json.loads(rscript("-e", "cat(jsonlite::toJSON(newrllama4::read_codes('%s'), na = 'null'))" % file))
        got = {r[".row"]: r for r in rows}
        assert set(got) == set(expected) == {1, 2, 3}
        for row, fields in expected.items():
            for name, value in fields.items():
                assert got[row].get(name) == value, (row, name)
    finally:
        driver.quit()
        if app.process.poll() is None:
            app.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def shiny_event(driver, event):
    """An event as a crafted page (or the browser's console) sends it, past the page's own form."""
    driver.execute_script("Shiny.setInputValue('nl_event', Object.assign(arguments[0], {nonce: Math.random()}),"
                          " {priority: 'event'})", event)


def team_app(task):
    """A named team's app (serve.R's "team" or "lead"), its links made with a secret of its own."""
    workdir = Path(tempfile.mkdtemp(prefix=f"coding-{task}-"))
    file = workdir / "codes.sqlite"
    return workdir, file, App(file, task, env=dict(os.environ, R_USER_DATA_DIR=str(workdir / "user-data")))


def team_links(file):
    """{(name, role): link} as the app's process wrote them."""
    return {(link["name"], link["role"]): link["url"] for link in json.loads(Path(f"{file}.links.json").read_text())}


def test_coding_app_lets_each_named_person_in_by_their_own_link_only():
    """With people named: no key, a wrong key or a name in the address opens a page without any text; a
    link is its person whatever the address adds; a crafted code outside the codebook is refused and not
    stored; the file's sample is plain SQLite, readable by its owner only. One gate for every message: a
    forged Shiny-Server-Credentials header is nobody, a websocket opened by another site's page reads
    nothing even with a valid key, a link renewed while its tab is open stops at the next click; the key
    leaves the address, and no page sends it as a Referer."""
    workdir, file, app = team_app("team")
    driver = chromium()
    try:
        with sqlite3.connect(file) as db:
            texts = [t for (t,) in db.execute("SELECT text FROM texts ORDER BY unit")]
            rows = [r for (r,) in db.execute('SELECT ".row" FROM sample ORDER BY rowid')]
        assert len(texts) == 6 and rows == [1, 2, 3, 4, 5, 6] and texts[0].startswith("Text 01.")
        links = team_links(file)
        assert set(links) == {("Ana", "coder"), ("Ben", "coder"), ("Eve", "adjudicator")}
        assert os.stat(file).st_mode & 0o777 == 0o600
        with urllib.request.urlopen(app.url(), timeout=20) as page:
            assert page.headers["Referrer-Policy"] == "no-referrer"

        def codes():
            with sqlite3.connect(file) as db:
                return db.execute("SELECT coder, value FROM codes ORDER BY id").fetchall()

        # a forged login header and no key: the refusal, no text, and no code written whatever it sends
        for user in ["Ana", "Eve"]:
            ws = shiny_socket(app, header=["Shiny-Server-Credentials: " + json.dumps({"user": user})])
            messages = received(ws)
            assert "This link is not valid" in messages
            for unit in range(1, len(texts) + 1):
                socket_event(ws, {"type": "code", "unit": unit, "value": {"code": "yes"}, "note": ""})
            socket_event(ws, {"type": "view", "view": "team"})
            messages += received(ws)
            ws.close()
            assert not any(text[:30] in messages for text in texts)
        # a websocket from a page of another site (here another port), with Ana's own key: nothing
        ws = shiny_socket(app, "?" + links[("Ana", "coder")].split("?", 1)[1], origin=f"http://127.0.0.1:{free_port()}")
        messages = received(ws)
        assert "opened from another site" in messages
        socket_event(ws, {"type": "code", "unit": 1, "value": {"code": "yes"}, "note": ""})
        messages += received(ws)
        ws.close()
        assert not any(text[:30] in messages for text in texts)
        assert codes() == []

        def refused():
            WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-welcome h1"))
            assert driver.find_element(By.CSS_SELECTOR, ".nl-welcome h1").text == "This link is not valid"
            page = driver.page_source
            assert not driver.find_elements(By.CSS_SELECTOR, ".nl-text")
            assert not any(text[:30] in page for text in texts)

        for query in ["", "?coder=Ana", "?key=" + "0" * 32, "?coder=Ana&key=" + links[("Ana", "coder")][-31:]]:
            driver.get(app.url(query))
            refused()
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SCREENSHOT.with_name("coding-app-link-not-valid.png")))
        # a crafted "start" naming Ana changes nothing
        shiny_event(driver, {"type": "start", "coder": "Ana", "adjudicate": False})
        time.sleep(1)
        refused()

        # Ana, by her link, codes two texts with a note
        ana = Coder(driver, links[("Ana", "coder")], "Ana")
        assert driver.find_element(By.CSS_SELECTOR, ".nl-coder").text == "Coder: Ana"
        # the key leaves the address once connected, and a reload finds her again
        assert "key=" not in driver.current_url
        driver.refresh()
        ana.wait_for_screen()
        assert driver.find_element(By.CSS_SELECTOR, ".nl-coder").text == "Coder: Ana"
        ana.code("yes", by_key=False, note="ana-private-note")
        ana.code("no", by_key=True)
        # a crafted code outside the codebook is refused, said so, and not stored
        unit = ana.unit()
        shiny_event(driver, {"type": "code", "unit": int(unit), "value": {"code": "maybe"}, "note": ""})
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "nl-problem"))
        assert "Not saved" in driver.find_element(By.ID, "nl-problem").text
        assert ana.unit() == unit
        assert codes() == [("Ana", '{"code":"yes"}'), ("Ana", '{"code":"no"}')]

        # Ben's link with Ana's name added is Ben's: none of Ana's texts, codes or notes, back or not
        ben = Coder(driver, links[("Ben", "coder")] + "&coder=Ana&adjudicate=1", "Ben")
        assert driver.find_element(By.CSS_SELECTOR, ".nl-coder").text == "Coder: Ben"
        assert ben.row() not in ana.clicked
        ben.code("no", by_key=False)
        unit = ben.unit()
        driver.find_element(By.ID, "nl-back").click()
        ben.wait_for_screen(unit)
        assert set(ben.clicked) == {ben.row()} and not set(ben.clicked) & set(ana.clicked)
        assert "ana-private-note" not in driver.page_source
        # nor does Ben's crafted request for the adjudication screen open it
        shiny_event(driver, {"type": "view", "view": "adjudicate"})
        unit = ben.unit()
        driver.find_element(By.ID, "nl-skip").click()
        ben.wait_for_screen(unit)
        assert driver.find_element(By.CSS_SELECTOR, ".nl-coder").text == "Coder: Ben"
        assert not driver.find_elements(By.CSS_SELECTOR, ".nl-others, .nl-views")
        with sqlite3.connect(file) as db:
            coders = db.execute("SELECT DISTINCT coder FROM codes ORDER BY coder").fetchall()
        assert coders == [("Ana",), ("Ben",)]

        # Eve's link opens the adjudication screen, and from it the team screen
        Coder(driver, links[("Eve", "adjudicator")], "Eve")
        driver.find_element(By.CSS_SELECTOR, ".nl-view[data-view=team]").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-team"))
        rows = [r.text.split()[:2] for r in driver.find_elements(By.CSS_SELECTOR, ".nl-table tbody tr")]
        assert rows == [["Ana", "2"], ["Ben", "1"]]

        # Ben's link renewed while his tab is open (in the file, as coding_links(renew =) does it from
        # another R session: a new salt, its key's hash): his next click is refused, and the page says why
        with sqlite3.connect(file) as db:
            db.execute("UPDATE people SET salt = 'renewed', key_hash = 'renewed' WHERE name = 'Ben'")
        ben.focus()
        driver.find_element(By.CSS_SELECTOR, ".nl-label[data-value='yes']").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-welcome h1"))
        assert driver.find_element(By.CSS_SELECTOR, ".nl-welcome h1").text == "This link no longer works"
        assert not driver.find_elements(By.CSS_SELECTOR, ".nl-text")
        assert [coder for coder, _ in codes()] == ["Ana", "Ana", "Ben"]
    finally:
        driver.quit()
        if app.process.poll() is None:
            app.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def test_two_app_processes_on_one_file_never_give_one_text_to_two_coders():
    """Two R processes serve one file of two texts, each to be coded once. Ana codes one in one process
    and closes her tab, which frees the last; then she opens it again in her process as Ben opens his in the
    other, at once, and each process holds the gap between finding that text free and claiming it open for
    CLAIM_DELAY seconds: with the claim one transaction the second waits for the first and finds the text
    taken, so it is on one screen only and coded once (without it, both claimed it)."""
    workdir = Path(tempfile.mkdtemp(prefix="coding-two-apps-"))
    file = workdir / "codes.sqlite"
    env = dict(os.environ, R_USER_DATA_DIR=str(workdir / "user-data"), NEWRLLAMA4_TEST_CLAIM_DELAY=str(CLAIM_DELAY))
    apps, drivers = [], []

    def claims():
        with sqlite3.connect(file) as db:
            return db.execute("SELECT coder, unit, time FROM claims ORDER BY coder").fetchall()

    try:
        for _ in range(2):
            apps.append(App(file, "team", "2", env=env))
            drivers.append(chromium())
        # both processes write the same links, the last one with its address
        links = {link["name"]: link["url"] for link in json.loads(Path(f"{file}.links.json").read_text())}
        ana_link, ben_link = links["Ana"].replace(apps[1].url(), apps[0].url()), links["Ben"]
        ana = Coder(drivers[0], ana_link, "Ana")
        ana.code("yes", by_key=True)
        last = ana.unit()
        assert [held[:2] for held in claims()] == [("Ana", int(last))]
        ana.driver.close()  # the session ends: its claim goes at once
        WebDriverWait(drivers[1], 20).until(lambda _: claims() == [])

        coders = [None, None]

        def open_link(i, driver, link, name):
            driver.switch_to.window(driver.window_handles[0])
            coders[i] = Coder(driver, link, name)

        threads = [threading.Thread(target=open_link, args=(0, drivers[0], ana_link, "Ana")),
                   threading.Thread(target=open_link, args=(1, drivers[1], ben_link, "Ben"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert all(coders), "a tab did not open"
        held = claims()
        assert [unit for _, unit, _ in held] == [int(last)], (
            f"the last text was handed to both, their claims {abs(held[0][2] - held[-1][2]):.2f} s apart: {held}")
        on_screen = [c for c in coders if not c.done()]
        assert len(on_screen) == 1 and on_screen[0].unit() == last
        on_screen[0].code("no", by_key=False)
        assert all(c.done() for c in coders)
        with sqlite3.connect(file) as db:
            coded = db.execute("SELECT unit, count(*), count(DISTINCT coder) FROM codes GROUP BY unit").fetchall()
        assert [(n, coders_of_unit) for _, n, coders_of_unit in coded] == [(1, 1)] * 2, coded
    finally:
        for driver in drivers:
            driver.quit()
        for app in apps:
            if app.process.poll() is None:
                app.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    started = time.time()
    test_coding_app_codes_resumes_shares_and_adjudicates()
    test_coding_app_codes_typed_fields_and_keeps_a_code_it_could_not_write()
    test_coding_app_lets_each_named_person_in_by_their_own_link_only()
    test_two_app_processes_on_one_file_never_give_one_text_to_two_coders()
    print(f"passed in {time.time() - started:.0f} s")


def test_the_lead_follows_the_team_without_reloading_and_hands_out_links():
    """The lead's team screen counts a code made in another tab by itself, with no reload, and the
    disagreements as they come; an adjudicator opens one from the team screen; the links screen lists
    every link, to copy and renew. Screenshots go beside the coding screen's (lead-*.png)."""
    workdir, file, app = team_app("lead")
    driver = chromium()
    try:
        links = team_links(file)
        driver.get(links[("Lea", "lead")])
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-team .nl-count"))
        count = lambda: driver.find_element(By.CSS_SELECTOR, ".nl-count").text
        assert count() == "0 of 6 texts done"
        lead_tab = driver.current_window_handle
        driver.execute_script("window.nlNotReloaded = true")

        def coded():
            with sqlite3.connect(file) as db:
                return db.execute("SELECT unit, count(*) FROM codes GROUP BY unit").fetchall()

        # Ana codes two texts in another tab; Ben one, which may be one of the overlap's
        ana = Coder(driver, links[("Ana", "coder")], "ana")
        for _ in range(2):
            ana.code("yes", by_key=False)
        ben = Coder(driver, links[("Ben", "coder")], "ben")
        ben.code("no", by_key=False)
        driver.switch_to.window(lead_tab)
        WebDriverWait(driver, 20).until(lambda d: f"Coded once: {len(coded())} of 6" in d.page_source)
        assert driver.execute_script("return window.nlNotReloaded === true")
        with sqlite3.connect(file) as db:
            double = [int(u) for u in db.execute("SELECT value FROM meta WHERE key = 'double'").fetchone()[0].split()]
        done = sum(1 for unit, n in coded() if n >= (2 if unit in double else 1))
        WebDriverWait(driver, 20).until(lambda d: count() == f"{done} of 6 texts done")
        # the texts on Ana's and Ben's screens (their tabs are open) are held
        assert "On screen now: 2 texts" in driver.page_source
        # both code on, Ana "yes" and Ben "no": each text of the overlap is a disagreement
        code_in_turns([ana, ben], lambda coder, row: "yes" if coder is ana else "no")
        assert len(coded()) == 6
        driver.switch_to.window(lead_tab)
        WebDriverWait(driver, 20).until(lambda d: f"Open disagreements ({len(double)})" in d.page_source)
        assert count() == f"{6 - len(double)} of 6 texts done"
        assert "Coded twice: 3 of the 3 planned" in driver.page_source and not driver.find_elements(By.CSS_SELECTOR, ".nl-pick")
        assert driver.execute_script("return window.nlNotReloaded === true")
        size = driver.get_window_size()
        driver.set_window_size(1200, 700)  # the whole screen, downloads included, for the vignette's figure
        driver.save_screenshot(str(SCREENSHOT.with_name("lead-team.png")))
        driver.set_window_size(size["width"], size["height"])
        # an adjudicator opens a disagreement from the team screen
        driver.switch_to.new_window("tab")
        driver.get(links[("Eve", "adjudicator")])
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-view[data-view=team]"))
        driver.find_element(By.CSS_SELECTOR, ".nl-view[data-view=team]").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-team .nl-pick"))
        driver.save_screenshot(str(SCREENSHOT.with_name("lead-team-adjudicator.png")))
        pick = driver.find_elements(By.CSS_SELECTOR, ".nl-team .nl-pick")[-1]
        unit = pick.get_attribute("data-unit")
        pick.click()
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-text"))
        assert driver.find_element(By.CSS_SELECTOR, ".nl-text").get_attribute("data-unit") == unit
        assert "Adjudicating: Eve" in driver.page_source and "0 of 3 decided" in driver.page_source
        # the links screen: every person's link, copy and renew
        driver.switch_to.window(lead_tab)
        driver.find_element(By.CSS_SELECTOR, ".nl-view[data-view='links']").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-links"))
        shown = [e.get_attribute("value") for e in driver.find_elements(By.CSS_SELECTOR, ".nl-link")]
        assert sorted(u.split("?key=")[1] for u in shown) == sorted(u.split("?key=")[1] for u in links.values())
        driver.find_element(By.CSS_SELECTOR, ".nl-copy").click()
        assert driver.find_element(By.CSS_SELECTOR, ".nl-copy").text == "Copied"
        driver.save_screenshot(str(SCREENSHOT.with_name("lead-links.png")))
        driver.find_element(By.CSS_SELECTOR, ".nl-renew[data-name='Ben']").click()
        WebDriverWait(driver, 20).until(lambda d: "New link for Ben" in d.page_source)
        renewed = [e.get_attribute("value") for e in driver.find_elements(By.CSS_SELECTOR, ".nl-link")]
        assert links[("Ben", "coder")].split("?key=")[1] not in " ".join(renewed)
        # Ben's open tab stops at its next message
        ben.focus()
        shiny_event(driver, {"type": "view", "view": "code"})
        WebDriverWait(driver, 20).until(lambda d: "This link no longer works" in d.page_source)
    finally:
        driver.quit()
        app.kill()
        shutil.rmtree(workdir, ignore_errors=True)
