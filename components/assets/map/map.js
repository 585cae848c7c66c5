// KG Lens Map: every entity of the graph in one WebGL view (sigma.js 3 + graphology, from map.bundle.js, which
// the `kg_lens_maplib` component loads once: window.KGMapLib). Positions are the version's stored layout.
//
// Semantic zoom: the view never holds more than it can draw at interactive speed. While the part of the graph in
// view holds more entities than ENTITY_BUDGET (or the map is zoomed out past its frame), communities are drawn
// instead: discs where their entities sit, sized by their members and labelled with their titles (level 0;
// level 1 inside them once their discs are big enough on screen), joined by the relations between them. Zoomed
// in further, the entities in view (and a margin) are drawn with the relations among them, then their labels,
// placed so that no two labels overlap. The status line says what is drawn and what is aggregated.
//
// A search lights its seeds, destinations and traced paths, and its PPR mass as heat, on the whole map; the rest
// dims. Click an entity for the same details panel as the live view (panel.js); double-click, or "Open here",
// opens its neighbourhood in the live view. Strings from data are drawn as canvas text or set with textContent.

const INSTANCES = new WeakMap(); // parentElement -> view
const VIEWS = (window.__kgViews = window.__kgViews || new Map()); // key -> view (the details component finds it)
const EXTRA = (window.__kgExtra = window.__kgExtra || new Map());
const ENTITY_BUDGET = 4000; // entities drawn at most (scripts/map_bench.py: >= 20 frames/s on software WebGL)
const EDGE_BUDGET = 6000; // relations drawn at most among them
const LABEL_BUDGET = 700; // entity labels once at most this many entities are in view
const REGION_BUDGET = 3000; // community discs drawn at most
const SUPER_EDGE_BUDGET = 2500; // links between community discs drawn at most (the strongest)
const MOVE_EDGES = 2500; // beyond this many relations drawn, they are hidden while the camera moves
// Level of detail for the links between community discs: the strongest THICK_LINKS as quads (in software WebGL
// each quad costs ten 1-px lines), the rest as 1-px lines; beyond MOVE_LINKS links, all hide while the camera
// moves and come back when it stops (MuSiQue zoomed out draws 1,396 discs and 2,500 links: 17 frames/s a pan).
const THICK_LINKS = 300;
const MOVE_LINKS = 600;
const LEVEL1_PX = 22; // level-1 discs replace level-0 ones once their median radius on screen reaches this
const ZOOMED_OUT = 1.25; // camera ratio past the frame (1): communities, however few entities
const FOCUS = "#e8590c";
const PATH = "#1d2433";
const DEST = "#6d28d9";
const DIM = "#d9dde4";
const DIM_REGION = "#f1f3f6";
const EDGE = "#c9cfd8";
const EDGE_DIM = "#e6e9ee";
const REGION_BACK = "#f2f4f8"; // the faint discs of the communities behind entities
const FONT = '"Source Sans Pro", "Source Sans 3", system-ui, sans-serif';
const SEQ = ["#dbe9f6", "#a6cee3", "#6baed6", "#3182bd", "#08519c", "#08306b"]; // low -> high (degree, PageRank)
const HEAT_DECADES = 3; // PPR mass shown as heat down to a thousandth of the best entity's
const HEAT = ["#fff3b0", "#fdd870", "#fdae61", "#f46d43", "#d73027", "#a50026"]; // low -> high PPR mass
const PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b", "#9d755d",
  "#ff9da6", "#bab0ac", "#5f9ea0", "#8c6d31"];
const KINDS = { f32: Float32Array, u32: Uint32Array, i32: Int32Array, u16: Uint16Array };

function whenLib(run) {
  if (globalThis.KGMapLib) { run(); return; }
  window.addEventListener("kg-maplib-ready", run, { once: true });
}

function bytesOf(data) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

const align8 = (v) => v + (-v & 7);

// A message (ui_map.py): b"KGM1", a uint32 length and the view's JSON header, padding to 8 bytes, then the
// graph version's body (decodeBody). The view header names the body's revision, so an unchanged body is not
// decoded again.
function decodeView(raw) {
  if (raw.length < 8 || String.fromCharCode(raw[0], raw[1], raw[2], raw[3]) !== "KGM1") return null;
  const len = new DataView(raw.buffer, raw.byteOffset, raw.byteLength).getUint32(4, true);
  const head = JSON.parse(new TextDecoder().decode(raw.subarray(8, 8 + len)));
  return { head, start: align8(8 + len) };
}

// The body: a uint32 length and its JSON header (counts, names, types, communities, where each array lies),
// padding to 8 bytes, then the arrays. Copied into a buffer of its own: typed arrays need aligned offsets.
function decodeBody(raw, start) {
  const buf = raw.slice(start).buffer;
  const len = new DataView(buf).getUint32(0, true);
  const head = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, len)));
  const base = align8(4 + len);
  const a = {};
  for (const [name, [off, count, kind]] of Object.entries(head.arrays)) a[name] = new KINDS[kind](buf, base + off, count);
  return { head, a };
}

function hexRgb(hex) {
  const v = parseInt(hex.slice(1), 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
}

// The colour `hex` at `alpha` over white, as an opaque colour: sigma blends premultiplied colours, so a
// translucent one would vanish on the white page.
function pale(hex, alpha) {
  const [r, g, b] = hexRgb(hex);
  const mix = (c) => Math.round(255 - (255 - c) * alpha).toString(16).padStart(2, "0");
  return "#" + mix(r) + mix(g) + mix(b);
}

function ramp(scale, q) { return scale[Math.max(0, Math.min(scale.length - 1, Math.floor(q * scale.length)))]; }

// Rank of each value among all (0 = lowest, 1 = highest), so colour and size scales spread over the graph.
function quantiles(values) {
  const n = values.length;
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  order.sort((p, q) => values[p] - values[q]);
  const out = new Float32Array(n);
  for (let k = 0; k < n; k++) out[order[k]] = n > 1 ? k / (n - 1) : 1;
  return out;
}

// --- the graph as the browser keeps it ------------------------------------------------------------

class Model {
  constructor(head, a) {
    this.head = head;
    this.n = head.n;
    this.m = head.m;
    this.x = a.x; this.y = a.y; this.type = a.type; this.region = a.region; this.subregion = a.subregion;
    this.degree = a.degree; this.pagerank = a.pagerank; this.src = a.src; this.dst = a.dst; this.rel = a.rel;
    this.names = head.names;
    this.types = head.types; // [[name, colour]] in code order
    this.rels = head.rels;
    const R = head.regions;
    this.regions = R; // {level, parent, x, y, r, size, title}
    this.nRegions = R.level.length;
    this.hasChildren = new Uint8Array(this.nRegions);
    for (let k = 0; k < this.nRegions; k++) if (R.level[k] === 1 && R.parent[k] >= 0) this.hasChildren[R.parent[k]] = 1;
    this.hasLevel1 = this.hasChildren.some((v) => v);
    this.buildAdjacency();
    this.buildGrid();
    this._q = {};
    this._super = {};
  }

  buildAdjacency() { // undirected CSR: each relation listed at both ends, with its type
    const n = this.n, m = this.m;
    const start = new Uint32Array(n + 1);
    for (let e = 0; e < m; e++) { start[this.src[e] + 1]++; start[this.dst[e] + 1]++; }
    for (let i = 0; i < n; i++) start[i + 1] += start[i];
    const fill = start.slice(0, n);
    const nbr = new Uint32Array(2 * m), rel = new Uint16Array(2 * m);
    for (let e = 0; e < m; e++) {
      const s = this.src[e], d = this.dst[e];
      nbr[fill[s]] = d; rel[fill[s]++] = this.rel[e];
      nbr[fill[d]] = s; rel[fill[d]++] = this.rel[e];
    }
    this.adjStart = start; this.adjNbr = nbr; this.adjRel = rel;
  }

  buildGrid() { // entities bucketed on a uniform grid: what is in a rectangle, and how many
    const n = this.n;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (let i = 0; i < n; i++) {
      const x = this.x[i], y = this.y[i];
      if (x < x0) x0 = x; if (x > x1) x1 = x; if (y < y0) y0 = y; if (y > y1) y1 = y;
    }
    const R = this.regions;
    for (let k = 0; k < this.nRegions; k++) { // the discs' rims too: the frame holds every region whole
      x0 = Math.min(x0, R.x[k] - R.r[k]); x1 = Math.max(x1, R.x[k] + R.r[k]);
      y0 = Math.min(y0, R.y[k] - R.r[k]); y1 = Math.max(y1, R.y[k] + R.r[k]);
    }
    if (!isFinite(x0)) { x0 = y0 = -1; x1 = y1 = 1; }
    if (x1 - x0 < 1e-6) { x0 -= 1; x1 += 1; }
    if (y1 - y0 < 1e-6) { y0 -= 1; y1 += 1; }
    this.bbox = { x: [x0, x1], y: [y0, y1] };
    const g = Math.max(8, Math.min(512, Math.round(Math.sqrt(n / 8))));
    this.g = g;
    this.cw = (x1 - x0) / g; this.ch = (y1 - y0) / g;
    const cell = new Uint32Array(n);
    const start = new Uint32Array(g * g + 1);
    for (let i = 0; i < n; i++) {
      const cx = Math.min(g - 1, Math.floor((this.x[i] - x0) / this.cw));
      const cy = Math.min(g - 1, Math.floor((this.y[i] - y0) / this.ch));
      cell[i] = cx + cy * g;
      start[cell[i] + 1]++;
    }
    for (let c = 0; c < g * g; c++) start[c + 1] += start[c];
    const fill = start.slice(0, g * g);
    const items = new Uint32Array(n);
    for (let i = 0; i < n; i++) items[fill[cell[i]]++] = i;
    this.cellStart = start; this.cellItems = items;
  }

  cellRange(rect) {
    const { g, cw, ch } = this;
    const [x0] = this.bbox.x, [y0] = this.bbox.y;
    const clamp = (v) => Math.max(0, Math.min(g - 1, v));
    return [clamp(Math.floor((rect.x0 - x0) / cw)), clamp(Math.floor((rect.x1 - x0) / cw)),
            clamp(Math.floor((rect.y0 - y0) / ch)), clamp(Math.floor((rect.y1 - y0) / ch))];
  }

  countIn(rect) { // entities of the cells the rectangle touches (an upper bound, exact enough to choose a mode)
    const [cx0, cx1, cy0, cy1] = this.cellRange(rect);
    let total = 0;
    for (let cy = cy0; cy <= cy1; cy++) total += this.cellStart[cy * this.g + cx1 + 1] - this.cellStart[cy * this.g + cx0];
    return total;
  }

  entitiesIn(rect, keep) {
    const [cx0, cx1, cy0, cy1] = this.cellRange(rect);
    const out = [];
    for (let cy = cy0; cy <= cy1; cy++) {
      for (let c = cy * this.g + cx0; c <= cy * this.g + cx1; c++) {
        for (let k = this.cellStart[c]; k < this.cellStart[c + 1]; k++) {
          const i = this.cellItems[k];
          const x = this.x[i], y = this.y[i];
          if (x >= rect.x0 && x <= rect.x1 && y >= rect.y0 && y <= rect.y1 && keep(i)) out.push(i);
        }
      }
    }
    return out;
  }

  quantile(name) { // cached ranks of degree or PageRank
    if (!this._q[name]) this._q[name] = quantiles(name === "degree" ? this.degree : this.pagerank);
    return this._q[name];
  }

  // Links between the discs drawn at a level: relations whose ends are in two different discs, the strongest.
  superEdges(level) {
    if (this._super[level]) return this._super[level];
    const counts = new Map();
    const K = this.nRegions + 1;
    for (let e = 0; e < this.m; e++) {
      const a = this.regionOf(this.src[e], level), b = this.regionOf(this.dst[e], level);
      if (a < 0 || b < 0 || a === b) continue;
      const key = a < b ? a * K + b : b * K + a;
      counts.set(key, (counts.get(key) || 0) + 1);
    }
    const list = [...counts.entries()].sort((p, q) => q[1] - p[1]).slice(0, SUPER_EDGE_BUDGET);
    this._super[level] = list.map(([key, count]) => [Math.floor(key / K), key % K, count]);
    return this._super[level];
  }

  regionOf(i, level) {
    if (level === 1 && this.subregion[i] >= 0) return this.subregion[i];
    return this.region[i];
  }

  dominant() { // each region's most frequent entity type (its colour when colouring by type)
    if (this._dominant) return this._dominant;
    const counts = new Map();
    for (let i = 0; i < this.n; i++) {
      for (const k of [this.region[i], this.subregion[i]]) {
        if (k < 0) continue;
        const key = k * 65536 + this.type[i];
        counts.set(key, (counts.get(key) || 0) + 1);
      }
    }
    const best = new Int32Array(this.nRegions).fill(-1), bestN = new Uint32Array(this.nRegions);
    for (const [key, c] of counts) {
      const k = Math.floor(key / 65536);
      if (c > bestN[k]) { bestN[k] = c; best[k] = key % 65536; }
    }
    this._dominant = best;
    return best;
  }

  regionMean(values) { // each region's mean of a per-entity value
    const sum = new Float64Array(this.nRegions), cnt = new Uint32Array(this.nRegions);
    for (let i = 0; i < this.n; i++) {
      for (const k of [this.region[i], this.subregion[i]]) if (k >= 0) { sum[k] += values[i]; cnt[k]++; }
    }
    return Array.from(sum, (s, k) => (cnt[k] ? s / cnt[k] : 0));
  }
}

// --- the view ---------------------------------------------------------------------------------------

class MapView {
  constructor(parent) {
    this.parent = parent;
    this.rev = null;
    this.model = null;
    this.mode = null;
    this.loaded = null; // {rect, ppu}: what the entity mode loaded
    this.hiddenTypes = new Set();
    this.hiddenRels = new Set();
    this.onlyRegion = -1;
    this.colorBy = "type";
    this.sizeBy = "degree";
    this.selected = -1;
    this.lights = null;
    this.lightsRev = null;
    this.labels = []; // the labels drawn in the last frame: [text, kind]
    this.seq = 0;
    this.build();
  }

  build() {
    const root = el("div", "kgv-root kgm-root");
    root.tabIndex = -1;
    this.root = root;
    const bar = el("div", "kgv-bar");
    const findBox = el("div", "kgm-findbox");
    this.find = el("input", "kgv-find");
    this.find.type = "search";
    this.find.placeholder = "Find an entity…";
    this.find.setAttribute("aria-label", "Find an entity by name");
    this.suggest = el("ul", "kgm-suggest");
    this.suggest.hidden = true;
    findBox.append(this.find, this.suggest);
    this.find.addEventListener("input", () => this.suggestNames());
    this.find.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") { ev.preventDefault(); this.findEntity(this.find.value); }
      if (ev.key === "Escape") this.suggest.hidden = true;
    });
    this.colorSel = this.select("Colour", [["type", "Colour: type"], ["community", "Colour: community"],
      ["degree", "Colour: degree"], ["pagerank", "Colour: PageRank"]], (v) => { this.colorBy = v; this.redraw(); });
    this.sizeSel = this.select("Size", [["degree", "Size: degree"], ["pagerank", "Size: PageRank"],
      ["uniform", "Size: same"]], (v) => { this.sizeBy = v; this.redraw(); });
    this.filterBtn = button("Filter", "Show or hide entity types, relation types, communities", () => { this.filterBox.hidden = !this.filterBox.hidden; });
    this.fitBtn = button("Fit", "Show the whole map", () => this.fit());
    this.litBtn = button("Fit result", "Show what the search lit", () => this.fitLights());
    this.litBtn.hidden = true;
    this.fullBtn = button("Full screen", "Full screen (Esc exits)", () => this.toggleFull());
    bar.append(findBox, this.colorSel, this.sizeSel, this.filterBtn, this.fitBtn, this.litBtn, this.fullBtn);
    this.legend = el("div", "kgv-legend");
    const stage = el("div", "kgv-stage");
    this.canvasBox = el("div", "kgv-canvas kgm-canvas");
    this.panel = el("aside", "kgv-panel kgm-panel");
    this.panel.hidden = true;
    this.filterBox = el("div", "kgv-filter");
    this.filterBox.hidden = true;
    this.menu = el("div", "kgv-menu");
    this.menu.hidden = true;
    stage.append(this.canvasBox, this.panel, this.filterBox, this.menu);
    this.status = el("div", "kgv-status");
    root.append(bar, this.legend, stage, this.status);
    this.parent.appendChild(root);
    this.canvasBox.addEventListener("contextmenu", (ev) => ev.preventDefault());
    this.onKey = (ev) => {
      if (ev.key !== "Escape") return;
      if (!this.menu.hidden) this.menu.hidden = true;
      else if (root.classList.contains("kgv-full")) this.toggleFull(false);
    };
    document.addEventListener("keydown", this.onKey);
    root.kgMap = this; // for tests and the benchmark
  }

  select(label, options, onChange) {
    const s = el("select", "kgm-select");
    s.setAttribute("aria-label", label);
    for (const [value, text] of options) { const o = el("option", null, text); o.value = value; s.append(o); }
    s.addEventListener("change", () => onChange(s.value));
    return s;
  }

  send(event) {
    this.seq = Math.max(this.seq + 1, Date.now() * 1000); // increasing across remounts: Python drops repeats
    if (this.setTrigger) this.setTrigger("event", { ...event, seq: this.seq });
  }

  // --- data ---------------------------------------------------------------------------------------

  apply(view, body) {
    const fresh = !this.p || this.p.rev !== view.rev; // a rerun for something else hands the same map again
    this.p = view;
    if (!this.root.classList.contains("kgv-full")) this.root.style.height = this.p.height + "px";
    this.root.dataset.kgKey = this.p.key;
    this.root.dataset.kgRev = this.p.rev;
    VIEWS.set(this.p.key, this);
    if (this.p.rev !== this.rev) {
      this.rev = this.p.rev;
      const t0 = performance.now();
      this.model = new Model(body.head, body.a);
      this.root.dataset.kgPrepMs = String(Math.round(performance.now() - t0));
      this.root.dataset.kgEntities = String(this.model.n);
      this.mode = null;
      this.loaded = null;
      this.hiddenTypes = new Set();
      this.hiddenRels = new Set();
      this.onlyRegion = -1;
      this.selected = -1;
      if (this.colorBy === "type" && body.head.types.length < 2) this.colorBy = "community"; // one type: no news
      this.colorSel.value = this.colorBy;
      this.renderFilter();
      this.renderLegend();
      if (!this.sigma) this.createSigma();
      this.sigma.setCustomBBox(this.model.bbox);
      if (this._size) this.sigma.refresh();
      this.sigma.getCamera().setState({ x: 0.5, y: 0.5, ratio: 1, angle: 0 });
    }
    this.applyExtra(EXTRA.get(this.p.key) || this.x || {});
    if (fresh) this.sync(true);
  }

  createSigma() {
    const L = globalThis.KGMapLib;
    this.canvasBox.style.height = "100%";
    this.sigma = new L.Sigma(new L.Graph({ type: "undirected" }), this.canvasBox, {
      allowInvalidContainer: true,
      itemSizesReference: "positions", // sizes in layout units: a community's disc is exactly its region
      zoomToSizeRatioFunction: (ratio) => ratio,
      defaultNodeType: "point",
      nodeProgramClasses: { circle: L.NodeCircleProgram, point: L.NodePointProgram }, // discs under points
      defaultEdgeType: "line",
      edgeProgramClasses: { line: L.EdgeLineProgram, thick: L.EdgeRectangleProgram },
      labelRenderedSizeThreshold: 0,
      labelDensity: 1,
      labelGridCellSize: 90,
      labelFont: FONT,
      defaultDrawNodeLabel: (ctx, data) => this.drawLabel(ctx, data),
      defaultDrawNodeHover: (ctx, data) => this.drawHover(ctx, data),
      zIndex: false,
      minCameraRatio: 0.0005,
      maxCameraRatio: 4,
      stagePadding: 20,
    });
    this.sigma.setCustomBBox(this.model.bbox);
    this.root.kgSigma = this.sigma;
    // the page lays the element out after it is mounted (and full screen resizes it): draw again at the new size
    this.resizer = new ResizeObserver(() => {
      const { width, height } = this.canvasBox.getBoundingClientRect();
      if (!width || !height || !this.sigma) return;
      if (this._size && this._size[0] === width && this._size[1] === height) return;
      this._size = [width, height];
      this.sigma.resize();
      this.sigma.refresh(); // now, so that its frame (the custom bbox) is in force for the view rectangle
      this.sync(true);
    });
    this.resizer.observe(this.canvasBox);
    const s = this.sigma;
    s.on("beforeRender", () => { this.labels = []; this.boxes = []; });
    s.on("afterRender", () => {
      this.paintBackdrop();
      if (this.pendingRev) { this.root.dataset.kgDrawn = this.pendingRev; this.pendingRev = null; }
      this.root.dataset.kgFrames = String(Number(this.root.dataset.kgFrames || 0) + 1);
    });
    s.getCamera().on("updated", () => this.scheduleSync());
    s.on("clickNode", ({ node }) => this.clickNode(node));
    s.on("doubleClickNode", (e) => {
      e.preventSigmaDefault();
      const i = this.entityOf(e.node);
      if (i >= 0) this.send({ type: "open", idx: i });
    });
    s.on("rightClickNode", (e) => {
      const i = this.entityOf(e.node);
      if (i < 0) return;
      e.preventSigmaDefault();
      const box = this.canvasBox.getBoundingClientRect();
      this.showMenu(i, { x: e.event.x, y: e.event.y, box });
    });
    s.on("clickStage", () => {
      this.menu.hidden = true;
      this.filterBox.hidden = true;
      this.suggest.hidden = true;
      if (this.selected >= 0) this.choose(-1);
    });
  }

  // --- what to draw ---------------------------------------------------------------------------------

  scheduleSync() {
    if (this._syncFrame) return;
    this._syncFrame = requestAnimationFrame(() => { this._syncFrame = null; this.sync(false); });
  }

  viewRect() {
    const s = this.sigma;
    const { width, height } = s.getDimensions();
    const a = s.viewportToGraph({ x: 0, y: 0 }), b = s.viewportToGraph({ x: width, y: height });
    return { x0: Math.min(a.x, b.x), x1: Math.max(a.x, b.x), y0: Math.min(a.y, b.y), y1: Math.max(a.y, b.y) };
  }

  pxPerUnit() {
    const s = this.sigma;
    const a = s.graphToViewport({ x: 0, y: 0 }), b = s.graphToViewport({ x: 1, y: 0 });
    return Math.hypot(b.x - a.x, b.y - a.y) || 1e-9;
  }

  regionsIn(rect, level) {
    const R = this.model.regions, out = [];
    for (let k = 0; k < this.model.nRegions; k++) {
      if (R.level[k] !== level && !(level === 1 && R.level[k] === 0)) continue;
      if (R.x[k] + R.r[k] < rect.x0 || R.x[k] - R.r[k] > rect.x1 || R.y[k] + R.r[k] < rect.y0 || R.y[k] - R.r[k] > rect.y1) continue;
      if (this.onlyRegion >= 0 && k !== this.onlyRegion && R.parent[k] !== this.onlyRegion) continue;
      out.push(k);
    }
    return out;
  }

  chooseMode(rect, ppu) {
    const M = this.model;
    const ratio = this.sigma.getCamera().ratio;
    this.inView = M.countIn(rect);
    if (!M.nRegions || (ratio <= ZOOMED_OUT && this.inView <= ENTITY_BUDGET)) return "entities";
    if (M.hasLevel1) {
      const R = M.regions, ones = this.regionsIn(rect, 1).filter((k) => R.level[k] === 1);
      if (ones.length && ones.length <= REGION_BUDGET) {
        const radii = ones.map((k) => R.r[k] * ppu).sort((p, q) => p - q);
        if (radii[radii.length >> 1] >= LEVEL1_PX) return "c1";
      }
    }
    return "c0";
  }

  sync(force) {
    if (!this.model || !this.sigma || !this._size) return; // not laid out yet: the resize observer calls again
    if (this.fitPending) { this.fitPending = false; this.fitLights(); } // moves the camera at once
    const rect = this.viewRect(), ppu = this.pxPerUnit();
    const mode = this.chooseMode(rect, ppu);
    const L = this.loaded;
    const stale = mode !== this.mode || force || (mode === "entities" && (!L || rect.x0 < L.rect.x0 || rect.x1 > L.rect.x1 ||
      rect.y0 < L.rect.y0 || rect.y1 > L.rect.y1 || ppu > L.ppu * 1.7 || ppu < L.ppu / 1.7)) ||
      (mode !== "entities" && L && (ppu > L.ppu * 2.5 || ppu < L.ppu / 2.5));
    if (!stale) return;
    const now = performance.now();
    const moving = this.sigma.getCamera().isAnimated();
    if (!force && moving && mode === this.mode && now - (this.builtAt || 0) < 150) { // at most ~7 rebuilds a second
      clearTimeout(this._later);
      this._later = setTimeout(() => this.sync(false), 160);
      return;
    }
    this.rebuild(mode, rect, ppu);
  }

  redraw() { // colours, sizes, filters or marks changed: draw the same view again
    if (!this.model) return;
    this.renderLegend();
    if (this.sigma && this._size) this.rebuild(this.mode || "c0", this.viewRect(), this.pxPerUnit());
  }

  entityOf(key) { return key[0] === "e" || key[0] === "k" ? Number(key.slice(1)) : -1; }

  visibleEntity(i) {
    const M = this.model;
    if (this.hiddenTypes.size && this.hiddenTypes.has(M.types[M.type[i]][0])) return false;
    if (this.onlyRegion >= 0 && M.region[i] !== this.onlyRegion) return false;
    return true;
  }

  colorOf(i) {
    const M = this.model;
    if (this.lights) {
      const h = this.lights.heat.get(i);
      return h === undefined ? DIM : ramp(HEAT, h);
    }
    if (this.colorBy === "type") return (M.types[M.type[i]] || ["", "#4c78a8"])[1];
    if (this.colorBy === "community") return M.region[i] >= 0 ? PALETTE[M.region[i] % PALETTE.length] : "#9aa3b0";
    return ramp(SEQ, M.quantile(this.colorBy)[i]);
  }

  regionColor(k) {
    const M = this.model;
    if (this.lights) {
      const h = this.lights.regionHeat.get(k);
      return h === undefined ? DIM_REGION : pale(ramp(HEAT, h), 0.55);
    }
    let hex;
    if (this.colorBy === "type") { const t = M.dominant()[k]; hex = t >= 0 ? M.types[t][1] : "#9aa3b0"; }
    else if (this.colorBy === "community") hex = PALETTE[(M.regions.level[k] === 1 ? M.regions.parent[k] : k) % PALETTE.length];
    else {
      if (!this._regionQ || this._regionQ.by !== this.colorBy) {
        this._regionQ = { by: this.colorBy, q: M.regionMean(M.quantile(this.colorBy)) };
      }
      hex = ramp(SEQ, this._regionQ.q[k]);
    }
    return pale(hex, M.regions.level[k] === 1 ? 0.42 : 0.28);
  }

  sizeFactor(i) {
    if (this.sizeBy === "uniform") return 1;
    return 0.75 + 1.25 * this.model.quantile(this.sizeBy)[i] ** 3;
  }

  rebuild(mode, rect, ppu) {
    const L = globalThis.KGMapLib;
    const M = this.model;
    const g = new L.Graph({ type: "undirected" });
    const t0 = performance.now();
    this.mode = mode;
    this.builtAt = t0;
    this.entitiesDrawn = 0;
    this.edgesDrawn = 0;
    this.edgesLeft = 0;
    if (mode === "entities") {
      const w = rect.x1 - rect.x0, h = rect.y1 - rect.y0;
      const wide = { x0: rect.x0 - w * 0.25, x1: rect.x1 + w * 0.25, y0: rect.y0 - h * 0.25, y1: rect.y1 + h * 0.25 };
      let ids = M.entitiesIn(wide, (i) => this.visibleEntity(i));
      if (ids.length > ENTITY_BUDGET) { // keep those in view first, then the best connected of the margin
        const inside = (i) => M.x[i] >= rect.x0 && M.x[i] <= rect.x1 && M.y[i] >= rect.y0 && M.y[i] <= rect.y1;
        ids.sort((p, q) => (inside(q) - inside(p)) || (M.degree[q] - M.degree[p]));
        ids = ids.slice(0, ENTITY_BUDGET);
      }
      this.loaded = { rect: wide, ppu };
      const px = this.inView <= 300 ? 4 : this.inView <= 1500 ? 3 : 2.2;
      this.entityLabels = this.inView <= LABEL_BUDGET;
      this.backdrop = this.regionsIn(wide, 0); // faint discs of their communities, painted under them
      for (const i of ids) this.addEntity(g, i, px / ppu * this.sizeFactor(i));
      this.entitiesDrawn = ids.length;
      this.addRelations(g, ids);
    } else {
      const level = mode === "c1" ? 1 : 0;
      this.backdrop = [];
      this.loaded = { rect, ppu };
      this.entityLabels = false;
      const R = M.regions;
      let shown = this.regionsIn(rect, level);
      if (shown.length > REGION_BUDGET) shown = shown.sort((p, q) => R.size[q] - R.size[p]).slice(0, REGION_BUDGET);
      const drawn = new Set(shown);
      for (const k of shown) if (R.level[k] === 0 || level === 0) this.addRegion(g, k, level === 0 || !M.hasChildren[k]);
      for (const k of shown) if (R.level[k] === 1) this.addRegion(g, k, true);
      let links = 0;
      for (const [a, b, count] of M.superEdges(level)) { // strongest first
        if (!drawn.has(a) || !drawn.has(b)) continue;
        const thick = links++ < THICK_LINKS;
        g.addEdgeWithKey("s" + a + "_" + b, "r" + a, "r" + b, {
          type: thick ? "thick" : "line", size: thick ? (0.6 + Math.log1p(count) * 0.55) / ppu : 1, color: EDGE });
      }
      this.regionsDrawn = shown.length;
    }
    this.addLights(g, ppu);
    // many relations (or links between discs) drawn: hidden while the reader pans or zooms
    const hide = g.size > (mode === "entities" ? MOVE_EDGES : MOVE_LINKS);
    if (this.sigma.getSetting("hideEdgesOnMove") !== hide) this.sigma.setSetting("hideEdgesOnMove", hide);
    this.sigma.setGraph(g);
    this.graph = g;
    this.pendingRev = this.rev;
    this.root.dataset.kgMode = mode;
    this.root.dataset.kgNodes = String(g.order);
    this.root.dataset.kgEdges = String(g.size);
    this.root.dataset.kgEntitiesDrawn = String(this.entitiesDrawn);
    this.root.dataset.kgBuildMs = String(Math.round(performance.now() - t0));
    this.renderStatus();
  }

  // The communities behind the entities, on a 2D canvas under sigma's: as WebGL discs they cost two full-screen
  // fills a frame (drawn, then again for picking), which halved the frame rate in software WebGL.
  paintBackdrop() {
    if (!this.under) {
      this.under = el("canvas", "kgm-under");
      this.canvasBox.prepend(this.under);
    }
    const c = this.under, ratio = window.devicePixelRatio || 1;
    const { width, height } = this.sigma.getDimensions();
    if (c.width !== Math.round(width * ratio) || c.height !== Math.round(height * ratio)) {
      c.width = Math.round(width * ratio);
      c.height = Math.round(height * ratio);
      c.style.width = width + "px";
      c.style.height = height + "px";
    }
    const ctx = c.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    if (!this.backdrop || !this.backdrop.length) return;
    const R = this.model.regions, ppu = this.pxPerUnit();
    ctx.fillStyle = REGION_BACK;
    ctx.beginPath();
    for (const k of this.backdrop) {
      const p = this.sigma.graphToViewport({ x: R.x[k], y: R.y[k] });
      ctx.moveTo(p.x + R.r[k] * ppu, p.y);
      ctx.arc(p.x, p.y, R.r[k] * ppu, 0, 2 * Math.PI);
    }
    ctx.fill();
  }

  addRegion(g, k, labelled) {
    const R = this.model.regions;
    const key = "r" + k;
    if (g.hasNode(key)) return;
    g.addNode(key, {
      x: R.x[k], y: R.y[k], size: R.r[k], type: "circle", kind: "region", region: k,
      color: this.regionColor(k),
      label: labelled ? R.title[k] : null, zIndex: 0,
    });
  }

  addEntity(g, i, size) {
    const M = this.model;
    g.addNode("e" + i, {
      x: M.x[i], y: M.y[i], size, type: "point", kind: "entity", color: this.colorOf(i),
      label: M.names[i], forceLabel: i === this.selected, highlighted: i === this.selected,
    });
  }

  addRelations(g, ids) {
    const M = this.model;
    const inGraph = new Set(ids);
    const rels = this.hiddenRels;
    let drawn = 0, left = 0;
    for (const i of ids) {
      for (let k = M.adjStart[i]; k < M.adjStart[i + 1]; k++) {
        const j = M.adjNbr[k];
        if (j <= i || !inGraph.has(j)) continue;
        if (rels.size && rels.has(M.rels[M.adjRel[k]])) continue;
        const key = "l" + i + "_" + j;
        if (g.hasEdge(key)) continue;
        if (drawn >= EDGE_BUDGET) { left++; continue; }
        g.addEdgeWithKey(key, "e" + i, "e" + j, { type: "line", color: this.lights ? EDGE_DIM : EDGE });
        drawn++;
      }
    }
    this.edgesDrawn = drawn;
    this.edgesLeft = left;
  }

  // The search's marks on top of whatever the zoom draws: rings under seeds, destinations, path nodes and the
  // selected entity; the traced paths' relations; labels forced on seeds and destinations.
  addLights(g, ppu) {
    const M = this.model;
    const lit = this.lights;
    const marks = new Map(); // entity -> [ring colour, ring px, force label]
    if (lit) {
      for (const i of lit.path) marks.set(i, [PATH, 2.5, false]);
      for (const i of lit.dest) marks.set(i, [DEST, 3.5, true]);
      for (const i of lit.seeds) marks.set(i, [PATH, 5, true]);
    }
    if (this.selected >= 0) marks.set(this.selected, [FOCUS, 4.5, true]);
    for (const [i, [ring, extra, force]] of marks) {
      const base = (lit && lit.seeds.has(i) ? 7 : 5.5) * this.sizeFactor(i) ** 0.5;
      g.addNode("k" + i, { x: M.x[i], y: M.y[i], size: (base + extra) / ppu, type: "circle", kind: "ring", color: ring, label: null });
      if (g.hasNode("e" + i)) g.mergeNodeAttributes("e" + i, { size: base / ppu, forceLabel: force, color: this.colorOf(i) });
      else g.addNode("e" + i, { x: M.x[i], y: M.y[i], size: base / ppu, type: "point", kind: "entity", color: this.colorOf(i),
                                label: M.names[i], forceLabel: force, highlighted: i === this.selected });
    }
    if (lit) {
      for (const [a, b] of lit.edges) {
        if (!g.hasNode("e" + a) || !g.hasNode("e" + b) || a === b) continue;
        const drawn = g.edge("e" + a, "e" + b); // the plain relation between them gives way to the path's
        if (drawn !== undefined) {
          if (drawn[0] === "p") continue;
          g.dropEdge(drawn);
        }
        g.addEdgeWithKey("p" + Math.min(a, b) + "_" + Math.max(a, b), "e" + a, "e" + b,
                         { type: "thick", size: 2.6 / ppu, color: PATH });
      }
    }
    this.root.dataset.kgLit = String(marks.size);
  }

  // --- labels: no two drawn labels overlap ---------------------------------------------------------

  drawLabel(ctx, data) {
    if (!data.label) return;
    const region = data.kind === "region";
    if (!region && !this.entityLabels && !data.forceLabel) return;
    const size = region ? 13 : 12;
    const text = short(data.label, region ? 48 : 36);
    ctx.font = (region || data.forceLabel ? "600 " : "") + size + "px " + FONT;
    const w = ctx.measureText(text).width;
    const x = region ? data.x - w / 2 : data.x + data.size + 3;
    const y = region ? data.y + size * 0.35 : data.y + size * 0.35;
    const box = [x - 2, y - size, x + w + 2, y + 4];
    for (const b of this.boxes) if (box[0] < b[2] && b[0] < box[2] && box[1] < b[3] && b[1] < box[3]) return;
    this.boxes.push(box);
    ctx.lineWidth = 3;
    ctx.strokeStyle = "rgba(255,255,255,0.9)";
    ctx.strokeText(text, x, y);
    ctx.fillStyle = "#1d2433";
    ctx.fillText(text, x, y);
    this.labels.push([data.label, data.kind]);
  }

  drawHover(ctx, data) {
    if (data.kind === "ring") return;
    const M = this.model;
    const lines = [short(data.label || "", 80)];
    if (data.kind === "entity") {
      const i = Number(data.key.slice(1));
      lines.push(short(M.types[M.type[i]][0], 40) + " · " + M.degree[i] + " relations");
    } else if (data.kind === "region") {
      const k = data.region;
      lines.push("community · " + M.regions.size[k].toLocaleString() + " entities · click to zoom in");
    }
    ctx.font = "600 12px " + FONT;
    const w = Math.max(...lines.map((t) => ctx.measureText(t).width)) + 12;
    const x = data.x + (data.kind === "region" ? 0 : data.size + 4), y = data.y - 30;
    ctx.fillStyle = "rgba(255,255,255,0.96)";
    ctx.strokeStyle = "#c8ced8";
    ctx.lineWidth = 1;
    ctx.fillRect(x, y, w, 18 * lines.length + 6);
    ctx.strokeRect(x, y, w, 18 * lines.length + 6);
    lines.forEach((t, n) => {
      ctx.font = (n ? "" : "600 ") + "12px " + FONT;
      ctx.fillStyle = n ? "#566072" : "#1d2433";
      ctx.fillText(t, x + 6, y + 16 + 18 * n);
    });
  }

  // --- interactions -------------------------------------------------------------------------------

  clickNode(key) {
    this.menu.hidden = true;
    const i = this.entityOf(key);
    if (i >= 0) { this.choose(i); return; }
    const attrs = this.graph.getNodeAttributes(key);
    if (attrs.kind === "region") this.zoomToRegion(attrs.region);
  }

  choose(i) { // select an entity (its details come back from Python), or none
    const now = Date.now();
    // the entity shown already (a double-click's first click, or a click on it again): nothing to ask Python, and a
    // "select" sent then could land in the same rerun as the double-click's "open", where only the last is kept
    if (i === this.selected && i >= 0 && (!this.panel.hidden || now - (this.chosenAt || 0) < 300)) return;
    this.chosenAt = now;
    this.selected = i;
    if (i < 0) { this.panel.hidden = true; this.panel.replaceChildren(); }
    this.send(i >= 0 ? { type: "select", kind: "node", idx: i } : { type: "select", kind: null });
    this.redraw();
  }

  toFramed(x, y) { // sigma's own normalisation of the fixed frame (createNormalizationFunction)
    const b = this.model.bbox;
    const ratio = Math.max(b.x[1] - b.x[0], b.y[1] - b.y[0]) || 1;
    return { x: 0.5 + (x - (b.x[0] + b.x[1]) / 2) / ratio, y: 0.5 + (y - (b.y[0] + b.y[1]) / 2) / ratio };
  }

  zoomTo(x0, y0, x1, y1, duration) {
    const M = this.model;
    const c = this.toFramed((x0 + x1) / 2, (y0 + y1) / 2);
    const span = Math.max(x1 - x0, y1 - y0) / Math.max(M.bbox.x[1] - M.bbox.x[0], M.bbox.y[1] - M.bbox.y[0]);
    const ratio = Math.max(0.0006, Math.min(1, span * 1.15));
    const camera = this.sigma.getCamera();
    if (duration === 0) camera.setState({ x: c.x, y: c.y, ratio });
    else camera.animate({ x: c.x, y: c.y, ratio }, { duration: duration === undefined ? 350 : duration });
  }

  zoomToRegion(k) {
    const R = this.model.regions;
    this.zoomTo(R.x[k] - R.r[k], R.y[k] - R.r[k], R.x[k] + R.r[k], R.y[k] + R.r[k]);
  }

  centreOn(i, duration) { // a close view around the entity: its neighbours and their labels
    const M = this.model, r = 160;
    this.zoomTo(M.x[i] - r, M.y[i] - r, M.x[i] + r, M.y[i] + r, duration);
  }

  fit() { this.sigma.getCamera().animate({ x: 0.5, y: 0.5, ratio: 1, angle: 0 }, { duration: 300 }); }

  fitLights() {
    const lit = this.lights;
    if (!lit) return;
    const M = this.model;
    const ids = [...lit.seeds, ...lit.dest, ...lit.path];
    if (!ids.length) for (const [i] of lit.heat) { ids.push(i); if (ids.length >= 50) break; }
    if (!ids.length) return;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const i of ids) { x0 = Math.min(x0, M.x[i]); x1 = Math.max(x1, M.x[i]); y0 = Math.min(y0, M.y[i]); y1 = Math.max(y1, M.y[i]); }
    const pad = 60;
    this.zoomTo(x0 - pad, y0 - pad, x1 + pad, y1 + pad, 0);
  }

  nameIndex() {
    if (!this._lower || this._lowerRev !== this.rev) {
      this._lower = this.model.names.map((s) => String(s).toLowerCase());
      this._lowerRev = this.rev;
    }
    return this._lower;
  }

  matches(text, limit) {
    const q = String(text || "").trim().toLowerCase();
    if (!q) return [];
    const names = this.nameIndex(), exact = [], prefix = [], inner = [];
    for (let i = 0; i < names.length && exact.length < limit; i++) {
      const s = names[i];
      if (s === q) exact.push(i);
      else if (prefix.length < limit && s.startsWith(q)) prefix.push(i);
      else if (inner.length < limit && s.includes(q)) inner.push(i);
    }
    const M = this.model;
    const byDegree = (a, b) => M.degree[b] - M.degree[a];
    return [...exact.sort(byDegree), ...prefix.sort(byDegree), ...inner.sort(byDegree)].slice(0, limit);
  }

  suggestNames() {
    const hits = this.matches(this.find.value, 12);
    this.suggest.replaceChildren();
    const M = this.model;
    for (const i of hits) {
      const li = el("li", "kgm-option");
      li.append(el("span", null, short(M.names[i], 70)), el("span", "kgv-chip", short(M.types[M.type[i]][0], 24)));
      li.addEventListener("mousedown", (ev) => { ev.preventDefault(); this.find.value = M.names[i]; this.goTo(i); });
      this.suggest.append(li);
    }
    this.suggest.hidden = !hits.length;
    this.find.classList.remove("kgv-miss");
  }

  findEntity(text) {
    const hit = this.matches(text, 1)[0];
    if (hit === undefined) { this.find.classList.add("kgv-miss"); return; }
    this.goTo(hit);
  }

  goTo(i) {
    this.suggest.hidden = true;
    this.find.classList.remove("kgv-miss");
    this.root.dataset.kgFound = String(i);
    this.centreOn(i, 0);
    this.choose(i);
  }

  showMenu(i, at) {
    const f = this.p.features;
    this.menu.replaceChildren();
    const item = (label, fn) => this.menu.append(button(label, "", () => { this.menu.hidden = true; fn(); }, "kgv-item"));
    item("Details", () => this.choose(i));
    if (f.open) item("Open here (live view)", () => this.send({ type: "open", idx: i }));
    if (f.paths) {
      item("Use as path start", () => this.send({ type: "path_start", idx: i }));
      item("Use as path end", () => this.send({ type: "path_end", idx: i }));
    }
    if (f.search) item("Search from here", () => this.send({ type: "search", idx: i }));
    if (f.communities) item("Its communities", () => this.send({ type: "communities", idx: i }));
    this.menu.dataset.node = String(i);
    this.menu.hidden = false;
    const box = at.box;
    this.menu.style.left = Math.round(Math.max(0, Math.min(at.x + 6, box.width - this.menu.offsetWidth - 4))) + "px";
    this.menu.style.top = Math.round(Math.max(0, Math.min(at.y + 6, box.height - this.menu.offsetHeight - 4))) + "px";
  }

  toggleFull(on) {
    const full = on === undefined ? !this.root.classList.contains("kgv-full") : on;
    this.root.classList.toggle("kgv-full", full);
    this.root.style.height = full ? "" : this.p.height + "px";
    this.fullBtn.textContent = full ? "✕ Exit full screen" : "Full screen";
    if (full) this.root.focus();
    this.sigma.refresh();
    this.sync(true);
  }

  // --- what Python sends besides the graph: details, notice, the search's lights ------------------

  applyExtra(x) {
    this.x = x;
    if (!this.model) return;
    const lit = x.lights || null;
    const rev = lit ? lit.rev : null;
    if (rev !== this.lightsRev) {
      this.lightsRev = rev;
      this.lights = lit ? this.prepareLights(lit) : null;
      this.litBtn.hidden = !lit;
      this.root.dataset.kgLights = rev || "";
      this.fitPending = Boolean(lit); // once the map has its size
      this.redraw();
    }
    if (typeof x.focus === "number" && x.focus !== this._focused && x.focus >= 0 && x.focus < this.model.n) {
      this._focused = x.focus; // Python asked to show an entity (a relation's other end in the panel)
      this.selected = x.focus;
      this.centreOn(x.focus, 0);
    }
    this.renderPanel();
    this.renderStatus();
    this.root.dataset.kgExtra = String(x.seq || "");
  }

  // Heat on a log scale of PPR mass: the best entity 1, a thousandth of its mass 0 (and below: dimmed with the
  // rest). Communities by the mass of their members, on the same scale.
  prepareLights(lit) {
    const M = this.model;
    const scale = (map) => {
      let top = 0;
      for (const v of map.values()) top = Math.max(top, v);
      const out = new Map();
      if (top > 0) for (const [k, v] of map) { const h = 1 + Math.log10(v / top) / HEAT_DECADES; if (h > 0.02) out.set(k, h); }
      return out;
    };
    const mass = new Map(lit.heat), regionMass = new Map();
    for (const [i, v] of lit.heat) {
      for (const k of [M.region[i], M.subregion[i]]) if (k >= 0) regionMass.set(k, (regionMass.get(k) || 0) + v);
    }
    return { heat: scale(mass), regionHeat: scale(regionMass), seeds: new Set(lit.seeds), dest: new Set(lit.dest),
             path: new Set(lit.path_nodes), edges: lit.path_edges, label: lit.label };
  }

  renderPanel() {
    const d = this.x && this.x.details;
    if (!d) { this.panel.hidden = true; this.panel.replaceChildren(); return; }
    renderDetails(this.panel, d, {
      features: this.p.features,
      send: (event) => this.send(event),
      close: () => this.choose(-1),
      focus: (r) => { if (typeof r.other_at === "number") { this.centreOn(r.other_at, 0); this.choose(r.other_at); } },
    });
    this.panel.hidden = false;
  }

  renderStatus() {
    const M = this.model;
    if (!M) return;
    const fmt = (v) => Number(v).toLocaleString("en-US");
    const parts = [];
    if (this.mode === "entities") {
      parts.push(fmt(this.entitiesDrawn) + " of " + fmt(M.n) + " entities drawn (those in view" +
                 (this.entitiesDrawn < M.n ? " and around it" : "") + ")");
      parts.push(fmt(this.edgesDrawn) + " relations among them" + (this.edgesLeft ? " (" + fmt(this.edgesLeft) + " more left out: budget " + fmt(EDGE_BUDGET) + ")" : ""));
      parts.push(this.entityLabels ? "labels that fit are shown" : "zoom in for labels");
    } else if (this.mode) {
      const level = this.mode === "c1" ? "level 1 inside level 0" : "level 0";
      parts.push("Aggregated: " + fmt(M.n) + " entities drawn as " + fmt(this.regionsDrawn) + " communities (" + level +
                 "), sized by members; zoom in to see entities");
    }
    const hidden = [];
    if (this.hiddenTypes.size) hidden.push(this.hiddenTypes.size + " entity types hidden");
    if (this.hiddenRels.size) hidden.push(this.hiddenRels.size + " relation types hidden");
    if (this.onlyRegion >= 0) hidden.push("one community only");
    this.status.replaceChildren(el("span", null, parts.join(" · ")));
    if (hidden.length) this.status.append(el("span", "kgv-note", " · " + hidden.join(", ")));
    if (this.lights) this.status.append(el("span", "kgm-lit", " · " + this.lights.label + "; the rest dimmed"));
    const notice = this.x && this.x.notice;
    if (notice) this.status.append(el("span", "kgv-notice", " · " + notice));
    this.root.dataset.kgStatus = this.status.textContent;
  }

  renderLegend() {
    const M = this.model;
    this.legend.replaceChildren();
    const row = el("div", "kgv-row");
    if (this.lights) {
      row.append(el("span", "kgv-hd", "Search"));
      row.append(el("span", "kgv-it kgm-mark-seed", "● ringed dark: seed"), el("span", "kgv-it kgm-mark-dest", "● ringed purple: PPR destination"),
                 el("span", "kgv-it", "━ traced path"));
      const bar = el("span", "kgv-it kgm-ramp");
      bar.append(el("span", null, "PPR mass: low"));
      for (const c of HEAT) { const sw = el("span", "kgv-sw"); sw.style.background = c; bar.append(sw); }
      bar.append(el("span", null, "high"));
      row.append(bar);
    } else if (this.colorBy === "type") {
      row.append(el("span", "kgv-hd", "Types"));
      for (const [name, color] of M.types.slice(0, 10)) {
        const it = el("span", "kgv-it"), sw = el("span", "kgv-sw");
        sw.style.background = color;
        it.append(sw, document.createTextNode(short(name, 28)));
        row.append(it);
      }
      if (M.types.length > 10) row.append(el("span", "kgv-it", "+" + (M.types.length - 10) + " more"));
    } else if (this.colorBy === "community") {
      row.append(el("span", "kgv-hd", "Colour"), el("span", "kgv-it", "one colour per top-level community"));
    } else {
      const bar = el("span", "kgv-it kgm-ramp");
      bar.append(el("span", "kgv-hd", this.colorBy === "degree" ? "Degree" : "PageRank"), el("span", null, "low"));
      for (const c of SEQ) { const sw = el("span", "kgv-sw"); sw.style.background = c; bar.append(sw); }
      bar.append(el("span", null, "high (rank in this graph)"));
      row.append(bar);
    }
    this.legend.append(row);
  }

  renderFilter() {
    const M = this.model, box = this.filterBox;
    box.replaceChildren();
    const group = (title, names, hidden, cls) => {
      const sec = el("div", "kgv-fgroup " + cls);
      sec.append(el("div", "kgv-hd", title));
      for (const name of names) {
        const lab = el("label", "kgv-check"), cb = el("input");
        cb.type = "checkbox";
        cb.checked = !hidden.has(name);
        cb.dataset.kind = cls;
        cb.addEventListener("change", () => { if (cb.checked) hidden.delete(name); else hidden.add(name); this.redraw(); });
        lab.append(cb, document.createTextNode(short(name, 40)));
        sec.append(lab);
      }
      box.append(sec);
    };
    const sec = el("div", "kgv-fgroup kgm-fcomm");
    sec.append(el("div", "kgv-hd", "Community"));
    const pick = el("select", "kgm-select");
    pick.setAttribute("aria-label", "Show one community");
    const all = el("option", null, "All communities");
    all.value = "-1";
    pick.append(all);
    const R = M.regions;
    const tops = [];
    for (let k = 0; k < M.nRegions; k++) if (R.level[k] === 0) tops.push(k);
    tops.sort((p, q) => R.size[q] - R.size[p]);
    for (const k of tops.slice(0, 500)) {
      const o = el("option", null, short(R.title[k], 60) + " (" + R.size[k].toLocaleString("en-US") + ")");
      o.value = String(k);
      pick.append(o);
    }
    pick.addEventListener("change", () => {
      this.onlyRegion = Number(pick.value);
      if (this.onlyRegion >= 0) this.zoomToRegion(this.onlyRegion);
      this.redraw();
    });
    sec.append(pick);
    box.append(sec);
    group("Entity types", M.types.map((t) => t[0]), this.hiddenTypes, "kgv-ftypes");
    group("Relation types", M.rels, this.hiddenRels, "kgv-frels");
  }

  destroy() {
    if (this.p && VIEWS.get(this.p.key) === this) VIEWS.delete(this.p.key);
    document.removeEventListener("keydown", this.onKey);
    clearTimeout(this._later);
    if (this._syncFrame) cancelAnimationFrame(this._syncFrame);
    if (this.resizer) this.resizer.disconnect();
    if (this.sigma) this.sigma.kill();
    this.sigma = null;
    this.root.remove();
  }
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let view = INSTANCES.get(parentElement);
  if (!view) {
    view = new MapView(parentElement);
    INSTANCES.set(parentElement, view);
  }
  view.setTrigger = setTriggerValue;
  const raw = data ? bytesOf(data) : null;
  const message = raw ? decodeView(raw) : null;
  if (message) {
    if (message.head.rev !== view.bodyRev) { // a new graph version (or the first message): decode its body once
      view.body = decodeBody(raw, message.start);
      view.bodyRev = message.head.rev;
    }
    const body = view.body;
    whenLib(() => view.apply(message.head, body));
  }
  return () => {
    view.destroy();
    INSTANCES.delete(parentElement);
  };
}
