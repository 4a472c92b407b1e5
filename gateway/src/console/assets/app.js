// The ADK console page: a hash router over the console's JSON API and live views (SSE).
//
// Everything the services return is data from agents and users, so it is attacker-controlled:
// it reaches the page only through `textContent` and attribute setters of `el()`, never as
// HTML. The sign-in token is posted once and kept by the console in an HttpOnly cookie; the
// page never stores it.
"use strict";

const view = document.getElementById("view");
const crumbs = document.getElementById("crumbs");
const EVENTS_PER_PAGE = 100;
const FEED_KEPT = 200;

// The live view (EventSource) of the current page; closed when the page changes.
let live = null;

function closeLive() {
  if (live) {
    live.close();
    live = null;
  }
}

// An element with properties/attributes and children (strings become text nodes).
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (isAbsent(child)) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Skipped children: what `cond ? el(...) : null` gives when `cond` is false.
function isAbsent(child) {
  return child === null || child === undefined || child === false;
}

// Replaces the page's content, spreading arrays; absent children are skipped (`replaceChildren`
// would show them as the text "null").
function show(...nodes) {
  view.replaceChildren(...nodes.flat().filter((node) => !isAbsent(node)));
}

function enc(s) {
  return encodeURIComponent(s);
}

function link(hash, text) {
  return el("a", { href: hash, text });
}

function json(value) {
  return el("pre", { text: JSON.stringify(value, null, 2) });
}

function time(t) {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}

class ApiError extends Error {
  constructor(status, body) {
    super(body.error || `HTTP ${status}`);
    this.status = status;
    this.code = body.code;
  }
}

// Page changes so far. An answer that arrives after the page that asked for it was left is
// dropped (Superseded), so a slow page never replaces the one shown after it.
let pageChanges = 0;

class Superseded extends Error {}

// Calls the console's API; a 401 shows the sign-in form.
async function api(path, options) {
  const askedOn = pageChanges;
  const response = await fetch(path, options);
  let body = {};
  try {
    body = await response.json();
  } catch (_) {
    body = {};
  }
  if (askedOn !== pageChanges) throw new Superseded();
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

function post(path, body) {
  return api(path, {
    method: "POST",
    headers: { "content-type": "application/json", "x-console-write": "1" },
    body: JSON.stringify(body),
  });
}

// What a page shows where a list has nothing in it.
function empty(text) {
  return el("p", { class: "muted empty", text });
}

function errorBox(error) {
  return el("p", { class: "error", role: "alert", text: error.message || String(error) });
}

// Shows what failed: the sign-in form when the gateway wants a token (its refusal is for
// programs, not for a person opening the console).
function failed(error) {
  if (error instanceof Superseded) return;
  if (error instanceof ApiError && error.status === 401) {
    showLogin();
  } else {
    show(errorBox(error));
  }
}

function setCrumbs(parts) {
  crumbs.replaceChildren(...parts.map(([hash, text], i) =>
    i === parts.length - 1 ? el("span", { text }) : link(hash, text)));
}

// ---- sign-in ----

function showLogin() {
  setCrumbs([]);
  const input = el("input", { type: "password", id: "token", autocomplete: "off", size: 40, required: true });
  const problem = el("p", { class: "error", hidden: true });
  const form = el("form", { class: "login", id: "login", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await post("/api/login", { token: input.value });
      input.value = "";
      route();
    } catch (error) {
      problem.hidden = false;
      problem.textContent = error.message;
    }
  } },
  el("h1", { text: "Sign in" }),
  el("p", { class: "muted", text: "This gateway requires a token: sign in with the bearer token you would give the services. The console shows what that token may see." }),
  el("label", {}, "Token ", input), " ",
  el("button", { class: "primary", type: "submit", text: "Sign in" }),
  problem);
  show(form);
  input.focus();
}

async function refreshWho() {
  try {
    const who = await api("/api/whoami");
    document.getElementById("logout").hidden = !who.signed_in;
  } catch (_) {
    document.getElementById("logout").hidden = true;
  }
}

document.getElementById("logout").addEventListener("click", async () => {
  await post("/api/logout", {});
  if (location.hash === "#/") route();
  else location.hash = "#/";
});

// ---- confirmation ----

// Asks `text`; resolves true once the user confirms with the `action` button.
function confirmAction(text, action) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = action;
  return new Promise((resolve) => {
    const ok = document.getElementById("confirm-ok");
    const cancel = document.getElementById("confirm-cancel");
    const done = (answer) => {
      ok.onclick = null;
      cancel.onclick = null;
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    ok.onclick = () => done(true);
    cancel.onclick = () => done(false);
    dialog.onclose = () => done(false);
    dialog.showModal();
  });
}

// ---- pages ----

function pager(table, go) {
  return el("div", { class: "pager" },
    el("button", { type: "button", text: "« First", disabled: table.page <= 1, onclick: () => go(1) }),
    el("button", { type: "button", text: "‹ Previous", disabled: table.page <= 1, onclick: () => go(table.page - 1) }),
    el("span", { class: "page-info", text: `Page ${table.page} of ${table.pages} (${table.total} in all)` }),
    el("button", { type: "button", text: "Next ›", disabled: table.page >= table.pages, onclick: () => go(table.page + 1) }),
    el("button", { type: "button", text: "Last »", disabled: table.page >= table.pages, onclick: () => go(table.pages) }));
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

async function homePage() {
  setCrumbs([["#/", "Home"]]);
  const [health, apps] = await Promise.all([api("/api/health"), api("/api/apps")]);
  const open = el("input", { id: "open-app", placeholder: "app name", required: true });
  show(
    el("h1", { text: "Services" }),
    el("div", { class: "cards", id: "health" }, health.services.map((s) => el("div", { class: "card" },
      el("div", { text: s.service }),
      el("div", { class: s.status === "SERVING" ? "status-SERVING" : "status-bad", text: s.status }),
      el("div", { class: "muted", text: `${s.endpoint} · ${s.millis} ms` }),
      s.error ? el("div", { class: "error", text: s.error }) : null)),
    el("div", { class: "card" }, el("div", { text: "Live views open" }), el("div", { class: "figure", text: health.live_views }))),
    el("h1", { text: "Apps" }),
    apps.apps.length
      ? el("ul", { id: "apps" }, apps.apps.map((a) => el("li", {}, link(`#/app/${enc(a)}`, a))))
      : el("p", { class: "muted", text: "No apps with sessions that this token may see." }),
    el("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); location.hash = `#/app/${enc(open.value.trim())}`; } },
      el("label", {}, "Open an app by name ", open), el("button", { type: "submit", text: "Open" })));
}

async function appPage(app, params) {
  setCrumbs([["#/", "Home"], [`#/app/${enc(app)}`, app]]);
  const prefix = params.get("prefix") || "";
  const page = params.get("page") || 1;
  const userInput = el("input", { id: "open-user", placeholder: "user id", required: true });
  const nav = el("div", { class: "toolbar" },
    link(`#/app/${enc(app)}/sessions`, "All sessions"), " · ",
    link(`#/app/${enc(app)}/feed`, "Live activity"), " · ",
    el("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); location.hash = `#/app/${enc(app)}/user/${enc(userInput.value.trim())}`; } },
      el("label", {}, "Open a user ", userInput), el("button", { type: "submit", text: "Open" })));
  let data;
  try {
    data = await api(`/api/apps/${enc(app)}/users${query({ prefix, page })}`);
  } catch (error) {
    if (error.status === 401 || error instanceof Superseded) throw error;
    show(el("h1", { text: app }), nav, errorBox(error));
    return;
  }
  const f = data.figures;
  const filter = el("input", { id: "user-prefix", placeholder: "user id starts with", value: prefix });
  const go = (p) => { location.hash = `#/app/${enc(app)}${query({ prefix: filter.value, page: p })}`; };
  show(
    el("h1", { text: app }),
    el("div", { class: "cards", id: "figures" },
      [["Sessions", f.sessions], ["Users", f.users], ["Events", f.events]].map(([label, n]) =>
        el("div", { class: "card" }, el("div", { text: label }), el("div", { class: "figure", text: n })))),
    f.truncated ? el("p", { class: "muted", text: "Only the first sessions were read: the figures are partial." }) : null,
    nav,
    el("h2", { text: "Users" }),
    el("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); go(1); } }, filter, el("button", { type: "submit", text: "Filter" })),
    data.table.total === 0
      ? empty(prefix
        ? `No user of ${app} has an id starting with "${prefix}".`
        : `App ${app} has no sessions yet (an app exists once a session is created in it).`)
      : [pager(data.table, go),
        el("table", { id: "users" },
          el("thead", {}, el("tr", {}, ["User", "Sessions", "Events", "Last update"].map((h) => el("th", { text: h })))),
          el("tbody", {}, data.table.rows.map((u) => el("tr", {},
            el("td", {}, link(`#/app/${enc(app)}/user/${enc(u.user_id)}`, u.user_id)),
            el("td", { text: u.sessions }), el("td", { text: u.events }), el("td", { text: time(u.last_update_time) })))))]);
}

async function sessionsPage(app, user, params) {
  const base = user === null ? `#/app/${enc(app)}/sessions` : `#/app/${enc(app)}/user/${enc(user)}`;
  setCrumbs([["#/", "Home"], [`#/app/${enc(app)}`, app], [base, user === null ? "sessions" : user]]);
  const prefix = params.get("prefix") || "";
  const userFilter = user === null ? params.get("user") || "" : user;
  const page = params.get("page") || 1;
  const data = await api(`/api/apps/${enc(app)}/sessions${query({ user: userFilter, prefix, page })}`);
  const prefixInput = el("input", { id: "session-prefix", placeholder: "session id starts with", value: prefix });
  const userInput = user === null ? el("input", { id: "session-user", placeholder: "user id", value: userFilter }) : null;
  const go = (p) => { location.hash = base + query({ user: userInput ? userInput.value : undefined, prefix: prefixInput.value, page: p }); };
  show(
    el("h1", { text: user === null ? `Sessions of ${app}` : `${user} in ${app}` }),
    user !== null ? el("div", { class: "toolbar" }, link(`#/app/${enc(app)}/user/${enc(user)}/memory`, "Memory of this user")) : null,
    el("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); go(1); } }, userInput, prefixInput, el("button", { type: "submit", text: "Filter" })),
    data.truncated ? el("p", { class: "muted", text: "Only the first sessions were read: the list is partial." }) : null,
    data.table.total === 0
      ? empty(prefix || (user === null && userFilter)
        ? "No session matches the filter."
        : user === null ? `App ${app} has no sessions yet.` : `User ${user} has no sessions in ${app}.`)
      : [pager(data.table, go),
        el("table", { id: "sessions" },
          el("thead", {}, el("tr", {}, ["Session", "User", "Events", "Last update", "Created"].map((h) => el("th", { text: h })))),
          el("tbody", {}, data.table.rows.map((s) => el("tr", {},
            el("td", {}, link(`#/app/${enc(app)}/user/${enc(s.user_id)}/session/${enc(s.id)}`, s.id)),
            el("td", { text: s.user_id }), el("td", { text: s.events }),
            el("td", { text: time(s.last_update_time) }), el("td", { text: time(s.create_time) })))))]);
}

// One part of an event's content.
function renderPart(part) {
  if (part.text !== undefined) {
    return el("div", { class: part.thought ? "text thought" : "text" }, part.thought ? el("span", { class: "part-label", text: "thought: " }) : null, part.text);
  }
  if (part.function_call) {
    const c = part.function_call;
    return el("div", { class: "call" }, el("span", { class: "part-label", text: `call ${c.name || ""}${c.id ? ` (${c.id})` : ""}` }), json(c.args || {}));
  }
  if (part.function_response) {
    const r = part.function_response;
    return el("div", { class: "response" }, el("span", { class: "part-label", text: `response ${r.name || ""}${r.id ? ` (${r.id})` : ""}` }), json(r.response || {}));
  }
  if (part.inline_data) {
    const d = part.inline_data;
    return el("div", { class: "part-label", text: `inline data ${d.mime_type || ""} (${d.data ? Math.floor(d.data.length * 3 / 4) : 0} bytes)` });
  }
  if (part.file_data) {
    return el("div", { class: "part-label", text: `file ${part.file_data.file_uri || ""} ${part.file_data.mime_type || ""}` });
  }
  return json(part);
}

function renderEvent(e) {
  const actions = e.actions || {};
  const rest = Object.fromEntries(Object.entries(actions).filter(([k]) => k !== "state_delta"));
  return el("div", { class: e.partial ? "event partial" : "event", "data-seq": e.sequence || 0 },
    el("div", { class: "meta" },
      el("span", { text: e.sequence ? `#${e.sequence}` : "…" }),
      el("span", { class: "author", text: e.author || "(no author)" }),
      el("span", { text: time(e.timestamp) }),
      e.invocation_id ? el("span", { text: `invocation ${e.invocation_id}` }) : null,
      e.branch ? el("span", { text: `branch ${e.branch}` }) : null,
      e.partial ? el("span", { class: "badge partial", text: "partial" }) : null,
      e.turn_complete ? el("span", { class: "badge", text: "turn complete" }) : null),
    ((e.content && e.content.parts) || []).map(renderPart),
    e.error_code || e.error_message ? el("div", { class: "error", text: `${e.error_code || ""} ${e.error_message || ""}` }) : null,
    actions.state_delta ? el("div", {}, el("span", { class: "part-label", text: "state delta" }), json(actions.state_delta)) : null,
    Object.keys(rest).length ? el("div", {}, el("span", { class: "part-label", text: "actions" }), json(rest)) : null);
}

function applyDelta(state, delta) {
  for (const [key, value] of Object.entries(delta || {})) {
    if (key.startsWith("temp:")) continue;
    if (key.startsWith("app:")) state.app[key.slice(4)] = value;
    else if (key.startsWith("user:")) state.user[key.slice(5)] = value;
    else state.session[key] = value;
  }
}

function renderState(box, state) {
  box.replaceChildren(...["app", "user", "session"].map((scope) =>
    el("div", { class: "card", id: `state-${scope}` }, el("div", { text: `${scope} state` }), json(state[scope]))));
}

async function sessionPage(app, user, id, params) {
  const base = `#/app/${enc(app)}/user/${enc(user)}/session/${enc(id)}`;
  setCrumbs([["#/", "Home"], [`#/app/${enc(app)}`, app], [`#/app/${enc(app)}/user/${enc(user)}`, user], [base, id]]);
  const path = `/api/apps/${enc(app)}/users/${enc(user)}/sessions/${enc(id)}`;
  const s = await api(path);
  let last = s.last_sequence;
  const pages = () => Math.max(1, Math.ceil(last / EVENTS_PER_PAGE));
  const page = Math.min(Number(params.get("page")) || pages(), pages());
  const events = await api(`${path}/events?page=${page}`);
  const stateBox = el("div", { class: "state", id: "state" });
  renderState(stateBox, s.state);
  const noEvents = empty("No events yet: they appear here as they are appended.");
  const list = el("div", { id: "events" }, events.events.length ? events.events.map(renderEvent) : noEvents);
  const partials = new Map();
  const status = el("span", { id: "live-status", class: "badge off", text: "connecting" });
  const pageInfo = el("span", { class: "page-info" });
  const newer = el("p", { class: "notice", hidden: true });
  const goPage = (p) => { location.hash = `${base}?page=${p}`; };
  const nav = el("div", { class: "pager", id: "event-pager" });
  const renderNav = () => {
    pageInfo.textContent = `Page ${page} of ${pages()} (${last} events)`;
    nav.replaceChildren(
      el("button", { type: "button", text: "« First", disabled: page <= 1, onclick: () => goPage(1) }),
      el("button", { type: "button", text: "‹ Previous", disabled: page <= 1, onclick: () => goPage(page - 1) }),
      pageInfo,
      el("button", { type: "button", text: "Next ›", disabled: page >= pages(), onclick: () => goPage(page + 1) }),
      el("button", { type: "button", text: "Last »", disabled: page >= pages(), onclick: () => goPage(pages()) }),
      status);
  };
  renderNav();
  show(
    el("h1", { text: `Session ${id}` }),
    el("p", { class: "muted", text: `user ${user} · app ${app} · created ${time(s.create_time)} · updated ${time(s.last_update_time)}${s.expire_time ? ` · expires ${time(s.expire_time)}` : ""}` }),
    el("h2", { text: "State" }), stateBox,
    el("h2", { text: "Events" }), nav, list, newer);

  // Live: events after the last stored one, and partial fragments as they stream.
  closeLive();
  live = new EventSource(`${path}/live?after=${last}`);
  live.onopen = () => { status.className = "badge live"; status.textContent = "live"; };
  live.onerror = () => { status.className = "badge off"; status.textContent = "reconnecting"; };
  live.addEventListener("event", (message) => {
    const e = JSON.parse(message.data);
    if (e.sequence <= last) return;
    last = e.sequence;
    const key = `${e.invocation_id}/${e.author}`;
    if (partials.has(key)) {
      partials.get(key).remove();
      partials.delete(key);
    }
    applyDelta(s.state, (e.actions || {}).state_delta);
    renderState(stateBox, s.state);
    noEvents.remove();
    if (page === pages()) list.append(renderEvent(e));
    else {
      newer.replaceChildren(link(`${base}?page=${pages()}`, "Newer events: go to the last page"));
      newer.hidden = false;
    }
    renderNav();
  });
  live.addEventListener("partial", (message) => {
    const e = JSON.parse(message.data);
    const key = `${e.invocation_id}/${e.author}`;
    const previous = partials.get(key);
    // ADK streams a fragment per partial event: show them joined until the final event.
    const text = (previous ? previous.dataset.text : "") + ((e.content && e.content.parts) || []).map((p) => p.text || "").join("");
    const row = renderEvent({ ...e, content: { parts: [{ text }] } });
    row.dataset.text = text;
    noEvents.remove();
    if (previous) previous.replaceWith(row);
    else list.append(row);
    partials.set(key, row);
  });
  live.addEventListener("deleted", () => {
    closeLive();
    status.className = "badge off";
    status.textContent = "session deleted";
  });
  live.addEventListener("failure", (message) => {
    closeLive();
    status.className = "badge off";
    status.textContent = "live view stopped";
    list.after(errorBox(new Error(JSON.parse(message.data).error)));
  });
}

function feedRow(item) {
  const e = item.event || {};
  const text = ((e.content && e.content.parts) || []).map((p) => p.text || (p.function_call ? `call ${p.function_call.name}` : p.function_response ? `response ${p.function_response.name}` : "")).join(" ");
  return el("div", { class: "event" },
    el("div", { class: "meta" },
      link(`#/app/${enc(item.app)}/user/${enc(item.user_id)}/session/${enc(item.session_id)}`, `${item.user_id} / ${item.session_id}`),
      el("span", { text: `#${e.sequence || 0}` }),
      el("span", { class: "author", text: e.author || "" }),
      el("span", { text: time(e.timestamp) })),
    el("div", { class: "text", text }));
}

// The app's activity, newest first. The rows shown and the cursor are kept in sessionStorage,
// so a reload shows them again and resumes after the last one.
function feedPage(app) {
  setCrumbs([["#/", "Home"], [`#/app/${enc(app)}`, app], [`#/app/${enc(app)}/feed`, "live activity"]]);
  const key = `adk-console-feed:${app}`;
  let kept = { cursor: "", items: [] };
  try {
    kept = JSON.parse(sessionStorage.getItem(key)) || kept;
  } catch (_) {
    kept = { cursor: "", items: [] };
  }
  const status = el("span", { id: "live-status", class: "badge off", text: "connecting" });
  const quiet = empty(`No activity yet: events of ${app} appear here, newest first, as they are appended.`);
  const list = el("div", { id: "feed", class: "feed" }, kept.items.length ? kept.items.map(feedRow) : quiet);
  show(
    el("h1", { text: `Live activity of ${app}` }),
    el("div", { class: "toolbar" }, status,
      el("button", { type: "button", text: "Clear", onclick: () => { kept = { cursor: kept.cursor, items: [] }; sessionStorage.setItem(key, JSON.stringify(kept)); list.replaceChildren(quiet); } })),
    list);
  closeLive();
  live = new EventSource(`/api/apps/${enc(app)}/feed${query({ cursor: kept.cursor })}`);
  live.onopen = () => { status.className = "badge live"; status.textContent = "live"; };
  live.onerror = () => { status.className = "badge off"; status.textContent = "reconnecting"; };
  live.addEventListener("event", (message) => {
    const item = { ...JSON.parse(message.data), app };
    kept.cursor = message.lastEventId || kept.cursor;
    kept.items.unshift(item);
    kept.items.length = Math.min(kept.items.length, FEED_KEPT);
    sessionStorage.setItem(key, JSON.stringify(kept));
    quiet.remove();
    list.prepend(feedRow(item));
    while (list.childElementCount > FEED_KEPT) list.lastElementChild.remove();
  });
  live.addEventListener("failure", (message) => {
    closeLive();
    status.className = "badge off";
    status.textContent = "stopped";
    list.before(errorBox(new Error(JSON.parse(message.data).error)));
  });
}

// A memory's text; an entry of a tool call or result says so, as the feed does.
function memoryText(m) {
  return ((m.content && m.content.parts) || []).map((p) => p.text || (p.function_call ? `[call ${p.function_call.name || ""}]` : p.function_response ? `[response ${p.function_response.name || ""}]` : "")).join(" ");
}

async function memoryPage(app, user, params) {
  const base = `#/app/${enc(app)}/user/${enc(user)}/memory`;
  setCrumbs([["#/", "Home"], [`#/app/${enc(app)}`, app], [`#/app/${enc(app)}/user/${enc(user)}`, user], [base, "memory"]]);
  const path = `/api/apps/${enc(app)}/users/${enc(user)}/memories`;
  const message = el("div", { id: "memory-message" });
  const results = el("div", { id: "search-results" });
  const history = el("div", { id: "memory-history" });
  const listBox = el("div", { id: "memory-list" });
  const tokens = [""];

  const remove = async (what, target) => {
    if (!(await confirmAction(`Delete ${what}? This cannot be undone.`, "Delete"))) return;
    try {
      const done = await post(`${path}/delete`, target);
      message.replaceChildren(el("p", { class: "notice", text: `Deleted ${done.deleted} ${done.deleted === 1 ? "entry" : "entries"}.` }));
      await loadList(tokens[tokens.length - 1]);
      if (lastSearch) await runSearch();
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  };
  // A generated memory's revisions, oldest first, each but a deletion with a rollback button.
  async function showHistory(id) {
    try {
      const found = await api(`${path}/revisions${query({ memory_id: id })}`);
      const change = (r) => r.action === "deleted" ? r.previous_fact : r.new_fact;
      history.replaceChildren(
        el("h2", { text: `History of memory ${id}` }),
        el("table", { id: "revisions" },
          el("thead", {}, el("tr", {}, ["Revision", "Time", "Action", "Before", "After", ""].map((h) => el("th", { text: h })))),
          el("tbody", {}, found.revisions.map((r) => el("tr", { "data-revision": r.revision_id },
            el("td", { text: r.revision_id }), el("td", { text: time(r.create_time) }),
            el("td", { class: "action", text: r.action.replace("_", " ") + (r.restored_revision_id ? ` (to ${r.restored_revision_id})` : "") }),
            el("td", { text: r.previous_fact }), el("td", { class: "fact", text: r.new_fact }),
            el("td", {}, r.action === "deleted" || r.action === "invalidated" ? "" : el("button", { type: "button", class: "rollback", text: "Roll back to this", onclick: () => rollback(id, r.revision_id, change(r)) })))))));
    } catch (error) {
      history.replaceChildren(errorBox(error));
    }
  }
  async function rollback(id, revision, fact) {
    if (!(await confirmAction(`Roll memory ${id} back to revision ${revision}: "${fact}"?`, "Roll back"))) return;
    try {
      await post(`${path}/rollback`, { memory_id: id, revision_id: revision });
      message.replaceChildren(el("p", { class: "notice", text: `Rolled memory ${id} back to revision ${revision}.` }));
      await loadList(tokens[tokens.length - 1]);
      await showHistory(id);
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  }
  const generated = (m) => m.custom_metadata && m.custom_metadata.kind === "generated";
  const deleteButtons = (m) => el("td", {},
    generated(m) ? el("button", { type: "button", class: "history", text: "History", onclick: () => showHistory(m.id) }) : null, " ",
    el("button", { type: "button", class: "delete-entry", text: "Delete", onclick: () => remove(`memory entry ${m.id}`, { memory_id: m.id }) }), " ",
    m.session_id ? el("button", { type: "button", class: "delete-session", text: "Delete session's entries", onclick: () => remove(`every memory entry of session ${m.session_id}`, { session_id: m.session_id }) }) : null);
  const row = (m, rank) => el("tr", { "data-id": m.id },
    rank ? el("td", { text: rank }) : null,
    rank ? el("td", { class: "score", text: (m.score || 0).toFixed(3) }) : null,
    el("td", { class: "memory-text", text: memoryText(m) },
      m.invalid_at ? el("span", { class: "badge off superseded", text: `superseded ${time(m.invalid_at)}` }) : null),
    el("td", { text: m.author || "" }), el("td", { text: time(m.timestamp) }),
    el("td", {}, m.session_id ? link(`#/app/${enc(app)}/user/${enc(user)}/session/${enc(m.session_id)}`, m.session_id) : ""),
    deleteButtons(m));

  async function loadList(token) {
    const page = await api(`${path}${query({ ...listFilters, page_token: token })}`);
    if (page.total !== null && page.total !== undefined) total.textContent = page.total;
    listBox.replaceChildren(
      el("div", { class: "pager" },
        el("button", { type: "button", text: "‹ Previous", disabled: tokens.length <= 1, onclick: () => { tokens.pop(); loadList(tokens[tokens.length - 1]); } }),
        el("button", { type: "button", text: "Next ›", disabled: !page.next_page_token, onclick: () => { tokens.push(page.next_page_token); loadList(page.next_page_token); } })),
      page.memories.length === 0 && tokens.length <= 1
        ? empty(filtered(listFilters) ? "No memory passes these filters." : `User ${user} has no memories in ${app}.`)
        : el("table", { id: "memories" },
          el("thead", {}, el("tr", {}, ["Text", "Author", "Time", "Session", ""].map((h) => el("th", { text: h })))),
          el("tbody", {}, page.memories.map((m) => row(m)))));
  }

  // The filters of the search, the list and the purge: metadata conditions in the CLI's
  // --filter syntax (one group per line), topics, author and a time range.
  const conditions = el("textarea", { id: "filter-conditions", rows: 2, cols: 40, placeholder: "color=red, n>=3 (one group per line; KEY? = present)" });
  const topics = el("input", { id: "filter-topics", placeholder: "topics, comma-separated" });
  const author = el("input", { id: "filter-author", placeholder: "author" });
  const after = el("input", { id: "filter-after", type: "datetime-local" });
  const before = el("input", { id: "filter-before", type: "datetime-local" });
  // Validity: the memories valid at a time (default now), or superseded ones too.
  const asOf = el("input", { id: "filter-as-of", type: "datetime-local" });
  const superseded = el("input", { id: "filter-superseded", type: "checkbox" });
  const iso = (input) => (input.value ? new Date(input.value).toISOString() : "");
  const currentFilters = () => ({ filter: conditions.value, topics: topics.value, author: author.value, after: iso(after), before: iso(before), as_of: iso(asOf), include_superseded: superseded.checked });
  const filtered = (f) => Object.values(f).some((v) => v);
  let listFilters = {};

  // Purging: a dry run shows how many memories pass the filters and some of them; only its
  // confirmation deletes, with the filters of that dry run.
  const purgeBox = el("div", { id: "purge-preview" });
  async function dryRun() {
    const filters = currentFilters();
    try {
      const found = await post(`${path}/purge`, { ...filters, force: false });
      const count = `${found.count} ${found.count === 1 ? "memory" : "memories"}`;
      purgeBox.replaceChildren(
        el("p", { class: "muted", id: "purge-count", text: `${count} of ${user} match; nothing is deleted yet.` }),
        found.sample.length ? el("table", { id: "purge-sample" },
          el("thead", {}, el("tr", {}, ["Text", "Author", "Time"].map((h) => el("th", { text: h })))),
          el("tbody", {}, found.sample.map((m) => el("tr", { "data-id": m.id },
            el("td", { class: "memory-text", text: memoryText(m) }), el("td", { text: m.author || "" }), el("td", { text: time(m.timestamp) }))))) : null,
        found.count ? el("button", { type: "button", class: "danger", id: "purge-confirm", text: `Delete ${count}…`, onclick: () => purge(filters, count) }) : null);
    } catch (error) {
      purgeBox.replaceChildren(errorBox(error));
    }
  }
  async function purge(filters, count) {
    if (!(await confirmAction(`Delete the ${count} of ${user} in ${app} that pass these filters? This cannot be undone.`, "Purge"))) return;
    try {
      const done = await post(`${path}/purge`, { ...filters, force: true });
      purgeBox.replaceChildren();
      message.replaceChildren(el("p", { class: "notice", text: `Purged ${done.count} ${done.count === 1 ? "memory" : "memories"} (operation ${done.operation_id}).` }));
      await loadList("");
      if (lastSearch) await runSearch();
    } catch (error) {
      purgeBox.replaceChildren(errorBox(error));
    }
  }

  const q = el("input", { id: "search-q", placeholder: "words to look for", required: true, value: params.get("q") || "" });
  const limit = el("input", { id: "search-limit", type: "number", min: 1, max: 100, value: 20 });
  let lastSearch = null;
  async function runSearch() {
    try {
      const found = await api(`${path}/search${query(lastSearch)}`);
      if (found.memories.length === 0) {
        results.replaceChildren(empty("Nothing in memory matches."));
        return;
      }
      results.replaceChildren(
        el("p", { class: "muted", text: `${found.memories.length} ${found.memories.length === 1 ? "result" : "results"}, best first` }),
        el("table", { id: "results" },
          el("thead", {}, el("tr", {}, ["#", "Score", "Text", "Author", "Time", "Session", ""].map((h) => el("th", { text: h })))),
          el("tbody", {}, found.memories.map((m, i) => row(m, i + 1)))));
    } catch (error) {
      results.replaceChildren(errorBox(error));
    }
  }
  // Event streams: the user's streams holding events that wait for generation, each with a
  // Flush button, and a stream flushed by id. A flush loses nothing, so it asks no confirmation.
  const streamsBox = el("div", { id: "streams" });
  const streamResult = el("div", { id: "stream-result" });
  const streamId = el("input", { id: "stream-id", placeholder: "stream id (a session id)", required: true });
  async function loadStreams() {
    try {
      const found = await api(`${path}/streams`);
      streamsBox.replaceChildren(found.streams.length === 0
        ? empty("No stream holds events waiting for generation.")
        : el("table", { id: "stream-list" },
          el("thead", {}, el("tr", {}, ["Stream", "Events", "Last event", ""].map((h) => el("th", { text: h })))),
          el("tbody", {}, found.streams.map((st) => el("tr", { "data-stream": st.stream_id },
            el("td", { text: st.stream_id }), el("td", { class: "buffered", text: st.buffered }),
            el("td", { text: time(st.last_append_time) }),
            el("td", {}, el("button", { type: "button", class: "flush", text: "Flush", onclick: () => flush(st.stream_id) })))))));
    } catch (error) {
      if (error instanceof Superseded) return;
      streamsBox.replaceChildren(errorBox(error));
    }
  }
  async function flush(stream) {
    try {
      const done = await post(`${path}/streams/flush`, { stream_id: stream });
      streamResult.replaceChildren(el("p", { class: "notice", text: done.job
        ? `Stream ${stream} handed to generation: job ${done.job.id} (${done.job.state}).`
        : `Stream ${stream} holds no events; nothing to generate from.` }));
      await loadStreams();
    } catch (error) {
      streamResult.replaceChildren(errorBox(error));
    }
  }

  const total = el("div", { class: "figure", id: "memory-total", text: "…" });
  show(
    el("h1", { text: `Memory of ${user} in ${app}` }),
    el("div", { class: "cards" }, el("div", { class: "card" }, el("div", { text: "Memories" }), total)),
    message,
    history,
    el("h2", { text: "Filters" }),
    el("form", { class: "inline", id: "filters", onsubmit: async (e) => {
      e.preventDefault();
      listFilters = currentFilters();
      tokens.length = 1;
      try {
        await loadList("");
      } catch (error) {
        listBox.replaceChildren(errorBox(error));
      }
    } },
    el("label", {}, "metadata ", conditions), topics, author,
    el("label", {}, "after ", after), el("label", {}, "before ", before),
    el("label", {}, "valid as of ", asOf), el("label", {}, superseded, " superseded too"),
    el("button", { type: "submit", id: "filter-apply", text: "Filter the list" }),
    el("button", { type: "button", id: "purge-dry-run", text: "Purge… (dry run first)", onclick: dryRun })),
    purgeBox,
    el("h2", { text: "Search" }),
    el("form", { class: "inline", id: "search", onsubmit: (e) => {
      e.preventDefault();
      lastSearch = { ...currentFilters(), q: q.value, limit: limit.value };
      runSearch();
    } },
    q, el("label", {}, "limit ", limit),
    el("button", { class: "primary", type: "submit", text: "Search" })),
    el("p", { class: "muted", text: "Searches, the list and purges keep the memories that pass the filters above." }),
    results,
    el("h2", { text: "Entries (in ingestion order)" }),
    listBox,
    el("h2", { text: "Event streams" }),
    el("p", { class: "muted", text: "Events buffered per stream until generation takes them: after the app's trigger count, its quiet time, or a flush." }),
    streamsBox,
    el("form", { class: "inline", id: "stream-flush", onsubmit: (e) => {
      e.preventDefault();
      flush(streamId.value.trim());
    } },
    streamId, el("button", { type: "submit", text: "Flush stream" })),
    streamResult);
  await Promise.all([loadList(""), loadStreams()]);
}

// ---- router ----

async function route() {
  pageChanges++;
  closeLive();
  refreshWho();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [pathPart, search] = hash.split("?");
  const params = new URLSearchParams(search || "");
  const parts = pathPart.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts.length === 0) return await homePage();
    if (parts[0] !== "app" || parts.length < 2) throw new Error("no such page");
    const app = parts[1];
    if (parts.length === 2) return await appPage(app, params);
    if (parts[2] === "sessions" && parts.length === 3) return await sessionsPage(app, null, params);
    if (parts[2] === "feed" && parts.length === 3) return feedPage(app);
    if (parts[2] === "user" && parts.length >= 4) {
      const user = parts[3];
      if (parts.length === 4) return await sessionsPage(app, user, params);
      if (parts[4] === "memory" && parts.length === 5) return await memoryPage(app, user, params);
      if (parts[4] === "session" && parts.length === 6) return await sessionPage(app, user, parts[5], params);
    }
    throw new Error("no such page");
  } catch (error) {
    failed(error);
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("pagehide", closeLive);
route();
