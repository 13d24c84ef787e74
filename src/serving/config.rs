//! Which models a server serves: `--model NAME=PATH` flags, TensorFlow
//! Serving's `--model_name`/`--model_base_path`, or its
//! `--model_config_file` (the text format of `ModelServerConfig`'s
//! `model_config_list`: name, base path, platform, version policy and
//! version labels).
//!
//! Owns: parsing those into [`ModelConfig`]s. Must not load anything.

use crate::error::{Result, Status};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Which versions of a model to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionPolicy {
    /// The newest `n` (TensorFlow Serving's default: 1).
    Latest(usize),
    All,
    Specific(Vec<i64>),
}

impl Default for VersionPolicy {
    fn default() -> Self {
        VersionPolicy::Latest(1)
    }
}

/// One served model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub name: String,
    pub base_path: PathBuf,
    /// The meta graph's tags (`serve`).
    pub tags: Vec<String>,
    pub policy: VersionPolicy,
    pub labels: BTreeMap<String, i64>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            name: String::new(),
            base_path: PathBuf::new(),
            tags: crate::session::saved_model::default_tags(),
            policy: VersionPolicy::default(),
            labels: BTreeMap::new(),
        }
    }
}

/// `NAME=PATH`.
pub fn parse_model_flag(flag: &str) -> Result<ModelConfig> {
    let (name, path) = flag
        .split_once('=')
        .filter(|(name, path)| !name.is_empty() && !path.is_empty())
        .ok_or_else(|| Status::invalid_argument(format!("--model {flag}: expected NAME=BASE_PATH")))?;
    Ok(ModelConfig { name: name.to_string(), base_path: PathBuf::from(path), ..ModelConfig::default() })
}

/// A text-format `ModelServerConfig` with a `model_config_list`.
pub fn parse_model_config_file(path: &Path) -> Result<Vec<ModelConfig>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Status::not_found(format!("cannot read model config file {}: {e}", path.display())))?;
    parse_model_config(&text).map_err(|e| e.context(path.display()))
}

/// [`parse_model_config_file`] on the file's text.
pub fn parse_model_config(text: &str) -> Result<Vec<ModelConfig>> {
    let root = TextParser { tokens: tokenize(text)?, at: 0 }.message(true)?;
    let mut configs = Vec::new();
    for (field, value) in &root {
        match (field.as_str(), value) {
            ("model_config_list", Value::Message(list)) => {
                for (field, value) in list {
                    match (field.as_str(), value) {
                        ("config", Value::Message(fields)) => configs.push(model_config(fields)?),
                        _ => return Err(unexpected("model_config_list", field)),
                    }
                }
            }
            ("custom_model_config", _) => {
                return Err(Status::unimplemented("custom_model_config: only model_config_list is served"));
            }
            _ => return Err(unexpected("the config", field)),
        }
    }
    Ok(configs)
}

fn model_config(fields: &[(String, Value)]) -> Result<ModelConfig> {
    let mut config = ModelConfig::default();
    for (field, value) in fields {
        match (field.as_str(), value) {
            ("name", Value::Scalar(name)) => config.name = name.clone(),
            ("base_path", Value::Scalar(path)) => config.base_path = PathBuf::from(path),
            ("model_platform", Value::Scalar(platform)) if platform == "tensorflow" => {}
            ("model_platform", Value::Scalar(platform)) => {
                return Err(Status::unimplemented(format!(
                    "model_platform '{platform}': only 'tensorflow' SavedModels are served"
                )));
            }
            ("model_version_policy", Value::Message(policy)) => config.policy = version_policy(policy)?,
            ("version_labels", Value::Message(entry)) => {
                let get = |key: &str| {
                    entry.iter().find(|(f, _)| f == key).and_then(|(_, v)| match v {
                        Value::Scalar(s) => Some(s.clone()),
                        Value::Message(_) => None,
                    })
                };
                let (Some(label), Some(version)) = (get("key"), get("value")) else {
                    return Err(Status::invalid_argument("version_labels: expected { key: LABEL value: VERSION }"));
                };
                config.labels.insert(label, number(&version, "version_labels value")?);
            }
            // Settings of TensorFlow Serving's own loaders, which change
            // nothing here.
            ("logging_config", _) | ("response_tensor_name_config", _) => {}
            _ => return Err(unexpected("config", field)),
        }
    }
    if config.name.is_empty() || config.base_path.as_os_str().is_empty() {
        return Err(Status::invalid_argument(format!(
            "a config needs a name and a base_path (got name '{}', base_path '{}')",
            config.name,
            config.base_path.display()
        )));
    }
    Ok(config)
}

fn version_policy(fields: &[(String, Value)]) -> Result<VersionPolicy> {
    let [(kind, Value::Message(inner))] = fields else {
        return Err(Status::invalid_argument("model_version_policy: expected one of latest, all, specific"));
    };
    let scalars = |name: &'static str| {
        inner.iter().filter(move |(f, _)| f == name).filter_map(|(_, v)| match v {
            Value::Scalar(s) => Some(s.as_str()),
            Value::Message(_) => None,
        })
    };
    match kind.as_str() {
        "latest" => {
            let n = scalars("num_versions").next().map_or(Ok(1), |n| number(n, "num_versions"))?;
            Ok(VersionPolicy::Latest(usize::try_from(n).unwrap_or(0).max(1)))
        }
        "all" => Ok(VersionPolicy::All),
        "specific" => {
            let versions = scalars("versions").map(|v| number(v, "versions")).collect::<Result<Vec<_>>>()?;
            if versions.is_empty() {
                return Err(Status::invalid_argument("model_version_policy specific: no versions"));
            }
            Ok(VersionPolicy::Specific(versions))
        }
        other => Err(unexpected("model_version_policy", other)),
    }
}

fn number(text: &str, what: &str) -> Result<i64> {
    text.parse().map_err(|_| Status::invalid_argument(format!("{what}: '{text}' is not a number")))
}

fn unexpected(inside: &str, field: &str) -> Status {
    Status::invalid_argument(format!("unexpected field '{field}' in {inside}"))
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Scalar(String),
    Message(Vec<(String, Value)>),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Text(String),
    Colon,
    Open,
    Close,
}

fn tokenize(text: &str) -> Result<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut line = 1;
    while let Some((_, c)) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() || c == ',' || c == ';' => {}
            '#' => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            ':' => tokens.push(Token::Colon),
            '{' | '<' => tokens.push(Token::Open),
            '}' | '>' => tokens.push(Token::Close),
            '"' | '\'' => {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err(Status::invalid_argument(format!("line {line}: unterminated string"))),
                        Some((_, q)) if q == c => break,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, 't')) => value.push('\t'),
                            Some((_, other)) => value.push(other),
                            None => return Err(Status::invalid_argument(format!("line {line}: unterminated string"))),
                        },
                        Some((_, other)) => value.push(other),
                    }
                }
                tokens.push(Token::Text(value));
            }
            c if c.is_alphanumeric() || c == '_' || c == '-' || c == '.' || c == '+' => {
                let mut word = c.to_string();
                while let Some(&(_, next)) = chars.peek() {
                    if next.is_alphanumeric() || next == '_' || next == '-' || next == '.' || next == '+' {
                        word.push(next);
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Ident(word));
            }
            other => return Err(Status::invalid_argument(format!("line {line}: unexpected '{other}'"))),
        }
    }
    Ok(tokens)
}

struct TextParser {
    tokens: Vec<Token>,
    at: usize,
}

impl TextParser {
    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    /// Fields up to the closing brace (or the end, at the top).
    fn message(&mut self, top: bool) -> Result<Vec<(String, Value)>> {
        let mut fields = Vec::new();
        loop {
            let name = match self.next() {
                None if top => return Ok(fields),
                None => return Err(Status::invalid_argument("the text ends inside a message")),
                Some(Token::Close) if !top => return Ok(fields),
                Some(Token::Ident(name)) => name,
                Some(other) => return Err(Status::invalid_argument(format!("expected a field name, got {other:?}"))),
            };
            let mut token = self.next();
            if token == Some(Token::Colon) {
                token = self.next();
            }
            let value = match token {
                Some(Token::Open) => Value::Message(self.message(false)?),
                Some(Token::Ident(word)) | Some(Token::Text(word)) => Value::Scalar(word),
                _ => return Err(Status::invalid_argument(format!("field '{name}' has no value"))),
            };
            fields.push((name, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensorflow_servings_config_file_reads_into_model_configs() {
        let text = r#"
            # two models
            model_config_list {
              config {
                name: 'text'
                base_path: "/models/text/"
                model_platform: "tensorflow"
                model_version_policy { specific { versions: 1 versions: 3 } }
                version_labels { key: 'stable' value: 1 }
                version_labels { key: 'canary' value: 3 }
              }
              config: { name: "cnn", base_path: "/models/cnn", model_version_policy: { all: {} } }
              config { name: "mlp" base_path: "/m" model_version_policy { latest { num_versions: 2 } } }
            }"#;
        let configs = parse_model_config(text).unwrap();
        assert_eq!(configs.len(), 3);
        assert_eq!(configs[0].name, "text");
        assert_eq!(configs[0].base_path, PathBuf::from("/models/text/"));
        assert_eq!(configs[0].policy, VersionPolicy::Specific(vec![1, 3]));
        assert_eq!(configs[0].labels.get("canary"), Some(&3));
        assert_eq!(configs[1].policy, VersionPolicy::All);
        assert_eq!(configs[2].policy, VersionPolicy::Latest(2));
        assert_eq!(configs[2].tags, ["serve"]);
    }

    #[test]
    fn config_errors_name_the_field_or_line() {
        let err = |text: &str| parse_model_config(text).unwrap_err().to_string();
        assert!(err("model_config_list { config { name: 'a' base_path: '/a' colour: 'red' } }").contains("'colour'"));
        assert!(err("model_config_list { config { name: 'a' } }").contains("base_path"));
        assert!(err("model_config_list { config { name: 'a\n").contains("line 1"));
        assert!(err("model_config_list { config { name: 'a' base_path: '/a'").contains("ends inside"));
        let platform = err("model_config_list { config { name: 'a' base_path: '/a' model_platform: 'onnx' } }");
        assert!(platform.contains("'onnx'"), "{platform}");
        assert!(parse_model_flag("mlp").unwrap_err().to_string().contains("NAME=BASE_PATH"));
        assert_eq!(parse_model_flag("mlp=/m").unwrap().base_path, PathBuf::from("/m"));
    }
}
