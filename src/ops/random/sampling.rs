//! Draws that pick from what the graph holds rather than from a
//! distribution of values: `Multinomial` and `StatelessMultinomial`
//! (`tf.random.categorical`, `tf.random.stateless_categorical`: sampling
//! from logits in text generation and reinforcement learning), and
//! `RandomShuffle` (`tf.random.shuffle`), with TensorFlow's draws.
//!
//! Owns: these kernels and TensorFlow's CPU sampling procedures. A
//! categorical draw is `upper_bound` of `u * total` in the running sum of
//! `exp(logit - max)` (float64; non-finite logits add nothing), `u` from
//! two 32-bit words per sample; rows take words one after another from
//! one stream. TensorFlow splits large batches across its threads, each
//! block of rows starting its own stream further on, so for batches its
//! cost model gives more than one thread (about `batch * 50 * (samples *
//! log2(classes) + classes) >= 210,000`) its draws depend on its thread
//! count; below that they are these. A shuffle swaps each position `i`
//! with `i + word % (n - i)`. Must not share a generator between kernels.

use super::stateless::from_seed;
use super::{Philox, SingleSamples, reserve, reserve_blocks, seeded_generator};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Tensor};
use parking_lot::Mutex;

const FLOATS: &[DType] = &[DType::F32, DType::F64];

/// `[T, int32] -> [output_dtype]` (Multinomial), plus the seed
/// (StatelessMultinomial).
pub(super) fn multinomial_signature<const STATELESS: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let mut inputs = vec![ValueType::Tensor(node.attr_dtype("T")?), ValueType::Tensor(DType::I32)];
    if STATELESS {
        inputs.push(ValueType::Tensor(node.attr_dtype_or("Tseed", DType::I64)?));
    }
    Ok(OpSignature::new(inputs, vec![ValueType::Tensor(node.attr_dtype_or("output_dtype", DType::I64)?)]))
}

struct Multinomial {
    /// The node's own generator (Multinomial); `None`: each run's comes
    /// from its seed input (StatelessMultinomial).
    generator: Option<Mutex<Philox>>,
    output: DType,
}

pub(super) fn build_multinomial<const STATELESS: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    if !FLOATS.contains(&dtype) {
        return Err(unsupported_dtype(&node.op, dtype, FLOATS));
    }
    let output = node.attr_dtype_or("output_dtype", DType::I64)?;
    if !matches!(output, DType::I32 | DType::I64) {
        return Err(unsupported_dtype(&node.op, output, &[DType::I32, DType::I64]));
    }
    let generator = if STATELESS { None } else { Some(Mutex::new(seeded_generator(node)?)) };
    Ok(Box::new(Multinomial { generator, output }))
}

impl OpKernel for Multinomial {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let logits = ctx.input(0)?;
        if logits.rank() != 2 {
            bail!(invalid_argument, "logits should be a matrix, got shape {}", logits.shape());
        }
        let samples_t = ctx.input(1)?;
        if samples_t.rank() != 0 {
            bail!(invalid_argument, "num_samples should be a scalar, got shape {}", samples_t.shape());
        }
        let samples = samples_t.scalar_value::<i32>()?;
        let Ok(samples) = usize::try_from(samples) else {
            bail!(invalid_argument, "num_samples should be non-negative, got {samples}");
        };
        let (batch, classes) = (logits.dims()[0], logits.dims()[1]);
        if classes == 0 {
            bail!(invalid_argument, "num_classes should be positive, got 0");
        }
        let stream = match &self.generator {
            None => Some(from_seed(ctx.input(2)?)?),
            Some(_) if batch * samples == 0 => None,
            // TensorFlow reserves 256 counters per two samples (rounded up
            // to fours) of each row, and only when it draws at all.
            Some(generator) => Some(reserve(generator, batch * samples.div_ceil(4) * 4 * 2)),
        };
        let rows = logits.to_f64_vec();
        let mut picks = Vec::with_capacity(batch * samples);
        if let Some(stream) = stream {
            let mut words = SingleSamples::new(stream);
            let mut cdf = vec![0.0f64; classes];
            for row in rows.chunks_exact(classes) {
                draw_row(row, logits.dtype(), &mut cdf, samples, &mut words, &mut picks);
            }
        }
        let dims = [batch, samples];
        let out = match self.output {
            DType::I32 => Tensor::from_map(dims, &picks, |p| p as i32)?,
            _ => Tensor::from_map(dims, &picks, |p| p as i64)?,
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

/// `samples` classes drawn from one row of logits into `picks`.
fn draw_row(
    row: &[f64],
    dtype: DType,
    cdf: &mut [f64],
    samples: usize,
    words: &mut SingleSamples,
    picks: &mut Vec<usize>,
) {
    // The maximum starts at T's lowest value, as TensorFlow's does: with
    // no finite logit, every class weighs exp(-inf) or less.
    let lowest = if dtype == DType::F32 { f32::MIN as f64 } else { f64::MIN };
    let max = row.iter().copied().filter(|v| v.is_finite()).fold(lowest, f64::max);
    let mut total = 0.0;
    for (c, &logit) in cdf.iter_mut().zip(row) {
        if logit.is_finite() {
            total += (logit - max).exp();
        }
        *c = total;
    }
    for _ in 0..samples {
        let u = super::unit_f64(words.next(), words.next());
        let target = u * total;
        picks.push(cdf.partition_point(|&c| c <= target));
    }
}

/// `[T] -> [T]`.
pub(super) fn shuffle_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

struct Shuffle {
    generator: Mutex<Philox>,
}

pub(super) fn build_shuffle(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Shuffle { generator: Mutex::new(seeded_generator(init.node)?) }))
}

impl OpKernel for Shuffle {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let rows = input.dims().first().copied().unwrap_or(0);
        if input.num_elements() <= 1 || rows <= 1 {
            let same = input.clone();
            ctx.set_output(0, same);
            return Ok(());
        }
        if u32::try_from(rows).is_err() {
            bail!(invalid_argument, "RandomShuffle of {rows} rows: at most 2^32 - 1 are supported");
        }
        // TensorFlow reserves one 32-bit word per swap, in blocks of four.
        let stream = reserve_blocks(&self.generator, (rows as u64 - 1).div_ceil(4));
        let mut words = SingleSamples::new(stream);
        let mut order: Vec<usize> = (0..rows).collect();
        for i in 0..rows - 1 {
            let j = i + (words.next() % (rows - i) as u32) as usize;
            order.swap(i, j);
        }
        let out = crate::ops::array::take_rows(input, &order)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::{AttrValue, NodeSpec};
    use crate::ops::OpKernel;
    use crate::ops::testing::{build, node, run_built as run, ty};
    use crate::tensor::{DType, Tensor};

    fn seeded(op: &str, seed: i64, seed2: i64) -> NodeSpec {
        node(op).attr("seed", AttrValue::Int(seed)).attr("seed2", AttrValue::Int(seed2))
    }

    fn kernel(spec: &NodeSpec) -> Box<dyn OpKernel> {
        build(spec).unwrap()
    }

    fn logits() -> Tensor {
        Tensor::from_slice::<f32>([2, 4], &[0.5, -1.0, 2.0, 0.0, 1.0, f32::NEG_INFINITY, 1.0, -3.0]).unwrap()
    }

    #[test]
    fn categorical_draws_match_tensorflow_run_after_run() {
        // tf.raw_ops.Multinomial(logits, 5, seed=3, seed2=5), two runs of one
        // session (the -inf class is never drawn).
        let spec = seeded("Multinomial", 3, 5).attr("T", ty(DType::F32)).attr("output_dtype", ty(DType::I64));
        let k = kernel(&spec);
        let five = Tensor::scalar(5i32);
        let first = run(k.as_ref(), &[logits(), five.clone()]).unwrap();
        assert_eq!(first.dims(), &[2, 5]);
        assert_eq!(first.as_slice::<i64>().unwrap(), &[1, 0, 2, 2, 2, 2, 0, 0, 0, 0]);
        let second = run(k.as_ref(), &[logits(), five]).unwrap();
        assert_eq!(second.as_slice::<i64>().unwrap(), &[3, 2, 2, 3, 2, 2, 2, 0, 0, 0]);
    }

    #[test]
    fn stateless_categorical_draws_match_tensorflow() {
        // StatelessMultinomial of the float64 logits, 6 samples, seed [7, 11].
        let spec = node("StatelessMultinomial")
            .attr("T", ty(DType::F64))
            .attr("Tseed", ty(DType::I64))
            .attr("output_dtype", ty(DType::I32));
        let k = kernel(&spec);
        let logits64 = Tensor::from_slice::<f64>([2, 4], &logits().to_f64_vec()).unwrap();
        let seed = Tensor::from_slice::<i64>([2], &[7, 11]).unwrap();
        let inputs = [logits64, Tensor::scalar(6i32), seed];
        let want = [2, 2, 2, 3, 2, 2, 2, 2, 0, 2, 0, 2];
        assert_eq!(run(k.as_ref(), &inputs).unwrap().as_slice::<i32>().unwrap(), &want);
        assert_eq!(run(k.as_ref(), &inputs).unwrap().as_slice::<i32>().unwrap(), &want);
    }

    #[test]
    fn shuffles_match_tensorflow_run_after_run() {
        let k = kernel(&seeded("RandomShuffle", 3, 5).attr("T", ty(DType::I32)));
        let range = Tensor::from_slice::<i32>([9], &(0..9).collect::<Vec<_>>()).unwrap();
        let first = run(k.as_ref(), std::slice::from_ref(&range)).unwrap();
        assert_eq!(first.as_slice::<i32>().unwrap(), &[6, 7, 2, 4, 0, 8, 3, 5, 1]);
        let second = run(k.as_ref(), &[range]).unwrap();
        assert_eq!(second.as_slice::<i32>().unwrap(), &[6, 0, 5, 7, 2, 3, 1, 4, 8]);
        // Rows move whole.
        let k = kernel(&seeded("RandomShuffle", 1, 2).attr("T", ty(DType::I32)));
        let rows = Tensor::from_slice::<i32>([4, 2], &(0..8).collect::<Vec<_>>()).unwrap();
        assert_eq!(
            run(k.as_ref(), std::slice::from_ref(&rows)).unwrap().as_slice::<i32>().unwrap(),
            &[6, 7, 0, 1, 4, 5, 2, 3]
        );
        assert_eq!(run(k.as_ref(), &[rows]).unwrap().as_slice::<i32>().unwrap(), &[6, 7, 4, 5, 0, 1, 2, 3]);
        // Strings, and a single row comes back as it is.
        let k = kernel(&seeded("RandomShuffle", 1, 2).attr("T", ty(DType::String)));
        let words = Tensor::from_strings([4], &["a", "bb", "", "d"]).unwrap();
        let out = run(k.as_ref(), &[words]).unwrap();
        let got: Vec<&[u8]> = (0..4).map(|i| out.strings().unwrap().get(i).unwrap()).collect();
        assert_eq!(got, [&b"d"[..], b"a", b"", b"bb"]);
        let one = Tensor::from_slice::<i32>([1, 3], &[1, 2, 3]).unwrap();
        assert_eq!(run(k.as_ref(), std::slice::from_ref(&one)).unwrap().as_slice::<i32>().unwrap(), &[1, 2, 3]);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let spec = seeded("Multinomial", 1, 1).attr("T", ty(DType::F32));
        let k = kernel(&spec);
        let err = run(k.as_ref(), &[Tensor::from_slice::<f32>([3], &[1., 2., 3.]).unwrap(), Tensor::scalar(2i32)]);
        assert!(err.unwrap_err().message.contains("logits should be a matrix"));
        let err = run(k.as_ref(), &[logits(), Tensor::scalar(-1i32)]).unwrap_err();
        assert!(err.message.contains("non-negative, got -1"), "{err}");
        let empty = Tensor::zeros(DType::F32, [2, 0]).unwrap();
        assert!(run(k.as_ref(), &[empty, Tensor::scalar(1i32)]).unwrap_err().message.contains("num_classes"));
        assert!(build(&seeded("Multinomial", 1, 1).attr("T", ty(DType::I32))).is_err());
    }
}
