//! Cluster specs: jobs → task addresses, from a TOML file or TensorFlow's
//! `TF_CONFIG` convention, plus which task this process is.
//!
//! Owns: [`ClusterSpec`] and its parsing, with errors that name the file or
//! the variable. Must not open sockets.
//!
//! TOML form:
//! ```toml
//! [cluster]
//! worker = ["10.0.0.1:2222", "10.0.0.2:2222"]
//! ps = ["10.0.0.3:2222"]
//! ```
//! `TF_CONFIG` form: `{"cluster": {"worker": [...]}, "task": {"type": "worker", "index": 0}}`.

use crate::error::{Result, Status};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct ClusterSpec {
    /// Job name → task addresses (`host:port`), task index = position.
    pub cluster: BTreeMap<String, Vec<String>>,
}

/// This process's place in a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskId {
    pub job: String,
    pub index: u32,
}

impl TaskId {
    pub fn task_name(&self) -> String {
        format!("/job:{}/replica:0/task:{}", self.job, self.index)
    }
}

#[derive(serde::Deserialize)]
struct TfConfig {
    cluster: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    task: Option<TfConfigTask>,
}

#[derive(serde::Deserialize)]
struct TfConfigTask {
    #[serde(rename = "type")]
    job: String,
    index: u32,
}

fn valid_job(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl ClusterSpec {
    pub(crate) fn checked(self, source: &str) -> Result<ClusterSpec> {
        if self.cluster.is_empty() {
            return Err(Status::invalid_argument(format!("{source}: the cluster has no jobs")));
        }
        for (job, tasks) in &self.cluster {
            if !valid_job(job) {
                return Err(Status::invalid_argument(format!("{source}: bad job name '{job}'")));
            }
            if tasks.is_empty() {
                return Err(Status::invalid_argument(format!("{source}: job '{job}' has no tasks")));
            }
            for (i, addr) in tasks.iter().enumerate() {
                let ok =
                    addr.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
                if !ok {
                    return Err(Status::invalid_argument(format!(
                        "{source}: task {i} of job '{job}' has address '{addr}', expected host:port"
                    )));
                }
            }
        }
        Ok(self)
    }

    pub fn from_toml_str(text: &str, source: &str) -> Result<ClusterSpec> {
        let spec: ClusterSpec = toml::from_str(text).map_err(|e| Status::invalid_argument(format!("{source}: {e}")))?;
        spec.checked(source)
    }

    pub fn from_file(path: &Path) -> Result<ClusterSpec> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Status::not_found(format!("cannot read cluster spec {source}: {e}")))?;
        ClusterSpec::from_toml_str(&text, &source)
    }

    /// Parses a `TF_CONFIG` value; the task part is optional.
    pub fn from_tf_config(json: &str) -> Result<(ClusterSpec, Option<TaskId>)> {
        let config: TfConfig =
            serde_json::from_str(json).map_err(|e| Status::invalid_argument(format!("TF_CONFIG: {e}")))?;
        let spec = ClusterSpec { cluster: config.cluster }.checked("TF_CONFIG")?;
        let task = config.task.map(|t| TaskId { job: t.job, index: t.index });
        if let Some(t) = &task {
            spec.address_of(t).map_err(|e| e.context("TF_CONFIG"))?;
        }
        Ok((spec, task))
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// The address of `task`, or an error naming it.
    pub fn address_of(&self, task: &TaskId) -> Result<&str> {
        self.cluster
            .get(&task.job)
            .and_then(|tasks| tasks.get(task.index as usize))
            .map(String::as_str)
            .ok_or_else(|| Status::not_found(format!("task {} is not in the cluster spec", task.task_name())))
    }

    /// Every task as (task name, address), jobs in name order.
    pub fn tasks(&self) -> Vec<(String, String)> {
        self.cluster
            .iter()
            .flat_map(|(job, addrs)| {
                addrs.iter().enumerate().map(move |(i, a)| (format!("/job:{job}/replica:0/task:{i}"), a.clone()))
            })
            .collect()
    }

    /// A cluster of `addresses.len()` tasks of job `worker`.
    pub fn workers(addresses: Vec<String>) -> ClusterSpec {
        let mut cluster = BTreeMap::new();
        cluster.insert("worker".to_string(), addresses);
        ClusterSpec { cluster }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_and_tf_config() {
        let spec =
            ClusterSpec::from_toml_str("[cluster]\nworker = [\"a:1\", \"b:2\"]\nps = [\"c:3\"]\n", "c.toml").unwrap();
        assert_eq!(
            spec.tasks(),
            vec![
                ("/job:ps/replica:0/task:0".to_string(), "c:3".to_string()),
                ("/job:worker/replica:0/task:0".to_string(), "a:1".to_string()),
                ("/job:worker/replica:0/task:1".to_string(), "b:2".to_string()),
            ]
        );
        let again = ClusterSpec::from_toml_str(&spec.to_toml(), "round trip").unwrap();
        assert_eq!(again, spec);
        let (tf, task) = ClusterSpec::from_tf_config(
            r#"{"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 1}}"#,
        )
        .unwrap();
        assert_eq!(task, Some(TaskId { job: "worker".into(), index: 1 }));
        assert_eq!(tf.address_of(&task.unwrap()).unwrap(), "h:2");
    }

    #[test]
    fn errors_name_the_source_and_the_culprit() {
        let e = ClusterSpec::from_toml_str("[cluster]\nworker = [\"nohost\"]\n", "c.toml").unwrap_err();
        assert_eq!(e.message, "c.toml: task 0 of job 'worker' has address 'nohost', expected host:port");
        let e =
            ClusterSpec::from_tf_config(r#"{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 3}}"#)
                .unwrap_err();
        assert!(e.message.contains("/job:worker/replica:0/task:3"), "{e}");
        assert!(ClusterSpec::from_tf_config("not json").unwrap_err().message.starts_with("TF_CONFIG"));
        assert!(ClusterSpec::from_file(Path::new("/nope.toml")).unwrap_err().message.contains("/nope.toml"));
    }
}
