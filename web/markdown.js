// A small Markdown renderer for the report's claims tables and protocols: headings, paragraphs,
// lists, tables, fenced code, and inline `code` and **bold**. It builds DOM nodes and puts every
// piece of text in with textContent, so nothing in the Markdown can become markup (a raw <script>
// in a protocol shows as text). Not a full CommonMark parser: what it does not know shows as text.
"use strict";

const poslabMarkdown = (() => {
  // Inline: **bold** and `code`; everything else is text.
  function inline(parent, text) {
    const pattern = /(\*\*[^*]+\*\*|`[^`]+`)/g;
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      if (match.index > last) parent.appendChild(document.createTextNode(text.slice(last, match.index)));
      const token = match[0];
      const node = document.createElement(token.startsWith("**") ? "strong" : "code");
      node.textContent = token.startsWith("**") ? token.slice(2, -2) : token.slice(1, -1);
      parent.appendChild(node);
      last = match.index + token.length;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  // "| a | b |" -> ["a", "b"] (a backslash-escaped \| stays in its cell).
  function cells(line) {
    const inner = line.trim().replace(/^\|/, "").replace(/\|$/, "");
    return inner.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
  }

  function render(container, markdown) {
    const lines = markdown.split("\n");
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (/^\s*$/.test(line)) { i++; continue; }
      if (line.startsWith("```")) {  // fenced code
        const pre = document.createElement("pre");
        const body = [];
        for (i++; i < lines.length && !lines[i].startsWith("```"); i++) body.push(lines[i]);
        pre.textContent = body.join("\n");
        container.appendChild(pre);
        i++;
        continue;
      }
      const heading = /^(#{1,6})\s+(.*)$/.exec(line);
      if (heading) {
        const h = document.createElement("h" + Math.min(6, heading[1].length + 2));
        inline(h, heading[2]);
        container.appendChild(h);
        i++;
        continue;
      }
      if (line.trim().startsWith("|")) {  // a table: header, separator, rows
        const table = document.createElement("table");
        const rows = [];
        for (; i < lines.length && lines[i].trim().startsWith("|"); i++) rows.push(lines[i]);
        rows.forEach((row, r) => {
          if (r === 1 && /^[\s|:-]+$/.test(row)) return;
          const tr = document.createElement("tr");
          for (const cell of cells(row)) {
            const td = document.createElement(r === 0 ? "th" : "td");
            inline(td, cell);
            tr.appendChild(td);
          }
          table.appendChild(tr);
        });
        const wrap = document.createElement("div");
        wrap.className = "table-wrap";
        wrap.appendChild(table);
        container.appendChild(wrap);
        continue;
      }
      if (/^\s*([-*]|\d+\.)\s+/.test(line)) {  // a list (one level)
        const ordered = /^\s*\d+\./.test(line);
        const list = document.createElement(ordered ? "ol" : "ul");
        let item = null;
        for (; i < lines.length && !/^\s*$/.test(lines[i]); i++) {
          const m = /^\s*([-*]|\d+\.)\s+(.*)$/.exec(lines[i]);
          if (m) {
            item = document.createElement("li");
            list.appendChild(item);
            inline(item, m[2]);
          } else if (item) {
            inline(item, " " + lines[i].trim());
          }
        }
        container.appendChild(list);
        continue;
      }
      const p = document.createElement("p");  // a paragraph: lines up to a blank one
      const text = [];
      for (; i < lines.length && !/^\s*$/.test(lines[i]) && !lines[i].trim().startsWith("|") &&
             !/^#{1,6}\s/.test(lines[i]) && !lines[i].startsWith("```"); i++) text.push(lines[i].trim());
      inline(p, text.join(" "));
      container.appendChild(p);
    }
  }
  return { render };
})();
