// dsh-memory-mcp web page. Plain JavaScript, no library, nothing from the network but our own API.
// Memory text is untrusted (any agent can write it): it only ever reaches the page through
// textContent / value / text nodes, never through innerHTML or a URL.
//
// Login: serve (and `dsh-memory-mcp web`) prints http://127.0.0.1:<port>/#code=…, a one-time code,
// never the token; the fragment never leaves the browser. This script takes it off the address bar
// and trades it (or a token pasted into the login form) for a page credential (POST /api/login),
// kept in localStorage, which belongs to this origin only (scheme, host and port): another port of
// 127.0.0.1 can neither read it nor receive it, unlike a cookie. Every API call sends it in a
// header.
"use strict";

const KINDS = ["fact", "decision", "preference", "procedure", "note", "rule"];
const SORTS = ["updated", "oldest", "importance", "access"];
// Which form field a tool error code belongs to (the same codes memory_save returns).
const FIELD_OF_CODE = {
  CONTENT_EMPTY: "content",
  CONTENT_TOO_LONG: "content",
  CONTENT_SECRET: "content",
  KIND_INVALID: "kind",
  TAGS_INVALID: "tags",
  IMPORTANCE_RANGE: "importance",
  SCOPE_INVALID: "scope",
  SCOPE_NOT_WRITABLE: "scope",
  SCOPE_NAME_INVALID: "scope",
  SCOPE_NAME_TAKEN: "scope",
  PATH_INVALID: "scope",
};
const POLL_MS = 2000;
const PAGE_SIZE = 100;
const SEARCH_PAGE = 20;
const LOGIN_KEY = "dsh-memory-mcp.login";
const LANG_KEY = "dsh-memory-mcp.lang";
const CHARTS_KEY = "dsh-memory-mcp.charts";
const MANUAL = "-";
const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#2457c5", "#d97706", "#0f8a5f", "#b42318", "#7c3aed", "#0e7490", "#a16207", "#be185d"];
const OTHERS_COLOR = "#8a94a6";
// The writers that are no agent have colours of their own, outside the agents' palette.
const FIXED_COLORS = { [MANUAL]: "#64748b", web: "#f472b6", cli: "#84cc16" };
const CHARTS_MAX = 6;
// An environment variable's name: shown whole, never broken mid-word.
const ENV_NAME = /([A-Z][A-Z0-9]*_[A-Z0-9_]+)/;

const state = {
  lang: "zh",
  scope: "all",
  query: "",
  kind: "",
  tag: "",
  client: "",
  from: "",
  to: "",
  sort: "",
  records: [],
  total: 0,
  terms: [],
  selected: new Set(),
  expanded: new Set(),
  full: new Map(),
  overview: null,
  insights: null,
  version: null,
  listKey: "",
  detail: null,
  pendingForget: [],
  importText: null,
  importName: "",
  started: false,
  listSeq: 0,
  insightsSeq: 0,
};

const $ = (id) => document.getElementById(id);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  setProps(node, props);
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function setProps(node, props) {
  if (!props) return;
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.setAttribute("class", value);
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== undefined && value !== null) node.setAttribute(key, String(value));
  }
  for (const child of children) if (child) node.append(typeof child === "string" ? document.createTextNode(child) : child);
  return node;
}

// Text with `code` spans and environment-variable names as <code> (built as nodes, never as HTML).
function richText(node, text) {
  const parts = [];
  String(text)
    .split(/`([^`]*)`/)
    .forEach((piece, i) => {
      if (i % 2 === 1) {
        parts.push(el("code", { text: piece }));
        return;
      }
      piece.split(ENV_NAME).forEach((bit, j) => {
        if (j % 2 === 1) parts.push(el("code", { class: "env", text: bit }));
        else if (bit) parts.push(document.createTextNode(bit));
      });
    });
  node.replaceChildren(...parts);
  return node;
}

// -- language -----------------------------------------------------------------------------------

const ORIGINAL = new Map(); // element → {text, attrs}: the Chinese written in index.html

function t(key, params) {
  const table = window.I18N[state.lang] || window.I18N.zh;
  let text = table[key];
  if (text === undefined) text = window.I18N.zh[key];
  if (text === undefined) text = key;
  if (!params) return text;
  // {n|memory|memories}: the first word when n is 1, else the second (English plurals).
  text = text.replace(/\{(\w+)\|([^|}]*)\|([^|}]*)\}/g, (m, name, one, other) => (Number(params[name]) === 1 ? one : other));
  return text.replace(/\{(\w+)\}/g, (m, name) => (name in params ? String(params[name]) : m));
}

function chooseLanguage() {
  let saved = null;
  try {
    saved = localStorage.getItem(LANG_KEY);
  } catch (err) {
    saved = null;
  }
  if (saved === "zh" || saved === "en") return saved;
  for (const tag of navigator.languages || [navigator.language || ""]) {
    const low = String(tag).toLowerCase();
    if (low.startsWith("zh")) return "zh";
    if (low.startsWith("en")) return "en";
  }
  return "zh";
}

function applyLanguage() {
  document.documentElement.lang = state.lang === "en" ? "en" : "zh-CN";
  $("lang").value = state.lang;
  const attrs = ["placeholder", "aria-label", "title"];
  for (const node of document.querySelectorAll("[data-i18n], [data-i18n-placeholder], [data-i18n-aria-label]")) {
    if (!ORIGINAL.has(node)) {
      const saved = { text: node.textContent, attrs: {} };
      for (const name of attrs) if (node.hasAttribute(name)) saved.attrs[name] = node.getAttribute(name);
      ORIGINAL.set(node, saved);
    }
    const original = ORIGINAL.get(node);
    const en = state.lang === "en" ? window.I18N.en : null;
    if (node.dataset.i18n) {
      const text = en && en[node.dataset.i18n] !== undefined ? en[node.dataset.i18n] : original.text;
      if (node.tagName === "TITLE") node.textContent = text;
      else richText(node, text);
    }
    for (const name of attrs) {
      const key = node.getAttribute(`data-i18n-${name}`);
      if (!key) continue;
      const text = en && en[key] !== undefined ? en[key] : original.attrs[name];
      if (text !== undefined) node.setAttribute(name, text);
    }
  }
  $("login-example").textContent = `${location.origin}/#code=…`;
  fillChoices();
}

function setLanguage(lang) {
  state.lang = lang === "en" ? "en" : "zh";
  try {
    localStorage.setItem(LANG_KEY, state.lang);
  } catch (err) {
    // storage may be off: the switch still works for this page
  }
  applyLanguage();
  if (state.started) {
    loadOverview(); // the server's own texts (the vector status) in the new language
    renderScopes();
    renderHealth();
    renderFacets();
    renderCharts();
    renderList({ total: state.total });
    updateExportLink();
  }
}

// -- login and the API --------------------------------------------------------------------------

class AuthError extends Error {}

function storedLogin() {
  try {
    const value = JSON.parse(localStorage.getItem(LOGIN_KEY) || "null");
    if (value && typeof value.credential === "string" && typeof value.header === "string") return value;
  } catch (err) {
    // unreadable: log in again
  }
  return null;
}

// `used`: the login a refused request went out with. A late refusal of a request made with an older
// login (or none) leaves a newer one alone: a login link opened meanwhile stored it before reloading.
function dropLogin(used = storedLogin()) {
  const now = storedLogin();
  if ((now && now.credential) !== (used && used.credential)) return false;
  try {
    localStorage.removeItem(LOGIN_KEY);
  } catch (err) {
    // nothing stored
  }
  return true;
}

// The server writes its own sentences (errors, import problems, recover reasons, the vector status)
// in the language the request asks for: the page's choice, not the browser's.
// The credential goes only to the serve process that issued it: `sameServer` first.
async function authHeaders() {
  const login = storedLogin();
  const headers = { "Accept-Language": state.lang };
  if (login) {
    const same = await sameServer(login);
    if (same === "network") throw new NetworkError();
    if (same !== "yes") {
      if (dropLogin(login)) showLogin("expired");
      throw new AuthError("another server");
    }
    headers[login.header] = login.credential;
  }
  return headers;
}

// Is the server on this port the serve process that issued the credential? It must answer a fresh
// nonce with an HMAC under the credential's check secret, which only that process can compute; a
// program that took the port after serve stopped cannot, so it never sees the credential. Checked
// before every credentialed request (a poll every 2 s), at most once a second.
let verifiedAt = 0;
async function sameServer(login) {
  if (Date.now() - verifiedAt < 1000) return "yes";
  if (typeof login.check !== "string" || !crypto.subtle) return "no";
  const nonce = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
  const payload = login.credential.slice(0, login.credential.lastIndexOf("."));
  let body;
  try {
    const res = await fetch(`/api/instance?${new URLSearchParams({ c: payload, n: nonce })}`, { cache: "no-store" });
    body = await res.json();
  } catch (err) {
    return err instanceof TypeError ? "network" : "no";
  }
  const text = new TextEncoder();
  const key = await crypto.subtle.importKey("raw", text.encode(login.check), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, text.encode(nonce)));
  const want = [...mac].map((b) => b.toString(16).padStart(2, "0")).join("");
  if (!body || body.proof !== want) return "no";
  verifiedAt = Date.now();
  return "yes";
}

class NetworkError extends Error {}

// The one-time code from the login link's fragment → a page credential in this origin's storage.
// (`#token=` is how earlier versions' links carried the token itself: still taken, and scrubbed too.)
async function loginFromFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  const code = params.get("code");
  const token = params.get("token");
  if (code === null && token === null) return { ok: true, none: true };
  // Off the address bar (and out of the history entry) before anything else happens.
  history.replaceState(history.state, "", location.pathname + location.search);
  return code !== null ? loginWith({ code }) : loginWith({ token });
}

// A login code or a token (from the login link or pasted into the login form) → a page credential
// in this origin's storage. A refused code comes back with the server's words (how to get a new link).
async function loginWith({ code, token }) {
  const headers = { "Content-Type": "application/json", "Accept-Language": state.lang };
  if (token !== undefined) headers.Authorization = `Bearer ${token}`;
  let res;
  let body;
  try {
    res = await fetch("/api/login", { method: "POST", headers, body: JSON.stringify(code === undefined ? {} : { code }) });
    body = await res.json();
  } catch (err) {
    return { ok: false };
  }
  if (!res.ok) return { ok: false, message: code === undefined ? undefined : body.message };
  try {
    localStorage.setItem(
      LOGIN_KEY,
      JSON.stringify({ credential: body.credential, header: body.header, expiresAt: body.expiresAt, check: body.check }),
    );
  } catch (err) {
    return { ok: false };
  }
  return { ok: true };
}

async function api(path, options = {}) {
  const used = storedLogin();
  let headers;
  try {
    headers = await authHeaders();
  } catch (err) {
    if (err instanceof NetworkError) return { ok: false, code: "NETWORK", message: t("error.network") };
    throw err;
  }
  const init = { method: options.method || "GET", headers };
  if (options.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  let res;
  try {
    res = options.onUpload ? await sendWithProgress(path, init, options.onUpload) : await fetch(path, init);
  } catch (err) {
    return { ok: false, code: "NETWORK", message: t("error.network") };
  }
  if (res.status === 401) {
    if (dropLogin(used)) showLogin(used !== null ? "expired" : "needed");
    throw new AuthError("401");
  }
  try {
    return await res.json();
  } catch (err) {
    return { ok: false, code: `HTTP_${res.status}`, message: t("error.unreadable", { status: res.status }) };
  }
}

// fetch() with upload progress, which fetch does not report: `onUpload(sent, total)` as the body goes out.
function sendWithProgress(path, init, onUpload) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(init.method, path);
    for (const [key, value] of Object.entries(init.headers)) xhr.setRequestHeader(key, value);
    xhr.upload.onprogress = (e) => onUpload(e.loaded, e.lengthComputable ? e.total : 0);
    xhr.onload = () => resolve(new Response(xhr.responseText, { status: xhr.status }));
    xhr.onerror = () => reject(new TypeError("network"));
    xhr.send(init.body);
  });
}

// `done` of `total` bytes in a `.progress` box (a <progress> and a text): the percent, and the time
// left once a second has passed; without a total, the bytes so far; `done` null: the server is
// working and cannot say how far it is (an indeterminate bar).
function showProgress(box, label, done, total, started) {
  box.hidden = false;
  const bar = box.querySelector("progress");
  const text = box.querySelector("span");
  if (!total) {
    bar.removeAttribute("value");
    text.textContent = t("progress.size", { label, size: fmtSize(done) });
    return;
  }
  const percent = Math.min(100, Math.floor((done * 100) / total));
  const elapsed = (Date.now() - started) / 1000;
  const seconds = done > 0 && elapsed >= 1 ? Math.ceil((elapsed * (total - done)) / done) : 0;
  bar.value = percent;
  text.textContent = t(percent === 100 ? "progress.working" : seconds ? "progress.eta" : "progress.percent", { label, percent, seconds });
}

function progressDone(box, label, ok) {
  box.querySelector("progress").value = 100;
  box.querySelector("span").textContent = t("progress.done", { label });
  box.hidden = !ok;
}

async function download(path, fallback) {
  const box = $("export-progress");
  const label = t("progress.download");
  const started = Date.now();
  let res;
  const used = storedLogin();
  try {
    showProgress(box, label, 0, 1, started);
    res = await fetch(path, { headers: await authHeaders() });
  } catch (err) {
    box.hidden = true;
    if (err instanceof AuthError) return;
    toast(t("error.network"), true);
    return;
  }
  if (res.status === 401) {
    box.hidden = true;
    if (dropLogin(used)) showLogin("expired");
    return;
  }
  if (!res.ok) {
    box.hidden = true;
    const body = await res.json().catch(() => ({}));
    toast(body.message || t("error.unreadable", { status: res.status }), true);
    return;
  }
  const total = Number(res.headers.get("Content-Length")) || 0;
  const reader = res.body.getReader();
  const chunks = [];
  let received = 0;
  for (let part = await reader.read(); !part.done; part = await reader.read()) {
    chunks.push(part.value);
    received += part.value.length;
    showProgress(box, label, received, total, started);
  }
  progressDone(box, label, true);
  const disposition = res.headers.get("Content-Disposition") || "";
  const match = /filename="([^"]+)"/.exec(disposition);
  const url = URL.createObjectURL(new Blob(chunks, { type: res.headers.get("Content-Type") || "" }));
  const link = el("a", { href: url, download: match ? match[1] : fallback, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

function showLogin(why, message) {
  $("app").hidden = true;
  $("login-needed").hidden = false;
  $("login-refused").hidden = !message;
  if (message) richText($("login-refused"), message);
  $("login-bad").hidden = why !== "bad" || Boolean(message);
  $("login-expired").hidden = why !== "expired";
  $("live-status").textContent = t("live.loggedOut");
  document.documentElement.dataset.ready = "login";
}

// -- formatting ---------------------------------------------------------------------------------

function pad(n) {
  return String(n).padStart(2, "0");
}

function fmtTime(ms) {
  if (!ms || ms <= 0) return "-";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function relTime(ms) {
  if (!ms || ms <= 0) return "-";
  const seconds = Math.round((ms - Date.now()) / 1000);
  const fmt = new Intl.RelativeTimeFormat(state.lang === "en" ? "en" : "zh-CN", { numeric: "auto" });
  const abs = Math.abs(seconds);
  if (abs < 45) return t("time.justNow");
  if (abs < 3600) return fmt.format(Math.round(seconds / 60), "minute");
  if (abs < 86400) return fmt.format(Math.round(seconds / 3600), "hour");
  if (abs < 86400 * 30) return fmt.format(Math.round(seconds / 86400), "day");
  return fmtTime(ms).slice(0, 10);
}

function timeNode(ms, label) {
  const node = el("time", { title: fmtTime(ms), text: label ? `${label} ${relTime(ms)}` : relTime(ms) });
  if (ms > 0) node.dateTime = new Date(ms).toISOString();
  return node;
}

function fmtSize(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function kindLabel(kind) {
  return KINDS.includes(kind) ? t(`kind.${kind}`) : kind;
}

function snippet(text, n = 40) {
  const one = String(text).split(/\s+/).join(" ").trim();
  return one.length <= n ? one : `${one.slice(0, n - 1)}…`;
}

// A memory's first line as a title: markdown's list, heading, bold and code marks left out.
function firstLine(text) {
  const line = String(text).split("\n").find((l) => l.trim()) || "";
  return line.replace(/^\s*(?:#{1,6}|[-*+]|\d{1,9}[.)])\s+/, "").replace(/\*\*|`/g, "").trim();
}

function scopeInfo(scope) {
  if (scope === "global") return { name: "global", type: t("scope.global") };
  if (scope.startsWith("project:")) return { name: projectName(scope), type: t("scope.project") };
  if (scope.startsWith("session:")) return { name: scope.slice("session:".length), type: t("scope.session") };
  return { name: scope, type: t("scope.custom") };
}

// A project by its folder's name (the whole path in a tooltip); two projects of the same folder
// name are told apart by their parent folder.
function folderName(path, depth) {
  return path.split(/[\\/]+/).filter(Boolean).slice(-depth).join("/") || path;
}

function projectName(scope) {
  const path = scope.slice("project:".length);
  const others = ((state.overview && state.overview.scopes) || [])
    .map((row) => row.scope)
    .filter((s) => s !== scope && s.startsWith("project:"));
  const clash = others.some((s) => folderName(s.slice("project:".length), 1) === folderName(path, 1));
  return folderName(path, clash ? 2 : 1);
}

// The whole client string on hover; a record without one was written by the DSH plugin itself
// (this project's writers always name their client: an MCP host, `cli`, `web`, the hook).
function sourceTitle(client) {
  return !client.key || client.key === MANUAL ? t("client.manualTitle") : client.full || "";
}

function clientLabel(key, name) {
  if (!key || key === MANUAL) return t("client.manual");
  if (key === "web") return t("client.web");
  return name || key;
}

// A client's colour follows its name, not its rank: the same on every visit and in every scope.
function colorOf(key) {
  const keys = ((state.insights && state.insights.facets.clients) || []).slice(0, PALETTE.length).map((c) => c.key);
  if (!keys.includes(key)) return OTHERS_COLOR;
  if (FIXED_COLORS[key]) return FIXED_COLORS[key];
  let h = 0;
  for (const ch of key) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return PALETTE[h % PALETTE.length];
}

let toastTimer = null;
function toast(message, isError = false) {
  const box = $("toast");
  box.textContent = message;
  box.classList.toggle("error", isError);
  box.classList.add("show");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => box.classList.remove("show"), isError ? 7000 : 3500);
}

// -- the URL holds the view (so it can be bookmarked) ------------------------------------------

const VIEW_KEYS = ["scope", "q", "kind", "tag", "client", "from", "to", "sort"];

function readUrl() {
  const params = new URLSearchParams(location.search);
  state.scope = params.get("scope") || "all";
  state.query = params.get("q") || "";
  state.kind = params.get("kind") || "";
  state.tag = params.get("tag") || "";
  state.client = params.get("client") || "";
  state.from = params.get("from") || "";
  state.to = params.get("to") || "";
  state.sort = params.get("sort") || "";
  if (!KINDS.includes(state.kind)) state.kind = "";
  if (state.sort && !SORTS.includes(state.sort) && state.sort !== "relevance") state.sort = "";
  state.from = normalDate(state.from) || "";
  state.to = normalDate(state.to) || "";
}

function writeUrl(push) {
  const values = {
    scope: state.scope === "all" ? "" : state.scope,
    q: state.query,
    kind: state.kind,
    tag: state.tag,
    client: state.client,
    from: state.from,
    to: state.to,
    sort: state.sort,
  };
  const params = new URLSearchParams();
  for (const key of VIEW_KEYS) if (values[key]) params.set(key, values[key]);
  const search = params.toString();
  const url = `${location.pathname}${search ? `?${search}` : ""}`;
  if (url === location.pathname + location.search) return;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

function syncControls() {
  $("q").value = state.query;
  $("kind-filter").value = state.kind;
  fillSort();
  $("from-filter").value = state.from;
  $("to-filter").value = state.to;
  renderFacets();
  for (const btn of document.querySelectorAll(".scope-btn")) {
    btn.setAttribute("aria-current", btn.dataset.scope === state.scope ? "true" : "false");
  }
  updateExportLink();
}

function fillChoices() {
  const keepKind = state.kind;
  $("kind-filter").replaceChildren(
    el("option", { value: "", text: t("filter.allKinds") }),
    ...KINDS.map((k) => el("option", { value: k, text: kindLabel(k) })),
  );
  $("kind-filter").value = keepKind;
  for (const id of ["edit-kind", "new-kind"]) {
    const select = $(id);
    const keep = select.value;
    select.replaceChildren(...KINDS.map((k) => el("option", { value: k, text: kindLabel(k) })));
    if (keep) select.value = keep;
  }
  fillSort();
}

function fillSort() {
  const options = [];
  if (state.query) options.push(el("option", { value: "relevance", text: t("sort.relevance") }));
  for (const key of SORTS) options.push(el("option", { value: key, text: t(`sort.${key}`) }));
  $("sort").replaceChildren(...options);
  $("sort").value = state.sort || (state.query ? "relevance" : "updated");
}

// -- overview: scopes and health ----------------------------------------------------------------

async function loadOverview() {
  const data = await api("/api/overview");
  if (!data.ok) {
    toast(data.message || t("error.overview"), true);
    return;
  }
  state.overview = data;
  renderScopes();
  renderHealth();
}

function renderScopes() {
  const data = state.overview;
  if (!data) return;
  $("store-path").textContent = t("store.path", { dir: data.storeDir });
  const list = $("scope-list");
  const aliasesOf = {};
  for (const [name, key] of Object.entries(data.aliases || {})) (aliasesOf[key] = aliasesOf[key] || []).push(name);
  const items = [
    { scope: "all", name: t("scope.all"), type: t("scope.count", { n: data.scopes.length }), live: data.totals.live },
  ];
  for (const row of data.scopes) {
    const info = scopeInfo(row.scope);
    const aliases = aliasesOf[row.scope];
    items.push({
      scope: row.scope,
      name: info.name,
      type: aliases ? `${info.type} · ${t("scope.aliases", { names: aliases.join("、") })}` : info.type,
      live: row.live,
    });
  }
  list.replaceChildren(
    ...items.map((item) =>
      el(
        "li",
        null,
        el(
          "button",
          {
            type: "button",
            class: "scope-btn",
            "data-scope": item.scope,
            "aria-current": item.scope === state.scope ? "true" : "false",
            title: item.scope === "all" ? null : item.scope,
            "aria-label": t("scope.aria", { name: item.name, type: item.type, n: item.live }),
            onclick: () => selectScope(item.scope),
          },
          el("span", { class: "scope-name" }, item.name, el("span", { class: "scope-type", text: item.type })),
          el("span", { class: "scope-count", text: String(item.live) }),
        ),
      ),
    ),
  );
  const writable = data.scopes.map((row) => row.scope);
  if (!writable.includes("global")) writable.unshift("global");
  const select = $("import-scope");
  const keep = select.value || "global";
  select.replaceChildren(
    ...writable.map((scope) => el("option", { value: scope, text: scope === "global" ? t("scope.globalOption") : scope })),
  );
  select.value = writable.includes(keep) ? keep : "global";
  $("new-scope-list").replaceChildren(...writable.map((scope) => el("option", { value: scope })));
}

function renderHealth() {
  const data = state.overview;
  if (!data) return;
  const tt = data.totals;
  const rows = [
    [t("health.live"), t("health.liveValue", { n: tt.live })],
    [t("health.expired"), t("health.expiredValue", { n: tt.expired })],
    [t("health.corrupt"), t(tt.corrupt ? "health.corruptValueSome" : "health.corruptValue", { n: tt.corrupt })],
    [t("health.size"), fmtSize(tt.bytes)],
  ];
  const nodes = rows.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]);
  if (typeof data.vanished === "number") {
    const dd = el("dd", { class: "vanished" }, el("span", { text: t("health.vanishedValue", { n: data.vanished }) }));
    if (data.vanished > 0) {
      dd.append(el("button", { type: "button", class: "small", id: "recover-open", text: t("recover.button"), onclick: askRecover }));
    }
    nodes.push(el("dt", { text: t("health.vanished") }), dd);
  }
  $("health").replaceChildren(...nodes);
  renderVectors(data.vectors || {}, tt);
  const warnings = [];
  if (tt.corrupt) warnings.push(t("warn.corrupt", { n: tt.corrupt }));
  if (data.vanished) warnings.push(t("warn.vanished", { n: data.vanished }));
  for (const path of data.unattributedFiles || []) warnings.push(t("warn.unattributed", { path }));
  $("health-warnings").replaceChildren(...warnings.map((w) => el("li", { text: w })));
}

// One consistent vector panel: off (no model named), ready (model, coverage), or down (why).
function renderVectors(vec, totals) {
  const box = $("vectors");
  const parts = [];
  const line = (label, value) => el("p", { class: "vec-line" }, el("span", { class: "vec-label", text: label }), value);
  if (vec.state === "ready") {
    parts.push(line(t("vec.title"), el("span", { class: "vec-ok", text: t("vec.ready") })));
    parts.push(line(t("vec.model"), el("span", { text: vec.dims ? t("common.paren", { a: vec.model, b: vec.dims }) : String(vec.model) })));
    parts.push(line(t("vec.coverage"), el("span", { text: t("vec.coverageValue", { a: totals.covered, b: totals.live }) })));
    if (typeof vec.backfillPending === "number" && vec.backfillPending > 0) {
      parts.push(line(t("vec.backfill"), el("span", { text: t("vec.backfillValue", { n: vec.backfillPending }) })));
    }
  } else if (vec.state === "down") {
    parts.push(line(t("vec.title"), el("span", { class: "vec-warn", text: t("vec.down") })));
    if (vec.model) parts.push(line(t("vec.configured"), el("span", { text: String(vec.model) })));
    if (vec.reason) parts.push(richText(el("p", { class: "vec-reason" }), vec.reason));
  } else {
    parts.push(line(t("vec.title"), el("span", { text: t("vec.off") })));
    if (vec.reason) parts.push(richText(el("p", { class: "vec-reason" }), vec.reason));
  }
  box.replaceChildren(...parts);
}

function selectScope(scope) {
  state.scope = scope;
  state.selected.clear();
  syncControls();
  writeUrl(true);
  loadInsights();
  loadList({ reveal: true });
}

function updateExportLink() {
  $("export-link").textContent = state.scope === "all" ? t("toolbar.exportAll") : t("toolbar.exportScope");
}

// -- facets (filter menus) and charts -----------------------------------------------------------

async function loadInsights() {
  const params = new URLSearchParams({ scope: state.scope, tz: String(-new Date().getTimezoneOffset()) });
  const seq = ++state.insightsSeq;
  const data = await api(`/api/activity?${params}`);
  if (seq !== state.insightsSeq) return; // a newer request is on its way: this answer is stale
  if (!data.ok) {
    toast(data.message || t("error.overview"), true);
    return;
  }
  state.insights = data;
  renderFacets();
  renderCharts();
}

function renderFacets() {
  const facets = (state.insights && state.insights.facets) || { tags: [], clients: [] };
  const tags = facets.tags.map((row) => ({ value: row.name, label: t("common.paren", { a: `#${row.name}`, b: row.count }) }));
  if (state.tag && !tags.some((row) => row.value.toLowerCase() === state.tag.toLowerCase())) {
    tags.unshift({ value: state.tag, label: `#${state.tag}` });
  }
  $("tag-filter").replaceChildren(
    el("option", { value: "", text: t("filter.allTags") }),
    ...tags.map((row) => el("option", { value: row.value, text: row.label })),
  );
  const matchTag = tags.find((row) => row.value.toLowerCase() === state.tag.toLowerCase());
  $("tag-filter").value = matchTag ? matchTag.value : "";
  const clients = facets.clients.map((row) => ({
    value: row.key,
    label: t("common.paren", { a: clientLabel(row.key, row.name), b: row.count }),
  }));
  if (state.client && !clients.some((row) => row.value === state.client)) {
    clients.unshift({ value: state.client, label: clientLabel(state.client, state.client) });
  }
  $("client-filter").replaceChildren(
    el("option", { value: "", text: t("filter.allClients") }),
    ...clients.map((row) => el("option", { value: row.value, text: row.label })),
  );
  $("client-filter").value = state.client;
}

function renderCharts() {
  const box = $("charts");
  const data = state.insights;
  if (!data) return;
  const all = data.activity.filter((row) => row.live > 0);
  if (!all.length) {
    box.replaceChildren(el("p", { class: "hint", text: t("chart.empty") }));
    return;
  }
  // The busiest scopes first; a store with many projects shows a few charts, not a wall of them.
  const rows = [...all].sort((a, b) => b.recent - a.recent || b.live - a.live).slice(0, CHARTS_MAX);
  const legend = el(
    "ul",
    { class: "legend", "aria-label": t("chart.legend") },
    ...data.facets.clients.slice(0, PALETTE.length).map((c) =>
      el("li", null, el("span", { class: "swatch", "data-color": colorOf(c.key) }), clientLabel(c.key, c.name)),
    ),
  );
  if (data.facets.clients.length > PALETTE.length) {
    legend.append(el("li", null, el("span", { class: "swatch", "data-color": OTHERS_COLOR }), t("chart.others")));
  }
  for (const swatch of legend.querySelectorAll(".swatch")) swatch.style.backgroundColor = swatch.dataset.color;
  const grid = el("div", { class: "chart-grid" }, ...rows.map(chartFor));
  const rest = all.length - rows.length;
  const focused = box.contains(document.activeElement) ? document.activeElement.dataset.day : null;
  box.replaceChildren(legend, grid);
  const again = focused && grid.querySelector(`g.day[data-day="${CSS.escape(focused)}"]`);
  if (again) {
    for (const g of again.parentNode.querySelectorAll(".day")) g.setAttribute("tabindex", g === again ? "0" : "-1");
    again.focus();
  }
  if (rest > 0) box.append(el("p", { class: "hint", text: t("chart.more", { n: rest }) }));
}

function chartFor(row) {
  const days = row.days.length;
  const width = 300;
  const height = 110;
  const top = 14;
  const base = 88;
  const step = width / days;
  const totals = row.days.map((_, i) => row.clients.reduce((sum, c) => sum + c.counts[i], 0));
  const peak = Math.max(1, ...totals);
  const info = scopeInfo(row.scope);
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    class: "activity",
    role: "group",
    "aria-label": t("chart.aria", { scope: info.name, n: row.recent, days }),
    "data-scope": row.scope,
  });
  chart.append(svg("line", { x1: 0, y1: base + 0.5, x2: width, y2: base + 0.5, class: "axis" }));
  chart.append(svg("text", { x: 0, y: 10, class: "tick" }, String(peak)));
  row.days.forEach((day, i) => {
    let y = base;
    // One tab stop per chart (the last day); the arrow keys move between the days.
    const column = svg("g", {
      class: "day",
      "data-day": day,
      role: "button",
      tabindex: i === days - 1 ? 0 : -1,
      "aria-label": t("chart.dayAria", { day, n: totals[i] }),
    });
    column.append(svg("title", {}, `${day}:${t("chart.dayTotal", { n: totals[i] })}`));
    column.append(svg("rect", { x: i * step, y: top, width: step, height: base - top, class: "hit" }));
    for (const c of row.clients) {
      const n = c.counts[i];
      if (!n) continue;
      const h = ((base - top) * n) / peak;
      y -= h;
      const bar = svg("rect", {
        x: (i * step + 1).toFixed(2),
        y: y.toFixed(2),
        width: Math.max(1, step - 2).toFixed(2),
        height: h.toFixed(2),
        fill: colorOf(c.key),
        class: "bar",
        "data-day": day,
        "data-client": c.key,
        "data-count": n,
      });
      bar.append(svg("title", {}, `${day} · ${clientLabel(c.key, c.name)}:${n}`));
      column.append(bar);
    }
    column.addEventListener("click", () => filterDay(day, row.scope));
    column.addEventListener("keydown", (ev) => dayKey(ev, column, day, row.scope));
    chart.append(column);
  });
  chart.append(svg("text", { x: 0, y: height - 4, class: "tick" }, row.days[0].slice(5)));
  chart.append(svg("text", { x: width, y: height - 4, class: "tick end" }, row.days[days - 1].slice(5)));
  const kinds = Object.entries(row.kinds);
  const kindBar = svg("svg", {
    viewBox: "0 0 300 12",
    preserveAspectRatio: "none",
    class: "kinds",
    role: "img",
    "aria-label": kinds.map(([k, n]) => `${kindLabel(k)} ${n}`).join(","),
  });
  let x = 0;
  kinds.forEach(([kind, n]) => {
    const w = (300 * n) / Math.max(1, row.live);
    const seg = svg("rect", {
      x: x.toFixed(2),
      y: 0,
      width: w.toFixed(2),
      height: 12,
      class: `kind-seg kind-${KINDS.includes(kind) ? kind : "other"}`,
      "data-kind": kind,
      "data-count": n,
    });
    seg.append(svg("title", {}, `${kindLabel(kind)}:${n}`));
    kindBar.append(seg);
    x += w;
  });
  const kindList = el(
    "ul",
    { class: "kind-list" },
    ...kinds.map(([kind, n]) =>
      el("li", { "data-kind": kind }, el("span", { class: `badge kind-${kind}`, text: kindLabel(kind) }), ` ${n}`),
    ),
  );
  return el(
    "figure",
    { class: "chart", "data-scope": row.scope },
    el("figcaption", null, el("strong", { text: info.name }), ` ${t("chart.caption", { n: row.recent, live: row.live })}`),
    chart,
    kindBar,
    kindList,
  );
}

// A day of a scope's chart: that scope's memories of that day (under "all" too).
function filterDay(day, scope) {
  state.from = day;
  state.to = day;
  const moved = scope !== state.scope;
  state.scope = scope;
  state.selected.clear();
  syncControls();
  writeUrl(true);
  if (moved) loadInsights();
  loadList();
}

function dayKey(ev, column, day, scope) {
  const days = [...column.parentNode.querySelectorAll(".day")];
  const at = days.indexOf(column);
  const to = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: days.length - 1 }[ev.key];
  if (ev.key === "Enter" || ev.key === " ") {
    ev.preventDefault();
    filterDay(day, scope);
  } else if (to !== undefined && days[to]) {
    ev.preventDefault();
    column.setAttribute("tabindex", "-1");
    days[to].setAttribute("tabindex", "0");
    days[to].focus();
  }
}

// -- the list -----------------------------------------------------------------------------------

function listParams(offset, limit) {
  const params = new URLSearchParams({ scope: state.scope, offset: String(offset), limit: String(limit) });
  params.set("tz", String(-new Date().getTimezoneOffset()));
  for (const [key, value] of [
    ["q", state.query],
    ["kind", state.kind],
    ["tag", state.tag],
    ["client", state.client],
    ["from", state.from],
    ["to", state.to],
    ["sort", state.sort],
  ]) {
    if (value) params.set(key, value);
  }
  return params;
}

async function loadList(options = {}) {
  const pageSize = state.query ? SEARCH_PAGE : PAGE_SIZE;
  const limit = options.quiet ? Math.max(pageSize, state.records.length) : pageSize;
  const params = listParams(0, Math.min(limit, 500));
  const seq = ++state.listSeq;
  const data = await api(`/api/memories?${params}`);
  if (seq !== state.listSeq) return; // the view changed while this was on its way
  if (!data.ok) {
    $("list-note").textContent = data.message || t("error.list");
    $("list-note").title = data.code || "";
    state.records = [];
    state.listKey = "";
    $("memory-list").replaceChildren();
    $("memory-list").dataset.scope = state.scope;
    $("load-more").hidden = true;
    return;
  }
  const key = JSON.stringify([String(params), data.records, data.total]);
  if (options.quiet && key === state.listKey) return;
  state.listKey = key;
  state.records = data.records;
  state.terms = data.terms || [];
  const ids = new Set(state.records.map((r) => r.id));
  for (const id of [...state.selected]) if (!ids.has(id)) state.selected.delete(id);
  renderList(data);
  if (options.reveal) reveal();
}

// After a search or a scope choice the answer is on screen: the list scrolls into view unless its
// first card already is.
function reveal() {
  const first = $("memory-list").firstElementChild || $("list-title");
  const box = first.getBoundingClientRect();
  if (box.top < 0 || box.top > window.innerHeight - 80) $("list-title").scrollIntoView({ block: "start" });
}

async function loadMore() {
  const pageSize = state.query ? SEARCH_PAGE : PAGE_SIZE;
  const seq = state.listSeq;
  const data = await api(`/api/memories?${listParams(state.records.length, pageSize)}`);
  if (seq !== state.listSeq) return;
  if (!data.ok) {
    toast(data.message || t("error.list"), true);
    return;
  }
  const known = new Set(state.records.map((r) => r.id));
  const fresh = data.records.filter((r) => !known.has(r.id));
  state.records = state.records.concat(fresh);
  state.listKey = "";
  const list = $("memory-list");
  const first = list.querySelector(".empty");
  if (first) first.remove();
  const cards = fresh.map(renderCard);
  list.append(...cards);
  for (const node of cards) markOverflow(node);
  renderNote(data.total);
  updateSelection();
  if (cards.length) cards[0].querySelector("[data-role=open]").focus();
}

function filtersActive() {
  return Boolean(state.kind || state.tag || state.client || state.from || state.to);
}

function renderNote(total) {
  state.total = total;
  const shown = state.records.length;
  const note = $("list-note");
  note.title = "";
  if (state.query) {
    note.textContent = shown ? t("list.foundNote", { n: total, shown }) : t("list.noHits");
  } else {
    const sort = t(`sort.${state.sort || "updated"}`);
    const sortName = state.lang === "en" ? sort.toLowerCase() : sort;
    note.textContent = shown ? t("list.note", { n: total, shown, sort: sortName }) : t("list.none");
  }
  const more = $("load-more");
  const left = total - shown;
  more.hidden = left <= 0;
  more.textContent = t("list.more", { n: Math.min(left, state.query ? SEARCH_PAGE : PAGE_SIZE), left });
}

function renderList(data) {
  const where = state.scope === "all" ? t("scope.all") : scopeInfo(state.scope).name;
  $("list-title").textContent = state.query
    ? t("list.searchTitle", { q: state.query })
    : t(filtersActive() ? "list.filteredTitle" : "list.title", { where });
  renderNote(data.total);
  const focused = document.activeElement;
  const focusKey = focused && focused.dataset ? [focused.dataset.id, focused.dataset.role] : null;
  const list = $("memory-list");
  // Which scope the cards shown belong to: the previous scope's cards stay until this answer.
  list.dataset.scope = state.scope;
  if (!state.records.length) {
    list.replaceChildren(el("li", { class: "empty", text: state.query ? t("list.tryOther") : t("list.empty") }));
  } else {
    list.replaceChildren(...state.records.map(renderCard));
    for (const node of list.children) markOverflow(node);
  }
  if (focusKey && focusKey[0]) {
    const again = list.querySelector(`[data-id="${CSS.escape(focusKey[0])}"][data-role="${focusKey[1]}"]`);
    if (again) again.focus();
  }
  updateSelection();
}

const IDEOGRAPH = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
const WORD_CHAR = /[\p{L}\p{N}_]/u;

function isWordChar(ch) {
  return WORD_CHAR.test(ch) && !IDEOGRAPH.test(ch);
}

// Content with the search terms as <mark> elements (text nodes only, no HTML).
function highlighted(text, terms) {
  const out = [];
  if (!terms || !terms.length || !text) return [document.createTextNode(text)];
  const low = text.toLowerCase();
  const marks = new Array(text.length).fill(false);
  for (const term of terms) {
    const needle = term.toLowerCase();
    if (!needle) continue;
    const word = !IDEOGRAPH.test(needle); // a word (maybe a stem: "migrat") marks whole words it starts
    for (let at = low.indexOf(needle); at >= 0; at = low.indexOf(needle, at + 1)) {
      if (word && at > 0 && isWordChar(text[at - 1])) continue;
      let end = at + needle.length;
      if (word) while (end < text.length && isWordChar(text[end])) end++;
      for (let i = at; i < end && i < marks.length; i++) marks[i] = true;
    }
  }
  let start = 0;
  for (let i = 1; i <= text.length; i++) {
    if (i === text.length || marks[i] !== marks[start]) {
      const piece = text.slice(start, i);
      out.push(marks[start] ? el("mark", { text: piece }) : document.createTextNode(piece));
      start = i;
    }
  }
  return out;
}

// A safe subset of markdown, built as nodes (never HTML): paragraphs (line breaks kept), "-"/"*"/"1."
// lists, ``` blocks, `code` and **bold**, with the search terms marked.
const LIST_ITEM = /^\s*(?:[-*+]|(\d{1,9})[.)])\s+(.*)$/;
const FENCE = /^\s*```/;

function markdown(text, terms) {
  const blocks = [];
  let para = null;
  let list = null;
  let fence = null;
  for (const line of String(text).split("\n")) {
    if (fence) {
      if (FENCE.test(line)) fence = null;
      else fence.append(fence.childNodes.length ? `\n${line}` : line);
    } else if (FENCE.test(line)) {
      para = list = null;
      fence = el("code");
      blocks.push(el("pre", null, fence));
    } else if (!line.trim()) {
      para = list = null;
    } else if (LIST_ITEM.test(line)) {
      const [, number, rest] = LIST_ITEM.exec(line);
      const tag = number === undefined ? "UL" : "OL";
      if (!list || list.tagName !== tag) {
        list = el(tag.toLowerCase(), number && number !== "1" ? { start: number } : null);
        blocks.push(list);
      }
      para = null;
      list.append(el("li", null, ...inline(rest, terms)));
    } else if (list && /^\s/.test(line)) {
      list.lastChild.append("\n", ...inline(line.trim(), terms));
    } else if (para) {
      para.append("\n", ...inline(line, terms));
    } else {
      list = null;
      para = el("p", null, ...inline(line, terms));
      blocks.push(para);
    }
  }
  return blocks;
}

function inline(text, terms) {
  const out = [];
  text.split(/`([^`]+)`/).forEach((piece, i) => {
    if (i % 2 === 1) {
      out.push(el("code", null, ...highlighted(piece, terms)));
      return;
    }
    piece.split(/\*\*(\S(?:.*?\S)?)\*\*/).forEach((bit, j) => {
      if (j % 2 === 1) out.push(el("strong", null, ...highlighted(bit, terms)));
      else if (bit) out.push(...highlighted(bit, terms));
    });
  });
  return out;
}

function relevance(score) {
  const pct = Math.round(Math.min(1, Math.max(0, score)) * 100);
  return el(
    "span",
    { class: "relevance", title: t("card.relevanceTitle", { pct }) },
    el("meter", { min: 0, max: 100, value: pct, "aria-label": t("card.relevance") }),
    el("span", { text: t("card.relevanceValue", { pct }) }),
  );
}

function renderCard(r) {
  const short = snippet(firstLine(r.content), 30);
  const checked = state.selected.has(r.id);
  const box = el("input", {
    type: "checkbox",
    checked,
    "data-id": r.id,
    "data-role": "select",
    "aria-label": t("card.select", { text: short }),
    onchange: (ev) => {
      if (ev.target.checked) state.selected.add(r.id);
      else state.selected.delete(r.id);
      ev.target.closest(".card").classList.toggle("selected", ev.target.checked);
      updateSelection();
    },
  });
  const text = state.full.get(r.id) || r.content;
  const expanded = state.expanded.has(r.id);
  const content = el("div", { class: expanded ? "content" : "content clamped" }, ...markdown(text, state.terms));
  const meta = el("p", { class: "meta" });
  if (typeof r.score === "number") meta.append(relevance(r.score));
  meta.append(el("span", { class: `badge kind-${r.kind}`, text: kindLabel(r.kind) }));
  meta.append(el("span", { class: "scope", title: r.scope, text: scopeInfo(r.scope).name }));
  if (r.tags && r.tags.length) {
    meta.append(
      el(
        "span",
        { class: "tags" },
        ...r.tags.map((tag) =>
          el("button", {
            type: "button",
            class: "tag",
            "data-tag": tag,
            "aria-label": t("card.tagFilter", { tag }),
            text: `#${tag}`,
            onclick: () => {
              state.tag = tag;
              syncControls();
              writeUrl(true);
              loadList();
            },
          }),
        ),
      ),
    );
  }
  if (typeof r.importance === "number") meta.append(el("span", { text: t("card.importance", { v: r.importance.toFixed(2) }) }));
  meta.append(timeNode(r.updatedAt, t("card.updated")));
  meta.append(el("span", { text: t("card.access", { n: r.accessCount || 0 }) }));
  const client = r.client || {};
  meta.append(el("span", { class: "source", title: sourceTitle(client), text: t("card.source", { who: clientLabel(client.key, client.name) }) }));
  meta.append(el("code", { text: r.shortId }));
  const toggle = el("button", {
    type: "button",
    class: "link expand",
    "data-id": r.id,
    "data-role": "expand",
    "aria-expanded": expanded ? "true" : "false",
    hidden: true,
    text: expanded ? t("card.collapse") : t("card.expand"),
    onclick: () => toggleExpand(r, content, toggle),
  });
  return el(
    "li",
    { class: checked ? "card selected" : "card", "data-record": r.id, "data-truncated": r.truncated ? "true" : "false" },
    box,
    el("div", { class: "body" }, content, toggle, meta),
    el(
      "div",
      { class: "actions" },
      el("button", {
        type: "button",
        class: "small",
        "data-id": r.id,
        "data-role": "open",
        "aria-label": t("card.openAria", { text: short }),
        text: t("card.open"),
        onclick: () => openDetail(r.id),
      }),
      el("button", {
        type: "button",
        class: "small danger",
        "data-id": r.id,
        "data-role": "forget",
        "aria-label": t("card.forgetAria", { text: short }),
        text: t("card.forget"),
        onclick: () => askForget([r]),
      }),
    ),
  );
}

// Shows "展开" on a card whose text is clamped or was cut by the server.
function markOverflow(card) {
  const content = card.querySelector(".content");
  const toggle = card.querySelector("[data-role=expand]");
  if (!content || !toggle) return;
  const id = card.dataset.record;
  const cut = card.dataset.truncated === "true" && !state.full.has(id);
  toggle.hidden = !(state.expanded.has(id) || cut || content.scrollHeight > content.clientHeight + 1);
}

async function toggleExpand(r, content, toggle) {
  if (state.expanded.has(r.id)) {
    state.expanded.delete(r.id);
    content.classList.add("clamped");
    toggle.textContent = t("card.expand");
    toggle.setAttribute("aria-expanded", "false");
    return;
  }
  if (r.truncated && !state.full.has(r.id)) {
    const data = await api(`/api/memories/${encodeURIComponent(r.id)}`);
    if (!data.ok) {
      toast(data.message || t("error.record"), true);
      return;
    }
    state.full.set(r.id, data.record.content);
    content.replaceChildren(...markdown(data.record.content, state.terms));
  }
  state.expanded.add(r.id);
  content.classList.remove("clamped");
  toggle.textContent = t("card.collapse");
  toggle.setAttribute("aria-expanded", "true");
}

function updateSelection() {
  const n = state.selected.size;
  const btn = $("forget-selected");
  btn.disabled = n === 0;
  btn.textContent = n ? t("toolbar.forgetN", { n }) : t("toolbar.forget");
  const all = $("select-all");
  all.checked = n > 0 && n === state.records.length;
  all.indeterminate = n > 0 && n < state.records.length;
}

// -- field errors (shared by the edit and the new-memory forms) --------------------------------

function clearErrors(form, prefix) {
  for (const node of form.querySelectorAll(".field-error, .form-error")) {
    node.textContent = "";
    node.removeAttribute("title");
  }
  for (const node of form.querySelectorAll(".invalid")) {
    node.classList.remove("invalid");
    node.removeAttribute("aria-invalid");
  }
  return prefix;
}

// A person reads a sentence in their language; the code is in the tooltip for whoever needs it.
function showError(prefix, data) {
  const field = FIELD_OF_CODE[data.code] || "form";
  const target = $(`err-${prefix}${field}`) || $(`err-${prefix}form`);
  const known = `code.${data.code}`;
  const text = t(known) !== known ? t(known) : data.message || t("error.save");
  target.textContent = text;
  target.title = data.code || "";
  const input = field !== "form" ? $(`${prefix === "" ? "edit-" : prefix}${field}`) : null;
  if (input) {
    input.classList.add("invalid");
    input.setAttribute("aria-invalid", "true");
    input.focus();
  }
}

function splitTags(text) {
  return text
    .split(/[,,、]/)
    .map((tag) => tag.trim())
    .filter(Boolean);
}

// -- detail and edit ----------------------------------------------------------------------------

async function openDetail(id) {
  const data = await api(`/api/memories/${encodeURIComponent(id)}`);
  if (!data.ok) {
    toast(data.message || t("error.record"), true);
    return;
  }
  const r = data.record;
  state.detail = r;
  clearErrors($("edit-form"), "");
  $("detail-title").textContent = snippet(firstLine(r.content), 60);
  $("edit-content").value = r.content;
  $("edit-kind").value = r.kind;
  $("edit-tags").value = (r.tags || []).join(", ");
  $("edit-importance").value = typeof r.importance === "number" ? String(r.importance) : "";
  const client = r.client || {};
  const facts = [
    ["id", r.id],
    [t("fact.scope"), r.scope],
    [t("fact.created"), fmtTime(r.createdAt)],
    [t("fact.updated"), fmtTime(r.updatedAt)],
    [t("fact.accessed"), fmtTime(r.lastAccessedAt)],
    [t("fact.count"), String(r.accessCount || 0)],
    [t("fact.source"), sourceFact(client)],
  ];
  if (r.editedBy) facts.push([t("fact.editedBy"), clientLabel(r.editedBy.key, r.editedBy.name)]);
  $("detail-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
  const targets = (state.overview ? state.overview.scopes.map((row) => row.scope) : []).filter((s) => s !== r.scope);
  if (r.scope !== "global" && !targets.includes("global")) targets.unshift("global");
  $("move-scope").replaceChildren(...targets.map((scope) => el("option", { value: scope, text: scopeInfo(scope).name, title: scope })));
  $("move-go").disabled = targets.length === 0;
  $("detail-versions").hidden = true;
  const dialog = $("detail-dialog");
  if (!dialog.open) dialog.showModal();
  $("edit-content").focus();
  loadVersions(r);
}

// "claude-code (claude-code/1.0.3)": the whole client string only when it says more than the name.
function sourceFact(client) {
  const who = clientLabel(client.key, client.name);
  const full = client.full && client.full !== client.name && client.key !== "web" ? client.full : "";
  return full ? t("common.paren", { a: who, b: full }) : who;
}

// The versions this memory replaced (an edit, a restore or a move each made one), newest first.
async function loadVersions(r) {
  const data = await api(`/api/memories/${encodeURIComponent(r.id)}/versions`);
  if (!data.ok || state.detail !== r) return;
  const older = data.versions.slice(1);
  $("detail-versions").hidden = older.length === 0;
  $("versions-title").textContent = t("versions.title", { n: older.length });
  $("version-list").replaceChildren(
    ...older.map((v) =>
      el(
        "li",
        { class: "version", "data-version": v.id },
        el("div", { class: "content" }, ...markdown(v.content, [])),
        el(
          "p",
          { class: "meta" },
          el("span", { text: t("versions.meta", { scope: scopeInfo(v.scope).name, kind: kindLabel(v.kind), id: v.shortId }) }),
          el("span", { text: (v.tags || []).join(", ") }),
          el("button", {
            type: "button",
            class: "small",
            "data-role": "restore",
            text: t("versions.restore"),
            onclick: () => reviseDetail({ content: v.content, kind: v.kind, tags: v.tags || [], importance: v.importance }),
          }),
        ),
      ),
    ),
  );
}

// Edit, restore and move are one call: a new version that replaces the one open (its history kept).
async function reviseDetail(body) {
  const r = state.detail;
  if (!r) return null;
  const data = await api(`/api/memories/${encodeURIComponent(r.id)}/edit`, { method: "POST", body });
  if (!data.ok) {
    showError("", data);
    return null;
  }
  toast(data.message);
  await refreshAll();
  await openDetail(data.id);
  return data;
}

async function saveEdit(ev) {
  ev.preventDefault();
  const r = state.detail;
  if (!r) return;
  clearErrors($("edit-form"), "");
  const importance = $("edit-importance").value.trim();
  const body = {
    content: $("edit-content").value,
    kind: $("edit-kind").value,
    tags: splitTags($("edit-tags").value),
    importance: importance === "" ? null : importance,
  };
  $("edit-save").disabled = true;
  try {
    const data = await api(`/api/memories/${encodeURIComponent(r.id)}/edit`, { method: "POST", body });
    if (!data.ok) {
      showError("", data);
      return;
    }
    $("detail-dialog").close();
    state.detail = null;
    toast(data.message);
    await refreshAll();
  } finally {
    $("edit-save").disabled = false;
  }
}

// -- duplicates -----------------------------------------------------------------------------------

// The near-duplicate groups of the chosen scope (each scope of "all"); keeping one is a new version
// of it that hides the others, which its "earlier versions" can bring back.
async function openDuplicates() {
  const where = state.scope === "all" ? t("scope.all") : scopeInfo(state.scope).name;
  const data = await api(`/api/duplicates?scope=${encodeURIComponent(state.scope === "all" ? "" : state.scope)}`);
  if (!data.ok) {
    toast(data.message || t("dups.error"), true);
    return;
  }
  const found = data.byMeaning ? "dups.foundMeaning" : "dups.found";
  $("dups-text").textContent = data.total ? t(found, { scope: where, n: data.total }) : t("dups.none", { scope: where });
  $("dup-groups").replaceChildren(
    ...data.groups.map((group, n) =>
      el(
        "li",
        { class: "dup-group" },
        el(
          "h3",
          {},
          t("dups.group", { n: n + 1, count: group.records.length }) + (state.scope === "all" ? ` · ${scopeInfo(group.scope).name}` : ""),
          el("span", { class: "why", "data-why": group.why, text: t(`dups.${group.why}`) }),
        ),
        el(
          "ul",
          {},
          ...group.records.map((r) =>
            el(
              "li",
              { class: "dup", "data-id": r.id },
              el("p", { class: "content", text: r.content.split("\n").slice(0, 3).join("\n") }),
              el(
                "p",
                { class: "meta" },
                el("span", {
                  text: t("dups.meta", {
                    created: fmtTime(r.createdAt),
                    count: r.accessCount || 0,
                    source: clientLabel(r.client.key, r.client.name),
                    id: r.shortId,
                  }),
                }),
                el("button", {
                  type: "button",
                  class: "small",
                  "data-role": "keep",
                  text: t("dups.keep"),
                  onclick: () => keepDuplicate(r.id, group.records.filter((o) => o.id !== r.id).map((o) => o.id)),
                }),
              ),
            ),
          ),
        ),
      ),
    ),
  );
  const dialog = $("dups-dialog");
  if (!dialog.open) dialog.showModal();
}

async function keepDuplicate(keep, replace) {
  const data = await api("/api/duplicates/keep", { method: "POST", body: { keep, replace } });
  toast(data.message || t("error.save"), !data.ok);
  if (!data.ok) return;
  await refreshAll();
  await openDuplicates();
}

// -- new memory ---------------------------------------------------------------------------------

function openNew() {
  const form = $("new-form");
  clearErrors(form, "new-");
  $("new-content").value = "";
  $("new-kind").value = "note";
  $("new-tags").value = "";
  $("new-importance").value = "";
  $("new-scope").value = state.scope !== "all" ? state.scope : "global";
  $("new-dialog").showModal();
  $("new-content").focus();
}

async function saveNew(ev) {
  ev.preventDefault();
  clearErrors($("new-form"), "new-");
  const importance = $("new-importance").value.trim();
  const body = {
    content: $("new-content").value,
    kind: $("new-kind").value,
    tags: splitTags($("new-tags").value),
    scope: $("new-scope").value.trim() || "global",
    importance: importance === "" ? null : importance,
  };
  $("new-save").disabled = true;
  try {
    const data = await api("/api/memories", { method: "POST", body });
    if (!data.ok) {
      showError("new-", data);
      return;
    }
    $("new-dialog").close();
    const short = String(data.id).slice(0, 8);
    toast(data.deduped ? t("new.deduped", { id: short }) : t("new.saved", { id: short }));
    if (data.record) showNewCard(data.record);
    await refreshAll();
  } finally {
    $("new-save").disabled = false;
  }
}

// The new memory at the top of the list at once, before the next refresh.
function showNewCard(record) {
  if (state.records.some((r) => r.id === record.id)) return;
  state.records = [record, ...state.records];
  state.listKey = "";
  const list = $("memory-list");
  const empty = list.querySelector(".empty");
  if (empty) empty.remove();
  const node = renderCard(record);
  node.classList.add("fresh");
  list.prepend(node);
  markOverflow(node);
  renderNote(state.total + 1);
}

// -- forget -------------------------------------------------------------------------------------

function askForget(records) {
  if (!records.length) return;
  state.pendingForget = records;
  $("confirm-title").textContent = records.length === 1 ? t("forget.titleOne") : t("forget.titleN", { n: records.length });
  $("confirm-text").textContent = records.length === 1 ? t("forget.textOne") : t("forget.textN", { n: records.length });
  const shown = records.slice(0, 8).map((r) => el("li", { text: t("common.paren", { a: snippet(r.content, 80), b: r.shortId }) }));
  if (records.length > 8) shown.push(el("li", { text: t("forget.more", { n: records.length - 8 }) }));
  $("confirm-items").replaceChildren(...shown);
  // A person's delete goes to the trash (the server's DSH_MEMORY_TRASH_DAYS); "delete forever" skips it.
  const days = (state.overview && state.overview.trashDays) || 0;
  $("confirm-hint").textContent = days ? t("forget.hintTrash", { days }) : t("forget.hint");
  $("confirm-ok").textContent = days ? t("forget.toTrash", { days }) : t("forget.ok");
  $("confirm-ok").className = days ? "primary" : "danger"; // undoable: not the red button
  $("confirm-purge").hidden = !days;
  $("confirm-dialog").showModal();
  $("confirm-cancel").focus();
}

async function doForget(purge) {
  const records = state.pendingForget;
  state.pendingForget = [];
  $("confirm-dialog").close();
  if (!records.length) return;
  const data = await api("/api/forget", { method: "POST", body: { ids: records.map((r) => r.id), purge } });
  if (!data.ok) {
    toast(data.message || t("error.forget"), true);
    return;
  }
  for (const r of records) state.selected.delete(r.id);
  if ($("detail-dialog").open) $("detail-dialog").close();
  if (data.trashDays && !(data.missing && data.missing.length)) toast(t("forget.trashed", { n: data.deleted, days: data.trashDays }));
  else toast(data.missing && data.missing.length ? t("forget.doneMissing", { n: data.deleted, m: data.missing.length }) : t("forget.done", { n: data.deleted }));
  await refreshAll();
  $("memory-list").focus();
}

// -- trash --------------------------------------------------------------------------------------

// What people deleted on the page or with the CLI's forget, restorable until the server's
// DSH_MEMORY_TRASH_DAYS are up: restore (history kept) or delete for good, one by one or all.
async function openTrash() {
  const data = await api("/api/trash");
  if (!data.ok) {
    toast(data.message || t("trash.error"), true);
    return;
  }
  const empty = $("trash-empty");
  empty.disabled = data.total === 0;
  empty.dataset.armed = "";
  empty.textContent = t("trash.empty");
  $("trash-text").textContent = !data.days ? t("trash.off") : data.total ? t("trash.text", { n: data.total, days: data.days }) : t("trash.none");
  $("trash-items").replaceChildren(
    ...data.entries.map((r) =>
      el(
        "li",
        { "data-id": r.id },
        el("p", { class: "content", text: r.line }),
        el(
          "p",
          { class: "meta" },
          el("span", { text: t("trash.meta", { scope: scopeInfo(r.scope).name, trashed: fmtTime(r.trashedAt), created: fmtTime(r.createdAt), id: r.shortId }) }),
          el("button", {
            type: "button",
            class: "small",
            "data-role": "restore",
            "aria-label": t("trash.restoreAria", { text: snippet(r.line) }),
            text: t("trash.restore"),
            onclick: () => trashAction("/api/trash/restore", { ids: [r.id] }),
          }),
          el("button", {
            type: "button",
            class: "small danger",
            "data-role": "purge",
            "aria-label": t("trash.purgeAria", { text: snippet(r.line) }),
            text: t("trash.purge"),
            onclick: () => trashAction("/api/trash/purge", { ids: [r.id] }),
          }),
        ),
      ),
    ),
  );
  const dialog = $("trash-dialog");
  if (!dialog.open) dialog.showModal();
  if (!dialog.contains(document.activeElement) || document.activeElement === document.body) $("trash-close").focus();
}

async function trashAction(path, body) {
  const data = await api(path, { method: "POST", body });
  if (!data.ok) {
    toast(data.message || t("trash.error"), true);
    return;
  }
  if (data.restored) {
    const twice = data.restored.find((r) => r.deduped);
    toast(twice ? t("trash.deduped", { id: twice.restoredAs.slice(0, 8) }) : t("trash.restored", { n: data.restored.length }));
  } else {
    toast(t("trash.purged", { n: data.purged }));
  }
  await refreshAll();
  await openTrash();
  $("trash-close").focus();
}

// Emptying the trash asks twice: the first click turns the button into its own confirmation.
function emptyTrash() {
  const button = $("trash-empty");
  if (!button.dataset.armed) {
    button.dataset.armed = "1";
    button.textContent = t("trash.emptyConfirm", { n: $("trash-items").children.length });
    return;
  }
  trashAction("/api/trash/purge", { all: true });
}

// -- recover ------------------------------------------------------------------------------------

async function askRecover() {
  $("recover-progress").hidden = true;
  const data = await api("/api/recover", { method: "POST", body: { dryRun: true } });
  if (!data.ok) {
    toast(data.message || t("error.recover"), true);
    return;
  }
  recoverPlan = data.byScope || {};
  $("recover-text").textContent = data.total ? t("recover.preview", { n: data.total }) : t("recover.nothing");
  const items = [];
  for (const [scope, n] of Object.entries(data.byScope)) {
    const ids = data.records.filter((r) => r.scope === scope).map((r) => r.shortId);
    items.push(el("li", { class: "recover-scope", text: `${scope}:${t("recover.count", { n })} ${ids.join(",")}` }));
  }
  for (const r of data.records.slice(0, 20)) {
    items.push(el("li", { "data-id": r.id, text: t("common.paren", { a: snippet(r.content, 80), b: `${r.shortId} @ ${r.scope}` }) }));
  }
  if (data.refusedTotal) {
    items.push(el("li", { class: "recover-scope", text: t("recover.refused", { n: data.refusedTotal }) }));
    for (const r of data.refused.slice(0, 20)) {
      items.push(el("li", { class: "refused", "data-id": r.id, text: `${r.scope}:${r.shortId} — ${r.reason}` }));
    }
  }
  $("recover-items").replaceChildren(...items);
  $("recover-ok").disabled = data.total === 0;
  $("recover-dialog").showModal();
  $("recover-cancel").focus();
}

// Scope by scope, as previewed (the `recover` command's steps): the bar moves with the memories
// restored so far, with the time left.
let recoverPlan = {};

async function doRecover() {
  const box = $("recover-progress");
  const label = t("progress.recover");
  $("recover-ok").disabled = true;
  const steps = Object.entries(recoverPlan);
  const total = steps.reduce((sum, [, count]) => sum + count, 0);
  const started = Date.now();
  let done = 0;
  let restored = 0;
  showProgress(box, label, 0, total, started);
  for (const [scope, count] of steps) {
    const data = await api("/api/recover", { method: "POST", body: { dryRun: false, scope } });
    if (!data.ok) {
      progressDone(box, label, false);
      toast(data.message || t("error.recover"), true);
      await refreshAll();
      return;
    }
    restored += data.total;
    done += count;
    showProgress(box, label, done, total, started);
  }
  progressDone(box, label, true);
  $("recover-text").textContent = t("recover.done", { n: restored });
  $("recover-items").replaceChildren();
  toast(t("recover.done", { n: restored }));
  await refreshAll();
}

// -- import -------------------------------------------------------------------------------------

function openImport() {
  state.importText = null;
  $("import-file").value = "";
  $("import-file-name").textContent = t("import.none");
  $("import-preview").replaceChildren();
  $("import-error").textContent = "";
  $("import-progress").hidden = true;
  importReady(false);
  if (state.scope !== "all") $("import-scope").value = state.scope;
  $("import-dialog").showModal();
  $("import-file").focus();
}

async function readImportFile() {
  const file = $("import-file").files[0];
  if (!file) return null;
  const limit = (state.overview && state.overview.importMaxBytes) || 32 * 1024 * 1024;
  if (file.size > limit) {
    $("import-error").textContent = t("import.tooBig", { size: fmtSize(file.size), limit: fmtSize(limit) });
    return null;
  }
  // The exact bytes, base64: the server checks UTF-8 line by line, as the import command does
  // (file.text() would silently turn bad bytes into U+FFFD).
  return { name: file.name, data: toBase64(new Uint8Array(await file.arrayBuffer())) };
}

function toBase64(bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

async function runImport(dryRun) {
  $("import-error").textContent = "";
  if (dryRun) {
    const picked = await readImportFile();
    if (!picked) {
      if (!$("import-error").textContent) $("import-error").textContent = t("import.pick");
      return;
    }
    state.importText = picked.data;
    state.importName = picked.name;
  }
  if (state.importText === null) return;
  const body = { data: state.importText, scope: $("import-scope").value, dryRun };
  const box = $("import-progress");
  const label = t("progress.upload");
  const started = Date.now();
  showProgress(box, label, 0, 1, started);
  const onUpload = (sent, total) => showProgress(box, label, sent, total, started);
  const data = await api("/api/import", { method: "POST", body, onUpload });
  progressDone(box, label, data.ok);
  if (!data.ok) {
    $("import-error").textContent = data.message || t("error.import");
    $("import-error").title = data.code || "";
    importReady(false);
    return;
  }
  renderImportResult(data);
  importReady(dryRun && data.added > 0);
  if (dryRun && data.added > 0) $("import-apply").focus();
  if (!dryRun) {
    state.importText = null;
    toast(importSummary(data));
    await refreshAll();
  }
}

// After a preview that would add something, "Import" is the primary button; else "Preview" is.
function importReady(ready) {
  $("import-apply").disabled = !ready;
  $("import-apply").classList.toggle("primary", ready);
  $("import-dry").classList.toggle("primary", !ready);
}

function importSummary(data) {
  const key = data.dryRun ? "import.previewSummary" : "import.doneSummary";
  let text = t(key, { added: data.added, existing: data.existing, bad: data.bad });
  if (data.refused) text += t("import.refusedSummary", { n: data.refused });
  return text;
}

function renderImportResult(data) {
  const parts = [el("p", { class: "summary", text: importSummary(data) })];
  if (data.byScope && data.byScope.length) {
    parts.push(
      el(
        "ul",
        { "aria-label": t("import.byScope") },
        ...data.byScope.map((row) =>
          el("li", { text: t(data.dryRun ? "import.scopeWill" : "import.scopeDid", { scope: row.scope, added: row.added, existing: row.existing }) }),
        ),
      ),
    );
  }
  if (data.memories && data.memories.length) {
    parts.push(el("p", { text: t("import.listed", { n: data.memoriesTotal }) }));
    const rows = data.memories.map((m) =>
      el(
        "li",
        { class: "import-memory" },
        el("span", { class: `badge kind-${m.kind}`, text: kindLabel(m.kind) }),
        " ",
        el("span", { class: "scope", title: m.scope, text: scopeInfo(m.scope).name }),
        " ",
        el("span", { class: "line", text: m.line }),
      ),
    );
    if (data.memoriesTotal > rows.length) rows.push(el("li", { text: t("forget.more", { n: data.memoriesTotal - rows.length }) }));
    parts.push(el("ul", { class: "import-list", "aria-label": t("import.listedAria") }, ...rows));
  }
  if (data.problems && data.problems.length) {
    parts.push(el("p", { text: t("import.skipped", { n: data.bad }) }));
    parts.push(el("ul", { "aria-label": t("import.skippedAria") }, ...data.problems.map((p) => el("li", { text: p }))));
  }
  if (data.refusals && data.refusals.length) {
    parts.push(el("p", { text: t("import.refused", { n: data.refused }) }));
    parts.push(
      el(
        "ul",
        { "aria-label": t("import.refusedAria") },
        ...data.refusals.map((r) => el("li", { title: r.code, text: r.text })),
      ),
    );
  }
  $("import-preview").replaceChildren(...parts);
}

// -- live updates -------------------------------------------------------------------------------

async function refreshAll() {
  await loadOverview();
  await loadInsights();
  await loadList({ quiet: true });
}

async function poll() {
  try {
    const data = await api("/api/version");
    const status = $("live-status");
    if (data.ok) {
      status.classList.remove("stale");
      if (state.version !== null && data.version !== state.version) {
        state.version = data.version;
        await refreshAll();
      } else {
        state.version = data.version;
        // The vector channel changes without the store changing (starting → ready or → why it is down,
        // a backfill draining): the overview is fetched again only when its vector state moved.
        const shown = state.overview && state.overview.vectors;
        if (shown && JSON.stringify(data.vectors) !== JSON.stringify(shown)) await loadOverview();
      }
      const now = new Date();
      status.textContent = t("live.synced", { time: `${pad(now.getHours())}:${pad(now.getMinutes())}:${pad(now.getSeconds())}` });
    } else {
      status.textContent = t("live.lost");
      status.classList.add("stale");
    }
  } catch (err) {
    if (err instanceof AuthError) return; // stop polling: the login view is shown
  }
  setTimeout(poll, POLL_MS);
}

// -- start --------------------------------------------------------------------------------------

// A date as a person types it (2026-07-01, 2026/7/1, 2026年7月1日) → YYYY-MM-DD, "" for none, null if unreadable.
function normalDate(text) {
  const value = text.trim();
  if (!value) return "";
  const m = /^(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*日?$/.exec(value);
  if (!m) return null;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d) return null;
  return `${m[1]}-${pad(mo)}-${pad(d)}`;
}

function readDate(id) {
  const input = $(id);
  const value = normalDate(input.value);
  input.classList.toggle("invalid", value === null);
  if (value === null) {
    input.setAttribute("aria-invalid", "true");
    input.title = t("filter.badDate");
    return null;
  }
  input.removeAttribute("aria-invalid");
  input.removeAttribute("title");
  input.value = value;
  return value;
}

function applyFilters(push, reveal = false) {
  const from = readDate("from-filter");
  const to = readDate("to-filter");
  if (from === null || to === null) return;
  state.kind = $("kind-filter").value;
  state.tag = $("tag-filter").value;
  state.client = $("client-filter").value;
  state.from = from;
  state.to = to;
  state.sort = $("sort").value;
  if (state.sort === (state.query ? "relevance" : "updated")) state.sort = "";
  state.selected.clear();
  writeUrl(push);
  loadList({ reveal });
}

// Typing in a field that was marked wrong takes the mark away (the next save checks again).
function clearFieldError(ev) {
  const input = ev.target;
  if (!input.classList || !input.classList.contains("invalid")) return;
  input.classList.remove("invalid");
  input.removeAttribute("aria-invalid");
  const error = input.getAttribute("aria-describedby");
  if (error && $(error)) {
    $(error).textContent = "";
    $(error).removeAttribute("title");
  }
}

function wire() {
  $("lang").addEventListener("change", () => setLanguage($("lang").value));
  for (const form of ["edit-form", "new-form"]) {
    $(form).addEventListener("input", clearFieldError);
    $(form).addEventListener("change", clearFieldError);
  }
  $("search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const query = $("q").value.trim();
    if (query !== state.query && state.sort === "relevance") state.sort = "";
    state.query = query;
    if (!state.query && state.sort === "relevance") state.sort = "";
    fillSort();
    applyFilters(true, true);
  });
  // The charts stay folded unless the person opened them (remembered in this origin's storage).
  $("insights").querySelector("summary").addEventListener("click", () => {
    try {
      localStorage.setItem(CHARTS_KEY, $("insights").open ? "closed" : "open");
    } catch (err) {
      // not remembered
    }
  });
  for (const id of ["kind-filter", "tag-filter", "client-filter", "from-filter", "to-filter", "sort"]) {
    $(id).addEventListener("change", () => applyFilters(true));
  }
  $("clear-search").addEventListener("click", () => {
    $("q").value = "";
    state.query = "";
    if (state.sort === "relevance") state.sort = "";
    fillSort();
    applyFilters(true);
  });
  $("clear-filters").addEventListener("click", () => {
    state.kind = state.tag = state.client = state.from = state.to = "";
    syncControls();
    applyFilters(true);
  });
  $("load-more").addEventListener("click", loadMore);
  $("select-all").addEventListener("change", (ev) => {
    if (ev.target.checked) for (const r of state.records) state.selected.add(r.id);
    else state.selected.clear();
    renderList({ total: state.total });
  });
  $("forget-selected").addEventListener("click", () => {
    askForget(state.records.filter((r) => state.selected.has(r.id)));
  });
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const token = $("login-token").value.trim();
    if (!token) return;
    $("login-token").value = "";
    if ((await loginWith({ token })).ok) location.reload();
    else showLogin("bad");
  });
  $("edit-form").addEventListener("submit", saveEdit);
  $("move-go").addEventListener("click", () => {
    if ($("move-scope").value) reviseDetail({ scope: $("move-scope").value });
  });
  $("detail-close").addEventListener("click", () => $("detail-dialog").close());
  $("detail-forget").addEventListener("click", () => {
    if (state.detail) askForget([state.detail]);
  });
  $("new-open").addEventListener("click", openNew);
  $("new-form").addEventListener("submit", saveNew);
  $("new-close").addEventListener("click", () => $("new-dialog").close());
  $("confirm-cancel").addEventListener("click", () => {
    state.pendingForget = [];
    $("confirm-dialog").close();
  });
  $("confirm-ok").addEventListener("click", () => doForget(false));
  $("confirm-purge").addEventListener("click", () => doForget(true));
  $("dups-open").addEventListener("click", openDuplicates);
  $("dups-close").addEventListener("click", () => $("dups-dialog").close());
  $("trash-open").addEventListener("click", openTrash);
  $("trash-empty").addEventListener("click", emptyTrash);
  $("trash-close").addEventListener("click", () => $("trash-dialog").close());
  $("recover-cancel").addEventListener("click", () => $("recover-dialog").close());
  $("recover-ok").addEventListener("click", doRecover);
  $("export-link").addEventListener("click", () => {
    const slug = state.scope === "all" ? "all" : "scope";
    download(`/api/export?${new URLSearchParams({ scope: state.scope })}`, `dsh-memory-${slug}.jsonl`);
  });
  $("import-open").addEventListener("click", openImport);
  $("import-file").addEventListener("change", () => {
    const file = $("import-file").files[0];
    $("import-file-name").textContent = file ? file.name : t("import.none");
    state.importText = null;
    importReady(false);
    $("import-preview").replaceChildren();
  });
  $("import-scope").addEventListener("change", () => {
    importReady(false);
    if (state.importText !== null) runImport(true);
  });
  $("import-dry").addEventListener("click", () => runImport(true));
  $("import-apply").addEventListener("click", () => runImport(false));
  $("import-close").addEventListener("click", () => $("import-dialog").close());
  window.addEventListener("popstate", () => {
    const scope = state.scope;
    readUrl();
    syncControls();
    if (scope !== state.scope) loadInsights();
    loadList();
  });
  document.addEventListener("keydown", (ev) => {
    const typing = ev.target instanceof HTMLInputElement || ev.target instanceof HTMLTextAreaElement;
    if (ev.key === "/" && !typing && !document.querySelector("dialog[open]")) {
      ev.preventDefault();
      $("q").focus();
    }
  });
}

// The charts start as the person left them (folded the first time); on a phone-sized window the
// filters and the charts start folded (unless a filter is in use), so the memories come first.
function foldForNarrow() {
  try {
    $("insights").open = localStorage.getItem(CHARTS_KEY) === "open";
  } catch (err) {
    $("insights").open = false;
  }
  if (!window.matchMedia("(max-width: 760px)").matches) return;
  if (!filtersActive()) $("filters-box").open = false;
  $("insights").open = false;
}

async function start() {
  state.lang = chooseLanguage();
  applyLanguage();
  wire();
  const login = await loginFromFragment();
  if (!login.ok) {
    dropLogin();
    showLogin("bad", login.message);
    return;
  }
  readUrl();
  foldForNarrow();
  try {
    const session = await api("/api/session");
    if (!session.ok) {
      toast(session.message || t("error.unavailable"), true);
      return;
    }
    $("app").hidden = false;
    $("login-needed").hidden = true;
    state.version = session.version;
    syncControls();
    await loadOverview();
    await loadInsights();
    syncControls();
    await loadList();
    state.started = true;
    $("live-status").textContent = t("live.on");
    setTimeout(poll, POLL_MS);
    document.documentElement.dataset.ready = "true";
  } catch (err) {
    if (!(err instanceof AuthError)) throw err;
  }
}

// A login link opened in a tab already showing this page changes only the fragment: no new page load.
window.addEventListener("hashchange", async () => {
  const login = await loginFromFragment();
  if (login.none) return;
  if (login.ok) location.reload();
  else {
    dropLogin();
    showLogin("bad", login.message);
  }
});

document.addEventListener("DOMContentLoaded", start);
