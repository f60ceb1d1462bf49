//! Text drawing of a [`DrawableGraph`] (langchain-core's `Graph.draw_ascii()`): a box per node, in layers
//! from the top, edges drawn with `*` (plain) or `.` (conditional), without arrowheads or labels.
//!
//! The layout is a small layered one of our own: edges that close a cycle are turned around, each node
//! goes one layer below its lowest predecessor, an edge across several layers passes through a
//! one-column point on each layer between, nodes in a layer are ordered by the mean position of their
//! neighbours (a few sweeps down and up), then placed near the centre of their neighbours without
//! overlapping. Everything is decided by node and edge order, so a graph always draws the same.

use super::DrawableGraph;

/// Rows between two layers, where edges run.
const GAP: usize = 3;
/// Columns between two items of a layer.
const SEP: usize = 2;
/// Ordering sweeps (each one down and one up).
const SWEEPS: usize = 4;

/// Something placed in a layer: a node, or the point where an edge crosses the layer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Item {
    Node(usize),
    Bend { edge: usize },
}

/// One edge of the layout: from an upper to a lower node, with its bends on the layers between.
#[derive(Debug)]
struct Route {
    upper: usize,
    lower: usize,
    conditional: bool,
    /// The layers its bends are on, going down.
    bends: Vec<usize>,
}

pub(super) fn render(graph: &DrawableGraph) -> String {
    let labels: Vec<String> = graph.nodes().map(|n| n.id.clone()).collect();
    if labels.is_empty() {
        return String::new();
    }
    let index = |id: &str| labels.iter().position(|l| l == id);
    let edges: Vec<(usize, usize, bool)> = graph
        .edges()
        .filter_map(|e| Some((index(e.source)?, index(e.target)?, e.conditional)))
        .filter(|(s, t, _)| s != t)
        .collect();
    let n = labels.len();
    let forward = acyclic(n, &edges);
    let layer_of = layers(n, &forward);
    let depth = layer_of.iter().copied().max().unwrap_or(0) + 1;

    // Items per layer, first in node order, then the bends of long edges.
    let mut layers_items: Vec<Vec<Item>> = vec![Vec::new(); depth];
    for (node, &layer) in layer_of.iter().enumerate() {
        layers_items[layer].push(Item::Node(node));
    }
    let mut routes = Vec::new();
    for (e, &(upper, lower, conditional)) in forward.iter().enumerate() {
        let mut bends = Vec::new();
        let between = layer_of[upper] + 1..layer_of[lower];
        for (layer, items) in layers_items.iter_mut().enumerate().filter(|(l, _)| between.contains(l)) {
            bends.push(layer);
            items.push(Item::Bend { edge: e });
        }
        routes.push(Route { upper, lower, conditional, bends });
    }
    order(&mut layers_items, &routes, &layer_of);
    let width = |item: &Item| match item {
        Item::Node(i) => labels[*i].chars().count() + 4,
        Item::Bend { .. } => 1,
    };
    let xs = place(&layers_items, &routes, &layer_of, &width);

    // The canvas.
    let total_width = layers_items
        .iter()
        .zip(&xs)
        .flat_map(|(items, xs)| items.iter().zip(xs).map(|(item, x)| x + width(item)))
        .max()
        .unwrap_or(0);
    let rows = depth * 3 + (depth - 1) * GAP;
    let mut canvas = vec![vec![' '; total_width + 1]; rows];
    let top = |layer: usize| layer * (3 + GAP);
    let position = |item: Item| -> (usize, usize) {
        for (layer, items) in layers_items.iter().enumerate() {
            if let Some(k) = items.iter().position(|i| *i == item) {
                return (layer, k);
            }
        }
        (0, 0)
    };
    let center = |layer: usize, k: usize| xs[layer][k] + width(&layers_items[layer][k]) / 2;
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for (e, route) in routes.iter().enumerate() {
        let (ul, uk) = position(Item::Node(route.upper));
        let (ll, lk) = position(Item::Node(route.lower));
        // A second edge between the same two nodes (a loop back) leaves and enters two columns over.
        let shift = 2 * pairs.iter().filter(|p| **p == (route.upper, route.lower)).count();
        pairs.push((route.upper, route.lower));
        let mut points = vec![(center(ul, uk) + shift, top(ul) + 3)];
        for &layer in &route.bends {
            let k = layers_items[layer].iter().position(|i| *i == Item::Bend { edge: e }).unwrap_or(0);
            let x = center(layer, k);
            points.push((x, top(layer).saturating_sub(1)));
            points.push((x, top(layer) + 3));
        }
        points.push((center(ll, lk) + shift, top(ll).saturating_sub(1)));
        let mark = if route.conditional { '.' } else { '*' };
        for pair in points.windows(2) {
            line(&mut canvas, pair[0], pair[1], mark);
        }
    }
    for (layer, items) in layers_items.iter().enumerate() {
        for (k, item) in items.iter().enumerate() {
            if let Item::Node(i) = item {
                draw_box(&mut canvas, xs[layer][k], top(layer), &labels[*i]);
            }
        }
    }
    let mut out = String::new();
    for row in canvas {
        let line: String = row.into_iter().collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The edges with those that close a cycle turned around (found by a depth-first walk in node order),
/// as `(upper, lower, conditional)`.
fn acyclic(n: usize, edges: &[(usize, usize, bool)]) -> Vec<(usize, usize, bool)> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; n];
    let mut back = vec![false; edges.len()];
    for root in 0..n {
        if mark[root] != Mark::New {
            continue;
        }
        // (node, next outgoing edge to look at)
        let mut stack = vec![(root, 0usize)];
        mark[root] = Mark::Open;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            match edges.iter().enumerate().skip(*next).find(|(_, e)| e.0 == node) {
                Some((e, &(_, target, _))) => {
                    *next = e + 1;
                    match mark[target] {
                        Mark::Open => back[e] = true,
                        Mark::New => {
                            mark[target] = Mark::Open;
                            stack.push((target, 0));
                        }
                        Mark::Done => {}
                    }
                }
                None => {
                    mark[node] = Mark::Done;
                    stack.pop();
                }
            }
        }
    }
    edges.iter().zip(back).map(|(&(s, t, c), b)| if b { (t, s, c) } else { (s, t, c) }).collect()
}

/// Each node one layer below its lowest predecessor (longest path from the top).
fn layers(n: usize, forward: &[(usize, usize, bool)]) -> Vec<usize> {
    let mut layer = vec![0; n];
    // The graph is acyclic, so n rounds settle every layer.
    for _ in 0..n {
        let mut changed = false;
        for &(upper, lower, _) in forward {
            if layer[lower] < layer[upper] + 1 {
                layer[lower] = layer[upper] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    layer
}

/// The items next to `item` of `layer` on the layer above (`up`) or below.
fn neighbours(routes: &[Route], layer_of: &[usize], layer: usize, item: Item, up: bool) -> Vec<Item> {
    let mut out = Vec::new();
    for (e, route) in routes.iter().enumerate() {
        // The chain of this route: the upper node, its bends, the lower node.
        let mut chain: Vec<(usize, Item)> = vec![(layer_of[route.upper], Item::Node(route.upper))];
        chain.extend(route.bends.iter().map(|&l| (l, Item::Bend { edge: e })));
        chain.push((layer_of[route.lower], Item::Node(route.lower)));
        for pair in chain.windows(2) {
            let ((la, a), (lb, b)) = (pair[0], pair[1]);
            if up && lb == layer && b == item {
                out.push(a);
            } else if !up && la == layer && a == item {
                out.push(b);
            }
        }
    }
    out
}

/// Orders each layer by the mean position of each item's neighbours on the layer just ordered.
fn order(layers: &mut [Vec<Item>], routes: &[Route], layer_of: &[usize]) {
    let depth = layers.len();
    for sweep in 0..SWEEPS * 2 {
        let up = sweep % 2 == 1;
        let range: Vec<usize> =
            if up { (0..depth.saturating_sub(1)).rev().collect() } else { (1..depth).collect() };
        for layer in range {
            let other = if up { layer + 1 } else { layer - 1 };
            let keys: Vec<f64> = layers[layer]
                .iter()
                .enumerate()
                .map(|(k, &item)| {
                    let near = neighbours(routes, layer_of, layer, item, !up);
                    let at: Vec<f64> = near
                        .iter()
                        .filter_map(|n| layers[other].iter().position(|i| i == n))
                        .map(|p| p as f64)
                        .collect();
                    if at.is_empty() { k as f64 } else { at.iter().sum::<f64>() / at.len() as f64 }
                })
                .collect();
            let mut keyed: Vec<(f64, usize, Item)> =
                layers[layer].iter().enumerate().map(|(k, &item)| (keys[k], k, item)).collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            layers[layer] = keyed.into_iter().map(|(_, _, item)| item).collect();
        }
    }
}

/// Left columns of every item: passes down, up and down again, each centring items on their neighbours
/// in the layer just placed, never overlapping.
fn place(
    layers: &[Vec<Item>],
    routes: &[Route],
    layer_of: &[usize],
    width: &dyn Fn(&Item) -> usize,
) -> Vec<Vec<usize>> {
    let depth = layers.len();
    let mut centers: Vec<Vec<f64>> = layers
        .iter()
        .map(|items| {
            let mut x = 0.0;
            items
                .iter()
                .map(|item| {
                    let w = width(item) as f64;
                    let c = x + w / 2.0;
                    x += w + SEP as f64;
                    c
                })
                .collect()
        })
        .collect();
    let down = || (1..depth).map(|l| (l, true));
    let up = (0..depth.saturating_sub(1)).rev().map(|l| (l, false));
    let passes: Vec<(usize, bool)> = down().chain(up).chain(down()).collect();
    for (layer, from_above) in passes {
        let other = if from_above { layer - 1 } else { layer + 1 };
        let mut right = f64::NEG_INFINITY;
        let mut wanted_centers = Vec::with_capacity(layers[layer].len());
        let mut next = Vec::with_capacity(layers[layer].len());
        for (k, item) in layers[layer].iter().enumerate() {
            let near = neighbours(routes, layer_of, layer, *item, from_above);
            let at: Vec<f64> = near
                .iter()
                .filter_map(|n| layers[other].iter().position(|i| i == n))
                .map(|p| centers[other][p])
                .collect();
            let wanted =
                if at.is_empty() { centers[layer][k] } else { at.iter().sum::<f64>() / at.len() as f64 };
            let w = width(item) as f64;
            let left = (wanted - w / 2.0).max(right + SEP as f64);
            right = left + w;
            wanted_centers.push(wanted);
            next.push(left + w / 2.0);
        }
        // Items pushed right by their left neighbours: move the layer back by the mean push.
        let count = next.len().max(1) as f64;
        let shift = wanted_centers.iter().zip(&next).map(|(w, c)| w - c).sum::<f64>() / count;
        centers[layer] = next.into_iter().map(|c| c + shift).collect();
    }
    let min_left = layers
        .iter()
        .zip(&centers)
        .flat_map(|(items, cs)| items.iter().zip(cs).map(|(item, c)| c - width(item) as f64 / 2.0))
        .fold(f64::INFINITY, f64::min);
    layers
        .iter()
        .zip(&centers)
        .map(|(items, cs)| {
            items
                .iter()
                .zip(cs)
                .map(|(item, c)| (c - width(item) as f64 / 2.0 - min_left).round().max(0.0) as usize)
                .collect()
        })
        .collect()
}

/// A straight line of `mark` from `a` to `b`, one character per step along the longer axis.
fn line(canvas: &mut [Vec<char>], a: (usize, usize), b: (usize, usize), mark: char) {
    let (x0, y0) = (a.0 as f64, a.1 as f64);
    let (dx, dy) = (b.0 as f64 - x0, b.1 as f64 - y0);
    let steps = dx.abs().max(dy.abs()) as usize;
    for s in 0..=steps {
        let t = if steps == 0 { 0.0 } else { s as f64 / steps as f64 };
        let (x, y) = ((x0 + dx * t).round() as usize, (y0 + dy * t).round() as usize);
        if let Some(cell) = canvas.get_mut(y).and_then(|row| row.get_mut(x)) {
            *cell = mark;
        }
    }
}

fn draw_box(canvas: &mut [Vec<char>], left: usize, top: usize, label: &str) {
    let inner = label.chars().count() + 2;
    let border: Vec<char> =
        std::iter::once('+').chain(std::iter::repeat_n('-', inner)).chain(std::iter::once('+')).collect();
    let middle: Vec<char> = format!("| {label} |").chars().collect();
    for (dy, row) in [&border, &middle, &border].into_iter().enumerate() {
        if let Some(line) = canvas.get_mut(top + dy) {
            for (dx, ch) in row.iter().enumerate() {
                if let Some(cell) = line.get_mut(left + dx) {
                    *cell = *ch;
                }
            }
        }
    }
}
