// The report page: reads window.POSLAB_REPORT (data/report.js, written by notebooks/report.py)
// and fills index.html. Text goes in with textContent only; charts are Vega-Lite specs made by
// notebooks/poslab_analysis/figures/charts.py, drawn by vega-embed. Every chart's view is kept in `views`, so
// the gate check box can set the signal `include_dropped` of all of them.
"use strict";

(() => {
  const data = window.POSLAB_REPORT;
  const views = [];
  const { $, el, SCHEMA, embed } = poslabPage;  // web/page.js

  document.title = "poslab report: " + data.study;
  $("study-name").textContent = data.study;
  $("study-directory").textContent = data.directory + " · " + data.summary_rows +
    " rows in summary.csv · " + data.runs.length + " runs";

  // --- claims and tables ----------------------------------------------------------------------
  function markdownOr(container, text, error, absent) {
    if (text) poslabMarkdown.render(container, text);
    else container.appendChild(el("p", error ? "could not be made: " + error : absent,
                                  error ? "error" : "muted"));
  }
  markdownOr($("claims-body"), data.claims, data.claims_error,
             "No claims table is defined for this study (notebooks/claims.py).");
  markdownOr($("tables-body"), data.tables,
             data.tables_error, "No tables (notebooks/study_tables.py).");
  markdownOr($("protocol-body"), data.protocol, null, "This study has no protocol file.");
  if (data.protocol_path) $("protocol-body").prepend(el("p", "from " + data.protocol_path, "muted"));
  $("study-toml").textContent = data.study_toml || "(no study.toml)";

  // --- figures --------------------------------------------------------------------------------
  const figuresBody = $("figures-body");
  for (const figure of data.figures) {
    const box = el("div", null, "figure");
    box.dataset.figure = figure.name;
    box.appendChild(el("h3", figure.title + " (" + figure.name + ")"));
    const panels = el("div", null, "panels");
    box.appendChild(panels);
    figuresBody.appendChild(box);
    for (const spec of figure.panels) {
      const holder = el("div", null, "chart");
      panels.appendChild(holder);
      embed(holder, spec).then((result) => views.push(result.view));
    }
  }
  for (const name of data.not_interactive)
    figuresBody.appendChild(el("p", "Not interactive yet: " + name, "muted"));
  $("include-dropped").addEventListener("change", (event) => {
    for (const view of views)
      if (view.getState().signals.hasOwnProperty("include_dropped"))
        view.signal("include_dropped", event.target.checked).runAsync();
  });

  // --- run table ------------------------------------------------------------------------------
  const format = (x, digits) => (x === null || x === undefined ? "" : Number(x).toFixed(digits));
  const columns = [
    { key: "curve", title: "curve" },
    { key: "id", title: "run" },
    { key: "status", title: "status" },
    { key: "diff", title: "difference from the base", text: (r) => (r.diff === null ? "" : r.diff.join(", ") || "(base)") },
    // Which gate: a language model's is its loss below the bigram baseline (not retrieval).
    { key: "gate", title: "in-distribution gate",
      text: (r) => (r.gate === null ? "" : (r.gate_kind ? r.gate_kind + " gate: " : "") +
                                             (r.gate ? "pass" : "fail")) },
    { key: "loss", title: "loss (main evaluation)", num: 4 },
    { key: "train_loss", title: "final train loss", num: 4 },
    { key: "commit", title: "commit", text: (r) => (r.commit || "").slice(0, 10) },
    { key: "cpu", title: "CPU" },
    { key: "threads", title: "threads" },
    { key: "train_seconds", title: "train time (s)", num: 1 },
    { key: "finished", title: "finished" },
  ];
  const table = $("run-table");
  const headRow = el("tr");
  table.tHead.appendChild(headRow);
  let sortKey = null, sortDir = 1;
  for (const column of columns) {
    const th = el("th", column.title);
    th.dataset.key = column.key;
    if (column.key !== "curve") th.addEventListener("click", () => {
      sortDir = sortKey === column.key ? -sortDir : 1;
      sortKey = column.key;
      for (const other of headRow.children) other.className = "";
      th.className = sortDir > 0 ? "sorted-asc" : "sorted-desc";
      drawRows();
    });
    headRow.appendChild(th);
  }
  const statuses = [...new Set(data.runs.map((r) => r.status))];
  for (const s of statuses) {
    const option = el("option", s);
    option.value = s;
    $("status-filter").appendChild(option);
  }
  const selected = new Set(Object.keys(data.curves).slice(0, 3));
  const cellText = (run, column) => (column.text ? column.text(run) :
    column.num !== undefined ? format(run[column.key], column.num) :
    run[column.key] === null || run[column.key] === undefined ? "" : String(run[column.key]));

  function drawRows() {
    const filter = $("run-filter").value.toLowerCase();
    const status = $("status-filter").value;
    let runs = data.runs.filter((run) => (!status || run.status === status) &&
      (!filter || columns.some((c) => c.key !== "curve" && cellText(run, c).toLowerCase().includes(filter))));
    if (sortKey) {
      const column = columns.find((c) => c.key === sortKey);
      const value = (r) => (column.num !== undefined ? (r[sortKey] ?? Infinity) : cellText(r, column));
      runs = runs.slice().sort((a, b) => (value(a) < value(b) ? -1 : value(a) > value(b) ? 1 : 0) * sortDir);
    }
    const body = table.tBodies[0];
    body.replaceChildren();
    for (const run of runs) {
      const tr = el("tr");
      tr.dataset.run = run.id;
      for (const column of columns) {
        const td = el("td");
        if (column.key === "curve") {
          if (data.curves[run.id]) {
            const box = el("input");
            box.type = "checkbox";
            box.checked = selected.has(run.id);
            box.addEventListener("change", () => {
              if (box.checked) selected.add(run.id); else selected.delete(run.id);
              drawCurves();
            });
            td.appendChild(box);
          }
        } else {
          td.textContent = cellText(run, column);
          td.dataset.key = column.key;
          if (column.num !== undefined) {
            td.className = "num";
            if (run[column.key] !== null) td.dataset.value = String(run[column.key]);
          }
          if (column.key === "status") {
            td.className = "status-" + run.status;
            if (run.source) td.title = "from " + run.source;
          }
          if (column.key === "commit" && run.commit) td.title = run.commit;
        }
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    $("run-count").textContent = runs.length + " of " + data.runs.length + " runs shown";
  }
  $("run-filter").addEventListener("input", drawRows);
  $("status-filter").addEventListener("change", drawRows);
  drawRows();

  // --- learning curves ------------------------------------------------------------------------
  let curveView = null;
  function drawCurves() {
    const values = [];
    for (const id of selected) {
      const c = data.curves[id];
      if (!c) continue;
      c.step.forEach((step, i) => {
        if (c.train_loss && c.train_loss[i] !== null)
          values.push({ run: id, step, loss: c.train_loss[i], which: "train" });
        if (c.valid_loss && c.valid_loss[i] !== null)
          values.push({ run: id, step, loss: c.valid_loss[i], which: "validation" });
      });
    }
    const holder = $("curves-chart");
    if (curveView) { curveView.finalize(); curveView = null; }
    holder.replaceChildren();
    if (!Object.keys(data.curves).length) {
      holder.appendChild(el("p", "No run directory with a metrics.csv (committed studies keep only " +
                                 "summary.csv; run the study to get its learning curves).", "muted"));
      return;
    }
    if (!values.length) { holder.appendChild(el("p", "No run selected.", "muted")); return; }
    const spec = {
      $schema: SCHEMA,
      width: 640, height: 300, data: { values },
      mark: { type: "line", point: { size: 20 } },
      params: [{ name: "pick", select: { type: "point", fields: ["run"] }, bind: "legend" },
               { name: "zoom", select: "interval", bind: "scales" }],
      encoding: {
        x: { field: "step", type: "quantitative", title: "training step" },
        y: { field: "loss", type: "quantitative", scale: { zero: false }, title: "loss (nats per token: per byte for a language model)" },
        color: { field: "run", type: "nominal", title: "run" },
        strokeDash: { field: "which", type: "nominal", title: null },
        opacity: { condition: { param: "pick", empty: true, value: 1 }, value: 0.1 },
        tooltip: [{ field: "run" }, { field: "which", title: "loss" }, { field: "step" },
                  { field: "loss", format: ".4f" }],
      },
    };
    embed(holder, spec).then((r) => { curveView = r.view; });
  }
  drawCurves();
})();
