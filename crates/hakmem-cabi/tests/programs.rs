//! Real programs under `LD_PRELOAD=libhakmem.so`: each runs with and without hakmem and
//! must print the same bytes (stdout and stderr) and exit the same way. The run with
//! hakmem also sets `HAKMEM_STATS=1`, whose summary proves hakmem served the program
//! (it is taken out of stderr before comparing). A program that is not installed is
//! skipped with a note, or fails its test under `CI=true` (tests/common/missing.rs);
//! `.ci/run` installs them.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Output};

/// Run `make(dir)` in a fresh folder with and without hakmem and compare.
fn same_with_and_without(name: &str, make: impl Fn(&Path, bool) -> Command) {
    let without = output(&mut make(&scratch(&format!("{name}-without")), false));
    let mut cmd = make(&scratch(&format!("{name}-with")), true);
    let with = output(cmd.env("HAKMEM_STATS", "1"));
    assert_success(&without, &format!("{name} without hakmem"));
    assert_success(&with, &format!("{name} with hakmem"));
    let (stderr, summaries) = split_summaries(&with);
    assert!(
        summaries > 0,
        "{name}: no hakmem summary, was it preloaded?\n{}",
        text(&with.stderr)
    );
    assert!(
        with.stdout == without.stdout,
        "{name}: stdout differs ({} bytes with hakmem, {} without)",
        with.stdout.len(),
        without.stdout.len()
    );
    assert_eq!(stderr, text(&without.stderr), "{name}: stderr differs");
}

/// stderr without hakmem's summary lines, and how many summaries there were.
fn split_summaries(o: &Output) -> (String, usize) {
    let all = text(&o.stderr);
    let summaries = all.matches("hakmem: statistics").count();
    let rest: String = all
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("hakmem:"))
        .collect();
    (rest, summaries)
}

fn write(dir: &Path, name: &str, contents: &str) {
    std::fs::write(dir.join(name), contents).unwrap();
}

/// Run `interpreter file` on a script written to the scratch folder.
fn script(interpreter: &str, file: &str, contents: &str) {
    if skip_without(interpreter) {
        return;
    }
    same_with_and_without(interpreter, |dir, preload| {
        write(dir, file, contents);
        let mut c = command(interpreter, preload);
        c.arg(dir.join(file));
        c
    });
}

const PYTHON: &str = r#"
import threading, collections, json

d = {}
for i in range(200000):
    d["key%d" % i] = str(i) * (i % 7)
words = collections.Counter(w for v in d.values() for w in v.split("1") if w)
print(len(d), sum(len(v) for v in d.values()), words.most_common(3))

results = [None] * 8
def work(n):
    local = {}
    for i in range(30000):
        local[(n, i)] = [i] * (i % 5) + [str(i)]
    s = "".join(str(k[1]) for k in local if k[1] % 97 == 0)
    results[n] = (len(local), len(s), s[:20])
threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(results)
print(json.dumps({"nested": [{"a": i, "b": [str(i)] * 3} for i in range(5)]}, sort_keys=True))
"#;

#[test]
fn python() {
    script("python3", "script.py", PYTHON);
}

const PERL: &str = r#"
my %h;
for my $i (0 .. 200000) { $h{"k$i"} = join(",", ($i) x ($i % 5)); }
my @keys = sort { $h{$a} cmp $h{$b} or $a cmp $b } grep { /7$/ } keys %h;
print scalar(@keys), " $keys[0] $keys[-1]\n";
my $text = join(" ", map { "word$_" } 1 .. 50000);
my %count; $count{$_}++ for ($text =~ /(\d)\b/g);
print join(",", map { "$_=$count{$_}" } sort keys %count), "\n";
"#;

#[test]
fn perl() {
    script("perl", "script.pl", PERL);
}

const SQL: &str = "
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000)
  INSERT INTO t SELECT x, 'name' || x, x * 0.5 FROM c;
COMMIT;
CREATE INDEX t_name ON t(name);
SELECT count(*), sum(v), min(name), max(name) FROM t;
SELECT id % 10 AS k, count(*), sum(length(name)) FROM t GROUP BY k ORDER BY k;
SELECT name FROM t WHERE name LIKE 'name9999%' ORDER BY name;
SELECT group_concat(id, ',') FROM (SELECT id FROM t ORDER BY v DESC LIMIT 20);
";

#[test]
fn sqlite3() {
    if skip_without("sqlite3") {
        return;
    }
    same_with_and_without("sqlite3", |dir, preload| {
        write(dir, "script.sql", SQL);
        let mut c = command("sqlite3", preload);
        c.arg(dir.join("db.sqlite"))
            .stdin(std::fs::File::open(dir.join("script.sql")).unwrap());
        c
    });
}

/// git init / add / commit / log, with fixed names and dates so that hashes match.
#[test]
fn git() {
    if skip_without("git") {
        return;
    }
    let script = r#"
set -e
git init -q -b main repo
cd repo
for i in $(seq 1 200); do echo "line $i of file" > "file$i.txt"; done
git add .
git commit -q -m "first commit"
for i in $(seq 1 50); do echo "more $i" >> "file$i.txt"; done
git rm -q file200.txt
git commit -q -am "second commit"
git log --stat --format='%H %an <%ae> %ad%n%s'
git show --format=%H HEAD~1 -- file1.txt
git diff HEAD~1 --shortstat
"#;
    same_with_and_without("git", |dir, preload| {
        let mut c = command("bash", preload);
        c.args(["-c", script])
            .current_dir(dir)
            .env("HOME", dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "A U Thor")
            .env("GIT_AUTHOR_EMAIL", "author@example.com")
            .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
            .env("GIT_COMMITTER_NAME", "C O Mitter")
            .env("GIT_COMMITTER_EMAIL", "committer@example.com")
            .env("GIT_COMMITTER_DATE", "2020-01-02T00:00:00Z")
            .env("TZ", "UTC");
        c
    });
}

const C_PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
struct node { int v; struct node *next; };
static int cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }
int main(void) {
    int a[1000];
    for (int i = 0; i < 1000; i++) a[i] = (i * 7919) % 1000;
    qsort(a, 1000, sizeof a[0], cmp);
    struct node *head = NULL;
    for (int i = 0; i < 100; i++) { struct node *n = malloc(sizeof *n); n->v = a[i * 10]; n->next = head; head = n; }
    long sum = 0;
    while (head) { struct node *n = head; sum += n->v; head = n->next; free(n); }
    printf("%ld %d %d\n", sum, a[0], a[999]);
    return 0;
}
"#;

/// gcc compiles (the compiler proper, the assembler and the linker all run under hakmem)
/// to the same assembly, and the program prints the same.
#[test]
fn gcc() {
    if skip_without("gcc") {
        return;
    }
    same_with_and_without("gcc", |dir, preload| {
        write(dir, "prog.c", C_PROGRAM);
        let mut c = command("bash", preload);
        c.args([
            "-c",
            "gcc -O2 -S -o - prog.c && gcc -O2 -Wall -o prog prog.c && ./prog",
        ])
        .current_dir(dir);
        c
    });
}

/// jq parses a JSON document of 50,000 objects, sorts, groups and rebuilds them, and
/// writes the result: reference-counted values, strings and arrays grown by `realloc`.
#[test]
fn jq() {
    if skip_without("jq") {
        return;
    }
    let mut input = String::from("[");
    for i in 0..50_000u64 {
        if i > 0 {
            input.push(',');
        }
        let tags: Vec<String> = (0..i % 9)
            .map(|t| format!("\"t{}\"", (i * 7 + t) % 113))
            .collect();
        input.push_str(&format!(
            "{{\"id\":{i},\"name\":\"item {}\",\"score\":{}.{},\"tags\":[{}]}}",
            i * 2654435761 % 100_003,
            i % 1000,
            i % 7,
            tags.join(",")
        ));
    }
    input.push(']');
    same_with_and_without("jq", |dir, preload| {
        write(dir, "input.json", &input);
        let mut c = command("jq", preload);
        c.args([
            "-c",
            "sort_by(.name) | group_by(.tags | length) | map({n: length, \
             top: (max_by(.score) | .name), tags: (map(.tags) | add | unique | join(\" \"))})",
            "input.json",
        ])
        .current_dir(dir);
        c
    });
}

/// sort of a million lines, by text and by number.
#[test]
fn sort() {
    if skip_without("sort") {
        return;
    }
    let mut input = String::with_capacity(16 << 20);
    let mut x: u64 = 1;
    for i in 0..1_000_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        input.push_str(&format!(
            "{:x} {} line{}\n",
            x >> 40,
            (x >> 20) % 100_000,
            i
        ));
    }
    same_with_and_without("sort", |dir, preload| {
        write(dir, "input.txt", &input);
        let mut c = command("bash", preload);
        c.args([
            "-c",
            "sort input.txt | md5sum && sort -n -k2,2 -s input.txt | md5sum && sort -u -k2,2n input.txt | tail -3",
        ])
        .current_dir(dir)
        .env("LC_ALL", "C");
        c
    });
}

#[test]
fn bash() {
    if skip_without("bash") {
        return;
    }
    let script = r#"
declare -A m
s=""
for ((i = 0; i < 20000; i++)); do m[k$i]=$((i * i)); s+="$i,"; done
echo "${#m[@]} ${#s} ${m[k19999]}"
arr=($(seq 1 5000))
echo "${#arr[@]} ${arr[4999]}"
f() { local x="$1"; echo "${x//0/zero}"; }
for i in 100 2000 30000; do f "$i"; done
"#;
    same_with_and_without("bash", |_, preload| {
        let mut c = command("bash", preload);
        c.args(["-c", script]);
        c
    });
}
