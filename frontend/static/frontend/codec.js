// Codec server decoding, in the browser: payloads a client's PayloadCodec encoded (encryption,
// compression) reach the page as stored, each in an element with its wire form in data-codec. When the
// namespace has a codec server (the #codec note carries its URL), they are posted to {url}/decode as
// {"payloads": [...]} with an X-Namespace header -- the Temporal UI's protocol -- and the answers are
// written in as text (textContent: nothing the codec returns is parsed as markup). The server never
// sees the decoded values. An unreachable codec leaves the payloads as stored and says so.
(function () {
  "use strict";
  const note = document.getElementById("codec");
  if (!note || !window.fetch) return;
  const url = note.dataset.codecUrl;
  const namespace = note.dataset.namespace;
  const BATCH = 50;
  // Answers by wire form: live updates and history paging re-render the same payloads, which are not
  // posted again.
  const known = new Map();
  let decoded = 0;
  let failed = null;

  function bytes(b64) {
    const raw = atob(b64 || "");
    const out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i += 1) out[i] = raw.charCodeAt(i);
    return out;
  }
  function text(b64) { return new TextDecoder("utf-8").decode(bytes(b64)); }

  // A decoded payload as the console shows payloads: JSON pretty-printed, null, or base64 (with its encoding).
  function shown(payload) {
    const metadata = (payload && payload.metadata) || {};
    const encoding = metadata.encoding ? text(metadata.encoding) : "";
    if (encoding === "binary/null") return { encoding: encoding, body: "null" };
    if (encoding === "json/plain" || encoding === "json/protobuf") {
      try {
        return { encoding: encoding, body: JSON.stringify(JSON.parse(text(payload.data)), null, 2) };
      } catch (e) { /* not JSON after all: shown as base64 below */ }
    }
    return { encoding: encoding, body: payload.data || "", binary: true };
  }

  function put(element, payload) {
    const view = shown(payload);
    const pre = element.querySelector("pre");
    const state = element.querySelector(".codec-state");
    if (pre) pre.textContent = view.body;
    if (state) state.textContent = "decoded by the codec server" + (view.encoding ? " · " + view.encoding : "") + (view.binary ? " · base64" : "");
    element.dataset.codecState = "decoded";
  }

  function say() {
    note.classList.toggle("error", failed !== null);
    if (failed !== null) {
      note.textContent = "The codec server " + url + " could not decode this page's payloads (" + failed +
        "): they are shown as stored, in base64.";
    } else {
      note.textContent = decoded + " payload" + (decoded === 1 ? "" : "s") + " decoded by the codec server " + url + ".";
    }
    note.dataset.state = failed !== null ? "failed" : "decoded";
  }

  async function post(elements) {
    const payloads = elements.map(function (el) { return JSON.parse(el.dataset.codec); });
    const response = await fetch(url + "/decode", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Namespace": namespace },
      body: JSON.stringify({ payloads: payloads }),
    });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const answer = await response.json();
    if (!answer || !Array.isArray(answer.payloads) || answer.payloads.length !== payloads.length) {
      throw new Error("an answer without one payload per payload sent");
    }
    return answer.payloads;
  }

  async function decodeAll() {
    const waiting = Array.from(document.querySelectorAll("[data-codec]:not([data-codec-state])"));
    if (!waiting.length) return;
    const fresh = [];
    waiting.forEach(function (el) {
      if (known.has(el.dataset.codec)) put(el, known.get(el.dataset.codec));
      else { el.dataset.codecState = "pending"; fresh.push(el); }
    });
    for (let i = 0; i < fresh.length; i += BATCH) {
      const chunk = fresh.slice(i, i + BATCH);
      try {
        const answers = await post(chunk);
        chunk.forEach(function (el, k) {
          known.set(el.dataset.codec, answers[k]);
          put(el, answers[k]);
          decoded += 1;
        });
        failed = null;
      } catch (error) {
        failed = (error && error.message) || "unreachable";
        chunk.forEach(function (el) {
          el.dataset.codecState = "failed";
          const state = el.querySelector(".codec-state");
          if (state) state.textContent = "base64 · codec server unreachable";
        });
      }
    }
    say();
  }

  decodeAll();
  document.addEventListener("perdura:live", decodeAll);
  document.body.addEventListener("htmx:afterSwap", decodeAll);
})();
