// twinloop charts: one small JSON chart spec → one Apache ECharts chart. The HTML reports (inlined) and the
// dashboard (served from /vendor/) load this same file, so a chart looks and reads the same in both.
//
// Spec kinds (times are seconds: epoch seconds are shown as UTC clock times, smaller values as simulation time):
//   line     {x: {time: true} | {unit}, y: {unit, categories?, min?, max?}, series: [{name, x?, y, color?, dash?,
//             dots?}], marks: [{x, label}], bands: [{x0, x1, label, color}], rules: [{y, label, color}]}
//   heatmap  {x: [ts], rows: [name], values: [[row-major]], unit, levels_of?: [[...]], levels: [{min?, max?,
//             color, label}]}   values are shown, levels_of (default: values) picks the colour level
//   timeline {items: [{lane, start, end, label, color}], x0?, x1?}
//   bar      {parts: [{name, value}], unit}      one horizontal stacked bar
//   spark    {x, y, color}                       a tiny line, no axes
// Every spec may carry title and height (px). Values from data are shown as text only (ECharts draws on canvas).
(function (root) {
  "use strict";
  const PALETTE = ["#2463eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#be185d", "#4b5563"];
  const EPOCH_MIN_S = 1e9;
  const INK = "#1d2430", MUTED = "#475569", GRID = "#e5e7eb";
  const isNum = (v) => typeof v === "number" && isFinite(v);

  // ---------------------------------------------------------------------------------------------- numbers
  function trim(x, sig) {
    const t = Number(x.toPrecision(sig));
    return String(t);
  }
  function si(v, unit) {
    const a = Math.abs(v);
    for (const [s, p] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) if (a >= s) return trim(v / s, 3) + " " + p + unit;
    return trim(v, 3) + (unit ? " " + unit : "");
  }
  function duration(s) {
    const a = Math.abs(s);
    if (a === 0) return "0 s";
    if (a < 1) return trim(s * 1e3, 3) + " ms";
    if (a < 120) return trim(s, 3) + " s";
    if (a < 7200) return trim(s / 60, 3) + " min";
    return trim(s / 3600, 3) + " h";
  }
  function fmt(v, unit) {
    if (!isNum(v)) return "—";
    switch (unit || "") {
      case "W": case "J": case "Wh": return si(v, unit);
      case "B": return trim(v / 1e9, 3) + " GB";
      case "s": return duration(v);
      case "%": return trim(100 * v, 3) + " %";
      case "": return Math.abs(v) >= 1e4 ? si(v, "") : trim(v, 4);
      default: return trim(v, 4) + " " + unit;
    }
  }

  // ---------------------------------------------------------------------------------------------- time
  const STEPS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  function pad2(n) { return String(n).padStart(2, "0"); }
  function simClock(s) {   // simulation time: h:mm:ss from the start of the run
    const t = Math.round(s), sign = t < 0 ? "-" : "", a = Math.abs(t);
    const h = Math.floor(a / 3600), m = Math.floor((a % 3600) / 60), sec = a % 60;
    return sign + h + ":" + pad2(m) + ":" + pad2(sec);
  }
  function utcClock(s, step) {
    const d = new Date(s * 1000).toISOString();
    if (step >= 86400) return d.slice(5, 10);
    return d.slice(11, step >= 60 ? 16 : 19);
  }
  function simTick(s, step) { const c = simClock(s); return step >= 60 && c.endsWith(":00") ? c.slice(0, -3) : c; }
  function isAbsolute(xs) { return xs.some((x) => isNum(x) && x >= EPOCH_MIN_S); }
  function stepFor(span) { return STEPS_S.find((s) => span / s <= 6) || Math.ceil(span / 6 / 86400) * 86400; }
  // ticks: s, the step between ticks; tooltips: s, 1 (full precision)
  function timeLabel(s, step, absolute) { return absolute ? utcClock(s, step) : step >= 60 ? simTick(s, step) : simClock(s); }
  function timeNote(absolute) { return absolute ? "time: UTC" : "time: simulation h:mm"; }
  // A value axis over seconds spanning the data, with ticks on round clock steps (10 s, 1 min, 5 min, 1 h …).
  function timeAxis(lo, hi, absolute) {
    const step = stepFor(Math.max(hi - lo, 1));
    const fl = Math.floor(lo / step) * step, ce = Math.ceil(hi / step) * step;   // snap to a round tick when near
    if (lo - fl <= 0.03 * (hi - lo)) lo = fl;
    if (ce - hi <= 0.03 * (hi - lo)) hi = ce;
    const ticks = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + 1e-9; t += step) ticks.push(t);
    return {
      type: "value", min: lo, max: hi,
      axisTick: { customValues: ticks },
      axisLabel: { color: MUTED, hideOverlap: true, customValues: ticks, formatter: (v) => timeLabel(v, step, absolute) },
      splitLine: { show: false },
    };
  }

  function yAxis(y) {
    y = y || {};
    const axis = {
      type: "value",
      scale: !y.zero,
      axisLabel: { color: MUTED, formatter: (v) => fmt(v, y.unit) },
      splitLine: { lineStyle: { color: GRID } },
    };
    if (y.categories) {
      Object.assign(axis, { min: 0, max: y.categories.length - 1, interval: 1, scale: false });
      axis.axisLabel.formatter = (v) => (Number.isInteger(v) ? y.categories[v] || "" : "");
    }
    else {   // a flat series: pad the range instead of magnifying float noise
      const flat = (r) => r.max - r.min <= 1e-6 * Math.max(Math.abs(r.max), 1e-12);
      const unitOf = (v) => (v ? Math.pow(10, Math.floor(Math.log10(Math.abs(v) * 0.01))) : 0.1);
      const mid = (r) => Math.round(r.min / unitOf(r.min)) * unitOf(r.min);
      axis.min = (r) => (flat(r) ? mid(r) - 5 * unitOf(r.min) : y.zero ? Math.min(0, r.min) : undefined);
      axis.max = (r) => (flat(r) ? mid(r) + 5 * unitOf(r.min) : undefined);
    }
    if (isNum(y.min)) axis.min = y.min;
    if (isNum(y.max)) axis.max = y.max;
    return axis;
  }

  function base(spec) {
    return {
      animation: false,
      textStyle: { fontFamily: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", color: INK },
      title: spec.title ? { text: spec.title, left: 0, top: 0, textStyle: { fontSize: 13, fontWeight: 600, color: INK, width: spec.title_width || 0 } } : undefined,
      tooltip: { renderMode: "richText", confine: true },
    };
  }

  // ---------------------------------------------------------------------------------------------- kinds
  function lineOption(spec) {
    const series = spec.series || [];
    const xsOf = (s) => s.x || spec.x_values || [];
    const allX = [].concat(...series.map(xsOf));
    const finiteX = allX.filter(isNum);
    const timeX = !!(spec.x && spec.x.time);
    const absolute = timeX && isAbsolute(finiteX);
    const lo = Math.min(...finiteX), hi = Math.max(...finiteX);
    const xUnit = (spec.x && spec.x.unit) || "";
    const xAxis = timeX ? timeAxis(lo, hi, absolute)
      : { type: "value", scale: true, axisLabel: { color: MUTED, hideOverlap: true, formatter: (v) => fmt(v, xUnit) }, splitLine: { lineStyle: { color: GRID } } };
    const unit = (spec.y && spec.y.unit) || "";
    const cats = spec.y && spec.y.categories;
    const out = series.map((s, i) => {
      const xs = xsOf(s), color = s.color || PALETTE[i % PALETTE.length];
      return {
        type: "line", name: s.name, connectNulls: true, showSymbol: !!s.dots, symbolSize: 5,
        step: s.step ? "end" : false,
        data: xs.map((x, j) => [x, isNum(s.y[j]) ? s.y[j] : null]),
        lineStyle: { width: 1.6, color, type: s.dash ? "dashed" : "solid" }, itemStyle: { color },
      };
    });
    const anchor = out[0] || { type: "line", data: [] };
    if ((spec.marks || []).length) {
      anchor.markLine = { symbol: "none", silent: true, lineStyle: { color: INK, type: "dashed" },
        label: { formatter: (p) => p.name, color: INK, position: "insideEndTop" },
        data: spec.marks.map((m) => ({ name: m.label, xAxis: m.x })) };
    }
    if ((spec.rules || []).length) {
      const ml = anchor.markLine || { symbol: "none", silent: true, data: [] };
      ml.data = ml.data.concat(spec.rules.map((r) => ({ name: r.label, yAxis: r.y,
        lineStyle: { color: r.color || "#b91c1c", type: "dotted", width: 1.5 },
        label: { formatter: (p) => p.name, color: r.color || "#b91c1c", position: "insideStartTop" } })));
      anchor.markLine = ml;
    }
    if ((spec.bands || []).length) {
      anchor.markArea = { silent: true, label: { color: INK, fontSize: 10, position: "insideTop" },
        data: spec.bands.map((b) => [{ name: b.label_visible ? b.label : "", xAxis: b.x0, itemStyle: { color: b.color || "#f59e0b", opacity: b.opacity || 0.22 } }, { xAxis: b.x1 }]) };
    }
    const o = base(spec);
    o.legend = series.length > 1 || spec.legend ? { top: spec.title ? 20 : 0, right: 0, textStyle: { color: MUTED, fontSize: 11 }, itemHeight: 6 } : undefined;
    o.grid = { left: 8, right: 22, top: spec.title ? 44 : 18, bottom: 4, containLabel: true };
    o.xAxis = xAxis;
    o.yAxis = yAxis(spec.y);
    o.tooltip.trigger = "axis";
    o.tooltip.valueFormatter = (v) => (cats ? cats[Math.round(v)] || "" : fmt(v, unit));
    if (timeX) {
      o.tooltip.axisPointer = { label: { formatter: (p) => timeLabel(p.value, 1, absolute) } };
      o.graphic = [{ type: "text", right: 0, bottom: 0, style: { text: timeNote(absolute), fill: MUTED, fontSize: 10 } }];
      o.grid.bottom = 14;
    }
    o.series = out;
    return o;
  }

  function heatmapOption(spec) {
    const xs = spec.x || [], rows = spec.rows || [], vals = spec.values || [], lv = spec.levels_of || vals;
    const absolute = isAbsolute(xs), step = stepFor(Math.max(xs.length ? xs[xs.length - 1] - xs[0] : 0, 1));
    const onStep = xs.map((t, i) => i > 0 && Math.floor(t / step) !== Math.floor(xs[i - 1] / step));
    const data = [];
    rows.forEach((_, r) => xs.forEach((__, c) => {
      const v = vals[r] && vals[r][c];
      if (isNum(v)) data.push([c, r, isNum(lv[r][c]) ? lv[r][c] : v, v]);
    }));
    const o = base(spec);
    o.grid = { left: 8, right: 22, top: spec.title ? 30 : 6, bottom: 44, containLabel: true };
    o.xAxis = { type: "category", data: xs.map((t) => timeLabel(Math.floor(t / step) * step, step, absolute)), splitArea: { show: false },
      axisTick: { interval: (i) => onStep[i] }, axisLabel: { color: MUTED, hideOverlap: true, interval: (i) => onStep[i] } };
    o.graphic = [{ type: "text", right: 0, bottom: 30, style: { text: timeNote(absolute), fill: MUTED, fontSize: 10 } }];
    o.yAxis = { type: "category", data: rows, inverse: true, axisLabel: { color: MUTED, fontSize: 11 } };
    o.visualMap = { type: "piecewise", dimension: 2, orient: "horizontal", left: "center", bottom: 0,
      textStyle: { color: MUTED, fontSize: 11 }, itemWidth: 14, itemHeight: 10,
      pieces: (spec.levels || []).map((l) => {
        const p = { color: l.color, label: l.label };
        if (isNum(l.min)) p.gte = l.min;
        if (isNum(l.max)) p.lt = l.max;
        return p;
      }) };
    o.tooltip.trigger = "item";
    o.tooltip.formatter = (p) => rows[p.value[1]] + " · " + timeLabel(xs[p.value[0]], 1, absolute) + "\n" + fmt(p.value[3], spec.unit) +
      (spec.levels_of ? " (" + (spec.levels_label || "level") + " " + fmt(p.value[2], spec.levels_unit || spec.unit) + ")" : "");
    o.series = [{ type: "heatmap", data, progressive: 0, emphasis: { disabled: true } }];
    return o;
  }

  function timelineOption(spec) {
    const items = spec.items || [];
    const lanes = spec.lanes || [...new Set(items.map((i) => i.lane))];
    const starts = items.map((i) => i.start), ends = items.map((i) => i.end);
    const lo = isNum(spec.x0) ? spec.x0 : Math.min(...starts), hi = isNum(spec.x1) ? spec.x1 : Math.max(...ends);
    const absolute = isAbsolute([lo, hi]);
    const data = items.map((it) => ({ value: [lanes.indexOf(it.lane), it.start, it.end], name: it.label, itemStyle: { color: it.color || PALETTE[0] } }));
    const o = base(spec);
    o.grid = { left: 8, right: 22, top: spec.title ? 30 : 6, bottom: 14, containLabel: true };
    o.xAxis = timeAxis(lo, hi, absolute);
    o.graphic = [{ type: "text", right: 0, bottom: 0, style: { text: timeNote(absolute), fill: MUTED, fontSize: 10 } }];
    o.yAxis = { type: "category", data: lanes, inverse: true, axisLabel: { color: MUTED, fontSize: 11 }, splitLine: { show: true, lineStyle: { color: GRID } } };
    o.tooltip.trigger = "item";
    o.tooltip.formatter = (p) => p.name + "\n" + timeLabel(p.value[1], 1, absolute) + " → " + timeLabel(p.value[2], 1, absolute);
    o.series = [{
      type: "custom", data, encode: { x: [1, 2], y: 0 },
      renderItem: (params, api) => {
        const a = api.coord([api.value(1), api.value(0)]), b = api.coord([api.value(2), api.value(0)]);
        const h = api.size([0, 1])[1] * 0.6;
        const shape = { x: a[0], y: a[1] - h / 2, width: Math.max(3, b[0] - a[0]), height: h };
        const clipped = root.echarts.graphic.clipRectByRect(shape, params.coordSys);
        return clipped && { type: "rect", shape: clipped, style: api.style() };
      },
    }];
    return o;
  }

  function barOption(spec) {
    const parts = (spec.parts || []).map((p) => ({ name: p.name, value: isNum(p.value) && p.value > 0 ? p.value : 0, shown: p.value }));
    const total = parts.reduce((a, p) => a + p.value, 0) || 1;
    const o = base(spec);
    o.grid = { left: 0, right: 0, top: spec.title ? 26 : 2, height: 22 };
    o.xAxis = { type: "value", max: total, show: false };
    o.yAxis = { type: "category", data: [""], show: false };   // the legend is HTML under the plot (it wraps)
    o.tooltip.trigger = "item";
    o.tooltip.formatter = (p) => p.seriesName + ": " + fmt(parts[p.seriesIndex].shown, spec.unit);
    o.series = parts.map((p, i) => ({ type: "bar", name: p.name, stack: "all", barWidth: 22, data: [p.value], itemStyle: { color: PALETTE[i % PALETTE.length] } }));
    return o;
  }

  function sparkOption(spec) {
    const xs = spec.x || [];
    return {
      animation: false,
      grid: { left: 1, right: 1, top: 2, bottom: 2 },
      xAxis: { type: "value", show: false, min: "dataMin", max: "dataMax" },
      yAxis: { type: "value", show: false, scale: true },
      series: [{ type: "line", showSymbol: false, connectNulls: true, silent: true, lineStyle: { width: 1.3, color: spec.color || PALETTE[0] },
        data: xs.map((x, j) => [x, isNum(spec.y[j]) ? spec.y[j] : null]) }],
    };
  }

  const KINDS = { line: lineOption, heatmap: heatmapOption, timeline: timelineOption, bar: barOption, spark: sparkOption };
  const DEFAULT_HEIGHT = { line: 240, heatmap: 320, timeline: 120, bar: 52, spark: 26 };

  // The bar's key: one swatch and "name value" per part, as text that wraps with the page.
  function barKeys(spec) {
    const keys = document.createElement("div");
    keys.className = "chart-keys";
    (spec.parts || []).forEach((p, i) => {
      const k = document.createElement("span"), sw = document.createElement("i");
      k.className = "series-key";
      sw.style.background = PALETTE[i % PALETTE.length];
      k.append(sw, document.createTextNode(p.name + " " + fmt(p.value, spec.unit)));
      keys.append(k);
    });
    return keys;
  }

  function hasData(spec) {
    if (spec.kind === "line") return (spec.series || []).some((s) => (s.y || []).some(isNum));
    if (spec.kind === "heatmap") return (spec.rows || []).length > 0 && (spec.x || []).length > 0;
    if (spec.kind === "timeline") return (spec.items || []).length > 0;
    if (spec.kind === "bar") return (spec.parts || []).length > 0;
    return (spec.y || []).some(isNum);
  }

  const live = new Set();
  function render(el, spec) {
    const echarts = root.echarts;
    disposeIn(el);
    const old = echarts.getInstanceByDom(el);
    if (old) { live.delete(old); old.dispose(); }
    el.textContent = "";
    if (!hasData(spec)) {
      el.classList.add("chart-empty");
      el.textContent = (spec.title ? spec.title + ": " : "") + (spec.empty || "no data in this range");
      return null;
    }
    const height = spec.height || DEFAULT_HEIGHT[spec.kind] || 240;
    let host = el;
    if (spec.kind === "bar") {
      host = document.createElement("div");
      el.append(host, barKeys(spec));
    }
    if (spec.kind !== "spark") host.style.height = height + "px";
    const chart = echarts.init(host, null, { renderer: "canvas", height: height });
    const option = KINDS[spec.kind](spec);
    option.useUTC = true;
    chart.setOption(option);
    live.add(chart);
    return chart;
  }
  function renderAll(scope) {
    (scope || document).querySelectorAll("[data-chart]").forEach((el) => render(el, JSON.parse(el.getAttribute("data-chart"))));
  }
  function disposeIn(scope) {
    (scope || document).querySelectorAll("[_echarts_instance_]").forEach((el) => {
      const c = root.echarts.getInstanceByDom(el);
      if (c) { live.delete(c); c.dispose(); }
    });
  }
  let pending = 0;
  root.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(() => live.forEach((c) => { if (!c.isDisposed()) c.resize(); }), 100);
  });

  root.twinloopCharts = { render, renderAll, disposeIn, fmt, timeLabel, isAbsolute, PALETTE };
})(window);
