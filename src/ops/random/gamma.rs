//! Gamma and Poisson draws with TensorFlow's numbers: `RandomGamma`
//! (`tf.random.gamma`), `StatelessRandomGammaV2`/`V3`
//! (`tf.random.stateless_gamma`), `RandomPoisson`/`RandomPoissonV2`
//! (`tf.random.poisson`) and `StatelessRandomPoisson`
//! (`tf.random.stateless_poisson`).
//!
//! Owns: the per-output streams (output `i` draws from the run's generator
//! moved on by 256·i blocks, so a sample does not depend on how many
//! draws another one rejected), Marsaglia and Tsang's gamma rejection
//! (with the uniform power for shapes below 1 and the exponential at shape
//! 1), Knuth's Poisson product below rate 10 and Hörmann's transformed
//! rejection above, all in f64 as TensorFlow computes them, and the
//! layouts (samples major, one column per shape or rate). Must not keep
//! state beyond the stateful ops' own generators.
//!
//! Where TensorFlow would loop forever (a NaN Poisson rate, an infinite or
//! out-of-range one for an integer output) the op fails naming the rate
//! instead.

use super::{Philox, RESERVED_PER_OUTPUT, box_muller_f64, output_shape, reserve, seeded_generator, unit_f64};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Shape, Tensor};
use parking_lot::Mutex;

const FLOATS: &[DType] = &[DType::F32, DType::F64];
const NUMBERS: &[DType] = &[DType::F32, DType::F64, DType::I32, DType::I64];

/// One distribution's pairs of f64 draws, handed out last first, as
/// TensorFlow's `RandomSampleBuffer` (and its older `UNIFORM` macro) does.
struct PairBuffer {
    pair: [f64; 2],
    left: usize,
    draw: fn([u32; 4]) -> [f64; 2],
}

impl PairBuffer {
    fn new(draw: fn([u32; 4]) -> [f64; 2]) -> PairBuffer {
        PairBuffer { pair: [0.0; 2], left: 0, draw }
    }

    fn next(&mut self, philox: &mut Philox) -> f64 {
        if self.left == 0 {
            self.pair = (self.draw)(philox.next_block());
            self.left = 2;
        }
        self.left -= 1;
        self.pair[self.left]
    }
}

fn uniform_pair(x: [u32; 4]) -> [f64; 2] {
    [unit_f64(x[0], x[1]), unit_f64(x[2], x[3])]
}

/// Output `index`'s own stream: the run's generator moved on by 256
/// blocks per earlier output.
fn stream(base: Philox, index: usize) -> Philox {
    let mut philox = base;
    philox.skip(RESERVED_PER_OUTPUT * index as u64);
    philox
}

/// Rejection rounds after which a draw gives up (TensorFlow's loops have
/// no bound; each round is accepted with probability above 0.9, so this
/// is never reached by a finite shape).
const MAX_ROUNDS: usize = 1 << 20;

/// A Gamma(alpha, 1) draw from `philox`.
fn gamma_draw(mut philox: Philox, alpha: f64) -> f64 {
    if alpha == 1.0 {
        let u = uniform_pair(philox.next_block())[1];
        return -(-u).ln_1p();
    }
    let below_one = alpha < 1.0;
    let d = alpha + if below_one { 2.0 / 3.0 } else { -1.0 / 3.0 };
    let c = 1.0 / 3.0 / d.sqrt();
    let mut normal = PairBuffer::new(box_muller_f64);
    let mut uniform = PairBuffer::new(uniform_pair);
    for _ in 0..MAX_ROUNDS {
        let x = normal.next(&mut philox);
        let mut v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        v = v * v * v;
        let u = uniform.next(&mut philox);
        // The squeeze first: it spares the logs for most draws.
        if u < 1.0 - 0.0331 * (x * x) * (x * x) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            let mut sample = d * v;
            if below_one {
                sample *= uniform.next(&mut philox).powf(1.0 / alpha);
            }
            return sample;
        }
    }
    f64::NAN
}

/// Where an integer output's draws stop fitting (TensorFlow's
/// `NumTraits<U>::highest()`).
fn highest(dtype: DType) -> f64 {
    match dtype {
        DType::I32 => f64::from(i32::MAX),
        DType::I64 => i64::MAX as f64,
        DType::F32 => f64::from(f32::MAX),
        _ => f64::MAX,
    }
}

/// A Poisson(rate) draw from `philox`, or `None` where TensorFlow would
/// never return (see the module header).
fn poisson_draw(mut philox: Philox, rate: f64, highest: f64) -> Option<f64> {
    let mut uniform = PairBuffer::new(uniform_pair);
    if rate < 10.0 {
        // The count of uniforms whose product stays above e^-rate.
        let floor = (-rate).exp();
        let (mut product, mut count) = (1.0, 0.0);
        loop {
            product *= uniform.next(&mut philox);
            if product <= floor && count <= highest {
                return Some(count);
            }
            count += 1.0;
        }
    }
    if rate.is_nan() || (rate.is_infinite() && highest < f64::MAX) {
        return None;
    }
    if rate.is_infinite() {
        return Some(f64::INFINITY);
    }
    let log_rate = rate.ln();
    let b = 0.931 + 2.53 * rate.sqrt();
    let a = -0.059 + 0.02483 * b;
    let inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
    for _ in 0..MAX_ROUNDS {
        let u = uniform.next(&mut philox) - 0.5;
        let v = uniform.next(&mut philox);
        let u_shifted = 0.5 - u.abs();
        let k = ((2.0 * a / u_shifted + b) * u + rate + 0.43).floor();
        if k > highest {
            continue;
        }
        if u_shifted >= 0.07 && v <= 0.9277 - 3.6224 / (b - 2.0) {
            return Some(k);
        }
        if k < 0.0 || (u_shifted < 0.013 && v > u_shifted) {
            continue;
        }
        let s = (v * inv_alpha / (a / (u_shifted * u_shifted) + b)).ln();
        let t = -rate + k * log_rate - crate::ops::math::lgamma(k + 1.0);
        if s <= t {
            return Some(k);
        }
    }
    None
}

/// Draws one value per output of a `samples × params` layout: output
/// `sample * params.len() + p` comes from stream `p * samples + sample`.
fn draw_all(
    base: Philox,
    params: &[f64],
    samples: usize,
    draw: impl Fn(Philox, f64) -> Result<f64>,
) -> Result<Vec<f64>> {
    let mut out = vec![0.0; samples * params.len()];
    for (p, &param) in params.iter().enumerate() {
        for sample in 0..samples {
            out[sample * params.len() + p] = draw(stream(base, p * samples + sample), param)?;
        }
    }
    Ok(out)
}

/// A numeric tensor's values as f64.
fn as_f64s(t: &Tensor) -> Result<Vec<f64>> {
    Ok(match t.dtype() {
        DType::F32 => t.as_slice::<f32>()?.iter().map(|&v| f64::from(v)).collect(),
        DType::F64 => t.as_slice::<f64>()?.to_vec(),
        DType::I32 => t.as_slice::<i32>()?.iter().map(|&v| f64::from(v)).collect(),
        DType::I64 => t.as_slice::<i64>()?.iter().map(|&v| v as f64).collect(),
        other => bail!(invalid_argument, "expected a number tensor, got {other:?}"),
    })
}

/// `values` as a tensor of `dtype` (integers truncated, as C++'s casts).
fn of_dtype(shape: Shape, dtype: DType, values: &[f64]) -> Result<Tensor> {
    match dtype {
        DType::F32 => Tensor::from_slice(shape, &values.iter().map(|&v| v as f32).collect::<Vec<_>>()),
        DType::F64 => Tensor::from_slice(shape, values),
        DType::I32 => Tensor::from_slice(shape, &values.iter().map(|&v| v as i32).collect::<Vec<_>>()),
        _ => Tensor::from_slice(shape, &values.iter().map(|&v| v as i64).collect::<Vec<_>>()),
    }
}

/// Which draw an op makes, and for what output type.
#[derive(Clone, Copy)]
enum Draw {
    Gamma,
    Poisson { output: DType },
}

impl Draw {
    fn sample(self, philox: Philox, param: f64) -> Result<f64> {
        match self {
            Draw::Gamma => Ok(gamma_draw(philox, param)),
            Draw::Poisson { output } => match poisson_draw(philox, param, highest(output)) {
                Some(k) => Ok(k),
                None if output.is_float() && param.is_nan() => Ok(f64::NAN),
                None => bail!(
                    invalid_argument,
                    "Poisson rate {param} cannot be drawn as {output:?}: its samples do not fit (TensorFlow would loop forever)"
                ),
            },
        }
    }
}

/// The parameters' shape at the end of a stateless op's output shape, and
/// the samples per parameter.
fn stateless_layout(shape: &Shape, params: &Tensor) -> Result<usize> {
    let (dims, tail) = (shape.dims(), params.dims());
    if tail.len() > dims.len() || dims[dims.len() - tail.len()..] != *tail {
        bail!(invalid_argument, "Shape passed in must end with broadcasted shape.");
    }
    Ok(if params.num_elements() == 0 { 0 } else { shape.num_elements() / params.num_elements() })
}

// ---------------------------------------------------------------------------
// Kernels

/// `RandomGamma`: `[S, T] -> [T]`; `RandomPoisson`: `[S, dtype] ->
/// [dtype]`; `RandomPoissonV2`: `[S, R] -> [dtype]`.
pub(super) fn stateful_signature(node: &NodeSpec) -> Result<OpSignature> {
    let shape = ValueType::Tensor(node.attr_dtype_or("S", DType::I32)?);
    let (param, output) = stateful_dtypes(node)?;
    Ok(OpSignature::new(vec![shape, ValueType::Tensor(param)], vec![ValueType::Tensor(output)]))
}

/// A stateful op's parameter and output types.
fn stateful_dtypes(node: &NodeSpec) -> Result<(DType, DType)> {
    Ok(match node.op.as_str() {
        "RandomGamma" => (node.attr_dtype("T")?, node.attr_dtype("T")?),
        "RandomPoisson" => (node.attr_dtype("dtype")?, node.attr_dtype("dtype")?),
        _ => (node.attr_dtype_or("R", DType::F64)?, node.attr_dtype_or("dtype", DType::I64)?),
    })
}

struct StatefulDraws {
    draw: Draw,
    output: DType,
    generator: Mutex<Philox>,
}

pub(super) fn build_stateful(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let (param, output) = stateful_dtypes(node)?;
    let (draw, allowed_params, allowed_outputs) = if node.op == "RandomGamma" {
        (Draw::Gamma, FLOATS, FLOATS)
    } else {
        (Draw::Poisson { output }, NUMBERS, NUMBERS)
    };
    if !allowed_params.contains(&param) {
        return Err(unsupported_dtype(&node.op, param, allowed_params));
    }
    if !allowed_outputs.contains(&output) {
        return Err(unsupported_dtype(&node.op, output, allowed_outputs));
    }
    Ok(Box::new(StatefulDraws { draw, output, generator: Mutex::new(seeded_generator(node)?) }))
}

impl OpKernel for StatefulDraws {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let samples = output_shape(ctx.input(0)?)?;
        let params = ctx.input(1)?;
        let count = samples.num_elements();
        let shape = Shape::from_vec(samples.dims().iter().chain(params.dims()).copied().collect());
        let values = as_f64s(params)?;
        // Every run moves the generator on, even an empty one's.
        let base = reserve(&self.generator, count * values.len());
        let out = draw_all(base, &values, count, |philox, param| self.draw.sample(philox, param))?;
        ctx.set_output(0, of_dtype(shape, self.output, &out)?);
        Ok(())
    }
}

/// `StatelessRandomGammaV2`: `[Tshape, Tseed, dtype] -> [dtype]`;
/// `StatelessRandomGammaV3`: `[shape_dtype, uint64, uint64, int32, dtype]
/// -> [dtype]`; `StatelessRandomPoisson`: `[T, Tseed, Rtype] -> [dtype]`.
pub(super) fn stateless_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = |name: &str, default: DType| node.attr_dtype_or(name, default).map(ValueType::Tensor);
    let (param, output) = stateless_dtypes(node)?;
    let (param, output) = (ValueType::Tensor(param), ValueType::Tensor(output));
    let inputs = match node.op.as_str() {
        "StatelessRandomGammaV3" => {
            let u64s = ValueType::Tensor(DType::U64);
            vec![t("shape_dtype", DType::I32)?, u64s, u64s, ValueType::Tensor(DType::I32), param]
        }
        _ => vec![t("T", DType::I32)?, t("Tseed", DType::I64)?, param],
    };
    Ok(OpSignature::new(inputs, vec![output]))
}

/// A stateless op's parameter and output types.
fn stateless_dtypes(node: &NodeSpec) -> Result<(DType, DType)> {
    Ok(if node.op == "StatelessRandomPoisson" {
        (node.attr_dtype_or("Rtype", DType::F32)?, node.attr_dtype_or("dtype", DType::I64)?)
    } else {
        let dtype = node.attr_dtype_or("dtype", DType::F32)?;
        (dtype, dtype)
    })
}

struct StatelessDraws {
    draw: Draw,
    output: DType,
}

pub(super) fn build_stateless(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let (param, output) = stateless_dtypes(node)?;
    let (draw, allowed) =
        if node.op == "StatelessRandomPoisson" { (Draw::Poisson { output }, NUMBERS) } else { (Draw::Gamma, FLOATS) };
    for dtype in [param, output] {
        if !allowed.contains(&dtype) {
            return Err(unsupported_dtype(&node.op, dtype, allowed));
        }
    }
    Ok(Box::new(StatelessDraws { draw, output }))
}

impl OpKernel for StatelessDraws {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = output_shape(ctx.input(0)?)?;
        let (base, params) = if ctx.num_inputs() == 5 {
            (super::stateless::from_key_counter(ctx.input(1)?, ctx.input(2)?, ctx.input(3)?)?, ctx.input(4)?)
        } else {
            (super::stateless::from_seed(ctx.input(1)?)?, ctx.input(2)?)
        };
        let samples = stateless_layout(&shape, params)?;
        let values = as_f64s(params)?;
        let out = draw_all(base, &values, samples, |philox, param| self.draw.sample(philox, param))?;
        ctx.set_output(0, of_dtype(shape, self.output, &out)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{build, node, run_built, ty};

    fn stateful(op: &str, seed: i64, seed2: i64) -> NodeSpec {
        node(op).attr("seed", AttrValue::Int(seed)).attr("seed2", AttrValue::Int(seed2))
    }

    fn f64s(t: &Tensor) -> Vec<f64> {
        as_f64s(t).unwrap()
    }

    fn close(got: &[f64], want: &[f64], rel: f64) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= rel * w.abs().max(1e-30), "got {got:?}, want {want:?}");
        }
    }

    #[test]
    fn gamma_draws_are_tensorflow_s() {
        // TensorFlow 2.21: RandomGamma(shape=[4], alpha=[0.5, 1, 2.5, 30],
        // seed=7, seed2=9), float64, samples major.
        let spec = stateful("RandomGamma", 7, 9).attr("T", ty(DType::F64));
        let kernel = build(&spec).unwrap();
        let alphas = Tensor::from_slice::<f64>([4], &[0.5, 1.0, 2.5, 30.0]).unwrap();
        let out = run_built(kernel.as_ref(), &[Tensor::from_slice::<i32>([1], &[4]).unwrap(), alphas]).unwrap();
        assert_eq!(out.dims(), [4, 4]);
        #[rustfmt::skip]
        let want = [
            0.28937274468210267, 0.8560775417616417, 3.683665671209207, 28.944690055140725,
            0.0032317527835949464, 0.11150629473272906, 2.011518488780746, 32.04200364776612,
            0.8555123399600307, 0.11221799288040776, 0.7526626177562468, 34.008825056703465,
            1.1462562546869872, 0.6260547525224199, 0.7129807361485554, 41.6609135176182,
        ];
        close(&f64s(&out), &want, 1e-14);
    }

    #[test]
    fn poisson_draws_are_tensorflow_s_on_both_sides_of_rate_ten() {
        // TensorFlow 2.21: RandomPoissonV2(shape=[3], rate=[0.5, 3, 12,
        // 150], seed=5, seed2=6) as int64.
        let spec = stateful("RandomPoissonV2", 5, 6).attr("R", ty(DType::F32)).attr("dtype", ty(DType::I64));
        let kernel = build(&spec).unwrap();
        let rates = Tensor::from_slice::<f32>([4], &[0.5, 3.0, 12.0, 150.0]).unwrap();
        let out = run_built(kernel.as_ref(), &[Tensor::from_slice::<i32>([1], &[3]).unwrap(), rates]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), [0, 4, 9, 145, 1, 5, 18, 173, 1, 3, 14, 169]);
        // A NaN rate fails the run as an integer draw; TensorFlow hangs.
        let nan = Tensor::from_slice::<f32>([1], &[f32::NAN]).unwrap();
        let err = run_built(kernel.as_ref(), &[Tensor::from_slice::<i32>([1], &[2]).unwrap(), nan]).unwrap_err();
        assert!(err.message.contains("Poisson rate NaN"), "{}", err.message);
    }

    #[test]
    fn stateless_draws_are_tensorflow_s_and_check_their_shapes() {
        // TensorFlow 2.21: StatelessRandomGammaV2(shape=[3, 2], seed=[1, 2],
        // alpha=[1, 0.3]) and StatelessRandomPoisson(lam=[1, 30]) as int32.
        let seed = Tensor::from_slice::<i64>([2], &[1, 2]).unwrap();
        let shape = Tensor::from_slice::<i32>([2], &[3, 2]).unwrap();
        let gamma = build(&node("StatelessRandomGammaV2").attr("dtype", ty(DType::F32))).unwrap();
        let alpha = Tensor::from_slice::<f32>([2], &[1.0, 0.3]).unwrap();
        let out = run_built(gamma.as_ref(), &[shape.clone(), seed.clone(), alpha]).unwrap();
        #[rustfmt::skip]
        let want = [3.4994423389434814, 0.003847158746793866, 1.7193093299865723, 0.032805219292640686,
                    2.248735189437866, 0.6406785845756531];
        close(&f64s(&out), &want, 1e-6);
        let poisson =
            build(&node("StatelessRandomPoisson").attr("Rtype", ty(DType::F32)).attr("dtype", ty(DType::I32))).unwrap();
        let lam = Tensor::from_slice::<f32>([2], &[1.0, 30.0]).unwrap();
        let out = run_built(poisson.as_ref(), &[shape.clone(), seed.clone(), lam]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), [3, 45, 3, 25, 2, 35]);
        let three = Tensor::from_slice::<f32>([3], &[1.0, 2.0, 3.0]).unwrap();
        let err = run_built(poisson.as_ref(), &[shape, seed, three]).unwrap_err();
        assert!(err.message.contains("Shape passed in must end with broadcasted shape."), "{}", err.message);
    }

    #[test]
    fn gamma_edges_are_tensorflow_s() {
        let philox = Philox::new(7, 9);
        // TensorFlow 2.21: alpha 0 gives 0, a negative or NaN alpha NaN,
        // an infinite one ∞, and a tiny one underflows to 0.
        assert_eq!(gamma_draw(philox, 0.0), 0.0);
        assert!(gamma_draw(philox, -1.0).is_nan() && gamma_draw(philox, f64::NAN).is_nan());
        assert_eq!(gamma_draw(philox, f64::INFINITY), f64::INFINITY);
        assert!(gamma_draw(philox, 1e-3) < 1e-30);
    }
}
