// The admin's home, live: every agent's stream at once (/ws/v1/events, staff only). A record
// tagged or pinned while the page is open is drawn by the server (the row route) and put on top;
// one that leaves is taken out. Only on the first page, and only what the filters let through.
(function () {
  "use strict";
  const root = document.querySelector(".shipped");
  if (!root || root.dataset.live !== "1") return;
  const body = document.querySelector("#shipped tbody");
  const status = document.getElementById("live-status");
  const params = new URLSearchParams(location.search);
  const want = {
    agent: params.getAll("agent").filter(Boolean),
    kind: params.get("kind") || "",
    source: params.get("source") || "",
    session: params.get("session") || "",
  };
  const frozen = Boolean(params.get("until") || params.get("q") || params.get("where"));
  const KEEP = 200;
  let delay = 500;

  function wanted(event) {
    const record = event.record || {};
    if (want.agent.length && want.agent.indexOf(event.agent) < 0) return false;
    if (want.kind && record.kind !== want.kind) return false;
    if (want.source && record.source !== want.source) return false;
    if (want.session && event.sessionId !== want.session) return false;
    return true;
  }

  function existing(id) {
    return Array.prototype.find.call(body.rows, function (row) { return row.dataset.id === id; });
  }

  function draw(event, onTop) {
    const record = event.record || {};
    const url = root.dataset.rowUrl + "?" + new URLSearchParams({ agent: event.agent, id: record.id });
    fetch(url, { credentials: "same-origin" }).then(function (response) {
      if (!response.ok) return null;
      return response.text();
    }).then(function (html) {
      if (!html) return;
      const holder = document.createElement("tbody");
      holder.innerHTML = html;  // the server's row: everything in it escaped or sanitized
      const row = holder.rows[0];
      if (!row) return;
      row.classList.add("live");
      const old = existing(record.id);
      const empty = body.querySelector("tr.empty");
      if (empty) empty.remove();
      if (old && !onTop) { old.replaceWith(row); return; }
      if (old) old.remove();
      body.insertBefore(row, body.firstChild);
      while (body.rows.length > KEEP) body.deleteRow(body.rows.length - 1);
    }).catch(function () { /* the next event tries again */ });
  }

  function show(event) {
    const record = event.record || {};
    if (!record.id || !event.agent) return;
    if (event.type === "artifact.deleted") {
      const old = existing(record.id);
      if (old) old.remove();
      return;
    }
    if (event.type === "artifact.pinned") {
      if (existing(record.id)) draw(event, false);
      return;
    }
    if (event.type === "artifact.tagged" && !frozen && wanted(event)) draw(event, true);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(scheme + "//" + location.host + root.dataset.stream);
    socket.onopen = function () { status.textContent = frozen ? "" : "(live)"; delay = 500; };
    socket.onmessage = function (message) {
      try { show(JSON.parse(message.data)); } catch (e) { /* not an event */ }
    };
    socket.onclose = function (closed) {
      if (closed.code >= 4400 && closed.code < 4429) {
        status.textContent = "(not live: " + (closed.reason || closed.code) + ")";
        return;
      }
      status.textContent = "(reconnecting… reload to see what arrived meanwhile)";
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
