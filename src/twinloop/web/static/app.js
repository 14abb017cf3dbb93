// twinloop dashboard: every page is filled from the JSON API under /api (no other data source).
// Charts are inline SVG built here; values from the store are always escaped before they reach the page.
"use strict";

const TOKEN_KEY = "twinloop.token";
const PAGE = document.body.dataset.page;
const main = document.getElementById("main");
const COLORS = ["#2463eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#be185d", "#4b5563"];

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
function fmtTs(ts) {
  if (!isNum(ts)) return "—";
  if (ts < 1e9) return "t+" + ts.toFixed(0) + " s";
  return new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19) + "Z";
}
function fmtClock(ts, span) {
  if (ts < 1e9) return ts.toFixed(0) + "s";
  const d = new Date(ts * 1000).toISOString();
  return span > 86400 ? d.slice(5, 16).replace("T", " ") : d.slice(11, span > 600 ? 16 : 19);
}
function fmtBytes(b) { return isNum(b) ? (b / 1e9).toFixed(1) + " GB" : "—"; }
const sevPill = (s) => '<span class="pill sev-' + esc(s) + '">' + esc(s) + "</span>";
const reasonTags = (list) => (list || []).filter((r) => r !== "gpu_idle").map((r) => '<span class="reason">' + esc(r) + "</span>").join("") || '<span class="muted">—</span>';
const link = (href, text) => '<a href="' + esc(href) + '">' + esc(text) + "</a>";
const card = (label, value, sub, id, raw) =>
  '<div class="card"><div class="label">' + esc(label) + '</div><div class="value"' + (id ? ' id="' + id + '"' : "") +
  (raw !== undefined && raw !== null ? ' data-value="' + esc(raw) + '"' : "") + ">" + esc(value) + "</div>" +
  (sub ? '<div class="sub">' + esc(sub) + "</div>" : "") + "</div>";

// ------------------------------------------------------------------------------------------- charts (SVG)
function niceRange(vals) {
  const f = vals.filter(isNum);
  if (!f.length) return [0, 1];
  let lo = Math.min(...f), hi = Math.max(...f);
  if (hi - lo <= 1e-9 * Math.max(Math.abs(lo), Math.abs(hi), 1e-12)) {
    const d = Math.abs(hi) * 0.05 || 1;
    lo -= d; hi += d;
  }
  const pad = (hi - lo) * 0.06;
  const floor = Math.min(...f) >= 0 ? 0 : -Infinity;   // never draw a non-negative quantity below zero
  return [Math.max(floor, lo - pad), hi + pad];
}

function pathOf(xs, ys, sx, sy) {
  let d = "", pen = false;
  for (let i = 0; i < xs.length; i++) {
    if (!isNum(ys[i]) || !isNum(xs[i])) continue;   // connect across missing buckets
    d += (pen ? "L" : "M") + sx(xs[i]).toFixed(1) + "," + sy(ys[i]).toFixed(1);
    pen = true;
  }
  return d;
}

// opts: {x: [], series: [{name, values, color}], yfmt, xfmt, height, marks: [{x, label}], bands: [{x0,x1,color,label}]}
function lineChart(opts) {
  const W = 640, H = opts.height || 200, L = opts.left || 58, R = 12, T = 10, B = 24;
  const xs = opts.x || [];
  if (!xs.length) return '<p class="muted">No data in this range.</p>';
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  const xspan = x1 - x0 || 1;
  const all = [].concat(...opts.series.map((s) => s.values));
  const [y0, y1] = opts.yrange || niceRange(all);
  const sx = (x) => L + ((x - x0) / xspan) * (W - L - R);
  const sy = (y) => T + (1 - (y - y0) / (y1 - y0 || 1)) * (H - T - B);
  const yfmt = opts.yfmt || ((v) => fmtN(v));
  const xfmt = opts.xfmt || ((v) => fmtClock(v, xspan));
  let g = "";
  for (const b of opts.bands || []) {
    g += '<rect x="' + sx(b.x0).toFixed(1) + '" y="' + T + '" width="' + Math.max(1, sx(b.x1) - sx(b.x0)).toFixed(1) +
      '" height="' + (H - T - B) + '" fill="' + esc(b.color) + '" fill-opacity="0.25"><title>' + esc(b.label) + "</title></rect>";
  }
  const yticks = opts.yticks || [0, 1, 2, 3, 4].map((k) => y0 + (k / 4) * (y1 - y0));
  for (const v of yticks) {
    const y = sy(v);
    g += '<line x1="' + L + '" x2="' + (W - R) + '" y1="' + y.toFixed(1) + '" y2="' + y.toFixed(1) + '" stroke="#e5e7eb"/>';
    g += '<text x="' + (L - 6) + '" y="' + (y + 4).toFixed(1) + '" text-anchor="end">' + esc(yfmt(v)) + "</text>";
  }
  for (let k = 0; k <= 4; k++) {
    const v = x0 + (k / 4) * xspan;
    g += '<text x="' + sx(v).toFixed(1) + '" y="' + (H - 6) + '" text-anchor="' + (k === 0 ? "start" : k === 4 ? "end" : "middle") + '">' + esc(xfmt(v)) + "</text>";
  }
  opts.series.forEach((s, i) => {
    const color = s.color || COLORS[i % COLORS.length];
    g += '<path d="' + pathOf(xs, s.values, sx, sy) + '" fill="none" stroke="' + color + '" stroke-width="1.6"' +
      (s.dash ? ' stroke-dasharray="4 3"' : "") + "/>";
    if (opts.dots) xs.forEach((x, j) => { if (isNum(s.values[j])) g += '<circle cx="' + sx(x).toFixed(1) + '" cy="' + sy(s.values[j]).toFixed(1) + '" r="2.5" fill="' + color + '"/>'; });
  });
  for (const m of opts.marks || []) {
    const x = sx(m.x);
    g += '<line x1="' + x.toFixed(1) + '" x2="' + x.toFixed(1) + '" y1="' + T + '" y2="' + (H - B) + '" stroke="#111827" stroke-dasharray="3 3"/>';
    g += '<text x="' + (x + 4).toFixed(1) + '" y="' + (T + 12) + '" fill="#111827">' + esc(m.label) + "</text>";
  }
  const keys = opts.series.map((s, i) => '<span class="series-key"><svg width="14" height="4"><rect width="14" height="4" fill="' +
    (s.color || COLORS[i % COLORS.length]) + '"/></svg>' + esc(s.name) + "</span>").join("");
  return (opts.title ? '<div class="chart-title">' + esc(opts.title) + "</div>" : "") + "<div>" + keys + "</div>" +
    '<svg class="chart" viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="' + esc(opts.title || "chart") + '">' + g + "</svg>";
}

function sparkline(ts, vals, color) {
  const W = 110, H = 26;
  const f = vals.filter(isNum);
  if (!f.length || !ts.length) return '<span class="muted">—</span>';
  const [lo, hi] = niceRange(f);
  const x0 = ts[0], xs = ts[ts.length - 1] - x0 || 1;
  const d = pathOf(ts, vals, (x) => 1 + ((x - x0) / xs) * (W - 2), (y) => 1 + (1 - (y - lo) / (hi - lo)) * (H - 2));
  return '<svg class="spark" width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + " " + H + '"><path d="' + d +
    '" fill="none" stroke="' + color + '" stroke-width="1.3"/></svg>';
}

// Horizontal stacked bar: parts [{name, value}] with a legend; fmt formats values.
function stackedBar(parts, fmt, title) {
  const W = 640, H = 34;
  const total = parts.reduce((a, p) => a + (isNum(p.value) && p.value > 0 ? p.value : 0), 0) || 1;
  let x = 0, g = "", keys = "";
  parts.forEach((p, i) => {
    const v = isNum(p.value) && p.value > 0 ? p.value : 0;
    const w = (v / total) * W, c = COLORS[i % COLORS.length];
    g += '<rect x="' + x.toFixed(1) + '" y="0" width="' + w.toFixed(1) + '" height="' + H + '" fill="' + c + '"><title>' +
      esc(p.name + ": " + fmt(p.value)) + "</title></rect>";
    x += w;
    keys += '<span class="series-key"><svg width="10" height="10"><rect width="10" height="10" fill="' + c + '"/></svg>' +
      esc(p.name) + " " + esc(fmt(p.value)) + "</span>";
  });
  return '<div class="chart-title">' + esc(title) + '</div><svg class="bar" preserveAspectRatio="none" viewBox="0 0 ' + W + " " + H + '">' + g +
    "</svg><div>" + keys + "</div>";
}

// Color scale: blue (cool) → yellow → red (hot).
function heatColor(v, lo, hi) {
  if (!isNum(v)) return "#e5e7eb";
  const t = Math.max(0, Math.min(1, (v - lo) / (hi - lo || 1)));
  const stops = [[59, 130, 246], [250, 204, 21], [220, 38, 38]];
  const k = t < 0.5 ? 0 : 1, u = t < 0.5 ? t * 2 : (t - 0.5) * 2;
  const c = stops[k].map((a, j) => Math.round(a + (stops[k + 1][j] - a) * u));
  return "rgb(" + c.join(",") + ")";
}

function timelineSvg(spans, t0, t1, colorOf, width) {
  const W = width || 360, H = 16, span = t1 - t0 || 1;
  let g = '<rect width="' + W + '" height="' + H + '" fill="#eef2f7"/>';
  for (const s of spans) {
    const x = ((s.start_ts - t0) / span) * W, w = Math.max(1, ((s.end_ts - s.start_ts) / span) * W);
    g += '<rect x="' + x.toFixed(1) + '" y="0" width="' + w.toFixed(1) + '" height="' + H + '" fill="' + colorOf(s) +
      '"><title>' + esc((s.phase || (s.reasons || []).join(", ")) + " " + fmtTs(s.start_ts) + " → " + fmtTs(s.end_ts)) + "</title></rect>";
  }
  return '<svg width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + " " + H + '">' + g + "</svg>";
}

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
  h += "<h2>Hottest racks</h2><table id=\"hottest\"><tr><th>rack</th><th class=num>max GPU °C</th><th class=num>mean GPU °C</th><th class=num>power</th><th class=num>throttled GPUs</th></tr>" +
    o.hottest_racks.map((r) => "<tr><td>" + link("/rack?id=" + encodeURIComponent(r.rack), r.rack) + '</td><td class=num>' + fmtC(r.max_gpu_temp_c) +
      "</td><td class=num>" + fmtC(r.mean_gpu_temp_c) + "</td><td class=num>" + fmtW(r.power_w) + "</td><td class=num>" + r.throttled_gpus + "</td></tr>").join("") +
    "</table>";
  h += "<h2>Open incidents</h2>" + (o.open_incidents.length ? "<table><tr><th>severity</th><th>class</th><th>root</th><th>run</th><th>since</th></tr>" +
    o.open_incidents.map((i) => "<tr><td>" + sevPill(i.severity) + "</td><td>" + esc(i.event_class) + "</td><td>" + esc(i.root) + "</td><td>" +
      esc(i.run) + "</td><td>" + fmtTs(i.start_ts) + "</td></tr>").join("") + "</table>" : '<p class="muted">None.</p>');
  main.innerHTML = h;
  if (o.site && o.counts.sites === 1) {
    const [f, it, pue] = await Promise.all([
      api("/api/series?points=240&entity=" + encodeURIComponent(o.site) + "&field=TWINLOOP_FI_FACILITY_POWER").catch(() => null),
      api("/api/series?points=240&entity=" + encodeURIComponent(o.site) + "&field=TWINLOOP_FI_IT_POWER").catch(() => null),
      api("/api/series?points=240&entity=" + encodeURIComponent(o.site) + "&field=TWINLOOP_FI_PUE").catch(() => null),
    ]);
    if (f) {
      const series = [{ name: "facility", values: f.mean }];
      if (it && it.ts.length === f.ts.length) series.push({ name: "IT", values: it.mean });
      document.getElementById("power-chart").innerHTML = lineChart({ title: "Site power", x: f.ts, series, yfmt: fmtW });
    } else document.getElementById("power-chart").innerHTML = '<p class="muted">No site power series.</p>';
    if (pue) document.getElementById("pue-chart").innerHTML = lineChart({ title: "PUE", x: pue.ts, series: [{ name: "PUE", values: pue.mean, color: COLORS[2] }], yfmt: (v) => v.toFixed(3) });
  } else {
    document.getElementById("power-chart").innerHTML = '<p class="muted">No site series.</p>';
  }
}

async function pageFloor() {
  const metric = params.get("metric") === "power" ? "power" : "temp";
  const f = await api("/api/floor");
  const range = metric === "power" ? f.power_range_w : f.temp_range_c;
  const [lo, hi] = range || [0, 1];
  const val = (r) => (metric === "power" ? r.power_w : r.max_gpu_temp_c);
  const fmt = metric === "power" ? fmtW : fmtC;
  let h = "<h1>Floor <span class=muted>" + esc(fmtTs(f.ts)) + "</span></h1>";
  h += '<div class="tabs">Color by: <button data-metric="temp" class="' + (metric === "temp" ? "active" : "") + '">max GPU temperature</button> ' +
    '<button data-metric="power" class="' + (metric === "power" ? "active" : "") + '">rack power</button></div>';
  let grad = "";
  for (let k = 0; k <= 20; k++) grad += '<rect x="' + k * 9 + '" width="9" height="10" fill="' + heatColor(lo + (k / 20) * (hi - lo), lo, hi) + '"/>';
  h += '<div class="legend">' + esc(fmt(lo)) + '<svg width="189" height="10">' + grad + "</svg>" + esc(fmt(hi)) + "</div>";
  h += '<div class="panel" id="floor">';
  for (const row of f.rows) {
    h += '<div class="floor-row"><span class="rowname">' + esc(row.row) + "</span>";
    for (const r of row.racks) {
      const name = r.rack.split("/").pop();
      const color = heatColor(val(r), lo, hi);
      h += '<a class="rack" data-rack="' + esc(r.rack) + '" href="/rack?id=' + encodeURIComponent(r.rack) + '" title="' +
        esc(r.rack + ": " + fmtC(r.max_gpu_temp_c) + " max, " + fmtW(r.power_w) + ", " + r.throttled_gpus + " throttled") + '">' +
        '<svg width="72" height="56" viewBox="0 0 72 56"><rect width="72" height="56" rx="5" fill="' + color + '"/>' +
        '<text x="36" y="22" text-anchor="middle" font-weight="700" fill="#111">' + esc(name) + "</text>" +
        '<text x="36" y="40" text-anchor="middle" fill="#111">' + esc(fmt(val(r))) + "</text></svg></a>";
    }
    h += "</div>";
  }
  h += "</div>";
  if (!f.rows.length) h += '<p class="muted">No racks in the store.</p>';
  main.innerHTML = h;
  main.querySelectorAll("button[data-metric]").forEach((b) => b.addEventListener("click", () => {
    history.replaceState(null, "", "/floor?metric=" + b.dataset.metric);
    params.set("metric", b.dataset.metric);
    refresh();
  }));
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
      "<table><tr><th>GPU</th><th class=num>power</th><th>power</th><th class=num>temp</th><th>temp</th><th class=num>SM clock</th><th>clock</th><th>clock-event reasons</th></tr>";
    for (const g of n.gpus) {
      const s = g.spark;
      h += '<tr><td><a class="gpu-link" href="/gpu?id=' + encodeURIComponent(g.gpu) + '">' + esc(g.gpu.split("/").pop()) + "</a></td>" +
        '<td class="num" data-gpu-power="' + esc(g.gpu) + '">' + fmtW(g.power_w) + "</td><td>" + sparkline(s.ts, s.power_w, COLORS[0]) + "</td>" +
        "<td class=num>" + fmtC(g.temp_c) + "</td><td>" + sparkline(s.ts, s.temp_c, COLORS[1]) + "</td>" +
        "<td class=num>" + fmtN(g.clock_mhz, 0) + " MHz</td><td>" + sparkline(s.ts, s.clock_mhz, COLORS[2]) + "</td>" +
        "<td>" + reasonTags(g.reasons) + "</td></tr>";
    }
    h += "</table></div>";
  }
  main.innerHTML = h;
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
  h += '<div class="grid2"><div class="panel">' + lineChart({ title: "Power (W) and limit", x: g.ts, series: [{ name: "power", values: g.power_w }, { name: "limit", values: g.power_limit_w, dash: true, color: "#64748b" }], yfmt: fmtW, bands }) + "</div>";
  h += '<div class="panel">' + lineChart({ title: "Temperature (°C)", x: g.ts, series: [{ name: "GPU temperature", values: g.temp_c, color: COLORS[1] }], yfmt: (v) => v.toFixed(0) + " °C", bands }) + "</div>";
  h += '<div class="panel">' + lineChart({ title: "SM clock (MHz)", x: g.ts, series: [{ name: "SM clock", values: g.clock_mhz, color: COLORS[2] }], yfmt: (v) => v.toFixed(0), bands }) + "</div></div>";
  h += "<h2>Clock-event reasons over time</h2>";
  if (g.reason_spans.length) {
    h += "<table><tr><th>from</th><th>to</th><th class=num>duration</th><th>reasons</th></tr>" + g.reason_spans.map((s) =>
      "<tr><td>" + fmtTs(s.start_ts) + "</td><td>" + fmtTs(s.end_ts) + "</td><td class=num>" + fmtS(s.end_ts - s.start_ts) + "</td><td>" + reasonTags(s.reasons) + "</td></tr>").join("") + "</table>";
  } else h += '<p class="muted">No throttling in this range.</p>';
  main.innerHTML = h;
}

async function pageJobs() {
  const jobs = await api("/api/jobs");
  let h = "<h1>Jobs</h1>";
  if (!jobs.length) { main.innerHTML = h + '<p class="muted">No jobs in the store.</p>'; return; }
  const t0 = Math.min(...jobs.flatMap((j) => j.phases.map((p) => p.start_ts)));
  const t1 = Math.max(...jobs.flatMap((j) => j.phases.map((p) => p.end_ts)));
  h += '<table id="jobs"><tr><th>job</th><th>phase</th><th class=num>GPUs</th><th class=num>step time</th><th class=num>mean step</th><th class=num>tokens/s</th><th class=num>goodput tok/s</th><th class=num>sustained</th><th class=num>checkpoints</th><th class=num>restarts</th><th>lifecycle</th></tr>';
  for (const j of jobs) {
    h += '<tr><td><a href="#" data-job="' + esc(j.job) + '">' + esc(j.name) + "</a></td><td>" + esc(j.phase || "—") + "</td><td class=num>" + fmtN(j.gpus, 0) +
      "</td><td class=num>" + fmtS(j.step_time_s) + "</td><td class=num>" + fmtS(j.mean_step_time_s) + "</td><td class=num>" + fmtN(j.tokens_per_s, 0) +
      "</td><td class=num>" + fmtN(j.goodput_tokens_per_s, 0) + "</td><td class=num>" + fmtPct(j.sustained_fraction) + "</td><td class=num>" + j.checkpoints +
      "</td><td class=num>" + j.restarts + "</td><td>" + timelineSvg(j.phases, t0, t1, (s) => PHASE_COLORS[s.phase] || "#94a3b8") + "</td></tr>";
  }
  h += "</table><div>" + Object.entries(PHASE_COLORS).map(([k, c]) => '<span class="series-key"><svg width="10" height="10"><rect width="10" height="10" fill="' + c + '"/></svg>' + k + "</span>").join("") + "</div>";
  h += '<div id="job-detail"></div>';
  main.innerHTML = h;
  main.querySelectorAll("a[data-job]").forEach((a) => a.addEventListener("click", (ev) => { ev.preventDefault(); showJob(a.dataset.job); }));
  showJob(params.get("job") || jobs[0].job);
}

async function showJob(id) {
  params.set("job", id);
  const d = await api("/api/job?points=240&id=" + encodeURIComponent(id));
  let h = "<h2>" + esc(d.summary.name) + "</h2><div class=grid2>";
  h += '<div class="panel">' + lineChart({ title: "Step time", x: d.ts, series: [{ name: "step time", values: d.step_time_s }], yfmt: fmtS }) + "</div>";
  h += '<div class="panel">' + lineChart({ title: "Throughput (tokens/s)", x: d.ts, series: [{ name: "tokens/s", values: d.tokens_per_s, color: COLORS[2] }], yfmt: (v) => fmtN(v, 0) }) + "</div>";
  h += '<div class="panel">' + (d.power_w.length ? lineChart({ title: "Power profile (" + d.power_gpus + " labelled GPUs)", x: d.ts, series: [{ name: "power", values: d.power_w, color: COLORS[3] }], yfmt: fmtW })
    : '<div class="chart-title">Power profile</div><p class="muted">No GPUs carry this job\'s label in the store.</p>') + "</div>";
  h += '<div class="panel">' + lineChart({ title: "Lifecycle phase", x: d.ts, series: [{ name: "phase", values: d.phase, color: COLORS[4] }], yrange: [-0.3, 7.3], yticks: [0, 1, 2, 3, 4, 5, 6, 7], left: 78, height: 230, yfmt: (v) => PHASE_NAMES[Math.round(v)] || "" }) + "</div></div>";
  document.getElementById("job-detail").innerHTML = h;
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

async function pageIncidents() {
  const run = params.get("run");
  const d = await api("/api/incidents" + (run ? "?run=" + encodeURIComponent(run) : ""));
  let h = "<h1>Incidents</h1>";
  h += '<div class="tabs">Run: <button data-run="" class="' + (!run ? "active" : "") + '">all</button> ' +
    d.runs.map((r) => '<button data-run="' + esc(r) + '" class="' + (r === run ? "active" : "") + '">' + esc(r) + "</button>").join(" ") + "</div>";
  h += "<h2>Pending actions" + (d.mode ? ' <span class="muted">(loop mode: ' + esc(d.mode) + ")</span>" : "") + "</h2>";
  if (d.pending.length) {
    h += '<table id="pending"><tr><th>id</th><th>kind</th><th>target</th><th class=num>value</th><th>why</th><th></th></tr>' + d.pending.map((a) =>
      "<tr data-action=\"" + a.action_id + "\"><td>" + a.action_id + "</td><td>" + esc(a.kind) + "</td><td>" + esc(a.target) + "</td><td class=num>" + fmtN(a.value, 2) +
      "</td><td>" + esc(a.detail) + '</td><td><button class="approve" data-id="' + a.action_id + '">Approve</button> <button class="reject" data-id="' +
      a.action_id + '">Reject</button></td></tr>').join("") + "</table>";
  } else h += '<p class="muted">' + (d.mode ? "Nothing waiting for approval." : "No loop attached to this server.") + "</p>";
  h += "<h2>By cause</h2>";
  if (!d.groups.length) h += '<p class="muted">No incidents recorded.</p>';
  for (const g of d.groups) {
    h += '<div class="panel"><h3>' + esc(g.event_class) + " " + sevPill(g.worst_severity) + ' <span class="muted">' + g.count + " incident(s)</span></h3>" +
      "<table><tr><th>id</th><th>run</th><th>severity</th><th>root</th><th>from</th><th>to</th><th class=num>members</th><th>status</th><th>actions</th><th>effect</th></tr>";
    for (const i of g.incidents) {
      h += "<tr><td>" + i.incident_id + "</td><td>" + esc(i.run) + "</td><td>" + sevPill(i.severity) + "</td><td>" + esc(i.root) + "</td><td>" + fmtTs(i.start_ts) +
        "</td><td>" + fmtTs(i.end_ts) + "</td><td class=num>" + i.n_members + "</td><td>" + esc(i.status) + "</td><td>" +
        (i.actions.map((a) => esc(a.kind + " → " + a.target + (isNum(a.value) ? " = " + fmtN(a.value, 2) : "") + " [" + a.status + "]")).join("<br>") || '<span class="muted">none</span>') +
        "</td><td>" + esc(i.effect) + "</td></tr>";
    }
    h += "</table></div>";
  }
  main.innerHTML = h;
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
  main.innerHTML = h;
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
  h += '<div class="panel">' + stackedBar(mem, fmtBytes, "Memory per GPU") + "</div>";
  h += '<div class="panel">' + stackedBar(step, fmtS, "Step-time breakdown") + "</div>";
  const knee = sw.find((s) => s.knee);
  h += '<div class="grid2"><div class="panel" id="sweep-chart">' + lineChart({ title: "Power sweep: step time vs power limit", x: sw.map((s) => s.power_limit_w), dots: true,
    series: [{ name: "step time", values: sw.map((s) => s.step_time_s) }], yfmt: fmtS, xfmt: (v) => v.toFixed(0) + " W",
    marks: knee ? [{ x: knee.power_limit_w, label: "knee " + knee.power_limit_w.toFixed(0) + " W" }] : [] }) + "</div>";
  h += '<div class="panel">' + lineChart({ title: "Energy per step vs power limit", x: sw.map((s) => s.power_limit_w), dots: true,
    series: [{ name: "energy/step", values: sw.map((s) => s.energy_per_step_j / 1e6), color: COLORS[3] }], yfmt: (v) => v.toFixed(2) + " MJ", xfmt: (v) => v.toFixed(0) + " W",
    marks: knee ? [{ x: knee.power_limit_w, label: "knee" }] : [] }) + "</div></div>";
  document.getElementById("train-out").innerHTML = h;
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
  h += '<div class="panel">' + stackedBar(mem, fmtBytes, "Memory per GPU") + "</div>";
  h += '<div class="grid2"><div class="panel">' + stackedBar(parts(p.prefill, "prefill"), fmtS, "Prefill iteration (" + p.prefill.bound + "-bound, " + fmtS(p.prefill.iteration_s) + ")") + "</div>";
  h += '<div class="panel">' + stackedBar(parts(p.decode, "decode"), fmtS, "Decode iteration (" + p.decode.bound + "-bound, " + fmtS(p.decode.iteration_s) + ")") + "</div></div>";
  if (p.warnings.length) h += p.warnings.map((w) => '<p class="notice">' + esc(w) + "</p>").join("");
  document.getElementById("serve-out").innerHTML = h;
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
