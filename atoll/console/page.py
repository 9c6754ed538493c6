"""The console's single page: polls ``/api/graphs`` every second and computes the rates between two polls."""

PAGE = r"""<!doctype html>
<html><head><meta charset="utf-8"><title>Atoll console</title>
<style>
body { font-family: Helvetica, Arial, sans-serif; margin: 16px; color: #222; background: #fafafa; }
h1 { font-size: 20px; margin: 0 0 12px 0; } h1 small { font-weight: normal; color: #777; font-size: 13px; }
.graph { background: #fff; border: 1px solid #ddd; border-radius: 8px; padding: 12px 16px; margin-bottom: 16px; }
.graph h2 { font-size: 16px; margin: 0 0 8px 0; display: flex; gap: 12px; align-items: center; }
.state { font-size: 12px; padding: 2px 8px; border-radius: 10px; background: #e0e0e0; }
.state.running { background: #d4f5d4; } .state.failed { background: #f8d0d0; }
button.cancel { margin-left: auto; background: #c0392b; color: #fff; border: 0; border-radius: 5px;
  padding: 5px 12px; cursor: pointer; } button.cancel:disabled { background: #bbb; cursor: default; }
.drawing { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12px; margin-top: 8px; }
th, td { border-bottom: 1px solid #eee; padding: 3px 10px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
</style></head>
<body>
<h1>Atoll console <small id="updated"></small></h1>
<div id="graphs"><p id="empty">No graph has run yet.</p></div>
<script>
const prev = {};      // "graph/island" -> {t, in, out}
const drawn = {};     // graph id -> true once its drawing is in
function num(n) { if (n == null) return "–"; if (n >= 1e6) return (n/1e6).toFixed(1)+"M";
  if (n >= 1e3) return (n/1e3).toFixed(1)+"k"; return String(Math.round(n)); }
function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c])); }
function counts(i) {
  const hasIn = (i.inputs && i.inputs.length) || i.elements_in;
  const src = i.source_elements || ((i.expected != null) ? 0 : null);  // null: its sources do not count
  return {in: hasIn ? (i.elements_in||0) : src, out: i.elements_out||0, events: i.events||0};
}
function section(g) {
  let el = document.getElementById("graph-" + g.id);
  if (el) return el;
  el = document.createElement("div");
  el.className = "graph"; el.id = "graph-" + g.id; el.dataset.graph = g.id;
  el.innerHTML = '<h2><span class="name">' + esc(g.name) + '</span><span class="state"></span>' +
    '<button class="cancel" data-graph="' + g.id + '">Cancel</button></h2>' +
    '<div class="drawing"></div><table class="islands"><thead><tr><th>island</th><th>state</th><th>node</th>' +
    '<th>in/s</th><th>out/s</th><th>in</th><th>out</th><th>buffer</th><th>demand</th><th>watermark</th>' +
    '</tr></thead><tbody></tbody></table>';
  el.querySelector("button.cancel").onclick = (ev) => {
    ev.target.disabled = true;
    fetch("/api/graphs/" + g.id + "/cancel", {method: "POST"});
  };
  const list = document.getElementById("graphs");
  list.insertBefore(el, list.firstChild);
  fetch("/api/graphs/" + g.id + ".svg").then(r => r.text()).then(svg => {
    el.querySelector(".drawing").innerHTML = svg; drawn[g.id] = true; });
  return el;
}
function render(graphs) {
  const now = performance.now() / 1000;
  const empty = document.getElementById("empty"); if (empty && graphs.length) empty.remove();
  for (const g of graphs) {
    const el = section(g);
    const st = el.querySelector(".state");
    st.textContent = g.state; st.className = "state " + g.state.split(":")[0];
    if (!g.running) el.querySelector("button.cancel").disabled = true;
    const rows = [];
    for (const i of g.islands) {
      const key = g.id + "/" + i.name, c = counts(i), p = prev[key];
      let rin = null, rout = null, rev = null;
      if (p && now > p.t) { const dt = now - p.t; rin = c.in == null ? null : (c.in-p.in)/dt;
        rout = (c.out-p.out)/dt; rev = (c.events-p.events)/dt; }
      prev[key] = {t: now, in: c.in, out: c.out, events: c.events};
      const wm = (i.inputs || []).map(x => x.watermark == null ? "–" : x.watermark).join(", ") || "–";
      const fill = i.buffer_fill == null ? "–" : Math.round(100 * i.buffer_fill) + "%";
      const node = i.node_id ? i.node_id.slice(0, 8) : (i.pid ? "pid " + i.pid : "driver");
      rows.push('<tr data-island="' + esc(i.name) + '"><td>' + esc(i.name) + '</td><td class="istate">' + esc(i.state) +
        '</td><td>' + esc(node) + '</td><td class="rate-in">' + (rin == null ? "–" : num(rin)) + '</td><td class="rate-out">' +
        (rout == null ? "–" : num(rout)) + '</td><td class="in">' + num(c.in) + '</td><td class="out">' + num(c.out) +
        '</td><td class="fill">' + fill + '</td><td class="demand">' + num(i.demand) + '</td><td>' + esc(wm) + '</td></tr>');
      const fig = el.querySelector('text.figures[data-island="' + CSS.escape(i.name) + '"]');
      if (fig) {
        let t = esc(i.state) + (rin == null ? "" : " · in " + num(rin) + "/s") + (rout == null ? "" : " · out " + num(rout) + "/s");
        if (!rin && !rout && rev > 0) t += " · busy " + num(rev) + " ev/s";
        if (i.buffer_fill != null) t += " · buffer " + fill;
        fig.textContent = t;
      }
    }
    el.querySelector("tbody").innerHTML = rows.join("");
  }
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
}
async function tick() {
  try { const r = await fetch("/api/graphs"); render(await r.json()); } catch (e) { }
  setTimeout(tick, 1000);
}
tick();
</script></body></html>
"""
