//! Tensors: a dtype, a shape and 64-byte aligned bytes shared by reference
//! count, so feeding, forwarding and fetching a tensor never copies it.
//!
//! Owns: [`Tensor`], its constructors, typed and ndarray views, string
//! tensors' layout ([`strings`]) and .npy I/O ([`npy`]). Must not know about
//! graphs, kernels or the network: the transport builds tensors over its
//! receive buffers through [`Tensor::from_borrowed`], and offers memory for
//! a kernel's next large output through [`placement`]; that is the whole
//! interface.
//!
//! A string tensor is the same `Tensor`: its storage holds the image
//! [`strings`] lays out (offsets, then bytes), which is also what crosses
//! the wire. Numeric views refuse it by dtype, so numeric paths never look
//! at string bytes and pay nothing for them.

pub mod dtype;
pub mod npy;
pub mod placement;
pub mod shape;
mod storage;
pub mod strings;

pub use dtype::{DType, Element};
pub use shape::Shape;
pub use storage::{INLINE_BYTES, Keepalive, TENSOR_ALIGN};
pub use strings::Strings;

use crate::error::{Result, Status};
use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};
use std::fmt;
use std::mem::MaybeUninit;
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

/// Bytes of a tensor of `dtype` and `shape` whose bytes are all zero: for
/// string, the offsets of that many empty strings.
fn zeroed_byte_len(dtype: DType, shape: &Shape) -> Result<usize> {
    let width = dtype.size().unwrap_or(strings::END_BYTES);
    shape
        .checked_num_elements()
        .and_then(|n| n.checked_mul(width))
        .ok_or_else(|| Status::invalid_argument(format!("tensor shape {shape} of {dtype} overflows")))
}

/// Checks that foreign `bytes` are a valid tensor of `dtype` and `shape`:
/// the exact length for fixed-width dtypes (and 0/1 bytes for bool), a
/// well-formed image for string.
fn check_foreign_bytes(dtype: DType, shape: &Shape, bytes: &[u8]) -> Result<()> {
    if dtype == DType::String {
        let elements = shape
            .checked_num_elements()
            .ok_or_else(|| Status::invalid_argument(format!("tensor shape {shape} of {dtype} overflows")))?;
        return strings::check_image(bytes, elements)
            .map_err(|e| e.context(format_args!("string tensor of shape {shape}")));
    }
    let len = zeroed_byte_len(dtype, shape)?;
    if len != bytes.len() {
        return Err(Status::invalid_argument(format!(
            "{} bytes do not fill a {dtype} tensor of shape {shape} ({len} bytes)",
            bytes.len()
        )));
    }
    if dtype == DType::Bool {
        check_bools(bytes)?;
    }
    Ok(())
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
        debug_assert!(match dtype.size() {
            Some(width) => storage.bytes().len() == shape.num_elements() * width,
            None => strings::check_image(storage.bytes(), shape.num_elements()).is_ok(),
        });
        Tensor { inner: Arc::new(Inner { dtype, shape, storage }) }
    }

    /// A tensor of zeros (false for bool, empty strings for string).
    pub fn zeros(dtype: DType, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        let len = zeroed_byte_len(dtype, &shape)?;
        Ok(Tensor::from_parts(dtype, shape, Storage::zeroed(len)))
    }

    /// A tensor whose elements `fill` writes; they start zeroed.
    pub fn build<T: Element>(shape: impl Into<Shape>, fill: impl FnOnce(&mut [T])) -> Result<Tensor> {
        let shape = shape.into();
        if placement::is_armed_for(T::DTYPE, zeroed_byte_len(T::DTYPE, &shape)?) {
            // SAFETY: every byte is zeroed before `fill` sees the elements,
            // and all-zero bytes are a valid float (only floats are placed).
            return unsafe {
                Tensor::build_uninit::<T>(shape, |out| {
                    std::ptr::write_bytes(out.as_mut_ptr(), 0, out.len());
                    fill(&mut *(out as *mut [MaybeUninit<T>] as *mut [T]));
                })
            };
        }
        let mut t = Tensor::zeros(T::DTYPE, shape)?;
        let slice = t.try_slice_mut::<T>().expect("a fresh tensor is uniquely owned and of its dtype");
        fill(slice);
        Ok(t)
    }

    /// A tensor whose elements `fill` writes, none of them zeroed first
    /// (for outputs that are large and written in full: a product, a copy).
    ///
    /// # Safety
    /// `fill` must initialise every element of the slice it is given before
    /// it returns; the tensor's readers see exactly what it wrote.
    pub unsafe fn build_uninit<T: Element>(
        shape: impl Into<Shape>,
        fill: impl FnOnce(&mut [MaybeUninit<T>]),
    ) -> Result<Tensor> {
        let shape = shape.into();
        let len = zeroed_byte_len(T::DTYPE, &shape)?;
        if let Some(placed) = placement::take(T::DTYPE, len) {
            // SAFETY: the placement's contract: `len` writable bytes, 64-byte
            // aligned (so aligned for `T`; `len` is a whole number of `T`s),
            // that nobody else touches until this tensor is handed on;
            // `MaybeUninit<T>` claims nothing about them.
            let elements = unsafe {
                std::slice::from_raw_parts_mut(placed.ptr.as_ptr().cast::<MaybeUninit<T>>(), len / size_of::<T>())
            };
            fill(elements);
            // SAFETY: `fill` wrote every element (the caller's promise); the
            // bytes stay valid while `keep` lives, and only readers of this
            // tensor see them from here on.
            let storage = unsafe { Storage::borrowed(placed.ptr, len, placed.keep) };
            return Ok(Tensor::from_parts(T::DTYPE, shape, storage));
        }
        let fill_bytes = |bytes: &mut [MaybeUninit<u8>]| {
            debug_assert_eq!(bytes.as_ptr() as usize % TENSOR_ALIGN, 0);
            // SAFETY: tensor bytes are 64-byte aligned (so aligned for `T`)
            // and `len` is a whole number of `T`s; `MaybeUninit<T>` claims
            // nothing about them.
            let elements = unsafe {
                std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<MaybeUninit<T>>(), len / size_of::<T>())
            };
            fill(elements);
        };
        // SAFETY: writing every element writes every byte; the caller
        // promises `fill` writes every element.
        let storage = unsafe { Storage::written_by(len, fill_bytes) };
        Ok(Tensor::from_parts(T::DTYPE, shape, storage))
    }

    /// `f` of each element of `src`, as a tensor of `shape` (which must
    /// hold exactly `src.len()` elements), written without zeroing first.
    #[inline]
    pub fn from_map<T: Copy, O: Element>(shape: impl Into<Shape>, src: &[T], f: impl Fn(T) -> O) -> Result<Tensor> {
        let shape = shape.into();
        Tensor::check_fill(&shape, src.len())?;
        // SAFETY: `shape` holds `src.len()` elements, and the loop writes
        // one for each element of `src`.
        unsafe {
            Tensor::build_uninit::<O>(shape, |out| {
                for (o, &x) in out.iter_mut().zip(src) {
                    o.write(f(x));
                }
            })
        }
    }

    /// `f(a[i], b[i])` for each `i`, as a tensor of `shape` (which must
    /// hold exactly as many elements as `a` and `b`), written without
    /// zeroing first.
    #[inline]
    pub fn from_zip_map<A: Copy, B: Copy, O: Element>(
        shape: impl Into<Shape>,
        a: &[A],
        b: &[B],
        f: impl Fn(A, B) -> O,
    ) -> Result<Tensor> {
        let shape = shape.into();
        if a.len() != b.len() {
            return Err(Status::invalid_argument(format!("{} elements zipped with {}", a.len(), b.len())));
        }
        Tensor::check_fill(&shape, a.len())?;
        // SAFETY: `shape` holds `a.len()` elements, and the loop writes one
        // for each pair of `a` and `b`, which have that length.
        unsafe {
            Tensor::build_uninit::<O>(shape, |out| {
                for (o, (&x, &y)) in out.iter_mut().zip(a.iter().zip(b)) {
                    o.write(f(x, y));
                }
            })
        }
    }

    fn check_fill(shape: &Shape, values: usize) -> Result<()> {
        if shape.checked_num_elements() != Some(values) {
            return Err(Status::invalid_argument(format!("{values} values do not fill shape {shape}")));
        }
        Ok(())
    }

    /// A scalar.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor::build::<T>(Shape::scalar(), |s| s[0] = value).expect("a scalar cannot overflow")
    }

    /// A tensor holding a copy of `values`.
    pub fn from_slice<T: Element>(shape: impl Into<Shape>, values: &[T]) -> Result<Tensor> {
        Tensor::from_map(shape, values, |v| v)
    }

    /// A tensor holding a copy of raw little-endian `bytes` (for string,
    /// an image as [`strings`] lays it out, which is checked).
    pub fn from_bytes(dtype: DType, shape: impl Into<Shape>, bytes: &[u8]) -> Result<Tensor> {
        let shape = shape.into();
        check_foreign_bytes(dtype, &shape, bytes)?;
        Ok(Tensor::from_parts(dtype, shape, Storage::copy_of(bytes)))
    }

    /// A string tensor of `shape` holding copies of `values`, row-major.
    pub fn from_strings<S: AsRef<[u8]>>(shape: impl Into<Shape>, values: &[S]) -> Result<Tensor> {
        let shape = shape.into();
        Tensor::check_fill(&shape, values.len())?;
        let len = strings::image_len(values).ok_or_else(|| {
            Status::invalid_argument(format!("{} strings of shape {shape} overflow the address space", values.len()))
        })?;
        // SAFETY: `encode_into` writes every byte of an `image_len` buffer.
        let storage = unsafe { Storage::written_by(len, |bytes| strings::encode_into(values, bytes)) };
        Ok(Tensor::from_parts(DType::String, shape, storage))
    }

    /// A string scalar.
    pub fn string_scalar(value: impl AsRef<[u8]>) -> Tensor {
        Tensor::from_strings(Shape::scalar(), &[value]).expect("one string fills a scalar")
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
        if let Some(width) = dtype.size() {
            let expected = zeroed_byte_len(dtype, &shape)?;
            if expected != len {
                return Err(Status::invalid_argument(format!(
                    "{len} bytes do not fill a {dtype} tensor of shape {shape} ({expected} bytes of {width} per element)"
                )));
            }
        }
        if ptr.as_ptr() as usize % TENSOR_ALIGN != 0 {
            return Err(Status::invalid_argument(format!(
                "tensor bytes at {:p} are not {TENSOR_ALIGN}-byte aligned",
                ptr.as_ptr()
            )));
        }
        // SAFETY: forwarded from this function's contract.
        let storage = unsafe { Storage::borrowed(ptr, len, keepalive) };
        check_foreign_bytes(dtype, &shape, storage.bytes())?;
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
        // from `T`s, written in full by `build_uninit`'s fill, or checked
        // bools).
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size_of::<T>()) })
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
        Some(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), bytes.len() / size_of::<T>()) })
    }

    /// The elements of a string tensor, read in place.
    pub fn strings(&self) -> Result<Strings<'_>> {
        if self.dtype() != DType::String {
            return Err(Status::invalid_argument(format!(
                "expected a string tensor, got {} of shape {}",
                self.dtype(),
                self.shape()
            )));
        }
        // Every string tensor's bytes were built or checked as an image of
        // its element count.
        Ok(Strings::over_checked(self.as_bytes(), self.num_elements()))
    }

    /// The single string of a scalar or one-element string tensor.
    pub fn string_value(&self) -> Result<&[u8]> {
        let strings = self.strings()?;
        match (strings.len(), strings.get(0)) {
            (1, Some(s)) => Ok(s),
            _ => Err(Status::invalid_argument(format!("expected a single string, got shape {}", self.shape()))),
        }
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

    /// A complex64 tensor's (real, imaginary) pairs; empty for other dtypes.
    pub fn complex_parts(&self) -> Vec<(f32, f32)> {
        if self.dtype() != DType::Complex64 {
            return Vec::new();
        }
        let float = |b: &[u8]| f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        self.as_bytes().chunks_exact(8).map(|pair| (float(&pair[..4]), float(&pair[4..]))).collect()
    }

    /// Converts every element to f64, for comparisons and printing. A
    /// string has no number: each converts to NaN; a complex number
    /// converts to its real part.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        fn convert<T: Element>(t: &Tensor) -> Vec<f64> {
            t.as_slice::<T>().expect("dtype matches").iter().map(|v| v.to_f64()).collect()
        }
        match self.dtype() {
            DType::F32 => convert::<f32>(self),
            DType::F64 => convert::<f64>(self),
            DType::I32 => convert::<i32>(self),
            DType::I64 => convert::<i64>(self),
            DType::Bool => convert::<bool>(self),
            DType::U8 => convert::<u8>(self),
            DType::U64 => convert::<u64>(self),
            DType::F16 => convert::<half::f16>(self),
            DType::BF16 => convert::<half::bf16>(self),
            DType::I8 => convert::<i8>(self),
            DType::I16 => convert::<i16>(self),
            DType::U16 => convert::<u16>(self),
            DType::U32 => convert::<u32>(self),
            DType::Complex64 => self.complex_parts().into_iter().map(|(re, _)| re as f64).collect(),
            DType::String => vec![f64::NAN; self.num_elements()],
        }
    }

    /// Each element as numpy prints it (`1.5`, `true`, `b'abc'`).
    fn element_texts(&self) -> Vec<String> {
        fn texts<T: Element>(t: &Tensor) -> Vec<String> {
            t.as_slice::<T>().expect("dtype matches").iter().map(|v| format!("{v:?}")).collect()
        }
        match self.dtype() {
            DType::F32 => texts::<f32>(self),
            DType::F64 => texts::<f64>(self),
            DType::I32 => texts::<i32>(self),
            DType::I64 => texts::<i64>(self),
            DType::Bool => texts::<bool>(self),
            DType::U8 => texts::<u8>(self),
            DType::U64 => texts::<u64>(self),
            DType::F16 => texts::<half::f16>(self),
            DType::BF16 => texts::<half::bf16>(self),
            DType::I8 => texts::<i8>(self),
            DType::I16 => texts::<i16>(self),
            DType::U16 => texts::<u16>(self),
            DType::U32 => texts::<u32>(self),
            DType::Complex64 => self.complex_parts().into_iter().map(|(re, im)| format!("({re:?}{im:+?}j)")).collect(),
            DType::String => Strings::over_checked(self.as_bytes(), self.num_elements())
                .iter()
                .map(|s| {
                    let mut text = String::new();
                    strings::write_bytes_literal(&mut text, s).expect("writing to a String cannot fail");
                    text
                })
                .collect(),
        }
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
        if let (Ok(got), Ok(want)) = (self.strings(), expected.strings()) {
            return match got.iter().zip(want.iter()).position(|(g, w)| g != w) {
                None => Ok(()),
                Some(i) => Err(format!(
                    "element {i}: got {}, expected {}",
                    self.element_texts()[i],
                    expected.element_texts()[i]
                )),
            };
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
        let values: Vec<String> = if self.dtype() == DType::String {
            self.element_texts()
        } else {
            self.to_f64_vec().iter().map(|v| v.to_string()).collect()
        };
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
        nested(f, self.dims(), &self.element_texts())
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
    fn unzeroed_constructors_write_every_element_inline_and_on_the_heap() {
        // 3 elements stay inline (zeroed); 1000 go to an unzeroed heap block.
        for len in [3usize, 1000] {
            let src: Vec<i32> = (0..len as i32).collect();
            let doubled = Tensor::from_map([len], &src, |v| 2 * v).unwrap();
            assert_eq!(doubled.as_slice::<i32>().unwrap(), src.iter().map(|v| 2 * v).collect::<Vec<_>>());
            let flags = Tensor::from_zip_map([len], &src, &src[..], |a, b| (a + b) % 3 == 0).unwrap();
            assert_eq!(flags.dtype(), DType::Bool);
            assert!(flags.as_slice::<bool>().unwrap().iter().zip(&src).all(|(&f, v)| f == ((2 * v) % 3 == 0)));
            let copied = doubled.deep_copy();
            assert!(copied.bit_eq(&doubled) && !copied.shares_bytes_with(&doubled));
            // SAFETY: the closure writes every element.
            let built = unsafe {
                Tensor::build_uninit::<f64>([len], |out| {
                    out.iter_mut().enumerate().for_each(|(i, o)| {
                        o.write(i as f64 + 0.5);
                    })
                })
            }
            .unwrap();
            assert_eq!(built.as_slice::<f64>().unwrap()[len - 1], len as f64 - 0.5);
        }
    }

    #[test]
    fn unzeroed_constructors_reject_a_shape_the_values_do_not_fill() {
        let err = Tensor::from_map([2, 3], &[1.0f32; 5], |v| v).unwrap_err();
        assert!(err.message.contains("5 values do not fill shape [2,3]"), "{err}");
        let err = Tensor::from_zip_map([4], &[1; 4], &[2; 3], |a: i32, b: i32| a + b).unwrap_err();
        assert!(err.message.contains("4 elements zipped with 3"), "{err}");
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
    fn string_tensors_hold_any_bytes_in_one_image() {
        let big = vec![0xabu8; 3 << 20];
        let values: [&[u8]; 5] = [b"", b"abc", b"\xff\xfe\x00not utf-8", &big, b""];
        let t = Tensor::from_strings([5], &values).unwrap();
        assert_eq!(t.dtype(), DType::String);
        assert_eq!(t.byte_len(), 5 * 8 + 3 + 12 + big.len());
        assert_eq!(t.data_ptr() as usize % TENSOR_ALIGN, 0);
        let view = t.strings().unwrap();
        assert_eq!(view.len(), 5);
        assert_eq!(view.to_vec(), values.to_vec());
        assert_eq!(view.get(3).unwrap().len(), 3 << 20);
        // The image is the whole story: copying its bytes rebuilds the tensor.
        let again = Tensor::from_bytes(DType::String, [5], t.as_bytes()).unwrap();
        assert!(again.bit_eq(&t));
        // Numeric views refuse strings, and string views refuse numbers.
        let err = t.as_slice::<f32>().unwrap_err();
        assert_eq!(err.message, "expected a float32 tensor, got string of shape [5]");
        assert!(t.scalar_value::<i64>().is_err() && t.view::<bool>().is_err());
        let err = Tensor::scalar(1.0f32).strings().unwrap_err();
        assert_eq!(err.message, "expected a string tensor, got float32 of shape []");
    }

    #[test]
    fn string_scalars_zeros_and_empty_string_tensors() {
        let s = Tensor::string_scalar("model.ckpt");
        assert_eq!((s.rank(), s.string_value().unwrap()), (0, &b"model.ckpt"[..]));
        assert!(s.byte_len() <= INLINE_BYTES, "a short scalar stays inline");
        let zeros = Tensor::zeros(DType::String, [2, 3]).unwrap();
        assert_eq!(zeros.byte_len(), 48);
        assert!(zeros.strings().unwrap().iter().all(|s| s.is_empty()));
        assert!(zeros.bit_eq(&Tensor::from_strings([2, 3], &[""; 6]).unwrap()));
        for dims in [[0usize, 4], [3, 0]] {
            let empty = Tensor::from_strings::<&[u8]>(dims, &[]).unwrap();
            assert_eq!((empty.byte_len(), empty.strings().unwrap().len()), (0, 0));
            assert!(empty.bit_eq(&Tensor::zeros(DType::String, dims).unwrap()));
        }
        let err = Tensor::from_strings([2], &["a"]).unwrap_err();
        assert!(err.message.contains("1 values do not fill shape [2]"), "{err}");
        assert!(Tensor::from_strings([3], &["a", "b", "c"]).unwrap().string_value().is_err());
    }

    #[test]
    fn foreign_string_images_are_checked() {
        let good = Tensor::from_strings([2], &["ab", "c"]).unwrap();
        let bytes = good.as_bytes();
        let err = Tensor::from_bytes(DType::String, [3], bytes).unwrap_err();
        assert!(err.message.contains("string tensor of shape [3]"), "{err}");
        let mut backwards = bytes.to_vec();
        backwards[0..8].copy_from_slice(&9u64.to_le_bytes());
        assert!(Tensor::from_bytes(DType::String, [2], &backwards).is_err());
        // Borrowed bytes (a receive buffer) are checked the same way.
        let owner = Tensor::from_strings([1], &[vec![b'x'; 100]]).unwrap();
        let ptr = NonNull::new(owner.data_ptr() as *mut u8).unwrap();
        let keepalive: Keepalive = std::sync::Arc::new(owner.clone());
        // SAFETY: `owner`'s bytes are immutable and kept alive.
        let view = unsafe { Tensor::from_borrowed(DType::String, [1], ptr, owner.byte_len(), keepalive.clone()) };
        assert!(view.unwrap().bit_eq(&owner));
        // SAFETY: as above; one byte short of the image.
        let short = unsafe { Tensor::from_borrowed(DType::String, [1], ptr, owner.byte_len() - 1, keepalive) };
        assert!(short.unwrap_err().message.contains("outside"));
    }

    #[test]
    fn string_tensors_reshape_copy_compare_and_print() {
        let long = "x".repeat(70);
        let t = Tensor::from_strings([2, 2], &["a", "it's", "\n\u{e9}", long.as_str()]).unwrap();
        let r = t.reshaped([4]).unwrap();
        assert!(r.shares_bytes_with(&t), "large string tensors reshape without a copy");
        assert_eq!(r.strings().unwrap().get(1), Some(&b"it's"[..]));
        assert!(t.reshaped([3]).is_err());
        assert!(t.deep_copy().bit_eq(&t));
        assert!(t.all_close(&t.deep_copy(), 0.0, 0.0).is_ok());
        let other = Tensor::from_strings([2, 2], &["a", "its", "\n\u{e9}", long.as_str()]).unwrap();
        assert_eq!(t.all_close(&other, 1.0, 1.0).unwrap_err(), r#"element 1: got b"it's", expected b'its'"#);
        assert!(t.all_close(&Tensor::zeros(DType::F32, [2, 2]).unwrap(), 1.0, 1.0).is_err());
        let small = Tensor::from_strings([2, 2], &["a", "it's", "\n\u{e9}", ""]).unwrap();
        assert_eq!(small.to_string(), "[[b'a', b\"it's\"],\n [b'\\n\\xc3\\xa9', b'']]");
        assert_eq!(Tensor::string_scalar(b"\x00").to_string(), r"b'\x00'");
        assert_eq!(format!("{small:?}"), "Tensor<string[2,2]>[b'a', b\"it's\", b'\\n\\xc3\\xa9', b'']");
        assert!(small.to_f64_vec().iter().all(|v| v.is_nan()));
    }

    #[test]
    fn display_nests() {
        let t = Tensor::from_slice::<i64>([2, 2], &[1, 2, 3, 4]).unwrap();
        assert_eq!(t.to_string(), "[[1, 2],\n [3, 4]]");
        assert_eq!(Tensor::scalar(2.5f32).to_string(), "2.5");
    }
}
