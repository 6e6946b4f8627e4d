//! Where does open time go? Single-thread throughput of the line-level steps.
use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).expect("file");
    let t = Instant::now();
    let bytes = std::fs::read(&path).unwrap();
    let read = t.elapsed();
    let mb = bytes.len() as f64 / 1e6;
    let t = Instant::now();
    let n = memchr::memchr_iter(b'\n', &bytes).count();
    let scan = t.elapsed();
    let t = Instant::now();
    let ok = std::str::from_utf8(&bytes).is_ok();
    let utf8 = t.elapsed();
    let t = Instant::now();
    let mut heads = 0;
    for line in pi_formats::jsonl::lines(&bytes) {
        if pi_formats::head::EntryHead::parse(line.bytes).is_ok() {
            heads += 1;
        }
    }
    let head = t.elapsed();
    let t = Instant::now();
    let mut ign = 0;
    for line in pi_formats::jsonl::lines(&bytes) {
        if serde_json::from_slice::<serde::de::IgnoredAny>(line.bytes).is_ok() {
            ign += 1;
        }
    }
    let ignored = t.elapsed();
    let t = Instant::now();
    let mut vals = 0;
    for line in pi_formats::jsonl::lines(&bytes) {
        if serde_json::from_slice::<serde_json::Value>(line.bytes).is_ok() {
            vals += 1;
        }
    }
    let value = t.elapsed();
    println!("value parse {:.1} ms ({vals})", value.as_secs_f64() * 1e3);
    let r = |d: std::time::Duration| {
        format!(
            "{:7.1} ms {:7.0} MB/s",
            d.as_secs_f64() * 1e3,
            mb / d.as_secs_f64()
        )
    };
    println!("read        {}\nnewlines    {} ({n})\nutf8        {} ({ok})\nhead parse  {} ({heads})\nignoredany  {} ({ign})", r(read), r(scan), r(utf8), r(head), r(ignored));
}

#[allow(dead_code)]
fn unused() {}
