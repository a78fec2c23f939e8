// What the report page (report.js) and the attention explorer (explore.js) share, loaded before
// either: the element lookup, the one way text enters a page (textContent, never markup), the
// Vega-Lite schema both write their specs against, and how a spec is drawn (vega-embed, no
// action menu). Copied into lib/ by notebooks/report.py and src/cli/explore.cpp.
"use strict";

const poslabPage = (() => {
  const $ = (id) => document.getElementById(id);
  // A new element whose text (if any) is set with textContent: a study, run or variant named
  // <script>... shows as those characters.
  const el = (tag, text, className) => {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  };
  const SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json";
  // Draws a Vega-Lite spec into holder; resolves to vega-embed's result (its .view).
  const embed = (holder, spec, renderer = "svg") =>
    vegaEmbed(holder, spec, { actions: false, renderer });
  return { $, el, SCHEMA, embed };
})();
