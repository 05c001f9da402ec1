// The lead's links screen: copy a person's link, renew it. (coding.js sends
// the coding events; this file only these two.) The server decides, through
// its gate, whether the session may renew anything.
(function () {
  document.addEventListener("click", function (e) {
    var button = e.target.closest("button.nl-copy, button.nl-renew");
    if (!button || button.disabled) return;
    if (button.classList.contains("nl-copy")) {
      var input = document.getElementById(button.getAttribute("data-for"));
      input.select();
      // the clipboard API needs HTTPS or this machine; a page served on the network copies the selection
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(input.value);
      else document.execCommand("copy");
      button.textContent = "Copied";
      return;
    }
    button.disabled = true;
    Shiny.setInputValue("nl_event", {type: "renew", name: button.getAttribute("data-name"),
                                     nonce: String(Date.now()) + Math.random()}, {priority: "event"});
  });
})();
