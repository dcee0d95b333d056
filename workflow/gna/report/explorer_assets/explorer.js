"use strict";
// The head explorer: everything is in the JSON block above; nothing is fetched.
(function () {
  const MODELS = JSON.parse(document.getElementById("gna-data").textContent);
  const panesEl = document.getElementById("panes");

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  const headKey = (r) => `L${r.layer}H${r.head} ${r.kind}`;
  const INTEGER_COLUMNS = new Set(["rank", "layer", "head"]);
  const fmt = (v, col) => (v === null || v === undefined) ? ""
    : (typeof v === "number" && !(INTEGER_COLUMNS.has(col) || (col === undefined && Number.isInteger(v)))) ? v.toFixed(3) : String(v);
  const shown = (t) => t.replace(/\u2581|\u0120/g, " ").replace(/\n/g, "\\n");

  function Pane(index, modelIndex) {
    const root = el("section", {"class": "pane", "data-pane": String(index)});
    panesEl.append(root);
    const state = {model: null, sort: {col: "rank", dir: 1}, head: null, prompt: 0, query: null};

    const modelSelect = el("select", {"class": "model-select", onchange: () => load(+modelSelect.value)});
    MODELS.forEach((m, i) => modelSelect.append(el("option", {value: String(i)}, m.name)));
    const title = el("h2");
    const roles = el("div", {"class": "roles"});
    const prov = el("details", {}, el("summary", {}, "provenance"));
    const filterText = el("input", {type: "search", placeholder: "filter (e.g. L3, gather)", "class": "filter-text"});
    const kindSelect = el("select", {"class": "filter-kind"});
    const roleSelect = el("select", {"class": "filter-role"});
    const table = el("table", {"class": "ranking"});
    const headSelect = el("select", {"class": "head-select", onchange: () => { state.head = headSelect.value; drawHead(); }});
    const promptSelect = el("select", {"class": "prompt-select", onchange: () => { state.prompt = +promptSelect.value; state.query = null; drawHead(); }});
    const viewer = el("div", {"class": "viewer"});
    [filterText, kindSelect, roleSelect].forEach((c) => c.addEventListener("input", drawTable));
    root.append(el("div", {"class": "controls"}, el("label", {}, "model "), modelSelect), title, roles, prov,
      el("div", {"class": "controls"}, filterText, el("label", {}, "kind"), kindSelect, el("label", {}, "role"), roleSelect),
      el("div", {"class": "tablebox"}, table),
      el("div", {"class": "controls"}, el("label", {}, "head"), headSelect, el("label", {}, "prompt"), promptSelect),
      viewer);

    function load(i) {
      const m = MODELS[i];
      state.model = m; state.query = null; state.prompt = 0;
      modelSelect.value = String(i);
      title.textContent = m.name;
      roles.replaceChildren("Gather: ", el("b", {"class": "gather"}, m.roles.gather.join(", ") || "none among the top heads"),
        "  \u00b7  Aggregate: ", el("b", {"class": "aggregate"}, m.roles.aggregate.join(", ") || "none among the top heads"));
      const rows = Object.entries(m.provenance).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, fmt(v))));
      if (m.probe) rows.unshift(el("tr", {}, el("td", {}, "probe"), el("td", {}, m.probe)));
      prov.replaceChildren(el("summary", {}, "provenance"), el("table", {}, ...rows));
      fillSelect(kindSelect, [...new Set(m.ranking.map((r) => r.kind))]);
      fillSelect(roleSelect, [...new Set(m.ranking.map((r) => r.role).filter((r) => r))]);
      const withPattern = m.patterns.length ? Object.keys(m.patterns[0].matrices) : [];
      headSelect.replaceChildren(...withPattern.map((k) => el("option", {value: k}, k)));
      promptSelect.replaceChildren(...m.patterns.map((p, j) => el("option", {value: String(j)}, `prompt ${j + 1} (${p.tokens.length} tokens)`)));
      state.head = withPattern.length ? withPattern[0] : null;
      drawTable(); drawHead();
    }

    function fillSelect(sel, values) {
      sel.replaceChildren(el("option", {value: ""}, "all"), ...values.map((v) => el("option", {value: v}, v)));
    }

    function drawTable() {
      const m = state.model, cols = m.columns, s = state.sort;
      const text = filterText.value.trim().toLowerCase();
      const hasPattern = new Set(m.patterns.length ? Object.keys(m.patterns[0].matrices) : []);
      let rows = m.ranking.filter((r) => (!kindSelect.value || r.kind === kindSelect.value)
        && (!roleSelect.value || r.role === roleSelect.value)
        && (!text || (headKey(r) + " " + cols.map((c) => fmt(r[c], c)).join(" ")).toLowerCase().includes(text)));
      rows = rows.slice().sort((a, b) => {
        const x = a[s.col], y = b[s.col];
        if (x === y) return a.rank - b.rank;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * s.dir;
      });
      const head = el("tr", {}, ...cols.map((c) => el("th", {
        "class": c === s.col ? (s.dir > 0 ? "sorted-asc" : "sorted-desc") : "", "data-col": c,
        onclick: () => { state.sort = {col: c, dir: c === s.col ? -s.dir : 1}; drawTable(); }}, c)));
      const body = rows.map((r) => {
        const k = headKey(r);
        const tr = el("tr", {"class": (hasPattern.has(k) ? "has-pattern" : "") + (k === state.head ? " selected" : ""), "data-head": k,
          onclick: () => { if (hasPattern.has(k)) { state.head = k; headSelect.value = k; drawTable(); drawHead(); } }},
          ...cols.map((c) => el("td", {"class": c === "role" && r[c] ? "role-" + r[c] : ""}, fmt(r[c], c))));
        return tr;
      });
      table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...body));
    }

    function drawHead() {
      const m = state.model;
      if (!state.head || !m.patterns.length) {
        viewer.replaceChildren(el("p", {"class": "note"}, "No mixing patterns were computed for this model."));
        return;
      }
      const p = m.patterns[state.prompt], mat = p.matrices[state.head];
      if (!Array.isArray(mat)) {
        viewer.replaceChildren(el("p", {"class": "note"}, `${state.head}: ${mat.none}`));
        return;
      }
      const kind = state.head.split(" ")[1];
      const T = p.tokens.length, px = Math.max(2, Math.min(24, Math.floor(480 / T)));
      const canvas = el("canvas", {"class": "heat", width: String(T * px), height: String(T * px)});
      const tokens = el("div", {"class": "tokens"});
      const spans = p.tokens.map((t, i) => el("span", {"class": "tok", "data-i": String(i), "data-w": "0",
        onmouseenter: () => setQuery(i)}, shown(t)));
      tokens.append(...spans);
      canvas.addEventListener("mousemove", (e) => {
        const r = canvas.getBoundingClientRect();
        const q = Math.floor((e.clientY - r.top) / r.height * T);
        if (q >= 0 && q < T && q !== state.query) setQuery(q);
      });
      const role = m.roles.gather.includes(state.head) ? "Gather head" : m.roles.aggregate.includes(state.head) ? "Aggregate head" : "top head";
      const weight = kind === "attention" ? "attention weight" : "|mixing weight| without the diagonal, rows scaled to sum 1";
      viewer.replaceChildren(
        el("div", {"class": "legend"}, `${state.head}: ${role}; ${weight}. Rows: query (token reading), columns: key (token read from).`),
        canvas, el("div", {"class": "legend"}, "Hover a token: the tokens it reads light up (darker: more weight)."), tokens);
      paint(canvas, mat, T, px, null);

      function setQuery(q) {
        state.query = q;
        const row = mat[q], max = Math.max(1, ...row);
        spans.forEach((s, k) => {
          const w = row[k] / m.scale;
          s.dataset.w = w.toFixed(3);
          s.title = `${shown(p.tokens[q])} -> ${shown(p.tokens[k])}: ${w.toFixed(3)}`;
          s.style.background = k <= q && row[k] > 0 ? `rgba(207, 34, 46, ${(row[k] / max).toFixed(3)})` : "";
          s.style.color = row[k] / max > 0.55 ? "#fff" : "";
          s.classList.toggle("query", k === q);
        });
        paint(canvas, mat, T, px, q);
      }
    }

    function paint(canvas, mat, T, px, q) {
      const ctx = canvas.getContext("2d"), scale = state.model.scale;
      let max = 1;
      for (const row of mat) for (const v of row) if (v > max) max = v;
      const img = ctx.createImageData(T * px, T * px);
      for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) {
        const v = Math.sqrt(mat[i][j] / max);  // square root: small weights stay visible
        const c = [Math.round(255 - 200 * v), Math.round(255 - 230 * v), Math.round(255 - 120 * v)];
        for (let a = 0; a < px; a++) for (let b = 0; b < px; b++) {
          const o = ((i * px + a) * T * px + (j * px + b)) * 4;
          img.data[o] = c[0]; img.data[o + 1] = c[1]; img.data[o + 2] = c[2]; img.data[o + 3] = 255;
        }
      }
      ctx.putImageData(img, 0, 0);
      if (q !== null) {
        ctx.strokeStyle = "#cf222e"; ctx.lineWidth = 1;
        ctx.strokeRect(0.5, q * px + 0.5, T * px - 1, px - 1);
      }
      canvas.dataset.scale = String(scale);
    }

    load(modelIndex);
    return state;
  }

  Pane(0, 0);
  Pane(1, MODELS.length > 1 ? 1 : 0);
})();
