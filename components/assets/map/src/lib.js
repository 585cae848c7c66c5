// The libraries the Map page draws with, bundled into one file (map.bundle.js) by scripts/build_map_js:
// sigma.js 3 (WebGL renderer) and graphology (its graph model). Exposed as window.KGMapLib.
import Graph from "graphology";
import Sigma from "sigma";
import { EdgeLineProgram, EdgeRectangleProgram, NodeCircleProgram } from "sigma/rendering";
import { NodePointProgram } from "sigma/rendering";

globalThis.KGMapLib = { Graph, Sigma, EdgeLineProgram, EdgeRectangleProgram, NodeCircleProgram, NodePointProgram };
