//! A reader for the pprof files [`crate::dump`] writes (and any gzipped pprof profile): the
//! fields the tests and `cargo xtask profile` need, decoded by hand from the protobuf
//! wire format. Independent of the writer: it follows `profile.proto`, not our encoder.

use std::collections::HashMap;
use std::io::{self, Read};

/// A decoded profile: the sample types and, per sample, its stack of function names
/// (innermost first, inlined frames included) and its values.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// `(type, unit)` of each value, e.g. `("inuse_space", "bytes")`.
    pub sample_types: Vec<(String, String)>,
    pub samples: Vec<Sample>,
    pub period: i64,
}

#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// Function names, innermost first.
    pub functions: Vec<String>,
    pub values: Vec<i64>,
}

impl Profile {
    /// The index of the value named `kind` (`alloc_space`, `inuse_space`, ...).
    pub fn value_index(&self, kind: &str) -> Option<usize> {
        self.sample_types.iter().position(|(t, _)| t == kind)
    }

    /// Per function, the sum of `kind` over the samples whose stack holds it (each sample
    /// once: pprof's "cum" column).
    pub fn cumulative(&self, kind: &str) -> HashMap<String, i64> {
        let Some(i) = self.value_index(kind) else {
            return HashMap::new();
        };
        let mut out: HashMap<String, i64> = HashMap::new();
        for s in &self.samples {
            let mut seen: Vec<&str> = Vec::new();
            for f in &s.functions {
                if !seen.contains(&f.as_str()) {
                    seen.push(f);
                    *out.entry(f.clone()).or_default() += s.values[i];
                }
            }
        }
        out
    }

    /// Per innermost function, the sum of `kind` (pprof's "flat" column), largest first.
    pub fn flat(&self, kind: &str) -> Vec<(String, i64)> {
        let Some(i) = self.value_index(kind) else {
            return Vec::new();
        };
        let mut m: HashMap<String, i64> = HashMap::new();
        for s in &self.samples {
            let leaf = s.functions.first().cloned().unwrap_or_else(|| "?".into());
            *m.entry(leaf).or_default() += s.values[i];
        }
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// The sum of `kind` over all samples.
    pub fn total(&self, kind: &str) -> i64 {
        self.value_index(kind)
            .map_or(0, |i| self.samples.iter().map(|s| s.values[i]).sum())
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("pprof: {what}"))
}

struct Reader<'a> {
    b: &'a [u8],
}

/// One field: its number and either a varint or a byte slice.
enum Value<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> io::Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .b
                .split_first()
                .ok_or_else(|| bad("truncated varint"))?;
            self.b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    fn field(&mut self) -> io::Result<Option<(u64, Value<'a>)>> {
        if self.b.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let v = match key & 7 {
            0 => Value::Int(self.varint()?),
            1 => Value::Bytes(self.take(8)?),
            2 => {
                let n = self.varint()? as usize;
                Value::Bytes(self.take(n)?)
            }
            5 => Value::Bytes(self.take(4)?),
            _ => return Err(bad("unknown wire type")),
        };
        Ok(Some((key >> 3, v)))
    }

    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(bad("truncated field"));
        }
        let (a, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(a)
    }
}

/// All fields of a message as `(number, value)`.
fn fields(b: &[u8]) -> io::Result<Vec<(u64, Value<'_>)>> {
    let mut r = Reader { b };
    let mut out = Vec::new();
    while let Some(f) = r.field()? {
        out.push(f);
    }
    Ok(out)
}

/// Integers of a repeated field, packed or not.
fn ints(v: &Value<'_>, out: &mut Vec<u64>) -> io::Result<()> {
    match v {
        Value::Int(i) => out.push(*i),
        Value::Bytes(b) => {
            let mut r = Reader { b };
            while !r.b.is_empty() {
                out.push(r.varint()?);
            }
        }
    }
    Ok(())
}

fn int(v: &Value<'_>) -> u64 {
    match v {
        Value::Int(i) => *i,
        Value::Bytes(_) => 0,
    }
}

/// Decode a gzipped (or plain) pprof profile.
pub fn decode(data: &[u8]) -> io::Result<Profile> {
    let mut raw = Vec::new();
    let data = if data.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(data).read_to_end(&mut raw)?;
        &raw[..]
    } else {
        data
    };
    let mut strings = Vec::new();
    let mut types_raw = Vec::new();
    let mut samples_raw = Vec::new();
    let mut locations: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut functions: HashMap<u64, u64> = HashMap::new();
    let mut period = 0;
    for (n, v) in fields(data)? {
        match (n, v) {
            (1, Value::Bytes(b)) => types_raw.push(b),
            (2, Value::Bytes(b)) => samples_raw.push(b),
            (4, Value::Bytes(b)) => {
                let (mut id, mut fids) = (0, Vec::new());
                for (n, v) in fields(b)? {
                    match (n, &v) {
                        (1, _) => id = int(&v),
                        (4, Value::Bytes(line)) => {
                            for (n, v) in fields(line)? {
                                if n == 1 {
                                    fids.push(int(&v));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                locations.insert(id, fids);
            }
            (5, Value::Bytes(b)) => {
                let (mut id, mut name) = (0, 0);
                for (n, v) in fields(b)? {
                    match n {
                        1 => id = int(&v),
                        2 => name = int(&v),
                        _ => {}
                    }
                }
                functions.insert(id, name);
            }
            (6, Value::Bytes(b)) => strings.push(String::from_utf8_lossy(b).into_owned()),
            (12, v) => period = int(&v) as i64,
            _ => {}
        }
    }
    let string = |i: u64| strings.get(i as usize).cloned().unwrap_or_default();
    let mut p = Profile {
        period,
        ..Profile::default()
    };
    for b in types_raw {
        let (mut t, mut u) = (0, 0);
        for (n, v) in fields(b)? {
            match n {
                1 => t = int(&v),
                2 => u = int(&v),
                _ => {}
            }
        }
        p.sample_types.push((string(t), string(u)));
    }
    for b in samples_raw {
        let (mut locs, mut vals) = (Vec::new(), Vec::new());
        for (n, v) in fields(b)? {
            match n {
                1 => ints(&v, &mut locs)?,
                2 => ints(&v, &mut vals)?,
                _ => {}
            }
        }
        let functions = locs
            .iter()
            .flat_map(|l| locations.get(l).cloned().unwrap_or_default())
            .map(|f| string(functions.get(&f).copied().unwrap_or(0)))
            .collect();
        p.samples.push(Sample {
            functions,
            values: vals.into_iter().map(|v| v as i64).collect(),
        });
    }
    Ok(p)
}
