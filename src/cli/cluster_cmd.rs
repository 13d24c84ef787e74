//! Where a server's cluster spec and task come from (`--cluster FILE`,
//! `--tf-config`, `--cluster-from slurm`), and `ringflow cluster show`,
//! which prints what a server started the same way would derive.
//!
//! Owns: choosing among those sources and the flags that name the task.
//! Must not start servers; parsing of each source is `crate::cluster`.

use crate::cluster::slurm::{self, SlurmOptions};
use crate::cluster::{ClusterSpec, TaskId};
use crate::error::{Result, Status};
use std::path::PathBuf;

/// The flags that say where the cluster comes from and which task this is.
#[derive(Debug, Clone, Default)]
pub struct ClusterArgs {
    pub cluster: Option<PathBuf>,
    pub tf_config: bool,
    /// `slurm` (the one environment understood today).
    pub cluster_from: Option<String>,
    pub job: Option<String>,
    pub task: Option<u32>,
    /// First port of each node's tasks (`--cluster-from slurm`).
    pub base_port: Option<u16>,
}

/// The cluster, this task, and a line saying where they came from.
pub struct Resolved {
    pub spec: ClusterSpec,
    pub task: Option<TaskId>,
    pub source: String,
}

/// Reads the one source the flags name. The task comes from `--job`/
/// `--task` when given, else from the source (TF_CONFIG's task, Slurm's
/// rank); it may be absent only for `cluster show`.
pub fn resolve(args: &ClusterArgs) -> Result<Resolved> {
    let chosen =
        usize::from(args.cluster.is_some()) + usize::from(args.tf_config) + usize::from(args.cluster_from.is_some());
    if chosen != 1 {
        return Err(Status::invalid_argument("give exactly one of --cluster FILE, --tf-config, --cluster-from slurm"));
    }
    if args.base_port.is_some() && args.cluster_from.is_none() {
        return Err(Status::invalid_argument("--base-port applies to --cluster-from slurm only"));
    }
    let (spec, from_source, source) = if let Some(path) = &args.cluster {
        (ClusterSpec::from_file(path)?, None, format!("file {}", path.display()))
    } else if args.tf_config {
        let json = std::env::var("TF_CONFIG")
            .map_err(|_| Status::invalid_argument("--tf-config: the TF_CONFIG environment variable is not set"))?;
        let (spec, task) = ClusterSpec::from_tf_config(&json)?;
        (spec, task, "TF_CONFIG".to_string())
    } else {
        match args.cluster_from.as_deref() {
            Some("slurm") => {
                let options = SlurmOptions {
                    job: args.job.clone().unwrap_or_else(|| SlurmOptions::default().job),
                    base_port: args.base_port.unwrap_or(slurm::DEFAULT_BASE_PORT),
                };
                let derived = slurm::from_slurm_env(&|name| std::env::var(name).ok(), &options)?;
                let source = format!("Slurm ({})", derived.read.join(" "));
                (derived.spec, Some(derived.task), source)
            }
            Some(other) => {
                return Err(Status::invalid_argument(format!(
                    "--cluster-from '{other}': the environments understood are: slurm"
                )));
            }
            None => unreachable!("one source was chosen above"),
        }
    };
    let job = args.job.clone().or_else(|| from_source.as_ref().map(|t| t.job.clone()));
    let index = args.task.or_else(|| from_source.as_ref().map(|t| t.index));
    let task = match (job, index) {
        (Some(job), Some(index)) => Some(TaskId { job, index }),
        (None, None) => None,
        (Some(job), None) => return Err(Status::invalid_argument(format!("--job {job} needs --task N too"))),
        (None, Some(index)) => return Err(Status::invalid_argument(format!("--task {index} needs --job NAME too"))),
    };
    if let Some(task) = &task {
        spec.address_of(task).map_err(|e| e.context(format_args!("from {source}")))?;
    }
    Ok(Resolved { spec, task, source })
}

/// `ringflow cluster show`: the spec as TOML (usable as `--cluster FILE`),
/// with this task and where it all came from as comments.
pub fn show(args: &ClusterArgs) -> Result<String> {
    let resolved = resolve(args)?;
    let mut out = format!("# from {}\n", resolved.source);
    out.push_str(&resolved.spec.to_toml());
    match &resolved.task {
        Some(task) => {
            let address = resolved.spec.address_of(task)?;
            out.push_str(&format!("# this task: {} at {address}\n", task.task_name()));
        }
        None => out.push_str("# this task: not named (give --job NAME --task N)\n"),
    }
    Ok(out)
}
