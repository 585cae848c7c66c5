// KG Lens live graph view: vis-network in the app's page, updated in place from the data Python sends.
// Every string from data is set with textContent (or as a canvas label, which vis draws as text); nothing
// from data is ever parsed as HTML, and no element is created from it.
// vis-network itself arrives once per browser session through the `kg_lens_vis` component (window.vis); the details
// panel and the DOM helpers (renderDetails, el, short, button) come from panel.js, loaded before this file.

const INSTANCES = new WeakMap(); // parentElement -> view
// The details panel, notice and undo state arrive through a second, small component (`kg_lens_details`), so a
// click re-sends neither the graph's data nor redraws it: both meet here, by the view's key.
const VIEWS = (window.__kgViews = window.__kgViews || new Map());
const EXTRA = (window.__kgExtra = window.__kgExtra || new Map());
const POSITIONS = new Map(); // key + scene -> {id: {x, y}}, so a remount (the page re-laid out) keeps the layout
const FOCUS = "#e8590c";
const PATH = "#1d2433";
const EDGE = "#aab2bd";
const EDGE_FADED = "#dfe3e8";
const SEED = 1, DEST = 2, ON_PATH = 4, PICKED = 8;
// Beyond this many nodes: straight edges, edges hidden while dragging or zooming, and nothing that redraws the
// whole canvas for a click or a hover (each redraw of 10,000 edges takes ~0.6 s on a CPU): the selection is a
// ring laid over the canvas, tooltips follow the pointer, the details panel opens over the graph.
const BIG = 400;
const LABELLED_PARALLEL = 3;
const GOLDEN_ANGLE = Math.PI * (3 - Math.sqrt(5)); // loops k = 0, 1, 2 ... spread round their node
const FIT = { animation: false, maxZoomLevel: 1.6 }; // a small graph fills the canvas, up to 1.6× its layout
const DRAWER = 320; // px: the details drawer opens below the graph, which keeps its own width and height

function whenVis(run) {
  if (globalThis.vis && globalThis.vis.Network) { run(); return; }
  window.addEventListener("kg-vis-ready", run, { once: true });
}

function decode(data) {
  if (data == null) return null;
  if (typeof data === "string") return JSON.parse(data);
  if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) {
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    return JSON.parse(new TextDecoder().decode(bytes));
  }
  return data;
}

class GraphViewInstance {
  constructor(parent) {
    this.parent = parent;
    this.scene = null;
    this.rev = null;
    this.selected = null; // {kind, id}
    this.hiddenTypes = new Set();
    this.hiddenRels = new Set();
    this.userHidden = new Set();
    this.pinned = new Set();
    this.seq = 0;
    this.build();
  }

  build() {
    const root = el("div", "kgv-root");
    root.tabIndex = -1;
    this.root = root;
    const bar = el("div", "kgv-bar");
    this.find = el("input", "kgv-find");
    this.find.type = "search";
    this.find.placeholder = "Find a node…";
    this.find.setAttribute("aria-label", "Find a node by name");
    this.list = el("datalist");
    this.list.id = "kgv-names-" + Math.random().toString(36).slice(2);
    this.find.setAttribute("list", this.list.id);
    this.find.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); this.findNode(this.find.value); } });
    this.find.addEventListener("change", () => this.findNode(this.find.value));
    this.filterBtn = button("Filter", "Show or hide entity types and relation types", () => this.toggleFilter());
    this.fitBtn = button("Fit", "Fit the whole view", () => this.net && this.net.fit(FIT));
    this.backBtn = button("↶ Back", "Undo the last expansion", () => this.history("undo"));
    this.fwdBtn = button("↷ Forward", "Redo an expansion you went back from", () => this.history("redo"));
    this.pngBtn = button("PNG", "Download the current view as a PNG image", () => this.exportPng());
    this.fullBtn = button("Full screen", "Full screen (Esc exits)", () => this.toggleFull());
    bar.append(this.find, this.list, this.filterBtn, this.fitBtn, this.backBtn, this.fwdBtn, this.pngBtn, this.fullBtn);
    this.legend = el("div", "kgv-legend");
    const stage = el("div", "kgv-stage");
    this.canvasBox = el("div", "kgv-canvas");
    this.panel = el("aside", "kgv-panel"); // a drawer below the graph: the canvas keeps its room
    this.panel.hidden = true;
    this.labelled = new Set(); // quiet views: the edges whose labels are drawn (those of the selected node)
    this.panelState = { relateTo: null }; // the details panel's own: the entity a new relation is drawn to
    this.filterBox = el("div", "kgv-filter");
    this.filterBox.hidden = true;
    this.menu = el("div", "kgv-menu");
    this.menu.hidden = true;
    this.tip = el("div", "kgv-tip");
    this.tip.hidden = true;
    stage.append(this.canvasBox, this.filterBox, this.menu, this.tip);
    this.status = el("div", "kgv-status");
    root.append(bar, this.legend, stage, this.panel, this.status);
    this.parent.appendChild(root);
    this.onKey = (ev) => {
      if (ev.key !== "Escape") return;
      if (!this.menu.hidden) this.menu.hidden = true;
      else if (root.classList.contains("kgv-full")) this.toggleFull(false);
    };
    document.addEventListener("keydown", this.onKey);
  }

  history(type) { // a new gesture: the same node may be expanded again at once
    this.lastExpand = null;
    this.selectedAt = 0;
    this.send({ type });
  }

  send(event) {
    // increasing across remounts, so Python can drop an event it has already applied
    this.seq = Math.max(this.seq + 1, Date.now() * 1000);
    if (this.setTrigger) this.setTrigger("event", { ...event, seq: this.seq });
  }

  // --- data -> vis ---------------------------------------------------------------------------

  nodeStyle(n, focused) {
    const p = this.p;
    const type = p.types[n.t] || ["entity", "#4c78a8"];
    const color = type[1];
    let shape = "dot", size = 11, border = 1, borderColor = color;
    if (n.r & SEED) { shape = "star"; size = 24; } else if (n.r & DEST) { shape = "diamond"; size = 17; }
    if (n.r & ON_PATH) { border = 3; borderColor = PATH; }
    if (n.r & PICKED) { border = 5; borderColor = FOCUS; }
    const pinned = this.pinned.has(n.i);
    return {
      id: n.i,
      label: short(n.n, 32),
      shape, size,
      borderWidth: pinned ? Math.max(border, 3) : border,
      borderWidthSelected: border + 2,
      shapeProperties: { borderDashes: pinned ? [4, 3] : false },
      color: { background: color, border: pinned ? PATH : borderColor, highlight: { background: color, border: FOCUS },
               hover: { background: color, border: FOCUS } },
      font: { size: 13, color: "#1d2433", bold: Boolean(n.r & PICKED) },
      opacity: focused && !(n.r & PICKED) ? 0.35 : 1,
      hidden: this.isHiddenNode(n),
      fixed: pinned,
    };
  }

  edgeStyle(e, focused, big) {
    const picked = Boolean(e.r & PICKED), onPath = Boolean(e.r & ON_PATH);
    const color = picked ? FOCUS : onPath ? PATH : focused ? EDGE_FADED : EDGE;
    return {
      id: e.i, from: e.f, to: e.o,
      // a quiet view (a schema, a community: many relations between few nodes) labels only the selected node's;
      // of many relations between one pair (or loops on one node) the first three are labelled: the rest would
      // pile their labels on theirs (a tooltip names them)
      label: (this.p.quiet && !this.labelled.has(e.i)) || ((e.K || 0) > LABELLED_PARALLEL && e.k >= LABELLED_PARALLEL)
        ? "" : short(this.p.rels[e.y] || "", 28),
      width: picked ? 4 : onPath ? 2.2 : 1,
      color: { color, highlight: FOCUS, hover: FOCUS },
      // the label's white outline makes every frame 4× slower on 10,000 edges (drawn or not): small graphs only
      font: { size: 10, color: picked ? FOCUS : "#5b6577", strokeWidth: big ? 0 : 3, align: "middle" },
      // parallel relations fan out to both sides; loops go round their node, in rings of three
      smooth: big ? false : { enabled: true, type: (e.k || 0) % 2 ? "curvedCCW" : "curvedCW",
                              roundness: 0.12 + 0.22 * Math.floor((e.k || 0) / 2) },
      selfReference: e.f === e.o ? { size: 22 + 16 * ((e.k || 0) % 3), angle: (e.k || 0) * GOLDEN_ANGLE } : undefined,
      hidden: this.hiddenRels.has(this.p.rels[e.y]),
    };
  }

  isHiddenNode(n) {
    const type = (this.p.types[n.t] || ["entity"])[0];
    return this.userHidden.has(n.i) || this.hiddenTypes.has(type);
  }

  options(big) {
    return {
      autoResize: true, width: "100%", height: "100%",
      layout: { improvedLayout: false, randomSeed: 7 },
      physics: { enabled: false },
      interaction: { hover: !big, selectable: !big, tooltipDelay: 3600000, navigationButtons: false, keyboard: false,
                     hideEdgesOnDrag: big, hideEdgesOnZoom: big, multiselect: false, selectConnectedEdges: !big },
      nodes: { scaling: { label: { drawThreshold: 4 } } },
      edges: { arrows: { to: { enabled: true, scaleFactor: 0.55 } }, selectionWidth: 1.5, hoverWidth: 0.5,
               scaling: { label: { drawThreshold: 5 } } },
    };
  }

  create() {
    const big = this.p.nodes.length > BIG;
    this.nodes = new vis.DataSet();
    this.edges = new vis.DataSet();
    this.net = new vis.Network(this.canvasBox, { nodes: this.nodes, edges: this.edges }, this.options(big));
    this.big = big;
    this.root.kgNetwork = this.net; // for tests and the benchmark: positions of nodes on the canvas
    const net = this.net;
    this.root.classList.toggle("kgv-big", big);
    // what is under the pointer: vis selects it (a redraw), or, on a big graph, it is only looked up
    const hit = (params) => this.big
      ? { node: net.getNodeAt(params.pointer.DOM), edge: net.getEdgeAt(params.pointer.DOM) }
      : { node: params.nodes[0], edge: params.edges[0] };
    net.on("click", (params) => {
      this.menu.hidden = true;
      this.tip.hidden = true;
      this.filterBox.hidden = true;
      const at = hit(params);
      if (at.node !== undefined) this.select("node", at.node);
      else if (at.edge !== undefined) this.select("edge", at.edge);
      else if (this.selected) this.select(null, null);
    });
    net.on("doubleClick", (params) => {
      const id = hit(params).node, now = Date.now();
      if (id === undefined || !this.p.features.expand) return;
      if (this.lastExpand && this.lastExpand.id === id && now - this.lastExpand.t < 250) return; // one gesture, one step
      this.lastExpand = { id, t: now };
      this.selected = { kind: "node", id };
      this.selectedAt = now;
      this.send({ type: "expand", id });
    });
    net.on("zoom", () => { this.userMoved = true; });
    net.on("dragEnd", (params) => { if (!params.nodes.length) this.userMoved = true; });
    net.on("oncontext", (params) => {
      params.event.preventDefault();
      const id = net.getNodeAt(params.pointer.DOM);
      if (id === undefined) return;
      this.mark(id);
      this.showMenu(id, params.pointer.DOM);
    });
    this.canvasBox.addEventListener("mousemove", (ev) => { // a big graph's tooltips, looked up at most 8 times a second
      if (!this.big || !this.menu.hidden || this._tipAt > performance.now() - 120) return;
      this._tipAt = performance.now();
      const b = this.canvasBox.getBoundingClientRect(), at = { x: ev.clientX - b.left, y: ev.clientY - b.top };
      const node = net.getNodeAt(at);
      if (node !== undefined) this.showTip("node", node, at); else this.tip.hidden = true;
    });
    net.on("hoverNode", (params) => {
      if (this.menu.hidden) this.showTip("node", params.node, params.pointer.DOM);
      this.quietLabels(params.node);
    });
    net.on("hoverEdge", (params) => this.showTip("edge", params.edge, params.pointer.DOM));
    net.on("blurNode", () => {
      this.tip.hidden = true;
      this.quietLabels(this.selected && this.selected.kind === "node" ? this.selected.id : null);
    });
    net.on("blurEdge", () => { this.tip.hidden = true; });
    net.on("dragStart", () => { this.tip.hidden = true; });
    net.on("dragEnd", (params) => {
      for (const id of params.nodes) if (this.pinned.has(id)) {
        const pos = net.getPositions([id])[id];
        this.send({ type: "pin", id, x: Math.round(pos.x), y: Math.round(pos.y) });
      }
    });
    net.on("afterDrawing", () => {
      this.placeRing();
      if (this.pendingRev !== null && this.pendingRev !== undefined) {
        this.root.dataset.kgDrawn = this.pendingRev;
        this.root.dataset.kgDraws = String(Number(this.root.dataset.kgDraws || 0) + 1);
        this.pendingRev = null;
      }
    });
  }

  apply(p) {
    this.p = p;
    this.setHeight();
    this.root.dataset.kgKey = p.key;
    this.root.dataset.kgRev = p.rev;
    if (!this.net) this.create();
    this.userHidden = new Set(p.hidden || []);
    this.pinned = new Set(Object.keys(p.pinned || {}));
    const focused = Boolean(p.focused);
    const changed = p.scene !== this.scene || p.rev !== this.rev;
    if (p.scene !== this.scene) {
      this.savePositions();
      this.scene = p.scene;
      this.rev = null;
      this.labelled = new Set();
      this.nodes.clear();
      this.edges.clear();
      this.hiddenTypes = new Set();
      this.hiddenRels = new Set();
      const big = p.nodes.length > BIG;
      if (big !== this.big) {
        this.big = big;
        this.net.setOptions(this.options(big));
        this.root.classList.toggle("kgv-big", big);
      }
      this.ringId = null;
    }
    if (p.rev !== this.rev) {
      this.update(p, focused);
      this.rev = p.rev;
    }
    this.renderLegend();
    this.renderNames();
    this.renderFilter();
    this.backBtn.hidden = this.fwdBtn.hidden = !p.features.expand;
    const shown = p.nodes.filter((n) => !this.isHiddenNode(n)).length;
    this.root.dataset.kgShown = String(shown);
    this.root.dataset.kgEdges = String(p.edges.length);
    this.root.dataset.kgFocusNodes = String(p.nodes.filter((n) => n.r & PICKED).length);
    this.root.dataset.kgFocusEdges = String(p.edges.filter((e) => e.r & PICKED).length);
    VIEWS.set(p.key, this);
    this.applyExtra(EXTRA.get(p.key) || this.x || {});
    this.measure();
    if (this.root.dataset.kgDrawn !== p.rev || changed) { // only new data (or a view not drawn yet) is drawn again
      this.pendingRev = p.rev;
      this.net.redraw();
    }
  }

  applyExtra(x) { // details, notice, undo/redo: from the small component, after every run
    this.x = x;
    if (!this.p) return;
    this.renderStatus();
    this.renderPanel();
    this.backBtn.disabled = !x.can_undo;
    this.fwdBtn.disabled = !x.can_redo;
    const d = x.details;
    if (d && d.kind === "node" && this.nodes.get(d.id)) this.mark(d.id); // a redraw only when the selection differs
    this.root.dataset.kgExtra = String(x.seq || "");
  }

  update(p, focused) {
    const saved = POSITIONS.get(p.key + "\u001f" + p.scene) || {};
    const have = new Set(this.nodes.getIds());
    const want = new Set(p.nodes.map((n) => n.i));
    const gone = [...have].filter((id) => !want.has(id));
    if (gone.length) this.nodes.remove(gone);
    const current = this.net.getPositions([...have].filter((id) => want.has(id)));
    const add = [], change = [];
    const ring = new Map(); // anchor -> nodes to place around it
    if (!have.size) this.styles = new Map(); // id -> the style last handed to vis, so only changes are sent
    for (const id of gone) this.styles.delete(id);
    for (const n of p.nodes) {
      const style = this.nodeStyle(n, focused);
      const sig = JSON.stringify(style);
      if (have.has(n.i)) {
        if (this.styles.get(n.i) !== sig) change.push(style);
        this.styles.set(n.i, sig);
        continue;
      }
      this.styles.set(n.i, sig);
      const keep = saved[n.i];
      if (keep) { style.x = keep.x; style.y = keep.y; }
      else if (n.a && (current[n.a] || saved[n.a])) {
        if (!ring.has(n.a)) ring.set(n.a, []);
        ring.get(n.a).push(style);
      } else if (n.x !== undefined) { style.x = n.x; style.y = n.y; }
      add.push(style);
    }
    for (const [anchor, list] of ring) { // new neighbours around the node they were expanded from
      const c = current[anchor] || saved[anchor] || { x: 0, y: 0 };
      const r = 150 + 7 * list.length;
      const turn = Math.random() * 0.3;
      list.forEach((style, i) => {
        const a = turn + (2 * Math.PI * i) / list.length;
        style.x = Math.round(c.x + r * Math.cos(a));
        style.y = Math.round(c.y + r * Math.sin(a));
      });
    }
    if (change.length) this.nodes.update(change);
    if (add.length) this.nodes.add(add);
    const big = p.nodes.length > BIG;
    const edgeIds = new Set(p.edges.map((e) => e.i));
    const oldEdges = this.edges.getIds().filter((id) => !edgeIds.has(id));
    if (oldEdges.length) this.edges.remove(oldEdges);
    for (const id of oldEdges) this.styles.delete("\u001e" + id);
    const edgeChanges = [];
    for (const e of p.edges) {
      const style = this.edgeStyle(e, focused, big);
      const sig = JSON.stringify(style);
      if (this.styles.get("\u001e" + e.i) !== sig) edgeChanges.push(style);
      this.styles.set("\u001e" + e.i, sig);
    }
    if (edgeChanges.length) this.edges.update(edgeChanges);
    if (!have.size) { this.net.fit(FIT); this.userMoved = false; }
  }

  savePositions() {
    if (!this.net || this.scene === null) return;
    POSITIONS.set(this.p.key + "\u001f" + this.scene, this.net.getPositions());
  }

  // --- interactions ----------------------------------------------------------------------------

  select(kind, id) {
    const now = Date.now();
    // the second click of a double-click repeats the first: sent again it could land after the expand event
    // in one rerun, where only the last event of a kind is kept
    const same = kind && this.selected && this.selected.kind === kind && this.selected.id === id;
    if (same && now - this.selectedAt < 250) return;
    this.selectedAt = now;
    this.selected = kind ? { kind, id } : null;
    this.quietLabels(kind === "node" ? id : null);
    if (!kind) { this.panel.hidden = true; this.mark(null); this.refit(); }
    this.send({ type: "select", kind, id });
  }

  findNode(text) {
    const q = String(text || "").trim().toLowerCase();
    if (!q || !this.p) return;
    const visible = this.p.nodes.filter((n) => !this.isHiddenNode(n));
    const hit = visible.find((n) => n.n.toLowerCase() === q) || visible.find((n) => n.n.toLowerCase().includes(q));
    if (!hit) { this.find.classList.add("kgv-miss"); return; }
    this.find.classList.remove("kgv-miss");
    this.userMoved = true; // the panel opening must not fit the view away from the found node
    this.focusAfter = hit.i; // and centre it again if the drawer opening resizes the canvas (full screen)
    this.net.focus(hit.i, { scale: Math.max(this.net.getScale(), 1.1), animation: false });
    this.mark(hit.i);
    this.root.dataset.kgFound = hit.i;
    this.select("node", hit.i);
  }

  showMenu(id, at) {
    const f = this.p.features;
    this.menu.replaceChildren();
    const node = this.nodes.get(id);
    const item = (label, fn) => this.menu.append(button(label, "", () => { this.menu.hidden = true; fn(); }, "kgv-item"));
    item("Details", () => this.select("node", id));
    if (f.expand) item("Expand neighbours", () => this.send({ type: "expand", id }));
    item("Hide", () => { this.nodes.update({ id, hidden: true }); this.send({ type: "hide", id }); });
    if (this.pinned.has(id)) item("Unpin", () => { this.pinned.delete(id); this.nodes.update({ id, fixed: false }); this.send({ type: "unpin", id }); });
    else item("Pin here", () => {
      const pos = this.net.getPositions([id])[id];
      this.pinned.add(id);
      this.nodes.update({ id, fixed: true, borderWidth: 3, shapeProperties: { borderDashes: [4, 3] } });
      this.send({ type: "pin", id, x: Math.round(pos.x), y: Math.round(pos.y) });
    });
    if (f.paths) {
      item("Use as path start", () => this.send({ type: "path_start", id }));
      item("Use as path end", () => this.send({ type: "path_end", id }));
    }
    if (f.search) item("Search from here", () => this.send({ type: "search", id }));
    if (f.communities) item("Its communities", () => this.send({ type: "communities", id }));
    if (f.edit) {
      const ed = (this.x && this.x.details && this.x.details.edit) || {};
      const marks = (ed.marks || []).map((m) => m[0]);
      item(marks.includes(id) ? "Unmark for merge" : "Mark for merge", () => this.send({ type: "mark", id }));
      if (marks.length && !marks.includes(id)) {
        item("Merge marked into this…", () => { this.select("node", id); this.send({ type: "merge_preview", id }); });
      }
      const from = ed.relate_from && ed.relate_from[0];
      if (from && from !== id) item("Relate to this…", () => { this.panelState.relateTo = id; this.select("node", id); });
      else item("Relate from here", () => this.send({ type: "relate_start", id }));
    }
    this.menu.dataset.node = node ? String(node.id) : "";
    this.tip.hidden = true;
    this.menu.hidden = false;
    const box = this.canvasBox.getBoundingClientRect(); // keep the whole menu inside the canvas
    this.menu.style.left = Math.round(Math.max(0, Math.min(at.x + 6, box.width - this.menu.offsetWidth - 4))) + "px";
    this.menu.style.top = Math.round(Math.max(0, Math.min(at.y + 6, box.height - this.menu.offsetHeight - 4))) + "px";
  }

  showTip(kind, id, at) {
    const p = this.p;
    this.tip.replaceChildren();
    if (kind === "node") {
      const n = p.nodes.find((x) => x.i === id);
      if (!n) return;
      const head = el("div", "kgv-tip-head");
      head.append(el("b", null, short(n.n, 200)), el("span", "kgv-chip", short((p.types[n.t] || ["entity"])[0], 60)));
      this.tip.append(head);
      if (n.d) this.tip.append(el("p", null, n.d));
      this.tip.append(el("span", "kgv-id", short(n.i, 120)));
    } else {
      const e = p.edges.find((x) => x.i === id);
      if (!e) return;
      const names = this.names();
      const head = el("div", "kgv-tip-head");
      head.append(el("b", null, short(names.get(e.f) || e.f, 80)), el("span", null, " — " + short(p.rels[e.y] || "", 80) + " → "),
                  el("b", null, short(names.get(e.o) || e.o, 80)));
      this.tip.append(head);
      if (e.d) this.tip.append(el("p", null, e.d));
    }
    this.tip.style.left = Math.round(at.x + 14) + "px";
    this.tip.style.top = Math.round(at.y + 14) + "px";
    this.tip.hidden = false;
  }

  names() {
    if (this._namesRev !== this.p.rev) {
      this._names = new Map(this.p.nodes.map((n) => [n.i, n.n]));
      this._namesRev = this.p.rev;
    }
    return this._names;
  }

  toggleFilter() {
    this.filterBox.hidden = !this.filterBox.hidden;
  }

  toggleFull(on) {
    const full = on === undefined ? !this.root.classList.contains("kgv-full") : on;
    this.root.classList.toggle("kgv-full", full);
    this.setHeight();
    this.measure();
    this.fullBtn.textContent = full ? "✕ Exit full screen" : "Full screen";
    if (full) this.root.focus();
    this.net.setSize("100%", "100%");
    this.net.fit(FIT);
    this.net.redraw();
  }

  exportPng() {
    const src = this.canvasBox.querySelector("canvas");
    if (!src) return;
    const out = document.createElement("canvas");
    out.width = src.width;
    out.height = src.height;
    const ctx = out.getContext("2d");
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.drawImage(src, 0, 0);
    const a = document.createElement("a");
    a.href = out.toDataURL("image/png");
    a.download = (this.p.stem || "graph") + ".png";
    this.root.append(a);
    a.click();
    a.remove();
  }

  applyFilters() {
    const focused = Boolean(this.p.focused);
    this.nodes.update(this.p.nodes.map((n) => ({ id: n.i, hidden: this.isHiddenNode(n) })));
    this.edges.update(this.p.edges.map((e) => ({ id: e.i, hidden: this.hiddenRels.has(this.p.rels[e.y]) })));
    void focused;
    this.root.dataset.kgShown = String(this.p.nodes.filter((n) => !this.isHiddenNode(n)).length);
    this.renderStatus();
  }

  // --- panels --------------------------------------------------------------------------------

  renderLegend() {
    const p = this.p;
    this.legend.replaceChildren();
    const types = el("div", "kgv-row");
    types.append(el("span", "kgv-hd", "Types"));
    for (const [name, color] of p.types.slice(0, 10)) {
      const it = el("span", "kgv-it");
      const sw = el("span", "kgv-sw");
      sw.style.background = color;
      it.append(sw, document.createTextNode(short(name, 28)));
      types.append(it);
    }
    if (p.types.length > 10) types.append(el("span", "kgv-it", "+" + (p.types.length - 10) + " more"));
    this.legend.append(types);
    if (p.roles && p.roles.length) { // only the marks this view has: no empty row
      const roles = el("div", "kgv-row");
      roles.append(el("span", "kgv-hd", "Marks"));
      for (const [word, role] of p.roles) roles.append(el("span", "kgv-it kgv-role-" + role, word));
      this.legend.append(roles);
    }
  }

  renderNames() {
    if (this._listRev === this.p.rev) return;
    this._listRev = this.p.rev;
    const seen = new Set();
    const opts = [];
    for (const n of this.p.nodes) {
      if (seen.has(n.n) || opts.length >= 2000) continue;
      seen.add(n.n);
      const o = document.createElement("option");
      o.value = n.n;
      opts.push(o);
    }
    this.list.replaceChildren(...opts);
  }

  renderFilter() {
    if (this._filterRev === this.p.rev) return;
    this._filterRev = this.p.rev;
    const box = this.filterBox;
    box.replaceChildren();
    const group = (title, names, hidden, cls) => {
      const sec = el("div", "kgv-fgroup " + cls);
      sec.append(el("div", "kgv-hd", title));
      for (const name of names) {
        const lab = el("label", "kgv-check");
        const cb = el("input");
        cb.type = "checkbox";
        cb.checked = !hidden.has(name);
        cb.dataset.kind = cls;
        cb.addEventListener("change", () => {
          if (cb.checked) hidden.delete(name); else hidden.add(name);
          this.applyFilters();
        });
        lab.append(cb, document.createTextNode(short(name, 40)));
        sec.append(lab);
      }
      box.append(sec);
    };
    group("Entity types", this.p.types.map((t) => t[0]), this.hiddenTypes, "kgv-ftypes");
    group("Relation types", this.p.rels, this.hiddenRels, "kgv-frels");
  }

  renderStatus() {
    const p = this.p;
    this.status.replaceChildren();
    const shown = p.nodes.filter((n) => !this.isHiddenNode(n)).length;
    const filtered = p.nodes.length - shown - this.userHidden.size;
    this.status.append(el("span", null, p.status));
    if (filtered > 0) this.status.append(el("span", "kgv-note", " · " + filtered + " hidden by the filter"));
    if (this.userHidden.size) {
      this.status.append(el("span", "kgv-note", " · " + this.userHidden.size + " hidden "));
      this.status.append(button("show all", "Show the nodes you hid", () => this.send({ type: "unhide" }), "kgv-link"));
    }
    const notice = this.x && this.x.notice;
    if (notice) this.status.append(el("span", "kgv-notice", " · " + notice));
  }

  renderPanel() {
    const d = this.x && this.x.details;
    const panel = this.panel;
    const was = !panel.hidden;
    if (!d) { panel.replaceChildren(); panel.hidden = true; if (was) this.refit(); return; }
    renderDetails(panel, d, {
      features: this.p.features,
      send: (event) => this.send(event),
      close: () => this.select(null, null),
      focus: (r) => {
        if (!this.nodes.get(r.other_id)) return;
        this.net.focus(r.other_id, { animation: false });
        this.mark(r.other_id);
        this.select("node", r.other_id);
      },
      state: this.panelState,
      rerender: () => this.renderPanel(),
    });
    panel.hidden = false;
    panel.scrollTop = 0;
    if (!was) this.refit();
    else this.focusAfter = null;
  }

  // Show `id` as selected (null: none): vis's own selection on a small graph (when it differs: it redraws), a
  // ring over the canvas on a big one.
  mark(id) {
    if (!this.net) return;
    if (!this.big) {
      const now = this.net.getSelectedNodes();
      if (id === null) { if (now.length) this.net.unselectAll(); }
      else if (!(now.length === 1 && now[0] === id)) this.net.selectNodes([id]);
      return;
    }
    this.ringId = id;
    this.placeRing();
  }

  placeRing() {
    if (!this.ring) { this.ring = el("div", "kgv-ring"); this.canvasBox.append(this.ring); }
    const id = this.ringId;
    if (!this.big || id === null || id === undefined || !this.nodes.get(id)) { this.ring.hidden = true; return; }
    const p = this.net.canvasToDOM(this.net.getPositions([id])[id]);
    const r = Math.max(8, 14 * this.net.getScale());
    Object.assign(this.ring.style, { left: p.x - r + "px", top: p.y - r + "px", width: 2 * r + "px", height: 2 * r + "px" });
    this.ring.hidden = false;
  }

  setHeight() { // the graph keeps its height; an open drawer adds its own below it (full screen: the window's)
    if (!this.p) return;
    const full = this.root.classList.contains("kgv-full");
    this.root.style.height = full ? "" : this.p.height + (this.panel.hidden ? 0 : DRAWER) + "px";
  }

  quietLabels(nodeId) { // a quiet view labels the relations of the node in focus only (no knot of labels)
    if (!this.p || !this.p.quiet || !this.net) return;
    const want = new Set(nodeId && this.nodes.get(nodeId) ? this.net.getConnectedEdges(nodeId) : []);
    const changes = [];
    for (const e of this.p.edges) {
      const on = want.has(e.i);
      if (on !== this.labelled.has(e.i)) changes.push({ id: e.i, label: on ? short(this.p.rels[e.y] || "", 28) : "" });
    }
    this.labelled = want;
    if (changes.length) this.edges.update(changes);
  }

  measure() {
    const box = this.canvasBox.getBoundingClientRect();
    this.canvasSize = { w: Math.round(box.width), h: Math.round(box.height) };
  }

  refit() { // the drawer opened or closed: the graph keeps its size, except in full screen, where it gives way
    const found = this.focusAfter;
    this.focusAfter = null;
    const before = this.canvasSize;
    this.setHeight();
    this.measure();
    if (!this.net || (before && before.w === this.canvasSize.w && before.h === this.canvasSize.h)) return;
    // vis-network notices a resized container only on its next size check (up to a second later): until then
    // clicks would land where nodes were, so take the new size now
    this.net.setSize("100%", "100%"); // asks for one redraw, in the next frame, with whatever follows
    if (found && this.nodes.get(found)) this.net.focus(found, { animation: false });
    else if (!this.userMoved) this.net.fit(FIT);
  }

  destroy() {
    this.savePositions();
    if (this.p && VIEWS.get(this.p.key) === this) VIEWS.delete(this.p.key);
    document.removeEventListener("keydown", this.onKey);
    if (this.net) this.net.destroy();
    this.net = null;
    this.root.remove();
  }
}

function sameBytes(a, b) {
  if (!a || !b || a.byteLength !== b.byteLength) return false;
  const x = bytesOf(a), y = bytesOf(b);
  if (!x || !y) return a === b;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

function bytesOf(data) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let view = INSTANCES.get(parentElement);
  if (!view) {
    view = new GraphViewInstance(parentElement);
    INSTANCES.set(parentElement, view);
  }
  view.setTrigger = setTriggerValue;
  // a rerun for something else (a click's details) hands the same graph again: nothing to parse or draw
  if (data && !(view.p && sameBytes(data, view.lastData))) {
    view.lastData = data;
    const payload = decode(data);
    if (payload) whenVis(() => view.apply(payload));
  }
  return () => {
    view.destroy();
    INSTANCES.delete(parentElement);
  };
}
