//! Seeded random ops as TensorFlow's CPU kernels compute them:
//! `RandomUniform`, `RandomStandardNormal`, `TruncatedNormal` (float32,
//! float64) and `RandomUniformInt` (int32, int64), so a TF1 graph's
//! initializers and `tf.random.uniform(..., dtype=tf.int32)` give
//! TensorFlow's numbers; categorical draws and shuffles are in
//! [`sampling`], gamma and Poisson draws in [`gamma`].
//!
//! Owns: the Philox4x32-10 counter generator, TensorFlow's seeding (`seed`,
//! `seed2`; both 0 picks a random key), its reservation of 256 samples per
//! output on every run (so run N of a kernel draws what TensorFlow's draws),
//! and its float conversions (Box-Muller, the truncation at 2). Must not
//! share a generator between kernels: each node keeps its own, as in
//! TensorFlow. The stateless ops, which derive their generator from a seed
//! on every run, are in [`stateless`].

mod gamma;
mod sampling;
pub mod stateless;

use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values, unsupported_dtype};
use crate::tensor::{DType, Shape, Tensor};
use parking_lot::Mutex;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("RandomUniform", random_signature, build_random::<Uniform>).stateful(),
    OpDef::kernel("RandomStandardNormal", random_signature, build_random::<Normal>).stateful(),
    OpDef::kernel("TruncatedNormal", random_signature, build_random::<TruncatedNormal>).stateful(),
    OpDef::kernel("RandomUniformInt", uniform_int_signature, build_uniform_int).stateful(),
    OpDef::kernel("Multinomial", sampling::multinomial_signature::<false>, sampling::build_multinomial::<false>)
        .stateful(),
    OpDef::kernel("StatelessMultinomial", sampling::multinomial_signature::<true>, sampling::build_multinomial::<true>),
    OpDef::kernel("RandomShuffle", sampling::shuffle_signature, sampling::build_shuffle).stateful(),
    OpDef::kernel("RandomGamma", gamma::stateful_signature, gamma::build_stateful).stateful(),
    OpDef::kernel("RandomPoisson", gamma::stateful_signature, gamma::build_stateful).stateful(),
    OpDef::kernel("RandomPoissonV2", gamma::stateful_signature, gamma::build_stateful).stateful(),
    OpDef::kernel("StatelessRandomGammaV2", gamma::stateless_signature, gamma::build_stateless),
    OpDef::kernel("StatelessRandomGammaV3", gamma::stateless_signature, gamma::build_stateless),
    OpDef::kernel("StatelessRandomPoisson", gamma::stateless_signature, gamma::build_stateless),
];

/// Philox4x32 with 10 rounds: a 128-bit counter under a 64-bit key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Philox {
    counter: [u32; 4],
    key: [u32; 2],
}

impl Philox {
    /// TensorFlow's `PhiloxRandom(seed_lo, seed_hi)`.
    pub fn new(seed_lo: u64, seed_hi: u64) -> Philox {
        Philox {
            counter: [0, 0, seed_hi as u32, (seed_hi >> 32) as u32],
            key: [seed_lo as u32, (seed_lo >> 32) as u32],
        }
    }

    /// A generator at `counter` under `key`, as TensorFlow's
    /// `PhiloxRandom(counter, key)`.
    pub fn from_parts(key: [u32; 2], counter: [u32; 4]) -> Philox {
        Philox { counter, key }
    }

    /// The key and the counter.
    pub fn parts(&self) -> ([u32; 2], [u32; 4]) {
        (self.key, self.counter)
    }

    /// Moves the counter `count` 128-bit samples on.
    pub fn skip(&mut self, count: u64) {
        let (lo, mut hi) = (count as u32, (count >> 32) as u32);
        self.counter[0] = self.counter[0].wrapping_add(lo);
        if self.counter[0] < lo {
            hi = hi.wrapping_add(1);
        }
        self.counter[1] = self.counter[1].wrapping_add(hi);
        if self.counter[1] < hi {
            self.counter[2] = self.counter[2].wrapping_add(1);
            if self.counter[2] == 0 {
                self.counter[3] = self.counter[3].wrapping_add(1);
            }
        }
    }

    /// The next four 32-bit samples.
    pub fn next_block(&mut self) -> [u32; 4] {
        const M0: u64 = 0xD251_1F53;
        const M1: u64 = 0xCD9E_8D57;
        const W0: u32 = 0x9E37_79B9;
        const W1: u32 = 0xBB67_AE85;
        let mut ctr = self.counter;
        let mut key = self.key;
        for round in 0..10 {
            if round > 0 {
                key = [key[0].wrapping_add(W0), key[1].wrapping_add(W1)];
            }
            let p0 = M0 * ctr[0] as u64;
            let p1 = M1 * ctr[2] as u64;
            ctr = [(p1 >> 32) as u32 ^ ctr[1] ^ key[0], p1 as u32, (p0 >> 32) as u32 ^ ctr[3] ^ key[1], p0 as u32];
        }
        self.skip(1);
        ctr
    }
}

/// `[1, 2)` from 23 random mantissa bits, minus 1.
fn unit_f32(x: u32) -> f32 {
    f32::from_bits((127 << 23) | (x & 0x7f_ffff)) - 1.0
}

/// `[1, 2)` from 52 random mantissa bits, minus 1.
fn unit_f64(x0: u32, x1: u32) -> f64 {
    let mantissa = ((x0 as u64 & 0xf_ffff) << 32) | x1 as u64;
    f64::from_bits((1023 << 52) | mantissa) - 1.0
}

fn box_muller_f32(x0: u32, x1: u32) -> [f32; 2] {
    let u1 = unit_f32(x0).max(1.0e-7);
    // TensorFlow multiplies by M_PI, a double, before narrowing.
    let v1 = (2.0 * std::f64::consts::PI * unit_f32(x1) as f64) as f32;
    let u2 = (-2.0f32 * u1.ln()).sqrt();
    [v1.sin() * u2, v1.cos() * u2]
}

fn box_muller_f64(x: [u32; 4]) -> [f64; 2] {
    let u1 = unit_f64(x[0], x[1]).max(1.0e-7);
    let v1 = 2.0 * std::f64::consts::PI * unit_f64(x[2], x[3]);
    let u2 = (-2.0 * u1.ln()).sqrt();
    [v1.sin() * u2, v1.cos() * u2]
}

/// One of TensorFlow's distributions: how a group of outputs is drawn.
trait Distribution: Send + Sync + 'static {
    /// Fills `out` from `base`, the generator reserved for this run.
    fn fill_f32(base: Philox, out: &mut [f32]);
    fn fill_f64(base: Philox, out: &mut [f64]);
}

/// Fixed draws per group: group `i` uses the counter `base + i`.
fn fill_groups<T: Copy, const G: usize>(mut philox: Philox, out: &mut [T], group: impl Fn([u32; 4]) -> [T; G]) {
    for chunk in out.chunks_mut(G) {
        let samples = group(philox.next_block());
        chunk.copy_from_slice(&samples[..chunk.len()]);
    }
}

struct Uniform;

impl Distribution for Uniform {
    fn fill_f32(base: Philox, out: &mut [f32]) {
        fill_groups(base, out, |x| x.map(unit_f32));
    }

    fn fill_f64(base: Philox, out: &mut [f64]) {
        fill_groups(base, out, |x| [unit_f64(x[0], x[1]), unit_f64(x[2], x[3])]);
    }
}

struct Normal;

impl Distribution for Normal {
    fn fill_f32(base: Philox, out: &mut [f32]) {
        fill_groups(base, out, |x| {
            let [a, b] = box_muller_f32(x[0], x[1]);
            let [c, d] = box_muller_f32(x[2], x[3]);
            [a, b, c, d]
        });
    }

    fn fill_f64(base: Philox, out: &mut [f64]) {
        fill_groups(base, out, box_muller_f64);
    }
}

/// Normal samples with |x| ≥ 2 redrawn. Each group of outputs starts 256
/// counters after the previous one, so groups are independent of how many
/// draws each needed; within a group the four words of each counter are
/// used one at a time.
struct TruncatedNormal;

/// Counter steps reserved per output group of a variable-draw distribution.
const TRUNCATED_GROUP_SKIP: u64 = 256;

struct SingleSamples {
    philox: Philox,
    words: [u32; 4],
    used: usize,
}

impl SingleSamples {
    fn new(philox: Philox) -> SingleSamples {
        SingleSamples { philox, words: [0; 4], used: 4 }
    }

    fn next(&mut self) -> u32 {
        if self.used == 4 {
            self.words = self.philox.next_block();
            self.used = 0;
        }
        self.used += 1;
        self.words[self.used - 1]
    }
}

fn fill_truncated<T: Copy + Default, const G: usize>(
    base: Philox,
    out: &mut [T],
    mut draw: impl FnMut(&mut SingleSamples) -> [T; 2],
    inside: impl Fn(T) -> bool,
) {
    for (index, chunk) in out.chunks_mut(G).enumerate() {
        let mut philox = base;
        philox.skip(index as u64 * TRUNCATED_GROUP_SKIP);
        let mut samples = SingleSamples::new(philox);
        let mut group = [T::default(); G];
        let mut filled = 0;
        // A draw lands inside with probability 0.95, so this ends.
        while filled < G {
            for value in draw(&mut samples) {
                if filled < G && inside(value) {
                    group[filled] = value;
                    filled += 1;
                }
            }
        }
        chunk.copy_from_slice(&group[..chunk.len()]);
    }
}

impl Distribution for TruncatedNormal {
    fn fill_f32(base: Philox, out: &mut [f32]) {
        fill_truncated::<f32, 4>(base, out, |s| box_muller_f32(s.next(), s.next()), |v| v.abs() < 2.0);
    }

    fn fill_f64(base: Philox, out: &mut [f64]) {
        fill_truncated::<f64, 2>(
            base,
            out,
            |s| box_muller_f64([s.next(), s.next(), s.next(), s.next()]),
            |v| v.abs() < 2.0,
        );
    }
}

fn random_signature(node: &NodeSpec) -> Result<OpSignature> {
    let shape = node.attr_dtype("T")?;
    Ok(OpSignature::new(vec![ValueType::Tensor(shape)], vec![ValueType::Tensor(node.attr_dtype("dtype")?)]))
}

struct RandomKernel<D> {
    dtype: DType,
    /// The generator's state between runs: each run reserves 256 counters
    /// per output, as TensorFlow's `ReserveRandomOutputs` does.
    generator: Mutex<Philox>,
    _distribution: std::marker::PhantomData<D>,
}

/// Samples reserved per output on every run.
const RESERVED_PER_OUTPUT: u64 = 256;

fn build_random<D: Distribution>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("dtype")?;
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(unsupported_dtype(&node.op, dtype, &[DType::F32, DType::F64]));
    }
    Ok(Box::new(RandomKernel::<D> {
        dtype,
        generator: Mutex::new(seeded_generator(node)?),
        _distribution: std::marker::PhantomData,
    }))
}

/// A random op's `shape` input as the shape of its output.
fn output_shape(t: &Tensor) -> Result<Shape> {
    if t.rank() > 1 {
        bail!(invalid_argument, "shape must be a vector of {{int32,int64}}, got shape {}", t.shape());
    }
    let mut dims = Vec::new();
    for &d in index_values(t, "shape")?.iter() {
        if d < 0 {
            bail!(invalid_argument, "Dimension {d} must be >= 0");
        }
        dims.push(d as usize);
    }
    Ok(Shape::from_vec(dims))
}

/// A node's generator from its `seed` and `seed2` (both 0: unpredictable).
fn seeded_generator(node: &NodeSpec) -> Result<Philox> {
    let (seed, seed2) = (node.attr_int_or("seed", 0)?, node.attr_int_or("seed2", 0)?);
    let (seed, seed2) = if seed == 0 && seed2 == 0 { os_random_seeds() } else { (seed as u64, seed2 as u64) };
    Ok(Philox::new(seed, seed2))
}

/// The generator for a run of `outputs` outputs, its counters reserved
/// (moved on by 256 per output, as TensorFlow's `ReserveRandomOutputs`).
fn reserve(generator: &Mutex<Philox>, outputs: usize) -> Philox {
    reserve_blocks(generator, (outputs as u64).saturating_mul(RESERVED_PER_OUTPUT))
}

/// The generator as it stands, moved on by `blocks` 128-bit samples for
/// the next run (TensorFlow's `ReserveSamples128`).
fn reserve_blocks(generator: &Mutex<Philox>, blocks: u64) -> Philox {
    let mut generator = generator.lock();
    let base = *generator;
    generator.skip(blocks);
    base
}

/// What TensorFlow does for an unseeded op: a key nobody can predict.
fn os_random_seeds() -> (u64, u64) {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    let mut a = state.build_hasher();
    a.write_u64(1);
    let mut b = state.build_hasher();
    b.write_u64(2);
    (a.finish(), b.finish())
}

impl<D: Distribution> OpKernel for RandomKernel<D> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = output_shape(ctx.input(0)?)?;
        let base = reserve(&self.generator, shape.num_elements());
        let out = match self.dtype {
            DType::F32 => Tensor::build(shape, |out: &mut [f32]| D::fill_f32(base, out))?,
            _ => Tensor::build(shape, |out: &mut [f64]| D::fill_f64(base, out))?,
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

/// `[T, Tout, Tout] -> [Tout]`: shape, minval, maxval.
fn uniform_int_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("Tout")?);
    Ok(OpSignature::new(vec![ValueType::Tensor(node.attr_dtype("T")?), t, t], vec![t]))
}

/// `RandomUniformInt`: TensorFlow's integer draws (those of
/// `StatelessRandomUniformIntV2`) from this node's own generator.
struct UniformIntKernel {
    dtype: DType,
    generator: Mutex<Philox>,
}

fn build_uniform_int(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("Tout")?;
    if !matches!(dtype, DType::I32 | DType::I64) {
        return Err(unsupported_dtype(&node.op, dtype, &[DType::I32, DType::I64]));
    }
    Ok(Box::new(UniformIntKernel { dtype, generator: Mutex::new(seeded_generator(node)?) }))
}

impl OpKernel for UniformIntKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = output_shape(ctx.input(0)?)?;
        let base = reserve(&self.generator, shape.num_elements());
        let out = stateless::uniform_ints(base, shape, self.dtype, ctx.input(1)?, ctx.input(2)?)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn random(op: &str, dtype: DType, seed: i64, seed2: i64) -> NodeSpec {
        node(op)
            .attr("T", ty(DType::I32))
            .attr("dtype", ty(dtype))
            .attr("seed", crate::graph::spec::AttrValue::Int(seed))
            .attr("seed2", crate::graph::spec::AttrValue::Int(seed2))
    }

    /// Builds `spec`'s kernel once, for runs that share its generator.
    fn kernel(spec: &NodeSpec) -> Box<dyn OpKernel> {
        crate::ops::testing::build(spec).unwrap()
    }

    fn run(kernel: &dyn OpKernel, n: i32) -> Tensor {
        crate::ops::testing::run_built(kernel, &[Tensor::from_slice([1], &[n]).unwrap()]).unwrap()
    }

    fn close(got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= tol * w.abs().max(1.0), "{got:?} vs {want:?}");
        }
    }

    /// Two runs of one kernel, as TensorFlow 2.21 gives them
    /// (`tf.compat.v1.set_random_seed(42)`, op seeds 7, 9, 11).
    /// Op, dtype, seed2, outputs, and TensorFlow's values for two runs.
    type Case = (&'static str, DType, i64, usize, [&'static [f64]; 2]);

    #[test]
    fn runs_match_tensorflow() {
        let cases: [Case; 4] = [
            (
                "RandomUniform",
                DType::F32,
                7,
                6,
                [
                    &[
                        0.8627676963806152,
                        0.6567625999450684,
                        0.9905458688735962,
                        0.9031013250350952,
                        0.7336807250976562,
                        0.12016558647155762,
                    ],
                    &[
                        0.46504366397857666,
                        0.40202271938323975,
                        0.5526877641677856,
                        0.9434213638305664,
                        0.7326618432998657,
                        0.13764488697052002,
                    ],
                ],
            ),
            (
                "RandomUniform",
                DType::F64,
                7,
                3,
                [
                    &[0.9021424253597159, 0.9243672693206022, 0.8694461586329445],
                    &[0.7718061617458547, 0.08586815553361671, 0.03193709352212437],
                ],
            ),
            (
                "RandomStandardNormal",
                DType::F32,
                9,
                5,
                [
                    &[
                        0.007816854864358902,
                        -0.6753259301185608,
                        0.7894721627235413,
                        0.41292282938957214,
                        0.7498876452445984,
                    ],
                    &[
                        -0.7293135523796082,
                        -0.4915108382701874,
                        0.7046801447868347,
                        0.45095333456993103,
                        -0.11432256549596786,
                    ],
                ],
            ),
            (
                "TruncatedNormal",
                DType::F32,
                11,
                6,
                [
                    &[
                        -0.31607842445373535,
                        1.1453529596328735,
                        0.2621998190879822,
                        0.10530535131692886,
                        -0.941348671913147,
                        -0.24107351899147034,
                    ],
                    &[
                        0.06334861367940903,
                        -0.21921342611312866,
                        0.31829509139060974,
                        0.5451289415359497,
                        -0.4187553822994232,
                        0.31624704599380493,
                    ],
                ],
            ),
        ];
        for (op, dtype, seed2, n, runs) in cases {
            let spec = random(op, dtype, 42, seed2);
            let kernel = kernel(&spec);
            for want in runs {
                let out = run(&*kernel, n as i32);
                let got: Vec<f64> = match dtype {
                    DType::F32 => out.as_slice::<f32>().unwrap().iter().map(|&v| v as f64).collect(),
                    _ => out.as_slice::<f64>().unwrap().to_vec(),
                };
                close(&got, want, if dtype == DType::F32 { 1e-6 } else { 1e-14 });
            }
        }
    }

    #[test]
    fn bad_shapes_and_dtypes_are_errors() {
        let err = run1(&random("RandomUniform", DType::F32, 1, 2), &[Tensor::from_slice([2], &[2, -1]).unwrap()])
            .unwrap_err();
        assert!(err.message.contains("Dimension -1 must be >= 0"), "{err}");
        let err =
            run1(&random("RandomUniform", DType::F32, 1, 2), &[Tensor::from_slice([1, 1], &[2]).unwrap()]).unwrap_err();
        assert!(err.message.contains("shape must be a vector"), "{err}");
        let err =
            run1(&random("RandomUniform", DType::I32, 1, 2), &[Tensor::from_slice([1], &[2]).unwrap()]).unwrap_err();
        assert!(err.message.contains("int32"), "{err}");
    }

    #[test]
    fn unseeded_ops_differ_and_skip_carries() {
        let a = run1(&random("RandomUniform", DType::F32, 0, 0), &[Tensor::from_slice([1], &[8]).unwrap()]).unwrap();
        let b = run1(&random("RandomUniform", DType::F32, 0, 0), &[Tensor::from_slice([1], &[8]).unwrap()]).unwrap();
        assert_ne!(a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
        let mut p = Philox { counter: [u32::MAX, u32::MAX, u32::MAX, 0], key: [0, 0] };
        p.skip(1);
        assert_eq!(p.counter, [0, 0, 0, 1]);
    }

    #[test]
    fn uniform_ints_match_tensorflow() {
        // tf.raw_ops.RandomUniformInt(shape=[7], minval=-3, maxval=10, seed=4, seed2=9)
        // in TensorFlow 2.21, and the int64 form with maxval 10**12.
        let op = |t: DType| {
            node("RandomUniformInt")
                .attr("T", ty(DType::I32))
                .attr("Tout", ty(t))
                .attr("seed", AttrValue::Int(4))
                .attr("seed2", AttrValue::Int(9))
        };
        let run = |t: DType, n: i32, lo: Tensor, hi: Tensor| {
            let shape = Tensor::from_slice::<i32>([1].as_slice(), &[n]).unwrap();
            crate::ops::run_kernel_once(
                &op(t),
                vec![shape, lo, hi].into_iter().map(crate::ops::Value::Tensor).collect(),
                &Default::default(),
            )
            .map(|mut v| v.remove(0).into_tensor().unwrap())
        };
        let got = run(DType::I32, 7, Tensor::scalar(-3i32), Tensor::scalar(10i32)).unwrap();
        assert_eq!(got.as_slice::<i32>().unwrap(), [5, -3, 9, -2, 2, 6, 6]);
        let got = run(DType::I64, 5, Tensor::scalar(-3i64), Tensor::scalar(1_000_000_000_000i64)).unwrap();
        assert_eq!(
            got.as_slice::<i64>().unwrap(),
            [496717683878, 864498483903, 906975209951, 863096495596, 237887028649]
        );
        let e = run(DType::I32, 5, Tensor::scalar(3i32), Tensor::scalar(3i32)).unwrap_err();
        assert!(e.message.contains("Need minval < maxval"), "{e}");
    }
}
