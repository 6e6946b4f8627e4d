//! `pi auth login <provider> --api-key` (and `pi auth login <provider>` for providers without
//! account sign-in): asks the questions of the provider's API-key login as Pi 1.6.0 asks them
//! (the catalog's `apiKeyLogin`: `Enter Groq API key`, Cloudflare's account and gateway ids;
//! Vertex's and Bedrock's choice of method, [`super::api_key_flow`]), reads secrets without echo when stdin is a terminal, and stores
//! `{"type": "api_key", "key", "env"}` in auth.json (mode 0600, under the auth lock).

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::Path;

use pi_agent::llm::catalog::BuiltinProvider;

use super::api_key_flow::{flow, Answers, Choice, Step};

/// Pi's answer to Ctrl+C (or the end of input) in a prompt.
pub const CANCELLED: &str = "Login cancelled.";

/// Asks `provider`'s questions and stores the credential; the error is the line to print.
pub fn login(provider: &BuiltinProvider, agent_dir: &Path) -> Result<(), String> {
    let Some(steps) = flow(provider) else {
        return Err(format!("{} has no API key login.", provider.name));
    };
    let mut answers = Answers::default();
    run(&steps, &mut answers)?;
    pi_agent::llm::oauth::save_credential(agent_dir, &provider.id, answers.credential())
}

/// Runs `steps` in the terminal as Pi's `pi auth login` does: questions as `message: `,
/// information and links as lines, a choice as a numbered list answered by its number.
fn run(steps: &[Step], answers: &mut Answers) -> Result<(), String> {
    for step in steps {
        match step {
            Step::Ask {
                message,
                secret,
                into,
            } => {
                let answer = ask(message, *secret)?;
                answers.record(into, answer);
            }
            Step::Info { message, links } => {
                println!("{message}");
                for (label, url) in links {
                    println!("  {label}: {url}");
                }
            }
            Step::Choose { message, options } => {
                let chosen = choose(message, options)?;
                run(&chosen.steps, answers)?;
            }
        }
    }
    Ok(())
}

/// The list, then `Select 1-N: ` until a listed number is given.
fn choose<'a>(message: &str, options: &'a [Choice]) -> Result<&'a Choice, String> {
    println!("{message}");
    for (i, option) in options.iter().enumerate() {
        println!("  {}. {}", i + 1, option.label);
    }
    loop {
        let answer = ask(&format!("Select 1-{}", options.len()), false)?;
        let picked = answer
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|_| answer.trim().bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| options.get(i));
        match picked {
            Some(option) => return Ok(option),
            None => println!("Enter a number from 1 to {}.", options.len()),
        }
    }
}

/// One question: `message: ` on stdout, the answer from stdin.
fn ask(message: &str, secret: bool) -> Result<String, String> {
    let mut out = std::io::stdout();
    let _ = write!(out, "{message}: ");
    let _ = out.flush();
    if secret && std::io::stdin().is_terminal() {
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
