//! `-p` (text) and `--mode json`: send the prompts one after another, then print the final
//! answer (text) or stream every event (json). Exit code 1 when the last answer failed.

use std::io::Write;

use anyhow::bail;
use pi_formats::message::AgentMessage;
use pi_formats::message::{ContentBlock, StopReason};

use super::{
    build_host, expand_messages, json, read_piped_stdin, stderr_warnings_sink, stdout_sink, Env,
    Mode,
};
use crate::RunArgs;

/// Runs print or json mode.
pub async fn run(args: RunArgs, mode: Mode) -> anyhow::Result<i32> {
    let env = Env::new(&args)?;
    let super::Prompts {
        mut messages,
        images,
    } = expand_messages(&args.messages)?;
    if let Some(stdin) = read_piped_stdin() {
        // Piped input joins the first message (Pi: stdin content, then the prompt).
        match messages.first_mut() {
            Some(first) => *first = format!("{stdin}\n\n{first}"),
            None => messages.push(stdin),
        }
    }
    if messages.is_empty() {
        bail!("no prompt given: pass a message (pi -p \"...\") or pipe one on stdin");
    }
    let sink = if mode == Mode::Json {
        stdout_sink()
    } else {
        stderr_warnings_sink()
    };
    let host = build_host(&args, &env, sink)?;
    let agent = host.agent();
    if mode == Mode::Json {
        if let Some(h) = json::header_line(agent) {
            println!("{h}");
        }
    }
    let mut last = None;
    let mut images = Some(images);
    for m in &messages {
        let first_images = images.as_deref().unwrap_or_default();
        // `/mcp`: the built-in MCP command, answered without the model.
        if let Some(notice) = super::mcp_command::run_text(m, &env.home.agent_dir).await {
            if mode == Mode::Json {
                super::write_line(&super::mcp_command::notify_record(&notice));
            } else {
                println!("{}", notice.message);
            }
            continue;
        }
        let prepared = host
            .prepare_input(m, first_images)
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        let start = match prepared {
            pi_agent::host::PreparedInput::Run(start) => start,
            // An extension command ran or an `input` handler took the text.
            pi_agent::host::PreparedInput::Handled => continue,
        };
        // `@image` attachments belong to the first message sent (prepared with it).
        images.take();
        last = agent.run(start).await?.last_assistant;
        // Runs extensions asked for meanwhile (`pi.sendUserMessage` or `pi.sendMessage` with
        // `triggerTurn` from a handler) come next.
        while let Some(start) = host.extensions().and_then(|e| e.take_pending_run()) {
            last = agent.run(start).await?.last_assistant;
        }
    }
    if mode == Mode::Json {
        return Ok(0);
    }
    // Only commands ran (`-c -p /compact`): Pi prints the context's last message when it
    // is an answer, as after a run.
    if last.is_none() {
        last = agent
            .messages()
            .pop()
            .filter(|m| m.get("role").and_then(serde_json::Value::as_str) == Some("assistant"))
            .and_then(|m| serde_json::from_value(m).ok());
    }
    let Some(AgentMessage::Assistant(msg)) = last else {
        return Ok(0);
    };
    if matches!(msg.stop_reason, StopReason::Error | StopReason::Aborted) {
        let text = msg
            .error_message
            .clone()
            .unwrap_or_else(|| format!("Request {}", msg.stop_reason.as_str()));
        eprintln!("{text}");
        return Ok(1);
    }
    let mut out = std::io::stdout().lock();
    for block in &msg.content {
        if let ContentBlock::Text(t) = block {
            let _ = writeln!(out, "{}", t.text);
        }
    }
    let _ = out.flush();
    if msg.stop_reason == StopReason::Length {
        eprintln!("Response was truncated: the model reached its output token limit.");
        return Ok(1);
    }
    Ok(0)
}

/// `--list-models [pattern]`: the models that have credentials, as Pi lists them. Pi loads
/// extensions first, so the virtual models they declare are listed too.
pub fn list_models(args: &RunArgs, env: &Env, pattern: &str) -> anyhow::Result<i32> {
    let builtin = pi_agent::tools::select_builtin_tools(&Default::default())
        .map_err(|e| anyhow::anyhow!(e))?;
    let extensions = super::extensions::start(args, env, &builtin)?;
    let registry = super::catalog_with_extensions(env, extensions.as_deref());
    let has_auth = super::credentials_check(env, &registry, args.api_key.is_some());
    let available = super::available_models(&registry, &has_auth);
    let search = (!pattern.is_empty()).then_some(pattern);
    print!(
        "{}",
        pi_agent::config::format_model_list(&available, search)
    );
    Ok(0)
}
