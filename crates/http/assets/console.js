// The operators' console: each page a call of the admin API, signed in with the admin token kept
// in the browser. Loaded by /console after uPlot and the spending chart.
"use strict";
const $ = (id) => document.getElementById(id);
let token = localStorage.getItem("genjobs.adminToken") || "";
let nextUsers = null, nextJobs = null, shownUser = null, shownModel = null, usageRows = null;
let nextBatches = null, nextBatchItems = null, shownBatch = null;

function showError(message) {
  $("error").textContent = message;
  $("error").style.display = message ? "block" : "none";
}

/** A call of the admin API; an error answer throws an Error carrying the envelope's `param`. */
async function api(method, path, body, accept) {
  const headers = { Authorization: "Bearer " + token };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (accept) headers.Accept = accept;
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (accept && response.ok) return response.text();
  const text = await response.text();
  const answer = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = new Error(answer && answer.error ? answer.error.message : "HTTP " + response.status);
    error.param = answer && answer.error ? answer.error.param : null;
    throw error;
  }
  return answer;
}

function cells(row, values) {
  for (const value of values) {
    const cell = document.createElement("td");
    if (value instanceof Node) cell.append(value); else cell.textContent = value == null ? "" : value;
    if (typeof value === "number") cell.className = "num";
    row.append(cell);
  }
  return row;
}

const when = (stamp) => stamp ? stamp.replace("T", " ").replace(/(\.\d+)?Z$/, "") : "";
const formValues = (form) => Object.fromEntries([...new FormData(form)].filter(([, v]) => v !== ""));
const integers = (values, names) => { for (const n of names) if (n in values) values[n] = Number(values[n]); return values; };

/* Users and keys */

// A list's first load and a search submitted at once race, and the older answer may come last:
// only the latest load of a list draws.
const listLoads = {};
function startListLoad(list) {
  const turn = (listLoads[list] || 0) + 1;
  listLoads[list] = turn;
  return () => listLoads[list] === turn;
}

async function loadUsers(before) {
  const query = new URLSearchParams({ limit: "50" });
  const q = $("user-query").value.trim();
  if (q) query.set("q", q);
  if (before) query.set("before", before);
  const latest = startListLoad("users");
  const page = await api("GET", "/api/admin/users?" + query);
  if (!latest()) return;
  if (!before) $("users").replaceChildren();
  for (const user of page.data) {
    const row = cells(document.createElement("tr"), [user.name, user.id, user.credits_available, user.price_percent, when(user.created_at)]);
    row.className = "pick";
    row.dataset.id = user.id;
    row.addEventListener("click", () => { location.hash = "#user/" + user.id; });
    $("users").append(row);
  }
  nextUsers = page.next;
  $("users-older").hidden = !nextUsers;
}

async function showUser(id) {
  const user = await api("GET", "/api/admin/users/" + encodeURIComponent(id));
  shownUser = user;
  $("user-name").textContent = user.name + " (" + user.id + ")";
  $("user-available").textContent = user.credits_available;
  $("user-held").textContent = user.credits_held;
  $("user-spent").textContent = user.credits_spent;
  $("user-active").textContent = user.active_jobs;
  const limits = $("user-limits");
  limits.rate_limit_per_minute.value = user.rate_limit_per_minute;
  limits.max_concurrent_jobs.value = user.max_concurrent_jobs;
  limits.price_percent.value = user.price_percent == null ? 100 : user.price_percent;
  await loadKeys(id);
}

async function loadKeys(id) {
  const keys = await api("GET", "/api/admin/users/" + encodeURIComponent(id) + "/keys");
  $("keys").replaceChildren();
  for (const key of keys.data) {
    const budget = key.budget ? `${key.budget.used} / ${key.budget.credits} per ${key.budget.period}` : "none";
    let action = "revoked " + when(key.revoked_at);
    if (!key.revoked_at) {
      action = document.createElement("button");
      action.className = "danger";
      action.textContent = "Revoke";
      action.addEventListener("click", () => revokeKey(key.prefix));
    }
    const row = cells(document.createElement("tr"), [key.prefix, key.name, key.models ? key.models.join(", ") : "all",
      budget, when(key.expires_at) || "never", when(key.last_used_at) || "never", action]);
    row.dataset.prefix = key.prefix;
    $("keys").append(row);
  }
}

async function revokeKey(prefix) {
  await api("DELETE", "/api/admin/keys/" + encodeURIComponent(prefix));
  await loadKeys(shownUser.id);
}

$("user-search").addEventListener("submit", (event) => { event.preventDefault(); run(() => loadUsers(null)); });
$("users-older").addEventListener("click", () => run(() => loadUsers(nextUsers)));
$("create-user").addEventListener("submit", (event) => {
  event.preventDefault();
  run(async () => {
    const body = integers(formValues(event.target), ["credits", "rate_limit_per_minute", "max_concurrent_jobs", "price_percent"]);
    const user = await api("POST", "/api/admin/users", body);
    $("new-key").hidden = false;
    $("new-key").textContent = `Created ${user.name} (${user.id}). Its key, shown only now: ${user.api_key}`;
    $("new-key").dataset.userId = user.id;
    event.target.reset();
    await loadUsers(null);
  });
});
$("grant").addEventListener("submit", (event) => {
  event.preventDefault();
  run(async () => {
    await api("POST", `/api/admin/users/${shownUser.id}/credits`, { amount: Number(event.target.amount.value) });
    event.target.reset();
    await showUser(shownUser.id);
  });
});
$("user-limits").addEventListener("submit", (event) => {
  event.preventDefault();
  run(async () => {
    const body = integers(formValues(event.target), ["rate_limit_per_minute", "max_concurrent_jobs", "price_percent"]);
    await api("PATCH", `/api/admin/users/${shownUser.id}`, body);
    await showUser(shownUser.id);
  });
});
$("issue-key").addEventListener("submit", (event) => {
  event.preventDefault();
  run(async () => {
    const form = event.target, body = {};
    if (form.name.value) body.name = form.name.value;
    const models = form.models.value.split(",").map((m) => m.trim()).filter(Boolean);
    if (models.length) body.models = models;
    if (form.budget_credits.value !== "") body.budget = { credits: Number(form.budget_credits.value), period: form.budget_period.value };
    if (form.expires_at.value) body.expires_at = new Date(form.expires_at.value + "Z").toISOString();
    const key = await api("POST", `/api/admin/users/${shownUser.id}/keys`, body);
    $("issued-key").hidden = false;
    $("issued-key").textContent = "New key, shown only now: " + key.api_key;
    form.reset();
    await loadKeys(shownUser.id);
  });
});

/* The catalog */

async function loadModels() {
  const models = await api("GET", "/api/admin/models");
  $("models").replaceChildren();
  for (const model of models.data) {
    const price = `${model.price.credits} per ${model.price.per}` + (model.price.by_resolution ? " (by resolution)" : "");
    const row = cells(document.createElement("tr"), [model.id, model.modality, price,
      model.routes.map((r) => r.provider).join(" → "), model.enabled ? "yes" : "no"]);
    row.className = "pick";
    row.dataset.id = model.id;
    row.addEventListener("click", () => { location.hash = "#model/" + model.id; });
    $("models").append(row);
  }
}

async function showModel(id) {
  let document_ = { modality: "image", display_name: "", upstream: "", description: "", price: { per: "image", credits: 1 }, routes: [], fields: [], enabled: true };
  if (id) {
    const models = await api("GET", "/api/admin/models");
    const found = models.data.find((m) => m.id === id);
    if (!found) throw new Error("No model " + id);
    document_ = Object.fromEntries(Object.entries(found).filter(([name]) => name !== "id"));
  }
  shownModel = document_;
  $("model-id").value = id || "";
  $("model-id").disabled = Boolean(id);
  $("model-saved").textContent = "";
  drawModel();
}

/** The path of a value as the API's `param` names it: `routes[0].endpoint`. */
const pathOf = (parent, key) => typeof key === "number" ? `${parent}[${key}]` : (parent ? `${parent}.${key}` : key);

function drawModel() {
  $("model-json").value = JSON.stringify(shownModel, null, 2);
  $("model-json-error").textContent = "";
  $("model-fields").replaceChildren();
  const walk = (value, path, set) => {
    if (value !== null && typeof value === "object") {
      for (const [key, inner] of Object.entries(value)) {
        const index = Array.isArray(value) ? Number(key) : key;
        walk(inner, pathOf(path, index), (next) => { value[index] = next; });
      }
      return;
    }
    const line = document.createElement("div");
    line.className = "field";
    const name = document.createElement("span");
    name.textContent = path;
    const input = document.createElement("input");
    input.dataset.path = path;
    input.value = value === null ? "" : String(value);
    input.addEventListener("input", () => {
      const text = input.value;
      set(typeof value === "number" ? Number(text) : typeof value === "boolean" ? text === "true" : text);
      $("model-json").value = JSON.stringify(shownModel, null, 2);
      $("model-saved").textContent = "";
      preview();
    });
    line.append(name, input);
    $("model-fields").append(line);
  };
  walk(shownModel, "", null);
  preview();
}

/** The field a `param` names, or the closest of its parents that has a field of its own. */
function fieldFor(param) {
  const inputs = [...document.querySelectorAll("#model-fields input")];
  let best = null;
  for (const input of inputs) {
    const path = input.dataset.path;
    if (path === param) return input;
    if (!best && (path.startsWith(param + ".") || path.startsWith(param + "["))) best = input;
  }
  return best;
}

function clearFieldErrors() {
  for (const old of document.querySelectorAll("#model-fields .field-error")) old.remove();
  for (const old of document.querySelectorAll("#model-fields .invalid")) old.classList.remove("invalid");
}

async function saveModel() {
  clearFieldErrors();
  const id = $("model-id").value.trim();
  try {
    shownModel = JSON.parse($("model-json").value);
  } catch (error) {
    $("model-json-error").textContent = "Not JSON: " + error.message;
    return;
  }
  try {
    await api("PUT", "/api/admin/models/" + encodeURIComponent(id), shownModel);
  } catch (error) {
    drawModel();
    const input = error.param ? fieldFor(error.param) : null;
    const message = document.createElement("div");
    message.className = "field-error";
    message.dataset.param = error.param || "";
    message.textContent = error.message;
    if (input) {
      input.classList.add("invalid");
      input.parentElement.append(message);
      input.scrollIntoView({ block: "center" });
    } else {
      $("model-json-error").textContent = error.message;
    }
    return;
  }
  drawModel();
  $("model-saved").textContent = "Saved.";
  $("model-id").disabled = true;
  history.replaceState(null, "", "#model/" + id);
}

/** What a request of the form would hold at the catalog price, by the document being edited. */
function preview() {
  const price = shownModel.price || {};
  const form = $("preview");
  const perResolution = price.by_resolution || {};
  const rate = form.resolution.value in perResolution ? perResolution[form.resolution.value] : price.credits;
  const units = price.per === "second" ? Number(form.duration.value || 0) : Number(form.n.value || 1);
  const credits = Number.isFinite(rate * units) ? rate * units : "";
  $("preview-credits").dataset.credits = String(credits);
  $("preview-credits").textContent = credits === "" ? "" : `This request would hold ${credits} credits (catalog price, before a user's tier).`;
}

$("new-model").addEventListener("click", () => { location.hash = "#model/"; });
$("save-model").addEventListener("click", () => run(saveModel));
$("model-json").addEventListener("change", () => {
  try { shownModel = JSON.parse($("model-json").value); drawModel(); }
  catch (error) { $("model-json-error").textContent = "Not JSON: " + error.message; }
});
$("preview").addEventListener("input", preview);

/* Usage */

const isoDay = (date) => date.toISOString().slice(0, 10);

function usageQuery(groupBy) {
  const form = $("usage-range");
  return new URLSearchParams({ from: form.from.value, to: form.to.value, group_by: groupBy });
}

async function loadUsage() {
  const form = $("usage-range");
  if (!form.to.value) form.to.value = isoDay(new Date());
  if (!form.from.value) form.from.value = isoDay(new Date(Date.now() - 29 * 86400 * 1000));
  const groupings = ["day,model", "model", "provider", "provider_key", "user", "key"];
  const reports = await Promise.all(groupings.map((g) => api("GET", "/api/admin/usage?" + usageQuery(g)).catch(() => null)));
  usageRows = Object.fromEntries(groupings.map((g, i) => [g, reports[i] ? reports[i].data : null]));
  drawUsageChart(usageRows["day,model"] || []);
  const names = await userNames((usageRows.user || []).map((row) => row.user_id));
  $("usage-tables").replaceChildren();
  for (const group of ["model", "provider", "provider_key", "user", "key"]) {
    if (!usageRows[group]) continue;
    const label = group === "user" ? (row) => userLabel(row.user_id, names[row.user_id]) : (row) => row[group];
    const heading = document.createElement("h3");
    heading.textContent = "By " + group.replace("_", " ");
    const table = document.createElement("table");
    table.id = "usage-by-" + group;
    table.innerHTML = `<thead><tr><th>${group}</th><th class="num">Jobs</th><th class="num">Succeeded</th><th class="num">Failed</th><th class="num">Canceled</th><th class="num">Credits spent</th><th class="num">Provider cost ($)</th><th class="num">Margin ($)</th></tr></thead>`;
    const body = document.createElement("tbody");
    for (const row of usageRows[group]) {
      const cost = row.provider_cost_usd ?? "", margin = row.margin_usd ?? "";
      const tr = cells(document.createElement("tr"), [label(row), row.jobs, row.succeeded, row.failed, row.canceled, row.credits_spent, cost, margin]);
      for (const money of [...tr.children].slice(-2)) money.className = "num";
      if (margin.startsWith("-")) tr.lastChild.classList.add("loss");
      body.append(tr);
    }
    table.append(body);
    $("usage-tables").append(heading, table);
  }
}

/** Each user's name by id; a user that cannot be read (deleted, or the call failed) has none. */
async function userNames(ids) {
  const users = await Promise.all(ids.map((id) => api("GET", "/api/admin/users/" + encodeURIComponent(id)).catch(() => null)));
  return Object.fromEntries(ids.map((id, i) => [id, users[i] ? users[i].name : null]));
}

/** A user as a report shows it: the name, and the id in small print for telling two names apart. */
function userLabel(id, name) {
  const label = document.createElement("span");
  label.textContent = name || id;
  if (name) {
    const small = document.createElement("small");
    small.className = "muted";
    small.textContent = " " + id;
    label.append(small);
  }
  return label;
}

function drawUsageChart(rows) {
  const form = $("usage-range");
  drawSpendingChart($("usage-chart"), $("usage-chart-empty"), "No jobs in these days.", rows, form.from.value, form.to.value, 1180);
}

async function downloadCsv() {
  const csv = await api("GET", "/api/admin/usage?" + usageQuery("day,model"), undefined, "text/csv");
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([csv], { type: "text/csv" }));
  link.download = `genjobs-usage-${$("usage-range").from.value}-${$("usage-range").to.value}.csv`;
  link.id = "usage-csv-link";
  link.dataset.csv = csv;
  document.body.append(link);
  link.click();
  link.remove();
  $("usage-csv").dataset.downloaded = csv;
}

$("usage-range").addEventListener("submit", (event) => { event.preventDefault(); run(loadUsage); });
$("usage-csv").addEventListener("click", () => run(downloadCsv));

/* Jobs */

async function loadJobs(before) {
  const filters = new URLSearchParams({ ...formValues($("job-filters")), limit: "50" });
  const query = new URLSearchParams(filters);
  if (before) query.set("before", before);
  const latest = startListLoad("jobs");
  const page = await api("GET", "/api/admin/jobs?" + query);
  if (!latest()) return;
  if (!before) $("jobs").replaceChildren();
  $("jobs").dataset.filters = filters.toString();
  for (const job of page.data) {
    const row = cells(document.createElement("tr"), [when(job.created_at), job.id, job.user_id, job.model, job.state,
      job.credits_held, job.credits_actual]);
    row.className = "pick";
    row.dataset.id = job.id;
    row.addEventListener("click", () => { location.hash = "#job/" + job.id; });
    $("jobs").append(row);
  }
  nextJobs = page.next;
  $("jobs-older").hidden = !nextJobs;
}

async function showJob(id) {
  const job = await api("GET", "/api/admin/jobs/" + encodeURIComponent(id));
  $("job-id").textContent = job.id;
  $("job-state").textContent = job.state;
  $("job-upstream").textContent = job.upstream_request_id || "not sent";
  $("job-key").textContent = job.key_prefix || "–";
  $("job-user").textContent = job.user_id;
  $("job-moderation").textContent = job.moderation || "not checked";
  $("job-request").textContent = JSON.stringify(job.request, null, 2);
  $("cancel-job").hidden = ["succeeded", "failed", "canceled"].includes(job.state);
  $("cancel-job").dataset.id = job.id;
  $("job-ledger").replaceChildren();
  for (const entry of job.ledger) $("job-ledger").append(cells(document.createElement("tr"), [when(entry.created_at), entry.kind, entry.credits]));
  $("job-webhooks").replaceChildren();
  for (const delivery of job.webhooks) {
    for (const attempt of delivery.attempts) {
      $("job-webhooks").append(cells(document.createElement("tr"), [delivery.type, delivery.url, when(attempt.at), attempt.status, attempt.error]));
    }
  }
}

$("job-filters").addEventListener("submit", (event) => { event.preventDefault(); run(() => loadJobs(null)); });
$("jobs-older").addEventListener("click", () => run(() => loadJobs(nextJobs)));
$("cancel-job").addEventListener("click", () => run(async () => {
  await api("POST", `/api/admin/jobs/${$("cancel-job").dataset.id}/cancel`);
  await showJob($("cancel-job").dataset.id);
}));

/* Batches */

async function loadBatches(before) {
  const filters = new URLSearchParams({ ...formValues($("batch-filters")), limit: "50" });
  const query = new URLSearchParams(filters);
  if (before) query.set("before", before);
  const latest = startListLoad("batches");
  const page = await api("GET", "/api/admin/batches?" + query);
  if (!latest()) return;
  if (!before) $("batches").replaceChildren();
  $("batches").dataset.filters = filters.toString();
  for (const batch of page.data) {
    const counts = batch.counts;
    const row = cells(document.createElement("tr"), [when(batch.created_at), batch.id, batch.user_id, batch.state,
      counts.total, counts.queued, counts.running, counts.succeeded, counts.failed, counts.canceled,
      batch.credits_held, batch.credits_spent, when(batch.expires_at)]);
    row.className = "pick";
    row.dataset.id = batch.id;
    row.addEventListener("click", () => { location.hash = "#batch/" + batch.id; });
    $("batches").append(row);
  }
  nextBatches = page.next;
  $("batches-older").hidden = !nextBatches;
}

async function showBatch(id) {
  const batch = await api("GET", "/api/admin/batches/" + encodeURIComponent(id));
  shownBatch = batch.id;
  const counts = batch.counts;
  $("batch-id").textContent = batch.id;
  $("batch-state").textContent = batch.state;
  $("batch-user").textContent = batch.user_id;
  $("batch-counts").textContent = `${counts.total}: ${counts.queued} queued, ${counts.running} running, ` +
    `${counts.succeeded} succeeded, ${counts.failed} failed, ${counts.canceled} canceled`;
  $("batch-counts").dataset.counts = JSON.stringify(counts);
  $("batch-credits").textContent = `${batch.credits_held} / ${batch.credits_spent}`;
  $("batch-window").textContent = `${when(batch.created_at)} / ${when(batch.expires_at)}`;
  await loadBatchItems(null);
}

/** A page of the shown batch's items, in its order; each opens its job. */
async function loadBatchItems(after) {
  const query = new URLSearchParams({ ...formValues($("batch-item-filter")), limit: "100" });
  if (after) query.set("after", after);
  const latest = startListLoad("batch-items");
  const page = await api("GET", `/api/admin/batches/${encodeURIComponent(shownBatch)}/items?` + query);
  if (!latest()) return;
  if (!after) $("batch-items").replaceChildren();
  for (const item of page.data) {
    const job = item.job;
    const row = cells(document.createElement("tr"), [item.custom_id, job.id, job.state, job.credits_held,
      job.credits_actual, job.error ? job.error.code : ""]);
    row.className = "pick";
    row.dataset.id = job.id;
    row.dataset.customId = item.custom_id;
    row.addEventListener("click", () => { location.hash = "#job/" + job.id; });
    $("batch-items").append(row);
  }
  nextBatchItems = page.next;
  $("batch-items-more").hidden = !nextBatchItems;
}

$("batch-filters").addEventListener("submit", (event) => { event.preventDefault(); run(() => loadBatches(null)); });
$("batches-older").addEventListener("click", () => run(() => loadBatches(nextBatches)));
$("batch-item-filter").addEventListener("submit", (event) => { event.preventDefault(); run(() => loadBatchItems(null)); });
$("batch-items-more").addEventListener("click", () => run(() => loadBatchItems(nextBatchItems)));

/* Providers */

/** `genjobs_upstream_cooling_down{provider="fal"} 1` lines of /metrics, by provider. */
function breakers(metrics) {
  const open = {};
  for (const line of metrics.split("\n")) {
    const match = line.match(/^genjobs_upstream_cooling_down\{[^}]*provider="([^"]+)"[^}]*\}\s+(\S+)/);
    if (match) open[match[1]] = Number(match[2]) > 0;
  }
  return open;
}

async function loadProviders() {
  const [providers, metrics] = await Promise.all([api("GET", "/api/admin/providers"), api("GET", "/metrics", undefined, "text/plain")]);
  const cooling = breakers(metrics);
  $("providers").replaceChildren();
  for (const provider of providers.data) {
    const breaker = cooling[provider.provider] ? "open (cooling down)" : "closed";
    const waiting = `${provider.waiting.normal} / ${provider.waiting.low}`;
    // No keys listed: the provider is called with one key or none (as the built-in simulator
    // is) and no cap, so its jobs take no slot and none are counted.
    const rows = provider.keys.length
      ? provider.keys.map((key, i) => [i ? "" : provider.provider, i ? "" : breaker, "…" + key.key_hint,
        key.in_flight, key.max_in_flight || "no cap", i ? "" : waiting])
      : [[provider.provider, breaker, "one key or none (e.g. the built-in simulator)", "not counted", "no cap", waiting]];
    for (const values of rows) {
      const row = cells(document.createElement("tr"), values);
      row.dataset.provider = provider.provider;
      $("providers").append(row);
    }
  }
}

/* Pages */

async function run(action) {
  showError("");
  try { await action(); } catch (error) { showError(error.message); }
}

function route() {
  const [page, id] = (location.hash.slice(1) || "users").split("/");
  const section = { user: "user", model: "model", job: "job", batch: "batch" }[page] || page;
  for (const element of document.querySelectorAll("main > section")) element.hidden = element.id !== "page-" + section;
  const tab = { user: "users", model: "catalog", job: "jobs", batch: "batches" }[page] || page;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("current", link.dataset.page === tab);
  if (!token) { showError("Sign in with the admin token."); return; }
  const load = { users: () => loadUsers(null), user: () => showUser(id), catalog: loadModels, model: () => showModel(id),
    usage: loadUsage, jobs: () => loadJobs(null), job: () => showJob(id), batches: () => loadBatches(null),
    batch: () => showBatch(id), providers: loadProviders }[page];
  if (load) run(load);
}

$("admin-token").value = token;
$("save-token").addEventListener("click", () => {
  token = $("admin-token").value.trim();
  localStorage.setItem("genjobs.adminToken", token);
  route();
});
window.addEventListener("hashchange", route);
route();
