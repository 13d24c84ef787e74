//! CPU lists as `taskset` and cgroups write them (`0-3,8`, `0-15:2`), for
//! pinning a server's pool threads (`ringflow server --cpus`).
//!
//! Owns: parsing a list and checking it against the CPUs this process may
//! run on. Must not pin anything itself: pools pin their own threads
//! (`PoolOptions::cpus`).

use crate::error::{Result, Status};

/// Largest CPU number a list may name: a bound, far above real machines.
pub const MAX_CPU: usize = 4095;

/// Parses `0-3,8`, `5`, `0-15:2` (every second CPU) into CPU numbers in
/// the order given, without repeats.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>> {
    let bad = |why: String| Status::invalid_argument(format!("--cpus '{text}': {why}"));
    let mut cpus = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let (range, stride) = match item.split_once(':') {
            Some((range, stride)) => (range, stride.trim().parse::<usize>().ok().filter(|&s| s > 0)),
            None => (item, Some(1)),
        };
        let stride = stride.ok_or_else(|| bad(format!("'{item}' has a bad stride (N-M:S, S ≥ 1)")))?;
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let number = |t: &str| {
            t.trim().parse::<usize>().map_err(|_| bad(format!("'{item}' is not a CPU number or a range N-M")))
        };
        let (lo, hi) = (number(lo)?, number(hi)?);
        if hi < lo {
            return Err(bad(format!("range '{item}' runs backwards")));
        }
        if hi > MAX_CPU {
            return Err(bad(format!("CPU {hi} is above {MAX_CPU}")));
        }
        for cpu in (lo..=hi).step_by(stride) {
            if cpus.contains(&cpu) {
                return Err(bad(format!("CPU {cpu} is listed twice")));
            }
            cpus.push(cpu);
        }
    }
    Ok(cpus)
}

/// The CPUs this process may run on (its affinity mask), when known.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    Some((0..nix::sched::CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false)).collect())
}

/// `cpus`, or an error naming the first one this process may not use
/// (outside its affinity mask: another cgroup's, or absent).
pub fn check_allowed(cpus: &[usize], allowed: Option<&[usize]>) -> Result<()> {
    let Some(allowed) = allowed else {
        return Ok(());
    };
    match cpus.iter().find(|cpu| !allowed.contains(cpu)) {
        None => Ok(()),
        Some(cpu) => Err(Status::invalid_argument(format!(
            "--cpus names CPU {cpu}, which this process may not run on (allowed: {})",
            format_cpu_list(allowed)
        ))),
    }
}

/// The compact form of a CPU list: `0-3,8`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if j == i { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-3,8").unwrap(), [0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("5").unwrap(), [5]);
        assert_eq!(parse_cpu_list("8, 2-3").unwrap(), [8, 2, 3]);
        assert_eq!(parse_cpu_list("0-7:2").unwrap(), [0, 2, 4, 6]);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    }

    #[test]
    fn bad_cpu_lists_name_the_list_and_item() {
        for (text, why) in [
            ("", "not a CPU number"),
            ("a-b", "'a-b' is not a CPU number"),
            ("3-1", "runs backwards"),
            ("1,1", "CPU 1 is listed twice"),
            ("0-3:0", "bad stride"),
            ("99999", "above"),
            ("1,,2", "not a CPU number"),
        ] {
            let e = parse_cpu_list(text).unwrap_err();
            assert!(e.message.starts_with(&format!("--cpus '{text}'")), "{e}");
            assert!(e.message.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn cpus_outside_the_affinity_mask_are_named() {
        assert!(check_allowed(&[0, 1], Some(&[0, 1, 2])).is_ok());
        let e = check_allowed(&[1, 7], Some(&[0, 1, 2])).unwrap_err();
        assert!(e.message.contains("CPU 7") && e.message.contains("allowed: 0-2"), "{e}");
        let here = allowed_cpus().expect("this process has an affinity mask");
        assert!(!here.is_empty());
        assert!(check_allowed(&here, Some(&here)).is_ok());
    }
}
