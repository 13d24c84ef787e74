//! A cluster spec and this process's task, derived from the environment
//! Slurm gives each task of a job step (`srun`): the node list in Slurm's
//! compressed hostlist syntax, the tasks on each node, and this task's
//! global and node-local ranks.
//!
//! Owns: hostlist and tasks-per-node parsing, and the derivation
//! ([`from_slurm_env`]). Every error names the variable and its value.
//! Must not open sockets or read files; the environment is read through a
//! lookup function so tests pass their own.
//!
//! Every task derives the same spec on its own, with no exchange: task
//! `p` (`SLURM_PROCID`) is task `p` of one job, listening on its node at
//! `base_port + SLURM_LOCALID`. That needs Slurm's block distribution (the
//! default: ranks fill a node before the next), which is checked against
//! `SLURM_LOCALID` and `SLURM_NODEID`.

use super::spec::{ClusterSpec, TaskId};
use crate::error::{Result, Status};
use std::collections::BTreeMap;

/// Most hosts a node list may expand to: a bound, not a Slurm limit.
pub const MAX_HOSTS: usize = 1 << 16;

/// Default first port: task `l` of a node listens on `base + l`.
pub const DEFAULT_BASE_PORT: u16 = 2222;

/// How Slurm's tasks become a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmOptions {
    /// Job name every task gets (`/job:NAME/task:PROCID`).
    pub job: String,
    pub base_port: u16,
}

impl Default for SlurmOptions {
    fn default() -> Self {
        SlurmOptions { job: "worker".into(), base_port: DEFAULT_BASE_PORT }
    }
}

/// What the environment says about this job step and this task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmTask {
    pub spec: ClusterSpec,
    pub task: TaskId,
    /// Host this task runs on (its node in the node list).
    pub node: String,
    pub local_id: u32,
    /// The variables read, `NAME=value`, for messages and `cluster show`.
    pub read: Vec<String>,
}

fn bad(variable: &str, value: &str, why: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{variable}='{value}': {why}"))
}

/// Expands a Slurm hostlist: `node[01-04,07]`, `a1,b[2-3]`, `gpu-[1-2]-ib`,
/// `rack[1-2]-n[1-2]` (every combination, in order), or a single host.
/// Numbers keep the width of a range's first bound (`[08-10]` → `08 09 10`).
/// `variable` names the source in errors.
pub fn expand_hostlist(variable: &str, text: &str) -> Result<Vec<String>> {
    let mut hosts = Vec::new();
    for expression in split_top_level(text).map_err(|why| bad(variable, text, why))? {
        if expression.is_empty() {
            return Err(bad(variable, text, "empty host name"));
        }
        let expanded = expand_expression(expression).map_err(|why| bad(variable, text, why))?;
        if hosts.len() + expanded.len() > MAX_HOSTS {
            return Err(bad(variable, text, format_args!("more than {MAX_HOSTS} hosts")));
        }
        hosts.extend(expanded);
    }
    if hosts.is_empty() {
        return Err(bad(variable, text, "no hosts"));
    }
    Ok(hosts)
}

/// Splits at commas outside brackets.
fn split_top_level(text: &str) -> std::result::Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '[' if depth > 0 => return Err(format!("nested '[' at byte {i}")),
            '[' => depth = 1,
            ']' if depth == 0 => return Err(format!("']' without '[' at byte {i}")),
            ']' => depth = 0,
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err("'[' is never closed".into());
    }
    parts.push(text[start..].trim());
    Ok(parts)
}

/// One host expression: literal text and bracket groups, expanded as a
/// cartesian product left to right.
fn expand_expression(expression: &str) -> std::result::Result<Vec<String>, String> {
    let mut hosts = vec![String::new()];
    let mut rest = expression;
    while !rest.is_empty() {
        match rest.find('[') {
            None => {
                hosts.iter_mut().for_each(|h| h.push_str(rest));
                rest = "";
            }
            Some(open) => {
                let literal = &rest[..open];
                let close = rest[open..].find(']').map(|c| open + c).ok_or("'[' is never closed")?;
                let numbers = expand_ranges(&rest[open + 1..close])?;
                if hosts.len().saturating_mul(numbers.len()) > MAX_HOSTS {
                    return Err(format!("more than {MAX_HOSTS} hosts"));
                }
                hosts = hosts.iter().flat_map(|h| numbers.iter().map(move |n| format!("{h}{literal}{n}"))).collect();
                rest = &rest[close + 1..];
            }
        }
    }
    if hosts.iter().any(|h| h.chars().any(|c| c.is_whitespace() || c == ':')) {
        return Err(format!("'{expression}' is not a host name"));
    }
    Ok(hosts)
}

/// `01-04,07` → `01 02 03 04 07`.
fn expand_ranges(inside: &str) -> std::result::Result<Vec<String>, String> {
    let mut numbers = Vec::new();
    for item in inside.split(',') {
        let item = item.trim();
        let (lo_text, hi_text) = item.split_once('-').unwrap_or((item, item));
        let parse = |t: &str| {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                Err(format!("'{item}' in [{inside}] is not a number or a range N-M"))
            } else {
                t.parse::<u64>().map_err(|_| format!("'{t}' in [{inside}] is too large"))
            }
        };
        let (lo, hi) = (parse(lo_text)?, parse(hi_text)?);
        if hi < lo {
            return Err(format!("range '{item}' in [{inside}] runs backwards"));
        }
        if (hi - lo) as usize >= MAX_HOSTS || numbers.len() + (hi - lo) as usize >= MAX_HOSTS {
            return Err(format!("range '{item}' has more than {MAX_HOSTS} numbers"));
        }
        let width = lo_text.len();
        numbers.extend((lo..=hi).map(|n| format!("{n:0width$}")));
    }
    Ok(numbers)
}

/// Expands `SLURM_TASKS_PER_NODE`: `2(x3),1` → `[2, 2, 2, 1]`.
pub fn expand_tasks_per_node(variable: &str, text: &str) -> Result<Vec<u32>> {
    let mut counts = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let (count, repeat) = match item.split_once('(') {
            None => (item, "1"),
            Some((count, rest)) => {
                let repeat = rest
                    .strip_prefix('x')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| bad(variable, text, format_args!("'{item}' is not N or N(xM)")))?;
                (count, repeat)
            }
        };
        let number = |t: &str| {
            t.trim().parse::<u32>().map_err(|_| bad(variable, text, format_args!("'{item}' is not N or N(xM)")))
        };
        let (count, repeat) = (number(count)?, number(repeat)?);
        if repeat == 0 || counts.len() + repeat as usize > MAX_HOSTS {
            return Err(bad(variable, text, format_args!("'{item}' repeats 0 or more than {MAX_HOSTS} times")));
        }
        counts.extend(std::iter::repeat_n(count, repeat as usize));
    }
    Ok(counts)
}

/// Reads the first of `names` that is set, as `(name, value)`.
fn first_set(env: &dyn Fn(&str) -> Option<String>, names: &[&'static str]) -> Option<(&'static str, String)> {
    names.iter().find_map(|n| env(n).map(|v| (*n, v)))
}

fn required(env: &dyn Fn(&str) -> Option<String>, names: &[&'static str]) -> Result<(&'static str, String)> {
    first_set(env, names).ok_or_else(|| {
        Status::invalid_argument(format!(
            "{} is not set: is this running as a task of a Slurm job step (srun)?",
            names.join(" / ")
        ))
    })
}

fn number(variable: &str, value: &str) -> Result<u32> {
    value.trim().parse().map_err(|_| bad(variable, value, "not a non-negative integer"))
}

/// Derives the cluster (one job, task `p` = `SLURM_PROCID`) and this task
/// from Slurm's variables, read through `env`. A job step's own variables
/// (`SLURM_STEP_*`) win over the allocation's (`SLURM_JOB_*`), as a step
/// may use part of its allocation.
pub fn from_slurm_env(env: &dyn Fn(&str) -> Option<String>, options: &SlurmOptions) -> Result<SlurmTask> {
    let (list_var, list) = required(env, &["SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"])?;
    let (procid_var, procid_text) = required(env, &["SLURM_PROCID"])?;
    let (ntasks_var, ntasks_text) = required(env, &["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"])?;
    let (localid_var, localid_text) = required(env, &["SLURM_LOCALID"])?;
    let hosts = expand_hostlist(list_var, &list)?;
    let procid = number(procid_var, &procid_text)?;
    let ntasks = number(ntasks_var, &ntasks_text)?;
    let localid = number(localid_var, &localid_text)?;
    let mut read = vec![
        format!("{list_var}={list}"),
        format!("{procid_var}={procid_text}"),
        format!("{ntasks_var}={ntasks_text}"),
        format!("{localid_var}={localid_text}"),
    ];
    let counts = match first_set(env, &["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"]) {
        Some((var, text)) => {
            let counts = expand_tasks_per_node(var, &text)?;
            if counts.len() != hosts.len() {
                return Err(bad(
                    var,
                    &text,
                    format_args!("names {} nodes but {list_var}='{list}' has {}", counts.len(), hosts.len()),
                ));
            }
            let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
            if total != u64::from(ntasks) {
                return Err(bad(var, &text, format_args!("adds up to {total} tasks, but {ntasks_var}={ntasks}")));
            }
            read.push(format!("{var}={text}"));
            counts
        }
        None => {
            // Without the per-node counts, only an even spread is certain.
            let per_node = ntasks as usize / hosts.len();
            if per_node == 0 || per_node * hosts.len() != ntasks as usize {
                return Err(bad(
                    ntasks_var,
                    &ntasks_text,
                    format_args!(
                        "does not spread evenly over the {} nodes of {list_var}, and SLURM_TASKS_PER_NODE is not set",
                        hosts.len()
                    ),
                ));
            }
            vec![per_node as u32; hosts.len()]
        }
    };
    if procid >= ntasks {
        return Err(bad(procid_var, &procid_text, format_args!("is not below {ntasks_var}={ntasks}")));
    }
    let most_per_node = counts.iter().copied().max().unwrap_or(0);
    if u32::from(options.base_port) + most_per_node.saturating_sub(1) > u32::from(u16::MAX) || options.base_port == 0 {
        return Err(Status::invalid_argument(format!(
            "base port {} with up to {most_per_node} tasks per node runs past port 65535",
            options.base_port
        )));
    }
    let mut addresses = Vec::with_capacity(ntasks as usize);
    let mut mine = None;
    for (node_index, (host, &count)) in hosts.iter().zip(&counts).enumerate() {
        for local in 0..count {
            if addresses.len() == procid as usize {
                mine = Some((node_index, host.clone(), local));
            }
            addresses.push(format!("{host}:{}", u32::from(options.base_port) + local));
        }
    }
    let Some((node_index, node, block_local)) = mine else {
        return Err(bad(procid_var, &procid_text, "is past the last task of the node list"));
    };
    let not_block = |what: String| {
        Status::invalid_argument(format!(
            "{what}, but block distribution over {list_var}='{list}' puts {procid_var}={procid} as task {block_local} \
             of node {node_index} ({node}): start the step with srun --distribution=block"
        ))
    };
    if localid != block_local {
        return Err(not_block(format!("{localid_var}={localid}")));
    }
    if let Some(nodeid_text) = env("SLURM_NODEID") {
        let nodeid = number("SLURM_NODEID", &nodeid_text)?;
        if nodeid as usize != node_index {
            return Err(not_block(format!("SLURM_NODEID={nodeid}")));
        }
        read.push(format!("SLURM_NODEID={nodeid_text}"));
    }
    let mut cluster = BTreeMap::new();
    cluster.insert(options.job.clone(), addresses);
    let spec = ClusterSpec { cluster }.checked(list_var)?;
    Ok(SlurmTask { spec, task: TaskId { job: options.job.clone(), index: procid }, node, local_id: localid, read })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(text: &str) -> Vec<String> {
        expand_hostlist("SLURM_JOB_NODELIST", text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn hostlists_expand() {
        assert_eq!(hosts("node[01-04,07]"), ["node01", "node02", "node03", "node04", "node07"]);
        assert_eq!(hosts("a1,b[2-3]"), ["a1", "b2", "b3"]);
        assert_eq!(hosts("gpu-[1-2]-ib"), ["gpu-1-ib", "gpu-2-ib"]);
        assert_eq!(hosts("login7"), ["login7"]);
        assert_eq!(hosts("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(hosts("n[098-101]"), ["n098", "n099", "n100", "n101"]);
        assert_eq!(hosts("r[1-2]-c[1,3]"), ["r1-c1", "r1-c3", "r2-c1", "r2-c3"]);
        assert_eq!(hosts("x[3],y[1-2],z"), ["x3", "y1", "y2", "z"]);
        assert_eq!(hosts("node1.cluster.example"), ["node1.cluster.example"]);
    }

    #[test]
    fn bad_hostlists_name_the_variable_and_value() {
        for (text, why) in [
            ("node[01-", "never closed"),
            ("node[3-1]", "runs backwards"),
            ("node[a-b]", "not a number"),
            ("node[[1]]", "nested"),
            ("node]1", "without '['"),
            ("a,,b", "empty host"),
            ("", "empty host"),
            ("n[0-99999999]", "more than"),
        ] {
            let e = expand_hostlist("SLURM_JOB_NODELIST", text).unwrap_err();
            assert!(e.message.starts_with(&format!("SLURM_JOB_NODELIST='{text}'")), "{e}");
            assert!(e.message.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn tasks_per_node_expand() {
        let expand = |t| expand_tasks_per_node("SLURM_TASKS_PER_NODE", t).unwrap();
        assert_eq!(expand("2(x3),1"), [2, 2, 2, 1]);
        assert_eq!(expand("4"), [4]);
        assert_eq!(expand("1,2,3"), [1, 2, 3]);
        assert_eq!(expand("8(x2)"), [8, 8]);
        for text in ["2(3)", "2(x)", "x", "2(x0)", "-1", "2(x3"] {
            let e = expand_tasks_per_node("SLURM_TASKS_PER_NODE", text).unwrap_err();
            assert!(e.message.starts_with(&format!("SLURM_TASKS_PER_NODE='{text}'")), "{e}");
        }
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    fn derive(pairs: &[(&str, &str)]) -> Result<SlurmTask> {
        from_slurm_env(&env_of(pairs), &SlurmOptions::default())
    }

    #[test]
    fn derives_the_cluster_and_this_task() {
        let task = derive(&[
            ("SLURM_JOB_NODELIST", "node[01-02],gpu7"),
            ("SLURM_TASKS_PER_NODE", "2(x2),1"),
            ("SLURM_NTASKS", "5"),
            ("SLURM_PROCID", "3"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "1"),
        ])
        .unwrap();
        assert_eq!(
            task.spec.cluster["worker"],
            ["node01:2222", "node01:2223", "node02:2222", "node02:2223", "gpu7:2222"]
        );
        assert_eq!(task.task, TaskId { job: "worker".into(), index: 3 });
        assert_eq!(task.node, "node02");
        assert_eq!(task.spec.address_of(&task.task).unwrap(), "node02:2223");
        // The step's variables win over the job's; options name job and ports.
        let options = SlurmOptions { job: "trainer".into(), base_port: 9000 };
        let step = from_slurm_env(
            &env_of(&[
                ("SLURM_JOB_NODELIST", "node[01-08]"),
                ("SLURM_STEP_NODELIST", "node[03-04]"),
                ("SLURM_NTASKS", "16"),
                ("SLURM_STEP_NUM_TASKS", "2"),
                ("SLURM_STEP_TASKS_PER_NODE", "1(x2)"),
                ("SLURM_PROCID", "0"),
                ("SLURM_LOCALID", "0"),
            ]),
            &options,
        )
        .unwrap();
        assert_eq!(step.spec.cluster["trainer"], ["node03:9000", "node04:9000"]);
        // Without SLURM_TASKS_PER_NODE an even spread is assumed.
        let even = derive(&[
            ("SLURM_JOB_NODELIST", "a,b"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_PROCID", "2"),
            ("SLURM_LOCALID", "0"),
        ])
        .unwrap();
        assert_eq!(even.spec.cluster["worker"], ["a:2222", "a:2223", "b:2222", "b:2223"]);
        assert_eq!(even.node, "b");
    }

    #[test]
    fn derivation_errors_name_the_variable_and_value() {
        let base = [
            ("SLURM_JOB_NODELIST", "n[1-2]"),
            ("SLURM_TASKS_PER_NODE", "2(x2)"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_PROCID", "1"),
            ("SLURM_LOCALID", "1"),
        ];
        assert!(derive(&base).is_ok());
        let with = |name: &str, value: &'static str| {
            let mut pairs: Vec<(&str, &str)> = base.iter().copied().filter(|(k, _)| *k != name).collect();
            if !value.is_empty() {
                pairs.push((name, value));
            }
            derive(&pairs).unwrap_err().message.clone()
        };
        let e = with("SLURM_PROCID", "");
        assert!(e.contains("SLURM_PROCID is not set"), "{e}");
        let e = with("SLURM_PROCID", "four");
        assert!(e.starts_with("SLURM_PROCID='four'"), "{e}");
        let e = with("SLURM_PROCID", "4");
        assert!(e.starts_with("SLURM_PROCID='4'") && e.contains("SLURM_NTASKS=4"), "{e}");
        let e = with("SLURM_TASKS_PER_NODE", "3,2");
        assert!(e.starts_with("SLURM_TASKS_PER_NODE='3,2'") && e.contains("adds up to 5"), "{e}");
        let e = with("SLURM_TASKS_PER_NODE", "2(x3)");
        assert!(e.starts_with("SLURM_TASKS_PER_NODE='2(x3)'") && e.contains("has 2"), "{e}");
        let e = with("SLURM_JOB_NODELIST", "n[1-");
        assert!(e.starts_with("SLURM_JOB_NODELIST='n[1-'"), "{e}");
        // Cyclic distribution: rank 1 is node 1's first task.
        let e = with("SLURM_LOCALID", "0");
        assert!(e.contains("SLURM_LOCALID=0") && e.contains("--distribution=block"), "{e}");
        let e = with("SLURM_NTASKS", "3");
        assert!(e.contains("SLURM_NTASKS=3"), "{e}");
        let odd = derive(&[
            ("SLURM_JOB_NODELIST", "a,b"),
            ("SLURM_NTASKS", "3"),
            ("SLURM_PROCID", "0"),
            ("SLURM_LOCALID", "0"),
        ])
        .unwrap_err();
        assert!(odd.message.starts_with("SLURM_NTASKS='3'"), "{odd}");
        let ports =
            from_slurm_env(&env_of(&base), &SlurmOptions { job: "worker".into(), base_port: 65535 }).unwrap_err();
        assert!(ports.message.contains("65535"), "{ports}");
    }
}
