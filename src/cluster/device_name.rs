//! Device names: `/job:NAME/replica:R/task:T/device:CPU:N`, full or partial.
//!
//! Owns: parsing (including TensorFlow's legacy `/cpu:0` forms), printing,
//! matching a partial spec against full names, and merging two requests.
//! Must not know which devices exist; the placer asks that of a device list.

use crate::error::{Result, Status};
use std::fmt;

/// A device name whose every part may be absent (a partial spec).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceName {
    pub job: Option<String>,
    pub replica: Option<u32>,
    pub task: Option<u32>,
    /// Upper-case device type, e.g. "CPU".
    pub device_type: Option<String>,
    pub id: Option<u32>,
}

fn parse_number(part: &str, what: &str, spec: &str) -> Result<Option<u32>> {
    if part == "*" {
        return Ok(None);
    }
    part.parse::<u32>()
        .map(Some)
        .map_err(|_| Status::invalid_argument(format!("device spec '{spec}': bad {what} '{part}'")))
}

impl DeviceName {
    /// A full CPU device name.
    pub fn cpu(job: &str, replica: u32, task: u32, id: u32) -> DeviceName {
        DeviceName {
            job: Some(job.to_string()),
            replica: Some(replica),
            task: Some(task),
            device_type: Some("CPU".to_string()),
            id: Some(id),
        }
    }

    /// Parses a full or partial spec. The empty string is the empty spec.
    pub fn parse(spec: &str) -> Result<DeviceName> {
        let mut name = DeviceName::default();
        let trimmed = spec.trim();
        if trimmed.is_empty() {
            return Ok(name);
        }
        let bad = |why: &str| Status::invalid_argument(format!("device spec '{spec}': {why}"));
        // "CPU:0" without a leading slash is accepted as a device part.
        let body = trimmed.strip_prefix('/').unwrap_or(trimmed);
        for part in body.split('/') {
            if part.is_empty() {
                return Err(bad("empty component"));
            }
            let (key, rest) = part.split_once(':').ok_or_else(|| bad(&format!("component '{part}' has no ':'")))?;
            match key {
                "job" => {
                    if rest.is_empty() || !rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                        return Err(bad(&format!("bad job name '{rest}'")));
                    }
                    name.job = Some(rest.to_string());
                }
                "replica" => name.replica = parse_number(rest, "replica", spec)?,
                "task" => name.task = parse_number(rest, "task", spec)?,
                "device" => {
                    // "device:CPU:0", "device:CPU:*", "device:CPU"
                    let (ty, id) = match rest.split_once(':') {
                        Some((ty, id)) => (ty, parse_number(id, "device id", spec)?),
                        None => (rest, None),
                    };
                    if ty.is_empty() {
                        return Err(bad("empty device type"));
                    }
                    if ty != "*" {
                        name.device_type = Some(ty.to_ascii_uppercase());
                    }
                    name.id = id;
                }
                // Legacy "/cpu:0", "/gpu:1", and "CPU:0".
                other if !other.is_empty() && other.chars().all(|c| c.is_ascii_alphabetic()) => {
                    name.device_type = Some(other.to_ascii_uppercase());
                    name.id = parse_number(rest, "device id", spec)?;
                }
                _ => return Err(bad(&format!("unknown component '{part}'"))),
            }
        }
        Ok(name)
    }

    pub fn is_full(&self) -> bool {
        self.job.is_some()
            && self.replica.is_some()
            && self.task.is_some()
            && self.device_type.is_some()
            && self.id.is_some()
    }

    pub fn is_empty(&self) -> bool {
        *self == DeviceName::default()
    }

    /// Whether every part this spec sets agrees with `full`.
    pub fn matches(&self, full: &DeviceName) -> bool {
        fn agree<T: PartialEq>(want: &Option<T>, got: &Option<T>) -> bool {
            want.is_none() || want == got
        }
        agree(&self.job, &full.job)
            && agree(&self.replica, &full.replica)
            && agree(&self.task, &full.task)
            && agree(&self.device_type, &full.device_type)
            && agree(&self.id, &full.id)
    }

    /// The spec that satisfies both, or None when they conflict.
    pub fn merge(&self, other: &DeviceName) -> Option<DeviceName> {
        fn pick<T: Clone + PartialEq>(a: &Option<T>, b: &Option<T>) -> Option<Option<T>> {
            match (a, b) {
                (Some(x), Some(y)) if x != y => None,
                (Some(x), _) => Some(Some(x.clone())),
                (None, y) => Some(y.clone()),
            }
        }
        Some(DeviceName {
            job: pick(&self.job, &other.job)?,
            replica: pick(&self.replica, &other.replica)?,
            task: pick(&self.task, &other.task)?,
            device_type: pick(&self.device_type, &other.device_type)?,
            id: pick(&self.id, &other.id)?,
        })
    }

    /// The task part: `/job:J/replica:R/task:T`.
    pub fn task_name(&self) -> String {
        let mut s = String::new();
        if let Some(job) = &self.job {
            s.push_str(&format!("/job:{job}"));
        }
        if let Some(r) = self.replica {
            s.push_str(&format!("/replica:{r}"));
        }
        if let Some(t) = self.task {
            s.push_str(&format!("/task:{t}"));
        }
        s
    }

    /// Whether both name the same task (job, replica, task all equal).
    pub fn same_task(&self, other: &DeviceName) -> bool {
        self.job == other.job && self.replica == other.replica && self.task == other.task
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.task_name())?;
        match (&self.device_type, self.id) {
            (Some(ty), Some(id)) => write!(f, "/device:{ty}:{id}"),
            (Some(ty), None) => write!(f, "/device:{ty}:*"),
            (None, Some(id)) => write!(f, "/device:*:{id}"),
            (None, None) => Ok(()),
        }
    }
}

/// The task part of a full device name string, without parsing all of it.
pub fn task_of(device: &str) -> &str {
    // The first "/device:", found by its '/' (a send asks this every step;
    // a substring searcher costs more to build than the search).
    for (i, _) in device.match_indices('/') {
        if device[i..].starts_with("/device:") {
            return &device[..i];
        }
    }
    device
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_partial_and_legacy() {
        let full = DeviceName::parse("/job:worker/replica:0/task:1/device:CPU:0").unwrap();
        assert_eq!(full, DeviceName::cpu("worker", 0, 1, 0));
        assert!(full.is_full());
        assert_eq!(full.to_string(), "/job:worker/replica:0/task:1/device:CPU:0");
        let partial = DeviceName::parse("/job:worker/task:1").unwrap();
        assert!(partial.matches(&full));
        assert!(!DeviceName::parse("/job:worker/task:0").unwrap().matches(&full));
        assert_eq!(DeviceName::parse("/cpu:0").unwrap().device_type.as_deref(), Some("CPU"));
        assert_eq!(DeviceName::parse("/device:cpu:0").unwrap().id, Some(0));
        assert!(DeviceName::parse("").unwrap().is_empty());
        assert!(DeviceName::parse("").unwrap().matches(&full));
        assert_eq!(task_of("/job:w/replica:0/task:3/device:CPU:0"), "/job:w/replica:0/task:3");
        assert_eq!(task_of("/job:w/replica:0/task:3"), "/job:w/replica:0/task:3");
        assert_eq!(task_of("/job:dev/task:0/device:CPU:0"), "/job:dev/task:0");
        assert_eq!(task_of("/device:CPU:0"), "");
    }

    #[test]
    fn rejects_garbage_naming_the_spec() {
        for bad in ["/job:", "/task:x", "/job:w//task:1", "/foo", "/job:w/task:1/device:"] {
            let err = DeviceName::parse(bad).unwrap_err();
            assert!(err.message.contains(bad), "{bad}: {err}");
        }
    }

    #[test]
    fn merge_detects_conflicts() {
        let a = DeviceName::parse("/job:worker").unwrap();
        let b = DeviceName::parse("/task:1/device:CPU:0").unwrap();
        assert_eq!(a.merge(&b).unwrap().to_string(), "/job:worker/task:1/device:CPU:0");
        let c = DeviceName::parse("/task:2").unwrap();
        assert!(b.merge(&c).is_none());
    }
}
