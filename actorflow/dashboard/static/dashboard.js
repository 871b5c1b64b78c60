// actorflow dashboard: draws the snapshots the server pushes over /ws (see actorflow/dashboard/app.py).
// No framework: tables are rebuilt from each snapshot; the two charts are uPlot (static/vendor/, MIT).
"use strict";

const COLORS = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4b5563", "#db2777"];
const $ = (sel) => document.querySelector(sel);
let rateChart = null, histChart = null, rateTasks = [], last = null;

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function bytes(n) {
  if (n == null) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n.toFixed(0)) + " " + u[i];
}
function secs(s) {
  if (s == null) return "–";
  if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
  if (s < 1) return (s * 1e3).toFixed(1) + " ms";
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function num(n, d = 0) { return n == null ? "–" : Number(n).toLocaleString(undefined, {maximumFractionDigits: d, minimumFractionDigits: d}); }
function when(t) { return new Date(t * 1000).toLocaleTimeString(); }
function rows(sel, html, empty, cols) {
  $(sel + " tbody").innerHTML = html.length ? html.join("") : `<tr><td colspan="${cols}" class="muted">${empty}</td></tr>`;
}

function drawTasks(s) {
  const up = s.tasks.filter((t) => t.up).length;
  const total = s.tasks.reduce((a, t) => a + (t.steps_per_second || 0), 0);
  $("#summary").textContent = `${up}/${s.tasks.length} tasks healthy · ${num(total, 1)} steps/s · poll ${s.polls}`;
  rows("#tasks", s.tasks.map((t) => `<tr data-task="${esc(t.task)}">
    <td>${esc(t.task)}</td><td>${esc(t.address)}</td>
    <td class="health ${t.up ? "ok" : "bad"}" title="${esc(t.error || "")}">${t.up ? "healthy" : "DOWN"}</td>
    <td class="num">${t.pid || "–"}</td><td class="num restarts">${t.restarts}</td>
    <td class="num steps">${num(t.steps)}</td><td class="num rate">${num(t.steps_per_second, 1)}</td>
    <td class="num">${num(t.active_steps)}</td><td class="num">${num(t.failures)}</td>
    <td class="num">${num(t.rendezvous_pending)}</td><td class="num">${bytes(t.rss)}</td>
    <td class="num">${secs(t.uptime)}</td></tr>`), "no tasks", 12);
}

function chartWidth(el) { return Math.max(300, el.clientWidth - 4); }

function drawRates(s) {
  const el = $("#rate-chart");
  const tasks = Object.keys(s.series.rates);
  const data = [s.series.time, ...tasks.map((t) => s.series.rates[t])];
  if (!rateChart || tasks.join() !== rateTasks.join()) {
    if (rateChart) rateChart.destroy();
    rateTasks = tasks;
    rateChart = new uPlot({
      width: chartWidth(el), height: 220,
      series: [{}, ...tasks.map((t, i) => ({label: t.replace("/job:", "").replace("/task:", ":"), stroke: COLORS[i % COLORS.length], width: 1.5,
                                            value: (u, v) => v == null ? "–" : v.toFixed(1)}))],
      axes: [{}, {label: "steps/s", size: 50}],
      scales: {y: {range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)]}},
    }, data, el);
  } else {
    rateChart.setData(data);
  }
}

function drawHistogram(s) {
  const el = $("#hist-chart");
  // Only the buckets from the first to the last that holds a step (a bucket either side for context).
  const h = s.step_histogram;
  const used = h.counts.map((c, i) => c > 0 ? i : -1).filter((i) => i >= 0);
  const lo = used.length ? Math.max(0, used[0] - 1) : 0, hi = used.length ? Math.min(h.counts.length, used[used.length - 1] + 2) : 0;
  const labels = h.le.slice(lo, hi).map((b) => b == null ? "+Inf" : "≤" + secs(b));
  const xs = labels.map((_, i) => i);
  const data = [xs, h.counts.slice(lo, hi)];
  const labelKey = labels.join();
  if (!histChart || histChart._labels !== labelKey) {
    if (histChart) histChart.destroy();
    histChart = new uPlot({
      width: chartWidth(el), height: 220,
      series: [{value: (u, v) => labels[v] || ""}, {label: "steps", fill: "#93c5fdcc", stroke: "#2563eb",
                                                     paths: uPlot.paths.bars({size: [0.8, 60]}), points: {show: false}}],
      scales: {x: {time: false, range: [-0.6, Math.max(0.6, labels.length - 0.4)]}, y: {range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)]}},
      axes: [{values: (u, splits) => splits.map((v) => Number.isInteger(v) ? (labels[v] || "") : ""), space: 30, size: 40,
              rotate: 0, font: "10px system-ui"}, {label: "steps", size: 50}],
      legend: {show: true},
    }, data, el);
    histChart._labels = labelKey;
  } else {
    histChart.setData(data);
  }
}

function drawOps(s) {
  const max = Math.max(1e-12, ...s.top_ops.map((o) => o.share));
  rows("#ops", s.top_ops.map((o) => `<tr><td>${esc(o.op)}</td>
    <td><span class="bar" style="width:${(80 * o.share / max).toFixed(1)}px"></span>${(100 * o.share).toFixed(1)}%</td>
    <td class="num">${o.seconds.toFixed(4)}</td><td class="num">${num(o.activations)}</td><td class="num">${secs(o.mean_us == null ? null : o.mean_us / 1e6)}</td></tr>`),
    "no traced step yet (one step in ACTORFLOW_METRICS_TRACE_EVERY is sampled)", 5);
}

function drawPairs(s) {
  const prev = {};
  if (last) for (const p of last.pairs) prev[p.src + ">" + p.dst] = p;
  const dt = last ? s.time - last.time : 0;
  rows("#pairs", s.pairs.map((p) => {
    const q = prev[p.src + ">" + p.dst];
    const rate = q && dt > 0 ? (Math.max(p.sent_bytes, p.received_bytes) - Math.max(q.sent_bytes, q.received_bytes)) / dt : null;
    return `<tr><td>${esc(p.src)}</td><td>${esc(p.dst)}</td><td class="num sent">${bytes(p.sent_bytes)}</td>
      <td class="num">${bytes(p.received_bytes)}</td><td class="num">${num(Math.max(p.sent_messages, p.received_messages))}</td>
      <td class="num">${rate == null ? "–" : bytes(rate) + "/s"}</td></tr>`;
  }), "no tensor has crossed tasks yet", 6);
}

function drawQueues(s) {
  const r = s.queues.map((q) => `<tr><td>${esc(q.task)}</td><td>${esc(q.name)}</td><td>queue</td><td class="num qsize">${num(q.value)}</td></tr>`)
    .concat(s.accumulators.map((a) => `<tr><td>${esc(a.task)}</td><td>${esc(a.name)}</td><td>accumulator</td><td class="num">${num(a.value)}</td></tr>`));
  rows("#queues", r, "no queue or accumulator", 4);
}

function drawCheckpoints(s) {
  rows("#checkpoints", s.checkpoints.map((c) => `<tr><td>${when(c.time)}</td><td>${esc(c.task)}</td>
    <td title="${esc(c.prefix)}">${esc(c.prefix.split("/").pop())}</td><td class="num">${c.shard + 1}/${c.num_shards}</td>
    <td class="num">${bytes(c.bytes)}</td><td class="num">${secs(c.seconds)}</td></tr>`), "no checkpoint written yet", 6);
}

function drawEvents(s) {
  const ev = s.events.slice().reverse();
  $("#events").innerHTML = ev.length ? ev.map((e) => `<li class="${esc(e.kind)}">${when(e.time)} · ${esc(e.text)}</li>`).join("")
    : '<li class="muted">none: every task has kept its process</li>';
}

let graphKey = null, graphLoading = false;
async function drawGraph() {
  if (graphLoading) return;
  graphLoading = true;
  try {
    const r = await fetch("/api/graph.svg", {credentials: "same-origin"});
    const el = $("#graph");
    if (r.ok) el.innerHTML = await r.text();
    else el.innerHTML = `<p class="muted">${esc((await r.json()).error)}</p>`;
  } catch (e) {
    $("#graph").innerHTML = `<p class="muted">${esc(e)}</p>`;
  } finally {
    graphLoading = false;
  }
}
$("#graph-refresh").addEventListener("click", () => drawGraph());

function draw(s) {
  drawTasks(s); drawRates(s); drawHistogram(s); drawOps(s); drawPairs(s); drawQueues(s); drawCheckpoints(s); drawEvents(s);
  // The picture changes only when a task registers a graph or restarts.
  if (s.graph_version !== graphKey) { graphKey = s.graph_version; drawGraph(); }
  last = s;
  document.body.dataset.polls = s.polls;
}

function connect() {
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  ws.onopen = () => { $("#live").className = "live on"; };
  ws.onmessage = (m) => draw(JSON.parse(m.data));
  ws.onclose = () => { $("#live").className = "live off"; setTimeout(connect, 2000); };
}
window.addEventListener("resize", () => {
  if (rateChart) rateChart.setSize({width: chartWidth($("#rate-chart")), height: 220});
  if (histChart) histChart.setSize({width: chartWidth($("#hist-chart")), height: 220});
});
connect();
