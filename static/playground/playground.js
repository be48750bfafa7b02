// The playground: one session's artifacts, live over its websocket (API.md "Events"), grouped by
// turn (the turn with the latest activity first, newest-updated first inside a turn), with a
// history drawer per card (the REST versions and diff routes).
// No build step: plain DOM, every stored string goes in through textContent (never innerHTML),
// except the server's sanitized preview fragment (loadPreview).
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("playground-config").textContent);
  const base = "/" + encodeURIComponent(config.agent) + "/v1";
  const cardsEl = document.getElementById("cards");
  const emptyEl = document.getElementById("empty");
  const statusEl = document.getElementById("status");
  const cards = new Map(); // artifact id -> card element
  const records = new Map(); // artifact id -> the newest record known (full, or merged from events)
  const generation = new Map(); // artifact id -> events seen, so a stale REST read is dropped
  const groups = new Map(); // turn key -> turn section
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

  function isoSeconds(stamp) {
    return stamp ? String(stamp).replace(/\.\d+Z$/, "Z") : "—";
  }

  function artifactUrl(id) {
    return base + "/artifacts/" + encodeURIComponent(id);
  }

  function getJson(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)));
  }

  // --- a card ----------------------------------------------------------------------------------

  // The preview is rendered by the server (artifacts_app/previews.py, the one renderer the admin
  // uses too): Markdown sanitized, images inline, PDFs sandboxed, JSON foldable, text capped; HTML,
  // SVG and unknown types only a download. Its fragment is the one HTML this script inserts.
  function previewUrl(id, version) {
    const query = { agent: config.agent, id: id };
    if (version) query.version = String(version);
    return "/playground/preview?" + new URLSearchParams(query).toString();
  }

  function loadPreview(box, url) {
    box.replaceChildren(el("p", "muted preview-loading", "loading the preview…"));
    fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then((r) => (r.ok && (r.headers.get("Content-Type") || "").startsWith("text/html") ? r.text() : Promise.reject(r.status)))
      .then((html) => {
        const template = document.createElement("template");
        template.innerHTML = html;
        box.replaceChildren(template.content);
      })
      .catch(() => { box.replaceChildren(el("p", "muted", "(preview unavailable)")); });
  }

  function renderContent(record, box) {
    const content = record.content;
    const stamp = content ? content.sha256 + "|" + content.contentType : "";
    if (box.dataset.stamp === stamp) return; // same bytes: keep the preview
    box.dataset.stamp = stamp;
    box.replaceChildren();
    if (content) loadPreview(box, previewUrl(record.id));
  }

  function badges(card, record) {
    const list = [
      el("span", "kind", record.kind),
      el("span", "badge source-" + (record.source === "model" ? "model" : "host"), record.source || "host"),
    ];
    if (typeof record.version === "number") list.push(el("span", "badge version", "v" + record.version));
    if (record.pinned) list.push(el("span", "badge pinned", "pinned"));
    card.querySelector(".card-head").replaceChildren(...list);
  }

  function fill(card, record) {
    card.dataset.id = record.id;
    if (record.updatedAt) card.dataset.updated = record.updatedAt;
    badges(card, record);
    card.querySelector(".title").textContent = record.title || record.key || record.id;
    const meta = [];
    if (record.key && record.title) meta.push("key " + record.key);
    if (record.turnId) meta.push("turn " + record.turnId);
    if (record.updatedAt) meta.push("updated " + isoSeconds(record.updatedAt));
    card.querySelector(".meta").textContent = meta.join(" · ");
    card.querySelector(".data").textContent = JSON.stringify(record.data, null, 2);
    if ("content" in record) renderContent(record, card.querySelector(".content"));
  }

  function newCard(id) {
    const card = el("article", "card");
    const history = el("button", "history-button secondary", "history");
    history.type = "button";
    history.addEventListener("click", () => openHistory(id));
    card.append(el("div", "card-head"), el("h3", "title"), el("p", "meta"), el("pre", "data"), el("div", "content"), history);
    return card;
  }

  // --- turns -----------------------------------------------------------------------------------

  function turnKey(record) {
    return record.turnId === null || record.turnId === undefined ? "" : String(record.turnId);
  }

  function order(record) {
    return (record.updatedAt || "") + "\u0000" + record.id; // ISO times with ms and Z sort as text
  }

  function groupFor(key) {
    let section = groups.get(key);
    if (!section) {
      section = el("section", "turn");
      section.dataset.turn = key;
      const head = el("header", "turn-head");
      head.append(el("h2", "turn-title", key ? "turn " + key : "no turn"), el("span", "turn-meta"));
      section.append(head, el("div", "cards"));
      groups.set(key, section);
      cardsEl.append(section);
    }
    return section;
  }

  function refreshGroup(section) {
    const list = section.querySelector(".cards");
    const n = list.childElementCount;
    if (!n) {
      section.remove();
      groups.delete(section.dataset.turn);
      return;
    }
    const newest = records.get(list.firstElementChild.dataset.id);
    section.dataset.updated = newest ? order(newest) : "";
    section.querySelector(".turn-meta").textContent =
      n + " artifact" + (n === 1 ? "" : "s") + " · last activity " + isoSeconds(newest && newest.updatedAt);
  }

  function sortGroups() {
    const sections = Array.from(cardsEl.children);
    const sorted = sections.slice().sort((a, b) => (a.dataset.updated < b.dataset.updated ? 1 : a.dataset.updated > b.dataset.updated ? -1 : 0));
    if (sorted.some((section, i) => section !== sections[i])) sorted.forEach((section) => cardsEl.append(section));
  }

  // Put a card where its record says: its turn's section, newest-updated first.
  function place(id) {
    const card = cards.get(id);
    const record = records.get(id);
    const from = card.closest(".turn");
    const section = groupFor(turnKey(record));
    const list = section.querySelector(".cards");
    const key = order(record);
    let before = null;
    for (const other of list.children) {
      if (other !== card && order(records.get(other.dataset.id)) < key) { before = other; break; }
    }
    if (card.parentNode !== list || card.nextElementSibling !== before) list.insertBefore(card, before);
    refreshGroup(section);
    if (from && from !== section) refreshGroup(from);
    sortGroups();
    refreshFacts();
  }

  function refreshFacts() {
    emptyEl.hidden = cards.size > 0;
    document.getElementById("fact-turns").textContent = String(groups.size);
    let newest = "";
    records.forEach((record) => { if ((record.updatedAt || "") > newest) newest = record.updatedAt; });
    if (newest && newest > (config.lastActivity || "")) document.getElementById("fact-last").textContent = isoSeconds(newest);
    if (!config.capped) {
      document.getElementById("fact-count").textContent = String(cards.size);
      // The picker's count is the same figure: it changes with the header's.
      const option = document.querySelector("#session-select option:checked");
      if (option && option.value === config.session) {
        option.dataset.count = String(cards.size);
        option.textContent = [option.value, option.dataset.owner, option.dataset.created,
          cards.size + " artifact" + (cards.size === 1 ? "" : "s")].join(" · ");
      }
    }
    filterKind();
  }

  // --- the kind filter: cards of other kinds hidden, turns left empty hidden ---------------------
  const kindSelect = document.getElementById("card-kind");
  function filterKind() {
    if (!kindSelect) return;
    const wanted = kindSelect.value;
    let shown = 0;
    cards.forEach((card, id) => {
      const record = records.get(id);
      const hide = Boolean(wanted) && (!record || record.kind !== wanted);
      card.hidden = hide;
      if (!hide) shown += 1;
    });
    groups.forEach((section) => {
      section.hidden = !section.querySelector(".card:not([hidden])");
    });
    document.getElementById("card-kind-shown").textContent =
      wanted ? shown + " of " + cards.size + " shown" : "";
  }
  if (kindSelect) kindSelect.addEventListener("change", filterKind);

  function flash(card) {
    card.classList.remove("flash");
    void card.offsetWidth; // restart the highlight animation
    card.classList.add("flash");
  }

  // A record (new or tagged again): the same card, changed in place and moved where it belongs.
  function upsert(record, { highlight = true } = {}) {
    records.set(record.id, Object.assign({}, records.get(record.id), record));
    let card = cards.get(record.id);
    if (!card) {
      card = newCard(record.id);
      cards.set(record.id, card);
    }
    fill(card, records.get(record.id));
    place(record.id);
    if (highlight) flash(card);
  }

  function remove(id) {
    generation.set(id, (generation.get(id) || 0) + 1); // a REST read under way is now stale
    const card = cards.get(id);
    cards.delete(id);
    records.delete(id);
    if (card) {
      const section = card.closest(".turn");
      card.remove();
      if (section) refreshGroup(section);
    }
    if (historyId === id) closeHistory();
    refreshFacts();
  }

  // Events carry a summary without the turn or the times: the full record comes from REST, and is
  // used only if no later event about the record arrived meanwhile.
  function loadFull(id) {
    const seen = (generation.get(id) || 0) + 1;
    generation.set(id, seen);
    getJson(artifactUrl(id))
      .then((record) => {
        if (generation.get(id) !== seen || record.sessionId !== config.session) return;
        upsert(record, { highlight: !cards.has(id) });
      })
      .catch(() => {});
  }

  function onTagged(msg) {
    const id = msg.record.id;
    if (cards.has(id)) {
      // Shown at once from the event; the turn, the content and the exact time follow from REST.
      upsert(Object.assign({}, msg.record, { updatedAt: msg.at || records.get(id).updatedAt }));
      if (historyId === id) openHistory(id);
    }
    loadFull(id);
  }

  function onPinned(msg) {
    const id = msg.record.id;
    if (!records.has(id)) return;
    const record = Object.assign(records.get(id), { pinned: Boolean(msg.record.pinned) });
    badges(cards.get(id), record);
    flash(cards.get(id));
  }

  // --- the history drawer ----------------------------------------------------------------------

  const drawer = document.getElementById("history");
  const versionsEl = document.getElementById("history-versions");
  const fromEl = document.getElementById("diff-from");
  const toEl = document.getElementById("diff-to");
  const diffEl = document.getElementById("history-diff");
  let historyId = null;
  let versions = [];

  function closeHistory() {
    historyId = null;
    drawer.hidden = true;
  }

  function versionItem(v) {
    const item = el("li", "version-item");
    item.dataset.version = v.version;
    // A version's updatedAt is the moment its tag committed (its createdAt is the record's).
    const facts = ["v" + v.version, isoSeconds(v.updatedAt), v.source];
    if (v.turnId) facts.push("turn " + v.turnId);
    item.append(el("strong", null, facts.join(" · ")), el("span", "version-title", v.title || v.key || ""));
    if (v.content) {
      const link = el("a", "download", "download v" + v.version);
      link.href = artifactUrl(historyId) + "/versions/" + v.version + "/content";
      link.setAttribute("download", "");
      const show = el("button", "secondary version-preview-button", "preview");
      show.type = "button";
      const box = el("div", "version-preview");
      const id = historyId;
      show.addEventListener("click", () => { show.remove(); loadPreview(box, previewUrl(id, v.version)); });
      item.append(link, show, box);
    }
    return item;
  }

  function options(select, chosen) {
    select.replaceChildren(...versions.map((v) => {
      const option = el("option", null, "v" + v.version + " · " + isoSeconds(v.updatedAt));
      option.value = v.version;
      option.selected = v.version === chosen;
      return option;
    }));
  }

  function openHistory(id) {
    historyId = id;
    const record = records.get(id);
    document.getElementById("history-title").textContent = "History of " + (record ? record.title || record.key || id : id);
    drawer.hidden = false;
    versionsEl.replaceChildren(el("li", "muted", "loading…"));
    diffEl.replaceChildren();
    getJson(artifactUrl(id) + "/versions?limit=100")
      .then((page) => {
        if (historyId !== id) return;
        versions = page.results;
        versionsEl.replaceChildren(...versions.map(versionItem));
        options(toEl, versions.length ? versions[0].version : null);
        options(fromEl, versions.length > 1 ? versions[1].version : null);
        document.getElementById("history-compare").hidden = versions.length < 2;
        if (versions.length > 1) compare();
        else diffEl.replaceChildren(el("p", "muted", "Only one version you can see: nothing to compare."));
      })
      .catch(() => { if (historyId === id) versionsEl.replaceChildren(el("li", "error", "(history unavailable)")); });
  }

  function pointer(value, path) {
    // RFC 6901: the value at ``path`` in ``value``, or undefined.
    return path.split("/").slice(1).reduce((node, part) => {
      const key = part.replace(/~1/g, "/").replace(/~0/g, "~");
      return node !== null && typeof node === "object" && key in node ? node[key] : undefined;
    }, value);
  }

  function shown(value) {
    return value === undefined ? "—" : JSON.stringify(value);
  }

  function diffRow(name, before, after) {
    const row = el("tr", "diff-field");
    row.dataset.field = name;
    row.append(el("th", null, name), el("td", "diff-from", before), el("td", "diff-to", after));
    return row;
  }

  function compare() {
    const id = historyId;
    const from = Number(fromEl.value);
    const to = Number(toEl.value);
    if (!from || !to || from === to) {
      diffEl.replaceChildren(el("p", "muted", "Pick two different versions."));
      return;
    }
    diffEl.replaceChildren(el("p", "muted", "comparing…"));
    getJson(artifactUrl(id) + "/versions/" + to + "/diff?from=" + from)
      .then((diff) => {
        if (historyId !== id) return;
        const old = versions.find((v) => v.version === diff.from);
        const table = el("table", "diff-table");
        const head = el("tr");
        head.append(el("th", null, "field"), el("th", null, "v" + diff.from), el("th", null, "v" + diff.to));
        table.append(head);
        Object.entries(diff.fields || {}).forEach(([name, change]) => {
          table.append(diffRow(name, shown(change.from), shown(change.to)));
        });
        (diff.data || []).forEach((op) => {
          const before = old && op.op !== "add" ? shown(pointer(old.data, op.path)) : "—";
          const after = op.op === "remove" ? "—" : shown(op.value);
          table.append(diffRow("data" + op.path, before, after));
        });
        diffEl.replaceChildren(table.childElementCount > 1 ? table : el("p", "muted", "These two versions are the same."));
      })
      .catch((status) => { if (historyId === id) diffEl.replaceChildren(el("p", "error", "(diff unavailable: " + status + ")")); });
  }

  document.getElementById("history-close").addEventListener("click", closeHistory);
  document.getElementById("history-compare").addEventListener("submit", (event) => { event.preventDefault(); compare(); });

  // --- the stream ------------------------------------------------------------------------------

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
      onTagged(msg);
    } else if (msg.type === "artifact.pinned" && msg.record) {
      onPinned(msg);
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

  config.records.forEach((record) => upsert(record, { highlight: false }));
  refreshFacts();
  window.playground = { cards, records, groups, get lastSeq() { return lastSeq; }, get socket() { return socket; } };
  connect();
})();
