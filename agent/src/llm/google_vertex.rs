//! `google-vertex`: Gemini on Vertex AI. The body and the stream are Gemini's (see
//! [`super::google`]); what differs is where the request goes and how it is authorized,
//! following the Google Gen AI SDK Pi uses:
//!
//! * **API key** (`GOOGLE_CLOUD_API_KEY`, Vertex "express mode"): `x-goog-api-key`, and
//!   `https://aiplatform.googleapis.com/v1/publishers/google/models/{id}:streamGenerateContent`.
//! * **Application Default Credentials** (the key is Pi's `<authenticated>` placeholder):
//!   `Authorization: Bearer` with a token from [`super::google_auth`], project from
//!   `GOOGLE_CLOUD_PROJECT`/`GCLOUD_PROJECT`, location from `GOOGLE_CLOUD_LOCATION`, and
//!   `https://{location}-aiplatform.googleapis.com/v1/projects/{p}/locations/{l}/publishers/…`
//!   (`aiplatform.googleapis.com` for `global`, `aiplatform.{us|eu}.rep.googleapis.com` for
//!   the multi-regions).
//! * A **custom base URL** (models.json, no `{location}` placeholder) is taken as the
//!   collection root: `{baseUrl}/v1/publishers/google/models/…`, without `/v1` when the URL
//!   already names an API version.

use serde_json::{json, Value};

use super::google;
use super::google_auth;
use super::http::{self, ErrorStyle};
use super::model::Model;
use super::{Context, Emitter, StreamOptions};

/// The SDK's default for `vertexai` clients.
const API_VERSION: &str = "v1";

/// An explicit API key, or `None` for ADC (no key, Pi's marker, or a `<placeholder>`).
fn explicit_api_key(options: &StreamOptions) -> Option<&str> {
    let key = options.api_key.as_deref()?.trim();
    let placeholder = key.len() >= 2 && key.starts_with('<') && key.ends_with('>');
    (!key.is_empty() && key != "gcp-vertex-credentials" && !placeholder).then_some(key)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A models.json base URL replaces the SDK's endpoint; the catalog's templated one does not.
fn custom_base_url(model: &Model) -> Option<&str> {
    let b = model.base_url.trim();
    (!b.is_empty() && !b.contains("{location}")).then_some(b)
}

/// Whether a URL path names an API version (`v1`, `v1beta1`, …).
fn includes_api_version(url: &str) -> bool {
    let path = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest.split_once('/').map_or("", |(_, p)| p));
    path.split('/').any(|seg| {
        let Some(rest) = seg.strip_prefix('v') else {
            return false;
        };
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        let tail = &rest[digits..];
        tail.is_empty()
            || tail
                .strip_prefix("beta")
                .is_some_and(|d| d.chars().all(|c| c.is_ascii_digit()))
    })
}

/// Where the request goes: `(url, project/location prefix applies)`.
pub fn request_url(model: &Model, project_location: Option<(&str, &str)>) -> String {
    let method = format!(
        "publishers/google/models/{}:streamGenerateContent?alt=sse",
        model.id
    );
    if let Some(base) = custom_base_url(model) {
        let base = base.trim_end_matches('/');
        return if includes_api_version(base) {
            http::join_url(base, &method)
        } else {
            format!("{base}/{API_VERSION}/{method}")
        };
    }
    match project_location {
        Some((project, location)) => {
            let host = match location {
                "global" => "https://aiplatform.googleapis.com".to_string(),
                "us" | "eu" => format!("https://aiplatform.{location}.rep.googleapis.com"),
                l => format!("https://{l}-aiplatform.googleapis.com"),
            };
            format!("{host}/{API_VERSION}/projects/{project}/locations/{location}/{method}")
        }
        None => format!("https://aiplatform.googleapis.com/{API_VERSION}/{method}"),
    }
}

/// The request body: Gemini's, with the system instruction as a `user` content (as the SDK
/// sends it).
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let mut body = google::build_request(model, context, options);
    if let Some(si) = body
        .get_mut("systemInstruction")
        .and_then(Value::as_object_mut)
    {
        si.insert("role".into(), json!("user"));
    }
    body
}

pub(crate) async fn run(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let mut headers: Vec<(String, String)> = Vec::new();
    let url = match explicit_api_key(options) {
        Some(key) => {
            headers.push(("x-goog-api-key".into(), key.to_string()));
            request_url(model, None)
        }
        None => {
            let project = env("GOOGLE_CLOUD_PROJECT").or_else(|| env("GCLOUD_PROJECT")).ok_or(
                "Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT or pass project in options.",
            )?;
            let location = env("GOOGLE_CLOUD_LOCATION").ok_or(
                "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options.",
            )?;
            let path = google_auth::credentials_path(&env).ok_or(
                "Vertex AI needs Application Default Credentials: set GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_CLOUD_API_KEY",
            )?;
            let token = google_auth::access_token(&path, options).await?;
            headers.push(("authorization".into(), format!("Bearer {token}")));
            request_url(model, Some((&project, &location)))
        }
    };
    let body = build_request(model, context, options);
    http::extend_custom_headers(&mut headers, model, options);
    let resp = http::post_json(options, &url, &headers, &body, ErrorStyle::GenAiSdk).await?;
    google::consume_stream(model, options, resp, em, "Google Vertex").await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(base: &str) -> Model {
        serde_json::from_value(
            json!({"id": "gemini-2.5-flash", "name": "g", "api": "google-vertex",
            "provider": "google-vertex", "baseUrl": base}),
        )
        .expect("model")
    }

    #[test]
    fn urls_follow_the_sdk() {
        let m = model("https://{location}-aiplatform.googleapis.com");
        assert_eq!(
            request_url(&m, Some(("p", "us-central1"))),
            "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            request_url(&m, Some(("p", "global"))),
            "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            request_url(&m, None),
            "https://aiplatform.googleapis.com/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            request_url(&model("http://127.0.0.1:9/"), Some(("p", "l"))),
            "http://127.0.0.1:9/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            request_url(&model("http://h/x/v1beta1"), None),
            "http://h/x/v1beta1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert!(!includes_api_version("http://v1.example.com/api"));
    }

    #[test]
    fn placeholder_keys_mean_adc() {
        let opts = |k: &str| StreamOptions {
            api_key: Some(k.into()),
            ..StreamOptions::default()
        };
        assert_eq!(explicit_api_key(&opts("<authenticated>")), None);
        assert_eq!(explicit_api_key(&opts("gcp-vertex-credentials")), None);
        assert_eq!(explicit_api_key(&opts("k")), Some("k"));
    }
}
