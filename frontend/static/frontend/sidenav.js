// The side navigation's toggle (a file of its own: the CSP allows no inline script). On a wide screen it
// collapses the nav to a rail of icons and back, and the choice is a cookie, so the server renders the next
// page in that state on <html> and nothing flashes. At a phone's width the nav is a strip above the content
// whose icons the same button opens to labelled links, for this page only: the content keeps the width.
(function () {
  "use strict";
  const root = document.documentElement;
  const narrow = window.matchMedia("(max-width: 820px)");
  const COOKIE = "perdura_nav";

  function remembered() {
    return document.cookie.split("; ").indexOf(COOKIE + "=collapsed") !== -1;
  }
  function remember(collapsed) {
    const lifetime = collapsed ? "collapsed; max-age=31536000" : "; max-age=0";
    const secure = location.protocol === "https:" ? "; Secure" : "";
    document.cookie = COOKIE + "=" + lifetime + "; path=/; SameSite=Lax" + secure;
  }
  function expanded() {
    return narrow.matches ? root.classList.contains("nav-open") : !root.classList.contains("nav-collapsed");
  }
  // The button states what it will do and whether the nav is expanded, at the width the page has now.
  function sync() {
    const button = document.querySelector(".navtoggle");
    if (!button) return;
    const open = expanded();
    button.setAttribute("aria-expanded", String(open));
    button.querySelector(".navlabel").textContent = (open ? "Collapse" : "Expand") + " navigation";
  }

  document.addEventListener("click", function (event) {
    if (!(event.target instanceof Element) || !event.target.closest(".navtoggle")) return;
    if (narrow.matches) root.classList.toggle("nav-open");
    else remember(root.classList.toggle("nav-collapsed"));
    sync();
  });
  narrow.addEventListener("change", sync);
  // A page back from the bfcache shows the nav as it was left, maybe toggled since on another page.
  window.addEventListener("pageshow", function () {
    root.classList.toggle("nav-collapsed", remembered());
    sync();
  });
  document.addEventListener("htmx:historyRestore", sync);
  sync();
})();
