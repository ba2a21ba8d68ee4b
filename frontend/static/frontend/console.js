// Perdura console: the little script the pages need (htmx does the rest). No inline handlers: the CSP
// allows scripts from this origin only.
(function () {
  "use strict";
  // "/" focuses the list filter, as in the Temporal UI and most consoles.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.isContentEditable)) return;
    const query = document.getElementById("query");
    if (query) { event.preventDefault(); query.focus(); query.select(); }
  });
  // Escape closes the namespace menu.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    document.querySelectorAll("details.switcher[open]").forEach(function (menu) {
      menu.removeAttribute("open");
      menu.querySelector("summary").focus();
    });
  });
})();
