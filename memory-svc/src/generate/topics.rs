//! What generation extracts, per app: the topics of `--generator-topics`, as Memory Bank's
//! memory topics. A topic is built in (named by its label) or custom (a label and a
//! description the model reads). Without a file, every app extracts the built-in topics.
//!
//! The file is JSON:
//! ```json
//! { "default": ["preferences", "personal_facts"],
//!   "apps": { "travel": ["preferences", "plans",
//!                        {"label": "loyalty", "description": "frequent-flyer programs"}] } }
//! ```

use std::{collections::HashMap, path::Path};

use serde::Deserialize;

/// One topic the model may file a fact under.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Topic {
    pub label: String,
    pub description: String,
}

/// The built-in topics, by label.
pub const BUILT_IN: [(&str, &str); 5] = [
    (
        "preferences",
        "what the user likes, dislikes or prefers (food, seats, styles, brands, ways of working)",
    ),
    (
        "personal_facts",
        "facts about the user: name, home, work, health, possessions, important dates",
    ),
    (
        "plans",
        "what the user intends or has scheduled: trips, events, goals, deadlines",
    ),
    (
        "relationships",
        "people in the user's life and facts about them (family, friends, colleagues)",
    ),
    (
        "instructions",
        "how the user explicitly asked the assistant to behave or to remember something",
    ),
];

/// A topic as the file lists it: a built-in label, or a custom topic.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Listed {
    BuiltIn(String),
    Custom(Topic),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    default: Option<Vec<Listed>>,
    #[serde(default)]
    apps: HashMap<String, Vec<Listed>>,
}

/// The topics of every app.
#[derive(Debug, Clone)]
pub struct Topics {
    default: Vec<Topic>,
    apps: HashMap<String, Vec<Topic>>,
}

impl Default for Topics {
    fn default() -> Self {
        Self {
            default: built_in(),
            apps: HashMap::new(),
        }
    }
}

fn built_in() -> Vec<Topic> {
    BUILT_IN
        .iter()
        .map(|(label, description)| Topic {
            label: (*label).to_owned(),
            description: (*description).to_owned(),
        })
        .collect()
}

impl Topics {
    /// Reads the file at `path`; the error names what is wrong in it.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let file: File = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let resolve = |field: &str, listed: Vec<Listed>| -> Result<Vec<Topic>, String> {
            let mut topics: Vec<Topic> = Vec::with_capacity(listed.len());
            for (i, item) in listed.into_iter().enumerate() {
                let topic = match item {
                    Listed::BuiltIn(label) => BUILT_IN
                        .iter()
                        .find(|(l, _)| *l == label)
                        .map(|(l, d)| Topic {
                            label: (*l).to_owned(),
                            description: (*d).to_owned(),
                        })
                        .ok_or_else(|| {
                            let known: Vec<&str> = BUILT_IN.iter().map(|(l, _)| *l).collect();
                            format!(
                                "{field}[{i}]: {label:?} is not a built-in topic ({})",
                                known.join(", ")
                            )
                        })?,
                    Listed::Custom(topic) => topic,
                };
                if topic.label.trim().is_empty() || topic.description.trim().is_empty() {
                    return Err(format!(
                        "{field}[{i}]: a topic needs a label and a description"
                    ));
                }
                if topics.iter().any(|t| t.label == topic.label) {
                    return Err(format!(
                        "{field}[{i}]: topic {:?} is listed twice",
                        topic.label
                    ));
                }
                topics.push(topic);
            }
            if topics.is_empty() {
                return Err(format!("{field}: lists no topic"));
            }
            Ok(topics)
        };
        let default = match file.default {
            Some(listed) => resolve("default", listed)?,
            None => built_in(),
        };
        let mut apps = HashMap::with_capacity(file.apps.len());
        for (app, listed) in file.apps {
            let topics = resolve(&format!("apps.{app}"), listed)?;
            apps.insert(app, topics);
        }
        Ok(Self { default, apps })
    }

    /// The topics of `app`.
    pub fn of(&self, app: &str) -> &[Topic] {
        self.apps.get(app).unwrap_or(&self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_list_built_in_and_custom_topics() {
        let topics = Topics::parse(
            r#"{"apps": {"travel": ["plans", {"label": "loyalty", "description": "miles"}]}}"#,
        )
        .unwrap();
        let labels =
            |app| -> Vec<String> { topics.of(app).iter().map(|t| t.label.clone()).collect() };
        assert_eq!(labels("travel"), ["plans", "loyalty"]);
        assert_eq!(labels("other").len(), BUILT_IN.len());
    }

    #[test]
    fn mistakes_are_named() {
        for (text, expected) in [
            (
                r#"{"default": ["hobbies"]}"#,
                "default[0]: \"hobbies\" is not a built-in",
            ),
            (r#"{"apps": {"a": []}}"#, "apps.a: lists no topic"),
            (r#"{"apps": {"a": ["plans", "plans"]}}"#, "listed twice"),
            (
                r#"{"default": [{"label": "x", "description": ""}]}"#,
                "needs a label",
            ),
            (r#"{"topics": []}"#, "unknown field"),
        ] {
            let err = Topics::parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
