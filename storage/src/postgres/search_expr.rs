//! A history search query (the FTS5 syntax `history::fts_query` writes) as an expression the
//! server can evaluate with FTS5's meaning.
//!
//! `fts_query` only ever writes quoted strings (`"a b"`, with `""` for a quote), prefix
//! strings (`"src/ma"*`) and the operators `AND`, `OR`, `NOT` between them. FTS5 groups them
//! as its grammar does: strings written next to each other are an implicit AND that binds
//! tightest, then `NOT`, then `AND`, then `OR`, each left to right. Every string is split into
//! tokens by FTS5's own tokenizer (`history::tokens`); a string without a single token matches
//! nothing, and is dropped from an implicit AND, as FTS5 does.

use crate::history::tokens::fts5_tokens;

/// A phrase: its tokens, each hex-encoded (see `search.rs` for why), the last one a prefix
/// when `prefix` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Phrase {
    pub tokens: Vec<String>,
    pub prefix: bool,
}

/// A parsed query. `Nothing` is what a string without tokens means: no row matches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expr {
    Phrase(usize),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>, Box<Expr>),
    Nothing,
}

/// A query's expression and its phrases, in the order they were written (bm25 sums over
/// them in this order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Query {
    pub expr: Expr,
    pub phrases: Vec<Phrase>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    String { text: String, prefix: bool },
    Op(&'static str),
}

/// Splits `fts_query`'s output into strings and operators.
fn items(query: &str) -> Vec<Item> {
    let mut out = Vec::new();
    let mut chars = query.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {}
            '"' => {
                let mut text = String::new();
                while let Some(c) = chars.next() {
                    if c == '"' {
                        if chars.peek() == Some(&'"') {
                            chars.next();
                            text.push('"');
                        } else {
                            break;
                        }
                    } else {
                        text.push(c);
                    }
                }
                let prefix = chars.peek() == Some(&'*');
                if prefix {
                    chars.next();
                }
                out.push(Item::String { text, prefix });
            }
            _ => {
                let mut word = String::from(c);
                while let Some(&c) = chars.peek() {
                    if c == ' ' {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                out.push(Item::Op(match word.as_str() {
                    "OR" => "OR",
                    "NOT" => "NOT",
                    _ => "AND",
                }));
            }
        }
    }
    out
}

pub(crate) fn hex(token: &str) -> String {
    use std::fmt::Write;
    token.bytes().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Parses an FTS5 query as written by `history::fts_query`; `None` when it is empty.
pub(crate) fn parse(query: &str) -> rusqlite::Result<Option<Query>> {
    let items = items(query);
    let texts: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::String { text, .. } => Some(text.as_str()),
            Item::Op(_) => None,
        })
        .collect();
    let mut tokens = fts5_tokens(&texts)?.into_iter();
    let mut phrases = Vec::new();
    // Operands (implicit ANDs of strings) and the operators between them.
    let mut operands: Vec<Expr> = Vec::new();
    let mut ops: Vec<&'static str> = Vec::new();
    let mut group: Option<Expr> = None;
    let mut in_group = false;
    for item in items {
        match item {
            Item::String { prefix, .. } => {
                let words: Vec<String> = tokens.next().unwrap_or_default();
                let this = if words.is_empty() {
                    None
                } else {
                    phrases.push(Phrase {
                        tokens: words.iter().map(|w| hex(w)).collect(),
                        prefix,
                    });
                    Some(Expr::Phrase(phrases.len() - 1))
                };
                group = match (group.take(), this) {
                    (Some(g), Some(t)) => Some(Expr::And(Box::new(g), Box::new(t))),
                    (g, t) => g.or(t),
                };
                in_group = true;
            }
            Item::Op(op) => {
                if in_group {
                    operands.push(group.take().unwrap_or(Expr::Nothing));
                    in_group = false;
                }
                ops.push(op);
            }
        }
    }
    if in_group {
        operands.push(group.take().unwrap_or(Expr::Nothing));
    }
    if operands.is_empty() || operands.len() != ops.len() + 1 {
        return Ok(None);
    }
    // Lowest precedence last: each pass folds one operator, left to right.
    for level in ["NOT", "AND", "OR"] {
        let mut folded = vec![operands.remove(0)];
        let mut kept_ops = Vec::new();
        for (op, right) in ops.into_iter().zip(operands) {
            if op == level {
                let left = folded.pop().unwrap_or(Expr::Nothing);
                let (l, r) = (Box::new(left), Box::new(right));
                folded.push(match op {
                    "NOT" => Expr::Not(l, r),
                    "AND" => Expr::And(l, r),
                    _ => Expr::Or(l, r),
                });
            } else {
                kept_ops.push(op);
                folded.push(right);
            }
        }
        operands = folded;
        ops = kept_ops;
    }
    Ok(operands.pop().map(|expr| Query { expr, phrases }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fts_query;

    fn shape(e: &Expr) -> String {
        match e {
            Expr::Phrase(i) => format!("p{i}"),
            Expr::And(a, b) => format!("({} AND {})", shape(a), shape(b)),
            Expr::Or(a, b) => format!("({} OR {})", shape(a), shape(b)),
            Expr::Not(a, b) => format!("({} NOT {})", shape(a), shape(b)),
            Expr::Nothing => "none".into(),
        }
    }

    #[test]
    fn grouping_follows_fts5() {
        let q = parse(&fts_query("a b OR c NOT d AND e")).unwrap().unwrap();
        assert_eq!(shape(&q.expr), "((p0 AND p1) OR ((p2 NOT p3) AND p4))");
        let q = parse(&fts_query("src/ma* -- \"x y\"")).unwrap().unwrap();
        assert_eq!(shape(&q.expr), "(p0 AND p1)");
        assert_eq!(
            q.phrases[0],
            Phrase {
                tokens: vec![hex("src"), hex("ma")],
                prefix: true
            }
        );
        assert_eq!(q.phrases[1].tokens, vec![hex("x"), hex("y")]);
        assert_eq!(
            shape(&parse(&fts_query("-- OR b")).unwrap().unwrap().expr),
            "(none OR p0)"
        );
        assert!(parse("").unwrap().is_none());
    }
}
