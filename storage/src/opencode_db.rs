//! Reading OpenCode's session database (`$XDG_DATA_HOME/opencode/opencode.db`, OpenCode 1.x)
//! for `pi sessions import --from opencode`. Only the three tables that hold conversations are
//! read — `session`, `message`, `part` — opened read-only, so a running OpenCode is not
//! disturbed; the `event` table is OpenCode's log of the same changes and is not read. The
//! mapping to Pi entries is `pi_formats::import::opencode`.

use std::collections::HashMap;
use std::path::Path;

use pi_formats::import::opencode::{Message, Record, Session};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value};

/// Every session in an OpenCode database, with its messages and parts in OpenCode's order.
/// A `data` column that is not JSON is kept as a string, so the mapping names the record.
pub fn read_opencode_db(path: &Path) -> Result<Vec<Session>, String> {
    let label = path.display().to_string();
    let fail = |what: &str, e: rusqlite::Error| format!("{label}: {what}: {e}");
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| fail("cannot open", e))?;
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' \
             AND name IN ('session', 'message', 'part')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| fail("not a SQLite database", e))?;
    if tables != 3 {
        return Err(format!(
            "{label}: not an OpenCode database (no session, message and part tables)"
        ));
    }

    let mut sessions = Vec::new();
    let mut stmt = conn
        .prepare("SELECT * FROM session ORDER BY time_created, id")
        .map_err(|e| fail("reading sessions", e))?;
    let names: Vec<String> = stmt.column_names().iter().map(|n| n.to_string()).collect();
    let mut rows = stmt.query([]).map_err(|e| fail("reading sessions", e))?;
    while let Some(row) = rows.next().map_err(|e| fail("reading sessions", e))? {
        let mut cols = Map::new();
        for (i, name) in names.iter().enumerate() {
            let v = match row.get_ref(i).map_err(|e| fail("reading sessions", e))? {
                ValueRef::Null | ValueRef::Blob(_) => Value::Null,
                ValueRef::Integer(n) => Value::from(n),
                ValueRef::Real(f) => Value::from(f),
                ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t).into_owned()),
            };
            cols.insert(name.clone(), v);
        }
        let id = cols
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        sessions.push(Session {
            label: label.clone(),
            info: Record {
                key: format!("session/{id}"),
                id,
                value: Value::Object(cols),
            },
            messages: Vec::new(),
        });
    }

    let mut messages: HashMap<String, Vec<Message>> = HashMap::new();
    let mut at: HashMap<String, (String, usize)> = HashMap::new();
    for (id, session, data) in rows3(
        &conn,
        "SELECT id, session_id, data FROM message ORDER BY time_created, id",
    )
    .map_err(|e| fail("reading messages", e))?
    {
        let list = messages.entry(session.clone()).or_default();
        at.insert(id.clone(), (session.clone(), list.len()));
        let keys = [("id", id.as_str()), ("sessionID", session.as_str())];
        list.push(Message {
            record: record("message", &id, &data, &keys),
            parts: Vec::new(),
        });
    }
    for (id, message, data) in rows3(&conn, "SELECT id, message_id, data FROM part ORDER BY id")
        .map_err(|e| fail("reading parts", e))?
    {
        // A part whose message is gone (OpenCode deletes with a cascade) has nowhere to go.
        if let Some((session, i)) = at.get(&message) {
            let keys = [
                ("id", id.as_str()),
                ("sessionID", session.as_str()),
                ("messageID", message.as_str()),
            ];
            let part = record("part", &id, &data, &keys);
            if let Some(m) = messages.get_mut(session).and_then(|l| l.get_mut(*i)) {
                m.parts.push(part);
            }
        }
    }
    for s in &mut sessions {
        s.messages = messages.remove(&s.info.id).unwrap_or_default();
    }
    Ok(sessions)
}

fn rows3(conn: &Connection, sql: &str) -> rusqlite::Result<Vec<(String, String, String)>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}

/// A row as OpenCode itself hands it out (and `opencode export` writes it): the `data` object
/// with the row's key columns added.
fn record(table: &str, id: &str, data: &str, keys: &[(&str, &str)]) -> Record {
    let mut value = serde_json::from_str(data).unwrap_or_else(|_| Value::from(data));
    if let Value::Object(m) = &mut value {
        for (k, v) in keys {
            m.insert((*k).to_string(), Value::from(*v));
        }
    }
    Record {
        key: format!("{table}/{id}"),
        id: id.to_string(),
        value,
    }
}
