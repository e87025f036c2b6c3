//! A real Rust workload with hakmem as the global allocator: collections, strings,
//! threads, and a `BTreeMap` of a million entries.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::mpsc;
use std::thread;

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

#[test]
fn btreemap_of_a_million_entries() {
    let mut m = BTreeMap::new();
    for i in 0..1_000_000u64 {
        m.insert(i.wrapping_mul(0x9E37_79B9_7F4A_7C15), i);
    }
    assert_eq!(m.len(), 1_000_000);
    let sum: u64 = m.values().sum();
    assert_eq!(sum, 999_999 * 1_000_000 / 2);
    for i in (0..1_000_000u64).step_by(2) {
        assert_eq!(m.remove(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15)), Some(i));
    }
    assert_eq!(m.len(), 500_000);
}

#[test]
fn strings_and_hashmaps() {
    let mut h: HashMap<String, Vec<String>> = HashMap::new();
    for i in 0..200_000 {
        let k = format!("key-{}", i % 5000);
        h.entry(k)
            .or_default()
            .push(format!("value number {i} {}", "x".repeat(i % 300)));
    }
    assert_eq!(h.len(), 5000);
    for (k, v) in &h {
        assert_eq!(v.len(), 40);
        let n: usize = k[4..].parse().unwrap();
        assert!(v.iter().all(|s| s.starts_with("value number ")));
        assert!(v[0].starts_with(&format!("value number {n} ")));
    }
    let mut s = String::new();
    for i in 0..100_000 {
        s.push_str(&i.to_string());
    }
    assert!(s.len() > 400_000);
    s.truncate(10);
    s.shrink_to_fit();
    assert_eq!(s, "0123456789");
}

#[test]
fn threads_pass_boxes_across() {
    let (tx, rx) = mpsc::channel::<Box<[u8]>>();
    let producers: Vec<_> = (0..4)
        .map(|t| {
            let tx = tx.clone();
            thread::spawn(move || {
                for i in 0..50_000usize {
                    let n = 1 + (i * 7 + t) % 2000;
                    tx.send(vec![(i % 251) as u8; n].into_boxed_slice())
                        .unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut total = 0usize;
    for b in rx {
        assert!(b.iter().all(|&x| x == b[0]));
        total += 1;
    }
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(total, 200_000);
}

#[test]
fn vec_growth_and_deques() {
    let mut v: Vec<u64> = Vec::new();
    for i in 0..5_000_000u64 {
        v.push(i);
    }
    assert_eq!(v.iter().sum::<u64>(), 5_000_000 * 4_999_999 / 2);
    let mut d: VecDeque<Vec<u8>> = VecDeque::new();
    for i in 0..100_000usize {
        d.push_back(vec![i as u8; i % 100_000 % 4096]);
        if d.len() > 1000 {
            let x = d.pop_front().unwrap();
            assert!(x.iter().all(|&b| b == x.first().copied().unwrap_or(0)));
        }
    }
}

#[test]
fn stats_move() {
    let before = hakmem::stats();
    let big: Vec<Vec<u8>> = (0..100).map(|i| vec![1u8; 100_000 + i]).collect();
    let during = hakmem::stats();
    assert!(during.allocated >= before.allocated);
    assert!(during.mapped > 0);
    assert!(during.mmap_calls >= 1);
    drop(big);
}
