//! Tool search: Pi's BM25 ranking over tool metadata, used by `searchTools()` in scripts.
//!
//! A document is a tool's name, its description with the descriptions and property names of
//! its parameter schema, and its namespace (MCP server) text. The ranking follows Pi's
//! `Bm25Ranker`: a tool matching more query terms ranks first whatever the scores, a term in
//! the name counts three times its IDF, a term in the namespace half, a tool whose whole local
//! name is in the query gets a bonus, and a query that is exactly a tool's name ranks it first.

use std::collections::HashMap;
use std::collections::HashSet;

use serde_json::Value;

/// Default number of results of `searchTools()`.
pub const DEFAULT_SEARCH_LIMIT: usize = 8;

const NAME_WEIGHT: f64 = 3.0;
const NAMESPACE_WEIGHT: f64 = 0.5;
const K1: f64 = 1.2;
const B: f64 = 0.75;

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on",
    "or", "that", "the", "this", "to", "with",
];

/// What one tool offers to the ranking.
#[derive(Clone, Debug)]
pub struct SearchDocument {
    pub name: String,
    pub text: String,
    pub namespace_text: String,
}

impl SearchDocument {
    /// The document of a tool: description, schema descriptions and property names, and the
    /// namespace's name, description and instructions.
    pub fn new(
        name: &str,
        description: &str,
        parameters: &Value,
        namespace: Option<(&str, &str, &str)>,
    ) -> SearchDocument {
        let mut parts = vec![description.to_string()];
        let mut seen = HashSet::new();
        schema_text(parameters, parameters, &mut parts, &mut seen);
        let text = parts
            .into_iter()
            .filter(|p| !p.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let namespace_text = namespace
            .map(|(n, d, i)| format!("{n} {d} {i}"))
            .unwrap_or_default();
        SearchDocument {
            name: name.to_string(),
            text,
            namespace_text,
        }
    }
}

fn schema_text(schema: &Value, root: &Value, parts: &mut Vec<String>, seen: &mut HashSet<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        if seen.insert(reference.to_string()) {
            if let Some(target) = super::declarations::resolve_ref(reference, root) {
                schema_text(target, root, parts, seen);
            }
        }
    }
    if let Some(description) = object.get("description").and_then(Value::as_str) {
        parts.push(description.to_string());
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            parts.push(name.clone());
            schema_text(property, root, parts, seen);
        }
    }
    if let Some(items) = object.get("items") {
        schema_text(items, root, parts, seen);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for variant in object
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            schema_text(variant, root, parts, seen);
        }
    }
}

/// Naive singular form: `issues` → `issue`, `searches` → `search`.
fn stem(term: &str) -> String {
    let n = term.len();
    if n > 4 && term.ends_with("ies") {
        return format!("{}y", &term[..n - 3]);
    }
    if n > 4
        && ["ches", "shes", "sses", "xes", "zes"]
            .iter()
            .any(|s| term.ends_with(s))
    {
        return term[..n - 2].to_string();
    }
    if n > 3 && term.ends_with('s') && !term.ends_with("ss") {
        return term[..n - 1].to_string();
    }
    term.to_string()
}

/// Words of `text`: identifier boundaries (`camelCase`, `HTTPServer`) split, lowercased,
/// everything but letters, marks and digits a separator, English stop words dropped, ASCII
/// words singular.
pub fn tokenize(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut split = String::with_capacity(text.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1).copied();
        if c.is_ascii_uppercase() {
            let after_lower = prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit());
            let acronym_end = prev.is_some_and(|p| p.is_ascii_uppercase())
                && next.is_some_and(|n| n.is_ascii_lowercase());
            if after_lower || acronym_end {
                split.push(' ');
            }
        }
        split.push(c);
    }
    let lowered = split.to_lowercase();
    lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !STOP_WORDS.contains(w))
        .map(|w| {
            if w.chars().all(|c| c.is_ascii_alphanumeric()) {
                stem(w)
            } else {
                w.to_string()
            }
        })
        .collect()
}

fn normalize_name(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

struct Indexed {
    name: String,
    name_terms: HashSet<String>,
    local_terms: Vec<String>,
    text_counts: HashMap<String, usize>,
    text_length: usize,
    namespace_terms: HashSet<String>,
}

fn index(document: &SearchDocument) -> Indexed {
    let mut text_counts = HashMap::new();
    for term in tokenize(&document.text) {
        *text_counts.entry(term).or_insert(0) += 1;
    }
    let local = document.name.rsplit("__").next().unwrap_or("");
    let mut local_terms: Vec<String> = Vec::new();
    for term in tokenize(local) {
        if !local_terms.contains(&term) {
            local_terms.push(term);
        }
    }
    Indexed {
        name: document.name.clone(),
        name_terms: tokenize(&document.name).into_iter().collect(),
        local_terms,
        text_length: text_counts.values().sum(),
        text_counts,
        namespace_terms: tokenize(&document.namespace_text).into_iter().collect(),
    }
}

/// The names of the best `limit` matches for `query`, best first (ties keep document order).
pub fn rank(query: &str, documents: &[SearchDocument], limit: usize) -> Vec<String> {
    let mut query_terms: Vec<String> = Vec::new();
    for term in tokenize(query) {
        if !query_terms.contains(&term) {
            query_terms.push(term);
        }
    }
    if query_terms.is_empty() || documents.is_empty() || limit == 0 {
        return Vec::new();
    }
    let indexed: Vec<Indexed> = documents.iter().map(index).collect();
    let total: usize = indexed.iter().map(|d| d.text_length).sum();
    let average = match total as f64 / indexed.len() as f64 {
        a if a == 0.0 || a.is_nan() => 1.0,
        a => a,
    };
    let n = indexed.len() as f64;
    let idf: Vec<f64> = query_terms
        .iter()
        .map(|term| {
            let frequency = indexed
                .iter()
                .filter(|d| {
                    d.name_terms.contains(term)
                        || d.text_counts.contains_key(term)
                        || d.namespace_terms.contains(term)
                })
                .count() as f64;
            (1.0 + (n - frequency + 0.5) / (frequency + 0.5)).ln()
        })
        .collect();
    let full_name_bonus: f64 = idf.iter().sum();
    let exact_query = normalize_name(query);
    let mut matches: Vec<(usize, f64, usize, bool)> = Vec::new();
    for (position, document) in indexed.iter().enumerate() {
        let norm = K1 * (1.0 - B + B * document.text_length as f64 / average);
        let mut score = 0.0;
        let mut covered = 0;
        for (term, idf) in query_terms.iter().zip(&idf) {
            let count = *document.text_counts.get(term).unwrap_or(&0) as f64;
            let weight = if document.name_terms.contains(term) {
                NAME_WEIGHT
            } else {
                0.0
            } + if document.namespace_terms.contains(term) {
                NAMESPACE_WEIGHT
            } else {
                0.0
            } + count * (K1 + 1.0) / (count + norm);
            if weight > 0.0 {
                covered += 1;
            }
            score += idf * weight;
        }
        if score == 0.0 {
            continue;
        }
        if !document.local_terms.is_empty()
            && document.local_terms.iter().all(|t| query_terms.contains(t))
        {
            score += full_name_bonus;
        }
        let normalized = normalize_name(&document.name);
        let exact = normalized == exact_query || normalized.ends_with(&format!("__{exact_query}"));
        matches.push((position, score, covered, exact));
    }
    // A stable sort keeps document order among ties.
    matches.sort_by(|a, b| {
        b.3.cmp(&a.3)
            .then(b.2.cmp(&a.2))
            .then(b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal))
    });
    matches
        .into_iter()
        .take(limit)
        .map(|(position, ..)| indexed[position].name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(name: &str, description: &str) -> SearchDocument {
        SearchDocument::new(name, description, &json!({"type": "object"}), None)
    }

    #[test]
    fn tokenize_splits_identifiers_drops_stop_words_and_stems() {
        assert_eq!(
            tokenize("getHTTPServer lists the Issues of a repository"),
            vec!["get", "http", "server", "list", "issue", "repository"]
        );
        assert_eq!(
            tokenize("mcp__dev-radius__search"),
            vec!["mcp", "dev", "radiu", "search"]
        );
    }

    #[test]
    fn name_matches_beat_description_mentions_and_coverage_wins() {
        let docs = vec![
            doc("mcp__s__echo", "Echoes back the input"),
            doc("mcp__s__add", "Adds two numbers. Not an echo echo echo."),
            doc("mcp__s__sum_numbers", "Sum"),
        ];
        assert_eq!(rank("echo", &docs, 8), vec!["mcp__s__echo", "mcp__s__add"]);
        // Both terms covered beats one term in the name.
        assert_eq!(rank("add numbers", &docs, 1), vec!["mcp__s__add"]);
        // A query that is a tool's local name ranks it first.
        assert_eq!(rank("sum_numbers", &docs, 8)[0], "mcp__s__sum_numbers");
        assert!(rank("the", &docs, 8).is_empty());
    }

    #[test]
    fn schema_property_names_and_namespace_text_are_searched() {
        let docs = vec![
            SearchDocument::new(
                "mcp__fs__read_text_file",
                "Read a file",
                &json!({"type": "object", "properties": {"path": {"type": "string", "description": "Where"}}}),
                Some(("mcp__fs", "Filesystem access", "")),
            ),
            doc("mcp__other__ping", "Ping"),
        ];
        assert_eq!(rank("path", &docs, 8), vec!["mcp__fs__read_text_file"]);
        assert_eq!(
            rank("filesystem", &docs, 8),
            vec!["mcp__fs__read_text_file"]
        );
    }
}
