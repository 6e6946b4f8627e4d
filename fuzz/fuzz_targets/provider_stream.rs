//! Each provider's stream parsing (Anthropic Messages, OpenAI Chat Completions,
//! OpenAI Responses, Google Generative AI) on an arbitrary response body, served
//! over real loopback HTTP by a tiny in-process server, so the bytes go through
//! reqwest, the SSE reader and the provider's event handling as in production.
//!
//! Input: byte 0 picks the API (low 2 bits) and the status (bit 4: an error
//! status with the body as the error document); the rest is the response body.
//! A panic in the provider task aborts the process (libfuzzer-sys's panic hook),
//! so it is found even though the stream itself would turn it into an error event.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_agent::llm::transform::user_text;
use pi_agent::llm::{api, builtin_models, stream, Context, Model, StreamOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

static RESPONSE: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Fixture {
    port: u16,
    runtime: tokio::runtime::Runtime,
    models: Vec<Model>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = serve(&mut conn);
            }
        });
        let catalog = builtin_models();
        let models = [
            api::ANTHROPIC_MESSAGES,
            api::OPENAI_COMPLETIONS,
            api::OPENAI_RESPONSES,
            api::GOOGLE_GENERATIVE_AI,
        ]
        .iter()
        .map(|a| {
            let mut m = catalog
                .iter()
                .find(|m| m.api == *a)
                .expect("a built-in model per API")
                .clone();
            m.base_url = format!("http://127.0.0.1:{port}/v1");
            m
        })
        .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        Fixture {
            port,
            runtime,
            models,
        }
    })
}

/// Reads one request (headers + Content-Length body) and answers with RESPONSE.
fn serve(conn: &mut std::net::TcpStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let response = RESPONSE.lock().map(|r| r.clone()).unwrap_or_default();
    conn.write_all(&response)?;
    conn.flush()
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let fx = fixture();
    let model = &fx.models[usize::from(pick & 3)];
    let (status, kind) = if pick & 0x10 != 0 {
        ("429 Too Many Requests", "application/json")
    } else {
        ("200 OK", "text/event-stream")
    };
    let mut response =
        format!("HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nConnection: close\r\n\r\n")
            .into_bytes();
    response.extend_from_slice(body);
    *RESPONSE.lock().expect("not poisoned") = response;

    let context = Context {
        system_prompt: Some("fuzz".into()),
        messages: vec![user_text("hi", 1)],
        tools: vec![],
    };
    let options = StreamOptions {
        api_key: Some("fuzz-key".into()),
        timeout: Some(Duration::from_secs(5)),
        ..StreamOptions::default()
    };
    let _ = fx.port;
    let message = fx
        .runtime
        .block_on(async { stream(model, &context, options).result().await });
    let _ = serde_json::to_string(&message);
});
