//! One frame of the interactive UI for a short and a 10,000-message transcript.
//!
//! The transcript caches each item's wrapped height per width, so after the first layout a
//! frame only renders the items on screen: both cases should cost about the same. The
//! streaming case appends to the last message before every frame, which invalidates one
//! height, as a token delta does.

use criterion::{criterion_group, criterion_main, Criterion};
use pi_cli::tui::app::App;
use pi_cli::tui::render;
use pi_cli::tui::transcript::Item;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use std::hint::black_box;

fn app_with(messages: usize) -> App {
    let mut app = App::new("/work/project".into());
    for i in 0..messages {
        let item = match i % 4 {
            0 => Item::User(format!("Please look at module {i} and fix the failing test.")),
            1 => Item::Assistant {
                text: format!("## Plan {i}\n\nI will **read** the file, then run `cargo test`:\n\n```rust\nfn main() {{ println!(\"{i}\"); }}\n```\n"),
                thinking: "Reading first.".into(),
                error: None,
            },
            2 => Item::Tool {
                id: format!("t{i}"),
                name: "bash".into(),
                args: r#"{"command":"cargo test"}"#.into(),
                output: (0..30).map(|l| format!("test case_{l} ... ok")).collect::<Vec<_>>().join("\n"),
                is_error: false,
                done: true,
                diff: None,
                duration_ms: Some(1_500),
            },
            _ => Item::Assistant { text: "All tests pass now.".into(), thinking: String::new(), error: None },
        };
        app.transcript.push(item);
    }
    app
}

fn frame(app: &App, area: Rect, buf: &mut Buffer) {
    buf.reset();
    render::draw_into(app, area, buf);
}

fn bench(c: &mut Criterion) {
    let area = Rect::new(0, 0, 120, 40);
    let mut group = c.benchmark_group("tui_render");
    for (name, n) in [("short_20", 20), ("long_10000", 10_000)] {
        let app = app_with(n);
        let mut buf = Buffer::empty(area);
        frame(&app, area, &mut buf); // first layout: every height once
        group.bench_function(format!("frame_{name}"), |b| {
            b.iter(|| frame(black_box(&app), area, &mut buf))
        });

        let mut app = app_with(n);
        app.transcript.push(Item::Assistant {
            text: String::new(),
            thinking: String::new(),
            error: None,
        });
        frame(&app, area, &mut buf);
        group.bench_function(format!("streaming_frame_{name}"), |b| {
            b.iter(|| {
                if let Some(Item::Assistant { text, .. }) = app.transcript.last_mut() {
                    // Keep the message bounded so iterations stay comparable.
                    if text.len() > 4000 {
                        text.clear();
                    }
                    text.push_str("token ");
                }
                frame(black_box(&app), area, &mut buf)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
