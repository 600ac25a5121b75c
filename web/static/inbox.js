// The alerts inbox by keyboard: j/k select the next/previous alert, Enter opens its largest change, t puts the
// cursor in its triage form. Served from the package (no CDN); the page works without it.
(function () {
  "use strict";
  var alerts = Array.prototype.slice.call(document.querySelectorAll("tbody[data-alert]"));
  if (!alerts.length) { return; }
  var current = -1;

  function select(index) {
    if (current >= 0) { alerts[current].classList.remove("current"); alerts[current].removeAttribute("aria-current"); }
    current = Math.max(0, Math.min(alerts.length - 1, index));
    var alert = alerts[current];
    alert.classList.add("current");
    alert.setAttribute("aria-current", "true");
    alert.scrollIntoView({ block: "nearest" });
    if (history.replaceState) { history.replaceState(null, "", "#" + alert.id); }
  }

  // Back from a triage (the redirect names the alert) or a reload: keep the place.
  var start = location.hash ? alerts.findIndex(function (a) { return "#" + a.id === location.hash; }) : -1;
  if (start >= 0) { select(start); }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var target = event.target;
    if (target && target.closest && target.closest("input, textarea, select, button, a, [contenteditable]")) {
      if (event.key === "Escape" && target.blur) { target.blur(); }
      return;
    }
    if (event.key === "j") { select(current + 1); }
    else if (event.key === "k") { select(current < 0 ? 0 : current - 1); }
    else if (event.key === "Enter" && current >= 0) {
      var link = alerts[current].querySelector("a.open") || alerts[current].querySelector("a.commit-link");
      if (link) { window.location.href = link.href; }
    } else if (event.key === "t" && current >= 0) {
      var field = alerts[current].querySelector("form.triage select");
      if (field) { field.focus(); event.preventDefault(); }
    } else { return; }
    event.preventDefault();
  });
})();
