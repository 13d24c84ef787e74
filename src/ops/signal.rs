//! Spectra: the FFT ops over a tensor's innermost one, two or three
//! dimensions (`RFFT`, `IRFFT`, `FFT`, `IFFT` and their `2D`/`3D` forms:
//! `tf.signal.rfft`, `tf.signal.stft` and the spectrogram front-ends of
//! audio models, `tf.signal.fft2d`/`rfft2d` of FNet mixing and spectral
//! convolutions), the elementwise complex
//! ops that turn a spectrum back into real numbers (`ComplexAbs`, `Real`,
//! `Imag`, `Angle`, `Conj`, `Complex`), and the complex64 forms of the
//! arithmetic a DCT needs (`Exp`, `Neg`, `Square`, `Add`, `Sub`, `Mul`,
//! `RealDiv`, broadcasting as the real ones do), which math.rs hands over
//! for a complex64 `T`.
//!
//! Owns: these kernels and the complex64 layout they read and write (two
//! little-endian float32s per element, real first, as TensorFlow lays
//! them out). The transforms are `rustfft`'s, planned per call in f64 and
//! rounded to float32 once. Must not hold state.
//!
//! TensorFlow's conventions: `RFFT` crops or zero-pads each transformed
//! dimension to its `fft_length` and keeps `fft_length / 2 + 1` bins of
//! the innermost; `IRFFT` crops or pads the outer transformed dimensions
//! to their lengths, reads `fft_length / 2 + 1` bins of the innermost
//! (zero-padded or cropped), takes the imaginary parts of its DC and
//! Nyquist bins as zero, and scales by `1 / prod(fft_length)`; `IFFT`
//! scales by `1 / prod(n)`.

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values, unsupported_dtype};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};
use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("RFFT", rfft_signature, build_fft),
    OpDef::kernel("IRFFT", irfft_signature, build_fft),
    OpDef::kernel("FFT", complex_unary_signature, build_fft),
    OpDef::kernel("IFFT", complex_unary_signature, build_fft),
    OpDef::kernel("RFFT2D", rfft_signature, build_fft),
    OpDef::kernel("IRFFT2D", irfft_signature, build_fft),
    OpDef::kernel("FFT2D", complex_unary_signature, build_fft),
    OpDef::kernel("IFFT2D", complex_unary_signature, build_fft),
    OpDef::kernel("RFFT3D", rfft_signature, build_fft),
    OpDef::kernel("IRFFT3D", irfft_signature, build_fft),
    OpDef::kernel("FFT3D", complex_unary_signature, build_fft),
    OpDef::kernel("IFFT3D", complex_unary_signature, build_fft),
    OpDef::kernel("ComplexAbs", complex_to_real_signature, build_elementwise),
    OpDef::kernel("Real", complex_to_real_signature, build_elementwise),
    OpDef::kernel("Imag", complex_to_real_signature, build_elementwise),
    OpDef::kernel("Angle", complex_to_real_signature, build_elementwise),
    OpDef::kernel("Conj", complex_unary_signature, build_elementwise),
    OpDef::kernel("Complex", complex_signature, build_elementwise),
];

const F32: ValueType = ValueType::Tensor(DType::F32);
const C64: ValueType = ValueType::Tensor(DType::Complex64);
const I32: ValueType = ValueType::Tensor(DType::I32);

/// Only float32 and complex64: the dtype pair of TensorFlow's defaults
/// (`Treal`, `Tcomplex`, `T`, `Tout`); float64 and complex128 are refused.
fn require(node: &NodeSpec, key: &str, want: DType) -> Result<()> {
    if node.get_attr(key).is_none() {
        return Ok(());
    }
    let got = node.attr_dtype(key)?;
    if got != want {
        return Err(unsupported_dtype(&node.op, got, &[want]));
    }
    Ok(())
}

fn rfft_signature(node: &NodeSpec) -> Result<OpSignature> {
    require(node, "Treal", DType::F32)?;
    require(node, "Tcomplex", DType::Complex64)?;
    Ok(OpSignature::new(vec![F32, I32], vec![C64]))
}

fn irfft_signature(node: &NodeSpec) -> Result<OpSignature> {
    require(node, "Treal", DType::F32)?;
    require(node, "Tcomplex", DType::Complex64)?;
    Ok(OpSignature::new(vec![C64, I32], vec![F32]))
}

fn complex_unary_signature(node: &NodeSpec) -> Result<OpSignature> {
    require(node, "Tcomplex", DType::Complex64)?;
    require(node, "T", DType::Complex64)?;
    Ok(OpSignature::new(vec![C64], vec![C64]))
}

fn complex_to_real_signature(node: &NodeSpec) -> Result<OpSignature> {
    require(node, "T", DType::Complex64)?;
    require(node, "Tout", DType::F32)?;
    Ok(OpSignature::new(vec![C64], vec![F32]))
}

fn complex_signature(node: &NodeSpec) -> Result<OpSignature> {
    require(node, "T", DType::F32)?;
    require(node, "Tout", DType::Complex64)?;
    Ok(OpSignature::new(vec![F32, F32], vec![C64]))
}

/// A complex64 tensor's elements.
pub fn complex_values(t: &Tensor) -> Result<Vec<Complex<f32>>> {
    if t.dtype() != DType::Complex64 {
        bail!(invalid_argument, "expected a complex64 tensor, got {}", t.dtype());
    }
    Ok(t.complex_parts().into_iter().map(|(re, im)| Complex::new(re, im)).collect())
}

/// A complex64 tensor of `shape` holding `values`.
pub fn complex_tensor(shape: impl Into<Shape>, values: &[Complex<f32>]) -> Result<Tensor> {
    let mut bytes = Vec::with_capacity(values.len() * 8);
    for v in values {
        bytes.extend_from_slice(&v.re.to_le_bytes());
        bytes.extend_from_slice(&v.im.to_le_bytes());
    }
    Tensor::from_bytes(DType::Complex64, shape, &bytes)
}

// ---------------------------------------------------------------------------
// Transforms

#[derive(Clone, Copy, PartialEq, Eq)]
enum Transform {
    Real,
    InverseReal,
    Forward,
    Inverse,
}

struct FftKernel {
    transform: Transform,
    /// How many innermost dimensions the transform spans (1, 2 or 3).
    rank: usize,
}

fn build_fft(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let op = init.node.op.as_str();
    let (base, rank) = match op.strip_suffix("2D").or_else(|| op.strip_suffix("3D")) {
        Some(base) => (base, if op.ends_with("2D") { 2 } else { 3 }),
        None => (op, 1),
    };
    let transform = match base {
        "RFFT" => Transform::Real,
        "IRFFT" => Transform::InverseReal,
        "FFT" => Transform::Forward,
        _ => Transform::Inverse,
    };
    Ok(Box::new(FftKernel { transform, rank }))
}

/// `fft_length`: `rank` non-negative lengths.
fn fft_lengths(t: &Tensor, rank: usize) -> Result<Vec<usize>> {
    if t.dims() != [rank] {
        bail!(invalid_argument, "fft_length must be a vector of {rank} lengths, got shape {}", t.shape());
    }
    index_values(t, "fft_length")?
        .iter()
        .map(|&n| {
            usize::try_from(n)
                .map_err(|_| Status::invalid_argument(format!("fft_length must be non-negative, got {n}")))
        })
        .collect()
}

/// A row-major complex128 buffer and its shape, transformed in place.
struct Spectrum {
    values: Vec<Complex<f64>>,
    dims: Vec<usize>,
}

impl Spectrum {
    /// Crops or zero-pads dimension `axis` to `len`.
    fn resize(&mut self, axis: usize, len: usize) {
        let old = self.dims[axis];
        if old == len {
            return;
        }
        let outer: usize = self.dims[..axis].iter().product();
        let inner: usize = self.dims[axis + 1..].iter().product();
        let mut values = vec![Complex::new(0.0, 0.0); outer * len * inner];
        let keep = old.min(len);
        for o in 0..outer {
            let (src, dst) = (o * old * inner, o * len * inner);
            values[dst..dst + keep * inner].copy_from_slice(&self.values[src..src + keep * inner]);
        }
        self.values = values;
        self.dims[axis] = len;
    }

    /// A complex transform along `axis`: every line through it, one at a time.
    fn transform(&mut self, axis: usize, planner: &mut FftPlanner<f64>, inverse: bool) {
        let n = self.dims[axis];
        if n == 0 || self.values.is_empty() {
            return;
        }
        let fft = if inverse { planner.plan_fft_inverse(n) } else { planner.plan_fft_forward(n) };
        let inner: usize = self.dims[axis + 1..].iter().product();
        let outer = self.values.len() / (n * inner);
        let mut line = vec![Complex::new(0.0, 0.0); n];
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| (o * n + k) * inner + i;
                for (k, slot) in line.iter_mut().enumerate() {
                    *slot = self.values[at(k)];
                }
                fft.process(&mut line);
                for (k, v) in line.iter().enumerate() {
                    self.values[at(k)] = *v;
                }
            }
        }
    }

    /// The full spectrum along the last axis of a real signal whose
    /// first `n / 2 + 1` bins are held (cropped or zero-padded to that):
    /// the upper half mirrors the lower; DC and Nyquist are real.
    fn hermitian_last(&mut self, n: usize) {
        let last = self.dims.len() - 1;
        self.resize(last, if n == 0 { 0 } else { n / 2 + 1 });
        let bins = self.dims[last];
        let rows = self.values.len().checked_div(bins).unwrap_or(0);
        let mut values = Vec::with_capacity(rows * n);
        for row in self.values.chunks_exact(bins.max(1)).take(rows) {
            for k in 0..n {
                let mut c = if k < bins { row[k] } else { row[n - k].conj() };
                if k == 0 || (n % 2 == 0 && k == n / 2) {
                    c.im = 0.0;
                }
                values.push(c);
            }
        }
        self.values = values;
        self.dims[last] = n;
    }
}

impl OpKernel for FftKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let dims = input.dims().to_vec();
        if dims.len() < self.rank {
            bail!(invalid_argument, "input must have rank at least {}, got shape {}", self.rank, input.shape());
        }
        let axes: Vec<usize> = (dims.len() - self.rank..dims.len()).collect();
        let mut planner = FftPlanner::<f64>::new();
        let out = match self.transform {
            Transform::Real => {
                let lengths = fft_lengths(ctx.input(1)?, self.rank)?;
                let x = input.as_slice::<f32>()?;
                let mut spectrum = Spectrum { values: x.iter().map(|&v| Complex::new(v as f64, 0.0)).collect(), dims };
                for (&axis, &n) in axes.iter().zip(&lengths) {
                    spectrum.resize(axis, n);
                    spectrum.transform(axis, &mut planner, false);
                }
                let last = *axes.last().expect("rank >= 1");
                let n = spectrum.dims[last];
                spectrum.resize(last, if n == 0 { 0 } else { n / 2 + 1 });
                let narrowed: Vec<Complex<f32>> = spectrum.values.iter().map(narrow).collect();
                complex_tensor(Shape::from_vec(spectrum.dims), &narrowed)?
            }
            Transform::InverseReal => {
                let lengths = fft_lengths(ctx.input(1)?, self.rank)?;
                let x = complex_values(input)?;
                let values = x.iter().map(|c| Complex::new(c.re as f64, c.im as f64)).collect();
                let mut spectrum = Spectrum { values, dims };
                let (last, outer_axes) = axes.split_last().expect("rank >= 1");
                for (&axis, &n) in outer_axes.iter().zip(&lengths) {
                    spectrum.resize(axis, n);
                    spectrum.transform(axis, &mut planner, true);
                }
                let n = lengths[self.rank - 1];
                spectrum.hermitian_last(n);
                spectrum.transform(*last, &mut planner, true);
                let scale = 1.0 / lengths.iter().product::<usize>().max(1) as f64;
                let real: Vec<f32> = spectrum.values.iter().map(|c| (c.re * scale) as f32).collect();
                Tensor::from_slice::<f32>(Shape::from_vec(spectrum.dims), &real)?
            }
            Transform::Forward | Transform::Inverse => {
                let inverse = self.transform == Transform::Inverse;
                let x = complex_values(input)?;
                let values = x.iter().map(|c| Complex::new(c.re as f64, c.im as f64)).collect();
                let mut spectrum = Spectrum { values, dims };
                for &axis in &axes {
                    spectrum.transform(axis, &mut planner, inverse);
                }
                let count: usize = axes.iter().map(|&a| spectrum.dims[a]).product();
                let scale = if inverse { 1.0 / count.max(1) as f64 } else { 1.0 };
                let narrowed: Vec<Complex<f32>> = spectrum.values.iter().map(|c| narrow(&(c * scale))).collect();
                complex_tensor(input.shape().clone(), &narrowed)?
            }
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

fn narrow(c: &Complex<f64>) -> Complex<f32> {
    Complex::new(c.re as f32, c.im as f32)
}

// ---------------------------------------------------------------------------
// Elementwise

struct Elementwise {
    op: String,
}

fn build_elementwise(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Elementwise { op: init.node.op.clone() }))
}

impl OpKernel for Elementwise {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let shape = input.shape().clone();
        let real = |f: fn(Complex<f32>) -> f32| -> Result<Tensor> {
            let v: Vec<f32> = complex_values(input)?.into_iter().map(f).collect();
            Tensor::from_slice::<f32>(shape.clone(), &v)
        };
        let out = match self.op.as_str() {
            // |z| as std::abs(std::complex<float>) computes it: hypot.
            "ComplexAbs" => real(|c| c.re.hypot(c.im))?,
            "Real" => real(|c| c.re)?,
            "Imag" => real(|c| c.im)?,
            "Angle" => real(|c| c.im.atan2(c.re))?,
            "Conj" => {
                let v: Vec<Complex<f32>> = complex_values(input)?.iter().map(Complex::conj).collect();
                complex_tensor(shape, &v)?
            }
            _ => {
                let imag = ctx.input(1)?;
                let (re, im) = (input.as_slice::<f32>()?, imag.as_slice::<f32>()?);
                let (shape, n) = match (re.len(), im.len()) {
                    _ if input.shape() == imag.shape() => (shape, re.len()),
                    (1, _) => (imag.shape().clone(), im.len()),
                    (_, 1) => (shape, re.len()),
                    _ => bail!(
                        invalid_argument,
                        "Complex: real {} and imag {} must have one shape or one be a scalar",
                        input.shape(),
                        imag.shape()
                    ),
                };
                let at = |v: &[f32], i: usize| if v.len() == 1 { v[0] } else { v[i] };
                let v: Vec<Complex<f32>> = (0..n).map(|i| Complex::new(at(re, i), at(im, i))).collect();
                complex_tensor(shape, &v)?
            }
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Complex arithmetic

/// The complex64 kernel of an arithmetic op, for math.rs's builders; `None`
/// for another dtype or an op without a complex form here.
pub fn complex_arithmetic(node: &NodeSpec, dtype: DType) -> Option<Box<dyn OpKernel>> {
    if dtype != DType::Complex64 {
        return None;
    }
    let op = match node.op.as_str() {
        "Exp" | "Neg" | "Square" | "Add" | "AddV2" | "Sub" | "Mul" | "RealDiv" | "Div" => node.op.clone(),
        _ => return None,
    };
    Some(Box::new(ComplexArithmetic { op }))
}

struct ComplexArithmetic {
    op: String,
}

impl OpKernel for ComplexArithmetic {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let a = ctx.input(0)?;
        let x = complex_values(a)?;
        let out = match self.op.as_str() {
            "Exp" => complex_tensor(a.shape().clone(), &x.iter().map(|z| z.exp()).collect::<Vec<_>>())?,
            "Neg" => complex_tensor(a.shape().clone(), &x.iter().map(|z| -z).collect::<Vec<_>>())?,
            "Square" => complex_tensor(a.shape().clone(), &x.iter().map(|z| z * z).collect::<Vec<_>>())?,
            op => {
                let b = ctx.input(1)?;
                let y = complex_values(b)?;
                let shape = super::broadcast::broadcast_shape(a.dims(), b.dims())?;
                let (ia, ib) = (broadcast_index(a.dims(), shape.dims()), broadcast_index(b.dims(), shape.dims()));
                let f: fn(Complex<f32>, Complex<f32>) -> Complex<f32> = match op {
                    "Sub" => |p, q| p - q,
                    "Mul" => |p, q| p * q,
                    "RealDiv" | "Div" => |p, q| p / q,
                    _ => |p, q| p + q,
                };
                let v: Vec<Complex<f32>> = ia.iter().zip(&ib).map(|(&i, &j)| f(x[i], y[j])).collect();
                complex_tensor(shape, &v)?
            }
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

/// For each element of a tensor of `out` dims, the element of an operand
/// of `dims` broadcast to it (right-aligned; size-1 dimensions repeat).
fn broadcast_index(dims: &[usize], out: &[usize]) -> Vec<usize> {
    let offset = out.len() - dims.len();
    let mut strides = vec![0usize; out.len()];
    let mut stride = 1;
    for i in (0..dims.len()).rev() {
        strides[offset + i] = if dims[i] == 1 { 0 } else { stride };
        stride *= dims[i];
    }
    let total: usize = out.iter().product();
    let mut index = Vec::with_capacity(total);
    let mut coord = vec![0usize; out.len()];
    for _ in 0..total {
        index.push(coord.iter().zip(&strides).map(|(c, s)| c * s).sum());
        for d in (0..out.len()).rev() {
            coord[d] += 1;
            if coord[d] < out[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run1};

    fn c(values: &[(f32, f32)]) -> Tensor {
        let v: Vec<Complex<f32>> = values.iter().map(|&(re, im)| Complex::new(re, im)).collect();
        complex_tensor([v.len()], &v).unwrap()
    }
    fn close(got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{got:?} vs {want:?}");
        }
    }
    fn pairs(t: &Tensor) -> Vec<f32> {
        complex_values(t).unwrap().iter().flat_map(|c| [c.re, c.im]).collect()
    }
    fn length(n: i32) -> Tensor {
        Tensor::from_slice::<i32>([1], &[n]).unwrap()
    }

    #[test]
    fn rfft_crops_or_pads_to_its_length() {
        let x = Tensor::from_slice::<f32>([2, 4], &[1., 2., 3., 4., 0., 1., 0., -1.]).unwrap();
        let out = run1(&node("RFFT"), &[x.clone(), length(4)]).unwrap();
        assert_eq!(out.dims(), [2, 3]);
        // numpy.fft.rfft([1, 2, 3, 4]) = [10, -2+2j, -2]; of [0, 1, 0, -1]: [0, -2j, 0].
        close(&pairs(&out), &[10., 0., -2., 2., -2., 0., 0., 0., 0., -2., 0., 0.]);
        let padded = run1(&node("RFFT"), &[x.clone(), length(6)]).unwrap();
        assert_eq!(padded.dims(), [2, 4]);
        let cropped = run1(&node("RFFT"), &[x, length(2)]).unwrap();
        close(&pairs(&cropped)[..4], &[3., 0., -1., 0.]);
    }

    #[test]
    fn inverse_transforms_undo_forward_ones() {
        let x = Tensor::from_slice::<f32>([5], &[0.5, -1., 2., 0.25, 3.]).unwrap();
        let spectrum = run1(&node("RFFT"), &[x.clone(), length(5)]).unwrap();
        let back = run1(&node("IRFFT"), &[spectrum, length(5)]).unwrap();
        close(back.as_slice::<f32>().unwrap(), x.as_slice::<f32>().unwrap());
        let z = c(&[(1., 2.), (-1., 0.5), (0., -3.)]);
        let there = run1(&node("FFT"), std::slice::from_ref(&z)).unwrap();
        let back = run1(&node("IFFT"), &[there]).unwrap();
        close(&pairs(&back), &pairs(&z));
    }

    #[test]
    fn two_and_three_dimensional_transforms() {
        // numpy.fft.rfft2([[1, 2], [3, 4], [5, 6]]) = [[21, -3], [-6+3.464j, 0], [-6-3.464j, 0]].
        let x = Tensor::from_slice::<f32>([3, 2], &[1., 2., 3., 4., 5., 6.]).unwrap();
        let lengths = Tensor::from_slice::<i32>([2], &[3, 2]).unwrap();
        let spectrum = run1(&node("RFFT2D"), &[x.clone(), lengths.clone()]).unwrap();
        assert_eq!(spectrum.dims(), [3, 2]);
        let r12 = 12f32.sqrt();
        close(&pairs(&spectrum), &[21., 0., -3., 0., -6., r12, 0., 0., -6., -r12, 0., 0.]);
        let back = run1(&node("IRFFT2D"), &[spectrum, lengths]).unwrap();
        close(back.as_slice::<f32>().unwrap(), x.as_slice::<f32>().unwrap());
        // A 2x2x2 FFT3D of a one at the origin is all ones; IFFT3D undoes it.
        let mut origin = vec![(0., 0.); 8];
        origin[0] = (1., 0.);
        let delta = complex_tensor([2, 2, 2], &complex_values(&c(&origin)).unwrap()).unwrap();
        let flat = run1(&node("FFT3D"), std::slice::from_ref(&delta)).unwrap();
        close(&pairs(&flat), &[1., 0.].repeat(8));
        close(&pairs(&run1(&node("IFFT3D"), &[flat]).unwrap()), &pairs(&delta));
        let err = run1(&node("RFFT2D"), &[x, length(3)]).unwrap_err();
        assert!(err.message.contains("fft_length must be a vector of 2 lengths"), "{err}");
    }

    #[test]
    fn elementwise_complex_ops() {
        let z = c(&[(3., 4.), (-1., 0.), (0., -2.)]);
        close(run1(&node("ComplexAbs"), std::slice::from_ref(&z)).unwrap().as_slice::<f32>().unwrap(), &[5., 1., 2.]);
        close(run1(&node("Real"), std::slice::from_ref(&z)).unwrap().as_slice::<f32>().unwrap(), &[3., -1., 0.]);
        close(run1(&node("Imag"), std::slice::from_ref(&z)).unwrap().as_slice::<f32>().unwrap(), &[4., 0., -2.]);
        let pi = std::f32::consts::PI;
        close(
            run1(&node("Angle"), std::slice::from_ref(&z)).unwrap().as_slice::<f32>().unwrap(),
            &[0.9272952, pi, -pi / 2.],
        );
        close(&pairs(&run1(&node("Conj"), &[z]).unwrap()), &[3., -4., -1., 0., 0., 2.]);
        let re = Tensor::from_slice::<f32>([2], &[1., 2.]).unwrap();
        let made = run1(&node("Complex"), &[re, Tensor::scalar(0.5f32)]).unwrap();
        close(&pairs(&made), &[1., 0.5, 2., 0.5]);
        let err = run1(&node("ComplexAbs"), &[Tensor::scalar(1f32)]).unwrap_err();
        assert!(err.message.contains("complex64"), "{}", err.message);
    }

    #[test]
    fn complex_arithmetic_broadcasts() {
        let z = complex_tensor([2, 1], &[Complex::new(1.0, 1.0), Complex::new(0.0, 2.0)]).unwrap();
        let w = c(&[(2., 0.), (0., 1.), (1., -1.)]);
        let mul = node("Mul").attr("T", crate::ops::testing::ty(DType::Complex64));
        let out = run1(&mul, &[z.clone(), w]).unwrap();
        assert_eq!(out.dims(), [2, 3]);
        // (1+i)(2) (1+i)(i) (1+i)(1-i); (2i)(2) (2i)(i) (2i)(1-i)
        close(&pairs(&out), &[2., 2., -1., 1., 2., 0., 0., 4., -2., 0., 2., 2.]);
        let exp = node("Exp").attr("T", crate::ops::testing::ty(DType::Complex64));
        let e = run1(&exp, &[c(&[(0., std::f32::consts::PI)])]).unwrap();
        close(&pairs(&e), &[-1., 0.]);
        let tanh = node("Tanh").attr("T", crate::ops::testing::ty(DType::Complex64));
        assert!(run1(&tanh, &[c(&[(0., 1.)])]).unwrap_err().message.contains("complex64"));
    }
}
