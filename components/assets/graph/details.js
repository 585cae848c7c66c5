// KG Lens live graph view, second half: the details panel, notice and undo state of the view named by `key`.
// It draws nothing itself; the view (graph.js) renders what it receives, as text.

export default function (component) {
  const x = component.data || {};
  const extra = (window.__kgExtra = window.__kgExtra || new Map());
  extra.set(x.key, x); // a view that is still loading vis-network reads it when it first draws
  const views = window.__kgViews;
  const view = views && views.get(x.key);
  if (view) view.applyExtra(x);
}
