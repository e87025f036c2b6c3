//! Snapshots of the stack table, symbolized in process (function, file, line, with inlined
//! frames) by the `backtrace` crate, which reads the symbol tables and DWARF of the
//! loaded modules. Runs only when a profile is written, never on the allocation path.
//!
//! The allocator's own frames (the profiler, hakmem, `__rust_alloc`, `malloc` in
//! `libhakmem.so`) are cut from the inner end of each stack, so the innermost frame left
//! is the program's call site.

use crate::table;
use std::collections::HashMap;
use std::fmt::Write;

/// One source-level frame: a function, and where in it (inlined calls are frames of
/// their own, at the same address).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// One recorded stack with its estimated figures.
#[derive(Clone, Debug, Default)]
pub struct StackStat {
    /// Return addresses, innermost first (the allocator's own frames removed).
    pub addresses: Vec<u64>,
    /// Per address, its frames, innermost (most inlined) first.
    pub frames: Vec<Vec<Frame>>,
    pub alloc_objects: u64,
    pub alloc_bytes: u64,
    pub inuse_objects: u64,
    pub inuse_bytes: u64,
    /// Samples taken at this stack, and those still live.
    pub samples: u64,
    pub live_samples: u64,
}

impl StackStat {
    /// The innermost function (the allocation site), or `?`.
    pub fn site(&self) -> &str {
        self.frames
            .iter()
            .flatten()
            .next()
            .map_or("?", |f| f.function.as_str())
    }

    /// Functions from innermost to outermost.
    pub fn functions(&self) -> impl Iterator<Item = &str> {
        self.frames.iter().flatten().map(|f| f.function.as_str())
    }
}

/// Every recorded stack, largest in-use bytes first.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub stacks: Vec<StackStat>,
    /// The sampling interval the figures were estimated with.
    pub interval: usize,
}

impl Snapshot {
    pub fn alloc_bytes(&self) -> u64 {
        self.stacks.iter().map(|s| s.alloc_bytes).sum()
    }

    pub fn inuse_bytes(&self) -> u64 {
        self.stacks.iter().map(|s| s.inuse_bytes).sum()
    }
}

fn round(v: f64) -> u64 {
    if v > 0.5 {
        v.round() as u64
    } else {
        0
    }
}

/// Copy the table and symbolize it.
pub fn snapshot() -> Snapshot {
    let mut raw = Vec::with_capacity(table::len() + 16);
    table::for_each(|frames, e| {
        if e.samples > 0 {
            raw.push((frames.to_vec(), *e));
        }
    });
    let mut resolver = Resolver::default();
    let mut stacks: Vec<StackStat> = raw
        .into_iter()
        .map(|(ips, e)| {
            let frames: Vec<Vec<Frame>> = ips.iter().map(|&ip| resolver.resolve(ip)).collect();
            // After the last of the leading frames that are the allocator's (frames
            // with no symbol among them do not stop the search).
            let mut cut = 0;
            for (i, (f, &ip)) in frames.iter().zip(&ips).enumerate() {
                if resolver.is_internal(ip, f) {
                    cut = i + 1;
                } else if !f.is_empty() {
                    break;
                }
            }
            let mut frames = frames[cut..].to_vec();
            // The allocator inlined into the call site: its frames at the same address.
            if let Some(first) = frames.first_mut() {
                let inner = first
                    .iter()
                    .take_while(|f| internal_name(&f.function))
                    .count();
                first.drain(..inner.min(first.len().saturating_sub(1)));
            }
            StackStat {
                addresses: ips[cut..].to_vec(),
                frames,
                alloc_objects: round(e.alloc_objects),
                alloc_bytes: round(e.alloc_bytes),
                inuse_objects: round(e.inuse_objects),
                inuse_bytes: round(e.inuse_bytes),
                samples: e.samples,
                live_samples: e.live,
            }
        })
        .collect();
    stacks.sort_by_key(|s| std::cmp::Reverse((s.inuse_bytes, s.alloc_bytes)));
    Snapshot {
        stacks,
        interval: crate::interval(),
    }
}

/// Symbolizes addresses once each.
#[derive(Default)]
struct Resolver {
    cache: HashMap<u64, Vec<Frame>>,
    /// The module this profiler is in, when it is a shared object (`libhakmem.so`):
    /// every frame in it is the allocator's.
    own_module: Option<Option<usize>>,
}

impl Resolver {
    fn resolve(&mut self, ip: u64) -> Vec<Frame> {
        self.cache
            .entry(ip)
            .or_insert_with(|| {
                let mut out = Vec::new();
                // A return address: the call is the instruction before it.
                backtrace::resolve((ip.saturating_sub(1)) as *mut std::ffi::c_void, |s| {
                    let function = match s.name() {
                        Some(n) => format!("{n:#}"),
                        None => return,
                    };
                    out.push(Frame {
                        function,
                        file: s.filename().map(|p| p.display().to_string()),
                        line: s.lineno(),
                    });
                });
                out
            })
            .clone()
    }

    fn own_module(&mut self) -> Option<usize> {
        *self.own_module.get_or_insert_with(|| {
            let (base, name) = module_of(snapshot as fn() -> Snapshot as usize as u64)?;
            name.ends_with(".so").then_some(base)
        })
    }

    /// Whether a frame is the allocator's own.
    fn is_internal(&mut self, ip: u64, frames: &[Frame]) -> bool {
        if let Some(own) = self.own_module() {
            if module_of(ip).is_some_and(|(base, _)| base == own) {
                return true;
            }
        }
        frames.iter().all(|f| internal_name(&f.function)) && !frames.is_empty()
    }
}

/// Functions of the allocator and of Rust's allocation shims.
fn internal_name(f: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "hakmem",
        "<hakmem",
        "__rust_alloc",
        "__rust_realloc",
        "__rust_dealloc",
        "__rustc::__rust_alloc",
        "__rustc::__rust_realloc",
        "__rdl_",
        "alloc::alloc::",
        "<alloc::alloc::Global",
        "_Unwind_",
    ];
    PREFIXES.iter().any(|p| f.starts_with(p))
}

/// The load address and file name of the module holding `ip`.
fn module_of(ip: u64) -> Option<(usize, String)> {
    let mut info: libc::Dl_info = unsafe_zeroed();
    // SAFETY: dladdr only reads the address and fills `info`.
    if unsafe { libc::dladdr(ip as *const libc::c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: a NUL-terminated string owned by the dynamic linker.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    Some((info.dli_fbase as usize, name.to_string_lossy().into_owned()))
}

fn unsafe_zeroed() -> libc::Dl_info {
    libc::Dl_info {
        dli_fname: core::ptr::null(),
        dli_fbase: core::ptr::null_mut(),
        dli_sname: core::ptr::null(),
        dli_saddr: core::ptr::null_mut(),
    }
}

/// `function (file:line)`, or the function alone.
pub fn describe(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => {
            let short = file.rsplit('/').next().unwrap_or(file);
            format!("{} ({short}:{line})", f.function)
        }
        _ => f.function.clone(),
    }
}

fn stack_line(s: &StackStat, depth: usize) -> String {
    let names: Vec<String> = s
        .frames
        .iter()
        .flatten()
        .take(depth)
        .map(describe)
        .collect();
    if names.is_empty() {
        return "?".to_string();
    }
    names.join(" <- ")
}

/// The text report: top stacks by in-use bytes (the leak report at exit), then by
/// allocated bytes.
pub fn report(snap: &Snapshot, n: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "hakmem heap profile: {} bytes in use, {} bytes allocated in all (estimates; one sample per {} bytes on average)",
        snap.inuse_bytes(),
        snap.alloc_bytes(),
        snap.interval
    );
    let mut section = |title: &str, key: fn(&StackStat) -> (u64, u64)| {
        let mut order: Vec<&StackStat> = snap.stacks.iter().filter(|s| key(s).0 > 0).collect();
        order.sort_by_key(|s| std::cmp::Reverse(key(s)));
        let _ = writeln!(
            out,
            "\n{title}\n{:>14} {:>10}  stack (innermost first)",
            "bytes", "objects"
        );
        for s in order.into_iter().take(n) {
            let (bytes, objects) = key(s);
            let _ = writeln!(out, "{bytes:>14} {objects:>10}  {}", stack_line(s, 6));
        }
    };
    section("in use (at exit: still held, the leak report):", |s| {
        (s.inuse_bytes, s.inuse_objects)
    });
    section("allocated in all:", |s| (s.alloc_bytes, s.alloc_objects));
    out
}
