// The dataflow page (docs/ui.md): plain JavaScript, no build step. ELK (vendored elkjs) lays
// the graph out once per dataflow; uPlot (vendored) draws the charts. Frontier events and the
// stats (counts, rates, the pace's samples) come over two WebSocket subscriptions and only
// update a model, and the drawing catches up with it at most once per animation frame (so
// 200 operators at 10 updates a second each cost at most one redraw a frame, of the text that
// changed).
"use strict";

(() => {
  const TOKEN_KEY = "frontier.token";
  const STATS_SECONDS = 1; // the stats subscription's interval
  const SILENT_MS = 3000; // no stats for this long: the server may be stalled
  const CHART_SECONDS = 300; // the charts' window: the five minutes the server keeps
  const STALL_SHOWN_S = 300; // a stall is shown for this long after it
  const CHART_WIDTH = 300;
  const CHART_HEIGHT = 120;
  const BUSY_HIGH = 0.5; // a node busier than this share of the last interval is marked
  const LIST_MS = 5000;
  const NODE_WIDTH = 200;
  const LINE = 14;
  const HEAD = 52;
  const PAD = 8; // the text's inset from a box's left and right edges
  const MIN_LABEL_PX = 10; // the smallest a label is drawn at "fit", in screen pixels
  const SMALLEST_LABEL = 11; // the smallest label's font size in the graph (style.css)
  const EXPLAIN_GAP_MS = 100; // between an explanation's refreshes, at the least
  const MAX_FIT = 3; // a small graph is enlarged to fill the canvas, up to this
  const SVG_NS = "http://www.w3.org/2000/svg";

  // What the tests (and anyone curious) can read: how often the page drew and laid out.
  const stats = {
    ready: false, explains: 0, draws: 0, updates: 0, layouts: 0, statsMessages: 0, samples: 0,
    dataflow: null, held: [], lastError: null, loop: null,
    // A chart's plotted data (by key: "input:<name>:throughput", "output:<name>:throughput",
    // "output:<name>:latency"): what it shows, for the tests.
    chart: (key) => {
      const chart = state.charts.get(key);
      return chart ? { series: chart.series.slice(1).map((s) => s.label), data: chart.data } : null;
    },
  };
  window.frontierUI = stats;

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY),
    dataflow: null, // {id, graph model}
    generation: 0, // bumped on every switch of dataflow: stale answers are dropped
    ws: null,
    statsWs: null,
    frontiers: new Map(), // location -> frontier (JSON text)
    counts: new Map(), // node -> {in, out, busy, inRate, outRate, busyShare}
    previous: null, // {at (the server's clock, s), perNode: Map(node -> {in, out, busy})}
    heard: 0, // performance.now() of the last stats message
    loop: { lag: null, stalls: [] }, // the server's event loop, as the last message said
    panels: new Map(), // "input:<name>" / "output:<name>" -> {el, parts, shown}
    charts: new Map(), // chart key -> uPlot
    series: new Map(), // chart key -> [xs, ...ys] (the last CHART_SECONDS of samples)
    lastSeq: -1, // the last sample received
    dirty: new Set(), // locations and "counts:<node>" to redraw
    frame: 0,
    liveEls: new Map(), // location -> [elements showing its frontier]
    countEls: new Map(), // node -> text element
    busyEls: new Map(), // node -> {g, bar, title, width}: its busy bar and tooltip
    panelEls: new Map(), // location -> [elements] in the side panels
    zoom: 1,
    fitted: false, // the zoom is "fit"'s: a resize fits again
    size: { width: 0, height: 0 },
    selected: null,
    explained: null, // {location, time} of the explanation shown: refreshed as frontiers move
    explaining: false, // a request for it is in flight
    explainAgain: false, // frontiers moved while it was
    silenceTimer: 0,
  };

  const $ = (id) => document.getElementById(id);

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "dataset") Object.assign(el.dataset, value);
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined) {
        el.append(child instanceof Node ? child : String(child));
      }
    }
    return el;
  }

  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "dataset") Object.assign(el.dataset, value);
      else el.setAttribute(key, value);
    }
    for (const child of children) el.append(child instanceof Node ? child : String(child));
    return el;
  }

  function setStatus(text, kind) {
    const el = $("status");
    el.textContent = text;
    el.dataset.state = kind || "info";
  }

  function fail(error) {
    stats.lastError = String(error && error.message ? error.message : error);
    setStatus(stats.lastError, "error");
  }

  // ------------------------------------------------------------------ the API and the token

  class Unauthorized extends Error {}

  async function api(path) {
    const headers = { Accept: "application/json" };
    if (state.token) headers.Authorization = `Bearer ${state.token}`;
    const response = await fetch(path, { headers, cache: "no-store" });
    if (response.status === 401) {
      askForToken(state.token ? "that token was refused" : "this server needs a token");
      throw new Unauthorized("a token is needed");
    }
    const body = response.status === 204 ? null : await response.json();
    if (!response.ok) {
      const error = new Error(body && body.detail ? body.detail : `${response.status}`);
      error.status = response.status;
      error.problem = body;
      throw error;
    }
    return body;
  }

  function askForToken(why) {
    $("token-form").hidden = false;
    $("forget-token").hidden = true;
    setStatus(why, "error");
    $("token").focus();
  }

  function b64url(text) {
    const bytes = new TextEncoder().encode(text);
    let binary = "";
    for (const byte of bytes) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function socketProtocols() {
    // A browser cannot set headers on a WebSocket: the token goes as a subprotocol.
    return state.token ? ["frontier", `frontier.bearer.${b64url(state.token)}`] : ["frontier"];
  }

  // ------------------------------------------------------------------ times and the graph

  const timeText = (time) => JSON.stringify(time);
  const frontierText = (frontier) =>
    frontier.length === 0 ? "[] complete" : `[${frontier.map(timeText).join(", ")}]`;

  function parsePort(text) {
    const colon = text.lastIndexOf(":");
    if (colon < 0) return { node: text, port: 0 };
    return { node: text.slice(0, colon), port: Number(text.slice(colon + 1)) };
  }

  const portName = (p) => `${p.node}:${p.port}`;

  function buildModel(description) {
    const graph = description.graph;
    const nodes = new Map();
    for (const [name, spec] of Object.entries(graph.nodes)) {
      nodes.set(name, { name, op: spec.op, scope: spec.scope || null, inPorts: 0, outPorts: 0 });
    }
    const edges = (graph.edges || []).map((edge, index) => {
      const [from, to] = Array.isArray(edge) ? edge : [edge.from, edge.to];
      const e = { id: `e${index}`, from: parsePort(from), to: parsePort(to) };
      nodes.get(e.from.node).outPorts = Math.max(nodes.get(e.from.node).outPorts, e.from.port + 1);
      nodes.get(e.to.node).inPorts = Math.max(nodes.get(e.to.node).inPorts, e.to.port + 1);
      return e;
    });
    for (const [name, operator] of Object.entries(description.operators || {})) {
      const node = nodes.get(name);
      if (node) node.outPorts = Math.max(node.outPorts, operator.outputs.length);
    }
    const scopes = new Map();
    for (const [name, spec] of Object.entries(graph.scopes || {})) {
      scopes.set(name, { name, kind: spec.kind || "iterative", parent: spec.parent || null });
    }
    return { id: description.id, name: description.name, nodes, edges, scopes };
  }

  // The frontier lines a node shows: one per output port; an output node shows its own.
  function frontierLines(node) {
    if (node.op === "output") return [{ location: `output:${node.name}`, label: "frontier", port: null }];
    const lines = [];
    for (let port = 0; port < node.outPorts; port += 1) {
      lines.push({ location: `operator:${node.name}:${port}`, label: `out ${port}`, port });
    }
    return lines;
  }

  function nodeHeight(node) {
    return HEAD + LINE * frontierLines(node).length + 6;
  }

  function elkGraph(model) {
    const containers = new Map([[null, { id: "root", children: [], edges: [] }]]);
    const scopeNode = (name) => {
      if (containers.has(name)) return containers.get(name);
      const scope = model.scopes.get(name);
      const node = {
        id: `scope:${name}`,
        layoutOptions: { "elk.padding": "[top=28,left=14,bottom=14,right=14]" },
        children: [],
        edges: [],
      };
      containers.set(name, node);
      scopeNode(scope ? scope.parent : null).children.push(node);
      return node;
    };
    for (const name of model.scopes.keys()) scopeNode(name);
    for (const node of model.nodes.values()) {
      const height = nodeHeight(node);
      const ports = [];
      for (let port = 0; port < node.inPorts; port += 1) {
        const y = Math.round((height * (port + 1)) / (node.inPorts + 1)) - 3;
        ports.push({ id: `n:${node.name}:in:${port}`, x: -6, y, width: 6, height: 6 });
      }
      for (let port = 0; port < node.outPorts; port += 1) {
        const y = node.op === "output" ? height / 2 - 3 : HEAD + LINE * port + 1;
        ports.push({ id: `n:${node.name}:out:${port}`, x: NODE_WIDTH, y, width: 6, height: 6 });
      }
      scopeNode(node.scope).children.push({
        id: `n:${node.name}`,
        width: NODE_WIDTH,
        height,
        ports,
        layoutOptions: { "elk.portConstraints": "FIXED_POS" },
      });
    }
    const root = containers.get(null);
    root.layoutOptions = {
      "elk.algorithm": "layered",
      "elk.direction": "RIGHT",
      "elk.hierarchyHandling": "INCLUDE_CHILDREN",
      "elk.edgeRouting": "ORTHOGONAL",
      "elk.spacing.nodeNode": "18",
      "elk.layered.spacing.nodeNodeBetweenLayers": "36",
      "elk.padding": "[top=12,left=12,bottom=12,right=12]",
    };
    root.edges = model.edges.map((edge) => ({
      id: edge.id,
      sources: [`n:${edge.from.node}:out:${edge.from.port}`],
      targets: [`n:${edge.to.node}:in:${edge.to.port}`],
    }));
    return root;
  }

  // ------------------------------------------------------------------ drawing

  function draw(model, layout) {
    const svg = $("graph");
    svg.replaceChildren();
    state.liveEls = new Map();
    state.countEls = new Map();
    state.busyEls = new Map();
    const arrow = s("marker", {
      id: "arrow", viewBox: "0 0 8 8", refX: "7", refY: "4",
      markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse",
    }, s("path", { d: "M0,0 L8,4 L0,8 z" }));
    svg.append(s("defs", {}, arrow));
    const scopesLayer = s("g", { class: "scopes" });
    const edgesLayer = s("g", { class: "edges" });
    const nodesLayer = s("g", { class: "nodes" });
    svg.append(scopesLayer, edgesLayer, nodesLayer);
    const absolute = new Map([["root", { x: 0, y: 0 }]]);

    const visit = (container, ox, oy) => {
      for (const child of container.children || []) {
        const x = ox + child.x;
        const y = oy + child.y;
        absolute.set(child.id, { x, y });
        if (child.id.startsWith("scope:")) {
          const scope = model.scopes.get(child.id.slice(6));
          scopesLayer.append(s("g", { class: "scope", dataset: { scope: scope.name, held: "false" } },
            s("rect", { x, y, width: child.width, height: child.height, rx: 8 }),
            s("text", { x: x + 10, y: y + 17 }, `${scope.kind} scope ${scope.name}`)));
          visit(child, x, y);
        } else {
          nodesLayer.append(drawNode(model.nodes.get(child.id.slice(2)), child, x, y));
        }
      }
    };
    visit(layout, 0, 0);

    const collect = (container, out) => {
      for (const edge of container.edges || []) out.push(edge);
      for (const child of container.children || []) collect(child, out);
      return out;
    };
    const byId = new Map(model.edges.map((edge) => [edge.id, edge]));
    for (const laid of collect(layout, [])) {
      const edge = byId.get(laid.id);
      const offset = absolute.get(laid.container || "root") || { x: 0, y: 0 };
      for (const section of laid.sections || []) {
        const points = [section.startPoint, ...(section.bendPoints || []), section.endPoint];
        const d = points.map((p, i) => `${i ? "L" : "M"}${p.x + offset.x},${p.y + offset.y}`).join(" ");
        edgesLayer.append(s("path", {
          class: "edge", d,
          dataset: { from: portName(edge.from), to: portName(edge.to), held: "false" },
        }, s("title", {}, `${portName(edge.from)} → ${portName(edge.to)}`)));
      }
    }
    state.size = { width: layout.width, height: layout.height };
    applyZoom();
    for (const location of state.frontiers.keys()) state.dirty.add(location);
    for (const node of model.nodes.keys()) state.dirty.add(`counts:${node}`);
    scheduleDraw();
  }

  function drawNode(node, laid, x, y) {
    const g = s("g", {
      class: "node", transform: `translate(${x},${y})`,
      dataset: { node: node.name, op: node.op, held: "false", onPath: "false", selected: "false" },
    });
    const title = s("title", {}, `${node.name} (${node.op})`);
    g.append(title);
    const body = s("rect", { class: "body", width: laid.width, height: laid.height, rx: 5 });
    body.addEventListener("click", () => select(node.name));
    g.append(body);
    // The busy bar: along the box's bottom edge, as wide as the share of the last second
    // (between two stats messages) spent running the node.
    const track = laid.width - 2 * PAD;
    g.append(s("rect", { class: "busy-track", x: PAD, y: laid.height - 5, width: track, height: 3 }));
    const bar = s("rect", { class: "busy-bar", x: PAD, y: laid.height - 5, width: 0, height: 3 });
    g.append(bar);
    state.busyEls.set(node.name, { g, bar, title, width: track, label: `${node.name} (${node.op})` });
    g.append(s("text", { class: "name", x: PAD, y: 16 }, node.name));
    g.append(s("text", { class: "op", x: PAD, y: 30 }, node.scope ? `${node.op} · in ${node.scope}` : node.op));
    const counts = s("text", { class: "counts", x: PAD, y: 45 }, "in – · out –");
    state.countEls.set(node.name, counts);
    g.append(counts);
    frontierLines(node).forEach((line, index) => {
      const top = HEAD + LINE * index - 3;
      const hit = s("rect", {
        class: "port-hit", x: 0, y: top, width: laid.width, height: LINE,
        dataset: { location: line.port === null ? node.name : `${node.name}:${line.port}` },
      });
      hit.addEventListener("click", (event) => {
        event.stopPropagation();
        select(hit.dataset.location);
      });
      const text = s("text", { class: "frontier", x: PAD, y: top + 11, dataset: { location: line.location } },
        `${line.label} ▸ …`);
      text.dataset.label = line.label;
      register(state.liveEls, line.location, text);
      g.append(hit, text);
    });
    for (const port of laid.ports || []) {
      g.append(s("rect", { class: "port", x: port.x, y: port.y, width: port.width, height: port.height }));
    }
    return g;
  }

  function register(map, key, el) {
    if (!map.has(key)) map.set(key, []);
    map.get(key).push(el);
  }

  function applyZoom() {
    const svg = $("graph");
    const { width, height } = state.size;
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("width", Math.max(1, Math.round(width * state.zoom)));
    svg.setAttribute("height", Math.max(1, Math.round(height * state.zoom)));
  }

  // "fit": the graph scaled to fill the canvas in its tighter dimension, but never so far down
  // that the smallest label (11px in style.css) is under MIN_LABEL_PX on screen: a graph too
  // big for that overflows the canvas, which scrolls.
  function fit() {
    const canvas = $("canvas");
    const { width, height } = state.size;
    if (!width || !height) return;
    const fill = Math.min((canvas.clientWidth - 4) / width, (canvas.clientHeight - 4) / height);
    state.zoom = Math.min(MAX_FIT, Math.max(MIN_LABEL_PX / SMALLEST_LABEL, fill));
    state.fitted = true;
    applyZoom();
    canvas.scrollTo(0, 0);
  }

  function scheduleDraw() {
    if (state.frame) return;
    state.frame = requestAnimationFrame(() => {
      state.frame = 0;
      flush();
    });
  }

  // The one place the live values reach the DOM: what changed since the last frame.
  function flush() {
    stats.draws += 1;
    const dirty = state.dirty;
    state.dirty = new Set();
    const counted = []; // counts' texts rewritten: measured after all the writes, then fitted
    for (const key of dirty) {
      if (key.startsWith("counts:")) {
        const node = key.slice(7);
        const el = state.countEls.get(node);
        const c = state.counts.get(node);
        if (el && c) {
          el.textContent = `in ${compact(c.in)} (${rate(c.inRate)}) · out ${compact(c.out)} (${rate(c.outRate)})`;
          el.removeAttribute("textLength");
          el.removeAttribute("lengthAdjust");
          counted.push(el);
        }
        const busy = state.busyEls.get(node);
        if (busy && c) {
          const share = c.busyShare;
          busy.bar.setAttribute("width", share === null ? 0 : share * busy.width);
          busy.g.dataset.busy = share === null ? "" : String(share);
          busy.g.dataset.busyHigh = String(share !== null && share > BUSY_HIGH);
          busy.title.textContent = share === null ? busy.label : `${busy.label} · busy ${Math.round(share * 100)}%`;
        }
        continue;
      }
      const text = state.frontiers.get(key);
      for (const el of state.liveEls.get(key) || []) {
        const shown = `${el.dataset.label} ▸ ${text}`;
        if (el.textContent !== shown) {
          el.textContent = shown;
          el.removeAttribute("textLength");
          el.removeAttribute("lengthAdjust");
          counted.push(el);
        }
        el.dataset.frontier = text;
      }
      for (const el of state.panelEls.get(key) || []) {
        if (el.textContent !== text) el.textContent = text;
        el.dataset.frontier = text;
      }
    }
    fitCounts(counted);
  }

  // A counts or frontier line never runs out of its box: if it is wider than the room left of
  // the box's padding, its glyphs are squeezed to that width (all the reads before any write).
  function fitCounts(elements) {
    const room = NODE_WIDTH - 2 * PAD;
    const wide = elements.filter((el) => el.getComputedTextLength() > room);
    for (const el of wide) {
      el.setAttribute("textLength", room);
      el.setAttribute("lengthAdjust", "spacingAndGlyphs");
    }
  }

  // 3 significant figures at most past a thousand: 950, 96.2k, 6.2M, 1.4G; a fraction keeps a
  // decimal below 100 when asked (a rate: 8.8/s).
  function compact(n, fraction = false) {
    const a = Math.abs(n);
    if (a < 999.5) return fraction && a < 99.95 && !Number.isInteger(n) ? n.toFixed(1) : String(Math.round(n));
    for (const [size, unit] of [[1e3, "k"], [1e6, "M"], [1e9, "G"], [1e12, "T"]]) {
      const v = n / size;
      if (Math.abs(v) < 999.5 || unit === "T") return `${Math.abs(v) < 99.95 ? v.toFixed(1) : Math.round(v)}${unit}`;
    }
    return String(n);
  }

  const rate = (perSecond) => (perSecond === null ? "–/s" : `${compact(perSecond, true)}/s`);

  // ------------------------------------------------------------------ live data

  function connect(generation) {
    const id = state.dataflow.id;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const url = `${scheme}://${location.host}/v1/dataflows/${encodeURIComponent(id)}/frontiers?operators=true`;
    const ws = new WebSocket(url, socketProtocols());
    ws.binaryType = "arraybuffer";
    const decoder = new TextDecoder();
    state.ws = ws;
    ws.onopen = () => setStatus("live", "live");
    ws.onmessage = (message) => {
      const data = typeof message.data === "string" ? message.data : decoder.decode(message.data);
      const event = JSON.parse(data);
      if (event.type === "frontier") {
        stats.updates += 1;
        state.frontiers.set(event.location, frontierText(event.frontier));
        state.dirty.add(event.location);
        scheduleDraw();
        refreshExplanation();
      } else if (event.type === "closed") {
        setStatus(`closed: ${event.reason}`, "error");
      }
    };
    ws.onclose = (close) => {
      if (state.ws !== ws || generation !== state.generation) return;
      state.ws = null;
      if (close.code === 4410 || close.code === 4404) {
        setStatus(`the dataflow is gone (${close.reason || close.code})`, "error");
        return;
      }
      setStatus("reconnecting…", "info");
      setTimeout(() => {
        if (generation === state.generation && state.ws === null) connect(generation);
      }, 1000);
    };
  }

  // The stats subscription: the counters now and the samples of the dataflow's pace, once a
  // second (docs/api.md, "Stats"). The first message carries the last five minutes.
  function connectStats(generation) {
    const id = state.dataflow.id;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const url = `${scheme}://${location.host}/v1/dataflows/${encodeURIComponent(id)}/stats?interval=${STATS_SECONDS}`;
    const ws = new WebSocket(url, socketProtocols());
    ws.binaryType = "arraybuffer";
    const decoder = new TextDecoder();
    state.statsWs = ws;
    ws.onmessage = (message) => {
      if (generation !== state.generation) return;
      const data = typeof message.data === "string" ? message.data : decoder.decode(message.data);
      const event = JSON.parse(data);
      if (event.type !== "stats") return;
      state.heard = performance.now();
      stats.statsMessages += 1;
      updateCounts(state.dataflow, event);
      updatePanels(event);
      addSamples(event.samples);
      state.loop = { lag: event.loop.lag, stalls: event.loop.stalls };
      showLoop();
    };
    ws.onclose = (close) => {
      if (state.statsWs !== ws || generation !== state.generation) return;
      state.statsWs = null;
      if (close.code === 4410 || close.code === 4404) return; // the dataflow is gone
      setTimeout(() => {
        if (generation === state.generation && state.statsWs === null) connectStats(generation);
      }, 1000);
    };
  }

  function updateCounts(model, message) {
    const perNode = new Map();
    for (const node of model.nodes.values()) perNode.set(node.name, { in: 0, out: 0, busy: 0 });
    const outOf = new Map(); // "node:port" -> records out of that port
    for (const [name, operator] of Object.entries(message.operators)) {
      operator.records.forEach((records, index) => outOf.set(`${name}:${index}`, records));
      if (perNode.has(name)) perNode.get(name).busy = operator.busy_seconds;
    }
    for (const [key, records] of outOf) {
      const node = perNode.get(parsePort(key).node);
      if (node) node.out += records;
    }
    for (const edge of model.edges) perNode.get(edge.to.node).in += outOf.get(portName(edge.from)) || 0;
    for (const [name, input] of Object.entries(message.inputs)) {
      if (perNode.has(name)) perNode.get(name).in = input.records_in;
    }
    for (const [name, output] of Object.entries(message.outputs)) {
      if (perNode.has(name)) perNode.get(name).out = output.records_out;
    }
    const previous = state.previous;
    const seconds = previous ? message.at - previous.at : 0; // the server's clock
    for (const [name, c] of perNode) {
      const before = previous && previous.perNode.get(name);
      const shown = state.counts.get(name);
      const inRate = before && seconds > 0 ? (c.in - before.in) / seconds : null;
      const outRate = before && seconds > 0 ? (c.out - before.out) / seconds : null;
      // The share of the interval spent running it (summed over the workers, capped at 1).
      const busyShare = before && seconds > 0 ? Math.min(1, Math.max(0, (c.busy - before.busy) / seconds)) : null;
      if (!shown || shown.in !== c.in || shown.out !== c.out || shown.inRate !== inRate || shown.outRate !== outRate
          || shown.busyShare !== busyShare) {
        state.counts.set(name, { ...c, inRate, outRate, busyShare });
        state.dirty.add(`counts:${name}`);
      }
    }
    state.previous = { at: message.at, perNode };
    scheduleDraw();
  }

  function liveFrontier(location) {
    const el = h("code", { class: "frontier", dataset: { location } }, state.frontiers.get(location) || "…");
    register(state.panelEls, location, el);
    return el;
  }

  // Each input's and output's panel is made once (its charts live in it) and then only the
  // parts whose content changed are rewritten.
  function panel(kind, name) {
    const key = `${kind}:${name}`;
    let made = state.panels.get(key);
    if (made) return made;
    const parts = {
      title: h("h3", {}, name),
      counts: h("div", { class: "counts" }),
      readers: h("div", { class: "readers" }),
    };
    const el = h("div", { class: "panel", dataset: { [kind]: name } },
      parts.title, h("div", {}, "frontier ", liveFrontier(key)), parts.counts, parts.readers);
    $(kind === "input" ? "inputs" : "outputs").append(el);
    made = { el, parts, shown: new Map() };
    state.panels.set(key, made);
    // Its charts, under the graph: inputs' first, in the graph's order.
    const charts = [h("div", { class: "chart", dataset: { chart: `${key}:throughput`, kind } })];
    if (kind === "output") charts.push(h("div", { class: "chart", dataset: { chart: `${key}:latency`, kind } }));
    const strip = $("pace");
    const firstOutput = strip.querySelector('[data-kind="output"]');
    for (const chartEl of charts) {
      strip.insertBefore(chartEl, kind === "input" ? firstOutput : null);
      makeChart(chartEl, kind, name);
    }
    return made;
  }

  // Set an element's content only when what it shows changed (``what`` is its JSON).
  function show(made, part, what, render) {
    const text = JSON.stringify(what);
    if (made.shown.get(part) === text) return;
    made.shown.set(part, text);
    made.parts[part].replaceChildren(...[render()].flat().filter((c) => c !== null));
  }

  function updatePanels(message) {
    const counts = (name, which) => {
      const c = state.counts.get(name);
      return c ? `${compact(c[which])} (${rate(c[`${which}Rate`])})` : "–";
    };
    for (const [name, input] of Object.entries(message.inputs)) {
      const made = panel("input", name);
      show(made, "title", [input.closed], () => [name, input.closed ? " (closed)" : ""]);
      show(made, "counts", counts(name, "in"), () => `records in ${counts(name, "in")}`);
      show(made, "readers", [input.sessions, input.transactions, input.staged], () => [
        h("div", {}, `open sessions: ${input.sessions.length}`),
        input.sessions.length ? h("ul", { class: "sessions" },
          input.sessions.map((session) => h("li", { dataset: { session: session.session } },
            h("code", {}, session.session), " at ", h("code", {}, timeText(session.time))))) : null,
        input.transactions.length ? h("div", {}, `open transactions: ${input.transactions.length} (${input.staged} records staged)`) : null,
      ]);
    }
    for (const [name, output] of Object.entries(message.outputs)) {
      const made = panel("output", name);
      show(made, "counts", [counts(name, "out"), output.retained],
        () => `records out ${counts(name, "out")}, ${compact(output.retained)} retained`);
      show(made, "readers", [output.subscribers, output.consumers], () => [
        h("div", { class: "subscribers" }, `subscribers: ${output.subscribers.length}`),
        output.subscribers.length ? h("ul", {}, output.subscribers.map((sub) => h("li", {},
          `${sub.queued} queued, resume at `, h("code", {}, frontierText(sub.resume))))) : null,
        h("div", { class: "consumers" }, `consumers: ${output.consumers.length}`),
        output.consumers.length ? h("ul", {}, output.consumers.map((consumer) => h("li", { dataset: { consumer: consumer.consumer } },
          h("code", {}, consumer.consumer), " committed ",
          h("code", {}, consumer.committed === null ? "nothing" : timeText(consumer.committed))))) : null,
      ]);
    }
  }

  // ------------------------------------------------------------------ charts

  const seconds = (s) => (s === null ? "–" : s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(s < 10 ? 2 : 1)} s`);

  function makeChart(el, kind, name) {
    const key = el.dataset.chart;
    const latency = key.endsWith(":latency");
    const series = latency
      ? [{ label: "mean", stroke: "#0969da" }, { label: "max", stroke: "#bc4c00" }]
      : [{ label: kind === "input" ? "in" : "out", stroke: "#1a7f37", fill: "rgba(26,127,55,0.08)" }];
    const options = {
      title: `${name} · ${latency ? "completion latency" : kind === "input" ? "records in/s" : "records out/s"}`,
      width: CHART_WIDTH,
      height: CHART_HEIGHT,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: {
        // The last minute at first, growing with the samples up to the last five minutes.
        x: {
          time: true,
          range: (u, min, max) => {
            if (max === null || !Number.isFinite(max)) return [Date.now() / 1000 - 60, Date.now() / 1000]; // no samples yet
            return [max - Math.min(CHART_SECONDS, Math.max(60, max - min)), max];
          },
        },
        y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [
        { space: 70, values: (u, values) => values.map((v) => clock(v)) },
        { size: 58, values: (u, values) => values.map((v) => (latency ? seconds(v) : compact(v, true))) },
      ],
      series: [{ label: "at", value: (u, v) => (v === null || v === undefined ? "–" : clock(v)) }, ...series.map((s) => ({
        ...s, width: 1.5, spanGaps: false,
        points: { show: latency, size: 4 },
        value: (u, v) => (v === null || v === undefined ? "–" : latency ? seconds(v) : `${compact(v, true)}/s`),
      }))],
    };
    const data = state.series.get(key) || [[], ...series.map(() => [])];
    state.series.set(key, data);
    state.charts.set(key, new uPlot(options, data, el));
  }

  // New samples of the pace: one point a second per chart, the last CHART_SECONDS kept.
  function addSamples(samples) {
    const fresh = samples.filter((sample) => sample.seq > state.lastSeq);
    if (!fresh.length) return;
    state.lastSeq = fresh[fresh.length - 1].seq;
    stats.samples += fresh.length;
    const push = (key, x, ...ys) => {
      const data = state.series.get(key);
      if (!data) return;
      data[0].push(x);
      ys.forEach((y, index) => data[index + 1].push(y));
    };
    for (const sample of fresh) {
      const per = sample.seconds > 0 ? sample.seconds : 1;
      for (const [name, records] of Object.entries(sample.records_in)) push(`input:${name}:throughput`, sample.at, records / per);
      for (const [name, records] of Object.entries(sample.records_out)) {
        push(`output:${name}:throughput`, sample.at, records / per);
        const latency = sample.latency[name];
        push(`output:${name}:latency`, sample.at, latency ? latency.mean : null, latency ? latency.max : null);
      }
    }
    const newest = fresh[fresh.length - 1].at;
    for (const [key, data] of state.series) {
      let drop = 0;
      while (drop < data[0].length && data[0][drop] < newest - CHART_SECONDS) drop += 1;
      if (drop) for (const column of data) column.splice(0, drop);
      const chart = state.charts.get(key);
      if (chart) chart.setData(data);
    }
  }

  // ------------------------------------------------------------------ the server's loop

  const clock = (at) => new Date(at * 1000).toLocaleTimeString([], { hour12: false });

  // What the page says of the server's event loop: silent (no stats for SILENT_MS: it may be
  // stalled right now), a recent stall (the server said so once it ran again), or its lag.
  function showLoop() {
    const el = $("loop");
    let kind;
    let text;
    const silent = state.heard ? performance.now() - state.heard : 0;
    const recent = state.loop.stalls.filter((stall) => Date.now() / 1000 - stall.at < STALL_SHOWN_S);
    if (state.dataflow === null || state.heard === 0) {
      kind = "none";
      text = "";
    } else if (silent > SILENT_MS) {
      kind = "silent";
      text = `no word from the server for ${Math.floor(silent / 1000)} s: its event loop may be stalled`;
    } else if (recent.length) {
      const last = recent[recent.length - 1];
      kind = "stalled";
      text = `event loop stalled ${seconds(last.seconds)} at ${clock(last.at)}`
        + (recent.length > 1 ? ` (${recent.length} stalls in ${STALL_SHOWN_S / 60} min)` : "")
        + ` · lag ${seconds(state.loop.lag)}`;
    } else {
      kind = "ok";
      text = `event loop lag ${seconds(state.loop.lag)}`;
    }
    if (el.textContent !== text) el.textContent = text;
    el.dataset.state = kind;
    stats.loop = { state: kind, text };
  }

  // ------------------------------------------------------------------ the explanation

  function select(location) {
    state.selected = location;
    $("location").value = location;
    const node = parsePort(location).node;
    for (const el of document.querySelectorAll("#graph .node")) {
      el.dataset.selected = String(el.dataset.node === (location.includes(":") ? node : location));
    }
    $("time").focus();
  }

  function clearHighlight() {
    for (const el of document.querySelectorAll('#graph [data-held="true"], #graph [data-on-path="true"]')) {
      if (el.dataset.held) el.dataset.held = "false";
      if (el.dataset.onPath) el.dataset.onPath = "false";
    }
    stats.held = [];
  }

  function normalisePort(text) {
    return text === null || text === undefined ? null : portName(parsePort(text));
  }

  function highlight(holders) {
    clearHighlight();
    const held = new Set();
    const onPath = new Set();
    const edges = [];
    const walk = (list) => {
      for (const holder of list || []) {
        if (holder.operator) held.add(holder.operator); // a node, or a scope for scope/outside
        for (const node of holder.path || []) onPath.add(node);
        if (holder.edge) edges.push([normalisePort(holder.edge[0]), normalisePort(holder.edge[1])]);
        walk(holder.holders);
      }
    };
    walk(holders);
    for (const el of document.querySelectorAll("#graph .node")) {
      if (held.has(el.dataset.node)) el.dataset.held = "true";
      else if (onPath.has(el.dataset.node)) el.dataset.onPath = "true";
    }
    for (const el of document.querySelectorAll("#graph .scope")) {
      if (held.has(el.dataset.scope)) el.dataset.held = "true";
    }
    for (const el of document.querySelectorAll("#graph .edge")) {
      if (edges.some(([from, to]) => from === el.dataset.from && to === el.dataset.to)) el.dataset.held = "true";
    }
    stats.held = [...held].sort();
  }

  function holderItem(holder) {
    const where = [];
    if (holder.operator) where.push(h("code", {}, holder.operator));
    if (holder.port) where.push(" port ", h("code", {}, holder.port));
    if (holder.edge) where.push(" edge ", h("code", {}, `${holder.edge[0] || "?"} → ${holder.edge[1] || "?"}`));
    if (holder.session) where.push(" session ", h("code", {}, holder.session));
    if (holder.transaction) where.push(" transaction ", h("code", {}, holder.transaction));
    return h("li", { dataset: { kind: holder.kind, operator: holder.operator || "" } },
      h("span", { class: "kind" }, holder.kind), " ", where,
      " at ", h("code", {}, timeText(holder.time)),
      holder.count ? ` (${holder.count})` : "",
      holder.summary ? h("div", { class: "muted" }, `summary ${holder.summary}`,
        holder.arrives !== undefined ? ` (arrives at ${timeText(holder.arrives)})` : "") : null,
      holder.path && holder.path.length ? h("div", { class: "muted" }, `path: ${holder.path.join(" → ")}`) : null,
      holder.holders && holder.holders.length ? h("ul", {}, holder.holders.map(holderItem)) : null);
  }

  async function explain(event) {
    event.preventDefault();
    const out = $("explanation");
    const locationValue = $("location").value;
    state.explained = null; // until this one is asked
    let time;
    try {
      time = JSON.parse($("time").value.trim());
    } catch {
      out.replaceChildren(h("p", { class: "error" }, "a time is an integer, or [outer, inner]"));
      return;
    }
    if (!state.dataflow || !locationValue) {
      out.replaceChildren(h("p", { class: "error" }, "click a location in the graph first"));
      return;
    }
    state.explained = { location: locationValue, time };
    await runExplain();
  }

  // A frontier moved while an explanation is shown: ask again (one request at a time, and
  // one more after it if frontiers moved meanwhile), so the panel follows the frontiers.
  function refreshExplanation() {
    if (!state.explained) return;
    if (state.explaining) {
      state.explainAgain = true;
      return;
    }
    runExplain();
  }

  async function runExplain() {
    const out = $("explanation");
    const asked = state.explained;
    const generation = state.generation;
    const query = `location=${encodeURIComponent(asked.location)}&time=${encodeURIComponent(JSON.stringify(asked.time))}`;
    state.explaining = true;
    state.explainAgain = false;
    try {
      const answer = await api(`/v1/dataflows/${encodeURIComponent(state.dataflow.id)}/explain?${query}`);
      if (generation !== state.generation || state.explained !== asked) return;
      stats.explains += 1;
      out.dataset.complete = String(answer.complete);
      if (answer.complete) {
        clearHighlight();
        out.replaceChildren(h("p", { class: "complete" },
          `${timeText(answer.time)} is complete at ${answer.location}: nothing holds it.`));
        return;
      }
      out.replaceChildren(
        h("p", {}, `${timeText(answer.time)} is not complete at `, h("code", {}, answer.location),
          "; frontier ", h("code", {}, frontierText(answer.frontier)), ". Held back by:"),
        h("ul", { class: "holders" }, answer.holders.map(holderItem)));
      highlight(answer.holders);
    } catch (error) {
      if (error instanceof Unauthorized || state.explained !== asked) return;
      out.replaceChildren(h("p", { class: "error" }, error.message));
    } finally {
      state.explaining = false;
      if (state.explainAgain && state.explained && generation === state.generation) {
        setTimeout(refreshExplanation, EXPLAIN_GAP_MS);
      }
    }
  }

  // ------------------------------------------------------------------ dataflows

  async function listDataflows() {
    try {
      const items = [];
      let cursor = null;
      do {
        const page = await api(`/v1/dataflows?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
        items.push(...page.items);
        cursor = page.next_cursor;
      } while (cursor);
      $("token-form").hidden = true;
      $("forget-token").hidden = !state.token;
      $("dataflows").replaceChildren(...items.map((item) => h("li", {},
        h("button", {
          type: "button", dataset: { id: item.id },
          "aria-current": String(state.dataflow !== null && state.dataflow.id === item.id),
          onclick: () => { location.hash = item.id; },
        }, item.name || item.id,
        h("span", { class: "meta" }, `${item.status} · ${item.inputs.length} in, ${item.outputs.length} out`)))));
      if (!state.dataflow) setStatus(items.length ? "choose a dataflow" : "no dataflows yet", "info");
      stats.ready = true;
      return true;
    } catch (error) {
      if (!(error instanceof Unauthorized)) fail(error);
      return false;
    }
  }

  function stop() {
    state.generation += 1;
    for (const which of ["ws", "statsWs"]) {
      const ws = state[which];
      state[which] = null;
      if (ws) ws.close(1000);
    }
    for (const chart of state.charts.values()) chart.destroy();
    state.charts = new Map();
    state.series = new Map();
    state.panels = new Map();
    state.panelEls = new Map();
    state.lastSeq = -1;
    state.heard = 0;
    state.loop = { lag: null, stalls: [] };
    $("inputs").replaceChildren();
    $("outputs").replaceChildren();
    $("pace").replaceChildren();
    state.frontiers = new Map();
    state.counts = new Map();
    state.previous = null;
    state.dirty = new Set();
    showLoop();
  }

  async function open(id) {
    stop();
    const generation = state.generation;
    stats.dataflow = null;
    document.title = "Frontier: dataflows";
    state.explained = null;
    $("explanation").replaceChildren();
    $("location").value = "";
    try {
      setStatus("loading…", "info");
      const description = await api(`/v1/dataflows/${encodeURIComponent(id)}?operators=true`);
      if (generation !== state.generation) return;
      const model = buildModel(description);
      state.dataflow = model;
      const name = description.name || description.id;
      $("title").textContent = name;
      $("title").title = description.id;
      document.title = `${name} · Frontier`;
      for (const button of document.querySelectorAll("#dataflows button")) {
        button.setAttribute("aria-current", String(button.dataset.id === id));
      }
      const layout = await new ELK().layout(elkGraph(model));
      if (generation !== state.generation) return;
      stats.layouts += 1;
      draw(model, layout);
      fit();
      stats.dataflow = id;
      connect(generation);
      connectStats(generation);
    } catch (error) {
      if (!(error instanceof Unauthorized)) fail(error);
    }
  }

  async function start() {
    if (await listDataflows()) {
      const id = decodeURIComponent(location.hash.slice(1));
      if (id) await open(id);
    }
  }

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = $("token").value;
    sessionStorage.setItem(TOKEN_KEY, state.token);
    $("token").value = "";
    start();
  });
  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = null;
    stop();
    askForToken("token forgotten");
  });
  $("explain-form").addEventListener("submit", explain);
  $("explain-clear").addEventListener("click", () => {
    state.explained = null;
    clearHighlight();
    $("explanation").replaceChildren();
  });
  $("zoom-in").addEventListener("click", () => { state.zoom *= 1.25; state.fitted = false; applyZoom(); });
  $("zoom-out").addEventListener("click", () => { state.zoom /= 1.25; state.fitted = false; applyZoom(); });
  window.addEventListener("resize", () => { if (state.fitted) fit(); });
  $("zoom-fit").addEventListener("click", fit);
  window.addEventListener("hashchange", () => {
    const id = decodeURIComponent(location.hash.slice(1));
    if (id) open(id);
  });
  setInterval(() => { if (!$("token-form").hidden) return; listDataflows(); }, LIST_MS);
  setInterval(showLoop, 500); // silence is noticed without a message
  start();
})();
