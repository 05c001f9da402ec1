// The coding form is plain HTML: each action sends one event with everything
// it needs (the text's unit, the code, the note), read from the page at the
// moment of the click, so no value can belong to the previous text.
(function () {
  function value(id) {
    var el = document.getElementById(id);
    return el ? el.value : "";
  }
  function unit() {
    var text = document.querySelector(".nl-text");
    return text ? Number(text.getAttribute("data-unit")) : null;
  }
  // Each click has a nonce of its own, by which the file knows it.
  function nonce() {
    var bytes = new Uint8Array(12);
    window.crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
  }
  // A code waits in the tab (sessionStorage) until a screen answers it: one
  // made while the connection is down, or whose answer a dropped connection
  // lost, is sent again once the page is connected and drawn, and the file,
  // which knows its nonce, writes it once.
  function pending(event) {
    if (event === undefined) return JSON.parse(sessionStorage.getItem("nl-pending") || "null");
    if (event === null) sessionStorage.removeItem("nl-pending");
    else sessionStorage.setItem("nl-pending", JSON.stringify(event));
  }
  function connected() {
    return window.Shiny && Shiny.shinyapp && Shiny.shinyapp.isConnected();
  }
  function send(type, extra) {
    var event = {type: type, unit: unit(), note: value("nl-note"), nonce: nonce()};
    for (var key in extra) event[key] = extra[key];
    // no second click until the next text is on screen
    document.querySelectorAll(".nl-screen button").forEach(function (b) { b.disabled = true; });
    if (type === "code" || type === "uncodable") pending(event);
    if (connected()) Shiny.setInputValue("nl_event", event, {priority: "event"});
  }
  // The note and the form in progress stay in the tab too, by person and
  // text, until their code is saved: a reload or a reconnect draws the screen
  // afresh from the file, which holds saved codes only.
  function draftKey(unitNumber) {
    var person = document.querySelector(".nl-coder");
    return person && unitNumber !== null ? "nl-draft:" + person.textContent + ":" + unitNumber : null;
  }
  function formControls() {
    return Array.prototype.map.call(document.querySelectorAll(".nl-form input, .nl-form select"), function (el) {
      var field = el.closest("[data-field]");
      var name = el.id || (field ? "field:" + field.getAttribute("data-field") : "");
      return {el: el, name: el.type === "radio" ? name + "=" + el.value : name};
    });
  }
  function keepDraft() {
    var key = draftKey(unit());
    if (!key) return;
    var draft = {};
    formControls().forEach(function (c) { draft[c.name] = c.el.type === "radio" ? c.el.checked : c.el.value; });
    sessionStorage.setItem(key, JSON.stringify(draft));
  }
  function restoreDraft() {
    var key = draftKey(unit());
    var draft = key && JSON.parse(sessionStorage.getItem(key) || "null");
    if (!draft) return;
    formControls().forEach(function (c) {
      if (!(c.name in draft)) return;
      if (c.el.type === "radio") c.el.checked = draft[c.name]; else c.el.value = draft[c.name];
    });
  }
  var reconnected = false;
  function screenDrawn(e) {
    if (e.name !== "screen") return;
    var first = reconnected;  // the first screen of a connection answers no click
    reconnected = false;
    var event = pending();
    if (!event) return;
    if (!first) {  // the screen after the code: the server has it, and its draft is done with
      sessionStorage.removeItem(draftKey(event.unit));
      pending(null);
      return;
    }
    event.resent = true;
    pending(event);
    setTimeout(function () { Shiny.setInputValue("nl_event", event, {priority: "event"}); }, 0);
  }
  function fields() {
    var out = {};
    document.querySelectorAll(".nl-field").forEach(function (field) {
      var name = field.getAttribute("data-field"), kind = field.getAttribute("data-kind");
      var checked = field.querySelector("input[type=radio]:checked");
      var input = field.querySelector("input:not([type=radio])");
      var raw = checked ? checked.value : (input ? input.value : "");
      if (raw === "") out[name] = null;
      else if (kind === "boolean") out[name] = raw === "true";
      else if (kind === "integer" || kind === "number") out[name] = Number(raw);
      else out[name] = raw;
    });
    return out;
  }
  function start() {
    send("start", {coder: value("nl-coder"), adjudicate: document.getElementById("nl-adjudicate").checked});
  }
  // A write that failed: the page stays as it was, the code on it, with the reason.
  function problem(message) {
    var box = document.getElementById("nl-problem");
    if (!box) {
      box = document.createElement("p");
      box.id = "nl-problem";
      box.className = "nl-problem";
      box.setAttribute("role", "alert");
      var top = document.querySelector(".nl-top, .nl-welcome h1");
      if (top) top.insertAdjacentElement("afterend", box); else document.body.prepend(box);
    }
    box.textContent = message.message;
    document.querySelectorAll(".nl-screen button").forEach(function (b) { b.disabled = false; });
  }
  // The link's key leaves the address once the page is connected, so that it
  // is in neither the browser's history nor a later request. Shiny sends the
  // address it first connected with again when it reconnects; the tab keeps
  // the key (sessionStorage) for a reload, put back before Shiny reads it.
  var stored = window.sessionStorage && sessionStorage.getItem("nl-key");
  var params = new URLSearchParams(window.location.search);
  if (stored && !params.has("key")) {
    params.set("key", stored);
    history.replaceState(history.state, "", "?" + params.toString() + window.location.hash);
  }
  function dropKey() {
    var params = new URLSearchParams(window.location.search);
    if (!params.has("key")) return;
    sessionStorage.setItem("nl-key", params.get("key"));
    params.delete("key");
    var search = params.toString();
    history.replaceState(history.state, "", window.location.pathname + (search ? "?" + search : "") +
                         window.location.hash);
  }
  // A page put away in the back-forward cache (its coder gone to another
  // page) holds no text back from the others; shown again, it claims its text
  // again, or, its connection gone, is loaded afresh and asks for one. Sent at
  // once, not batched: a page in the cache runs no more timers.
  function lifecycle(type) {
    Shiny.shinyapp.sendInput({nl_event: {type: type, unit: unit(), note: "", nonce: nonce()}});
  }
  window.addEventListener("pagehide", function (e) {
    if (e.persisted && connected()) lifecycle("release");
  });
  window.addEventListener("pageshow", function (e) {
    if (!e.persisted) return;
    if (connected()) lifecycle("resume"); else window.location.reload();
  });
  document.addEventListener("input", keepDraft);
  document.addEventListener("change", keepDraft);
  document.addEventListener("DOMContentLoaded", function () {
    // each new screen of a text takes back the draft the tab kept of it
    new MutationObserver(function () {
      var text = document.querySelector(".nl-text");
      if (!text || text.nlDrawn) return;
      text.nlDrawn = true;
      restoreDraft();
    }).observe(document.body, {childList: true, subtree: true});

    Shiny.addCustomMessageHandler("nl_problem", problem);
    $(document).on("shiny:connected", dropKey);
    $(document).on("shiny:connected", function () { reconnected = true; });
    $(document).on("shiny:value", screenDrawn);
  });
  document.addEventListener("click", function (e) {
    var target = e.target.closest("button");
    if (!target || target.disabled) return;
    if (target.classList.contains("nl-label")) send("code", {value: {code: target.getAttribute("data-value")}});
    else if (target.id === "nl-save") send("code", {value: fields()});
    else if (target.id === "nl-cannot") send("uncodable", {reason: value("nl-reason"), other: value("nl-other")});
    else if (target.id === "nl-back") send("back", {});
    else if (target.id === "nl-skip") send("skip", {});
    else if (target.id === "nl-start") start();
    else if (target.classList.contains("nl-pick")) send("pick", {pick: Number(target.getAttribute("data-unit"))});
    else if (target.classList.contains("nl-view")) send("view", {view: target.getAttribute("data-view")});
  });
  document.addEventListener("keydown", function (e) {
    // a key held down repeats: it must not code the texts that follow unseen
    if (e.repeat) return;
    var typing = e.target.matches && e.target.matches("input, select, textarea");
    if (e.key === "Enter") {
      if (e.target.id === "nl-coder") { start(); return; }
      if (e.target.id === "nl-other") { document.getElementById("nl-cannot").click(); return; }
      var save = document.getElementById("nl-save");
      if (save) { e.preventDefault(); save.click(); }
      return;
    }
    if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
    if (/^[1-9]$/.test(e.key)) {
      var button = document.querySelectorAll(".nl-label")[Number(e.key) - 1];
      if (button) button.click();
    }
  });
})();
