//! Broadcasting: numpy's (and TensorFlow's) shape rule, and the loops that
//! apply a function over operands broadcast against each other.
//!
//! Owns: [`broadcast_shape`], [`Plan`] (a broadcast collapsed to the fewest
//! dimensions, TensorFlow's `BCast` idea) and the elementwise drivers the
//! binary kernels use ([`binary_in_place`], [`binary_map`]). Must not know
//! what any op computes: kernels pass a function, monomorphised per op and
//! dtype, so there is no per-element dynamic dispatch.
//!
//! Iteration scheme, fastest first:
//! 1. same shape: one zipped loop;
//! 2. one operand has a single element: a loop over the other;
//! 3. otherwise the broadcast is collapsed (adjacent dimensions that
//!    broadcast the same way merge, size-1 dimensions vanish), and the
//!    output is walked row by row: an odometer over the outer dimensions
//!    and a contiguous inner loop in which each operand either advances
//!    (stride 1) or stays (stride 0). `[N,C] + [C]` collapses to one
//!    contiguous-by-repeated row loop; `[N,1] + [1,M]` to an outer product.
//!
//! Where the output has an operand's shape and that operand's buffer is
//! uniquely owned, the result is written over it instead of allocating.

use crate::bail;
use crate::error::Result;
use crate::tensor::{Element, Shape, Tensor};
use smallvec::SmallVec;

type Dims = SmallVec<[usize; 6]>;

/// The shape two operands broadcast to, or TensorFlow's
/// `Incompatible shapes: [2,3] vs. [4]`.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Shape> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        // Align from the right; missing leading dimensions are 1.
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        let d = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            bail!(invalid_argument, "Incompatible shapes: {} vs. {}", Shape::new(a), Shape::new(b));
        };
        out.push(d);
    }
    Ok(Shape::from_vec(out))
}

/// A broadcast of two operands to an output shape, collapsed for iteration.
///
/// Invariants: `dims` is non-empty, every entry is > 1 unless the output
/// has a single element, and each operand's stride in a dimension is 0
/// (broadcast) or its row-major stride over the dimensions it has.
#[derive(Debug, Clone)]
pub struct Plan {
    dims: Dims,
    a_strides: Dims,
    b_strides: Dims,
}

impl Plan {
    /// The plan for `a` and `b` broadcast to `out` (from
    /// [`broadcast_shape`]).
    pub fn new(a: &[usize], b: &[usize], out: &[usize]) -> Plan {
        let rank = out.len();
        let pad = |s: &[usize], i: usize| {
            if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 }
        };
        // Group dimensions by which operand (if any) is broadcast in them.
        let mut dims = Dims::new();
        let mut bcast: SmallVec<[(bool, bool); 6]> = SmallVec::new();
        for (i, &d) in out.iter().enumerate() {
            if d == 1 {
                continue;
            }
            let state = (pad(a, i) == 1, pad(b, i) == 1);
            match (dims.last_mut(), bcast.last()) {
                (Some(last), Some(&prev)) if prev == state => *last *= d,
                _ => {
                    dims.push(d);
                    bcast.push(state);
                }
            }
        }
        if dims.is_empty() {
            dims.push(1);
            bcast.push((true, true));
        }
        let strides = |broadcast: &dyn Fn(usize) -> bool| {
            let mut strides: Dims = SmallVec::from_elem(0, dims.len());
            let mut acc = 1;
            for g in (0..dims.len()).rev() {
                if !broadcast(g) {
                    strides[g] = acc;
                    acc *= dims[g];
                }
            }
            strides
        };
        let a_strides = strides(&|g| bcast[g].0);
        let b_strides = strides(&|g| bcast[g].1);
        Plan { dims, a_strides, b_strides }
    }

    /// The collapsed output dimensions (for tests and diagnostics).
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    fn inner(&self) -> usize {
        self.dims[self.dims.len() - 1]
    }

    /// Calls `row(a_offset, b_offset, out_offset)` for each row of the
    /// innermost collapsed dimension, in output order.
    fn for_each_row(&self, mut row: impl FnMut(usize, usize, usize)) {
        let outer = self.dims.len() - 1;
        let inner = self.inner();
        let rows: usize = self.dims[..outer].iter().product();
        let mut index: Dims = SmallVec::from_elem(0, outer);
        let (mut a_off, mut b_off) = (0usize, 0usize);
        for r in 0..rows {
            row(a_off, b_off, r * inner);
            // Advance the odometer over the outer dimensions.
            let mut d = outer;
            while d > 0 {
                d -= 1;
                index[d] += 1;
                a_off += self.a_strides[d];
                b_off += self.b_strides[d];
                if index[d] < self.dims[d] {
                    break;
                }
                a_off -= self.a_strides[d] * self.dims[d];
                b_off -= self.b_strides[d] * self.dims[d];
                index[d] = 0;
            }
        }
    }

    /// Calls `f(a_index, b_index)` for every output element in order.
    pub fn for_each_index(&self, mut f: impl FnMut(usize, usize)) {
        let inner = self.inner();
        let (sa, sb) = (self.a_strides[self.dims.len() - 1], self.b_strides[self.dims.len() - 1]);
        self.for_each_row(|a_off, b_off, _| {
            for i in 0..inner {
                f(a_off + i * sa, b_off + i * sb);
            }
        });
    }

    /// `out[i] = f(a[..], b[..])` over the broadcast.
    pub fn map<A: Copy, B: Copy, O>(&self, a: &[A], b: &[B], out: &mut [O], f: impl Fn(A, B) -> O) {
        let inner = self.inner();
        let last = self.dims.len() - 1;
        match (self.a_strides[last], self.b_strides[last]) {
            (0, 0) => self.for_each_row(|ao, bo, oo| {
                let (x, y) = (a[ao], b[bo]);
                out[oo..oo + inner].iter_mut().for_each(|o| *o = f(x, y));
            }),
            (0, _) => self.for_each_row(|ao, bo, oo| {
                let x = a[ao];
                let out = &mut out[oo..oo + inner];
                for (o, &y) in out.iter_mut().zip(&b[bo..bo + inner]) {
                    *o = f(x, y);
                }
            }),
            (_, 0) => self.for_each_row(|ao, bo, oo| {
                let y = b[bo];
                let out = &mut out[oo..oo + inner];
                for (o, &x) in out.iter_mut().zip(&a[ao..ao + inner]) {
                    *o = f(x, y);
                }
            }),
            _ => self.for_each_row(|ao, bo, oo| {
                let out = &mut out[oo..oo + inner];
                let rows = a[ao..ao + inner].iter().zip(&b[bo..bo + inner]);
                for (o, (&x, &y)) in out.iter_mut().zip(rows) {
                    *o = f(x, y);
                }
            }),
        }
    }

    /// `a[i] = f(a[i], b[..])`, for an `a` that already has the output's
    /// shape (so its offsets are the output's).
    fn map_into_a<T: Copy, B: Copy>(&self, a: &mut [T], b: &[B], f: impl Fn(T, B) -> T) {
        let inner = self.inner();
        let last = self.dims.len() - 1;
        if self.b_strides[last] == 0 {
            self.for_each_row(|_, bo, oo| {
                let y = b[bo];
                a[oo..oo + inner].iter_mut().for_each(|x| *x = f(*x, y));
            });
        } else {
            self.for_each_row(|_, bo, oo| {
                for (x, &y) in a[oo..oo + inner].iter_mut().zip(&b[bo..bo + inner]) {
                    *x = f(*x, y);
                }
            });
        }
    }

    /// `b[i] = f(a[..], b[i])`, for a `b` that already has the output's shape.
    fn map_into_b<A: Copy, T: Copy>(&self, a: &[A], b: &mut [T], f: impl Fn(A, T) -> T) {
        let inner = self.inner();
        let last = self.dims.len() - 1;
        if self.a_strides[last] == 0 {
            self.for_each_row(|ao, _, oo| {
                let x = a[ao];
                b[oo..oo + inner].iter_mut().for_each(|y| *y = f(x, *y));
            });
        } else {
            self.for_each_row(|ao, _, oo| {
                for (y, &x) in b[oo..oo + inner].iter_mut().zip(&a[ao..ao + inner]) {
                    *y = f(x, *y);
                }
            });
        }
    }
}

/// `f` over every element, in place when `x` is uniquely owned.
#[inline]
pub fn unary_in_place<T: Element>(mut x: Tensor, f: impl Fn(T) -> T) -> Result<Tensor> {
    if let Some(s) = x.try_slice_mut::<T>() {
        s.iter_mut().for_each(|v| *v = f(*v));
        return Ok(x);
    }
    Tensor::from_map(x.shape().clone(), x.as_slice::<T>()?, f)
}

/// `f(a, b)` elementwise with broadcasting, for a result of the operands'
/// type: written over `a` or `b` when one has the output's shape and is
/// uniquely owned, else into a fresh tensor.
pub fn binary_in_place<T: Element>(mut a: Tensor, mut b: Tensor, f: impl Fn(T, T) -> T) -> Result<Tensor> {
    if a.dims() == b.dims() {
        if let Some(sa) = a.try_slice_mut::<T>() {
            let sb = b.as_slice::<T>()?;
            for (x, &y) in sa.iter_mut().zip(sb) {
                *x = f(*x, y);
            }
            return Ok(a);
        }
        if let Some(sb) = b.try_slice_mut::<T>() {
            let sa = a.as_slice::<T>()?;
            for (y, &x) in sb.iter_mut().zip(sa) {
                *y = f(x, *y);
            }
            return Ok(b);
        }
        return Tensor::from_zip_map(a.shape().clone(), a.as_slice::<T>()?, b.as_slice::<T>()?, f);
    }
    // A single element broadcast against a tensor of at least its rank: the
    // output has the tensor's shape.
    if b.num_elements() == 1 && b.rank() <= a.rank() {
        let y = b.as_slice::<T>()?[0];
        return unary_in_place(a, |x| f(x, y));
    }
    if a.num_elements() == 1 && a.rank() <= b.rank() {
        let x = a.as_slice::<T>()?[0];
        return unary_in_place(b, |y| f(x, y));
    }
    let out_shape = broadcast_shape(a.dims(), b.dims())?;
    if out_shape.num_elements() == 0 {
        return Tensor::zeros(T::DTYPE, out_shape);
    }
    let plan = Plan::new(a.dims(), b.dims(), out_shape.dims());
    if out_shape.dims() == a.dims() {
        if let Some(sa) = a.try_slice_mut::<T>() {
            plan.map_into_a(sa, b.as_slice::<T>()?, &f);
            return Ok(a);
        }
    }
    if out_shape.dims() == b.dims() {
        if let Some(sb) = b.try_slice_mut::<T>() {
            plan.map_into_b(a.as_slice::<T>()?, sb, &f);
            return Ok(b);
        }
    }
    let (sa, sb) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
    Tensor::build::<T>(out_shape, |out| plan.map(sa, sb, out, &f))
}

/// `f(a, b)` where only `a` is given (`b` is lent): written over `a` when
/// it is uniquely owned and has the output's shape.
#[inline]
pub fn binary_into_lhs<T: Element>(mut a: Tensor, b: &Tensor, f: impl Fn(T, T) -> T) -> Result<Tensor> {
    if let [y] = *b.as_slice::<T>()?
        && b.rank() <= a.rank()
    {
        return unary_in_place(a, |x| f(x, y));
    }
    if a.dims() == b.dims() {
        if let Some(sa) = a.try_slice_mut::<T>() {
            for (x, &y) in sa.iter_mut().zip(b.as_slice::<T>()?) {
                *x = f(*x, y);
            }
            return Ok(a);
        }
    }
    binary_in_place(a, b.clone(), f)
}

/// `f(a, b)` where only `b` is given (`a` is lent): written over `b` when
/// it is uniquely owned and has the output's shape.
#[inline]
pub fn binary_into_rhs<T: Element>(a: &Tensor, mut b: Tensor, f: impl Fn(T, T) -> T) -> Result<Tensor> {
    if let [x] = *a.as_slice::<T>()?
        && a.rank() <= b.rank()
    {
        return unary_in_place(b, |y| f(x, y));
    }
    if a.dims() == b.dims() {
        if let Some(sb) = b.try_slice_mut::<T>() {
            for (y, &x) in sb.iter_mut().zip(a.as_slice::<T>()?) {
                *y = f(x, *y);
            }
            return Ok(b);
        }
    }
    binary_in_place(a.clone(), b, f)
}

/// `f(a, b)` elementwise with broadcasting into a fresh tensor of another
/// element type (comparisons).
pub fn binary_map<T: Element, O: Element>(a: &Tensor, b: &Tensor, f: impl Fn(T, T) -> O) -> Result<Tensor> {
    let (sa, sb) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
    if a.dims() == b.dims() {
        return Tensor::from_zip_map(a.shape().clone(), sa, sb, f);
    }
    if sb.len() == 1 && b.rank() <= a.rank() {
        let y = sb[0];
        return Tensor::from_map(a.shape().clone(), sa, |x| f(x, y));
    }
    if sa.len() == 1 && a.rank() <= b.rank() {
        let x = sa[0];
        return Tensor::from_map(b.shape().clone(), sb, |y| f(x, y));
    }
    let out_shape = broadcast_shape(a.dims(), b.dims())?;
    if out_shape.num_elements() == 0 {
        return Tensor::zeros(O::DTYPE, out_shape);
    }
    let plan = Plan::new(a.dims(), b.dims(), out_shape.dims());
    Tensor::build::<O>(out_shape, |out| plan.map(sa, sb, out, &f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(shape, v).unwrap()
    }

    fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        binary_in_place::<f32>(a.clone(), b.clone(), |x, y| x + y)
    }

    #[test]
    fn shapes_broadcast_like_numpy() {
        let ok = |a: &[usize], b: &[usize], want: &[usize]| {
            assert_eq!(broadcast_shape(a, b).unwrap().dims(), want, "{a:?} vs {b:?}");
            assert_eq!(broadcast_shape(b, a).unwrap().dims(), want, "{b:?} vs {a:?}");
        };
        ok(&[], &[], &[]);
        ok(&[], &[2, 3], &[2, 3]);
        ok(&[3, 1], &[1, 4], &[3, 4]);
        ok(&[2, 3, 4], &[4], &[2, 3, 4]);
        ok(&[5, 1, 4], &[3, 1], &[5, 3, 4]);
        ok(&[0, 3], &[1, 3], &[0, 3]);
        ok(&[0], &[1], &[0]);
        let err = broadcast_shape(&[2, 3], &[4]).unwrap_err();
        assert_eq!(err.message, "Incompatible shapes: [2,3] vs. [4]");
        assert!(broadcast_shape(&[0], &[2]).is_err());
    }

    #[test]
    fn plans_collapse_dimensions() {
        // [N,C] + [C]: one group where b is broadcast, then a shared one.
        let p = Plan::new(&[4, 3], &[3], &[4, 3]);
        assert_eq!(p.dims(), &[4, 3]);
        assert_eq!((p.a_strides.as_slice(), p.b_strides.as_slice()), (&[3, 1][..], &[0, 1][..]));
        // Same pattern in adjacent dims merges: [2,3,4] + [1,1,4] -> [6,4].
        let p = Plan::new(&[2, 3, 4], &[1, 1, 4], &[2, 3, 4]);
        assert_eq!(p.dims(), &[6, 4]);
        // Size-1 dims vanish: [1,5] + [1,1] -> [5].
        let p = Plan::new(&[1, 5], &[1, 1], &[1, 5]);
        assert_eq!(p.dims(), &[5]);
        assert_eq!(p.b_strides.as_slice(), &[0]);
    }

    #[test]
    fn row_and_column_broadcast() {
        let col = t(&[3, 1], &[1., 2., 3.]);
        let row = t(&[1, 4], &[10., 20., 30., 40.]);
        let out = add(&col, &row).unwrap();
        assert_eq!(out.dims(), &[3, 4]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[11., 21., 31., 41., 12., 22., 32., 42., 13., 23., 33., 43.]);
    }

    #[test]
    fn rank_mismatch_and_middle_axis() {
        // [2,3,2] + [3,1]: b broadcast in the first and last dims.
        let a = t(&[2, 3, 2], &(0..12).map(|i| i as f32).collect::<Vec<_>>());
        let b = t(&[3, 1], &[100., 200., 300.]);
        let out = add(&a, &b).unwrap();
        assert_eq!(out.dims(), &[2, 3, 2]);
        assert_eq!(
            out.as_slice::<f32>().unwrap(),
            &[100., 101., 202., 203., 304., 305., 106., 107., 208., 209., 310., 311.]
        );
        // And from the other side, which is not symmetric for Sub.
        let out = binary_in_place::<f32>(b.clone(), a.clone(), |x, y| x - y).unwrap();
        assert_eq!(&out.as_slice::<f32>().unwrap()[..4], &[100., 99., 198., 197.]);
    }

    #[test]
    fn scalars_and_single_elements() {
        let s = Tensor::scalar(2.0f32);
        let v = t(&[3], &[1., 2., 3.]);
        assert_eq!(add(&s, &v).unwrap().as_slice::<f32>().unwrap(), &[3., 4., 5.]);
        assert_eq!(add(&v, &s).unwrap().as_slice::<f32>().unwrap(), &[3., 4., 5.]);
        // A [1,1,1] operand raises the rank of the result.
        let one = t(&[1, 1, 1], &[1.]);
        let out = add(&v, &one).unwrap();
        assert_eq!(out.dims(), &[1, 1, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[2., 3., 4.]);
        let out = add(&s, &s).unwrap();
        assert!(out.shape().is_scalar());
        assert_eq!(out.as_slice::<f32>().unwrap(), &[4.]);
    }

    #[test]
    fn empty_outputs() {
        let e = Tensor::zeros(crate::tensor::DType::F32, [0, 3]).unwrap();
        let r = t(&[1, 3], &[1., 2., 3.]);
        let out = add(&e, &r).unwrap();
        assert_eq!(out.dims(), &[0, 3]);
        let out = add(&r, &e).unwrap();
        assert_eq!(out.dims(), &[0, 3]);
        let s = Tensor::scalar(1.0f32);
        assert_eq!(add(&e, &s).unwrap().dims(), &[0, 3]);
        let err = add(&e, &t(&[2, 3], &[0.; 6])).unwrap_err();
        assert_eq!(err.message, "Incompatible shapes: [0,3] vs. [2,3]");
    }

    #[test]
    fn reuses_a_uniquely_owned_operand() {
        let a = t(&[4, 5], &[1.; 20]);
        let ptr = a.data_ptr();
        let b = t(&[5], &[1., 2., 3., 4., 5.]);
        let out = binary_in_place::<f32>(a, b.clone(), |x, y| x * y).unwrap();
        assert_eq!(out.data_ptr(), ptr, "written over a");
        assert_eq!(&out.as_slice::<f32>().unwrap()[15..], &[1., 2., 3., 4., 5.]);
        // A shared operand is left alone.
        let a = t(&[4, 5], &[1.; 20]);
        let keep = a.clone();
        let out = binary_in_place::<f32>(a, b, |x, y| x * y).unwrap();
        assert!(!out.shares_bytes_with(&keep));
        assert_eq!(keep.as_slice::<f32>().unwrap(), &[1.; 20]);
        // Same shape, the right operand unique: written over b.
        let a = t(&[20], &[2.; 20]);
        let keep = a.clone();
        let b = t(&[20], &[3.; 20]);
        let ptr = b.data_ptr();
        let out = binary_in_place::<f32>(a, b, |x, y| x - y).unwrap();
        assert_eq!(out.data_ptr(), ptr);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[-1.; 20]);
        drop(keep);
    }

    #[test]
    fn general_case_matches_a_naive_reference() {
        // [2,1,3,1] vs [4,1,5]: every dimension broadcasts one way or the
        // other. Reference: index arithmetic per element.
        let ad = [2usize, 1, 3, 1];
        let bd = [4usize, 1, 5];
        let av: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let bv: Vec<f32> = (0..20).map(|i| (i * 10) as f32).collect();
        let out = binary_map::<f32, f32>(&t(&ad, &av), &t(&bd, &bv), |x, y| x + y).unwrap();
        assert_eq!(out.dims(), &[2, 4, 3, 5]);
        let got = out.as_slice::<f32>().unwrap();
        let mut k = 0;
        for i0 in 0..2 {
            for i1 in 0..4 {
                for i2 in 0..3 {
                    for i3 in 0..5 {
                        let want = av[i0 * 3 + i2] + bv[i1 * 5 + i3];
                        assert_eq!(got[k], want, "at {:?}", (i0, i1, i2, i3));
                        k += 1;
                    }
                }
            }
        }
    }
}
