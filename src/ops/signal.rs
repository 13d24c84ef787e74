//! Spectra: the FFT ops over a tensor's innermost dimension (`RFFT`,
//! `IRFFT`, `FFT`, `IFFT`: `tf.signal.rfft`, `tf.signal.stft` and the
//! spectrogram front-ends of audio models), the elementwise complex
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
//! TensorFlow's conventions: `RFFT` crops or zero-pads the innermost
//! dimension to `fft_length` and keeps `fft_length / 2 + 1` bins; `IRFFT`
//! reads that many bins (zero-padded or cropped), takes the imaginary
//! parts of the DC and Nyquist bins as zero and scales by `1 / fft_length`;
//! `IFFT` scales by `1 / n`.

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values, unsupported_dtype};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};
use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("RFFT", rfft_signature, build_fft),
    OpDef::kernel("IRFFT", irfft_signature, build_fft),
    OpDef::kernel("FFT", complex_unary_signature, build_fft),
    OpDef::kernel("IFFT", complex_unary_signature, build_fft),
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
}

fn build_fft(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let transform = match init.node.op.as_str() {
        "RFFT" => Transform::Real,
        "IRFFT" => Transform::InverseReal,
        "FFT" => Transform::Forward,
        _ => Transform::Inverse,
    };
    Ok(Box::new(FftKernel { transform }))
}

/// `fft_length`: one positive length.
fn fft_length(t: &Tensor) -> Result<usize> {
    if t.dims() != [1] {
        bail!(invalid_argument, "fft_length must be a vector of one length, got shape {}", t.shape());
    }
    let n = index_values(t, "fft_length")?[0];
    if n < 0 {
        bail!(invalid_argument, "fft_length must be non-negative, got {n}");
    }
    Ok(n as usize)
}

impl OpKernel for FftKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let Some((&inner, outer_dims)) = input.dims().split_last() else {
            bail!(invalid_argument, "input must have rank at least 1, got shape {}", input.shape());
        };
        let rows: usize = outer_dims.iter().product();
        let mut planner = FftPlanner::<f64>::new();
        let out = match self.transform {
            Transform::Real => {
                let n = fft_length(ctx.input(1)?)?;
                let bins = if n == 0 { 0 } else { n / 2 + 1 };
                let x = input.as_slice::<f32>()?;
                let fft = planner.plan_fft_forward(n.max(1));
                let mut out = Vec::with_capacity(rows * bins);
                let mut line = vec![Complex::new(0.0, 0.0); n];
                for r in 0..rows {
                    let src = &x[r * inner..(r + 1) * inner];
                    for (k, slot) in line.iter_mut().enumerate() {
                        *slot = Complex::new(src.get(k).copied().unwrap_or(0.0) as f64, 0.0);
                    }
                    if n > 0 {
                        fft.process(&mut line);
                    }
                    out.extend(line[..bins].iter().map(narrow));
                }
                complex_tensor(with_inner(outer_dims, bins), &out)?
            }
            Transform::InverseReal => {
                let n = fft_length(ctx.input(1)?)?;
                let bins = if n == 0 { 0 } else { n / 2 + 1 };
                let x = complex_values(input)?;
                let fft = planner.plan_fft_inverse(n.max(1));
                let mut out = Vec::with_capacity(rows * n);
                let mut line = vec![Complex::new(0.0, 0.0); n];
                for r in 0..rows {
                    let src = &x[r * inner..(r + 1) * inner];
                    let bin = |k: usize| {
                        src.get(k).map_or(Complex::new(0.0, 0.0), |c| Complex::new(c.re as f64, c.im as f64))
                    };
                    // The Hermitian spectrum of a real signal: the upper half
                    // mirrors the lower; DC and Nyquist are real.
                    for (k, slot) in line.iter_mut().enumerate() {
                        *slot = if k < bins { bin(k) } else { bin(n - k).conj() };
                    }
                    if n > 0 {
                        line[0].im = 0.0;
                        if n % 2 == 0 {
                            line[n / 2].im = 0.0;
                        }
                        fft.process(&mut line);
                    }
                    let scale = 1.0 / n.max(1) as f64;
                    out.extend(line.iter().map(|c| (c.re * scale) as f32));
                }
                Tensor::from_slice::<f32>(with_inner(outer_dims, n), &out)?
            }
            Transform::Forward | Transform::Inverse => {
                let x = complex_values(input)?;
                let inverse = self.transform == Transform::Inverse;
                let fft = if inverse {
                    planner.plan_fft_inverse(inner.max(1))
                } else {
                    planner.plan_fft_forward(inner.max(1))
                };
                let scale = if inverse { 1.0 / inner.max(1) as f64 } else { 1.0 };
                let mut out = Vec::with_capacity(x.len());
                let mut line = vec![Complex::new(0.0, 0.0); inner];
                for r in 0..rows {
                    for (slot, c) in line.iter_mut().zip(&x[r * inner..(r + 1) * inner]) {
                        *slot = Complex::new(c.re as f64, c.im as f64);
                    }
                    if inner > 0 {
                        fft.process(&mut line);
                    }
                    out.extend(line.iter().map(|c| narrow(&(c * scale))));
                }
                complex_tensor(input.shape().clone(), &out)?
            }
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

fn narrow(c: &Complex<f64>) -> Complex<f32> {
    Complex::new(c.re as f32, c.im as f32)
}

fn with_inner(outer: &[usize], inner: usize) -> Shape {
    let mut dims = outer.to_vec();
    dims.push(inner);
    Shape::from_vec(dims)
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
