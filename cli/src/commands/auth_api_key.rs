//! `pi auth login <provider> --api-key` (and `pi auth login <provider>` for providers without
//! account sign-in): asks the questions of the provider's API-key login as Pi 1.6.0 asks them
//! (the catalog's `apiKeyLogin`: `Enter Groq API key`, Cloudflare's account and gateway ids),
//! reads secrets without echo when stdin is a terminal, and stores
//! `{"type": "api_key", "key", "env"}` in auth.json (mode 0600, under the auth lock).

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::Path;

use pi_agent::llm::catalog::{ApiKeyPrompt, BuiltinProvider};
use serde_json::{json, Map, Value};

/// Pi's answer to Ctrl+C (or the end of input) in a prompt.
pub const CANCELLED: &str = "Login cancelled.";

/// Asks `provider`'s questions and stores the credential; the error is the line to print.
pub fn login(provider: &BuiltinProvider, agent_dir: &Path) -> Result<(), String> {
    let Some(script) = provider.api_key_login.as_ref() else {
        return Err(format!("{} has no API key login.", provider.name));
    };
    if script.interactive {
        // Vertex and Bedrock start with a choice of method (key, profile, ambient
        // credentials); that dialog is not built.
        return Err(format!(
            "{}'s API key login asks for an authentication method, which this build does not \
             offer yet; set {} in the environment instead.",
            provider.name,
            describe_env(provider)
        ));
    }
    let mut key = None;
    let mut env = Map::new();
    for prompt in &script.prompts {
        let answer = ask(prompt)?;
        match prompt.into.strip_prefix("env.") {
            Some(name) => {
                env.insert(name.to_string(), Value::String(answer));
            }
            None if prompt.into == "key" => key = Some(answer),
            None => {}
        }
    }
    let mut credential = json!({"type": "api_key"});
    if let Some(key) = key {
        credential["key"] = Value::String(key);
    }
    if !env.is_empty() {
        credential["env"] = Value::Object(env);
    }
    pi_agent::llm::oauth::save_credential(agent_dir, &provider.id, credential)
}

fn describe_env(provider: &BuiltinProvider) -> String {
    if provider.env_vars.is_empty() {
        "its credentials".to_string()
    } else {
        provider.env_vars.join(" or ")
    }
}

/// One question: `message: ` on stdout, the answer from stdin.
fn ask(prompt: &ApiKeyPrompt) -> Result<String, String> {
    let mut out = std::io::stdout();
    let _ = write!(out, "{}: ", prompt.message);
    let _ = out.flush();
    if prompt.secret && std::io::stdin().is_terminal() {
        return read_secret_from_terminal();
    }
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => {
            println!();
            Err(CANCELLED.to_string())
        }
        Ok(_) => Ok(line.trim_end_matches(['\n', '\r']).to_string()),
    }
}

/// Reads a line in raw mode, echoing nothing: Enter ends it, Backspace deletes a character,
/// Ctrl+C cancels, escape sequences (arrow keys) are ignored, as Pi's secret prompt does.
fn read_secret_from_terminal() -> Result<String, String> {
    crossterm::terminal::enable_raw_mode().map_err(|e| format!("cannot read the key: {e}"))?;
    let result = read_secret_chunks(&mut std::io::stdin().lock());
    let _ = crossterm::terminal::disable_raw_mode();
    // Raw mode kept the cursor after the prompt.
    println!();
    result
}

fn read_secret_chunks(input: &mut impl Read) -> Result<String, String> {
    let mut value = String::new();
    let mut pending = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        let n = match input.read(&mut chunk) {
            Ok(0) | Err(_) => return Err(CANCELLED.to_string()),
            Ok(n) => n,
        };
        // A chunk that starts with ESC is a key such as an arrow: dropped whole.
        if chunk[0] == 0x1b {
            continue;
        }
        pending.extend_from_slice(&chunk[..n]);
        let text = match std::str::from_utf8(&pending) {
            Ok(text) => text.to_string(),
            Err(e) if e.error_len().is_none() => {
                // A character split across reads: wait for the rest.
                let complete = e.valid_up_to();
                let text = String::from_utf8_lossy(&pending[..complete]).into_owned();
                pending.drain(..complete);
                if let Some(done) = apply_secret_chars(&mut value, &text)? {
                    return Ok(done);
                }
                continue;
            }
            Err(_) => String::from_utf8_lossy(&pending).into_owned(),
        };
        pending.clear();
        if let Some(done) = apply_secret_chars(&mut value, &text)? {
            return Ok(done);
        }
    }
}

/// Applies typed characters to `value`; `Some` once Enter is pressed.
fn apply_secret_chars(value: &mut String, text: &str) -> Result<Option<String>, String> {
    for c in text.chars() {
        match c {
            '\r' | '\n' => return Ok(Some(std::mem::take(value))),
            '\u{3}' => return Err(CANCELLED.to_string()),
            '\u{7f}' | '\u{8}' => {
                value.pop();
            }
            c if c >= ' ' => value.push(c),
            _ => {}
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(bytes: &[u8]) -> Result<String, String> {
        read_secret_chunks(&mut &bytes[..])
    }

    #[test]
    fn enter_ends_the_secret_and_backspace_edits_it() {
        assert_eq!(typed(b"abX\x7fc\r").as_deref(), Ok("abc"));
        assert_eq!(typed("kéy\n".as_bytes()).as_deref(), Ok("kéy"));
    }

    #[test]
    fn ctrl_c_and_end_of_input_cancel() {
        assert_eq!(typed(b"ab\x03"), Err(CANCELLED.to_string()));
        assert_eq!(typed(b"ab"), Err(CANCELLED.to_string()));
    }
}
