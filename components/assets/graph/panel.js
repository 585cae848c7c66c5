// KG Lens details panel and DOM helpers, shared by the live graph view (graph.js) and the Map (map.js): Python
// loads this file and the view's own script as one module (components/graph_live.py). The panel shows what
// components/graph_instrument.py builds for a node or a relation. Every string from data is set with
// textContent; nothing from data is parsed as HTML.

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function short(text, n) {
  const s = String(text == null ? "" : text);
  return s.length <= n ? s : s.slice(0, Math.max(1, n - 1)) + "…";
}

function button(label, title, onClick, cls) {
  const b = el("button", "kgv-btn" + (cls ? " " + cls : ""), label);
  b.type = "button";
  if (title) b.title = title;
  b.addEventListener("click", (ev) => { ev.stopPropagation(); onClick(ev); });
  return b;
}

// Fill `panel` with the details `d`. hooks: features ({expand, open, paths, search, communities}: which actions
// the view offers), send(event) to Python, close(), focus(relation) when a relation's other end is clicked.
function renderDetails(panel, d, hooks) {
  panel.replaceChildren();
  const head = el("div", "kgv-phead");
  head.append(button("×", "Close", () => hooks.close(), "kgv-close"));
  panel.append(head);
  if (d.error) { panel.append(el("p", "kgv-note", d.error)); return; }
  if (d.kind === "node") nodeDetails(panel, d, hooks); else edgeDetails(panel, d);
  panel.dataset.kind = d.kind;
  panel.dataset.id = d.id;
}

function factsOf(d) {
  const facts = el("div", "kgv-facts");
  for (const [k, v] of d.facts) { facts.append(el("span", "kgv-k", k), el("span", "kgv-v", v)); }
  return facts;
}

function nodeDetails(panel, d, hooks) {
  const f = hooks.features || {};
  const send = hooks.send;
  const title = el("div", "kgv-title");
  title.append(el("b", "kgv-name", d.name), el("span", "kgv-chip", d.type));
  panel.append(title);
  if (d.description) panel.append(el("p", "kgv-desc", d.description));
  if (d.aliases && d.aliases.length) panel.append(el("p", "kgv-note", "Also called: " + d.aliases.join(" · ")));
  panel.append(factsOf(d));
  if (d.note) panel.append(el("p", "kgv-note", d.note));
  if (d.neighbours) {
    const nb = el("div", "kgv-nb");
    nb.append(el("div", "kgv-count", d.neighbours.shown + " of " + d.neighbours.total + " neighbours shown"));
    if (f.expand && d.neighbours.shown < d.neighbours.total) {
      const row = el("div", "kgv-rest");
      row.append(button("Expand", "Add the best-connected neighbours not shown yet", () => send({ type: "expand", id: d.id }), "kgv-primary"));
      for (const [type, n] of d.neighbours.rest) {
        row.append(button("+" + n + " " + short(type, 24), "Add the neighbours joined by this relation type",
                          () => send({ type: "expand", id: d.id, rel: type })));
      }
      nb.append(row);
    }
    panel.append(nb);
  }
  if (f.open || f.paths || f.search || f.communities) {
    const acts = el("div", "kgv-acts");
    if (f.open) acts.append(button("Open here", "Open its neighbourhood in the live graph view (Paths › Explore)", () => send({ type: "open", id: d.id }), "kgv-primary"));
    if (f.paths) {
      acts.append(button("Path start", "Use as the start of a why-connected path", () => send({ type: "path_start", id: d.id })));
      acts.append(button("Path end", "Use as the end of a why-connected path", () => send({ type: "path_end", id: d.id })));
    }
    if (f.search) acts.append(button("Search from here", "Search with this entity as the question", () => send({ type: "search", id: d.id })));
    if (f.communities) acts.append(button("Communities", "Open the Communities page on this entity: its communities and claims", () => send({ type: "communities", id: d.id })));
    panel.append(acts);
  }
  panel.append(el("div", "kgv-sec", "Relations (" + d.relations.length + " of " + d.relations_total + ")"));
  const rels = el("ul", "kgv-rels");
  for (const r of d.relations) {
    const li = el("li");
    const line = el("div", "kgv-rline");
    line.append(el("span", "kgv-dir", r.out ? "→" : "←"), el("span", "kgv-rtype", r.type));
    const other = el("a", "kgv-other", r.other);
    other.href = "#";
    other.addEventListener("click", (ev) => { ev.preventDefault(); hooks.focus(r); });
    line.append(other);
    li.append(line);
    if (r.desc) li.append(el("div", "kgv-rdesc", r.desc));
    rels.append(li);
  }
  panel.append(rels);
  sourcesDetails(panel, d);
}

function edgeDetails(panel, d) {
  const title = el("div", "kgv-title");
  title.append(el("b", "kgv-name", d.from), el("span", "kgv-chip", d.type), el("b", "kgv-name", d.to));
  panel.append(title);
  if (d.description) panel.append(el("p", "kgv-desc", d.description));
  panel.append(factsOf(d));
  if (d.note) panel.append(el("p", "kgv-note", d.note));
  sourcesDetails(panel, d);
}

function sourcesDetails(panel, d) {
  panel.append(el("div", "kgv-sec", "Sources (" + d.sources.length + " of " + d.sources_total + ")"));
  if (!d.sources.length) panel.append(el("p", "kgv-note", "No source chunk is recorded."));
  for (const s of d.sources) {
    const box = el("details", "kgv-src");
    const where = [s.book, s.chapter].filter(Boolean).join(" › ") || s.id;
    box.append(el("summary", null, where));
    if (s.text) box.append(el("p", null, s.text));
    box.append(el("span", "kgv-id", s.id));
    panel.append(box);
  }
}
