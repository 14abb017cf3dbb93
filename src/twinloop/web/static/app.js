// twinloop dashboard: every page is filled from the JSON API under /api (no other data source).
// Charts are specs drawn by the shared renderer (/vendor/twinloop-charts.js over Apache ECharts), the same one
// the HTML reports inline; values from the store are always escaped before they reach the page.
"use strict";

const TOKEN_KEY = "twinloop.token";
const PAGE = document.body.dataset.page;
const main = document.getElementById("main");
const COLORS = twinloopCharts.PALETTE;

// ------------------------------------------------------------------------------------------- token and API
(function takeTokenFromUrl() {
  const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
})();

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  if (token()) h.Authorization = "Bearer " + token();
  return h;
}

class ApiError extends Error {
  constructor(status, detail) { super(status + ": " + detail); this.status = status; this.detail = detail; }
}

async function api(path, opts) {
  const o = Object.assign({}, opts || {});
  o.headers = authHeaders(o.headers);
  const r = await fetch(path, o);
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) {
    let detail = body && body.detail !== undefined ? body.detail : r.statusText;
    if (Array.isArray(detail)) detail = detail.map((d) => (d && d.msg) || JSON.stringify(d)).join("; ");
    else if (typeof detail !== "string") detail = JSON.stringify(detail);
    throw new ApiError(r.status, detail);
  }
  return body;
}

function notice(text, kind, fromAuth) {
  const el = document.getElementById("notice");
  el.textContent = text;
  el.dataset.auth = fromAuth ? "1" : "";
  el.className = "notice" + (kind ? " " + kind : "");
  el.hidden = !text;
}

function showError(e) {
  if (e instanceof ApiError && (e.status === 401 || e.status === 403)) {
    notice("The API needs a valid token (" + e.status + ": " + e.detail + "). Enter it at the top right.", "error", true);
  } else {
    notice(String(e.message || e), "error");
  }
}

document.getElementById("tokenform").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const v = document.getElementById("token").value.trim();
  if (v) sessionStorage.setItem(TOKEN_KEY, v); else sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("token").value = "";
  notice(v ? "Token set for this tab." : "Token cleared.", "ok");
  refresh();
});

// ------------------------------------------------------------------------------------------- formatting
function esc(s) {
  return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
const isNum = (v) => typeof v === "number" && isFinite(v);
function fmtW(w) {
  if (!isNum(w)) return "—";
  const a = Math.abs(w);
  if (a >= 1e6) return (w / 1e6).toFixed(2) + " MW";
  if (a >= 1e3) return (w / 1e3).toFixed(1) + " kW";
  return w.toFixed(0) + " W";
}
const fmtC = (c) => (isNum(c) ? c.toFixed(1) + " °C" : "—");
const fmtN = (x, d) => (isNum(x) ? x.toLocaleString(undefined, { maximumFractionDigits: d === undefined ? 1 : d }) : "—");
const fmtPct = (x) => (isNum(x) ? (100 * x).toFixed(1) + " %" : "—");
function fmtS(s) {
  if (!isNum(s)) return "—";
  if (s < 1) return (s * 1e3).toFixed(1) + " ms";
  if (s < 120) return s.toFixed(2) + " s";
  return (s / 60).toFixed(1) + " min";
}
// One time convention everywhere (charts included): epoch seconds as UTC, simulation seconds as h:mm:ss.
function fmtTs(ts) {
  if (!isNum(ts)) return "—";
  if (ts < 1e9) return "sim " + twinloopCharts.timeLabel(ts, 1, false);
  return new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}
function fmtBytes(b) { return isNum(b) ? (b / 1e9).toFixed(1) + " GB" : "—"; }
const sevPill = (s) => '<span class="pill sev-' + esc(s) + '">' + esc(s) + "</span>";
const reasonTags = (list) => (list || []).filter((r) => r !== "gpu_idle").map((r) => '<span class="reason">' + esc(r) + "</span>").join("") || '<span class="muted">—</span>';
const link = (href, text) => '<a href="' + esc(href) + '">' + esc(text) + "</a>";
// An incident root links to where it lives: a GPU (5 parts) to its page, a rack or node to the rack's page, a
// job to the jobs page.
function entityLink(id) {
  const parts = String(id || "").split("/");
  if (parts[1] === "jobs") return '<a class="job-link" href="/jobs?job=' + encodeURIComponent(id) + '">' + esc(id) + "</a>";
  if (parts.length === 5) return '<a class="gpu-link" href="/gpu?id=' + encodeURIComponent(id) + '">' + esc(id) + "</a>";
  if (parts.length === 3 || parts.length === 4) return '<a href="/rack?id=' + encodeURIComponent(parts.slice(0, 3).join("/")) + '">' + esc(id) + "</a>";
  return esc(id);
}
const card = (label, value, sub, id, raw) =>
  '<div class="card"><div class="label">' + esc(label) + '</div><div class="value"' + (id ? ' id="' + id + '"' : "") +
  (raw !== undefined && raw !== null ? ' data-value="' + esc(raw) + '"' : "") + ">" + esc(value) + "</div>" +
  (sub ? '<div class="sub">' + esc(sub) + "</div>" : "") + "</div>";

// ------------------------------------------------------------------------------------------- charts
// A chart is a <div data-chart="spec"> filled by twinloopCharts after the page's HTML is in place (drawChart).
const chartDiv = (spec, cls) => '<div class="' + (cls || "chart") + '" data-chart="' + esc(JSON.stringify(spec)) + '"></div>';
// opts: {title, x, series: [{name, values, color, dash}], unit, marks: [{x, label}], bands: [{x0, x1, color, label}], rules, time}
function lineChart(o) {
  return chartDiv({ kind: "line", title: o.title, height: o.height, x: o.time === false ? { unit: o.xunit || "" } : { time: true },
    y: { unit: o.unit || "", categories: o.categories, zero: o.zero }, marks: o.marks || [], bands: o.bands || [], rules: o.rules || [],
    series: o.series.map((s) => ({ name: s.name, x: o.x, y: s.values, color: s.color, dash: s.dash, dots: o.dots, step: o.step })) });
}
const sparkline = (ts, vals, color) => chartDiv({ kind: "spark", x: ts, y: vals, color }, "spark");
const stackedBar = (parts, unit, title) => chartDiv({ kind: "bar", title, parts, unit });
function drawCharts(scope) { twinloopCharts.renderAll(scope || main); }
function setMain(h) { twinloopCharts.disposeIn(main); main.innerHTML = h; drawCharts(main); }
function setHtml(el, h) { twinloopCharts.disposeIn(el); el.innerHTML = h; drawCharts(el); }

const PHASE_NAMES = ["queued", "ramp_up", "launch", "sustained", "checkpoint", "hung", "cooldown", "done"];
const PHASE_COLORS = { queued: "#cbd5e1", ramp_up: "#93c5fd", launch: "#a78bfa", sustained: "#22c55e",
  checkpoint: "#f59e0b", hung: "#ef4444", cooldown: "#67e8f9", done: "#64748b" };

// ------------------------------------------------------------------------------------------- pages
const params = new URLSearchParams(location.search);

async function pageOverview() {
  const o = await api("/api/overview");
  const p = o.power;
  let h = "<h1>" + esc(o.site || "No telemetry yet") + ' <span class="muted">' + esc(fmtTs(o.ts)) + "</span></h1>";
  h += '<div class="cards">' +
    card("Facility power", fmtW(p.facility_power_w), "IT + cooling + losses", "facility-power", p.facility_power_w) +
    card("IT power", fmtW(p.it_power_w), "", "it-power", p.it_power_w) +
    card("Cooling", fmtW(p.cooling_power_w), "", "cooling-power", p.cooling_power_w) +
    card("Losses", fmtW(p.losses_w), "power conversion", "losses", p.losses_w) +
    card("PUE", isNum(p.pue) ? p.pue.toFixed(3) : "—", "", "pue", p.pue) +
    card("Ambient", fmtC(p.ambient_temp_c), "", "ambient", p.ambient_temp_c) +
    card("Throttling now", o.throttling.gpus_throttled + " / " + o.throttling.gpus_reporting, "GPUs with a throttle reason", "throttled", o.throttling.gpus_throttled) +
    card("Open incidents", String(o.open_incident_count), o.pending_actions + " action(s) pending", "open-incidents", o.open_incident_count) +
    "</div>";
  h += '<div class="panel"><div class="muted">' + fmtN(o.counts.gpus, 0) + " GPUs · " + fmtN(o.counts.nodes, 0) + " nodes · " +
    fmtN(o.counts.racks, 0) + " racks · " + fmtN(o.counts.rows, 0) + " rows · " + fmtN(o.counts.jobs, 0) + " jobs</div>" +
    (Object.keys(o.throttling.by_reason).length ? "<div>Throttle reasons: " + Object.entries(o.throttling.by_reason).map(([k, v]) =>
      '<span class="reason">' + esc(k) + " × " + v + "</span>").join(" ") + "</div>" : "") + "</div>";
  h += '<div class="grid2"><div class="panel" id="power-chart"><p class="muted">Loading…</p></div><div class="panel" id="pue-chart"></div></div>';
  h += '<h2>Hottest racks</h2><div class="tw"><table id="hottest"><tr><th>rack</th><th class=num>max GPU °C</th><th class=num>to slowdown</th><th class=num>mean GPU °C</th><th class=num>power</th><th class=num>throttled GPUs</th></tr>' +
    o.hottest_racks.map((r) => "<tr><td>" + link("/rack?id=" + encodeURIComponent(r.rack), r.rack) + '</td><td class=num>' + fmtC(r.max_gpu_temp_c) +
      "</td><td class=num>" + (isNum(r.temp_headroom_c) ? r.temp_headroom_c.toFixed(1) + " °C" : "—") +
      "</td><td class=num>" + fmtC(r.mean_gpu_temp_c) + "</td><td class=num>" + fmtW(r.power_w) + "</td><td class=num>" + r.throttled_gpus + "</td></tr>").join("") +
    "</table></div>";
  h += "<h2>Open incidents</h2>" + (o.open_incidents.length ? '<div class="tw"><table><tr><th>severity</th><th>class</th><th>root</th><th>run</th><th>since</th></tr>' +
    o.open_incidents.map((i) => "<tr><td>" + sevPill(i.severity) + "</td><td>" + esc(i.event_class) + "</td><td>" + entityLink(i.root) + "</td><td>" +
      esc(i.run) + "</td><td>" + fmtTs(i.start_ts) + "</td></tr>").join("") + "</table></div>" : '<p class="muted">None.</p>');
  setMain(h);
  if (o.site && o.counts.sites === 1) {
    const [f, it, pue] = await Promise.all([
      api("/api/series?points=240&entity=" + encodeURIComponent(o.site) + "&field=TWINLOOP_FI_FACILITY_POWER").catch(() => null),
      api("/api/series?points=240&entity=" + encodeURIComponent(o.site) + "&field=TWINLOOP_FI_IT_POWER").catch(() => null),
      api("/api/series?points=240&entity=" + encodeURIComponent(o.site) + "&field=TWINLOOP_FI_PUE").catch(() => null),
    ]);
    if (f) {
      const series = [{ name: "facility", values: f.mean }];
      if (it && it.ts.length === f.ts.length) series.push({ name: "IT", values: it.mean });
      setHtml(document.getElementById("power-chart"), lineChart({ title: "Site power", x: f.ts, series, unit: "W" }));
    } else document.getElementById("power-chart").innerHTML = '<p class="muted">No site power series.</p>';
    if (pue) setHtml(document.getElementById("pue-chart"), lineChart({ title: "PUE", x: pue.ts, series: [{ name: "PUE", values: pue.mean, color: COLORS[2] }] }));
  } else {
    document.getElementById("power-chart").innerHTML = '<p class="muted">No site series.</p>';
  }
}

// Rack tiles are coloured by fixed levels with a meaning (the API's temp_levels / power_levels): headroom of the
// rack's hottest GPU to its own slowdown temperature, or the rack's GPU power as a fraction of their limits.
async function pageFloor() {
  const metric = params.get("metric") === "power" ? "power" : "temp";
  const f = await api("/api/floor");
  const levels = metric === "power" ? f.power_levels : f.temp_levels;
  const levelOf = (r) => levels[metric === "power" ? r.power_level : r.temp_level] || { color: "#e5e7eb", ink: "#111827", label: "no data" };
  const detail = (r) => metric === "power"
    ? fmtW(r.power_w) + (isNum(r.power_fraction) ? " · " + (100 * r.power_fraction).toFixed(0) + "%" : "")
    : fmtC(r.max_gpu_temp_c) + (isNum(r.temp_headroom_c) ? " · " + (r.temp_headroom_c >= 0 ? "−" : "+") + Math.abs(r.temp_headroom_c).toFixed(0) : "");
  let h = "<h1>Floor <span class=muted>" + esc(fmtTs(f.ts)) + "</span></h1>";
  h += '<div class="tabs">Colour by: <button data-metric="temp" class="' + (metric === "temp" ? "active" : "") + '">headroom to slowdown temperature</button> ' +
    '<button data-metric="power" class="' + (metric === "power" ? "active" : "") + '">power vs limit</button></div>';
  h += '<div class="legend" id="floor-legend">' + levels.map((l) => '<span class="level" data-fill="' + esc(l.color) + '" data-ink="' + esc(l.ink) + '">' + esc(l.label) + "</span>").join("") + "</div>";
  h += '<p class="muted small">' + (metric === "power"
    ? "Tile: rack power · its GPUs' power as a share of their enforced power limits."
    : "Tile: hottest GPU °C · how far it is below (−) or above (+) its own slowdown temperature (GPU catalog)" +
      (f.slowdown_assumed_gpus ? "; " + f.slowdown_assumed_gpus + " GPU(s) of unknown model judged against " + fmtC(f.slowdown_default_c) : "") + ".") + "</p>";
  h += '<div class="panel" id="floor">';
  for (const row of f.rows) {
    h += '<div class="floor-row"><span class="rowname">' + esc(row.row) + '</span><div class="racks">';
    for (const r of row.racks) {
      const name = r.rack.split("/").pop(), lv = levelOf(r);
      h += '<a class="rack" data-rack="' + esc(r.rack) + '" data-fill="' + esc(lv.color) + '" data-ink="' + esc(lv.ink) + '" href="/rack?id=' + encodeURIComponent(r.rack) + '" title="' +
        esc(r.rack + ": " + fmtC(r.max_gpu_temp_c) + " max, " + fmtW(r.power_w) + ", " + r.throttled_gpus + " throttled · " + lv.label) + '">' +
        "<b>" + esc(name) + '</b><span class="v">' + esc(detail(r)) + "</span></a>";
    }
    h += "</div></div>";
  }
  h += "</div>";
  if (!f.rows.length) h += '<p class="muted">No racks in the store.</p>';
  setMain(h);
  paintLevels(main);
  main.querySelectorAll("button[data-metric]").forEach((b) => b.addEventListener("click", () => {
    history.replaceState(null, "", "/floor?metric=" + b.dataset.metric);
    params.set("metric", b.dataset.metric);
    refresh();
  }));
}

// Colours come from data attributes and are set through the CSSOM (the CSP forbids inline style attributes).
function paintLevels(scope) {
  scope.querySelectorAll("[data-fill]").forEach((el) => { el.style.background = el.dataset.fill; el.style.color = el.dataset.ink; });
}

async function pageRack() {
  const id = params.get("id") || "";
  const r = await api("/api/rack?id=" + encodeURIComponent(id));
  let h = "<h1>Rack " + esc(r.rack) + ' <span class="muted">' + esc(fmtTs(r.ts)) + "</span></h1>";
  h += '<div class="cards">' + card("Rack power", fmtW(r.power_w), "", "rack-power", r.power_w) +
    card("Inlet", fmtC(r.inlet_temp_c), "", "rack-inlet", r.inlet_temp_c) +
    card("Nodes", String(r.nodes.length), "", "", null) + "</div>";
  h += '<p class="muted">Sparklines: bucket means from ' + esc(fmtTs(r.since_ts)) + " to " + esc(fmtTs(r.until_ts)) + "; click a GPU for its history.</p>";
  for (const n of r.nodes) {
    h += '<div class="panel node"><h3>' + esc(n.node) + ' <span class="muted">' + fmtW(n.power_w) + "</span></h3>" +
      '<div class="tw"><table><tr><th>GPU</th><th class=num>power</th><th>power</th><th class=num>temp</th><th>temp</th><th class=num>SM clock</th><th>clock</th><th>clock-event reasons</th></tr>';
    for (const g of n.gpus) {
      const s = g.spark;
      h += '<tr><td><a class="gpu-link" href="/gpu?id=' + encodeURIComponent(g.gpu) + '">' + esc(g.gpu.split("/").pop()) + "</a></td>" +
        '<td class="num" data-gpu-power="' + esc(g.gpu) + '">' + fmtW(g.power_w) + "</td><td>" + sparkline(s.ts, s.power_w, COLORS[0]) + "</td>" +
        "<td class=num>" + fmtC(g.temp_c) + "</td><td>" + sparkline(s.ts, s.temp_c, COLORS[1]) + "</td>" +
        "<td class=num>" + fmtN(g.clock_mhz, 0) + " MHz</td><td>" + sparkline(s.ts, s.clock_mhz, COLORS[2]) + "</td>" +
        "<td>" + reasonTags(g.reasons) + "</td></tr>";
    }
    h += "</table></div></div>";
  }
  setMain(h);
}

const REASON_COLORS = { sw_power_cap: "#f59e0b", hw_slowdown: "#ef4444", sw_thermal: "#f97316", hw_thermal: "#b91c1c",
  hw_power_brake: "#7c3aed", sync_boost: "#0891b2", applications_clocks: "#64748b" };

async function pageGpu() {
  const id = params.get("id") || "";
  const g = await api("/api/gpu?id=" + encodeURIComponent(id));
  const L = g.latest || {};
  const bands = g.reason_spans.map((s) => ({ x0: s.start_ts, x1: s.end_ts, color: REASON_COLORS[s.reasons[0]] || "#f59e0b", label: s.reasons.join(", ") }));
  let h = "<h1>GPU " + esc(g.gpu) + "</h1>";
  h += '<p>Rack: ' + (g.rack ? link("/rack?id=" + encodeURIComponent(g.rack), g.rack) : "—") + "</p>";
  h += '<div class="cards">' + card("Power", fmtW(L.power_w), "", "gpu-power", L.power_w) + card("Temperature", fmtC(L.temp_c), "", "gpu-temp", L.temp_c) +
    card("SM clock", fmtN(L.clock_mhz, 0) + " MHz", "", "gpu-clock", L.clock_mhz) +
    '<div class="card"><div class="label">Clock-event reasons now</div><div class="value" id="gpu-reasons">' + reasonTags(L.reasons) + "</div></div></div>";
  const slow = isNum(g.slowdown_temp_c) ? [{ y: g.slowdown_temp_c, label: "slowdown " + g.slowdown_temp_c.toFixed(0) + " °C" + (g.slowdown_assumed ? " (assumed)" : "") }] : [];
  h += '<div class="grid2"><div class="panel">' + lineChart({ title: "Power and limit", x: g.ts, series: [{ name: "power", values: g.power_w }, { name: "limit", values: g.power_limit_w, dash: true, color: "#64748b" }], unit: "W", bands }) + "</div>";
  h += '<div class="panel">' + lineChart({ title: "Temperature", x: g.ts, series: [{ name: "GPU temperature", values: g.temp_c, color: COLORS[1] }], unit: "°C", bands, rules: slow }) + "</div>";
  h += '<div class="panel">' + lineChart({ title: "SM clock", x: g.ts, series: [{ name: "SM clock", values: g.clock_mhz, color: COLORS[2] }], unit: "MHz", bands }) + "</div></div>";
  h += "<h2>Clock-event reasons over time</h2>";
  if (g.reason_spans.length) {
    h += '<div class="tw"><table><tr><th>from</th><th>to</th><th class=num>duration</th><th>reasons</th></tr>' + g.reason_spans.map((s) =>
      "<tr><td>" + fmtTs(s.start_ts) + "</td><td>" + fmtTs(s.end_ts) + "</td><td class=num>" + fmtS(s.end_ts - s.start_ts) + "</td><td>" + reasonTags(s.reasons) + "</td></tr>").join("") + "</table></div>";
  } else h += '<p class="muted">No throttling in this range.</p>';
  setMain(h);
}

async function pageJobs() {
  const jobs = await api("/api/jobs");
  let h = "<h1>Jobs</h1>";
  if (!jobs.length) { setMain(h + '<p class="muted">No jobs in the store.</p>'); return; }
  const t0 = Math.min(...jobs.flatMap((j) => j.phases.map((p) => p.start_ts)));
  const t1 = Math.max(...jobs.flatMap((j) => j.phases.map((p) => p.end_ts)));
  h += '<div class="tw"><table id="jobs"><tr><th>job</th><th>phase</th><th class=num>GPUs</th><th class=num>step time</th><th class=num>mean step</th><th class=num>tokens/s</th><th class=num>goodput tok/s</th><th class=num>sustained</th><th class=num>checkpoints</th><th class=num>restarts</th></tr>';
  for (const j of jobs) {
    h += '<tr><td><a href="#" data-job="' + esc(j.job) + '">' + esc(j.name) + "</a></td><td>" + esc(j.phase || "—") + "</td><td class=num>" + fmtN(j.gpus, 0) +
      "</td><td class=num>" + fmtS(j.step_time_s) + "</td><td class=num>" + fmtS(j.mean_step_time_s) + "</td><td class=num>" + fmtN(j.tokens_per_s, 0) +
      "</td><td class=num>" + fmtN(j.goodput_tokens_per_s, 0) + "</td><td class=num>" + fmtPct(j.sustained_fraction) + "</td><td class=num>" + j.checkpoints +
      "</td><td class=num>" + j.restarts + "</td></tr>";
  }
  h += "</table></div>";
  const items = jobs.flatMap((j) => j.phases.map((p) => ({ lane: j.name, start: p.start_ts, end: p.end_ts, label: j.name + ": " + p.phase, color: PHASE_COLORS[p.phase] || "#94a3b8" })));
  h += '<div class="panel">' + chartDiv({ kind: "timeline", title: "Lifecycle (colour: phase)", items, x0: t0, x1: t1, height: 70 + 26 * jobs.length }) +
    '<div class="keys">' + Object.entries(PHASE_COLORS).map(([k, c]) => '<span class="series-key"><i data-fill="' + c + '" data-ink="' + c + '"></i>' + k + "</span>").join("") + "</div></div>";
  h += '<div id="job-detail"></div>';
  setMain(h);
  paintLevels(main);
  main.querySelectorAll("a[data-job]").forEach((a) => a.addEventListener("click", (ev) => { ev.preventDefault(); showJob(a.dataset.job); }));
  showJob(params.get("job") || jobs[0].job);
}

async function showJob(id) {
  params.set("job", id);
  const d = await api("/api/job?points=240&id=" + encodeURIComponent(id));
  let h = "<h2>" + esc(d.summary.name) + "</h2><div class=grid2>";
  h += '<div class="panel">' + lineChart({ title: "Step time", x: d.ts, series: [{ name: "step time", values: d.step_time_s }], unit: "s" }) + "</div>";
  h += '<div class="panel">' + lineChart({ title: "Throughput (tokens/s)", x: d.ts, series: [{ name: "tokens/s", values: d.tokens_per_s, color: COLORS[2] }] }) + "</div>";
  h += '<div class="panel">' + (d.power_w.length ? lineChart({ title: "Power profile (" + d.power_gpus + " labelled GPUs)", x: d.ts, series: [{ name: "power", values: d.power_w, color: COLORS[3] }], unit: "W" })
    : '<div class="chart-title">Power profile</div><p class="muted">No GPUs carry this job\'s label in the store.</p>') + "</div>";
  h += '<div class="panel">' + lineChart({ title: "Lifecycle phase", x: d.ts, series: [{ name: "phase", values: d.phase, color: COLORS[4] }], categories: PHASE_NAMES, height: 260, step: true }) + "</div></div>";
  setHtml(document.getElementById("job-detail"), h);
}

async function decide(id, verb) {
  try {
    const r = await api("/api/actions/" + id + "/" + verb, { method: "POST" });
    notice("Action " + id + " " + verb + "d: " + r.status + (r.detail ? " (" + r.detail + ")" : ""), "ok");
  } catch (e) {
    notice("Refused: " + (e.status || "") + " " + (e.detail || e.message), "error");
  }
  refresh();
}

// Twin runs record the faults they injected: name where each really was (a job-level straggler's GPU).
const injectedNote = (list) => (list || []).map((f) => '<div class="small muted injected">injected: ' + esc(f.fault) + " at " + entityLink(f.entity) + "</div>").join("");

const SEV_COLORS = { critical: "#dc2626", major: "#b45309", minor: "#eab308", info: "#64748b" };
// One timeline per run (loop off and loop on apart), all on the same absolute time axis.
function incidentTimelines(groups) {
  const all = groups.flatMap((g) => g.incidents);
  if (!all.length) return "";
  const x0 = Math.min(...all.map((i) => i.start_ts)), x1 = Math.max(...all.map((i) => i.end_ts));
  const runs = [...new Set(all.map((i) => i.run))];
  return '<h2>Timeline</h2><div class="grid1">' + runs.map((run) => {
    const mine = all.filter((i) => i.run === run);
    const items = mine.map((i) => ({ lane: i.event_class, start: i.start_ts, end: i.end_ts, color: SEV_COLORS[i.severity] || "#64748b",
      label: "#" + i.incident_id + " " + i.event_class + " at " + i.root + " (" + i.severity + ", " + i.status + ")" }));
    const lanes = [...new Set(items.map((i) => i.lane))];
    return '<div class="panel">' + chartDiv({ kind: "timeline", title: run + ": incidents by cause (colour: severity)", items, x0, x1, height: 60 + 26 * lanes.length }) + "</div>";
  }).join("") + "</div>";
}

async function pageIncidents() {
  const run = params.get("run");
  const d = await api("/api/incidents" + (run ? "?run=" + encodeURIComponent(run) : ""));
  let h = "<h1>Incidents</h1>";
  h += '<div class="tabs">Run: <button data-run="" class="' + (!run ? "active" : "") + '">all</button> ' +
    d.runs.map((r) => '<button data-run="' + esc(r) + '" class="' + (r === run ? "active" : "") + '">' + esc(r) + "</button>").join(" ") + "</div>";
  h += "<h2>Pending actions" + (d.mode ? ' <span class="muted">(loop mode: ' + esc(d.mode) + ")</span>" : "") + "</h2>";
  if (d.pending.length) {
    h += '<div class="tw"><table id="pending"><tr><th>id</th><th>kind</th><th>target</th><th class=num>value</th><th>why</th><th></th></tr>' + d.pending.map((a) =>
      "<tr data-action=\"" + a.action_id + "\"><td>" + a.action_id + "</td><td>" + esc(a.kind) + "</td><td>" + esc(a.target) + "</td><td class=num>" + fmtN(a.value, 2) +
      "</td><td>" + esc(a.detail) + '</td><td><button class="approve" data-id="' + a.action_id + '">Approve</button> <button class="reject" data-id="' +
      a.action_id + '">Reject</button></td></tr>').join("") + "</table></div>";
  } else h += '<p class="muted">' + (d.mode ? "Nothing waiting for approval." : "No loop attached to this server.") + "</p>";
  h += incidentTimelines(d.groups);
  h += "<h2>By cause</h2>";
  if (!d.groups.length) h += '<p class="muted">No incidents recorded.</p>';
  for (const g of d.groups) {
    h += '<div class="panel"><h3>' + esc(g.event_class) + " " + sevPill(g.worst_severity) + ' <span class="muted">' + g.count + " incident(s)</span></h3>" +
      '<div class="tw"><table><tr><th>id</th><th>run</th><th>severity</th><th>root</th><th>from</th><th>to</th><th class=num>members</th><th>status</th><th>actions</th><th>effect</th></tr>';
    for (const i of g.incidents) {
      h += "<tr><td>" + i.incident_id + "</td><td>" + esc(i.run) + "</td><td>" + sevPill(i.severity) + "</td><td>" + entityLink(i.root) + injectedNote(i.injected) + "</td><td>" + fmtTs(i.start_ts) +
        "</td><td>" + fmtTs(i.end_ts) + "</td><td class=num>" + i.n_members + "</td><td>" + esc(i.status) + "</td><td>" +
        (i.actions.map((a) => esc(a.kind + " → " + a.target + (isNum(a.value) ? " = " + fmtN(a.value, 2) : "") + " [" + a.status + "]")).join("<br>") || '<span class="muted">none</span>') +
        "</td><td>" + esc(i.effect) + "</td></tr>";
    }
    h += "</table></div></div>";
  }
  setMain(h);
  main.querySelectorAll("button[data-run]").forEach((b) => b.addEventListener("click", () => {
    if (b.dataset.run) params.set("run", b.dataset.run); else params.delete("run");
    history.replaceState(null, "", "/incidents" + (b.dataset.run ? "?run=" + encodeURIComponent(b.dataset.run) : ""));
    refresh();
  }));
  main.querySelectorAll("button.approve").forEach((b) => b.addEventListener("click", () => decide(b.dataset.id, "approve")));
  main.querySelectorAll("button.reject").forEach((b) => b.addEventListener("click", () => decide(b.dataset.id, "reject")));
}

function field(name, label, input) { return '<label>' + esc(label) + input.replace("<X", '<input name="' + name + '"').replace("<S", '<select name="' + name + '"') + "</label>"; }
const opts = (list, sel) => list.map((v) => '<option value="' + esc(v) + '"' + (v === sel ? " selected" : "") + ">" + esc(v) + "</option>").join("");

let planOptions = null;
async function pagePlanner() {
  if (main.dataset.ready) return;   // the form is not rebuilt on live updates
  planOptions = await api("/api/plan/options");
  const o = planOptions;
  let h = "<h1>Planner</h1>";
  h += '<div class="panel"><h2>Training</h2><form class="plan" id="train-form">' +
    field("model", "model", "<S>" + opts(o.models, "llama-3-70b") + "</select>") + field("gpu", "GPU", "<S>" + opts(o.gpus, "h100-sxm") + "</select>") +
    field("gpus", "GPUs", '<X type="number" min="1" value="1024">') + field("precision", "precision", "<S>" + opts(o.precisions, "bf16") + "</select>") +
    field("seq_len", "sequence length", '<X type="number" min="128" placeholder="auto">') + field("tp", "TP", '<X type="number" min="1" placeholder="auto">') +
    field("pp", "PP", '<X type="number" min="1" placeholder="auto">') + field("power_limit_w", "power limit W", '<X type="number" min="1" placeholder="TDP">') +
    '<button type="submit">Plan training</button></form><div id="train-out"></div></div>';
  h += '<div class="panel"><h2>Serving</h2><form class="plan" id="serve-form">' +
    field("model", "model", "<S>" + opts(o.models, "llama-3-70b") + "</select>") + field("gpu", "GPU", "<S>" + opts(o.gpus, "h100-sxm") + "</select>") +
    field("gpus", "GPUs", '<X type="number" min="1" value="8">') + field("tp", "TP", '<X type="number" min="1" value="8">') +
    field("weight_dtype", "weights", "<S>" + opts(o.dtypes, "bf16") + "</select>") + field("kv_dtype", "KV cache", "<S>" + opts(o.dtypes, "bf16") + "</select>") +
    field("batching", "batching", "<S>" + opts(o.batching, "continuous") + "</select>") + field("prompt_tokens", "prompt tokens", '<X type="number" min="1" value="1024">') +
    field("output_tokens", "output tokens", '<X type="number" min="1" value="256">') + field("rate_req_per_s", "rate req/s", '<X type="number" min="0" step="any" placeholder="capacity">') +
    '<button type="submit">Plan serving</button></form><div id="serve-out"></div></div>';
  setMain(h);
  main.dataset.ready = "1";
  document.getElementById("train-form").addEventListener("submit", (ev) => { ev.preventDefault(); planTrain(ev.target); });
  document.getElementById("serve-form").addEventListener("submit", (ev) => { ev.preventDefault(); planServe(ev.target); });
}

function formBody(form) {
  const body = {};
  for (const [k, v] of new FormData(form).entries()) {
    if (v === "") continue;
    const el = form.elements[k];
    body[k] = el.type === "number" ? Number(v) : v;
  }
  return body;
}

async function postPlan(path, form, outId) {
  const out = document.getElementById(outId);
  out.innerHTML = '<p class="muted">Planning…</p>';
  try {
    return await api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(formBody(form)) });
  } catch (e) {
    out.innerHTML = '<p class="notice error">' + esc(e.detail || e.message) + "</p>";
    return null;
  }
}

async function planTrain(form) {
  const p = await postPlan("/api/plan/train", form, "train-out");
  if (!p) return;
  const mem = Object.entries(p.memory_per_gpu_bytes).filter(([k]) => k !== "total").map(([name, value]) => ({ name, value }));
  mem.push({ name: "free", value: Math.max(0, p.hbm_bytes - p.memory_per_gpu_bytes.total) });
  const step = Object.entries(p.step_breakdown_s).filter(([k]) => k !== "dp_sync_total" && k !== "overlapped").map(([name, value]) => ({ name, value }));
  const sw = p.power_sweep;
  const c = p.config;
  let h = '<div class="cards">' + card("Step time", fmtS(p.step_time_s), "chosen by " + p.chosen_by, "plan-step", p.step_time_s) +
    card("Tokens/s", fmtN(p.tokens_per_s, 0), "", "plan-tps", p.tokens_per_s) + card("MFU", fmtPct(p.mfu), "", "", null) +
    card("Memory/GPU", fmtBytes(p.memory_per_gpu_bytes.total), "of " + fmtBytes(p.hbm_bytes) + (p.fits ? "" : " — does NOT fit"), "plan-mem", p.memory_per_gpu_bytes.total) +
    card("Power/GPU", fmtW(p.power_per_gpu_w), "peak " + fmtW(p.peak_power_per_gpu_w), "", null) + card("Train time", fmtN(p.train_days, 1) + " days", "$" + fmtN(p.cost_usd, 0), "", null) +
    card("Power knee", fmtW(p.knee_power_limit_w), "per GPU", "plan-knee", p.knee_power_limit_w) + "</div>";
  h += '<p class="muted">tp ' + c.tp + " · pp " + c.pp + " · dp " + c.dp + " · cp " + c.cp + " · ep " + c.ep + " · micro-batch " + c.micro_batch + " · ZeRO " + c.zero + " · recompute " + esc(c.recompute) + "</p>";
  h += '<div class="panel">' + stackedBar(mem, "B", "Memory per GPU") + "</div>";
  h += '<div class="panel">' + stackedBar(step, "s", "Step-time breakdown") + "</div>";
  const knee = sw.find((s) => s.knee);
  h += '<div class="grid2"><div class="panel" id="sweep-chart">' + lineChart({ title: "Power sweep: step time vs power limit", x: sw.map((s) => s.power_limit_w), dots: true,
    series: [{ name: "step time", values: sw.map((s) => s.step_time_s) }], unit: "s", time: false, xunit: "W",
    marks: knee ? [{ x: knee.power_limit_w, label: "knee " + knee.power_limit_w.toFixed(0) + " W" }] : [] }) + "</div>";
  h += '<div class="panel">' + lineChart({ title: "Energy per step vs power limit", x: sw.map((s) => s.power_limit_w), dots: true,
    series: [{ name: "energy/step", values: sw.map((s) => s.energy_per_step_j), color: COLORS[3] }], unit: "J", time: false, xunit: "W",
    marks: knee ? [{ x: knee.power_limit_w, label: "knee" }] : [] }) + "</div></div>";
  setHtml(document.getElementById("train-out"), h);
}

async function planServe(form) {
  const p = await postPlan("/api/plan/serve", form, "serve-out");
  if (!p) return;
  const mem = Object.entries(p.memory_per_gpu_bytes).map(([name, value]) => ({ name, value }));
  const parts = (ph, n) => [{ name: n + " compute", value: ph.compute_s }, { name: n + " memory", value: ph.memory_s }, { name: n + " comm", value: ph.comm_s }];
  let h = '<div class="cards">' + card("TTFT", fmtS(p.ttft_s), "", "serve-ttft", p.ttft_s) + card("TPOT", fmtS(p.tpot_s), "", "serve-tpot", p.tpot_s) +
    card("Throughput", fmtN(p.throughput_tokens_per_s, 0) + " tok/s", p.saturated ? "SATURATED" : "", "", null) +
    card("Capacity", fmtN(p.capacity_req_per_s, 2) + " req/s", p.replicas + " replica(s)", "", null) +
    card("Max sequences", fmtN(p.max_concurrent_sequences, 0), "", "", null) + card("Power/GPU", fmtW(p.power_per_gpu_w), "", "", null) +
    card("Energy/token", isNum(p.energy_per_token_j) ? p.energy_per_token_j.toFixed(3) + " J" : "—", "$" + fmtN(p.cost_per_million_tokens_usd, 3) + " per M tokens", "", null) + "</div>";
  h += '<div class="panel">' + stackedBar(mem, "B", "Memory per GPU") + "</div>";
  h += '<div class="grid2"><div class="panel">' + stackedBar(parts(p.prefill, "prefill"), "s", "Prefill iteration (" + p.prefill.bound + "-bound, " + fmtS(p.prefill.iteration_s) + ")") + "</div>";
  h += '<div class="panel">' + stackedBar(parts(p.decode, "decode"), "s", "Decode iteration (" + p.decode.bound + "-bound, " + fmtS(p.decode.iteration_s) + ")") + "</div></div>";
  if (p.warnings.length) h += p.warnings.map((w) => '<p class="notice">' + esc(w) + "</p>").join("");
  setHtml(document.getElementById("serve-out"), h);
}

// ------------------------------------------------------------------------------------------- refresh and live
const PAGES = { overview: pageOverview, floor: pageFloor, rack: pageRack, gpu: pageGpu, jobs: pageJobs, incidents: pageIncidents, planner: pagePlanner };
let busy = false, again = false;

async function refresh() {
  if (busy) { again = true; return; }
  busy = true;
  try {
    await PAGES[PAGE]();
    document.body.dataset.loaded = String(Date.now());
    if (document.getElementById("notice").dataset.auth) notice("");   // the token works now
  } catch (e) {
    showError(e);
    if (main.textContent.trim() === "Loading…") main.innerHTML = '<p class="muted">Could not load this page.</p>';
  } finally {
    busy = false;
    if (again) { again = false; refresh(); }
  }
}

function setBadge(text, cls) {
  const b = document.getElementById("live");
  b.textContent = text;
  b.className = "badge" + (cls ? " " + cls : "");
}

// Server-sent events read through fetch (EventSource cannot send the Authorization header).
async function live() {
  let first = true;
  for (;;) {
    try {
      const r = await fetch("/api/live", { headers: authHeaders({ Accept: "text/event-stream" }) });
      if (!r.ok) { setBadge(r.status === 401 || r.status === 403 ? "token needed" : "no live data", "off"); await sleep(5000); continue; }
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let k;
        while ((k = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, k); buf = buf.slice(k + 2);
          if (!/^event: update/m.test(block)) continue;
          const data = JSON.parse(block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n"));
          setBadge(data.controller ? "live · " + (data.controller.mode || "loop") : "static data", data.controller ? "live" : "");
          if (!first) refresh();
          first = false;
        }
      }
    } catch (e) {
      setBadge("offline", "off");
    }
    await sleep(3000);
  }
}
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

refresh();
live();
