// The dashboard's one script: refresh a server-rendered region while training runs, and draw the
// training charts with uPlot (vendored beside this file). Same-origin requests carry the page's cookie.
"use strict";
const LightningUI = (() => {
  const stamp = (id) => {
    const el = document.getElementById(id);
    if (el) el.textContent = "updated " + new Date().toLocaleTimeString();
  };

  // Every `ms`, while the toggle is checked, replace the region with its `data-src` fragment.
  function liveRegion(regionId, toggleId, stampId, ms) {
    const region = document.getElementById(regionId);
    const toggle = document.getElementById(toggleId);
    let busy = false;
    async function tick() {
      if (busy || !toggle.checked || document.hidden) return;
      busy = true;
      try {
        const response = await fetch(region.dataset.src, { credentials: "same-origin" });
        if (response.ok) {
          region.innerHTML = await response.text();
          stamp(stampId);
        } else if (response.status === 401) {
          location.reload();  // the token is gone: the page itself asks for one
        }
      } finally {
        busy = false;
      }
    }
    stamp(stampId);
    setInterval(tick, ms);
  }

  // A y range never narrower than 1% of the values' size: uPlot's axis splits run away on a range
  // within float noise (a statistic such as 1.0, 0.99999994, 0.99999994).
  function yRange(unit) {
    return (u, min, max) => {
      if (min == null || max == null) return [0, 1];
      if (unit && min >= 0 && max <= 1) return [0, 1.02];
      const size = Math.max(Math.abs(min), Math.abs(max));
      const span = Math.max(max - min, size * 0.01, 1e-12);
      const mid = (min + max) / 2;
      return [mid - span * 0.6, mid + span * 0.6];
    };
  }

  const STEP_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
  const tick = (v) => {
    if (v === 0) return "0";
    const size = Math.abs(v);
    return size < 1e-3 || size >= 1e5 ? v.toExponential(1) : String(+v.toPrecision(4));
  };

  const COLORS = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#db2777"];
  const charts = {};

  function drawChart(container, spec) {
    const names = Object.keys(spec.series);
    const data = [spec.steps, ...names.map((n) => spec.series[n])];
    let box = document.getElementById("chart-" + spec.key);
    if (!box) {
      box = document.createElement("figure");
      box.id = "chart-" + spec.key;
      box.className = "chart";
      box.innerHTML = "<figcaption></figcaption><div class='plot'></div>";
      container.appendChild(box);
    }
    box.querySelector("figcaption").textContent = spec.title;
    box.dataset.points = String(spec.steps.length);
    const old = charts[spec.key];
    if (old && old.series.length === data.length) {
      old.setData(data);
      return;
    }
    if (old) old.destroy();
    const wide = spec.key === "reward" || spec.key === "slices";
    const opts = {
      width: wide ? Math.min(container.clientWidth - 8, 980) : 320,
      height: wide ? 280 : 180,
      scales: { x: { time: false }, y: { range: yRange(wide) } },
      axes: [
        { label: "step", incrs: STEP_INCRS },
        { values: (u, splits) => splits.map(tick), size: 60 },
      ],
      series: [
        { label: "step" },
        ...names.map((n, i) => ({
          label: n,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          spanGaps: true,
          points: { show: true, size: 6 },
        })),
      ],
      legend: { show: true },
    };
    charts[spec.key] = new uPlot(opts, data, box.querySelector(".plot"));
  }

  // The run's learning-health lines (null: the run recorded none, and the panel stays hidden).
  function showHealth(health) {
    const panel = document.getElementById("health");
    if (!panel) return;
    panel.hidden = !health;
    if (!health) return;
    document.getElementById("health-step").textContent = "after step " + health.step;
    document.getElementById("health-lines").replaceChildren(...health.lines.map((text) => {
      const item = document.createElement("li");
      item.textContent = text;
      return item;
    }));
    document.getElementById("health-none").hidden = health.lines.length > 0;
  }

  // Fetch the run's metrics and draw (or update) one chart per group; again every `ms` while live.
  function trainingCharts(url, containerId, toggleId, stampId, ms) {
    const container = document.getElementById(containerId);
    const toggle = document.getElementById(toggleId);
    async function load() {
      const response = await fetch(url, { credentials: "same-origin" });
      if (!response.ok) return;
      const body = await response.json();
      document.getElementById("metrics-source").textContent = body.source;
      document.getElementById("metrics-rows").textContent = String(body.rows);
      document.getElementById("no-metrics").hidden = body.charts.length > 0;
      body.charts.forEach((spec) => drawChart(container, spec));
      showHealth(body.health);
      container.dataset.ready = "1";
      stamp(stampId);
    }
    load();
    setInterval(() => { if (toggle.checked && !document.hidden) load(); }, ms);
  }

  // Reload the page every `ms` (a rollout still running), keeping the scroll position.
  function reloadEvery(ms) {
    const key = "lightningrl-scroll:" + location.pathname;
    const saved = sessionStorage.getItem(key);
    if (saved) window.scrollTo(0, Number(saved));
    setTimeout(() => {
      sessionStorage.setItem(key, String(window.scrollY));
      location.reload();
    }, ms);
  }

  // What a page asks for, in data attributes (the Content-Security-Policy allows no inline script).
  function boot() {
    for (const el of document.querySelectorAll("[data-src][data-live-ms]")) {
      liveRegion(el.id, el.dataset.toggle, el.dataset.stamp, Number(el.dataset.liveMs));
    }
    for (const el of document.querySelectorAll("[data-metrics]")) {
      trainingCharts(el.dataset.metrics, el.id, el.dataset.toggle, el.dataset.stamp, Number(el.dataset.liveMs));
    }
    if (document.body.dataset.reloadMs) reloadEvery(Number(document.body.dataset.reloadMs));
  }
  document.addEventListener("DOMContentLoaded", boot);  // after every script, uPlot's included

  return { liveRegion, trainingCharts, reloadEvery, charts };
})();
