//! A flame graph as a self-contained SVG: the root at the bottom, each function a box as
//! wide as the bytes its stacks hold (or allocated), callees above their callers. Merged
//! by function name, as `flamegraph.pl` does with folded stacks.

use crate::symbols::Snapshot;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Which figure a flame graph shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Bytes still held (`inuse_space`).
    InUse,
    /// Bytes allocated in all (`alloc_space`).
    Allocated,
}

#[derive(Default)]
struct Node {
    value: u64,
    children: BTreeMap<String, Node>,
}

const WIDTH: f64 = 1200.0;
const ROW: f64 = 16.0;
const PAD: f64 = 10.0;

/// The tree of `snap`'s stacks, rooted at "all", outermost frames nearest the root.
fn tree(snap: &Snapshot, measure: Measure) -> Node {
    let mut root = Node::default();
    for s in &snap.stacks {
        let v = match measure {
            Measure::InUse => s.inuse_bytes,
            Measure::Allocated => s.alloc_bytes,
        };
        if v == 0 {
            continue;
        }
        root.value += v;
        let mut node = &mut root;
        let names: Vec<&str> = s.functions().collect();
        for name in names.into_iter().rev() {
            node = node.children.entry(name.to_string()).or_default();
            node.value += v;
        }
    }
    root
}

fn depth(n: &Node) -> usize {
    1 + n.children.values().map(depth).max().unwrap_or(0)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A stable warm colour from a name.
fn colour(name: &str) -> String {
    let h = name.bytes().fold(2166136261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16777619)
    });
    let r = 205 + (h % 50);
    let g = 80 + ((h >> 8) % 120);
    let b = (h >> 16) % 55;
    format!("rgb({r},{g},{b})")
}

struct Layout {
    svg: String,
    scale: f64,
    height: f64,
}

impl Layout {
    fn draw(&mut self, name: &str, n: &Node, x: f64, level: usize, total: u64) {
        let w = n.value as f64 * self.scale;
        if w < 0.1 {
            return;
        }
        let y = self.height - PAD - (level as f64 + 1.0) * ROW;
        let pct = 100.0 * n.value as f64 / total.max(1) as f64;
        let title = escape(&format!("{name} ({} bytes, {pct:.2}%)", n.value));
        let _ = write!(
            self.svg,
            "<g><title>{title}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\" rx=\"2\"/>",
            ROW - 1.0,
            colour(name)
        );
        let chars = ((w - 6.0) / 7.0).max(0.0) as usize;
        if chars >= 3 {
            let label: String = if name.chars().count() > chars {
                name.chars().take(chars - 2).chain("..".chars()).collect()
            } else {
                name.to_string()
            };
            let _ = write!(
                self.svg,
                "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                x + 3.0,
                y + ROW - 4.0,
                escape(&label)
            );
        }
        self.svg.push_str("</g>\n");
        let mut cx = x;
        for (child, c) in &n.children {
            self.draw(child, c, cx, level + 1, total);
            cx += c.value as f64 * self.scale;
        }
    }
}

/// Write the flame graph of `snap` as SVG.
pub fn write(snap: &Snapshot, measure: Measure, mut out: impl Write) -> io::Result<()> {
    let root = tree(snap, measure);
    let title = match measure {
        Measure::InUse => "hakmem heap profile: bytes in use",
        Measure::Allocated => "hakmem heap profile: bytes allocated",
    };
    let height = (depth(&root) as f64 + 2.0) * ROW + 2.0 * PAD;
    let mut l = Layout {
        svg: String::new(),
        scale: (WIDTH - 2.0 * PAD) / root.value.max(1) as f64,
        height,
    };
    let _ = write!(
        l.svg,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" xmlns=\"http://www.w3.org/2000/svg\">\n<style>text {{ font-family: monospace; font-size: 11px; fill: #000; }}</style>\n<rect width=\"100%\" height=\"100%\" fill=\"#fafaf5\"/>\n<text x=\"{PAD}\" y=\"{:.1}\">{} ({} bytes; estimates from samples every {} bytes on average)</text>\n",
        PAD + 12.0,
        title,
        root.value,
        snap.interval
    );
    l.draw("all", &root, PAD, 0, root.value);
    l.svg.push_str("</svg>\n");
    out.write_all(l.svg.as_bytes())?;
    out.flush()
}
