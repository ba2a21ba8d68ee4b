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
  // Live updates. A page that carries [data-live] opens a websocket to that path and says what it shows
  // (its query string; again after htmx paging). The server answers with rendered parts, each an element
  // whose id names the one it replaces. Parsing with DOMParser creates inert nodes (no script runs, none
  // loads), and the CSP forbids inline scripts anyway. A closed socket reconnects with backoff, and the
  // server re-reads everything on (re)connect: a lost update costs freshness, never correctness.
  const marker = document.querySelector("[data-live]");
  if (marker && "WebSocket" in window) {
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + marker.dataset.live;
    let socket = null;
    let delay = 500;
    // The version shown (the run's, or the namespace's hint counter): the server skips the re-read when it
    // is current. Not after a reconnect: hints may have been lost without moving the version meanwhile.
    let opens = 0;
    const tell = function (withVersion) {
      if (!socket || socket.readyState !== WebSocket.OPEN) return;
      const shown = withVersion && document.querySelector("[data-version]");
      socket.send(JSON.stringify({ search: location.search, version: shown ? shown.dataset.version : null }));
    };
    const apply = function (html) {
      const parsed = new DOMParser().parseFromString(html, "text/html");
      Array.from(parsed.body.children).forEach(function (part) {
        const current = part.id && document.getElementById(part.id);
        if (!current) return;
        // Keep what the person opened (events, raw JSON) open across the swap.
        const open = new Set();
        current.querySelectorAll("details[open]").forEach(function (d) { open.add(detailsKey(d)); });
        part.querySelectorAll("details").forEach(function (d) { if (open.has(detailsKey(d))) d.open = true; });
        const fresh = document.importNode(part, true);
        current.replaceWith(fresh);
        if (window.htmx) window.htmx.process(fresh);
      });
      document.dispatchEvent(new CustomEvent("perdura:live", { detail: { at: performance.now() } }));
    };
    const connect = function () {
      socket = new WebSocket(url);
      socket.addEventListener("open", function () {
        delay = 500;
        marker.dataset.state = "open";
        opens += 1;
        tell(opens === 1);
      });
      socket.addEventListener("message", function (event) { apply(event.data); });
      socket.addEventListener("close", function () {
        socket = null;
        marker.dataset.state = "closed";
        window.setTimeout(connect, delay);
        delay = Math.min(delay * 2, 30000);
      });
    };
    document.body.addEventListener("htmx:pushedIntoHistory", function () { tell(true); });
    document.body.addEventListener("htmx:historyRestore", function () { tell(false); });
    connect();
  }
  // A <details> by the nearest element with an id (an event) and its place there (the event or its raw JSON).
  function detailsKey(d) {
    const owner = d.parentElement && d.parentElement.closest("[id]");
    if (!owner) return "";
    return owner.id + "/" + Array.prototype.indexOf.call(owner.querySelectorAll("details"), d);
  }
})();
