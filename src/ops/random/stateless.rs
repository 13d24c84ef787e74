//! Stateless random ops: the same seed gives the same numbers on every
//! run, as TensorFlow's do (`tf.random.stateless_*`, and Keras 3's
//! `keras.random`, Dropout included, which draw through them).
//! - V1: `StatelessRandomUniform`, `StatelessRandomNormal`,
//!   `StatelessTruncatedNormal` take a `[2]` seed.
//! - V2: `StatelessRandomGetKeyCounter` turns a seed into a uint64 key and
//!   counter, `StatelessRandomGetAlg`/`...GetKeyCounterAlg` name the
//!   algorithm (Philox), and `StatelessRandomUniformV2`, `...NormalV2`,
//!   `StatelessTruncatedNormalV2` and `StatelessRandomUniformIntV2` draw
//!   from a key, counter and algorithm.
//!
//! Owns: TensorFlow's seed scrambling (one Philox block over the seed under
//! a fixed key) and the integer range draw. The generator and the float
//! distributions are the parent module's, shared with the stateful ops.
//! Must not hold state: nothing here changes between runs.

use super::{Distribution, Normal, Philox, TruncatedNormal, Uniform, output_shape};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values, unsupported_dtype};
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("StatelessRandomUniform", v1_signature, build_v1::<Uniform>),
    OpDef::kernel("StatelessRandomNormal", v1_signature, build_v1::<Normal>),
    OpDef::kernel("StatelessTruncatedNormal", v1_signature, build_v1::<TruncatedNormal>),
    OpDef::kernel("StatelessRandomGetKeyCounter", key_counter_signature::<false>, build_key_counter::<false>),
    OpDef::kernel("StatelessRandomGetKeyCounterAlg", key_counter_signature::<true>, build_key_counter::<true>),
    OpDef::kernel("StatelessRandomGetAlg", alg_signature, build_alg),
    OpDef::kernel("StatelessRandomUniformV2", v2_signature, build_v2::<Uniform>),
    OpDef::kernel("StatelessRandomNormalV2", v2_signature, build_v2::<Normal>),
    OpDef::kernel("StatelessTruncatedNormalV2", v2_signature, build_v2::<TruncatedNormal>),
    OpDef::kernel("StatelessRandomUniformIntV2", uniform_int_signature, build_uniform_int),
];

/// TensorFlow's `RNG_ALG_PHILOX`; `RNG_ALG_AUTO_SELECT` picks it on CPU.
const ALG_PHILOX: i32 = 1;
const ALG_AUTO_SELECT: i32 = 3;

const U64: ValueType = ValueType::Tensor(DType::U64);
const I32: ValueType = ValueType::Tensor(DType::I32);

/// The generator TensorFlow derives from a seed pair: Philox's first block
/// over the seed, under a fixed key, gives the key and the high half of
/// the counter.
pub(super) fn from_seed(seed: &Tensor) -> Result<Philox> {
    if seed.dims() != [2] {
        bail!(invalid_argument, "seed must have shape [2], not {}", seed.shape());
    }
    // int32 seeds are sign-extended, as TensorFlow casts them to int64.
    let s = index_values(seed, "seed")?;
    let (s0, s1) = (s[0] as u64, s[1] as u64);
    let mix =
        Philox::from_parts([0x3ec8_f720, 0x0246_1e29], [s0 as u32, (s0 >> 32) as u32, s1 as u32, (s1 >> 32) as u32])
            .next_block();
    Ok(Philox::from_parts([mix[0], mix[1]], [0, 0, mix[2], mix[3]]))
}

/// The generator of a V2 op's key, counter and algorithm inputs.
pub(super) fn from_key_counter(key: &Tensor, counter: &Tensor, alg: &Tensor) -> Result<Philox> {
    if alg.rank() != 0 {
        bail!(invalid_argument, "alg must be a scalar, not {}", alg.shape());
    }
    let alg = alg.scalar_value::<i32>()?;
    if alg != ALG_PHILOX && alg != ALG_AUTO_SELECT {
        bail!(invalid_argument, "Unsupported algorithm id: {alg}");
    }
    if key.dims() != [1] {
        bail!(invalid_argument, "key must have shape [1], not {}", key.shape());
    }
    if counter.rank() != 1 || counter.num_elements() < 2 {
        bail!(invalid_argument, "counter must be a vector with length at least 2; got shape: {}", counter.shape());
    }
    let k = key.as_slice::<u64>()?[0];
    let c = counter.as_slice::<u64>()?;
    Ok(Philox::from_parts(
        [k as u32, (k >> 32) as u32],
        [c[0] as u32, (c[0] >> 32) as u32, c[1] as u32, (c[1] >> 32) as u32],
    ))
}

fn float_dtype(node: &NodeSpec) -> Result<DType> {
    let dtype = node.attr_dtype("dtype")?;
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(unsupported_dtype(&node.op, dtype, &[DType::F32, DType::F64]));
    }
    Ok(dtype)
}

fn fill<D: Distribution>(philox: Philox, shape: Shape, dtype: DType) -> Result<Tensor> {
    match dtype {
        DType::F32 => Tensor::build(shape, |out: &mut [f32]| D::fill_f32(philox, out)),
        _ => Tensor::build(shape, |out: &mut [f64]| D::fill_f64(philox, out)),
    }
}

// ---------------------------------------------------------------------------
// V1: shape and seed

/// `[T, Tseed] -> [dtype]`.
fn v1_signature(node: &NodeSpec) -> Result<OpSignature> {
    let shape = ValueType::Tensor(node.attr_dtype_or("T", DType::I32)?);
    let seed = ValueType::Tensor(node.attr_dtype_or("Tseed", DType::I64)?);
    Ok(OpSignature::new(vec![shape, seed], vec![ValueType::Tensor(node.attr_dtype("dtype")?)]))
}

struct SeededKernel<D> {
    dtype: DType,
    _distribution: std::marker::PhantomData<D>,
}

fn build_v1<D: Distribution>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(SeededKernel::<D> { dtype: float_dtype(init.node)?, _distribution: std::marker::PhantomData }))
}

impl<D: Distribution> OpKernel for SeededKernel<D> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = output_shape(ctx.input(0)?)?;
        let philox = from_seed(ctx.input(1)?)?;
        let out = fill::<D>(philox, shape, self.dtype)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Key, counter, algorithm

/// `[Tseed] -> [uint64, uint64]` (and `int32` with `ALG`).
fn key_counter_signature<const ALG: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let seed = ValueType::Tensor(node.attr_dtype_or("Tseed", DType::I64)?);
    let outputs = if ALG { vec![U64, U64, I32] } else { vec![U64, U64] };
    Ok(OpSignature::new(vec![seed], outputs))
}

struct KeyCounter<const ALG: bool>;

fn build_key_counter<const ALG: bool>(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(KeyCounter::<ALG>))
}

impl<const ALG: bool> OpKernel for KeyCounter<ALG> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let philox = from_seed(ctx.input(0)?)?;
        let (key, counter) = philox.parts();
        let join = |lo: u32, hi: u32| lo as u64 | (hi as u64) << 32;
        ctx.set_output(0, Tensor::from_slice::<u64>([1], &[join(key[0], key[1])])?);
        ctx.set_output(
            1,
            Tensor::from_slice::<u64>([2], &[join(counter[0], counter[1]), join(counter[2], counter[3])])?,
        );
        if ALG {
            ctx.set_output(2, Tensor::scalar(ALG_PHILOX));
        }
        Ok(())
    }
}

fn alg_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![I32]))
}

struct Alg;

fn build_alg(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Alg))
}

impl OpKernel for Alg {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        ctx.set_output(0, Tensor::scalar(ALG_PHILOX));
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// V2: shape, key, counter, algorithm

/// `[Tshape, uint64, uint64, int32] -> [dtype]`.
fn v2_signature(node: &NodeSpec) -> Result<OpSignature> {
    let shape = ValueType::Tensor(node.attr_dtype_or("Tshape", DType::I32)?);
    Ok(OpSignature::new(vec![shape, U64, U64, I32], vec![ValueType::Tensor(node.attr_dtype("dtype")?)]))
}

struct KeyedKernel<D> {
    dtype: DType,
    _distribution: std::marker::PhantomData<D>,
}

fn build_v2<D: Distribution>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(KeyedKernel::<D> { dtype: float_dtype(init.node)?, _distribution: std::marker::PhantomData }))
}

impl<D: Distribution> OpKernel for KeyedKernel<D> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = output_shape(ctx.input(0)?)?;
        let philox = from_key_counter(ctx.input(1)?, ctx.input(2)?, ctx.input(3)?)?;
        let out = fill::<D>(philox, shape, self.dtype)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// `[Tshape, uint64, uint64, int32, dtype, dtype] -> [dtype]`.
fn uniform_int_signature(node: &NodeSpec) -> Result<OpSignature> {
    let shape = ValueType::Tensor(node.attr_dtype_or("Tshape", DType::I32)?);
    let t = ValueType::Tensor(node.attr_dtype("dtype")?);
    Ok(OpSignature::new(vec![shape, U64, U64, I32, t, t], vec![t]))
}

struct UniformInt {
    dtype: DType,
}

fn build_uniform_int(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("dtype")?;
    if !matches!(dtype, DType::I32 | DType::I64 | DType::U64) {
        return Err(unsupported_dtype(&init.node.op, dtype, &[DType::I32, DType::I64, DType::U64]));
    }
    Ok(Box::new(UniformInt { dtype }))
}

impl OpKernel for UniformInt {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = output_shape(ctx.input(0)?)?;
        let philox = from_key_counter(ctx.input(1)?, ctx.input(2)?, ctx.input(3)?)?;
        let out = uniform_ints(philox, shape, self.dtype, ctx.input(4)?, ctx.input(5)?)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// Integers in `[lo, hi)` from `philox`, as TensorFlow's
/// `UniformDistribution` draws them (shared by the stateless and the
/// stateful op): `lo + bits % (hi - lo)`, four 32-bit draws per block for
/// int32, two 64-bit ones (low word first) for int64 and uint64.
pub(super) fn uniform_ints(mut philox: Philox, shape: Shape, dtype: DType, lo: &Tensor, hi: &Tensor) -> Result<Tensor> {
    if lo.rank() != 0 || hi.rank() != 0 {
        bail!(invalid_argument, "minval and maxval must be scalars, got {} and {}", lo.shape(), hi.shape());
    }
    Ok(match dtype {
        DType::I32 => {
            let (lo, hi) = (lo.scalar_value::<i32>()?, hi.scalar_value::<i32>()?);
            let range = check_range(lo as i64, hi as i64, shape.num_elements())? as u32;
            Tensor::build(shape, |out: &mut [i32]| {
                for chunk in out.chunks_mut(4) {
                    let block = philox.next_block();
                    for (o, &bits) in chunk.iter_mut().zip(&block) {
                        *o = lo.wrapping_add((bits % range.max(1)) as i32);
                    }
                }
            })?
        }
        dtype => {
            let (lo, hi) = if dtype == DType::I64 {
                (lo.scalar_value::<i64>()? as u64, hi.scalar_value::<i64>()? as u64)
            } else {
                (lo.scalar_value::<u64>()?, hi.scalar_value::<u64>()?)
            };
            let range = if dtype == DType::I64 {
                check_range(lo as i64, hi as i64, shape.num_elements())?
            } else if lo < hi || shape.num_elements() == 0 {
                hi.wrapping_sub(lo)
            } else {
                bail!(invalid_argument, "Need minval < maxval: {lo} >= {hi}");
            };
            let mut draws = |out: &mut [u64]| {
                for chunk in out.chunks_mut(2) {
                    let block = philox.next_block();
                    for (i, o) in chunk.iter_mut().enumerate() {
                        let bits = block[2 * i] as u64 | (block[2 * i + 1] as u64) << 32;
                        *o = lo.wrapping_add(bits % range.max(1));
                    }
                }
            };
            if dtype == DType::I64 {
                let mut values = vec![0u64; shape.num_elements()];
                draws(&mut values);
                Tensor::from_map(shape, &values, |v| v as i64)?
            } else {
                Tensor::build(shape, draws)?
            }
        }
    })
}

/// `maxval - minval` as an unsigned range, after TensorFlow's check.
fn check_range(lo: i64, hi: i64, count: usize) -> Result<u64> {
    if count > 0 && lo >= hi {
        bail!(invalid_argument, "Need minval < maxval: {lo} >= {hi}");
    }
    Ok((hi as u64).wrapping_sub(lo as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn run(n: &NodeSpec, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let values = inputs.into_iter().map(Value::Tensor).collect();
        run_kernel_once(n, values, &ResourceMgr::default())?.into_iter().map(Value::into_tensor).collect()
    }
    fn f64s(t: &Tensor) -> Vec<f64> {
        t.to_f64_vec()
    }
    fn close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{got:?} vs {want:?}");
        }
    }
    fn seed() -> Tensor {
        Tensor::from_slice::<i64>([2], &[1, 2]).unwrap()
    }
    fn key_counter() -> (Tensor, Tensor) {
        let mut out = run(&node("StatelessRandomGetKeyCounter"), vec![seed()]).unwrap();
        let counter = out.pop().unwrap();
        (out.pop().unwrap(), counter)
    }
    fn v2(op: &str, dtype: DType, n: i32) -> Vec<f64> {
        let (key, counter) = key_counter();
        let spec = node(op).attr("dtype", ty(dtype));
        let inputs = vec![Tensor::from_slice::<i32>([1], &[n]).unwrap(), key, counter, Tensor::scalar(ALG_PHILOX)];
        f64s(&run(&spec, inputs).unwrap()[0])
    }

    // Every expected value below is TensorFlow 2.21's for seed [1, 2].
    const UNIFORM: [f64; 5] =
        [0.8440604209899902, 0.19204533100128174, 0.9962232112884521, 0.16038739681243896, 0.27199018001556396];

    #[test]
    fn keys_and_counters_match_tensorflow_s() {
        let (key, counter) = key_counter();
        assert_eq!(key.as_slice::<u64>().unwrap(), &[10413732777507651514]);
        assert_eq!(counter.as_slice::<u64>().unwrap(), &[0, 17830669156045600267]);
        let negative =
            run(&node("StatelessRandomGetKeyCounter"), vec![Tensor::from_slice::<i32>([2], &[-1, 7]).unwrap()]);
        let negative = negative.unwrap();
        assert_eq!(negative[0].as_slice::<u64>().unwrap(), &[13877904517395416532]);
        assert_eq!(negative[1].as_slice::<u64>().unwrap(), &[0, 6422008873046979771]);
        assert_eq!(run(&node("StatelessRandomGetAlg"), vec![]).unwrap()[0].scalar_value::<i32>().unwrap(), 1);
    }

    #[test]
    fn draws_match_tensorflow_s() {
        close(&v2("StatelessRandomUniformV2", DType::F32, 5), &UNIFORM);
        close(
            &v2("StatelessRandomUniformV2", DType::F64, 3),
            &[0.7524837538451801, 0.9697857725627486, 0.17592233912897481],
        );
        let normal =
            [0.544110119342804, 0.20738030970096588, 0.0735643208026886, 0.04643455147743225, -1.301589846611023];
        close(&v2("StatelessRandomNormalV2", DType::F32, 5), &normal);
        let truncated =
            [0.544110119342804, 0.20738030970096588, 0.0735643208026886, 0.04643455147743225, 0.16820591688156128];
        close(&v2("StatelessTruncatedNormalV2", DType::F32, 5), &truncated);
        let v1 = node("StatelessRandomUniform").attr("dtype", ty(DType::F32)).attr("Tseed", ty(DType::I64));
        close(&f64s(&run(&v1, vec![Tensor::from_slice::<i32>([1], &[5]).unwrap(), seed()]).unwrap()[0]), &UNIFORM);
    }

    #[test]
    fn integer_draws_match_tensorflow_s() {
        let (key, counter) = key_counter();
        let int = |dtype: DType, n: i32, lo: Tensor, hi: Tensor| {
            let spec = node("StatelessRandomUniformIntV2").attr("dtype", ty(dtype));
            let shape = Tensor::from_slice::<i32>([1], &[n]).unwrap();
            run(&spec, vec![shape, key.clone(), counter.clone(), Tensor::scalar(ALG_PHILOX), lo, hi])
        };
        let out = int(DType::I32, 6, Tensor::scalar(-3i32), Tensor::scalar(10i32)).unwrap();
        assert_eq!(out[0].as_slice::<i32>().unwrap(), &[7, -3, -2, -2, 6, 9]);
        let out = int(DType::I64, 4, Tensor::scalar(-3i64), Tensor::scalar(1_000_000_000_000i64)).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[146258219801, 637753188140, 318111882239, 515999429111]);
        let err = int(DType::I32, 2, Tensor::scalar(5i32), Tensor::scalar(5i32)).unwrap_err();
        assert!(err.message.contains("Need minval < maxval"), "{}", err.message);
    }

    #[test]
    fn only_philox_is_offered() {
        let (key, counter) = key_counter();
        let spec = node("StatelessRandomUniformV2").attr("dtype", ty(DType::F32));
        let shape = Tensor::from_slice::<i32>([1], &[2]).unwrap();
        let auto = run(&spec, vec![shape.clone(), key.clone(), counter.clone(), Tensor::scalar(ALG_AUTO_SELECT)]);
        close(&f64s(&auto.unwrap()[0]), &UNIFORM[..2]);
        let threefry = run(&spec, vec![shape, key, counter, Tensor::scalar(2i32)]).unwrap_err();
        assert_eq!(threefry.message, "Unsupported algorithm id: 2");
    }
}
