// KG Lens details panel and DOM helpers, shared by the live graph view (graph.js) and the Map (map.js): Python
// loads this file and the view's own script as one module (components/graph_live.py). The panel shows what
// components/graph_instrument.py builds for a node or a relation: what it is on the left, its relations and
// sources on the right, and (where the view offers `edit`) the curation forms. Every string from data is set with
// textContent; nothing from data is parsed as HTML; every edited value goes back to Python as data.

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

// Fill `panel` with the details `d`. hooks: features ({expand, open, paths, search, communities, edit}: which
// actions the view offers), send(event) to Python, close(), focus(relation) when a relation's other end is
// clicked, state (the view's own: a relation being drawn) and rerender().
function renderDetails(panel, d, hooks) {
  panel.replaceChildren();
  const head = el("div", "kgv-phead");
  head.append(button("×", "Close", () => hooks.close(), "kgv-close"));
  const main = el("div", "kgv-pmain"), side = el("div", "kgv-pside"); // what it is | its relations and sources
  panel.append(head, main, side);
  if (d.error) {
    main.append(el("p", "kgv-note", d.error));
    if (d.edit_notice) main.append(el("p", d.edit_notice[1] ? "kgv-edit-error" : "kgv-edit-ok", d.edit_notice[0]));
    return;
  }
  if (d.kind === "node") nodeDetails(d, main, side, hooks); else edgeDetails(d, main, side, hooks);
  panel.dataset.kind = d.kind;
  panel.dataset.id = d.id;
}

function factsOf(d) {
  const facts = el("div", "kgv-facts");
  for (const [k, v] of d.facts) { facts.append(el("span", "kgv-k", k), el("span", "kgv-v", v)); }
  return facts;
}

function nodeDetails(d, panel, side, hooks) {
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
  side.append(el("div", "kgv-sec", "Relations (" + d.relations.length + " of " + d.relations_total + ")"));
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
  side.append(rels);
  if (f.edit && d.edit) nodeEdit(d, panel, hooks);
  sourcesDetails(d, side);
}

function edgeDetails(d, panel, side, hooks) {
  const title = el("div", "kgv-title");
  title.append(el("b", "kgv-name", d.from), el("span", "kgv-dir", " —"), el("span", "kgv-chip", d.type),
               el("span", "kgv-dir", "→ "), el("b", "kgv-name", d.to));
  panel.append(title);
  if (d.description) panel.append(el("p", "kgv-desc", d.description));
  panel.append(factsOf(d));
  if (d.note) panel.append(el("p", "kgv-note", d.note));
  if ((hooks.features || {}).edit && d.edit) edgeEdit(d, panel, hooks);
  sourcesDetails(d, side);
}

function sourcesDetails(d, side) {
  side.append(el("div", "kgv-sec", "Sources (" + d.sources.length + " of " + d.sources_total + ")"));
  if (!d.sources.length) side.append(el("p", "kgv-note", "No source chunk is recorded."));
  for (const s of d.sources) {
    const box = el("details", "kgv-src");
    const where = [s.book, s.chapter].filter(Boolean).join(" › ") || s.id;
    box.append(el("summary", null, where));
    if (s.text) box.append(el("p", null, s.text));
    box.append(el("span", "kgv-id", s.id));
    side.append(box);
  }
}

// --- editing (curation): every value goes back as data; Python checks and applies it ------------------------

function field(label, value, multiline) {
  const wrap = el("label", "kgv-field");
  wrap.append(el("span", "kgv-k", label));
  const input = el(multiline ? "textarea" : "input", "kgv-input");
  if (!multiline) input.type = "text";
  input.value = value == null ? "" : String(value);
  input.addEventListener("keydown", (ev) => ev.stopPropagation()); // typing is not a graph shortcut
  wrap.append(input);
  return [wrap, input];
}

function editNotice(box, ed, hooks) {
  if (!ed.notice) return;
  const note = el("p", ed.error ? "kgv-edit-error" : "kgv-edit-ok", ed.notice);
  note.setAttribute("role", ed.error ? "alert" : "status");
  box.append(note);
  if (ed.offer_merge) box.append(button("Merge them instead", "Merge this entity into the one that has the name",
                                        () => hooks.send({ type: "offer_merge" }), "kgv-primary"));
}

function historyList(box, ed) {
  if (!ed.history || !ed.history.length) { box.append(el("p", "kgv-note", "Never edited.")); return; }
  const ul = el("ul", "kgv-history");
  for (const h of ed.history) ul.append(el("li", null, "#" + h.id + " " + h.when + " " + h.who + ": " + h.what + (h.state === "applied" ? "" : " [" + h.state + "]")));
  box.append(ul);
}

function nodeEdit(d, host, hooks) {
  const ed = d.edit;
  const box = el("div", "kgv-edit");
  box.dataset.rev = String(ed.rev);
  box.append(el("div", "kgv-sec", "Edit (as " + ed.author + ")"));
  editNotice(box, ed, hooks);
  if (ed.preview) { mergePreview(box, d, ed, hooks); host.append(box); return; }
  if (ed.relate_from && ed.relate_from[0] !== d.id && hooks.state.relateTo === d.id) { relateForm(box, d, ed, hooks); host.append(box); return; }
  const [nameRow, name] = field("Name", d.name);
  const [typeRow, type] = field("Type", d.type);
  const [descRow, desc] = field("Description", d.description, true);
  name.classList.add("kgv-edit-name");
  const save = button("Save", "Apply these fields as one change", () => hooks.send({
    type: "edit_node", what: "save", id: d.id, rev: ed.rev, name: name.value, etype: type.value, description: desc.value }), "kgv-primary");
  box.append(nameRow, typeRow, descRow, save);
  const aliases = el("div", "kgv-aliases");
  for (const a of d.aliases || []) {
    const chip = el("span", "kgv-chip", a);
    chip.append(button("×", "Remove this alias", () => hooks.send({ type: "edit_node", what: "alias_remove", id: d.id, rev: ed.rev, alias: a }), "kgv-link"));
    aliases.append(chip);
  }
  const [aliasRow, alias] = field("Alias", "");
  aliasRow.append(button("Add alias", "Add another name for this entity", () => hooks.send({
    type: "edit_node", what: "alias_add", id: d.id, rev: ed.rev, alias: alias.value })));
  box.append(aliases, aliasRow);
  const acts = el("div", "kgv-acts");
  const marked = (ed.marks || []).some((m) => m[0] === d.id);
  acts.append(button(marked ? "Unmark for merge" : "Mark for merge", "Mark entities, then merge them into another one", () => hooks.send({ type: "mark", id: d.id })));
  const others = (ed.marks || []).filter((m) => m[0] !== d.id);
  if (others.length) acts.append(button("Merge " + others.length + " marked into this…", others.map((m) => m[1]).join(", "),
                                        () => hooks.send({ type: "merge_preview", id: d.id }), "kgv-primary"));
  if (ed.relate_from && ed.relate_from[0] !== d.id) acts.append(button("Relate " + short(ed.relate_from[1], 30) + " → this…", "Add a relation from the chosen start to this entity", () => { hooks.state.relateTo = d.id; hooks.rerender(); }));
  else acts.append(button("Relate from here", "Start a new relation at this entity (then pick its target)", () => hooks.send({ type: "relate_start", id: d.id })));
  const del = button("Delete entity", "Delete this entity and its relations", () => {
    if (del.dataset.armed) hooks.send({ type: "edit_node", what: "delete", id: d.id, rev: ed.rev });
    else { del.dataset.armed = "1"; del.textContent = "Confirm delete"; }
  }, "kgv-danger");
  acts.append(del);
  box.append(acts);
  if (ed.marks && ed.marks.length) box.append(el("p", "kgv-note", "Marked for merge: " + ed.marks.map((m) => m[1]).join(" · ")));
  box.append(el("div", "kgv-sec", "History"));
  historyList(box, ed);
  host.append(box);
}

function choice(label, values, chosen) {
  const wrap = el("label", "kgv-field");
  wrap.append(el("span", "kgv-k", label));
  const sel = el("select", "kgv-input");
  for (const v of values) { const o = document.createElement("option"); o.value = v; o.textContent = short(v, 90); sel.append(o); }
  sel.value = chosen;
  wrap.append(sel);
  return [wrap, sel];
}

function mergePreview(box, d, ed, hooks) {
  const pv = ed.preview;
  box.classList.add("kgv-merge");
  box.append(el("div", "kgv-sec", "Merge into " + d.name));
  if (pv.error) { box.append(el("p", "kgv-edit-error", pv.error)); box.append(button("Cancel", "", () => hooks.send({ type: "cancel" }))); return; }
  const list = el("ul", "kgv-merged");
  for (const [, n, t] of pv.merged) list.append(el("li", null, n + " (" + t + ")"));
  box.append(list);
  const c = pv.conflicts || {};
  const [nameRow, name] = choice("Name", c.name || [pv.name], pv.name);
  box.append(nameRow);
  let type = null;
  if (c.type) { const [row, sel] = choice("Type", c.type, pv.type); type = sel; box.append(row); }
  const [descRow, desc] = field("Description", pv.description, true);
  if (c.description) box.append(el("p", "kgv-note", "The descriptions differ: all are kept below; edit to choose."));
  box.append(descRow);
  if (pv.aliases.length) box.append(el("p", "kgv-note", "Aliases: " + pv.aliases.join(" · ")));
  box.append(el("p", "kgv-note", pv.counts));
  const acts = el("div", "kgv-acts");
  acts.append(button("Merge", "Merge these entities into one (undoable)", () => hooks.send({
    type: "merge", id: d.id, name: name.value, etype: type ? type.value : pv.type, description: desc.value }), "kgv-primary"));
  acts.append(button("Cancel", "Close the preview", () => hooks.send({ type: "cancel" })));
  box.append(acts);
}

function relateForm(box, d, ed, hooks) {
  box.append(el("div", "kgv-sec", "New relation: " + ed.relate_from[1] + " → " + d.name));
  const [typeRow, type] = field("Type", "");
  const [descRow, desc] = field("Description", "", true);
  box.append(typeRow, descRow);
  const acts = el("div", "kgv-acts");
  acts.append(button("Add relation", "Add it (undoable)", () => { hooks.state.relateTo = null; hooks.send({
    type: "relate", id: d.id, relation_type: type.value, description: desc.value }); }, "kgv-primary"));
  acts.append(button("Cancel", "", () => { hooks.state.relateTo = null; hooks.send({ type: "cancel" }); }));
  box.append(acts);
}

function edgeEdit(d, host, hooks) {
  const ed = d.edit;
  const box = el("div", "kgv-edit");
  box.dataset.rev = String(ed.rev);
  box.append(el("div", "kgv-sec", "Edit (as " + ed.author + ")"));
  editNotice(box, ed, hooks);
  const [typeRow, type] = field("Type", d.type);
  const [descRow, desc] = field("Description", d.description, true);
  const weight0 = (d.facts.find((f) => f[0] === "weight") || [0, "1"])[1];
  const [weightRow, weight] = field("Weight", weight0);
  box.append(typeRow, descRow, weightRow);
  const acts = el("div", "kgv-acts");
  acts.append(button("Save", "Apply these fields as one change", () => hooks.send({
    type: "edit_edge", what: "save", id: d.id, rev: ed.rev, relation_type: type.value, description: desc.value, weight: weight.value }), "kgv-primary"));
  acts.append(button("Reverse", "Swap its source and target", () => hooks.send({ type: "edit_edge", what: "reverse", id: d.id, rev: ed.rev })));
  const del = button("Delete relation", "Delete this relation", () => {
    if (del.dataset.armed) hooks.send({ type: "edit_edge", what: "delete", id: d.id, rev: ed.rev });
    else { del.dataset.armed = "1"; del.textContent = "Confirm delete"; }
  }, "kgv-danger");
  acts.append(del);
  box.append(acts, el("div", "kgv-sec", "History"));
  historyList(box, ed);
  host.append(box);
}

