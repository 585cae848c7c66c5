// KG Lens grading list (st.components.v2; runs in the app page, no iframe).
//
// Lossless grading: every grade is applied here at once (optimistic) and appended to `pending` with a
// sequence number; the component then sets its state value `log` to {client, events: every pending event}.
// Streamlit may coalesce state changes made while a script run is in flight, but the latest `log` always
// holds every event Python has not acknowledged, so nothing is lost. Python applies the events whose seq is
// above the last one it applied for this client (idempotent, in order) and sends back `ack` = {client, seq};
// events up to it leave `pending`. The DOM, focus and cursor live across reruns (state is kept per mount).
// Every string from data is set with textContent, never as HTML.

const STATES = new WeakMap();
const GRADE_NAMES = ["0 not relevant", "1 related", "2 relevant", "3 answers the query"];
const HELP = [
  ["0 1 2 3", "grade the item, then move to the next one"],
  ["j  or  ↓", "next item"],
  ["k  or  ↑", "previous item"],
  ["Home / End", "first / last item"],
  ["u", "undo your last grade"],
  ["Delete / ⌫", "remove your grade of the item"],
  ["Enter", "pick the item (shows it in the graph and its details)"],
  ["?", "show or hide these keys"],
];

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function newClientId() {
  if (globalThis.crypto && typeof globalThis.crypto.randomUUID === "function") return globalThis.crypto.randomUUID();
  return `c${Date.now().toString(36)}${Math.random().toString(36).slice(2)}`;
}

function mount(parent) {
  const root = el("div", "kg-grader");
  root.tabIndex = 0;
  root.setAttribute("role", "listbox");
  const bar = el("div", "bar");
  const hint = el("span", "hint", "Click an item, then keys: 0–3 grade · j/k move · u undo · ⌫ remove · ? help");
  const status = el("span", "status");
  const helpButton = el("button", "help-button", "?");
  helpButton.type = "button";
  helpButton.title = "Keyboard shortcuts";
  bar.append(hint, status, helpButton);
  const list = el("div", "list");
  const help = el("div", "help");
  help.hidden = true;
  help.append(el("div", "help-title", "Keys (click the list first)"));
  for (const [keys, what] of HELP) {
    const line = el("div", "help-line");
    line.append(el("kbd", "", keys), el("span", "", what));
    help.append(line);
  }
  root.append(bar, list, help);
  parent.append(root);
  const s = {
    root, list, status, help, rows: [], els: [], sig: null, cursor: 0, selected: null, selectable: false,
    pending: [], seq: 0, client: newClientId(), undo: [], setStateValue: null,
  };
  root.addEventListener("keydown", (e) => onKey(s, e));
  root.addEventListener("mousedown", (e) => {
    if (e.target instanceof Element && e.target.closest("button")) e.preventDefault(); // keep focus on the list
  });
  root.addEventListener("click", (e) => onClick(s, e));
  helpButton.addEventListener("click", () => toggleHelp(s));
  return s;
}

function shown(s, row) {
  // What the row shows: the newest pending event of this row, else what Python sent.
  for (let i = s.pending.length - 1; i >= 0; i--) {
    if (s.pending[i].key === row.key) return s.pending[i].show;
  }
  return { grade: row.grade ?? null, by: row.by || "", mine: !!row.mine };
}

function send(s) {
  if (!s.setStateValue) return;
  const events = s.pending.map(({ seq, key, grade }) => ({ seq, key, grade }));
  s.setStateValue("log", { client: s.client, events });
}

function push(s, key, grade, show) {
  s.seq += 1;
  s.pending.push({ seq: s.seq, key, grade, show });
}

function grade(s, index, value, advance) {
  // value null removes your own grade (another annotator's, if any, shows again after the next run)
  const row = s.rows[index];
  if (!row || s.readonly) return;
  s.undo.push({ key: row.key, before: shown(s, row) });
  push(s, row.key, value, value === null ? { grade: null, by: "", mine: false } : { grade: value, by: "", mine: true });
  if (advance && index < s.rows.length - 1) s.cursor = index + 1;
  paint(s);
  if (advance) reveal(s);
  send(s);
}

function undo(s) {
  const last = s.readonly ? null : s.undo.pop();
  if (!last) return;
  // Your previous grade back, or (when you had none) your label removed.
  push(s, last.key, last.before.mine ? last.before.grade : null, last.before);
  const at = s.rows.findIndex((r) => r.key === last.key);
  if (at >= 0) s.cursor = at;
  paint(s);
  reveal(s);
  send(s);
}

function select(s, index) {
  const row = s.rows[index];
  if (!row || !s.selectable || !s.setStateValue) return;
  s.selected = row.key;
  paint(s);
  s.setStateValue("selected", row.key);
}

function toggleHelp(s, force) {
  s.help.hidden = force === undefined ? !s.help.hidden : !force;
}

function move(s, to) {
  if (!s.rows.length) return;
  s.cursor = Math.max(0, Math.min(s.rows.length - 1, to));
  paint(s);
  reveal(s);
}

function onKey(s, e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const k = e.key;
  if (k.length === 1 && k >= "0" && k <= "3") {
    if (!e.repeat) grade(s, s.cursor, Number(k), true); // a held key must not grade a run of items
  } else if (k === "j" || k === "ArrowDown") move(s, s.cursor + 1);
  else if (k === "k" || k === "ArrowUp") move(s, s.cursor - 1);
  else if (k === "Home") move(s, 0);
  else if (k === "End") move(s, s.rows.length - 1);
  else if (k === "u") undo(s);
  else if (k === "Delete" || k === "Backspace") grade(s, s.cursor, null, false);
  else if (k === "?") toggleHelp(s);
  else if (k === "Escape" && !s.help.hidden) toggleHelp(s, false);
  else if ((k === "Enter" || k === " ") && s.selectable) select(s, s.cursor);
  else return;
  e.preventDefault();
  e.stopPropagation();
}

function onClick(s, e) {
  const target = e.target instanceof Element ? e.target : null;
  const rowEl = target && target.closest(".row");
  if (!rowEl) return;
  const index = Number(rowEl.dataset.index);
  s.cursor = index;
  s.root.focus({ preventScroll: true });
  const button = target.closest("button[data-grade]");
  if (button) grade(s, index, Number(button.dataset.grade), false);
  else if (s.selectable) select(s, index);
  else paint(s);
}

function buildRow(row, index) {
  const node = el("div", "row");
  node.dataset.index = String(index);
  node.dataset.key = row.key;
  node.setAttribute("role", "option");
  node.append(el("div", "rank", row.rank || ""));
  const body = el("div", "body");
  body.append(el("div", "text", row.text));
  const meta = el("div", "meta");
  for (const tag of row.tags || []) meta.append(el("span", `tag tag-${tag.tone || "plain"}`, tag.text));
  if (row.meta) meta.append(el("span", "where", row.meta));
  for (const [name, value] of row.scores || []) {
    const chip = el("span", "score");
    chip.append(el("span", "score-name", name), el("span", "score-value", value));
    meta.append(chip);
  }
  if (meta.childNodes.length) body.append(meta);
  const gradeBox = el("div", "grade");
  const buttons = el("div", "buttons");
  for (let g = 0; g <= 3; g++) {
    const b = el("button", `g g${g}`, g);
    b.type = "button";
    b.tabIndex = -1;
    b.dataset.grade = String(g);
    b.title = GRADE_NAMES[g];
    buttons.append(b);
  }
  gradeBox.append(buttons, el("div", "by"));
  node.append(body, gradeBox);
  return node;
}

function build(s) {
  const nodes = [];
  s.els = [];
  s.rows.forEach((row, index) => {
    if (row.head) nodes.push(el("div", "head", row.head));
    const node = buildRow(row, index);
    s.els.push(node);
    nodes.push(node);
  });
  if (!s.rows.length) nodes.push(el("div", "empty", s.empty || "No items."));
  s.list.replaceChildren(...nodes);
}

function paint(s) {
  let graded = 0;
  s.rows.forEach((row, index) => {
    const node = s.els[index];
    const now = shown(s, row);
    const saving = s.pending.some((p) => p.key === row.key);
    if (now.grade !== null && now.grade !== undefined) graded += 1;
    node.dataset.grade = now.grade === null || now.grade === undefined ? "" : String(now.grade);
    node.classList.toggle("cursor", index === s.cursor);
    node.classList.toggle("selected", row.key === s.selected);
    node.classList.toggle("saving", saving);
    node.setAttribute("aria-selected", index === s.cursor ? "true" : "false");
    for (const b of node.querySelectorAll("button[data-grade]")) {
      b.setAttribute("aria-pressed", String(Number(b.dataset.grade) === now.grade));
    }
    const by = now.grade === null || now.grade === undefined ? "" : now.mine ? "you" : now.by ? `by ${now.by}` : "";
    node.querySelector(".by").textContent = saving ? "saving…" : by;
  });
  s.root.dataset.pending = String(s.pending.length);
  s.root.dataset.graded = String(graded);
  const waiting = s.pending.length ? ` · saving ${s.pending.length}…` : s.seq ? " · saved" : "";
  s.status.textContent = `${graded} of ${s.rows.length} graded${s.readonly ? " · read-only" : s.who ? ` · grading as ${s.who}` : " · grading anonymously"}${waiting}`;
}

function reveal(s) {
  // Keep the cursor in view after a keyboard move (never on a data update: that would scroll the page).
  const current = s.els[s.cursor];
  if (current) current.scrollIntoView({ block: "nearest" });
}

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  let s = STATES.get(parentElement);
  if (!s) {
    s = mount(parentElement);
    STATES.set(parentElement, s);
  }
  s.setStateValue = setStateValue;
  const d = data || {};
  if (d.ack && d.ack.client === s.client) s.pending = s.pending.filter((p) => p.seq > d.ack.seq);
  s.selectable = !!d.selectable;
  s.empty = d.empty || "";
  s.who = d.annotator || "";
  s.readonly = !!d.readonly;
  s.list.style.maxHeight = d.height ? `${d.height}px` : "";
  const rows = Array.isArray(d.rows) ? d.rows : [];
  const sig = rows.map((r) => `${r.key}\u001f${r.head || ""}\u001f${r.text}`).join("\u001e");
  if (sig !== s.sig) {
    const keepKey = s.sig === null ? null : s.rows[s.cursor] && s.rows[s.cursor].key;
    s.rows = rows;
    build(s);
    const kept = keepKey === null ? -1 : rows.findIndex((r) => r.key === keepKey);
    s.cursor = kept >= 0 ? kept : Math.max(0, Math.min(rows.length - 1, d.start || 0));
    if (s.sig === null) s.selected = d.selected || null;
    s.sig = sig;
  } else {
    s.rows = rows; // same items: new grades, scores or tags from Python
    rows.forEach((row, i) => {
      const node = s.els[i];
      const fresh = buildRow(row, i);
      node.replaceChildren(...fresh.childNodes);
    });
  }
  paint(s);
}
