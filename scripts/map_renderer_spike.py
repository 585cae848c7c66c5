"""The measurement the Map's renderer was chosen by: sigma.js 3 (+ graphology) against cosmos (the GPU graph
renderer, @cosmograph/cosmos) on N points and E links in headless Debian chromium (WebGL on SwiftShader).

    .venv/bin/python scripts/map_renderer_spike.py [--work-dir data/run/renderer-spike]

Installs both libraries from the npm registry into --work-dir (npm and node needed; nothing of this reaches the
app), bundles each with esbuild, and draws clustered random points (links mostly inside a cluster, as a laid-out
graph has them) with each renderer: time to the first frame, and frames per second while the camera moves every
frame for 3 s. sigma draws points with its point program (gl.POINTS) and links as 1-px lines; cosmos with its
own shaders, its simulation off (the layout is given). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, free_port  # noqa: E402

PACKAGES = ["sigma@3.0.3", "graphology@0.26.0", "@cosmograph/cosmos@1.6.1", "esbuild@0.28.2"]
CASES = [(2_000, 2_000), (10_000, 10_000), (20_000, 20_000), (100_000, 0), (100_000, 100_000)]
ENTRIES = {
    "sigma": 'import Graph from "graphology"; import Sigma from "sigma";\n'
             'import { NodePointProgram, EdgeLineProgram } from "sigma/rendering";\n'
             "window.Spike = { Graph, Sigma, NodePointProgram, EdgeLineProgram };\n",
    "cosmos": 'import { Graph } from "@cosmograph/cosmos"; window.Spike = { Graph };\n',
}
DATA = """function makeData(n, e) {
  let s = 7; const rnd = () => { s = (s * 1103515245 + 12345) & 0x7fffffff; return s / 0x7fffffff; };
  const k = Math.max(1, Math.round(Math.sqrt(n) / 3)), cx = [], cy = [], by = [];
  for (let i = 0; i < k; i++) { cx.push((rnd() - .5) * 2000); cy.push((rnd() - .5) * 2000); by.push([]); }
  const x = new Float32Array(n), y = new Float32Array(n), c = new Uint32Array(n);
  for (let i = 0; i < n; i++) { const j = Math.floor(rnd() * k); c[i] = j; by[j].push(i);
    const r = Math.sqrt(-2 * Math.log(rnd() + 1e-9)) * 40, a = rnd() * 6.283;
    x[i] = cx[j] + r * Math.cos(a); y[i] = cy[j] + r * Math.sin(a); }
  const src = new Uint32Array(e), dst = new Uint32Array(e);
  for (let i = 0; i < e; i++) { const a = Math.floor(rnd() * n); src[i] = a; const L = by[c[a]];
    dst[i] = rnd() < 0.05 ? Math.floor(rnd() * n) : L[Math.floor(rnd() * L.length)]; }
  return { n, e, x, y, c, src, dst };
}
const PAL = ["#4c78a8","#f58518","#54a24b","#b279a2","#e45756","#72b7b2","#eeca3b","#9d755d","#ff9da6","#bab0ac"];
const frames = (move) => new Promise(done => { let f = 0; const t0 = performance.now();
  const step = () => { const t = performance.now() - t0; if (t > 3000) return done(f / (t / 1000)); f++; move(t);
    requestAnimationFrame(step); }; requestAnimationFrame(step); });
"""
PAGES = {
    "sigma": """<div id="c" style="width:1200px;height:800px"></div><script>window.run = async (n, e) => {
  const d = makeData(n, e), t0 = performance.now(), g = new Spike.Graph({ multi: true });
  for (let i = 0; i < n; i++) g.addNode(i, { x: d.x[i], y: d.y[i], size: 2, color: PAL[d.c[i] % 10] });
  for (let i = 0; i < e; i++) g.addEdge(d.src[i], d.dst[i], { color: "#ccc" });
  const s = new Spike.Sigma(g, document.getElementById("c"), { renderLabels: false, defaultNodeType: "point",
    nodeProgramClasses: { point: Spike.NodePointProgram }, defaultEdgeType: "line",
    edgeProgramClasses: { line: Spike.EdgeLineProgram } });
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const first = performance.now() - t0, cam = s.getCamera();
  const fps = await frames(t => cam.setState({ x: 0.5 + 0.2 * Math.sin(t / 500), y: 0.5 + 0.2 * Math.cos(t / 500),
                                               ratio: 0.3 + 0.25 * Math.sin(t / 700) }));
  return { first, fps }; };</script>""",
    "cosmos": """<canvas id="c" style="width:1200px;height:800px"></canvas><script>window.run = async (n, e) => {
  const d = makeData(n, e), t0 = performance.now();
  const nodes = Array.from({ length: n }, (_, i) => ({ id: String(i), x: d.x[i] + 4096, y: d.y[i] + 4096,
                                                       c: PAL[d.c[i] % 10] }));
  const links = Array.from({ length: e }, (_, i) => ({ source: String(d.src[i]), target: String(d.dst[i]) }));
  const g = new Spike.Graph(document.getElementById("c"), { disableSimulation: true, spaceSize: 8192,
    nodeColor: nd => nd.c, nodeSize: 3, linkWidth: 0.5, fitViewOnInit: true, fitViewDelay: 0, pixelRatio: 1 });
  g.setData(nodes, links, false);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const first = performance.now() - t0;
  const fps = await frames(t => g.setZoomLevel(1 + 0.8 * Math.sin(t / 600), 0));
  return { first, fps }; };</script>""",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, default=ROOT / "data" / "run" / "renderer-spike")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    work = args.work_dir
    (work / "web").mkdir(parents=True, exist_ok=True)
    if not (work / "node_modules" / "sigma").is_dir():
        (work / "package.json").write_text('{"private": true}', encoding="utf-8")
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--save-exact", *PACKAGES], cwd=work, check=True)
    for lib, entry in ENTRIES.items():
        (work / f"{lib}-entry.js").write_text(entry, encoding="utf-8")
        subprocess.run(["npx", "--no-install", "esbuild", f"{lib}-entry.js", "--bundle", "--minify", "--format=iife",
                        f"--outfile=web/{lib}.js"], cwd=work, check=True, capture_output=True)
        (work / "web" / f"{lib}.html").write_text(
            f'<html><body style="margin:0"><script src="{lib}.js"></script><script>{DATA}</script>{PAGES[lib]}'
            "</body></html>", encoding="utf-8")
    licence = json.loads((work / "node_modules" / "@cosmograph" / "cosmos" / "package.json").read_text())["license"]
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              cwd=work / "web", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = []
    try:
        time.sleep(1.0)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for n, e in CASES:
                for lib in ENTRIES:
                    page = browser.new_page(viewport={"width": 1280, "height": 860})
                    page.goto(f"http://127.0.0.1:{port}/{lib}.html")
                    result = page.evaluate(f"() => window.run({n}, {e})")
                    rows.append((lib, n, e, result["first"], result["fps"]))
                    print(rows[-1], file=sys.stderr)
                    page.close()
            browser.close()
    finally:
        server.terminate()
    print(f"renderer spike, {time.strftime('%Y-%m-%d')} (headless chromium, SwiftShader); cosmos licence: {licence}")
    print("| points | links | sigma first frame (ms) | sigma fps | cosmos first frame (ms) | cosmos fps |\n"
          "|---|---|---|---|---|---|")
    for n, e in CASES:
        s = next(r for r in rows if r[0] == "sigma" and r[1:3] == (n, e))
        c = next(r for r in rows if r[0] == "cosmos" and r[1:3] == (n, e))
        print(f"| {n:,} | {e:,} | {s[3]:,.0f} | {s[4]:.1f} | {c[3]:,.0f} | {c[4]:.1f} |")


if __name__ == "__main__":
    main()
