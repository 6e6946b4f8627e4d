//! `pi-fake-llm --port N --script FILE [--log FILE] [--port-file FILE]`: run the scripted
//! fake LLM server until killed (for end-to-end scripts).

use std::path::PathBuf;
use std::process::ExitCode;

use pi_fake_llm::{FakeLlm, Script};

fn usage() -> ExitCode {
    eprintln!("usage: pi-fake-llm [--port N] [--script FILE] [--log FILE] [--port-file FILE]");
    ExitCode::from(2)
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut port: u16 = 0;
    let mut script = Script::default();
    let mut log: Option<PathBuf> = None;
    let mut port_file: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let Some(v) = args.next() else { return usage() };
        match a.as_str() {
            "--port" => match v.parse() {
                Ok(p) => port = p,
                Err(_) => return usage(),
            },
            "--script" => {
                let parsed = std::fs::read_to_string(&v)
                    .map_err(|e| e.to_string())
                    .and_then(|t| serde_json::from_str::<Script>(&t).map_err(|e| e.to_string()));
                match parsed {
                    Ok(s) => script = s,
                    Err(e) => {
                        eprintln!("pi-fake-llm: cannot load script {v}: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            "--log" => log = Some(PathBuf::from(v)),
            "--port-file" => port_file = Some(PathBuf::from(v)),
            _ => return usage(),
        }
    }
    let srv = match FakeLlm::start_with(script, port, log).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pi-fake-llm: cannot listen on 127.0.0.1:{port}: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(pf) = port_file {
        if let Err(e) = std::fs::write(&pf, srv.port().to_string()) {
            eprintln!("pi-fake-llm: cannot write {}: {e}", pf.display());
            return ExitCode::from(1);
        }
    }
    eprintln!("[pi-fake-llm] listening on 127.0.0.1:{}", srv.port());
    // Serve until killed.
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}
