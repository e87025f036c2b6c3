//! A document tree, as a program that reads or writes JSON (or any structured text)
//! holds one: maps and lists of numbers and strings, each container a `Vec` grown by
//! pushes, each key and string an allocation of its own. The tree is built, written out
//! as text into one growing `String`, parsed back into a second tree (keys and strings
//! grown byte by byte, as a parser does), and both are dropped, node by node in the
//! order they were built. One operation is one value built and parsed back.

use std::fmt::Write;

use crate::Rng;

/// Values in a round's tree (the rest of `ops` makes a last, smaller round).
const ROUND: u64 = 200_000;
/// Containers nest at most this deep.
const MAX_DEPTH: usize = 6;
const KEYS: [&str; 16] = [
    "id",
    "name",
    "type",
    "value",
    "items",
    "children",
    "label",
    "count",
    "enabled",
    "tags",
    "x",
    "y",
    "width",
    "height",
    "description",
    "metadata",
];

enum Value {
    Num(u32),
    Str(String),
    List(Vec<Value>),
    Map(Vec<(String, Value)>),
}

pub fn tree(ops: u64) -> u64 {
    let mut rng = Rng::new(41);
    let mut done = 0;
    while done < ops {
        let n = ROUND.min(ops - done);
        let mut left = n;
        let mut docs = Vec::new();
        while left > 0 {
            docs.push(build(&mut rng, 0, &mut left));
        }
        let doc = Value::List(docs);
        let mut text = String::new();
        write(&doc, &mut text);
        let mut parser = Parser {
            text: text.as_bytes(),
            at: 0,
        };
        let parsed = parser.value();
        assert_eq!(parser.at, text.len(), "the text parses back whole");
        assert_eq!(count(&parsed), n + 1, "the tree parses back as built");
        drop(doc);
        drop(parsed);
        done += n;
    }
    ops
}

/// A value, and below it (while `left` lasts) the values of a container.
fn build(rng: &mut Rng, depth: usize, left: &mut u64) -> Value {
    *left -= 1;
    let container = depth < MAX_DEPTH && rng.below(3) == 0;
    match (container, rng.below(2)) {
        (true, 0) => {
            let mut items = Vec::new();
            for _ in 0..rng.below(13) {
                if *left == 0 {
                    break;
                }
                items.push(build(rng, depth + 1, left));
            }
            Value::List(items)
        }
        (true, _) => {
            let mut entries = Vec::new();
            for _ in 0..1 + rng.below(8) {
                if *left == 0 {
                    break;
                }
                let key = KEYS[rng.below(KEYS.len())].to_string();
                entries.push((key, build(rng, depth + 1, left)));
            }
            Value::Map(entries)
        }
        (false, 0) => Value::Num(rng.next_u64() as u32),
        (false, _) => {
            let len = 1 + rng.below(40);
            Value::Str(
                (0..len)
                    .map(|_| (b'a' + rng.below(26) as u8) as char)
                    .collect(),
            )
        }
    }
}

fn write(v: &Value, out: &mut String) {
    match v {
        // Formatted in place, as a serializer does: no allocation of its own.
        Value::Num(n) => write!(out, "{n}").expect("a String takes any text"),
        Value::Str(s) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('"');
                out.push_str(key);
                out.push_str("\":");
                write(value, out);
            }
            out.push('}');
        }
    }
}

/// The text written by [`write()`], read back.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> u8 {
        self.text[self.at]
    }

    fn expect(&mut self, byte: u8) {
        assert_eq!(self.peek(), byte, "at byte {}", self.at);
        self.at += 1;
    }

    fn value(&mut self) -> Value {
        match self.peek() {
            b'"' => Value::Str(self.string()),
            b'[' => Value::List(self.sequence(b']', Parser::value)),
            b'{' => Value::Map(self.sequence(b'}', |p| {
                let key = p.string();
                p.expect(b':');
                (key, p.value())
            })),
            _ => {
                let mut n = 0u32;
                while self.at < self.text.len() && self.peek().is_ascii_digit() {
                    n = n
                        .wrapping_mul(10)
                        .wrapping_add(u32::from(self.peek() - b'0'));
                    self.at += 1;
                }
                Value::Num(n)
            }
        }
    }

    /// The comma-separated items after an opening bracket, up to `close`, pushed one by
    /// one into a growing `Vec`.
    fn sequence<T>(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> T) -> Vec<T> {
        self.at += 1;
        let mut items = Vec::new();
        while self.peek() != close {
            if !items.is_empty() {
                self.expect(b',');
            }
            items.push(item(self));
        }
        self.at += 1;
        items
    }

    /// A quoted string, grown byte by byte.
    fn string(&mut self) -> String {
        self.expect(b'"');
        let mut s = String::new();
        while self.peek() != b'"' {
            s.push(self.peek() as char);
            self.at += 1;
        }
        self.at += 1;
        s
    }
}

fn count(v: &Value) -> u64 {
    1 + match v {
        Value::List(items) => items.iter().map(count).sum(),
        Value::Map(entries) => entries.iter().map(|(_, v)| count(v)).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_its_operations() {
        assert_eq!(super::tree(20_000), 20_000);
    }
}
