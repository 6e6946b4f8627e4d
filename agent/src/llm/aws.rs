//! The AWS plumbing Bedrock needs, written against the public specifications instead of
//! pulling in the AWS SDK (dozens of crates; this machine builds on two cores):
//!
//! * [`sign_v4`]: Signature Version 4 request signing (HMAC-SHA256 from `ring`, already a
//!   dependency). The canonical URI is the already-encoded path encoded once more, as the
//!   SDKs do for every service but S3.
//! * [`EventStreamDecoder`]: the `application/vnd.amazon.eventstream` binary framing
//!   (prelude with total and header lengths and its CRC32, typed headers, payload, message
//!   CRC32), with both checksums verified.
//! * [`Credentials::from_env`]: static keys from the environment or a shared-credentials
//!   profile (`AWS_PROFILE`, `~/.aws/credentials`, `~/.aws/config`).

use std::collections::HashMap;
use std::path::PathBuf;

use ring::{digest, hmac};

/// An access key pair (and session token, for temporary credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN`, sent as `x-amz-security-token`.
    pub session_token: Option<String>,
}

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Credentials {
    /// Keys from `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`(/`AWS_SESSION_TOKEN`), or from
    /// `profile`'s section of the shared credentials file. `Err` explains what is missing.
    pub fn from_env(env: Env<'_>, profile: Option<&str>) -> Result<Credentials, String> {
        if profile.is_none() {
            if let (Some(id), Some(secret)) =
                (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
            {
                return Ok(Credentials {
                    access_key_id: id,
                    secret_access_key: secret,
                    session_token: env("AWS_SESSION_TOKEN"),
                });
            }
        }
        let profile = profile.map(str::to_string).or_else(|| env("AWS_PROFILE"));
        let name = profile.as_deref().unwrap_or("default");
        let path = shared_file(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
        let from_file = |path: &Option<PathBuf>, section: &str| -> Option<Credentials> {
            let text = std::fs::read_to_string(path.as_ref()?).ok()?;
            let sec = ini_section(&text, section)?;
            Some(Credentials {
                access_key_id: sec.get("aws_access_key_id")?.clone(),
                secret_access_key: sec.get("aws_secret_access_key")?.clone(),
                session_token: sec.get("aws_session_token").cloned(),
            })
        };
        if let Some(c) = from_file(&path, name) {
            return Ok(c);
        }
        // `~/.aws/config` may hold keys too, under `[profile NAME]` (or `[default]`).
        let config = shared_file(env, "AWS_CONFIG_FILE", "config");
        let section = if name == "default" {
            "default".to_string()
        } else {
            format!("profile {name}")
        };
        if let Some(c) = from_file(&config, &section) {
            return Ok(c);
        }
        Err(match profile {
            Some(p) => format!(
                "AWS profile \"{p}\" has no access keys in {} (SSO, process and role profiles are not supported; set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_BEARER_TOKEN_BEDROCK)",
                path.map(|p| p.display().to_string()).unwrap_or_else(|| "~/.aws/credentials".into())
            ),
            None => "No AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK".into(),
        })
    }
}

/// The region of `profile` in the shared config file, if it names one.
pub fn profile_region(env: Env<'_>, profile: &str) -> Option<String> {
    let path = shared_file(env, "AWS_CONFIG_FILE", "config")?;
    let text = std::fs::read_to_string(path).ok()?;
    let section = if profile == "default" {
        "default".to_string()
    } else {
        format!("profile {profile}")
    };
    ini_section(&text, &section)?.get("region").cloned()
}

fn shared_file(env: Env<'_>, var: &str, name: &str) -> Option<PathBuf> {
    env(var)
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".aws").join(name)))
}

/// `key = value` pairs of `[section]` in an INI file (`#`/`;` comments).
fn ini_section(text: &str, section: &str) -> Option<HashMap<String, String>> {
    let mut found = None;
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim().to_string());
            if current.as_deref() == Some(section) {
                found.get_or_insert_with(HashMap::new);
            }
            continue;
        }
        if current.as_deref() != Some(section) {
            continue;
        }
        if let (Some((k, v)), Some(map)) = (line.split_once('='), found.as_mut()) {
            map.insert(k.trim().to_lowercase(), v.trim().to_string());
        }
    }
    found
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

/// RFC 3986 encoding with AWS's unreserved set; `/` kept when `keep_slash`.
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// What is signed.
pub struct SignRequest<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// The request path as sent (already URI-encoded).
    pub path: &'a str,
    /// The query string as sent (without `?`), possibly empty.
    pub query: &'a str,
    /// Headers to sign, `host` included (names in any case).
    pub headers: &'a [(String, String)],
    /// Hex SHA-256 of the body.
    pub payload_hash: &'a str,
    /// `YYYYMMDDTHHMMSSZ`.
    pub amz_date: &'a str,
    /// Region, e.g. `us-east-1`.
    pub region: &'a str,
    /// Signing name, e.g. `bedrock`.
    pub service: &'a str,
}

/// The `Authorization` header value for `req` signed with `creds` (SigV4).
pub fn sign_v4(req: &SignRequest<'_>, creds: &Credentials) -> String {
    let mut headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(k, v)| {
            // Values are trimmed and inner runs of spaces collapsed.
            let v = v.split_whitespace().collect::<Vec<_>>().join(" ");
            (k.to_lowercase(), v)
        })
        .collect();
    headers.sort();
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed_headers = headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    // Every service but S3 signs the path encoded a second time.
    let canonical_uri = uri_encode(req.path, true);
    let mut query: Vec<(String, String)> = req
        .query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    query.sort();
    let canonical_query = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let canonical = format!(
        "{}\n{canonical_uri}\n{canonical_query}\n{canonical_headers}\n{signed_headers}\n{}",
        req.method, req.payload_hash
    );
    let date = &req.amz_date[..8.min(req.amz_date.len())];
    let scope = format!("{date}/{}/{}/aws4_request", req.region, req.service);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{scope}\n{}",
        req.amz_date,
        sha256_hex(canonical.as_bytes())
    );
    let k_date = hmac_sha256(
        format!("AWS4{}", creds.secret_access_key).as_bytes(),
        date.as_bytes(),
    );
    let k_region = hmac_sha256(&k_date, req.region.as_bytes());
    let k_service = hmac_sha256(&k_region, req.service.as_bytes());
    let k_signing = hmac_sha256(&k_service, b"aws4_request");
    let signature = hex(&hmac_sha256(&k_signing, to_sign.as_bytes()));
    format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        creds.access_key_id
    )
}

/// `YYYYMMDDTHHMMSSZ` for a Unix time.
pub fn amz_date(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let secs = unix_secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

/// CRC-32 (IEEE 802.3), as the event-stream framing uses.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// One decoded event-stream message: its string headers and payload.
#[derive(Debug, Clone, PartialEq)]
pub struct EventMessage {
    /// Headers with string values (`:event-type`, `:message-type`, …); other types skipped.
    pub headers: Vec<(String, String)>,
    /// The payload bytes (JSON for Bedrock).
    pub payload: Vec<u8>,
}

impl EventMessage {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Incremental decoder of `application/vnd.amazon.eventstream` frames.
#[derive(Default)]
pub struct EventStreamDecoder {
    buf: Vec<u8>,
}

/// Frames larger than this are refused (the format allows 16 MB; Bedrock's are small).
const MAX_FRAME: usize = 16 * 1024 * 1024;

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl EventStreamDecoder {
    /// Append bytes; returns the complete messages now available.
    pub fn feed(&mut self, data: &[u8]) -> Result<Vec<EventMessage>, String> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        loop {
            if self.buf.len() < 12 {
                break;
            }
            let total = be32(&self.buf[0..4]) as usize;
            let headers_len = be32(&self.buf[4..8]) as usize;
            if crc32(&self.buf[0..8]) != be32(&self.buf[8..12]) {
                return Err("event stream prelude checksum mismatch".into());
            }
            if !(16..=MAX_FRAME).contains(&total) || headers_len + 16 > total {
                return Err(format!("event stream frame has a bad length ({total})"));
            }
            if self.buf.len() < total {
                break;
            }
            let frame: Vec<u8> = self.buf.drain(..total).collect();
            if crc32(&frame[..total - 4]) != be32(&frame[total - 4..]) {
                return Err("event stream message checksum mismatch".into());
            }
            let headers = parse_headers(&frame[12..12 + headers_len])?;
            out.push(EventMessage {
                headers,
                payload: frame[12 + headers_len..total - 4].to_vec(),
            });
        }
        Ok(out)
    }

    /// Whether a partial frame is left over.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }
}

fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, String)>, String> {
    let bad = || "event stream frame has malformed headers".to_string();
    let mut out = Vec::new();
    while !b.is_empty() {
        let name_len = b[0] as usize;
        let name = b.get(1..1 + name_len).ok_or_else(bad)?;
        let name = String::from_utf8_lossy(name).into_owned();
        b = &b[1 + name_len..];
        let ty = *b.first().ok_or_else(bad)?;
        b = &b[1..];
        // Value sizes per type: bool true/false 0, byte 1, short 2, int 4, long 8,
        // bytes/string length-prefixed (u16), timestamp 8, uuid 16.
        let fixed = match ty {
            0 | 1 => Some(0),
            2 => Some(1),
            3 => Some(2),
            4 => Some(4),
            5 | 8 => Some(8),
            9 => Some(16),
            6 | 7 => None,
            _ => return Err(bad()),
        };
        match fixed {
            Some(n) => b = b.get(n..).ok_or_else(bad)?,
            None => {
                let len = b.get(0..2).ok_or_else(bad)?;
                let len = u16::from_be_bytes([len[0], len[1]]) as usize;
                let value = b.get(2..2 + len).ok_or_else(bad)?;
                if ty == 7 {
                    out.push((name, String::from_utf8_lossy(value).into_owned()));
                }
                b = &b[2 + len..];
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_like_the_aws_sdk() {
        // A request real Pi 1.6.0 (aws-sdk-js 3.1126.0) signed for Bedrock with AWS's example
        // secret key, recorded by a local server: same inputs, same signature.
        let headers: Vec<(String, String)> = [
            (
                "amz-sdk-invocation-id",
                "53c6fe63-d2b3-4327-8f7c-6074ebb11169",
            ),
            ("amz-sdk-request", "attempt=1; max=3"),
            ("content-length", "5809"),
            ("content-type", "application/json"),
            ("host", "127.0.0.1:18931"),
            (
                "x-amz-content-sha256",
                "d4d4a2f893a1871ce971befeabf67c4b68cca88f1a55121737de15491c940dd6",
            ),
            ("x-amz-date", "20261202T045353Z"),
            ("x-amz-security-token", "sess"),
            ("x-amz-user-agent", "aws-sdk-js/3.1126.0 pi/1.6.0"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let creds = Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: Some("sess".into()),
        };
        let auth = sign_v4(
            &SignRequest {
                method: "POST",
                path: "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream",
                query: "",
                headers: &headers,
                payload_hash: "d4d4a2f893a1871ce971befeabf67c4b68cca88f1a55121737de15491c940dd6",
                amz_date: "20261202T045353Z",
                region: "us-west-2",
                service: "bedrock",
            },
            &creds,
        );
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261202/us-west-2/bedrock/aws4_request, \
             SignedHeaders=amz-sdk-invocation-id;amz-sdk-request;content-length;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token;x-amz-user-agent, \
             Signature=f31fe7ea8402faddb9b0150c3c2ac40628f78c5712b0d8e3faf9886cf83ed1b9"
        );
    }

    #[test]
    fn dates_and_checksums() {
        assert_eq!(amz_date(1_764_651_233), "20251202T045353Z");
        assert_eq!(amz_date(951_782_400), "20000229T000000Z");
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
        let mut h = Vec::new();
        for (k, v) in headers {
            h.push(k.len() as u8);
            h.extend_from_slice(k.as_bytes());
            h.push(7);
            h.extend_from_slice(&(v.len() as u16).to_be_bytes());
            h.extend_from_slice(v.as_bytes());
        }
        let total = 12 + h.len() + payload.len() + 4;
        let mut f = Vec::new();
        f.extend_from_slice(&(total as u32).to_be_bytes());
        f.extend_from_slice(&(h.len() as u32).to_be_bytes());
        let c = crc32(&f);
        f.extend_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
        f.extend_from_slice(payload);
        let c = crc32(&f);
        f.extend_from_slice(&c.to_be_bytes());
        f
    }

    #[test]
    fn decodes_frames_split_anywhere_and_checks_crcs() {
        let mut bytes = frame(
            &[(":event-type", "messageStart")],
            br#"{"role":"assistant"}"#,
        );
        bytes.extend(frame(
            &[(":event-type", "messageStop")],
            br#"{"stopReason":"end_turn"}"#,
        ));
        for split in 0..bytes.len() {
            let mut d = EventStreamDecoder::default();
            let mut got = d.feed(&bytes[..split]).unwrap();
            got.extend(d.feed(&bytes[split..]).unwrap());
            assert_eq!(got.len(), 2);
            assert_eq!(got[1].header(":event-type"), Some("messageStop"));
            assert!(!d.has_partial());
        }
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - 6] ^= 1;
        let err = EventStreamDecoder::default().feed(&bad).unwrap_err();
        assert!(err.contains("checksum"), "{err}");
    }

    #[test]
    fn shared_credentials_profiles() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("credentials");
        std::fs::write(
            &creds,
            "[default]\naws_access_key_id = A\naws_secret_access_key = B\n\n[work]\naws_access_key_id=C\naws_secret_access_key=D\naws_session_token=T\n",
        )
        .unwrap();
        let path = creds.display().to_string();
        let env = |profile: Option<&'static str>| {
            let path = path.clone();
            move |k: &str| match k {
                "AWS_SHARED_CREDENTIALS_FILE" => Some(path.clone()),
                "AWS_CONFIG_FILE" => Some("/nonexistent".into()),
                "AWS_PROFILE" => profile.map(str::to_string),
                _ => None,
            }
        };
        let c = Credentials::from_env(&env(Some("work")), None).unwrap();
        assert_eq!(
            (c.access_key_id.as_str(), c.session_token.as_deref()),
            ("C", Some("T"))
        );
        assert_eq!(
            Credentials::from_env(&env(None), None)
                .unwrap()
                .access_key_id,
            "A"
        );
        let err = Credentials::from_env(&env(Some("sso")), None).unwrap_err();
        assert!(err.contains("\"sso\""), "{err}");
    }
}
