//! The questions of a provider's API-key login as data, shared by `pi auth login` (a
//! terminal) and `/login` (a dialog), so both ask what Pi 1.6.0 asks and store the same
//! credential.
//!
//! Most providers' logins are a list of prompts recorded in the catalog (`apiKeyLogin`).
//! Google Vertex AI and Amazon Bedrock start with a choice of method; their flows are written
//! out here from pi-ai 1.6.0 (`providers/google-vertex.js`, `providers/amazon-bedrock.js`),
//! which the catalog only marks as `interactive`.

use pi_agent::llm::catalog::BuiltinProvider;
use serde_json::{json, Map, Value};

/// Where an answer goes in the stored credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The credential's `key`.
    Key,
    /// `env.NAME`.
    Env(String),
    /// `env.NAME` unless the answer is empty (Vertex's service-account file).
    EnvIfGiven(String),
    /// Nowhere: the question only waits for Enter (Bedrock's credential chain).
    Nothing,
}

/// One step of a login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A question; `secret` answers are not echoed in a terminal.
    Ask {
        message: String,
        secret: bool,
        into: Target,
    },
    /// Text to read before the next question, with labelled links.
    Info {
        message: String,
        links: Vec<(String, String)>,
    },
    /// A choice of method: the chosen option's steps run next.
    Choose {
        message: String,
        options: Vec<Choice>,
    },
}

/// One method of a [`Step::Choose`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub label: String,
    pub steps: Vec<Step>,
}

/// The steps of `provider`'s API-key login; `None` when it has none.
pub fn flow(provider: &BuiltinProvider) -> Option<Vec<Step>> {
    let script = provider.api_key_login.as_ref()?;
    if script.interactive {
        return match provider.id.as_str() {
            "google-vertex" => Some(vertex()),
            "amazon-bedrock" => Some(bedrock()),
            _ => None,
        };
    }
    Some(
        script
            .prompts
            .iter()
            .map(|p| Step::Ask {
                message: p.message.clone(),
                secret: p.secret,
                into: match p.into.strip_prefix("env.") {
                    Some(name) => Target::Env(name.to_string()),
                    None if p.into == "key" => Target::Key,
                    None => Target::Nothing,
                },
            })
            .collect(),
    )
}

fn ask(message: &str, secret: bool, into: Target) -> Step {
    Step::Ask {
        message: message.to_string(),
        secret,
        into,
    }
}

fn env(name: &str) -> Target {
    Target::Env(name.to_string())
}

fn choice(label: &str, steps: Vec<Step>) -> Choice {
    Choice {
        label: label.to_string(),
        steps,
    }
}

fn info(message: &str, label: &str, url: &str) -> Step {
    Step::Info {
        message: message.to_string(),
        links: vec![(label.to_string(), url.to_string())],
    }
}

const ADC_LINK: (&str, &str) = (
    "Application Default Credentials",
    "https://cloud.google.com/docs/authentication/provide-credentials-adc",
);

/// Google Vertex AI: an API key, or the project and location for Application Default
/// Credentials (plus a service account's file).
fn vertex() -> Vec<Step> {
    let project_and_location = || {
        vec![
            ask(
                "Enter Google Cloud project ID",
                false,
                env("GOOGLE_CLOUD_PROJECT"),
            ),
            ask(
                "Enter Google Cloud location",
                false,
                env("GOOGLE_CLOUD_LOCATION"),
            ),
        ]
    };
    let mut service_account = vec![info(
        "Provide a service account credentials file, project, and location.",
        ADC_LINK.0,
        ADC_LINK.1,
    )];
    service_account.extend(project_and_location());
    service_account.push(ask(
        "Enter service account credentials file path",
        false,
        Target::EnvIfGiven("GOOGLE_APPLICATION_CREDENTIALS".into()),
    ));
    let mut adc = vec![info(
        "Run `gcloud auth application-default login`, then provide the project and location.",
        ADC_LINK.0,
        ADC_LINK.1,
    )];
    adc.extend(project_and_location());
    vec![Step::Choose {
        message: "Select Google Vertex AI authentication method:".into(),
        options: vec![
            choice(
                "Google Cloud API key",
                vec![ask("Enter Google Cloud API key", true, Target::Key)],
            ),
            choice("Application Default Credentials", adc),
            choice("Service account credentials file", service_account),
        ],
    }]
}

/// Amazon Bedrock: a bearer token, a profile name, or the AWS credential chain as it is.
fn bedrock() -> Vec<Step> {
    let chain_info = || {
        info(
            "Amazon Bedrock supports AWS profiles, IAM credentials, and role-based credentials.",
            "AWS credential provider chain",
            "https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html",
        )
    };
    vec![Step::Choose {
        message: "Select Amazon Bedrock authentication method:".into(),
        options: vec![
            choice(
                "Bearer token",
                vec![ask("Enter Amazon Bedrock bearer token", true, Target::Key)],
            ),
            choice(
                "AWS profile",
                vec![
                    chain_info(),
                    ask("Enter AWS profile name", false, env("AWS_PROFILE")),
                ],
            ),
            choice(
                "Existing AWS credential chain",
                vec![
                    chain_info(),
                    ask(
                        "Configure AWS credentials, then press Enter to continue",
                        false,
                        Target::Nothing,
                    ),
                ],
            ),
        ],
    }]
}

/// The answers of a login so far, turned into the stored credential at the end.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Answers {
    key: Option<String>,
    env: Map<String, Value>,
}

impl Answers {
    /// Records the answer to a question that goes `into`.
    pub fn record(&mut self, into: &Target, answer: String) {
        match into {
            Target::Key => self.key = Some(answer),
            Target::Env(name) => {
                self.env.insert(name.clone(), Value::String(answer));
            }
            Target::EnvIfGiven(name) if !answer.is_empty() => {
                self.env.insert(name.clone(), Value::String(answer));
            }
            Target::EnvIfGiven(_) | Target::Nothing => {}
        }
    }

    /// Pi's stored form: `{"type": "api_key"}` with `key` and `env` when answered.
    pub fn credential(self) -> Value {
        let mut credential = json!({"type": "api_key"});
        if let Some(key) = self.key {
            credential["key"] = Value::String(key);
        }
        if !self.env.is_empty() {
            credential["env"] = Value::Object(self.env);
        }
        credential
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(id: &str) -> &'static BuiltinProvider {
        pi_agent::llm::catalog::builtin_catalog()
            .provider(id)
            .unwrap()
    }

    #[test]
    fn every_login_in_the_catalog_has_a_flow() {
        for p in &pi_agent::llm::catalog::builtin_catalog().providers {
            if p.api_key_login.is_some() {
                assert!(flow(p).is_some_and(|f| !f.is_empty()), "{}", p.id);
            }
        }
    }

    #[test]
    fn vertex_service_account_keeps_the_file_only_when_given() {
        let Some(Step::Choose { options, .. }) = flow(provider("google-vertex")).unwrap().pop()
        else {
            panic!("Vertex starts with a choice");
        };
        let mut answers = Answers::default();
        for (step, answer) in options[2]
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Ask { .. }))
            .zip(["proj", "europe-west4", ""])
        {
            if let Step::Ask { into, .. } = step {
                answers.record(into, answer.to_string());
            }
        }
        assert_eq!(
            answers.credential(),
            json!({"type": "api_key", "env": {
                "GOOGLE_CLOUD_PROJECT": "proj", "GOOGLE_CLOUD_LOCATION": "europe-west4"}})
        );
    }
}
