// The agent dashboard's live feed: the agent's event stream (API.md "Events"), from the last
// event the page was drawn with; new events go on top. Text only (textContent), never HTML.
(function () {
  "use strict";
  const root = document.querySelector(".agent-dashboard");
  if (!root) return;
  const body = document.querySelector("#event-feed tbody");
  const status = document.getElementById("feed-status");
  const KEEP = 50;
  let after = Number(root.dataset.after || 0);
  let delay = 500;

  function cell(row, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  function show(event) {
    if (typeof event.seq !== "number" || event.seq <= after) return;
    after = event.seq;
    const record = event.record || {};
    const row = document.createElement("tr");
    row.dataset.seq = String(event.seq);
    row.className = "live";
    cell(row, String(event.seq), "num");
    cell(row, String(event.at || "").slice(0, 19) + "Z");
    cell(row, event.type + (event.reason ? " (" + event.reason + ")" : ""));
    cell(row, record.kind || "");
    const shown = record.title || record.key || record.id || "";
    const named = document.createElement("span");  // as the server draws it: the id on hover
    named.title = record.id || "";
    named.textContent = shown.length > 40 ? shown.slice(0, 39) + "…" : shown;
    cell(row, "").appendChild(named);
    cell(row, event.sessionId || "—");
    body.insertBefore(row, body.firstChild);
    while (body.rows.length > KEEP) body.deleteRow(body.rows.length - 1);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(scheme + "//" + location.host + root.dataset.stream + "?after=" + after);
    socket.onopen = function () { status.textContent = "(live)"; delay = 500; };
    socket.onmessage = function (message) {
      try { show(JSON.parse(message.data)); } catch (e) { /* not an event */ }
    };
    socket.onclose = function (closed) {
      if (closed.code >= 4400 && closed.code < 4429) {
        status.textContent = "(closed: " + (closed.reason || closed.code) + ")";
        return;
      }
      status.textContent = "(reconnecting…)";
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
