// ebb ui: fetches JSON (and server-drawn SVG) from the same server; every change is a POST
// carrying the token the server wrote into this page. User text is only ever set as textContent.
"use strict";

const TOKEN = document.querySelector('meta[name="ebb-token"]').content;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}

function say(message, kind) {
  const status = document.getElementById("status");
  status.textContent = message;
  status.className = kind || "";
}

async function getJSON(url) {
  const r = await fetch(url, { credentials: "same-origin" });
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

async function post(url, body) {
  const r = await fetch(url, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Ebb-Token": TOKEN },
    body: JSON.stringify(body),
  });
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

const fmt = (x) => (x === 0 ? "0" : Math.abs(x) < 0.001 ? x.toExponential(2) : x.toFixed(3));
const day = (iso) => (iso ? iso.replace("T", " ").slice(0, 16) : "");

// -- review queue ------------------------------------------------------------------------------

async function loadQueue() {
  const box = document.getElementById("queue");
  const data = await getJSON("/api/queue");
  box.replaceChildren();
  if (!data.items.length) {
    box.append(el("p", { class: "empty" }, "The review queue is empty."));
    return;
  }
  const shown = data.items.length;
  box.append(el("p", { class: "count" }, shown < data.total
    ? `${data.total} memories wait; the first ${shown} are shown (approve or restore to see more).`
    : `${data.total} ${data.total === 1 ? "memory waits" : "memories wait"}.`));
  for (const item of data.items) box.append(queueCard(item));
}

function queueCard(item) {
  const links = el("ul", { class: "links" });
  for (const l of item.links) {
    const arrow = l.direction === "out" ? `—${l.kind}→` : `←${l.kind}—`;
    links.append(el("li", {}, `${arrow} `, el("code", {}, l.id),
      ` (${l.tier}, decayed weight ${fmt(l.decayed)})`));
  }
  if (!item.links.length) links.append(el("li", { class: "empty" }, "no links"));
  const history = el("ul", { class: "history" });
  for (const e of item.history) {
    history.append(el("li", {}, `${day(e.at)} · ${e.action} `,
      e.from || e.to ? `${e.from || "–"} → ${e.to || "–"} ` : "",
      `by ${e.by}`, e.reason ? ` · ${e.reason}` : ""));
  }
  const card = el("article", { class: "card", "data-id": item.id },
    el("h3", {}, el("code", {}, item.id), el("span", { class: "kind" }, item.kind)),
    el("p", { class: "text" }, item.text),
    el("p", { class: "reason" }, el("b", {}, "Why it is here: "), item.reason || "(no reason)",
      item.queued_at ? ` · queued ${day(item.queued_at)}` : "",
      ` · activation now ${fmt(item.activation)}`),
    sparkline(item),
    el("details", {}, el("summary", {}, `Links (${item.links.length})`), links),
    el("details", {}, el("summary", {}, `History (${item.history.length})`), history),
  );
  const actions = el("div", { class: "actions" },
    el("button", { class: "approve", onclick: () => approve(item.id, card) }, "Approve deletion"),
    el("button", { class: "restore", onclick: () => restore(item.id, card) }, "Restore"),
    el("button", { class: "plain", onclick: () => showDecay(item.id) }, "Activation history"),
    el("button", { class: "plain", onclick: () => showGraph(item.id) }, "Neighbourhood"),
  );
  card.append(actions);
  return card;
}

function sparkline(item) {
  const box = el("div", { class: "spark-box" });
  box.innerHTML = item.spark; // drawn by the server, numbers and escaped text only
  box.append(el("span", { class: "spark-label" },
    "activation, last 90 days (dashed: the cold cut)"));
  return box;
}

async function approve(id, card) {
  const name = document.getElementById("approver").value.trim();
  if (!name) {
    say("Type your name first: every approval is recorded under the approver's name.", "error");
    document.getElementById("approver").focus();
    return;
  }
  if (!confirm(`Delete ${id} for good? It stays in the audit log as JSON.`)) return;
  try {
    const r = await post("/api/approve", { ids: [id], by: name });
    card.remove();
    say(`Deleted ${r.deleted.join(", ")}; approved by ${name}.`, "ok");
  } catch (e) {
    say(`Not deleted: ${e.message}`, "error");
  }
}

async function restore(id, card) {
  const name = document.getElementById("approver").value.trim();
  try {
    const r = await post("/api/restore", { id, by: name });
    card.remove();
    say(`Restored ${r.restored} to ${r.tier}.`, "ok");
  } catch (e) {
    say(`Not restored: ${e.message}`, "error");
  }
}

// -- graph and decay ---------------------------------------------------------------------------

async function loadGraph() {
  const id = document.getElementById("graph-id").value.trim();
  const k = document.getElementById("graph-k").value || "30";
  const q = new URLSearchParams({ k });
  if (id) q.set("id", id);
  const data = await getJSON(`/api/graph?${q}`);
  const box = document.getElementById("graph");
  box.innerHTML = data.svg; // drawn by the server with every text escaped
  for (const g of box.querySelectorAll("g.node")) {
    g.addEventListener("click", () => showGraph(g.dataset.id));
    g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") showGraph(g.dataset.id); });
  }
  const detail = document.getElementById("graph-detail");
  detail.replaceChildren();
  const centre = data.nodes.find((n) => n.id === id);
  if (centre) {
    detail.append(el("p", {}, el("code", {}, centre.id), ` · ${centre.tier} · activation `,
      fmt(centre.activation)), el("p", { class: "text" }, centre.text));
  }
}

function showGraph(id) {
  document.getElementById("graph-id").value = id;
  show("graph");
}

async function loadDecay() {
  const q = new URLSearchParams({
    ids: document.getElementById("decay-ids").value.replace(/\s+/g, ""),
    past: document.getElementById("decay-past").value || "90",
    future: document.getElementById("decay-future").value || "90",
  });
  const data = await getJSON(`/api/decay?${q}`);
  document.getElementById("decay").innerHTML = data.svg; // server-drawn, text escaped
}

function showDecay(id) {
  document.getElementById("decay-ids").value = id;
  show("decay");
}

// -- audit log and stats -----------------------------------------------------------------------

async function loadLog() {
  const q = new URLSearchParams({
    id: document.getElementById("log-id").value.trim(),
    action: document.getElementById("log-action").value,
    by: document.getElementById("log-by").value.trim(),
  });
  const data = await getJSON(`/api/log?${q}`);
  const body = document.querySelector("#log tbody");
  body.replaceChildren();
  for (const e of data.entries) {
    body.append(el("tr", { class: `action-${e.action}` },
      el("td", {}, e.seq), el("td", {}, day(e.at)), el("td", {}, e.action),
      el("td", {}, el("code", {}, e.id)),
      el("td", {}, e.from || e.to ? `${e.from || "–"} → ${e.to || "–"}` : ""),
      el("td", { class: "by" }, e.by), el("td", {}, e.reason)));
  }
  if (!data.entries.length) body.append(el("tr", {}, el("td", { colspan: "7" }, "No entries.")));
}

async function loadStats() {
  const data = await getJSON("/api/stats");
  const tiers = ["hot", "warm", "cold", "frozen"];
  const head = document.querySelector("#stats thead");
  head.replaceChildren(el("tr", {}, el("th", {}, "namespace"), el("th", {}, "memories"),
    ...tiers.map((t) => el("th", { class: `tier-${t}` }, t)), el("th", {}, "links"),
    el("th", {}, "pinned"), el("th", {}, "review queue"), el("th", {}, "audit entries")));
  const body = document.querySelector("#stats tbody");
  body.replaceChildren();
  for (const s of data.namespaces) {
    body.append(el("tr", { class: s.namespace === data.current ? "current" : "" },
      el("td", {}, s.namespace), el("td", {}, s.nodes),
      ...tiers.map((t) => el("td", {}, s.by_tier[t] || 0)), el("td", {}, s.edges),
      el("td", {}, s.pinned), el("td", {}, s.review_queue), el("td", {}, s.audit_entries)));
  }
}

// -- views ----------------------------------------------------------------------------------------

const loaders = { queue: loadQueue, graph: loadGraph, decay: loadDecay, log: loadLog,
  stats: loadStats };

async function show(view) {
  if (document.body.dataset.view && document.body.dataset.view !== view) say("");
  for (const b of document.querySelectorAll("nav button")) {
    b.classList.toggle("active", b.dataset.view === view);
  }
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== `view-${view}`;
  document.body.dataset.view = view;
  document.body.dataset.loading = "1";
  try {
    await loaders[view]();
  } catch (e) {
    say(e.message, "error");
  } finally {
    delete document.body.dataset.loading;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("nav button")) {
    b.addEventListener("click", () => show(b.dataset.view));
  }
  for (const [form, view] of [["graph-form", "graph"], ["decay-form", "decay"],
    ["log-form", "log"]]) {
    document.getElementById(form).addEventListener("submit", (ev) => {
      ev.preventDefault();
      show(view);
    });
  }
  show("queue");
});
