// agentdata view: the page. Everything shown comes from the data as text (textContent, text nodes);
// nothing from the data is ever parsed as HTML, and every link is one of ours (#/...).
"use strict";

// ------------------------------------------------------------------ building elements safely
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "href") node.setAttribute("href", value.startsWith("#") ? value : "#/");
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const link = (hash, ...children) => el("a", { href: hash }, ...children);
const enc = encodeURIComponent;
function fmt(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : Number(value.toPrecision(4)).toString();
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}
const secs = (value) => (value < 0.01 ? "<0.01 s" : Number(value.toPrecision(3)) + " s");
const count = (value) => (typeof value === "number" ? value.toLocaleString("en") : fmt(value));
const pct = (value) => (value === null || value === undefined ? "–" : (100 * value).toFixed(1) + "%");
function verdict(correct) {
  if (correct === null || correct === undefined) return el("span", { class: "badge warn" }, "unknown");
  return el("span", { class: correct ? "badge good" : "badge bad" }, correct ? "correct" : "wrong");
}
function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message || "";
  box.hidden = !message;
}

// ------------------------------------------------------------------ where the data comes from
// Served: the viewer's JSON API. Exported: data files beside the page, loaded as <script>s
// (a page opened from disk cannot fetch() its neighbours).
const STATIC = typeof window.AGENTDATA_DATA === "object";
const loaded = {};
function loadScript(name) {
  if (window.AGENTDATA_DATA[name] !== undefined) return Promise.resolve(window.AGENTDATA_DATA[name]);
  if (!loaded[name]) {
    loaded[name] = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = "data/" + name + ".js";
      script.onload = () => (window.AGENTDATA_DATA[name] === undefined
        ? reject(new Error("this export has no " + name)) : resolve(window.AGENTDATA_DATA[name]));
      script.onerror = () => reject(new Error("this export does not include " + name + " (see --limit)"));
      document.head.appendChild(script);
    });
  }
  return loaded[name];
}
async function getJSON(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({ error: "the server answered " + response.status }));
  if (!response.ok) throw new Error(body.error || "the server answered " + response.status);
  return body;
}
function query(params) {
  const parts = Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined);
  return parts.length ? "?" + parts.map(([k, v]) => enc(k) + "=" + enc(v)).join("&") : "";
}
const server = {
  artifacts: () => getJSON("api/artifacts"),
  summary: (key) => getJSON("api/a/" + enc(key)),
  rows: (key, params) => getJSON("api/a/" + enc(key) + "/rows" + query(params)),
  record: (key, row) => getJSON("api/a/" + enc(key) + "/rows/" + row),
  mask: (key, row) => getJSON("api/a/" + enc(key) + "/rows/" + row + "/mask"),
  problem: (key, id) => getJSON("api/a/" + enc(key) + "/problem/" + enc(id)),
  curate: (key) => getJSON("api/a/" + enc(key) + "/curate"),
  train: (key) => getJSON("api/a/" + enc(key) + "/train"),
  evaluation: (key) => getJSON("api/a/" + enc(key) + "/eval"),
  compare: (a, b, show) => getJSON("api/compare/" + enc(a) + "/" + enc(b) + query({ show })),
  plot: (key, number) => "api/a/" + enc(key) + "/plot/" + number,
};
const exported = {
  artifacts: () => loadScript("artifacts"),
  summary: async (key) => (await loadScript("artifacts")).artifacts.find((a) => a.key === key),
  rows: async (key, params) => filterRows(await loadScript(key + "/index"), params),
  record: (key, row) => loadScript(key + "/r/" + row),
  mask: (key, row) => loadScript(key + "/m/" + row),
  problem: async (key, id) => {
    const index = await loadScript(key + "/index");
    if (!(id in index.problems)) throw new Error("this export does not include problem " + id);
    return loadScript(key + "/p/" + index.problems[id]);
  },
  curate: (key) => loadScript(key + "/curate"),
  train: (key) => loadScript(key + "/train"),
  evaluation: (key) => loadScript(key + "/eval"),
  compare: async (a, b, show) => {
    const data = await loadScript("compare/" + a + "-" + b);
    const keep = {
      flipped: (r) => r.gained || r.lost, gained: (r) => r.gained, lost: (r) => r.lost,
      both: (r) => r.solved && r.solved_b, neither: (r) => !r.solved && !r.solved_b, all: () => true,
    }[show] || (() => true);
    return { ...data, show, rows: data.rows.filter(keep) };
  },
  plot: (key, number) => "data/" + key + "/plot" + number + ".png",
};
const api = STATIC ? exported : server;

// The server's filtering (agentdata/view/table.py), for an export: the same parameters, the same rules.
function filterRows(index, params) {
  const kinds = Object.fromEntries(index.columns.map((c) => [c.name, c.kind]));
  let rows = index.rows;
  for (const [name, value] of Object.entries(params)) {
    if (value === "" || ["q", "sort", "desc", "offset", "limit", "band"].includes(name)) continue;
    if (name.startsWith("min.")) rows = rows.filter((r) => r[name.slice(4)] !== null && r[name.slice(4)] >= Number(value));
    else if (name.startsWith("max.")) rows = rows.filter((r) => r[name.slice(4)] !== null && r[name.slice(4)] <= Number(value));
    else if (kinds[name] === "bool") rows = rows.filter((r) => r[name] === (value === "true"));
    else if (value === "(none)") rows = rows.filter((r) => r[name] === null || r[name] === undefined);
    else rows = rows.filter((r) => String(r[name]) === value);
  }
  if (params.band) {
    const [low, high] = params.band.split(",").map(Number);
    rows = rows.filter((r) => r.pass_rate !== null && r.pass_rate > low && r.pass_rate < high);
  }
  if (params.q) {
    const needle = params.q.toLowerCase();
    rows = rows.filter((r) => (r._text || "").includes(needle));
  }
  if (params.sort) {
    const sign = params.desc === "1" ? -1 : 1;
    const key = params.sort;
    rows = rows.map((r, i) => [r, i]).sort(([a, i], [b, j]) => {
      const x = a[key], y = b[key];
      if (x === y) return i - j;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sign;
    }).map(([r]) => r);
  }
  const offset = Number(params.offset || 0), limit = Number(params.limit || 50);
  return { total: rows.length, offset, rows: rows.slice(offset, offset + limit), exported: index.exported, of: index.of };
}

// ------------------------------------------------------------------ routing
function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, search] = hash.split("?");
  const params = Object.fromEntries(new URLSearchParams(search || ""));
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params };
}
function go(parts, params) {
  location.hash = "#/" + parts.map(enc).join("/") + query(params || {});
}
let renders = 0;
async function render() {
  showError("");
  const { parts, params } = route();
  const main = document.getElementById("main");
  const page = el("div", { id: "page", "data-render": ++renders });
  main.replaceChildren(page); // filled as its parts arrive
  try {
    if (parts.length === 0) await homePage(page);
    else if (parts[0] === "compare") await comparePage(page, parts[1], parts[2], params);
    else if (parts[0] === "a" && parts.length === 2) await artifactPage(page, parts[1], params);
    else if (parts[0] === "a" && parts[2] === "r") await recordPage(page, parts[1], Number(parts[3]), params);
    else if (parts[0] === "a" && parts[2] === "p") await problemPage(page, parts[1], parts.slice(3).join("/"));
    else if (parts[0] === "a" && parts[2] === "curate") await curatePage(page, parts[1]);
    else page.appendChild(el("p", {}, "No such page. ", link("#/", "Back to the artifacts.")));
  } catch (error) {
    if (main.firstChild === page) showError(error.message); // a page left meanwhile keeps quiet
  }
  page.setAttribute("data-ready", "1"); // what the browser tests wait for
}
window.addEventListener("hashchange", render);
window.addEventListener("DOMContentLoaded", render);
function where(...labels) {
  document.getElementById("where").textContent = labels.filter(Boolean).join(" › ");
}

// ------------------------------------------------------------------ home: every artifact given
let artifactsCache = null;
async function allArtifacts() {
  if (!artifactsCache) artifactsCache = (await api.artifacts()).artifacts;
  return artifactsCache;
}
async function homePage(page) {
  where("artifacts");
  const artifacts = await allArtifacts();
  page.appendChild(el("h1", {}, artifacts.length + " artifact" + (artifacts.length === 1 ? "" : "s")));
  for (const artifact of artifacts) page.appendChild(artifactCard(artifact));
  const runs = artifacts.filter((a) => a.kind === "run" || a.kind === "trajectories");
  if (runs.length >= 2) page.appendChild(compareForm(runs));
}
function artifactCard(artifact) {
  const card = el("div", { class: "card" + (artifact.parent ? " child" : ""), "data-key": artifact.key });
  card.appendChild(el("span", { class: "kind" }, artifact.kind));
  if (artifact.kind === "damaged") {
    card.appendChild(el("strong", {}, artifact.label));
    card.appendChild(el("div", { class: "damaged" }, artifact.error));
    return card;
  }
  card.appendChild(link("#/a/" + enc(artifact.key), artifact.label));
  const bits = [];
  if (artifact.rows !== null) bits.push(count(artifact.rows) + " rows");
  const stats = artifact.stats;
  if (stats && stats.trajectories) {
    bits.push(count(stats.problems) + " problems", "accuracy " + pct(stats.accuracy),
      fmt(stats.mean_tool_calls) + " tool calls each", "tool errors " + pct(stats.tool_error_rate));
  }
  if (bits.length) card.appendChild(el("div", { class: "muted" }, bits.join(" · ")));
  return card;
}
function compareForm(runs) {
  const pick = (name, chosen) => el("select", { name }, runs.map((r) =>
    el("option", { value: r.key, selected: r.key === chosen ? "selected" : null }, r.label)));
  const first = pick("a", runs[0].key), second = pick("b", runs[1].key);
  const form = el("form", { class: "filters", id: "compare-form", onsubmit: (event) => {
    event.preventDefault();
    go(["compare", first.value, second.value], { show: "flipped" });
  } }, el("label", {}, "run A", first), el("label", {}, "run B", second), el("button", { type: "submit" }, "compare"));
  return el("div", {}, el("h2", {}, "Compare two runs on the same problems"), form);
}

// ------------------------------------------------------------------ an artifact
async function artifactPage(page, key, params) {
  const artifact = await api.summary(key);
  if (!artifact) throw new Error("no such artifact: " + key);
  where(artifact.kind, artifact.label);
  page.appendChild(el("h1", {}, artifact.label));
  if (artifact.kind === "damaged") {
    page.appendChild(el("p", { class: "damaged" }, artifact.error));
    return;
  }
  page.appendChild(el("p", { class: "muted" }, artifact.kind + " · " + artifact.path));
  for (const note of artifact.notes || []) page.appendChild(el("p", { class: note.startsWith("warning") ? "note warn" : "note" }, note));
  page.appendChild(linksLine(artifact));
  if (artifact.kind === "train") return trainPanel(page, artifact);
  if (artifact.kind === "eval") return evalPanel(page, artifact);
  if (artifact.kind === "sft" && artifact.has_report) {
    page.appendChild(el("p", {}, link("#/a/" + enc(key) + "/curate", "drop report (rows per reason)")));
  }
  if (artifact.stats && artifact.stats.trajectories) page.appendChild(statsLine(artifact.stats));
  plotsPanel(page, artifact);
  if (artifact.rows !== null) await listPanel(page, artifact, params); // a folder lists what it holds above
}
function linksLine(artifact) {
  const list = el("ul", { class: "links" });
  for (const item of artifact.link_list || []) {
    list.appendChild(el("li", {}, item.role + " (" + item.kind + "): ", link("#/a/" + enc(item.key), item.label)));
  }
  if (artifact.parent) list.appendChild(el("li", {}, link("#/a/" + enc(artifact.parent), "↑ the artifact this one belongs to")));
  return list;
}
function statsLine(stats) {
  const reasons = Object.entries(stats.finish_reasons || {}).map(([r, n]) => r + " " + count(n)).join(", ");
  return el("p", { class: "muted" }, count(stats.trajectories) + " trajectories of " + count(stats.problems) +
    " problems (" + count(stats.solved_problems) + " solved at least once) · accuracy " + pct(stats.accuracy) +
    " · finish: " + reasons);
}
function plotsPanel(page, artifact) {
  (artifact.plots || []).forEach((name, number) => page.appendChild(
    el("details", {}, el("summary", {}, "plot: " + name), el("img", { class: "plot", src: api.plot(artifact.key, number), alt: name }))));
}

async function listPanel(page, artifact, params) {
  const columns = artifact.columns || [];
  const facets = artifact.facets || {};
  const state = { ...params };
  const form = el("form", { class: "filters", id: "filters", onsubmit: (event) => {
    event.preventDefault();
    const chosen = {};
    for (const field of form.querySelectorAll("[name]")) {
      if (field.type === "checkbox") { if (field.checked) chosen[field.name] = "1"; }
      else if (field.value !== "") chosen[field.name] = field.value;
    }
    go(["a", artifact.key], chosen);
  } });
  form.appendChild(el("label", {}, "search question, code, tool output",
    el("input", { name: "q", class: "search", value: state.q || "", placeholder: "text" })));
  for (const column of columns) {
    if (column.kind === "category" || column.kind === "bool") {
      const values = facets[column.name] || [];
      if (values.length < 2 && !state[column.name]) continue;
      const select = el("select", { name: column.name }, el("option", { value: "" }, "any"),
        values.map(([value, many]) => {
          const text = value === null ? "(none)" : String(value);
          return el("option", { value: text, selected: state[column.name] === text ? "selected" : null }, text + " (" + count(many) + ")");
        }));
      form.appendChild(el("label", {}, column.label, select));
    } else if (column.kind === "number" && ["num_tool_calls", "num_tool_errors", "pass_rate", "completion_tokens", "n_rollouts"].includes(column.name)) {
      form.appendChild(el("label", {}, column.label + " from…to", el("span", {},
        el("input", { name: "min." + column.name, class: "narrow", value: state["min." + column.name] || "" }),
        el("input", { name: "max." + column.name, class: "narrow", value: state["max." + column.name] || "" }))));
    }
  }
  if (columns.some((c) => c.name === "pass_rate")) {
    form.appendChild(el("label", {}, "pass-rate band LO,HI (ends exclusive)",
      el("input", { name: "band", class: "narrow", value: state.band || "", placeholder: (artifact.band || [0, 1]).join(",") })));
  }
  const sortable = columns.filter((c) => c.kind === "number");
  form.appendChild(el("label", {}, "sort by", el("select", { name: "sort" }, el("option", { value: "" }, "file order"),
    sortable.map((c) => el("option", { value: c.name, selected: state.sort === c.name ? "selected" : null }, c.label)))));
  form.appendChild(el("label", {}, "descending", el("input", { type: "checkbox", name: "desc", checked: state.desc === "1" ? "checked" : null })));
  form.appendChild(el("button", { type: "submit", id: "apply" }, "apply"));
  page.appendChild(form);

  const result = await api.rows(artifact.key, state);
  const offset = Number(state.offset || 0), limit = Number(state.limit || 50);
  const exportedNote = result.exported !== undefined && result.exported < result.of
    ? " (this export holds " + count(result.exported) + " of " + count(result.of) + " rows)" : "";
  page.appendChild(el("p", { id: "total" }, count(result.total) + " rows match" + exportedNote));
  // A category with one value says nothing per row (it is in the filters); the problem is in the id.
  const shown = columns.filter((c) => !["samples", "problem_id", "pass_rate_low", "pass_rate_high"].includes(c.name) &&
    !((c.kind === "category") && (facets[c.name] || []).length < 2));
  const table = el("table", { id: "rows" }, el("tr", {}, shown.map((c) => el("th", {}, c.label))));
  for (const row of result.rows) {
    const target = rowTarget(artifact, row);
    const tr = el("tr", { class: "link", "data-row": row._row, onclick: () => { location.hash = target; } });
    for (const column of shown) {
      const value = row[column.name];
      const cell = column.kind === "bool" ? el("td", {}, verdict(value))
        : el("td", { class: column.kind === "number" ? "num" : column.name === "question" ? "question-cell" : "" }, fmt(value));
      tr.appendChild(cell);
    }
    table.appendChild(tr);
  }
  page.appendChild(table);
  const pager = el("div", { class: "pager" });
  if (offset > 0) pager.appendChild(link("#/a/" + enc(artifact.key) + query({ ...state, offset: Math.max(0, offset - limit) }), "← previous"));
  pager.appendChild(el("span", { class: "muted" }, result.total ? (offset + 1) + "–" + Math.min(offset + limit, result.total) + " of " + count(result.total) : ""));
  if (offset + limit < result.total) pager.appendChild(link("#/a/" + enc(artifact.key) + query({ ...state, offset: offset + limit }), "next →"));
  page.appendChild(pager);
}
function rowTarget(artifact, row) {
  if (artifact.kind === "pool" && artifact.links && artifact.links.profile && row.problem_id) {
    return "#/a/" + enc(artifact.links.profile) + "/p/" + enc(row.problem_id);
  }
  return "#/a/" + enc(artifact.key) + "/r/" + row._row;
}

// ------------------------------------------------------------------ a record: a trajectory as the model saw it
async function recordPage(page, key, row, params) {
  const [artifact, record] = await Promise.all([api.summary(key), api.record(key, row)]);
  where(artifact.kind, artifact.label, record.id || "row " + row);
  if (record.problem) return problemRecord(page, artifact, record);
  const head = el("h1", {}, record.id + " ", verdict(record.correct));
  if (record.finish_reason) head.appendChild(el("span", { class: "badge warn" }, record.finish_reason));
  page.appendChild(head);
  if (record.problem_id && (artifact.kind === "run" || artifact.kind === "trajectories")) {
    page.appendChild(el("p", {}, link("#/a/" + enc(key) + "/p/" + enc(record.problem_id), "problem " + record.problem_id + ": all its samples")));
  }
  if (record.error) page.appendChild(el("p", { class: "damaged" }, "error: " + record.error));
  if (record.gold !== undefined) {
    page.appendChild(el("div", { class: "verdict" },
      el("div", { class: "card", id: "final-answer" }, el("div", { class: "role" }, "final answer"), el("div", { class: "text" }, fmt(record.final_answer))),
      el("div", { class: "card", id: "gold" }, el("div", { class: "role" }, "gold answer" + (record.gold_clipped ? " (start)" : "")), el("div", { class: "text" }, record.gold))));
  }
  if (record.tests) page.appendChild(testsPanel(record.tests));
  page.appendChild(el("div", { class: "card facts" }, Object.entries(record.facts || {}).map(([name, value]) =>
    el("div", {}, el("span", {}, name), el("span", {}, fmt(value))))));
  const body = el("div", { id: "conversation" });
  const toggle = el("div", { class: "toggle" });
  const asModel = el("button", { type: "button", id: "show-conversation" }, "conversation");
  const asSft = el("button", { type: "button", id: "show-sft" }, "what SFT trains on");
  toggle.append(asModel, " ", asSft);
  asModel.addEventListener("click", () => go(["a", key, "r", String(row)], {}));
  asSft.addEventListener("click", () => go(["a", key, "r", String(row)], { view: "sft" }));
  page.appendChild(toggle);
  page.appendChild(body);
  if (params.view === "sft") await maskPanel(body, key, row);
  else body.append(...record.turns.map(turnBox));
}
function testsPanel(tests) {
  const rows = (tests.results || []).map((test, number) => el("tr", {},
    el("td", { class: "num" }, number + 1), el("td", {}, test.public ? "public" : "private"),
    el("td", {}, el("span", { class: test.status === "passed" ? "badge good" : "badge bad" }, test.status)),
    el("td", { class: "num" }, fmt(test.time_s))));
  return el("details", { class: "card", id: "tests", open: "open" },
    el("summary", {}, "tests: " + fmt(tests.passed) + " of " + fmt(tests.total) + " passed" + (tests.reason ? " · " + tests.reason : "")),
    el("table", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "kind"), el("th", {}, "status"), el("th", {}, "time (s)")), rows));
}
function codeBlock(pieces, className) {
  const code = el("code", {});
  for (const [css, text] of pieces) code.appendChild(css ? el("span", { class: "hl-" + css }, text) : document.createTextNode(text));
  return el("pre", { class: className || "code" }, code);
}
function segmentNodes(segments) {
  return segments.map((part) => part.code !== undefined
    ? codeBlock(part.pieces, part.language === "output" ? "output" : "code")
    : el("div", { class: "text" }, part.text));
}
function turnBox(turn) {
  const box = el("div", { class: "turn " + turn.role });
  const stats = turn.stats;
  if (stats) {
    const bits = [];
    if (stats.completion_tokens !== undefined) bits.push(fmt(stats.completion_tokens) + " tokens");
    if (stats.generation_s !== undefined) bits.push(secs(stats.generation_s) + " generating");
    if (stats.tool_s) bits.push(secs(stats.tool_s) + " in tools");
    if (stats.tool_errors) bits.push(stats.tool_errors + " failed call" + (stats.tool_errors > 1 ? "s" : ""));
    box.appendChild(el("span", { class: "stats" }, bits.join(" · ")));
  }
  box.appendChild(el("div", { class: "role" }, turn.role + (turn.name ? " · " + turn.name : "")));
  const content = segmentNodes(turn.segments);
  if (turn.role === "system") {
    const size = turn.segments.reduce((n, s) => n + (s.text || s.code || "").length, 0);
    box.appendChild(el("details", { class: "system-prompt" }, el("summary", {}, "system prompt (" + count(size) + " characters)"), content));
    return box;
  }
  if (turn.reasoning) {
    box.appendChild(el("details", { class: "reasoning" }, el("summary", {}, "reasoning (" + count(turn.reasoning.length) + " characters)"),
      el("div", { class: "text" }, turn.reasoning)));
  }
  box.append(...content);
  for (const call of turn.calls || []) {
    box.appendChild(el("div", { class: "call-name" }, "call " + (call.name || "?") + (call.id ? " · " + call.id : "")));
    box.appendChild(call.pieces && call.pieces.length ? codeBlock(call.pieces, "code call") : el("pre", { class: "call" }, call.arguments || call.code || ""));
    if (call.output !== null && call.output !== undefined) {
      box.appendChild(el("div", { class: "call-name" }, "output"));
      box.appendChild(el("pre", { class: "output" + (stats && stats.tool_errors ? " failed" : "") }, call.output));
    } else box.appendChild(el("div", { class: "call-name" }, "(no output recorded)"));
  }
  return box;
}
async function maskPanel(body, key, row) {
  body.appendChild(el("p", { class: "muted" }, "rendering with the chat template and tokenizer…"));
  const mask = await api.mask(key, row);
  const text = el("pre", { class: "mask", id: "mask" });
  mask.tokens.forEach(([piece, trained], number) => text.appendChild(
    el("span", { class: "tok " + (trained ? "trained" : "masked") + (number % 2 ? " alt" : "") }, piece)));
  body.replaceChildren(
    el("p", { class: "legend" }, el("span", { class: "tok trained" }, "trained: " + count(mask.trained) + " tokens"),
      el("span", { class: "tok masked" }, "masked (prompt, tool output): " + count(mask.total - mask.trained) + " tokens"),
      el("span", { class: "muted" }, "tokenizer " + mask.tokenizer)),
    text);
}
async function problemRecord(page, artifact, record) {
  const problem = record.problem;
  page.appendChild(el("h1", {}, "problem " + (problem.problem_id || record.row)));
  if (problem.status) page.appendChild(el("p", {}, el("span", { class: problem.status === "in pool" ? "badge good" : "badge bad" }, problem.status)));
  page.appendChild(el("div", { class: "card" }, el("div", { class: "role" }, "question"), el("div", { class: "text" }, fmt(problem.question))));
  page.appendChild(el("div", { class: "card" }, el("div", { class: "role" }, "answer"), el("div", { class: "text" }, fmt(problem.answer))));
  const facts = Object.entries(problem).filter(([name]) => !["question", "answer", "prompt", "_row"].includes(name));
  page.appendChild(el("div", { class: "card facts" }, facts.map(([name, value]) => el("div", {}, el("span", {}, name), el("span", {}, fmt(value))))));
}

// ------------------------------------------------------------------ a problem: its k samples
async function problemPage(page, key, problemId) {
  const [artifact, problem] = await Promise.all([api.summary(key), api.problem(key, problemId)]);
  where(artifact.kind, artifact.label, "problem " + problemId);
  page.appendChild(el("h1", {}, "problem " + problemId));
  page.appendChild(el("div", { class: "card text", id: "question" }, problem.question));
  const [low, high] = problem.interval;
  const band = problem.band;
  const line = el("p", { id: "pass-rate" }, "pass rate " + pct(problem.pass_rate) + " (" + problem.correct + " of " + problem.valid + " valid samples",
    problem.failed ? ", " + problem.failed + " failed" : "", "), 95% interval " + pct(low) + "–" + pct(high) + " · band (" + band[0] + ", " + band[1] + ") ");
  if (problem.in_band !== null) line.appendChild(el("span", { class: problem.in_band ? "badge good" : "badge bad" }, problem.in_band ? "in band" : "out of band"));
  page.appendChild(line);
  if (problem.drop_reason) page.appendChild(el("p", { id: "drop-reason" }, "left out of the pool: ", el("span", { class: "badge bad" }, problem.drop_reason)));
  const grid = el("div", { class: "samples", id: "samples" });
  for (const sample of problem.samples) {
    grid.appendChild(el("div", { class: "card" }, link("#/a/" + enc(key) + "/r/" + sample._row, sample.id), " ", verdict(sample.correct),
      el("div", { class: "muted" }, sample.finish_reason + " · " + fmt(sample.num_tool_calls) + " tool calls (" + fmt(sample.num_tool_errors) + " failed) · " + fmt(sample.completion_tokens) + " tokens"),
      el("div", { class: "text" }, "answer: " + fmt(sample.final_answer))));
  }
  page.appendChild(grid);
}

// ------------------------------------------------------------------ curate: the drop report
async function curatePage(page, key) {
  const [artifact, report] = await Promise.all([api.summary(key), api.curate(key)]);
  where(artifact.kind, artifact.label, "drop report");
  page.appendChild(el("h1", {}, "drop report · " + artifact.label));
  if (report.empty) page.appendChild(el("p", { class: "damaged" }, report.empty));
  const share = (count) => (report.input ? pct(count / report.input) : "–");
  const table = el("table", { id: "drops" }, el("tr", {}, el("th", {}, "step / reason"), el("th", {}, "rows"), el("th", {}, "share")),
    el("tr", {}, el("td", {}, "input"), el("td", { class: "num" }, count(report.input)), el("td", { class: "num" }, "100.0%")));
  for (const [reason, rows] of Object.entries(report.dropped)) {
    const name = report.rejects ? link("#/a/" + enc(report.rejects) + query({ drop_reason: reason }), "dropped_" + reason) : "dropped_" + reason;
    table.appendChild(el("tr", { "data-reason": reason }, el("td", {}, name), el("td", { class: "num" }, count(rows)), el("td", { class: "num" }, share(rows))));
  }
  table.appendChild(el("tr", {}, el("th", {}, "kept"), el("th", { class: "num" }, count(report.kept)), el("th", { class: "num" }, share(report.kept))));
  page.appendChild(table);
  if (!report.rejects) page.appendChild(el("p", { class: "muted" }, "The rows of each reason are listed when curate ran with --rejects FILE."));
  if (report.per_source.length) page.appendChild(el("h2", {}, "per source"), plainTable(report.per_source));
}
function plainTable(rows) {
  const names = Object.keys(rows[0] || {});
  return el("table", {}, el("tr", {}, names.map((n) => el("th", {}, n))),
    rows.map((row) => el("tr", {}, names.map((n) => el("td", { class: typeof row[n] === "number" ? "num" : "" }, fmt(row[n]))))));
}

// ------------------------------------------------------------------ compare two runs
async function comparePage(page, first, second, params) {
  const show = params.show || "flipped";
  const data = await api.compare(first, second, show);
  const artifacts = await allArtifacts();
  const label = (key) => (artifacts.find((a) => a.key === key) || { label: key }).label;
  where("compare", label(first) + " vs " + label(second));
  page.append(el("h1", {}, "A: " + label(first)), el("h1", {}, "B: " + label(second)));
  const c = data.counts;
  page.appendChild(el("p", { id: "compare-counts" }, count(c.problems) + " problems in both · solved by both " + count(c.both) + " · by neither " + count(c.neither) +
    " · gained by B " + count(c.gained) + " · lost by B " + count(c.lost) + (c.only_in_a || c.only_in_b ? " · only in A " + count(c.only_in_a) + ", only in B " + count(c.only_in_b) : "")));
  const choices = el("p", {}, ["flipped", "gained", "lost", "both", "neither", "all"].map((name) =>
    [name === show ? el("strong", {}, name) : link("#/compare/" + enc(first) + "/" + enc(second) + "?show=" + name, name), " "]));
  page.appendChild(choices);
  const table = el("table", { id: "compare-rows" }, el("tr", {}, ["problem", "question", "A correct", "A pass rate", "B correct", "B pass rate", "B − A"].map((n) => el("th", {}, n))));
  for (const row of data.rows) {
    table.appendChild(el("tr", { class: row.gained ? "gained" : row.lost ? "lost" : "" },
      el("td", {}, link("#/a/" + enc(first) + "/p/" + enc(row.problem_id), row.problem_id)),
      el("td", { class: "question-cell" }, fmt(row.question)),
      el("td", { class: "num" }, row.correct + "/" + row.valid), el("td", { class: "num" }, pct(row.pass_rate)),
      el("td", { class: "num" }, link("#/a/" + enc(second) + "/p/" + enc(row.problem_id), row.correct_b + "/" + row.valid_b)),
      el("td", { class: "num" }, pct(row.pass_rate_b)), el("td", { class: "num" }, fmt(row.difference))));
  }
  page.appendChild(table);
}

// ------------------------------------------------------------------ train: metrics against steps
const PREFERRED = ["reward", "accuracy", "entropy", "tools/call_frequency", "loss", "completions/model_tokens", "mean_token_accuracy"];
async function trainPanel(page, artifact) {
  const data = await api.train(artifact.key);
  const names = Object.keys(data.series || {});
  if (!names.length) {
    page.appendChild(el("p", { class: "muted" }, "The stages of this run are listed above."));
    return;
  }
  const chosen = names.filter((n) => PREFERRED.includes(n) || /^eval\/avg@/.test(n));
  const charts = el("div", { class: "charts", id: "charts" });
  const draw = () => charts.replaceChildren(...names.filter((n) => boxes[n].checked).map((n) => chart(n, data.series[n])));
  const boxes = {};
  const picker = el("details", {}, el("summary", {}, "metrics (" + names.length + ")"),
    el("div", { class: "facts" }, names.map((name) => {
      boxes[name] = el("input", { type: "checkbox", checked: chosen.includes(name) ? "checked" : null, onchange: draw });
      return el("label", {}, boxes[name], " " + name);
    })));
  page.append(picker, charts);
  draw();
  plotsPanel(page, artifact);
}
function chart(name, points) {
  const width = 340, height = 190, left = 46, bottom = 24, top = 18, right = 10;
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)], [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  const sx = (x) => left + (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0)) * (width - left - right);
  const sy = (y) => height - bottom - (y1 === y0 ? 0.5 : (y - y0) / (y1 - y0)) * (height - top - bottom);
  const label = (v) => (Math.abs(v) >= 1000 || (v !== 0 && Math.abs(v) < 0.01) ? v.toExponential(1) : Number(v.toFixed(3)).toString());
  return el("div", { class: "chart", "data-metric": name }, svg("svg", { width, height, viewBox: "0 0 " + width + " " + height },
    svg("text", { x: left, y: 12 }, name),
    svg("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom }),
    svg("line", { x1: left, y1: top, x2: left, y2: height - bottom }),
    svg("text", { x: 2, y: sy(y1) + 4 }, label(y1)), svg("text", { x: 2, y: sy(y0) + 4 }, label(y0)),
    svg("text", { x: left, y: height - 6 }, "step " + x0), svg("text", { x: width - right - 50, y: height - 6 }, "step " + x1),
    svg("polyline", { points: points.map((p) => sx(p[0]) + "," + sy(p[1])).join(" ") }),
    points.length < 40 ? points.map((p) => svg("circle", { cx: sx(p[0]), cy: sy(p[1]), r: 2.2 })) : []));
}

// ------------------------------------------------------------------ eval: the report
async function evalPanel(page, artifact) {
  const data = await api.evaluation(artifact.key);
  const names = ["model", "benchmark", "max_tool_calls", "num_problems", "samples"];
  const table = el("table", { id: "eval-results" }, el("tr", {}, [...names, "avg@k", "pass@k", "tool calls", "tool errors", "responses"].map((n) => el("th", {}, n))));
  for (const result of data.results) {
    const k = result.samples;
    const passAt = result["pass@k"] ? result["pass@k"][String(k)] : null;
    table.appendChild(el("tr", {}, names.map((n) => el("td", {}, fmt(result[n]))),
      el("td", { class: "num" }, pct(result["avg@" + k])), el("td", { class: "num" }, pct(passAt)),
      el("td", { class: "num" }, fmt(result.mean_tool_calls)), el("td", { class: "num" }, pct(result.tool_error_rate)),
      el("td", {}, result.artifact ? link("#/a/" + enc(result.artifact), "open") : "–")));
  }
  page.appendChild(table);
  plotsPanel(page, artifact);
}
