// The attention explorer page: reads window.POSLAB_EXPLORE (data/index.js, written by
// `poslab explore`) and draws, for every run side by side, with one set of controls:
//   - the attention map of the chosen layer and head on the chosen text at the chosen length
//     (data/r{run}_t{text}_f{factor}.js, loaded as a script the first time it is shown);
//   - the positional part of the score against distance, per head;
//   - the loss of every token, coloured on the text, and one chart of the loss over position.
// Text goes into the page with textContent only; charts are Vega-Lite, drawn by vega-embed.
// window.poslabExplorer.ready() / mapSignatures() / positionalCurves() are for
// tests/browser/check_pages.py.
"use strict";

(() => {
  const index = window.POSLAB_EXPLORE;
  const { $, el, SCHEMA } = poslabPage;  // web/page.js
  const cache = {};          // setting key -> its data
  const loading = {};        // setting key -> promise of its data
  let pending = 0;           // drawings not finished yet
  const state = { text: 0, factorIndex: Math.min(1, index.factors.length - 1), layer: 0, head: 0 };
  const maxLayers = Math.max(...index.runs.map((r) => r.n_layers));
  const maxHeads = Math.max(...index.runs.map((r) => r.n_heads));

  // Data files call poslabExplore.add(key, data) when loaded.
  window.poslabExplore = { add(key, data) { cache[key] = data; } };

  function load(key) {
    const setting = index.settings[key];
    if (!setting || !setting.file) return Promise.resolve(null);
    if (cache[key]) return Promise.resolve(cache[key]);
    if (!loading[key]) {
      loading[key] = new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = setting.file;
        script.onload = () => resolve(cache[key]);
        script.onerror = () => reject(new Error("cannot load " + setting.file));
        document.head.appendChild(script);
      });
    }
    return loading[key];
  }

  // --- controls -------------------------------------------------------------------------------
  index.texts.forEach((text, i) => {
    const option = el("option", text.name + " (" + text.bytes + " bytes)");
    option.value = String(i);
    $("text").appendChild(option);
  });
  for (let n = 0; n < maxLayers; n++) {
    const option = el("option", String(n));
    option.value = String(n);
    $("layer").appendChild(option);
  }
  const headButtons = [];
  for (let h = 0; h < maxHeads; h++) {
    const button = el("button", String(h));
    button.type = "button";
    button.addEventListener("click", () => { state.head = h; update(); });
    headButtons.push(button);
    $("heads").appendChild(button);
  }
  $("length").max = String(index.factors.length - 1);
  $("length").value = String(state.factorIndex);
  $("text").addEventListener("change", (e) => { state.text = +e.target.value; update(); });
  $("layer").addEventListener("change", (e) => { state.layer = +e.target.value; update(); });
  $("length").addEventListener("input", (e) => { state.factorIndex = +e.target.value; update(); });

  // --- one column per run ---------------------------------------------------------------------
  const columns = index.runs.map((run, r) => {
    const column = el("div", null, "run-column");
    column.appendChild(el("h2", run.name + " (" + run.encoding + ")"));
    // What sets this run apart from the others shown (config/load.hpp's differing_settings).
    if (run.differs && run.differs.length)
      column.appendChild(el("p", "differs in: " + run.differs.join(", "), "differs"));
    column.appendChild(el("p", run.path + " · " + run.n_layers + " layers × " + run.n_heads +
      " heads · trained on " + run.seq_len + " tokens" +
      (run.mem_len ? " with memory " + run.mem_len : ", no memory"), "muted"));
    const note = el("p", null, "muted");
    const map = el("div");
    const positional = el("div");
    const positionalNote = el("p", null, "muted");
    const text = el("div", null, "token-text");
    column.append(note, map, el("h3", "Positional part of the score against distance"),
                  positionalNote, positional, el("h3", "Loss of each token on the text"), text);
    $("columns").appendChild(column);
    return { run, r, note, map, positional, positionalNote, text, mapView: null, posView: null };
  });

  // --- charts ---------------------------------------------------------------------------------
  function decode(base64) {
    const raw = atob(base64);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes;
  }

  // The map's cells: one per block with weight > 0. Masked blocks (keys after the query) are
  // left out and show white; a weight too small for a byte is stored as 1
  // (eval/attention_maps.cpp's map_byte), the scale's first colour, never white.
  function mapValues(data, layer, head) {
    const bytes = decode(data.maps[layer][head]);
    const b = data.block, M = data.memory_rows, keys = data.memory.concat(data.input.slice(0, data.L));
    const values = [];
    for (let qb = 0; qb < data.rows; qb++)
      for (let kb = 0; kb < data.cols; kb++) {
        const v = bytes[qb * data.cols + kb];
        if (!v) continue;
        const cell = { q: qb * b, q2: Math.min(data.L, (qb + 1) * b), k: kb * b - M,
                       k2: Math.min(M + data.L, (kb + 1) * b) - M, w: (v / 255) * (v / 255) };
        if (b === 1) { cell.query = data.input[qb]; cell.key = keys[kb]; }
        values.push(cell);
      }
    return values;
  }

  function mapSpec(run, data, values) {
    const tooltip = [{ field: "q", title: "query position" }, { field: "k", title: "key position" },
                     { field: "w", title: "attention weight", format: ".3f" }];
    if (data.block === 1) tooltip.push({ field: "query", title: "query byte" }, { field: "key", title: "key byte" });
    else tooltip.push({ field: "q2", title: "query block ends before" }, { field: "k2", title: "key block ends before" });
    const layers = [{
      data: { name: "map", values },
      mark: { type: "rect" },
      params: [{ name: "zoom", select: "interval", bind: "scales" }],
      encoding: {
        x: { field: "k", type: "quantitative", title: "key position (negative: memory)",
             scale: { domain: [-data.memory_rows, data.L], nice: false } },
        x2: { field: "k2" },
        y: { field: "q", type: "quantitative", title: "query position",
             scale: { domain: [0, data.L], reverse: true, nice: false } },
        y2: { field: "q2" },
        color: { field: "w", type: "quantitative", title: "weight",
                 scale: { type: "sqrt", scheme: "viridis" } },
        tooltip,
      },
    }, {
      data: { values: [{ v: run.seq_len, what: "training length" }].concat(
        data.memory_rows ? [{ v: 0, what: "memory | input" }] : []) },
      mark: { type: "rule", strokeDash: [3, 3], color: "#d33" },
      encoding: { x: { field: "v", type: "quantitative" }, tooltip: [{ field: "what" }] },
    }];
    return {
      $schema: SCHEMA, width: 460, height: 340,
      title: { text: "layer " + state.layer + ", head " + state.head + " at " +
               index.factors[state.factorIndex] + "x (" + data.L + " tokens)",
               subtitle: (data.block > 1 ? ["blocks of " + data.block + " x " + data.block +
                 " tokens: the mass a block of queries gives a block of keys"] : [])
                 .concat(["white: masked (a key after its query)"]) },
      layer: layers,
    };
  }

  // Heads whose curves are all the same (RoPE's q.k response: one per layer) are one line,
  // "every head", not one line per head drawn on top of each other under a legend of colours.
  function positionalSpec(run) {
    const values = [];
    const curves = run.positional.layers[state.layer];
    const same = curves.every((curve) => JSON.stringify(curve) === JSON.stringify(curves[0]));
    (same ? curves.slice(0, 1) : curves).forEach((curve, h) =>
      curve.forEach((v, d) => values.push({ head: same ? "every head" : String(h), distance: d,
                                            score: v })));
    const chosen = same ? "every head" : String(state.head);
    return {
      $schema: SCHEMA, width: 460, height: 200,
      title: run.positional.kind + ", layer " + state.layer,
      layer: [{
        data: { name: "positional", values },
        mark: { type: "line", strokeWidth: 1.5 },
        params: [{ name: "zoom", select: "interval", bind: "scales" }],
        encoding: {
          x: { field: "distance", type: "quantitative", title: "distance i - j (tokens)" },
          y: { field: "score", type: "quantitative", title: "positional part of the score" },
          color: { field: "head", type: "nominal", title: "head" },
          opacity: { condition: { test: "datum.head == '" + chosen + "'", value: 1 }, value: 0.25 },
          strokeWidth: { condition: { test: "datum.head == '" + chosen + "'", value: 2.5 }, value: 1 },
          tooltip: [{ field: "head" }, { field: "distance" }, { field: "score", format: ".4f" }],
        },
      }, {
        data: { values: [{ v: run.seq_len, what: "training length" }] },
        mark: { type: "rule", strokeDash: [3, 3], color: "#d33" },
        encoding: { x: { field: "v", type: "quantitative" }, tooltip: [{ field: "what" }] },
      }],
    };
  }

  function lossText(container, data, run, maxLoss) {
    container.replaceChildren();
    const colour = vega.scheme("reds");
    const shown = (label) => (label === "\\n" ? "\u21b5\n" : label === "\\t" ? "\u21e5" : label);
    container.appendChild(el("span", shown(data.input[0])));
    for (let i = 0; i < data.L; i++) {
      const span = el("span", shown(data.input[i + 1]));
      const loss = data.loss[i];
      span.style.backgroundColor = colour(Math.min(1, loss / maxLoss));
      if (loss / maxLoss > 0.6) span.style.color = "white";
      span.title = "position " + (i + 1) + ": loss " + loss.toFixed(3) + " nats" +
        (i + 1 >= run.seq_len ? " (beyond the training length)" : "");
      if (i + 1 === run.seq_len) span.className = "beyond";
      container.appendChild(span);
    }
  }

  function lossSpec(rows) {
    return {
      $schema: SCHEMA, width: 900, height: 260, data: { values: rows },
      transform: [{ window: [{ op: "mean", field: "loss", as: "smoothed" }], frame: [-15, 0],
                    groupby: ["run"], sort: [{ field: "position" }] }],
      encoding: {
        x: { field: "position", type: "quantitative", title: "position in the input" },
        color: { field: "run", type: "nominal", title: null },
        opacity: { condition: { param: "pick", empty: true, value: 1 }, value: 0.1 },
      },
      layer: [
        { mark: { type: "line", strokeWidth: 0.6, opacity: 0.35 },
          encoding: { y: { field: "loss", type: "quantitative", title: "loss (nats)" } } },
        { mark: { type: "line", strokeWidth: 2.2 },
          params: [{ name: "zoom", select: "interval", bind: "scales" },
                   { name: "pick", select: { type: "point", fields: ["run"] }, bind: "legend" }],
          encoding: { y: { field: "smoothed", type: "quantitative" },
                      tooltip: [{ field: "run" }, { field: "position" },
                                { field: "loss", format: ".3f" },
                                { field: "smoothed", title: "mean of the last 16", format: ".3f" }] } },
        { data: { values: [...new Set(index.runs.map((r) => r.seq_len))].map((v) => ({ v })) },
          mark: { type: "rule", strokeDash: [3, 3], color: "#777" },
          encoding: { x: { field: "v", type: "quantitative" }, color: { value: "#777" } } },
      ],
    };
  }

  // --- drawing --------------------------------------------------------------------------------
  let lossView = null;
  function embed(holder, spec, renderer) {
    pending++;
    return poslabPage.embed(holder, spec, renderer)
      .finally(() => { pending--; });
  }

  async function update() {
    pending++;
    try {
      headButtons.forEach((b, h) => b.classList.toggle("active", h === state.head));
      $("layer").value = String(state.layer);
      const factor = index.factors[state.factorIndex];
      $("length-label").textContent = factor + "x the training length";
      $("status").textContent = "loading…";
      const keys = columns.map((c) => "r" + c.r + "_t" + state.text + "_f" + factor);
      const datas = await Promise.all(keys.map(load));
      const maxLoss = Math.max(1, ...datas.filter(Boolean).map((d) => Math.max(...d.loss)));
      const lossRows = [];
      await Promise.all(columns.map(async (c, i) => {
        const data = datas[i];
        const run = c.run;
        if (c.mapView) { c.mapView.finalize(); c.mapView = null; }
        c.map.replaceChildren();
        c.note.textContent = "";
        if (!data) {
          c.note.textContent = "Not computed: " + (index.settings[keys[i]] || {}).missing;
          c.text.replaceChildren();
        } else if (state.layer >= run.n_layers || state.head >= run.n_heads) {
          c.note.textContent = "This run has " + run.n_layers + " layers and " + run.n_heads + " heads.";
        } else {
          const values = mapValues(data, state.layer, state.head);
          const result = await embed(c.map, mapSpec(run, data, values), "canvas");
          c.mapView = result.view;
          lossText(c.text, data, run, maxLoss);
          data.loss.forEach((loss, p) => lossRows.push({ run: run.name + " (" + run.encoding + ")",
                                                         position: p + 1, loss }));
        }
        if (c.posView) { c.posView.finalize(); c.posView = null; }
        c.positional.replaceChildren();
        c.positionalNote.textContent = run.positional ? run.positional.note : "not computed";
        if (run.positional && run.positional.layers && state.layer < run.n_layers) {
          const result = await embed(c.positional, positionalSpec(run), "svg");
          c.posView = result.view;
        }
      }));
      if (lossView) { lossView.finalize(); lossView = null; }
      $("loss-chart").replaceChildren();
      if (lossRows.length) lossView = (await embed($("loss-chart"), lossSpec(lossRows), "svg")).view;
      $("status").textContent = "";
    } catch (error) {
      $("status").textContent = "error: " + error.message;
      throw error;
    } finally {
      pending--;
    }
  }

  window.poslabExplorer = {
    ready: () => pending === 0 && columns.some((c) => c.mapView),
    // One string per run: a checksum of the map its chart holds now.
    mapSignatures: () => columns.map((c) => {
      if (!c.mapView) return "";
      const values = c.mapView.data("map");
      let sum = 0;
      values.forEach((v, i) => { sum += v.w * ((i % 97) + 1) + v.q * 1e-3 + v.k * 1e-6; });
      return values.length + ":" + sum.toFixed(6);
    }),
    // One list per run: the curves (heads) its positional chart draws now.
    positionalCurves: () => columns.map((c) => (c.posView ?
      [...new Set(c.posView.data("positional").map((v) => v.head))] : [])),
  };
  update();
})();
