// Perdura console: the run page's action dialogs. A button with data-open-dialog opens that <dialog>
// as a modal (Escape closes it, focus returns to the button); elements with data-load-on-open get an
// htmx "dialog-open" event (the reset form, the stack trace load when opened). Delegated listeners,
// so the bar keeps working after htmx swaps it. No inline handlers: the CSP allows this origin's files.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    const opener = event.target.closest("[data-open-dialog]");
    if (opener) {
      const dialog = document.getElementById(opener.dataset.openDialog);
      if (dialog && !dialog.open) {
        dialog.showModal();
        dialog.querySelectorAll("[data-load-on-open]").forEach(function (element) {
          if (window.htmx) window.htmx.trigger(element, "dialog-open");
        });
      }
      return;
    }
    const closer = event.target.closest("[data-close-dialog]");
    if (closer) {
      const dialog = closer.closest("dialog");
      if (dialog) dialog.close();
    }
  });
  // The bar offers what the run's status allows. When a live update shows another status (the run closed
  // on its own, or after a cancellation), the bar is asked for again; never while one of its dialogs is
  // open (the person's form stays), but when that dialog closes.
  const refresh = function () {
    const bar = document.getElementById("run-actions");
    const badge = document.getElementById("run-status");
    if (!bar || !badge || !window.htmx || !bar.dataset.barUrl) return;
    if (badge.textContent.trim() === bar.dataset.status || bar.querySelector("dialog[open]")) return;
    bar.dataset.status = badge.textContent.trim();  // asked once per change
    window.htmx.ajax("GET", bar.dataset.barUrl, { target: bar, swap: "outerHTML" });
  };
  document.addEventListener("perdura:live", refresh);
  document.addEventListener("close", function (event) {
    if (event.target.tagName === "DIALOG") window.setTimeout(refresh, 0);
  }, true);
})();
