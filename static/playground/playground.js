// The playground: one session's artifacts, live over its websocket (API.md "Events").
// No build step: plain DOM, every stored string goes in through textContent (never innerHTML).
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("playground-config").textContent);
  const base = "/" + encodeURIComponent(config.agent) + "/v1";
  const cardsEl = document.getElementById("cards");
  const emptyEl = document.getElementById("empty");
  const statusEl = document.getElementById("status");
  const PREVIEW_BYTES = 64 * 1024;
  const INLINE_IMAGES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  const cards = new Map(); // artifact id -> card element
  let lastSeq = Number(config.after) || 0;
  let socket = null;
  let retry = 0;
  let stopped = false;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function mediaType(type) {
    return (type || "").split(";")[0].trim().toLowerCase();
  }

  function contentUrl(id) {
    return base + "/artifacts/" + encodeURIComponent(id) + "/content";
  }

  function renderContent(record, box) {
    box.replaceChildren();
    const content = record.content;
    if (!content) return;
    const type = mediaType(content.contentType);
    const url = contentUrl(record.id);
    const link = el("a", "download", "download (" + content.size.toLocaleString() + " B, " + (content.contentType || "bytes") + ")");
    link.href = url;
    link.setAttribute("download", "");
    if (INLINE_IMAGES.includes(type)) {
      const img = el("img", "preview-image");
      img.src = url + "?v=" + encodeURIComponent(content.sha256);
      img.alt = record.title || record.key || record.id;
      box.append(img);
    } else if (type.startsWith("text/") || type === "application/json" || type.endsWith("+json")) {
      const pre = el("pre", "preview-text", "loading…");
      box.append(pre);
      fetch(url, { credentials: "same-origin", headers: { Range: "bytes=0-" + (PREVIEW_BYTES - 1) } })
        .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
        .then((text) => { pre.textContent = text + (content.size > PREVIEW_BYTES ? "\n… (first 64 KiB)" : ""); })
        .catch(() => { pre.textContent = "(preview unavailable)"; });
    }
    box.append(link);
  }

  function fill(card, record) {
    card.dataset.id = record.id;
    if (record.updatedAt) card.dataset.updated = record.updatedAt;
    const head = card.querySelector(".card-head");
    const badges = [
      el("span", "kind", record.kind),
      el("span", "badge source-" + (record.source === "model" ? "model" : "host"), record.source || "host"),
    ];
    if (typeof record.version === "number") badges.push(el("span", "badge version", "v" + record.version));
    if (record.pinned) badges.push(el("span", "badge pinned", "pinned"));
    head.replaceChildren(...badges);
    card.querySelector(".title").textContent = record.title || record.key || record.id;
    const meta = [];
    if (record.key && record.title) meta.push("key " + record.key);
    if (record.turnId) meta.push("turn " + record.turnId);
    if (record.updatedAt) meta.push("updated " + new Date(record.updatedAt).toLocaleTimeString());
    card.querySelector(".meta").textContent = meta.join(" · ");
    card.querySelector(".data").textContent = JSON.stringify(record.data, null, 2);
    if ("content" in record) renderContent(record, card.querySelector(".content"));
  }

  function newCard() {
    const card = el("article", "card");
    card.append(el("div", "card-head"), el("h2", "title"), el("p", "meta"), el("pre", "data"), el("div", "content"));
    return card;
  }

  function refreshEmpty() {
    emptyEl.hidden = cards.size > 0;
  }

  // A tag (new or again): the same card, changed in place and moved to the top (newest-updated first).
  function upsert(record, { top = true } = {}) {
    let card = cards.get(record.id);
    if (!card) {
      card = newCard();
      cards.set(record.id, card);
      cardsEl.append(card);
    }
    fill(card, record);
    if (top && cardsEl.firstElementChild !== card) cardsEl.prepend(card);
    card.classList.remove("flash");
    void card.offsetWidth; // restart the highlight animation
    card.classList.add("flash");
    refreshEmpty();
  }

  function remove(id) {
    const card = cards.get(id);
    if (card) card.remove();
    cards.delete(id);
    refreshEmpty();
  }

  // Events carry a summary; the full record (content, times) comes from REST.
  function loadFull(id) {
    fetch(base + "/artifacts/" + encodeURIComponent(id), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : null))
      .then((record) => { if (record && cards.has(record.id)) fill(cards.get(record.id), record); })
      .catch(() => {});
  }

  function setStatus(state, text) {
    statusEl.dataset.state = state;
    statusEl.textContent = text;
    document.body.classList.toggle("offline", state === "offline");
  }

  function onMessage(event) {
    let msg;
    try { msg = JSON.parse(event.data); } catch (e) { return; }
    if (typeof msg.seq === "number") {
      if (msg.seq <= lastSeq) return; // replay and live overlap: each seq once
      lastSeq = msg.seq;
    }
    if (msg.type === "artifact.tagged" && msg.record && msg.sessionId && msg.sessionId !== config.session) {
      remove(msg.record.id); // not this session's (any more): never show its new data here
    } else if (msg.type === "artifact.tagged" && msg.record) {
      upsert(msg.record);
      loadFull(msg.record.id);
    } else if (msg.type === "artifact.pinned" && msg.record) {
      loadFull(msg.record.id);
    } else if (msg.type === "artifact.deleted" && msg.record) {
      remove(msg.record.id); // deleted, evicted, pruned, or moved to another session (API.md)
    } else if (msg.error || msg.type === "error") {
      const err = msg.error || msg;
      setStatus("error", err.message || "the server reported an error");
    }
  }

  function connect() {
    if (stopped) return;
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const url = scheme + location.host + base + "/sessions/" + encodeURIComponent(config.session) + "/events?after=" + lastSeq;
    setStatus(retry ? "offline" : "connecting", retry ? "offline — reconnecting…" : "connecting…");
    socket = new WebSocket(url);
    socket.addEventListener("open", () => { retry = 0; setStatus("live", "live"); });
    socket.addEventListener("message", onMessage);
    socket.addEventListener("close", (event) => {
      socket = null;
      if (event.code === 4401 || event.code === 4403) {
        stopped = true;
        setStatus("offline", event.code === 4401 ? "offline — log in again" : "offline — not allowed to watch this session");
        return;
      }
      retry += 1;
      const delay = Math.min(250 * 2 ** Math.min(retry, 5), 5000);
      setStatus("offline", "offline — reconnecting…");
      setTimeout(connect, delay);
    });
  }

  config.records.forEach((record) => upsert(record, { top: false }));
  refreshEmpty();
  window.playground = { cards, get lastSeq() { return lastSeq; }, get socket() { return socket; } };
  connect();
})();
