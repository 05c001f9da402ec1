"""The coding app's gate and its keeping of work, proved in headless Chromium (issue 59).

Each attack as a browser makes it: a forged login header (set by the browser itself, through the
DevTools protocol) and, from an address that is not this machine, forged X-Forwarded-For and X-Real-IP
headers that would make it look local, get the refusal page, and a `start` sent from that page's console
codes nothing; a page served on another port opens a websocket to the app with a coder's key and reads
no text; every event the server handles, sent over a raw websocket with no key, a wrong key, or a
coder's key asking for what only an adjudicator or a lead may do, brings back no text, code or note
that is not the coder's own. One person holds one role. And no work is lost: a second tab of a coder
gets another text, a draft (note, reason) comes back after a reload and a reconnect, a page put in the
back-forward cache lets its text go and claims it again when shown, and a text on screen stays its
coder's past 30 minutes (the app's clock moved). Screenshots of the coder's page, blind adjudication and
the refusal page go to /tmp/browser-*.png (CODING_APP_SHOTS). One app per kind, shared by the tests.
"""

import contextlib
import http.server
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from test_coding_app import App, Coder, chromium, free_port, received, shiny_event, shiny_socket, socket_event

SHOTS = Path(os.environ.get("CODING_APP_SHOTS", "/tmp"))
N_TEAM = 12
CLAIM_SECONDS = 1800  # claim_seconds of R/coding-store.R


class Served:
    """An app of the module, its file and what the tests read of it."""

    def __init__(self, workdir, name, *task, **env):
        self.file = workdir / f"{name}.sqlite"
        self.clock = workdir / f"{name}.clock"
        environment = dict(os.environ, R_USER_DATA_DIR=str(workdir / "user-data"),
                           NEWRLLAMA4_TEST_CLOCK=str(self.clock), **env)
        self.app = App(self.file, *task, env=environment)
        with sqlite3.connect(self.file) as db:
            self.texts = [t for (t,) in db.execute("SELECT text FROM texts ORDER BY unit")]
        links = Path(f"{self.file}.links.json")
        self.links = {link["name"]: link["url"] for link in json.loads(links.read_text())} if links.exists() else {}

    def rows(self, sql):
        with sqlite3.connect(self.file) as db:
            return db.execute(sql).fetchall()

    def codes(self):
        return self.rows("SELECT coder, unit, value, note FROM codes ORDER BY id")

    def claims(self):
        return self.rows("SELECT coder, unit, time FROM claims ORDER BY coder, unit")

    def stop(self):
        if self.app.process.poll() is None:
            self.app.kill()


@pytest.fixture(scope="module")
def workdir():
    path = Path(tempfile.mkdtemp(prefix="coding-proof-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def driver():
    browser = chromium()
    yield browser
    browser.quit()


@pytest.fixture(scope="module")
def team(workdir):
    """Ana and Ben code, Eve adjudicates; each text once."""
    served = Served(workdir, "team", "team", str(N_TEAM))
    yield served
    served.stop()


@pytest.fixture(scope="module")
def lone(workdir):
    """Nobody named, so for this machine only; served on every address, for a client from elsewhere."""
    served = Served(workdir, "lone", "labels", NEWRLLAMA4_TEST_HOST="0.0.0.0")
    yield served
    served.stop()


@contextlib.contextmanager
def extra_headers(driver, headers):
    """Headers the browser adds to every request of the tab, the websocket's too, as a crafted client would."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": headers})
    try:
        yield
    finally:
        driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})


def refused(driver, heading, texts):
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-welcome h1, .nl-text"))
    assert driver.find_element(By.CSS_SELECTOR, ".nl-welcome h1").text == heading
    page = driver.page_source
    assert not driver.find_elements(By.CSS_SELECTOR, ".nl-text")
    assert not any(text[:30] in page for text in texts)


def shown_texts(messages, texts):
    return {i + 1 for i, text in enumerate(texts) if text[:30] in messages}


def this_machine_elsewhere():
    """This machine's address on its network (a connection to it comes from that address, not the
    loopback): None where it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.123", 9))  # no packet is sent: the route picks the address
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_a_forged_login_header_gets_the_refusal_page(driver, team):
    """Shiny fills session$user from Shiny-Server-Credentials, which any client can send: no key and
    that header is nobody, not Ana, nor Eve with her team screen."""
    for user in ["Ana", "Eve"]:
        with extra_headers(driver, {"Shiny-Server-Credentials": json.dumps({"user": user, "groups": []})}):
            driver.get(team.app.url())
            refused(driver, "This link is not valid", team.texts)
            shiny_event(driver, {"type": "view", "view": "team"})
            time.sleep(0.5)
            refused(driver, "This link is not valid", team.texts)
    driver.save_screenshot(str(SHOTS / "browser-refused.png"))
    assert team.codes() == []


def test_a_client_elsewhere_stays_refused_whatever_it_forges(driver, lone):
    """Nobody named: the app is this machine's. A browser that reaches it by the machine's network
    address is elsewhere, and forged X-Forwarded-For / X-Real-IP naming 127.0.0.1 do not make it local;
    a `start` sent from its console codes nothing, adjudicates nothing. A proxy on this machine that
    names its client only in X-Real-IP or Forwarded passes on a client from elsewhere too."""
    address = this_machine_elsewhere()
    if address is None:
        pytest.skip("this machine has no address but the loopback")
    forged = {"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1"}
    with extra_headers(driver, forged):
        driver.get(f"http://{address}:{lone.app.port}/?coder=mallory")
        refused(driver, "This app serves only the computer it runs on", lone.texts)
        for adjudicate in [False, True]:
            shiny_event(driver, {"type": "start", "coder": "mallory", "adjudicate": adjudicate})
            time.sleep(0.5)
            refused(driver, "This app serves only the computer it runs on", lone.texts)
            shiny_event(driver, {"type": "code", "unit": 1, "value": {"code": "yes"}, "note": "", "resent": True})
    for header in [{"X-Real-IP": "192.168.1.7"}, {"Forwarded": "for=192.168.1.7;proto=http"}]:
        with extra_headers(driver, header):
            driver.get(lone.app.url("?coder=mallory"))
            refused(driver, "This app serves only the computer it runs on", lone.texts)
    time.sleep(0.5)
    assert lone.codes() == [] and lone.rows("SELECT coder FROM coders") == []


def test_a_page_of_another_site_reads_no_text(driver, team, workdir):
    """A page served on another port (another origin) opens the app's websocket with Ana's own key, as
    any site open in her browser could, and tries to code: it reads no text, and writes nothing."""
    search = "?" + team.links["Ana"].split("?", 1)[1]
    page = workdir / "other-site" / "index.html"
    page.parent.mkdir()
    page.write_text("""<!doctype html><title>another site</title><script>
    window.received = []; window.finished = false;
    const ws = new WebSocket(%s);
    ws.onmessage = (m) => window.received.push(m.data);
    ws.onclose = () => { window.finished = true; };
    ws.onopen = () => {
      ws.send(JSON.stringify({method: "init", data: {".clientdata_url_search": %s,
                                                      ".clientdata_output_screen_hidden": false}}));
      setTimeout(() => ws.send(JSON.stringify({method: "update", data: {nl_event:
        {type: "code", unit: 1, value: {code: "yes"}, note: "from another site", nonce: "other-site-1"}}})), 500);
      setTimeout(() => { window.finished = true; }, 2000);
    };
    </script>""" % (json.dumps(f"ws://127.0.0.1:{team.app.port}/websocket/"), json.dumps(search)))
    handler = lambda *args: http.server.SimpleHTTPRequestHandler(*args, directory=str(page.parent))
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        driver.get(f"http://127.0.0.1:{other.server_address[1]}/index.html")
        WebDriverWait(driver, 20).until(lambda d: d.execute_script("return window.finished"))
        messages = "\n".join(driver.execute_script("return window.received"))
    finally:
        other.shutdown()
    assert shown_texts(messages, team.texts) == set()
    assert "Coder: Ana" not in messages
    assert team.codes() == []


def every_event(units):
    """Every event type the server handles (R/coding-server.R), for every text."""
    yield {"type": "start", "coder": "Ana", "adjudicate": False}
    yield {"type": "start", "coder": "Eve", "adjudicate": True}
    for view in ["code", "adjudicate", "team"]:
        yield {"type": "view", "view": view}
    for unit in units:
        yield {"type": "pick", "pick": unit}
        yield {"type": "code", "unit": unit, "value": {"code": "yes"}, "note": "forged", "resent": True}
        yield {"type": "uncodable", "unit": unit, "reason": "other", "other": "forged", "note": "forged",
               "resent": True}
        for move in ["back", "skip", "release", "resume"]:
            yield {"type": move, "unit": unit, "note": ""}


def download(app, messages):
    """The lead's download of every code, asked for by the websocket's session."""
    session = json.loads(messages.split("\n")[0])["config"]["sessionId"]
    try:
        with urllib.request.urlopen(app.url(f"session/{session}/download/codes_csv?w="), timeout=20) as got:
            return got.read().decode()
    except urllib.error.HTTPError as error:
        return error.read().decode()


def test_every_event_without_the_key_or_the_role_for_it_reads_nothing(driver, team):
    """Over raw websockets: no key, a wrong key, a near miss of Ana's, no key with a forged login header
    naming Eve, Ana's key from another site's page, and Ana's coder key asking for the adjudicator's and
    the lead's screens, picks and download, and codes for Ben's text. No text (Ana: none but the one on
    her own screen), no code and no note of Ben's comes back, and nothing is written."""
    ben = Coder(driver, team.links["Ben"], "Ben")
    ben_row_unit = int(ben.unit())
    ben.code("no", by_key=False, note="ben-private-note")
    written = team.codes()
    assert [(coder, unit) for coder, unit, _, _ in written] == [("Ben", ben_row_unit)]
    units = range(1, N_TEAM + 1)
    ana_key = team.links["Ana"].split("?", 1)[1]
    near_miss = ana_key[:-1] + ("1" if ana_key[-1] == "0" else "0")
    forged = ["Shiny-Server-Credentials: " + json.dumps({"user": "Eve"})]
    other_site = f"http://127.0.0.1:{free_port()}"
    for search, header, origin in [("", (), None), ("?key=" + "0" * 32, (), None), ("?" + near_miss, (), None),
                                   ("", forged, None), ("?" + ana_key, (), other_site), ("?" + ana_key, (), None)]:
        ws = shiny_socket(team.app, search, header=header, origin=origin)
        first = received(ws)
        own = shown_texts(first, team.texts)
        if search == "?" + ana_key and origin is None:
            # what an adjudicator or lead may do, and codes for Ben's text, which is not hers to code
            events = [e for e in every_event(units) if e["type"] in ("view", "pick", "start") or
                      (e["type"] in ("code", "uncodable") and e["unit"] == ben_row_unit)]
        else:
            events = every_event(units)
        for event in events:
            socket_event(ws, event)
        messages = first + received(ws)
        messages += download(team.app, first)
        ws.close()
        if search == "?" + ana_key and origin is None:
            assert len(own) == 1 and ben_row_unit not in own
        else:
            assert own == set() and ("This link is not valid" in first or "another site" in first), (search, header)
        assert shown_texts(messages, team.texts) <= own, search
        for secret in ["ben-private-note", "Ben", "nl-team", "Adjudicating", "nl-others", "Coder 1"]:
            assert secret not in messages, (search, secret)
        assert team.codes() == written, search


def test_one_person_holds_one_role(workdir):
    """A person named both coder and adjudicator would, adjudicating, see the others' codes of the texts
    still theirs to code: the app refuses them, with a classed error."""
    script = ("r <- tryCatch(newrllama4::coding_app(data.frame(text = c('a', 'b')), tempfile(fileext = '.sqlite'),"
              " labels = c('yes', 'no'), coders = c('Ana', 'Ben'), adjudicators = 'ana'),"
              " error = identity); cat(class(r), sep = '\\n')")
    env = dict(os.environ, R_USER_DATA_DIR=str(workdir / "user-data"))
    out = subprocess.run(["Rscript", "-e", script], env=env, capture_output=True, text=True, check=True).stdout
    assert "newrllama4_error_coding_roles" in out.split()


def test_a_quota_holds_across_tabs_and_raw_messages(workdir):
    """Ana may code two texts. Two raw websockets with her key (two tabs) each get a text; the second codes
    its own and is then told the other text is open in another tab, not given a third, and the codes it
    sends for every other text, as a page does after a reconnect, are not written. The first tab's code
    reaches her quota."""
    served = Served(workdir, "quota", "team", "6", NEWRLLAMA4_TEST_QUOTA="2")
    try:
        key = "?" + served.links["Ana"].split("?", 1)[1]
        first = shiny_socket(served.app, key)
        held = shown_texts(received(first), served.texts)
        second = shiny_socket(served.app, key)
        own = shown_texts(received(second), served.texts)
        assert len(held) == 1 and len(own) == 1 and held != own
        (unit,) = own
        socket_event(second, {"type": "code", "unit": unit, "value": {"code": "yes"}, "note": ""})
        after = received(second)
        assert "Open in another tab" in after and shown_texts(after, served.texts) == set()
        for other in set(range(1, len(served.texts) + 1)) - held - own:
            socket_event(second, {"type": "code", "unit": other, "value": {"code": "no"}, "note": "",
                                  "resent": True})
        received(second)
        assert [(coder, unit_coded) for coder, unit_coded, _, _ in served.codes()] == [("Ana", unit)]
        (mine,) = held
        socket_event(first, {"type": "code", "unit": mine, "value": {"code": "no"}, "note": ""})
        assert "You coded your 2 texts" in received(first)
        assert sorted(unit_coded for _, unit_coded, _, _ in served.codes()) == sorted([unit, mine])
        first.close()
        second.close()
    finally:
        served.stop()


def test_a_second_tab_of_one_coder_gets_another_text(driver, team):
    """Ana opens her link in two tabs: two texts, and a code in each is written, neither replacing the other."""
    before = team.codes()
    first = Coder(driver, team.links["Ana"], "Ana")
    units = [int(first.unit())]
    second = Coder(driver, team.links["Ana"], "Ana")
    units.insert(0, int(second.unit()))
    assert units[0] != units[1]
    second.code("yes", by_key=True)
    first.focus()
    first.code("no", by_key=False)
    new = team.codes()[len(before):]
    assert [(coder, unit, value) for coder, unit, value, _ in new] == [
        ("Ana", units[0], '{"code":"yes"}'), ("Ana", units[1], '{"code":"no"}')]
    driver.close()
    second.focus()
    driver.close()
    driver.switch_to.window(driver.window_handles[0])


def form(driver):
    return (driver.find_element(By.ID, "nl-note").get_attribute("value"),
            driver.find_element(By.ID, "nl-reason").get_attribute("value"),
            driver.find_element(By.ID, "nl-other").get_attribute("value"))


def test_a_draft_comes_back_after_a_reload_and_a_reconnect(driver, team):
    """Ben types a note and a reason, and the page is reloaded, then its connection drops: the note and
    the reason are back on the same text each time; his code then saves the note, and the tab forgets
    the draft."""
    ben = Coder(driver, team.links["Ben"], "Ben")
    unit = ben.unit()
    draft = ("half typed 3", "other", "the end is cut")
    driver.find_element(By.ID, "nl-note").send_keys(draft[0])
    Select(driver.find_element(By.ID, "nl-reason")).select_by_value(draft[1])
    driver.find_element(By.ID, "nl-other").send_keys(draft[2])
    driver.refresh()
    ben.wait_for_screen()
    assert ben.unit() == unit and form(driver) == draft
    driver.execute_script("document.querySelector('.nl-text').classList.add('nl-old');"
                          " Shiny.shinyapp.$socket.close()")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return Shiny.shinyapp.isConnected() && !!document.querySelector('.nl-text:not(.nl-old)')"))
    ben.wait_for_screen()
    assert ben.unit() == unit and form(driver) == draft
    driver.save_screenshot(str(SHOTS / "browser-coder.png"))
    ben.code("yes", by_key=False)
    assert team.codes()[-1] == ("Ben", int(unit), '{"code":"yes"}', draft[0])
    assert form(driver) == ("", "", "")
    assert driver.execute_script(
        "return Object.keys(sessionStorage).filter(k => k.startsWith('nl-draft:') && k.endsWith(':' + arguments[0]))",
        unit) == []


def test_a_page_in_the_back_forward_cache_lets_its_text_go(driver, team):
    """Ben goes to another page: Chromium keeps his page, connected, in the back-forward cache (pagehide,
    persisted), and its text goes back to the pool at once, not when the claim runs out; back again
    (pageshow, persisted), the page claims its text again."""
    ben = Coder(driver, team.links["Ben"], "Ben")
    held = ("Ben", int(ben.unit()))
    assert held in [claim[:2] for claim in team.claims()]
    driver.execute_script("window.addEventListener('pageshow', (e) => { window.nlShownFromCache = e.persisted; })")
    driver.get(team.app.url("elsewhere"))
    WebDriverWait(driver, 20).until(lambda _: held not in [claim[:2] for claim in team.claims()])
    driver.back()
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return window.nlShownFromCache === true"))
    WebDriverWait(driver, 20).until(lambda _: held in [claim[:2] for claim in team.claims()])
    assert ben.unit() == str(held[1])
    driver.close()
    driver.switch_to.window(driver.window_handles[0])


def test_a_text_on_screen_stays_its_coders_past_thirty_minutes(driver, team):
    """Ana leaves a text on screen; the app's clock moves on 31 minutes (CLAIM_SECONDS and one): her page's
    claim is renewed while it is open, so Ben, opening his link, gets another text, and Ana's code is
    the only one of hers."""
    ana = Coder(driver, team.links["Ana"], "Ana")
    held = int(ana.unit())
    moved = CLAIM_SECONDS + 60
    team.clock.write_text(str(moved))
    try:
        # the open page renews its claim (every 5 seconds here, every minute in use): by the moved clock
        WebDriverWait(driver, 20, poll_frequency=0.5).until(lambda _: any(
            claim[:2] == ("Ana", held) and claim[2] > time.time() + moved - 120 for claim in team.claims()))
        ben = Coder(driver, team.links["Ben"], "Ben")
        assert int(ben.unit()) != held
        ana.focus()
        ana.code("no", by_key=True)
        assert [coder for coder, unit, _, _ in team.codes() if unit == held] == ["Ana"]
    finally:
        team.clock.unlink()


def test_blind_adjudication_shows_codes_without_their_coders(driver, workdir):
    """Two texts each coded by Ana and Ben, who disagree: Eve adjudicates them seeing the two codes,
    not who gave them."""
    pair = Served(workdir, "pair", "team", "2", NEWRLLAMA4_TEST_OVERLAP="1")
    try:
        for name, label in [("Ana", "yes"), ("Ben", "no")]:
            coder = Coder(driver, pair.links[name], name)
            while not coder.done():
                coder.code(label, by_key=False, note=f"{name.lower()}-note")
        Coder(driver, pair.links["Eve"], "Eve")
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nl-others"))
        others = driver.find_element(By.CSS_SELECTOR, ".nl-others").text
        assert "Coder 1" in others and "Coder 2" in others
        assert "Ana" not in driver.page_source.replace("Adjudicating: Eve", "") and "Ben" not in driver.page_source
        driver.save_screenshot(str(SHOTS / "browser-adjudication.png"))
        # on a phone: nothing wider than the screen
        driver.set_window_size(390, 844)
        time.sleep(0.3)
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        driver.save_screenshot(str(SHOTS / "browser-adjudication-phone.png"))
        driver.set_window_size(1200, 680)
    finally:
        pair.stop()
