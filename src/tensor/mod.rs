//! Tensors: a dtype, a shape and 64-byte aligned bytes shared by reference
//! count, so feeding, forwarding and fetching a tensor never copies it.
//!
//! Owns: [`Tensor`], its constructors, typed and ndarray views, and .npy I/O
//! ([`npy`]). Must not know about graphs, kernels or the network: the
//! transport builds tensors over its receive buffers through
//! [`Tensor::from_borrowed`], and that is the whole interface.

pub mod dtype;
pub mod npy;
pub mod shape;
mod storage;

pub use dtype::{DType, Element};
pub use shape::Shape;
pub use storage::{INLINE_BYTES, Keepalive, TENSOR_ALIGN};

use crate::error::{Result, Status};
use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};
use std::fmt;
use std::ptr::NonNull;
use storage::Storage;
// No weak count: the uniqueness check of in-place kernels is a plain load.
use triomphe::Arc;

/// An immutable n-dimensional array. Cloning shares the bytes.
#[derive(Clone)]
pub struct Tensor {
    inner: Arc<Inner>,
}

struct Inner {
    dtype: DType,
    shape: Shape,
    storage: Storage,
}

fn byte_len(dtype: DType, shape: &Shape) -> Result<usize> {
    shape
        .checked_num_elements()
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| Status::invalid_argument(format!("tensor shape {shape} of {dtype} overflows")))
}

fn check_bools(bytes: &[u8]) -> Result<()> {
    match bytes.iter().position(|&b| b > 1) {
        None => Ok(()),
        Some(i) => Err(Status::invalid_argument(format!(
            "bool tensor has byte {} at element {i}; only 0 and 1 are valid",
            bytes[i]
        ))),
    }
}

impl Tensor {
    fn from_parts(dtype: DType, shape: Shape, storage: Storage) -> Tensor {
        debug_assert_eq!(storage.bytes().len(), shape.num_elements() * dtype.size());
        Tensor { inner: Arc::new(Inner { dtype, shape, storage }) }
    }

    /// A tensor of zeros (false for bool).
    pub fn zeros(dtype: DType, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        let len = byte_len(dtype, &shape)?;
        Ok(Tensor::from_parts(dtype, shape, Storage::zeroed(len)))
    }

    /// A tensor whose elements `fill` writes; they start zeroed.
    pub fn build<T: Element>(shape: impl Into<Shape>, fill: impl FnOnce(&mut [T])) -> Result<Tensor> {
        let mut t = Tensor::zeros(T::DTYPE, shape)?;
        let slice = t.try_slice_mut::<T>().expect("a fresh tensor is uniquely owned and of its dtype");
        fill(slice);
        Ok(t)
    }

    /// A scalar.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor::build::<T>(Shape::scalar(), |s| s[0] = value).expect("a scalar cannot overflow")
    }

    /// A tensor holding a copy of `values`.
    pub fn from_slice<T: Element>(shape: impl Into<Shape>, values: &[T]) -> Result<Tensor> {
        let shape = shape.into();
        if shape.checked_num_elements() != Some(values.len()) {
            return Err(Status::invalid_argument(format!("{} values do not fill shape {shape}", values.len())));
        }
        Tensor::build::<T>(shape, |dst| dst.copy_from_slice(values))
    }

    /// A tensor holding a copy of raw little-endian `bytes`.
    pub fn from_bytes(dtype: DType, shape: impl Into<Shape>, bytes: &[u8]) -> Result<Tensor> {
        let shape = shape.into();
        let len = byte_len(dtype, &shape)?;
        if len != bytes.len() {
            return Err(Status::invalid_argument(format!(
                "{} bytes do not fill a {dtype} tensor of shape {shape} ({len} bytes)",
                bytes.len()
            )));
        }
        if dtype == DType::Bool {
            check_bools(bytes)?;
        }
        Ok(Tensor::from_parts(dtype, shape, Storage::copy_of(bytes)))
    }

    /// A tensor over memory someone else owns, without copying it.
    ///
    /// # Safety
    /// `ptr` must be valid for reads of the tensor's byte length, and those
    /// bytes must not be written for as long as `keepalive` lives.
    pub unsafe fn from_borrowed(
        dtype: DType,
        shape: impl Into<Shape>,
        ptr: NonNull<u8>,
        len: usize,
        keepalive: Keepalive,
    ) -> Result<Tensor> {
        let shape = shape.into();
        let expected = byte_len(dtype, &shape)?;
        if expected != len {
            return Err(Status::invalid_argument(format!(
                "{len} bytes do not fill a {dtype} tensor of shape {shape} ({expected} bytes)"
            )));
        }
        if ptr.as_ptr() as usize % TENSOR_ALIGN != 0 {
            return Err(Status::invalid_argument(format!(
                "tensor bytes at {:p} are not {TENSOR_ALIGN}-byte aligned",
                ptr.as_ptr()
            )));
        }
        // SAFETY: forwarded from this function's contract.
        let storage = unsafe { Storage::borrowed(ptr, len, keepalive) };
        if dtype == DType::Bool {
            check_bools(storage.bytes())?;
        }
        Ok(Tensor::from_parts(dtype, shape, storage))
    }

    #[inline]
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    pub fn shape(&self) -> &Shape {
        &self.inner.shape
    }

    #[inline]
    pub fn dims(&self) -> &[usize] {
        self.inner.shape.dims()
    }

    #[inline]
    pub fn rank(&self) -> usize {
        self.inner.shape.rank()
    }

    #[inline]
    pub fn num_elements(&self) -> usize {
        self.inner.shape.num_elements()
    }

    #[inline]
    pub fn byte_len(&self) -> usize {
        self.inner.storage.bytes().len()
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.inner.storage.bytes()
    }

    /// Address of the first byte, for zero-copy checks and I/O.
    pub fn data_ptr(&self) -> *const u8 {
        self.inner.storage.bytes().as_ptr()
    }

    /// True when the bytes live in memory the tensor does not own.
    pub fn is_borrowed(&self) -> bool {
        self.inner.storage.is_borrowed()
    }

    /// True when both tensors share the same bytes.
    pub fn shares_bytes_with(&self, other: &Tensor) -> bool {
        self.data_ptr() == other.data_ptr() && self.byte_len() == other.byte_len()
    }

    fn dtype_error<T: Element>(&self) -> Status {
        Status::invalid_argument(format!(
            "expected a {} tensor, got {} of shape {}",
            T::DTYPE,
            self.dtype(),
            self.shape()
        ))
    }

    /// The elements, if this is a `T` tensor.
    #[inline]
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        if self.dtype() != T::DTYPE {
            return Err(self.dtype_error::<T>());
        }
        let bytes = self.as_bytes();
        // SAFETY: dtype matches `T`, the bytes are 64-byte aligned (so aligned
        // for `T`), their length is a multiple of size_of::<T>() and every
        // constructor guarantees a valid bit pattern for `T` (zeroed, copied
        // from `T`s, or checked bools).
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / T::DTYPE.size()) })
    }

    /// Writable elements, if this is a `T` tensor whose bytes nobody else sees.
    #[inline]
    pub fn try_slice_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        if self.dtype() != T::DTYPE {
            return None;
        }
        let inner = Arc::get_mut(&mut self.inner)?;
        let bytes = inner.storage.bytes_mut()?;
        // SAFETY: as in `as_slice`; `&mut` access is unique because the Arc
        // is unique and the storage is owned. Writes of `T` keep it valid.
        Some(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), bytes.len() / T::DTYPE.size()) })
    }

    /// The single element of a scalar or one-element tensor.
    pub fn scalar_value<T: Element>(&self) -> Result<T> {
        let s = self.as_slice::<T>()?;
        if s.len() != 1 {
            return Err(Status::invalid_argument(format!(
                "expected a single {} element, got shape {}",
                T::DTYPE,
                self.shape()
            )));
        }
        Ok(s[0])
    }

    /// An ndarray view of the elements.
    pub fn view<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
        let s = self.as_slice::<T>()?;
        ArrayViewD::from_shape(IxDyn(self.dims()), s)
            .map_err(|e| Status::internal(format!("view of shape {}: {e}", self.shape())))
    }

    /// A writable ndarray view, if the bytes are uniquely owned.
    pub fn try_view_mut<T: Element>(&mut self) -> Option<ArrayViewMutD<'_, T>> {
        let dims = IxDyn(self.inner.shape.dims());
        let s = self.try_slice_mut::<T>()?;
        ArrayViewMutD::from_shape(dims, s).ok()
    }

    /// The same bytes under another shape of the same element count; no copy
    /// for tensors stored out of line.
    pub fn reshaped(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if shape.checked_num_elements() != Some(self.num_elements()) {
            return Err(Status::invalid_argument(format!(
                "cannot reshape a tensor with {} elements to shape {shape} ({} elements)",
                self.num_elements(),
                shape.checked_num_elements().map_or("overflowing".into(), |n| n.to_string())
            )));
        }
        let bytes = self.as_bytes();
        if bytes.len() <= INLINE_BYTES {
            return Ok(Tensor::from_parts(self.dtype(), shape, Storage::copy_of(bytes)));
        }
        let ptr = NonNull::new(bytes.as_ptr() as *mut u8).expect("out-of-line tensors have real addresses");
        let keepalive: Keepalive = std::sync::Arc::new(self.clone());
        // SAFETY: the bytes belong to `self.inner`, which the keepalive holds;
        // once shared they are never written again.
        let storage = unsafe { Storage::borrowed(ptr, bytes.len(), keepalive) };
        Ok(Tensor::from_parts(self.dtype(), shape, storage))
    }

    /// A fresh, uniquely owned copy (the only way to get writable bytes from
    /// a shared tensor).
    pub fn deep_copy(&self) -> Tensor {
        Tensor::from_parts(self.dtype(), self.shape().clone(), Storage::copy_of(self.as_bytes()))
    }

    /// Same dtype, shape and bytes.
    pub fn bit_eq(&self, other: &Tensor) -> bool {
        self.dtype() == other.dtype() && self.shape() == other.shape() && self.as_bytes() == other.as_bytes()
    }

    /// Converts every element to f64, for comparisons and printing.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        crate::dispatch_dtype!(self.dtype(), T => {
            self.as_slice::<T>().expect("dtype matches").iter().map(|v| v.to_f64()).collect()
        })
    }

    /// Compares with `expected` as numpy's `allclose` does:
    /// `|a - e| <= atol + rtol * |e|`, NaNs equal to NaNs. Returns a
    /// description of the first difference.
    pub fn all_close(&self, expected: &Tensor, rtol: f64, atol: f64) -> std::result::Result<(), String> {
        if self.dtype() != expected.dtype() {
            return Err(format!("dtype {} != expected {}", self.dtype(), expected.dtype()));
        }
        if self.shape() != expected.shape() {
            return Err(format!("shape {} != expected {}", self.shape(), expected.shape()));
        }
        let (got, want) = (self.to_f64_vec(), expected.to_f64_vec());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let same = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= atol + rtol * w.abs();
            if !same {
                return Err(format!("element {i}: got {g}, expected {w} (rtol {rtol}, atol {atol})"));
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{}{}>", self.dtype(), self.shape())?;
        let values = self.to_f64_vec();
        const SHOWN: usize = 8;
        write!(f, "[")?;
        for (i, v) in values.iter().take(SHOWN).enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{v}")?;
        }
        if values.len() > SHOWN {
            write!(f, ", ... {} more", values.len() - SHOWN)?;
        }
        write!(f, "]")
    }
}

/// Prints a tensor the way numpy does for small arrays: nested brackets.
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn nested(f: &mut fmt::Formatter<'_>, dims: &[usize], values: &[String]) -> fmt::Result {
            if dims.is_empty() {
                return f.write_str(&values[0]);
            }
            f.write_str("[")?;
            let stride: usize = dims[1..].iter().product();
            for i in 0..dims[0] {
                if i > 0 {
                    f.write_str(if dims.len() > 1 { ",\n " } else { ", " })?;
                }
                nested(f, &dims[1..], &values[i * stride..(i + 1) * stride])?;
            }
            f.write_str("]")
        }
        let values: Vec<String> = crate::dispatch_dtype!(self.dtype(), T => {
            self.as_slice::<T>().expect("dtype matches").iter().map(|v| format!("{v:?}")).collect()
        });
        nested(f, self.dims(), &values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_view_and_share() {
        let t = Tensor::from_slice::<f32>([2, 3], &[1., 2., 3., 4., 5., 6.]).unwrap();
        assert_eq!(t.dtype(), DType::F32);
        assert_eq!(t.view::<f32>().unwrap()[[1, 2]], 6.0);
        let u = t.clone();
        assert!(u.shares_bytes_with(&t));
        assert!(t.as_slice::<i32>().is_err());
    }

    #[test]
    fn reshape_of_large_tensor_shares_bytes() {
        let t = Tensor::build::<f64>([4, 16], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as f64)).unwrap();
        let r = t.reshaped([64]).unwrap();
        assert!(r.shares_bytes_with(&t));
        assert_eq!(r.as_slice::<f64>().unwrap()[63], 63.0);
        let err = t.reshaped([3, 3]).unwrap_err();
        assert!(err.message.contains("64 elements"), "{err}");
    }

    #[test]
    fn unique_tensor_is_writable_shared_is_not() {
        let mut t = Tensor::zeros(DType::I32, [3]).unwrap();
        t.try_slice_mut::<i32>().unwrap()[1] = 5;
        let shared = t.clone();
        assert!(t.try_slice_mut::<i32>().is_none());
        assert_eq!(shared.as_slice::<i32>().unwrap(), &[0, 5, 0]);
    }

    #[test]
    fn invalid_bools_and_sizes_are_rejected() {
        assert!(Tensor::from_bytes(DType::Bool, [2], &[0, 2]).is_err());
        assert!(Tensor::from_bytes(DType::Bool, [2], &[0, 1]).is_ok());
        assert!(Tensor::from_bytes(DType::F32, [2], &[0; 7]).is_err());
        assert!(Tensor::zeros(DType::F64, [usize::MAX / 2, 4]).is_err());
    }

    #[test]
    fn empty_tensors() {
        let t = Tensor::zeros(DType::F32, [0, 5]).unwrap();
        assert_eq!(t.num_elements(), 0);
        assert_eq!(t.as_slice::<f32>().unwrap().len(), 0);
        assert_eq!(t.view::<f32>().unwrap().shape(), &[0, 5]);
    }

    #[test]
    fn all_close_follows_numpy() {
        let a = Tensor::from_slice::<f32>([2], &[1.0, f32::NAN]).unwrap();
        let b = Tensor::from_slice::<f32>([2], &[1.000001, f32::NAN]).unwrap();
        assert!(a.all_close(&b, 1e-5, 1e-6).is_ok());
        let c = Tensor::from_slice::<f32>([2], &[1.1, f32::NAN]).unwrap();
        assert!(a.all_close(&c, 1e-5, 1e-6).unwrap_err().contains("element 0"));
    }

    #[test]
    fn display_nests() {
        let t = Tensor::from_slice::<i64>([2, 2], &[1, 2, 3, 4]).unwrap();
        assert_eq!(t.to_string(), "[[1, 2],\n [3, 4]]");
        assert_eq!(Tensor::scalar(2.5f32).to_string(), "2.5");
    }
}
