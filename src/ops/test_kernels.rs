//! Kernels that exist only in unit tests, to make the executor's behaviour
//! observable: a kernel that fails, one that sleeps, one that only
//! returns once N of its kind run at the same time (proof of parallelism
//! without timing), and one with any number of outputs that can leave one
//! unset.
//!
//! Owns: these test-only ops (registered under `cfg(test)`).

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Tensor};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("_TestFail", source_signature, build_fail),
    OpDef::kernel("_TestSleep", source_signature, build_sleep),
    OpDef::kernel("_TestMeet", source_signature, build_meet),
    OpDef::kernel("_TestCount", count_signature, build_count),
];

/// All three produce one float scalar and take one optional control input.
fn source_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![ValueType::Tensor(DType::F32)]))
}

struct Fail {
    delay: Duration,
}

fn build_fail(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Fail { delay: Duration::from_millis(init.node.attr_int_or("delay_ms", 0)? as u64) }))
}

impl OpKernel for Fail {
    fn compute(&self, _ctx: &mut OpContext<'_>) -> Result<()> {
        std::thread::sleep(self.delay);
        Err(Status::invalid_argument("the test kernel failed on purpose"))
    }
}

struct Sleep {
    duration: Duration,
    cheap: bool,
}

fn build_sleep(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Sleep {
        duration: Duration::from_millis(init.node.attr_int("ms")? as u64),
        cheap: init.node.attr_bool_or("cheap", false)?,
    }))
}

impl OpKernel for Sleep {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        std::thread::sleep(self.duration);
        ctx.set_output(0, Tensor::scalar(1.0f32));
        Ok(())
    }

    /// Slow kernels go to the pool unless the test asks otherwise.
    fn is_expensive(&self) -> bool {
        !self.cheap
    }
}

/// Returns only when `count` kernels of the same `group` are inside
/// `compute` at once; gives up after 10 s with an error.
struct Meet {
    group: String,
    count: usize,
}

fn build_meet(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Meet {
        group: init.node.attr_str_or("group", "default")?,
        count: init.node.attr_int("count")? as usize,
    }))
}

fn meeting_room() -> &'static (Mutex<HashMap<String, usize>>, Condvar) {
    static ROOM: OnceLock<(Mutex<HashMap<String, usize>>, Condvar)> = OnceLock::new();
    ROOM.get_or_init(|| (Mutex::new(HashMap::new()), Condvar::new()))
}

impl OpKernel for Meet {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (lock, cond) = meeting_room();
        let mut present = lock.lock();
        *present.entry(self.group.clone()).or_default() += 1;
        cond.notify_all();
        let deadline = Instant::now() + Duration::from_secs(10);
        while present[&self.group] < self.count {
            if cond.wait_until(&mut present, deadline).timed_out() {
                return Err(Status::deadline_exceeded(format!(
                    "only {} of {} '{}' kernels ran at the same time",
                    present[&self.group], self.count, self.group
                )));
            }
        }
        ctx.set_output(0, Tensor::scalar(1.0f32));
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// `_TestCount(n, skip)`: outputs `n` float scalars 1, 2, … n, except
/// output `skip` (when given), which it leaves unset.
struct Count {
    outputs: usize,
    skip: Option<usize>,
}

fn count_outputs(node: &NodeSpec) -> Result<usize> {
    Ok(node.attr_int("n")? as usize)
}

fn count_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![ValueType::Tensor(DType::F32); count_outputs(node)?]))
}

fn build_count(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let skip = init.node.attr_int_or("skip", -1)?;
    Ok(Box::new(Count { outputs: count_outputs(init.node)?, skip: usize::try_from(skip).ok() }))
}

impl OpKernel for Count {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        for i in (0..self.outputs).filter(|&i| Some(i) != self.skip) {
            ctx.set_output(i, Tensor::scalar((i + 1) as f32));
        }
        Ok(())
    }
}
