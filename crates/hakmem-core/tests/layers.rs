//! The layer order of hakmem-core and hakmem-cabi, written once here and in
//! docs/ARCHITECTURE.md (same order), and checked against the sources: a module may use
//! only modules of its own layer or of layers listed before it, and modules may not use
//! each other in a cycle. A "use" is any `crate::name` path in code (comments are
//! skipped; `crate::{a, b}` counts each name). A name that is no module is an item of the
//! crate root (`lib.rs`), the top layer. Every module of the crate must be listed, and
//! every listed module must exist, so a new module has to be given its place.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// hakmem-core, lowest layer first.
const CORE: &[&[&str]] = &[
    // The platform: system calls (the platform layer), then atomics and locks (a spin
    // lock yields through `os`).
    &["os"],
    &["sync"],
    // Shared definitions: size classes (and the slab size), the chunk map (and the chunk
    // header every mapping starts with), the slab map (free's class lookup), the
    // profiles, misuse reports.
    &["size_class", "chunk_map", "slab_map", "config", "misuse"],
    // The budget of retained memory.
    &["retain"],
    // Where blocks live: remote free lists, superslabs and their slabs, large mappings.
    &["remote", "superslab", "large"],
    // What no thread holds: superslabs nobody owns, batches of free blocks between
    // thread caches.
    &["pool", "depot"],
    // A thread's superslabs and slabs, and the large blocks it keeps.
    &["kept", "heap"],
    // The thread's TLS slot, and the thread cache laid over it (the fast path).
    &["tls", "thread_cache"],
    // The steps of checked mode; process set-up, thread exit and fork; statistics.
    &["checks", "process", "stats"],
    // The one path of every block (alloc, free, resize, classify).
    &["block"],
    // The public surface.
    &["lib"],
];

/// hakmem-cabi, lowest layer first.
const CABI: &[&[&str]] = &[
    // Helpers that never allocate.
    &["errno", "fmt"],
    // The environment, read without allocating.
    &["env"],
    // The mode byte (checked, counted, profiled).
    &["mode"],
    // What the malloc family calls besides the core: counting, the heap profiler,
    // foreign pointers.
    &["stats", "heap_profile", "foreign"],
    // The malloc family.
    &["malloc"],
    // Entry points built on it.
    &["aligned", "cxx", "glibc"],
    &["prefixed", "aliases"],
    // The load-time constructor.
    &["startup"],
    &["lib"],
];

/// The code of a file: line comments removed and the contents of string literals blanked
/// (a string or a comment that mentions a path is no use of it).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let bytes = line.as_bytes();
        let mut in_str = false;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' if in_str => {
                    out.push_str("  ");
                    i += 2;
                    continue;
                }
                b'"' => in_str = !in_str,
                // The character literal '"'.
                b'\'' if !in_str && bytes.get(i + 1) == Some(&b'"') => {
                    out.push_str("' '");
                    i += 3;
                    continue;
                }
                b'/' if !in_str && bytes.get(i + 1) == Some(&b'/') => break,
                _ if in_str => {
                    out.push(' ');
                    i += 1;
                    continue;
                }
                _ => {}
            }
            out.push(bytes[i] as char);
            i += 1;
        }
        out.push('\n');
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first names of the `crate::` paths in `code`.
fn crate_uses(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::` or part of another name
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d}`: the first name of each top-level item.
            let mut depth = 0;
            let mut start = 0;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        names.insert(ident_at(group[start..k].trim()).to_string());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.insert(ident_at(group[start..k].trim()).to_string());
                        start = k + 1;
                    }
                    _ => {}
                }
            }
        } else {
            names.insert(ident_at(rest).to_string());
        }
    }
    names.remove("");
    names.remove("self");
    names
}

/// Module name -> the modules it uses, from `(module, source)` pairs (several files may
/// make one module: `os.rs` and `os/linux.rs`).
fn graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<&str> = files.iter().map(|(m, _)| m.as_str()).collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in files {
        let uses = g.entry(m.clone()).or_default();
        for name in crate_uses(&strip_comments(text)) {
            let target = if modules.contains(name.as_str()) {
                name
            } else {
                "lib".to_string() // an item of the crate root
            };
            if &target != m {
                uses.insert(target);
            }
        }
    }
    g
}

/// Every way `g` breaks the layer order `layers`: uses of a higher layer, modules missing
/// from the order or listed but absent, and cycles.
fn violations(layers: &[&[&str]], g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut level = BTreeMap::new();
    for (i, layer) in layers.iter().enumerate() {
        for m in layer.iter() {
            level.insert(m.to_string(), i);
        }
    }
    let mut out = Vec::new();
    for m in g.keys() {
        if !level.contains_key(m) {
            out.push(format!("module `{m}` is in no layer: add it to the order"));
        }
    }
    for m in level.keys() {
        if !g.contains_key(m) {
            out.push(format!("layer order lists `{m}`, which has no source file"));
        }
    }
    for (m, uses) in g {
        let Some(&lm) = level.get(m) else { continue };
        for u in uses {
            if let Some(&lu) = level.get(u) {
                if lu > lm {
                    out.push(format!(
                        "`{m}` (layer {}) uses `{u}` (layer {}), a higher layer",
                        lm + 1,
                        lu + 1
                    ));
                }
            }
        }
    }
    if let Some(cycle) = find_cycle(g) {
        out.push(format!(
            "modules use each other in a cycle: {}",
            cycle.join(" -> ")
        ));
    }
    out
}

/// A cycle of `g`, as the modules on it (first repeated at the end), if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // 0: unvisited, 1: on the current path, 2: done.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for u in g.get(m).into_iter().flatten() {
            match state.get(u.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p == u).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(u.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(u, g, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0 {
            let mut path = Vec::new();
            if let Some(c) = visit(m, g, &mut state, &mut path) {
                return Some(c);
            }
        }
    }
    None
}

/// `(module, source)` of every `.rs` file under `src` (a file in `src/os/` belongs to
/// module `os`).
fn sources(src: &Path) -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src).unwrap();
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_str()
                .unwrap();
            let module = first.strip_suffix(".rs").unwrap_or(first).to_string();
            (module, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

fn check(crate_dir: &str, layers: &[&[&str]]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    let g = graph(&sources(&src));
    let edges: usize = g.values().map(|u| u.len()).sum();
    // Guard against a parser that finds nothing (and so passes anything).
    assert!(edges >= 10, "{crate_dir}: only {edges} uses found: {g:?}");
    let bad = violations(layers, &g);
    assert!(
        bad.is_empty(),
        "{crate_dir} breaks its layer order (tests/layers.rs, docs/ARCHITECTURE.md):\n  {}",
        bad.join("\n  ")
    );
}

#[test]
fn hakmem_core_keeps_its_layer_order() {
    check("hakmem-core", CORE);
}

#[test]
fn hakmem_cabi_keeps_its_layer_order() {
    check("hakmem-cabi", CABI);
}

/// The checker itself finds what it must: a use of a higher layer, a cycle inside one
/// layer, an unlisted module, a root item used from below; and ignores comments and
/// strings.
#[test]
fn the_checker_catches_each_kind_of_break() {
    let files = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(m, t)| (m.to_string(), t.to_string()))
            .collect()
    };
    let layers: &[&[&str]] = &[&["a"], &["b", "c"], &["lib"]];
    let ok = files(&[
        ("a", "// crate::b in a comment\nlet s = \"crate::c\";"),
        ("b", "use crate::{a, c::x};"),
        ("c", "use crate::a::y;"),
        ("lib", "use crate::b;"),
    ]);
    assert_eq!(violations(layers, &graph(&ok)), Vec::<String>::new());
    let up = files(&[("a", "use crate::b::x;"), ("b", ""), ("c", ""), ("lib", "")]);
    assert!(violations(layers, &graph(&up))[0].contains("`a` (layer 1) uses `b` (layer 2)"));
    let cycle = files(&[
        ("a", ""),
        ("b", "crate::c::f()"),
        ("c", "crate::b::g()"),
        ("lib", ""),
    ]);
    assert!(violations(layers, &graph(&cycle))[0].contains("cycle"));
    let root = files(&[("a", "crate::report()"), ("b", ""), ("c", ""), ("lib", "")]);
    assert!(violations(layers, &graph(&root))[0].contains("uses `lib`"));
    let extra = files(&[("a", ""), ("b", ""), ("c", ""), ("d", ""), ("lib", "")]);
    assert!(violations(layers, &graph(&extra))[0].contains("`d` is in no layer"));
}
