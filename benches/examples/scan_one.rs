//! One step of session opening over a file, for instruction counting (callgrind).
fn main() {
    let mode = std::env::args().nth(1).expect("mode: head|ignored");
    let path = std::env::args().nth(2).expect("file");
    let bytes = std::fs::read(&path).unwrap();
    let mut ok = 0usize;
    for line in pi_formats::jsonl::lines(&bytes) {
        let good = match mode.as_str() {
            "head" => pi_formats::head::EntryHead::parse(line.bytes).is_ok(),
            _ => serde_json::from_slice::<serde::de::IgnoredAny>(line.bytes).is_ok(),
        };
        ok += good as usize;
    }
    println!("{ok}");
}
