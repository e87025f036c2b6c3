//! The pprof format (`profile.proto` of github.com/google/pprof), written by hand: a
//! handful of varint and length-delimited fields, gzipped. Locations carry their
//! functions and lines (symbolized in process), so `go tool pprof` needs no binary.

use crate::symbols::{Frame, Snapshot};
use std::collections::HashMap;
use std::io::{self, Write};

/// A protobuf message being built.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    /// A varint field (wire type 0); zero is left out, as proto3 does.
    fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.varint(u64::from(field) << 3);
            self.varint(v);
        }
    }

    /// A length-delimited field (wire type 2).
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.varint(u64::from(field) << 3 | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn packed(&mut self, field: u32, vs: impl Iterator<Item = u64>) {
        let mut m = Msg::default();
        for v in vs {
            m.varint(v);
        }
        self.bytes(field, &m.0);
    }
}

/// The string table: index 0 is "".
struct Strings {
    index: HashMap<String, u64>,
    list: Vec<String>,
}

impl Strings {
    fn new() -> Self {
        Strings {
            index: HashMap::from([(String::new(), 0)]),
            list: vec![String::new()],
        }
    }

    fn id(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.list.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

fn value_type(strings: &mut Strings, kind: &str, unit: &str) -> Vec<u8> {
    let mut m = Msg::default();
    m.uint(1, strings.id(kind));
    m.uint(2, strings.id(unit));
    m.0
}

/// Encode `snap` as an (uncompressed) `Profile` message.
pub fn encode(snap: &Snapshot, interval: usize) -> Vec<u8> {
    let mut strings = Strings::new();
    let mut p = Msg::default();
    // Field 1: sample types, in the order of each sample's values.
    for (kind, unit) in [
        ("alloc_objects", "count"),
        ("alloc_space", "bytes"),
        ("inuse_objects", "count"),
        ("inuse_space", "bytes"),
    ] {
        let vt = value_type(&mut strings, kind, unit);
        p.bytes(1, &vt);
    }
    // Locations (one per address) and functions (one per name and file).
    let mut locations: HashMap<u64, u64> = HashMap::new();
    let mut functions: HashMap<(String, Option<String>), u64> = HashMap::new();
    let mut location_msgs = Vec::new();
    let mut function_msgs = Vec::new();
    let mut samples = Vec::new();
    for s in &snap.stacks {
        let mut ids = Vec::with_capacity(s.addresses.len());
        for (&addr, frames) in s.addresses.iter().zip(&s.frames) {
            let next = locations.len() as u64 + 1;
            let id = *locations.entry(addr).or_insert_with(|| {
                let mut loc = Msg::default();
                loc.uint(1, next);
                loc.uint(2, 1); // the one mapping
                loc.uint(3, addr);
                for f in frames {
                    let fid = function_id(f, &mut functions, &mut function_msgs, &mut strings);
                    let mut line = Msg::default();
                    line.uint(1, fid);
                    line.uint(2, u64::from(f.line.unwrap_or(0)));
                    loc.bytes(4, &line.0);
                }
                location_msgs.push(loc.0);
                next
            });
            ids.push(id);
        }
        let mut sample = Msg::default();
        sample.packed(1, ids.into_iter());
        sample.packed(
            2,
            [
                s.alloc_objects,
                s.alloc_bytes,
                s.inuse_objects,
                s.inuse_bytes,
            ]
            .into_iter(),
        );
        samples.push(sample.0);
    }
    for s in &samples {
        p.bytes(2, s);
    }
    // Field 3: one mapping covering everything, already symbolized.
    let mut mapping = Msg::default();
    mapping.uint(1, 1);
    mapping.uint(3, u64::MAX);
    mapping.uint(7, 1); // has_functions
    mapping.uint(8, 1); // has_filenames
    mapping.uint(9, 1); // has_line_numbers
    mapping.uint(10, 1); // has_inline_frames
    p.bytes(3, &mapping.0);
    for l in &location_msgs {
        p.bytes(4, l);
    }
    for f in &function_msgs {
        p.bytes(5, f);
    }
    let period_type = value_type(&mut strings, "space", "bytes");
    let default_type = strings.id("inuse_space");
    for s in &strings.list {
        p.bytes(6, s.as_bytes());
    }
    p.uint(
        9,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    p.bytes(11, &period_type);
    p.uint(12, interval as u64);
    p.uint(14, default_type);
    p.0
}

fn function_id(
    f: &Frame,
    functions: &mut HashMap<(String, Option<String>), u64>,
    msgs: &mut Vec<Vec<u8>>,
    strings: &mut Strings,
) -> u64 {
    let key = (f.function.clone(), f.file.clone());
    let next = functions.len() as u64 + 1;
    *functions.entry(key).or_insert_with(|| {
        let mut m = Msg::default();
        m.uint(1, next);
        m.uint(2, strings.id(&f.function));
        m.uint(3, strings.id(&f.function));
        m.uint(4, strings.id(f.file.as_deref().unwrap_or("")));
        msgs.push(m.0);
        next
    })
}

/// Write `snap` as a gzipped pprof profile.
pub fn write(snap: &Snapshot, interval: usize, out: impl Write) -> io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&encode(snap, interval))?;
    gz.finish()?.flush()
}
