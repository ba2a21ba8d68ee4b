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
})();
