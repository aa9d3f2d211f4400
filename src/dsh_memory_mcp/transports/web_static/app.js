// dsh-memory-mcp web page. Plain JavaScript, no library, nothing from the network but our own API.
// Memory text is untrusted (any agent can write it): it only ever reaches the page through
// textContent / value, never through innerHTML or a URL.
"use strict";

const KIND_LABELS = {
  fact: "事实",
  decision: "决定",
  preference: "偏好",
  procedure: "步骤",
  note: "笔记",
  rule: "规则",
};
// Which form field a tool error code belongs to (the same codes memory_save returns).
const FIELD_OF_CODE = {
  CONTENT_EMPTY: "content",
  CONTENT_TOO_LONG: "content",
  CONTENT_SECRET: "content",
  KIND_INVALID: "kind",
  TAGS_INVALID: "tags",
  IMPORTANCE_RANGE: "importance",
};
const POLL_MS = 2000;
const LIST_LIMIT = 200;
const SEARCH_TOP_K = 20;

const state = {
  scope: "all",
  query: "",
  kind: "",
  records: [],
  total: 0,
  selected: new Set(),
  overview: null,
  version: null,
  listKey: "",
  detail: null,
  pendingForget: [],
  importText: null,
  importName: "",
  polling: false,
};

const $ = (id) => document.getElementById(id);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key in node && typeof value !== "string") node[key] = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

class AuthError extends Error {}

async function api(path, options = {}) {
  const init = { method: options.method || "GET", credentials: "same-origin", headers: {} };
  if (options.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    return { ok: false, code: "NETWORK", message: "连不上服务:它可能已经停止。重新启动 serve 后刷新本页。" };
  }
  if (res.status === 401) {
    showLogin();
    throw new AuthError("401");
  }
  try {
    return await res.json();
  } catch (err) {
    return { ok: false, code: `HTTP_${res.status}`, message: `服务返回了无法解析的回答(HTTP ${res.status})。` };
  }
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

function fmtSize(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function kindLabel(kind) {
  return KIND_LABELS[kind] || kind;
}

function snippet(text, n = 40) {
  const one = String(text).split(/\s+/).join(" ").trim();
  return one.length <= n ? one : `${one.slice(0, n - 1)}…`;
}

function scopeInfo(scope) {
  if (scope === "global") return { name: "global", type: "全局(所有项目共享)" };
  if (scope.startsWith("project:")) return { name: scope.slice("project:".length), type: "项目" };
  if (scope.startsWith("session:")) return { name: scope.slice("session:".length), type: "会话" };
  return { name: scope, type: "自定义作用域" };
}

function sourceLabel(source) {
  if (!source || typeof source !== "object") return "";
  const parts = [];
  for (const key of ["client", "host", "agent", "app", "by", "origin"]) {
    const value = source[key];
    if (typeof value === "string" && value.trim() && !parts.includes(value.trim())) parts.push(value.trim());
  }
  return parts.join(" · ");
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

// -- login --------------------------------------------------------------------------------------

function showLogin() {
  $("app").hidden = true;
  $("login-needed").hidden = false;
  $("live-status").textContent = "未登录";
}

// -- overview: scopes and health ----------------------------------------------------------------

async function loadOverview() {
  const data = await api("/api/overview");
  if (!data.ok) {
    toast(data.message || "读取记忆库状态失败", true);
    return;
  }
  state.overview = data;
  $("store-path").textContent = `记忆库目录:${data.storeDir}`;
  renderScopes();
  renderHealth();
}

function renderScopes() {
  const data = state.overview;
  const list = $("scope-list");
  const aliasesOf = {};
  for (const [name, key] of Object.entries(data.aliases || {})) (aliasesOf[key] = aliasesOf[key] || []).push(name);
  const items = [{ scope: "all", name: "全部作用域", type: `${data.scopes.length} 个作用域`, live: data.totals.live }];
  for (const row of data.scopes) {
    const info = scopeInfo(row.scope);
    const aliases = aliasesOf[row.scope];
    items.push({
      scope: row.scope,
      name: info.name,
      type: aliases ? `${info.type} · 别名 ${aliases.join("、")}` : info.type,
      live: row.live,
    });
  }
  if (!items.some((item) => item.scope === state.scope)) state.scope = "all";
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
            "aria-label": `${item.name}(${item.type}),${item.live} 条有效记忆`,
            onclick: () => selectScope(item.scope),
          },
          el("span", { class: "scope-name" }, item.name, el("span", { class: "scope-type", text: item.type })),
          el("span", { class: "scope-count", text: String(item.live) }),
        ),
      ),
    ),
  );
  const select = $("import-scope");
  const keep = select.value || "global";
  const writable = data.scopes.map((row) => row.scope);
  if (!writable.includes("global")) writable.unshift("global");
  select.replaceChildren(
    ...writable.map((scope) => el("option", { value: scope, text: scope === "global" ? "global(全局)" : scope })),
  );
  select.value = writable.includes(keep) ? keep : "global";
}

function renderHealth() {
  const data = state.overview;
  const t = data.totals;
  const rows = [
    ["有效记忆", `${t.live} 条`],
    ["过期/被取代", `${t.expired} 条(留在磁盘上)`],
    ["损坏行", `${t.corrupt} 行${t.corrupt ? "(原样保留,未读取)" : ""}`],
    ["文件大小", fmtSize(t.bytes)],
  ];
  const vec = data.vectors || {};
  if (vec.enabled) {
    rows.push(["向量模型", vec.model ? `${vec.model}${vec.dims ? `(${vec.dims} 维)` : ""}` : "未就绪"]);
    rows.push(["向量覆盖", `${t.covered}/${t.live} 条`]);
    if (vec.state) rows.push(["向量通道", vec.state]);
    if (typeof vec.backfillPending === "number" && vec.backfillPending > 0) {
      rows.push(["后台补齐", `还剩 ${vec.backfillPending} 条`]);
    }
  } else {
    rows.push(["向量检索", "关闭(仅词法检索)"]);
    if (vec.reason) rows.push(["原因", vec.reason]);
  }
  if (typeof data.vanished === "number") rows.push(["被覆盖丢失", `${data.vanished} 条`]);
  $("health").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
  const warnings = [];
  if (t.corrupt) warnings.push(`有 ${t.corrupt} 行损坏的记录:已原样保留,可用 doctor 检查。`);
  if (data.vanished) {
    warnings.push(`${data.vanished} 条确认保存过的记忆被别的写入者覆盖掉了:运行 dsh-memory-mcp recover 可按原样找回。`);
  }
  for (const path of data.unattributedFiles || []) warnings.push(`无法确定作用域的文件:${path}`);
  $("health-warnings").replaceChildren(...warnings.map((w) => el("li", { text: w })));
}

function selectScope(scope) {
  state.scope = scope;
  state.selected.clear();
  for (const btn of document.querySelectorAll(".scope-btn")) {
    btn.setAttribute("aria-current", btn.dataset.scope === scope ? "true" : "false");
  }
  updateExportLink();
  loadList();
}

function updateExportLink() {
  const link = $("export-link");
  link.href = `/api/export?scope=${encodeURIComponent(state.scope)}`;
  link.textContent = state.scope === "all" ? "导出全部" : "导出当前作用域";
}

// -- the list -----------------------------------------------------------------------------------

async function loadList(options = {}) {
  const params = new URLSearchParams({ scope: state.scope });
  let path;
  if (state.query) {
    params.set("q", state.query);
    params.set("topK", String(SEARCH_TOP_K));
    path = `/api/search?${params}`;
  } else {
    params.set("limit", String(LIST_LIMIT));
    if (state.kind) params.set("kind", state.kind);
    path = `/api/memories?${params}`;
  }
  const data = await api(path);
  if (!data.ok) {
    $("list-note").textContent = `${data.code || "错误"}:${data.message || "读取失败"}`;
    state.records = [];
    state.listKey = "";
    $("memory-list").replaceChildren();
    return;
  }
  let records = data.records;
  if (state.query && state.kind) records = records.filter((r) => r.kind === state.kind);
  const key = JSON.stringify([path, state.kind, records]);
  if (options.quiet && key === state.listKey) return;
  state.listKey = key;
  state.records = records;
  const ids = new Set(records.map((r) => r.id));
  for (const id of [...state.selected]) if (!ids.has(id)) state.selected.delete(id);
  renderList(data);
}

function renderList(data) {
  state.total = data.total;
  const where = state.scope === "all" ? "全部作用域" : scopeInfo(state.scope).name;
  const kind = state.kind ? kindLabel(state.kind) : "";
  if (state.query) {
    $("list-title").textContent = `检索「${state.query}」`;
    $("list-note").textContent = state.records.length
      ? `在${where}中找到 ${state.records.length} 条${kind}记忆,按相关度排序(与 memory_search 相同的排序)`
      : `在${where}中没有找到相关${kind}记忆`;
  } else {
    $("list-title").textContent = `${where}的${kind}记忆`;
    const more = data.total > state.records.length ? `,显示最新 ${state.records.length} 条;用检索缩小范围` : "";
    $("list-note").textContent = state.records.length
      ? `共 ${data.total} 条,按最近更新排序${more}`
      : `这里还没有${kind}记忆`;
  }
  const focused = document.activeElement;
  const focusKey = focused && focused.dataset ? [focused.dataset.id, focused.dataset.role] : null;
  const list = $("memory-list");
  if (!state.records.length) {
    list.replaceChildren(el("li", { class: "empty", text: state.query ? "换个说法再试试" : "没有记忆" }));
  } else {
    list.replaceChildren(...state.records.map(renderCard));
  }
  if (focusKey && focusKey[0]) {
    const again = list.querySelector(`[data-id="${CSS.escape(focusKey[0])}"][data-role="${focusKey[1]}"]`);
    if (again) again.focus();
  }
  updateSelection();
}

function renderCard(r) {
  const short = snippet(r.content, 30);
  const checked = state.selected.has(r.id);
  const box = el("input", {
    type: "checkbox",
    checked,
    "data-id": r.id,
    "data-role": "select",
    "aria-label": `选择这条记忆:${short}`,
    onchange: (ev) => {
      if (ev.target.checked) state.selected.add(r.id);
      else state.selected.delete(r.id);
      ev.target.closest(".card").classList.toggle("selected", ev.target.checked);
      updateSelection();
    },
  });
  const meta = el("p", { class: "meta" });
  if (typeof r.score === "number") meta.append(el("span", { class: "score", text: `相关度 ${r.score.toFixed(4)}` }));
  meta.append(el("span", { class: `badge kind-${r.kind}`, title: r.kind, text: kindLabel(r.kind) }));
  meta.append(el("span", { class: "scope", title: r.scope, text: scopeInfo(r.scope).name }));
  if (r.tags && r.tags.length) meta.append(el("span", { class: "tag", text: r.tags.map((t) => `#${t}`).join(" ") }));
  if (typeof r.importance === "number") meta.append(el("span", { text: `重要度 ${r.importance.toFixed(2)}` }));
  meta.append(el("span", { text: `更新 ${fmtTime(r.updatedAt)}` }));
  meta.append(el("span", { text: `访问 ${r.accessCount || 0} 次` }));
  const who = sourceLabel(r.source);
  if (who) meta.append(el("span", { text: `来源 ${who}` }));
  if (r.truncated) meta.append(el("span", { text: `全文 ${r.contentChars} 字,点「查看/编辑」看全部` }));
  meta.append(el("code", { text: r.shortId }));
  return el(
    "li",
    { class: checked ? "card selected" : "card", "data-record": r.id },
    box,
    el("div", { class: "body" }, el("p", { class: "content", text: r.content }), meta),
    el(
      "div",
      { class: "actions" },
      el("button", {
        type: "button",
        class: "small",
        "data-id": r.id,
        "data-role": "open",
        "aria-label": `查看或编辑:${short}`,
        text: "查看/编辑",
        onclick: () => openDetail(r.id),
      }),
      el("button", {
        type: "button",
        class: "small danger",
        "data-id": r.id,
        "data-role": "forget",
        "aria-label": `删除:${short}`,
        text: "删除",
        onclick: () => askForget([r]),
      }),
    ),
  );
}

function updateSelection() {
  const n = state.selected.size;
  const btn = $("forget-selected");
  btn.disabled = n === 0;
  btn.textContent = n ? `删除所选(${n})` : "删除所选";
  const all = $("select-all");
  all.checked = n > 0 && n === state.records.length;
  all.indeterminate = n > 0 && n < state.records.length;
}

// -- detail and edit ----------------------------------------------------------------------------

async function openDetail(id) {
  const data = await api(`/api/memories/${encodeURIComponent(id)}`);
  if (!data.ok) {
    toast(data.message || "读取这条记忆失败", true);
    return;
  }
  const r = data.record;
  state.detail = r;
  clearErrors();
  $("detail-title").textContent = `记忆 ${r.shortId}`;
  $("edit-content").value = r.content;
  $("edit-kind").value = r.kind;
  $("edit-tags").value = (r.tags || []).join(", ");
  $("edit-importance").value = typeof r.importance === "number" ? String(r.importance) : "";
  const facts = [
    ["id", r.id],
    ["作用域", r.scope],
    ["创建", fmtTime(r.createdAt)],
    ["更新", fmtTime(r.updatedAt)],
    ["最近访问", fmtTime(r.lastAccessedAt)],
    ["访问次数", String(r.accessCount || 0)],
  ];
  const who = sourceLabel(r.source);
  if (who) facts.push(["来源", who]);
  if (r.supersedes) facts.push(["取代了", r.supersedes]);
  $("detail-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
  const dialog = $("detail-dialog");
  if (!dialog.open) dialog.showModal();
  $("edit-content").focus();
}

function clearErrors() {
  for (const name of ["content", "kind", "tags", "importance", "form"]) $(`err-${name}`).textContent = "";
  for (const node of document.querySelectorAll("#edit-form .invalid")) {
    node.classList.remove("invalid");
    node.removeAttribute("aria-invalid");
  }
}

function splitTags(text) {
  return text
    .split(/[,,、]/)
    .map((t) => t.trim())
    .filter(Boolean);
}

async function saveEdit(ev) {
  ev.preventDefault();
  const r = state.detail;
  if (!r) return;
  clearErrors();
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
      const field = FIELD_OF_CODE[data.code] || "form";
      $(`err-${field}`).textContent = `${data.code}:${data.message}`;
      if (field !== "form") {
        const input = $(`edit-${field}`);
        input.classList.add("invalid");
        input.setAttribute("aria-invalid", "true");
        input.focus();
      }
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

// -- forget -------------------------------------------------------------------------------------

function askForget(records) {
  if (!records.length) return;
  state.pendingForget = records;
  $("confirm-title").textContent = records.length === 1 ? "删除这条记忆?" : `删除 ${records.length} 条记忆?`;
  $("confirm-text").textContent =
    records.length === 1 ? "下面这条记忆将被删除:" : `下面 ${records.length} 条记忆将被删除:`;
  const shown = records.slice(0, 8).map((r) => el("li", { text: `${snippet(r.content, 80)}(${r.shortId})` }));
  if (records.length > 8) shown.push(el("li", { text: `…以及另外 ${records.length - 8} 条` }));
  $("confirm-items").replaceChildren(...shown);
  $("confirm-dialog").showModal();
  $("confirm-cancel").focus();
}

async function doForget() {
  const records = state.pendingForget;
  state.pendingForget = [];
  $("confirm-dialog").close();
  if (!records.length) return;
  const data = await api("/api/forget", { method: "POST", body: { ids: records.map((r) => r.id) } });
  if (!data.ok) {
    toast(`${data.code}:${data.message}`, true);
    return;
  }
  for (const r of records) state.selected.delete(r.id);
  if ($("detail-dialog").open) $("detail-dialog").close();
  toast(data.message);
  await refreshAll();
  $("memory-list").focus();
}

// -- import -------------------------------------------------------------------------------------

function openImport() {
  state.importText = null;
  $("import-file").value = "";
  $("import-preview").replaceChildren();
  $("import-error").textContent = "";
  $("import-apply").disabled = true;
  if (state.scope !== "all") $("import-scope").value = state.scope;
  $("import-dialog").showModal();
  $("import-file").focus();
}

async function readImportFile() {
  const file = $("import-file").files[0];
  if (!file) return null;
  const limit = (state.overview && state.overview.importMaxBytes) || 32 * 1024 * 1024;
  if (file.size > limit) {
    $("import-error").textContent = `文件太大(${fmtSize(file.size)}),一次最多导入 ${fmtSize(limit)}。`;
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
      if (!$("import-error").textContent) $("import-error").textContent = "请先选择要导入的文件。";
      return;
    }
    state.importText = picked.data;
    state.importName = picked.name;
  }
  if (state.importText === null) return;
  const body = { data: state.importText, scope: $("import-scope").value, dryRun };
  const data = await api("/api/import", { method: "POST", body });
  if (!data.ok) {
    $("import-error").textContent = `${data.code}:${data.message}`;
    $("import-apply").disabled = true;
    return;
  }
  renderImportResult(data);
  if (dryRun) {
    $("import-apply").disabled = data.added === 0;
    if (data.added > 0) $("import-apply").focus();
  } else {
    state.importText = null;
    $("import-apply").disabled = true;
    toast(data.message);
    await refreshAll();
  }
}

function renderImportResult(data) {
  const parts = [el("p", { class: "summary", text: data.message })];
  if (data.byScope && data.byScope.length) {
    parts.push(
      el(
        "ul",
        { "aria-label": "按作用域" },
        ...data.byScope.map((row) =>
          el("li", { text: `${row.scope}:${data.dryRun ? "将新增" : "新增"} ${row.added} 条,已存在 ${row.existing} 条` }),
        ),
      ),
    );
  }
  if (data.problems && data.problems.length) {
    parts.push(el("p", { text: `跳过的行(共 ${data.bad} 行):` }));
    parts.push(el("ul", { "aria-label": "跳过的行" }, ...data.problems.map((p) => el("li", { text: p }))));
  }
  if (data.refusals && data.refusals.length) {
    parts.push(el("p", { text: `被拒绝的记录(共 ${data.refused} 条,不会写入):` }));
    parts.push(el("ul", { "aria-label": "被拒绝的记录" }, ...data.refusals.map((r) => el("li", { text: r.text }))));
  }
  $("import-preview").replaceChildren(...parts);
}

// -- live updates -------------------------------------------------------------------------------

async function refreshAll() {
  await loadOverview();
  await loadList({ quiet: true });
}

async function poll() {
  try {
    const data = await api("/api/version");
    if (data.ok) {
      const status = $("live-status");
      status.classList.remove("stale");
      if (state.version !== null && data.version !== state.version) {
        state.version = data.version;
        await refreshAll();
      } else {
        state.version = data.version;
      }
      const now = new Date();
      status.textContent = `实时同步 · ${pad(now.getHours())}:${pad(now.getMinutes())}:${pad(now.getSeconds())}`;
    } else {
      $("live-status").textContent = "与服务的连接中断,正在重试…";
      $("live-status").classList.add("stale");
    }
  } catch (err) {
    if (err instanceof AuthError) return; // stop polling: the login view is shown
  }
  setTimeout(poll, POLL_MS);
}

// -- start --------------------------------------------------------------------------------------

function wire() {
  const kinds = Object.keys(KIND_LABELS);
  $("kind-filter").append(...kinds.map((k) => el("option", { value: k, text: `${KIND_LABELS[k]}(${k})` })));
  $("edit-kind").append(...kinds.map((k) => el("option", { value: k, text: `${KIND_LABELS[k]}(${k})` })));
  $("search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.query = $("q").value.trim();
    state.kind = $("kind-filter").value;
    state.selected.clear();
    loadList();
  });
  $("kind-filter").addEventListener("change", () => {
    state.kind = $("kind-filter").value;
    loadList();
  });
  $("clear-search").addEventListener("click", () => {
    $("q").value = "";
    state.query = "";
    state.selected.clear();
    loadList();
  });
  $("select-all").addEventListener("change", (ev) => {
    if (ev.target.checked) for (const r of state.records) state.selected.add(r.id);
    else state.selected.clear();
    renderList({ total: state.total });
  });
  $("forget-selected").addEventListener("click", () => {
    askForget(state.records.filter((r) => state.selected.has(r.id)));
  });
  $("edit-form").addEventListener("submit", saveEdit);
  $("detail-close").addEventListener("click", () => $("detail-dialog").close());
  $("detail-forget").addEventListener("click", () => {
    if (state.detail) askForget([state.detail]);
  });
  $("confirm-cancel").addEventListener("click", () => {
    state.pendingForget = [];
    $("confirm-dialog").close();
  });
  $("confirm-ok").addEventListener("click", doForget);
  $("import-open").addEventListener("click", openImport);
  $("import-file").addEventListener("change", () => {
    state.importText = null;
    $("import-apply").disabled = true;
    $("import-preview").replaceChildren();
  });
  $("import-scope").addEventListener("change", () => {
    $("import-apply").disabled = true;
    if (state.importText !== null) runImport(true);
  });
  $("import-dry").addEventListener("click", () => runImport(true));
  $("import-apply").addEventListener("click", () => runImport(false));
  $("import-close").addEventListener("click", () => $("import-dialog").close());
  document.addEventListener("keydown", (ev) => {
    const typing = ev.target instanceof HTMLInputElement || ev.target instanceof HTMLTextAreaElement;
    if (ev.key === "/" && !typing && !document.querySelector("dialog[open]")) {
      ev.preventDefault();
      $("q").focus();
    }
  });
  updateExportLink();
}

async function start() {
  wire();
  try {
    const session = await api("/api/session");
    if (!session.ok) {
      toast(session.message || "服务不可用", true);
      return;
    }
    $("app").hidden = false;
    state.version = session.version;
    await loadOverview();
    await loadList();
    $("live-status").textContent = "实时同步";
    setTimeout(poll, POLL_MS);
    document.documentElement.dataset.ready = "true";
  } catch (err) {
    if (!(err instanceof AuthError)) throw err;
    document.documentElement.dataset.ready = "login";
  }
}

document.addEventListener("DOMContentLoaded", start);
