//! Matrix products: MatMul (with transpose_a/transpose_b) and BatchMatMul /
//! BatchMatMulV2 (batch dimensions broadcast, adj_x/adj_y).
//!
//! Owns: these kernels and [`Gemm`], the one matrix-multiply primitive:
//! float32/float64 go to the `matrixmultiply` crate's sgemm/dgemm, which
//! take arbitrary strides, so a transposed operand is read in place rather
//! than copied (an output may be strided too: Einsum writes products into
//! a permuted output in place); int32/int64 use a plain loop (wrapping, as
//! TF's Eigen integer products do). Tiny products skip the gemm's packing overhead.
//! Must not spawn threads: the executor decides what runs in parallel, and
//! these kernels say they are expensive so it can.

use super::broadcast::{Plan, broadcast_shape};
use super::math::{REAL, binary_signature};
use super::numeric::Num;
use super::registry::OpDef;
use super::{IntraOpPool, KernelInit, OpContext, OpKernel, Value, unsupported_dtype};
use crate::bail;
use crate::error::Result;
use crate::tensor::{DType, Shape, Tensor};
use std::mem::MaybeUninit;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("MatMul", binary_signature, build_matmul),
    OpDef::kernel("BatchMatMul", binary_signature, build_batch_matmul),
    OpDef::kernel("BatchMatMulV2", binary_signature, build_batch_matmul),
];

/// Below this many multiply-adds a direct loop beats packing for the gemm.
const DIRECT_LIMIT: usize = 4096;

/// One operand of a product as the gemm reads it: element `(i, j)` is
/// `data[i * rows + j * cols]`.
#[derive(Clone, Copy)]
pub struct Strided<'a, T> {
    pub data: &'a [T],
    pub rows: usize,
    pub cols: usize,
}

impl<'a, T> Strided<'a, T> {
    /// A row-major matrix with `cols` columns.
    pub fn row_major(data: &'a [T], cols: usize) -> Strided<'a, T> {
        Strided { data, rows: cols, cols: 1 }
    }

    /// The operand from its row `first` on.
    fn rows_from(self, first: usize) -> Strided<'a, T> {
        Strided { data: &self.data[first * self.rows..], ..self }
    }

    /// Whether a `rows x cols` matrix read with these strides stays inside
    /// `data`.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || (rows - 1) * self.rows + (cols - 1) * self.cols < self.data.len()
    }
}

/// The output of a product as the gemm writes it: element `(i, j)` is at
/// `ptr + i * rows + j * cols`. A raw pointer, not a slice: Einsum writes
/// products straight into a permuted output, where one product's elements
/// interleave with another's (possibly on another thread).
#[derive(Clone, Copy)]
pub struct StridedOut<T> {
    pub ptr: *mut T,
    pub rows: usize,
    pub cols: usize,
}

/// One strided matrix product `c = op(a) · op(b)`, `[m, k, n]` its sizes.
/// Every element of the `m x n` output is written, whatever it held (it may
/// be uninitialised: a fresh output is not zeroed first).
pub trait Gemm: Num {
    /// The product into a strided output.
    ///
    /// # Safety
    /// For every `i < m` and `j < n`, `c.ptr + i * c.rows + j * c.cols` must
    /// be valid for writes of a `Self`, distinct from every other `(i, j)`'s,
    /// and touched by nothing else during the call. (`a` and `b` are
    /// bounds-checked.)
    unsafe fn gemm_strided(mkn: [usize; 3], a: Strided<'_, Self>, b: Strided<'_, Self>, c: StridedOut<Self>);

    /// The product into a row-major `m x n` buffer.
    fn gemm(mkn: [usize; 3], a: Strided<'_, Self>, b: Strided<'_, Self>, c: &mut [MaybeUninit<Self>]) {
        let [m, _, n] = mkn;
        assert!(c.len() >= m * n, "gemm output smaller than {m} x {n}");
        let out = StridedOut { ptr: c.as_mut_ptr().cast::<Self>(), rows: n, cols: 1 };
        // SAFETY: a row-major `m x n` block inside `c`, a unique borrow.
        unsafe { Self::gemm_strided(mkn, a, b, out) }
    }

    /// [`Gemm::gemm`] over a buffer of initialised elements, all overwritten.
    fn gemm_over(mkn: [usize; 3], a: Strided<'_, Self>, b: Strided<'_, Self>, c: &mut [Self]) {
        // SAFETY: the same memory, viewed as possibly uninitialised; `gemm`
        // writes only initialised values into it, so `c` stays valid.
        let c = unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast::<MaybeUninit<Self>>(), c.len()) };
        Self::gemm(mkn, a, b, c)
    }
}

/// The loop every type can use: i-p-j order, so with a row-major `b` the
/// inner loop runs along contiguous rows of `b` and `c`. It accumulates, so
/// each row of `c` is zeroed first.
///
/// # Safety
/// As [`Gemm::gemm_strided`].
unsafe fn direct<T: Num>([m, k, n]: [usize; 3], a: Strided<'_, T>, b: Strided<'_, T>, c: StridedOut<T>) {
    for i in 0..m {
        // SAFETY (all pointer use below): the caller vouches for every
        // element `(i, j)` of `c`; each is written before it is read.
        let c_row = unsafe { c.ptr.add(i * c.rows) };
        for j in 0..n {
            unsafe { c_row.add(j * c.cols).write(T::ZERO) };
        }
        if c.cols == 1 {
            // A contiguous row, now initialised: let the loop vectorise.
            let c_row = unsafe { std::slice::from_raw_parts_mut(c_row, n) };
            for p in 0..k {
                let x = a.data[i * a.rows + p * a.cols];
                let b_row = p * b.rows;
                for (j, cj) in c_row.iter_mut().enumerate() {
                    *cj = cj.add(x.mul(b.data[b_row + j * b.cols]));
                }
            }
        } else {
            for p in 0..k {
                let x = a.data[i * a.rows + p * a.cols];
                let b_row = p * b.rows;
                for j in 0..n {
                    let cj = unsafe { &mut *c_row.add(j * c.cols) };
                    *cj = cj.add(x.mul(b.data[b_row + j * b.cols]));
                }
            }
        }
    }
}

macro_rules! float_gemm {
    ($t:ty, $f:path) => {
        impl Gemm for $t {
            unsafe fn gemm_strided(mkn: [usize; 3], a: Strided<'_, $t>, b: Strided<'_, $t>, c: StridedOut<$t>) {
                let [m, k, n] = mkn;
                if m == 0 || n == 0 || k == 0 || m * n * k <= DIRECT_LIMIT {
                    // (An empty sum is zero: `direct` zeroes `c` first.)
                    // SAFETY: the caller's promise about `c` is passed on.
                    return unsafe { direct(mkn, a, b, c) };
                }
                // The gemm reads through raw pointers: prove the extents.
                assert!(a.fits(m, k) && b.fits(k, n), "gemm operands smaller than their strides imply");
                // SAFETY: the assert above shows every element the gemm
                // reads of `a` and `b` lies inside the slices; the caller
                // vouches for every element of `c` it writes (distinct,
                // writable, unshared). Strides are element counts within
                // allocations, so they fit in isize. With beta = 0 the gemm
                // writes every element of `c` without reading it (its
                // documented contract), so `c` may be uninitialised.
                unsafe {
                    $f(
                        m,
                        k,
                        n,
                        1.0,
                        a.data.as_ptr(),
                        a.rows as isize,
                        a.cols as isize,
                        b.data.as_ptr(),
                        b.rows as isize,
                        b.cols as isize,
                        0.0,
                        c.ptr,
                        c.rows as isize,
                        c.cols as isize,
                    )
                }
            }
        }
    };
}

float_gemm!(f32, matrixmultiply::sgemm);
float_gemm!(f64, matrixmultiply::dgemm);

macro_rules! int_gemm {
    ($t:ty) => {
        impl Gemm for $t {
            unsafe fn gemm_strided(mkn: [usize; 3], a: Strided<'_, $t>, b: Strided<'_, $t>, c: StridedOut<$t>) {
                // SAFETY: the caller's promise about `c` is passed on.
                unsafe { direct(mkn, a, b, c) }
            }
        }
    };
}

int_gemm!(i32);
int_gemm!(i64);

/// (row stride, column stride) of op(x) for a row-major matrix with `cols`
/// columns, read as itself or, when `transposed`, as its transpose.
fn op_strides(cols: usize, transposed: bool) -> (usize, usize) {
    if transposed { (1, cols) } else { (cols, 1) }
}

// ---------------------------------------------------------------------------
// MatMul

struct MatMulKernel {
    compute: MatMulFn,
    transpose_a: bool,
    transpose_b: bool,
}

fn build_matmul(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    Ok(Box::new(MatMulKernel {
        compute: pick(&init.node.op, dtype, matmul::<f32>, matmul::<f64>, matmul::<i32>, matmul::<i64>)?,
        transpose_a: init.node.attr_bool_or("transpose_a", false)?,
        transpose_b: init.node.attr_bool_or("transpose_b", false)?,
    }))
}

type MatMulFn = fn(&Tensor, &Tensor, bool, bool, Option<&dyn IntraOpPool>) -> Result<Tensor>;

fn pick(op: &str, dtype: DType, f32: MatMulFn, f64: MatMulFn, i32: MatMulFn, i64: MatMulFn) -> Result<MatMulFn> {
    match dtype {
        DType::F32 => Ok(f32),
        DType::F64 => Ok(f64),
        DType::I32 => Ok(i32),
        DType::I64 => Ok(i64),
        _ => Err(unsupported_dtype(op, dtype, REAL)),
    }
}

/// Fewest multiply-adds worth a chunk of their own on another thread (about
/// 50 µs of sgemm here): below it, a hand-off costs more than it saves.
pub(super) const CHUNK_MIN_MACS: usize = 1 << 20;
/// Fewest rows in a chunk: the gemm packs `b` once per call, so thin row
/// blocks would repack it for little work.
pub(super) const CHUNK_MIN_ROWS: usize = 16;

/// `c = op(a) · op(b)` (`m x k` times `k x n`) with `c`'s rows cut into
/// chunks run across `pool`'s threads. Each row block is the same gemm on a
/// sub-slice, so every element is summed in the same order as in one call:
/// results do not depend on the thread count.
fn gemm_rows<T: Gemm>(
    pool: Option<&dyn IntraOpPool>,
    [m, k, n]: [usize; 3],
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    c: &mut [MaybeUninit<T>],
) {
    let threads = pool.map_or(1, |p| p.threads());
    let by_work = m.saturating_mul(k).saturating_mul(n) / CHUNK_MIN_MACS;
    let chunks = (threads * 2).min(by_work).min(m / CHUNK_MIN_ROWS);
    let (Some(pool), true) = (pool, threads >= 2 && chunks >= 2) else {
        return T::gemm([m, k, n], a, b, c);
    };
    let rows = m.div_ceil(chunks);
    let blocks: Vec<parking_lot::Mutex<&mut [MaybeUninit<T>]>> =
        c[..m * n].chunks_mut(rows * n).map(parking_lot::Mutex::new).collect();
    pool.run_chunks(blocks.len(), &|i| {
        let mut block = blocks[i].lock();
        let first = i * rows;
        let count = block.len() / n;
        T::gemm([count, k, n], a.rows_from(first), b, &mut block);
    });
}

fn matmul<T: Gemm>(a: &Tensor, b: &Tensor, ta: bool, tb: bool, pool: Option<&dyn IntraOpPool>) -> Result<Tensor> {
    for (i, x) in [a, b].iter().enumerate() {
        if x.rank() != 2 {
            bail!(invalid_argument, "In[{i}] is not a matrix. Instead it has shape {}", x.shape());
        }
    }
    let (ad, bd) = (a.dims(), b.dims());
    let (m, k) = if ta { (ad[1], ad[0]) } else { (ad[0], ad[1]) };
    let (k2, n) = if tb { (bd[1], bd[0]) } else { (bd[0], bd[1]) };
    if k != k2 {
        bail!(invalid_argument, "Matrix size-incompatible: In[0]: {}, In[1]: {}", a.shape(), b.shape());
    }
    let (sa, sb) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
    let (rsa, csa) = op_strides(ad[1], ta);
    let (rsb, csb) = op_strides(bd[1], tb);
    let (a, b) = (Strided { data: sa, rows: rsa, cols: csa }, Strided { data: sb, rows: rsb, cols: csb });
    // SAFETY: `gemm_rows` writes all `m * n` elements (the `Gemm` contract,
    // over row blocks that cover `c`).
    unsafe { Tensor::build_uninit::<T>([m, n], |c| gemm_rows(pool, [m, k, n], a, b, c)) }
}

impl OpKernel for MatMulKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let out = (self.compute)(ctx.input(0)?, ctx.input(1)?, self.transpose_a, self.transpose_b, ctx.intra_op())?;
        ctx.set_output(0, out);
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }

    fn worth_a_thread(&self, inputs: &[Option<Value>], lent: &[Option<Value>]) -> bool {
        let input = |i: usize| inputs.get(i).and_then(Option::as_ref).or_else(|| lent.get(i)?.as_ref());
        match (input(0), input(1)) {
            (Some(Value::Tensor(a)), Some(Value::Tensor(b))) if a.rank() == 2 && b.rank() == 2 => {
                let (m, k) = if self.transpose_a { (a.dims()[1], a.dims()[0]) } else { (a.dims()[0], a.dims()[1]) };
                let n = if self.transpose_b { b.dims()[0] } else { b.dims()[1] };
                m.saturating_mul(k).saturating_mul(n) >= INLINE_MAX_MACS
            }
            // Wrong ranks fail in `compute`, wherever it runs.
            (Some(Value::Tensor(_)), Some(Value::Tensor(_))) => false,
            // A variable read through a ref: its size is known once read.
            _ => true,
        }
    }
}

/// A product with fewer multiply-adds than this (32³: a few microseconds)
/// runs on the thread that made it ready: a hop to the pool would cost more.
pub(super) const INLINE_MAX_MACS: usize = 1 << 15;

// ---------------------------------------------------------------------------
// BatchMatMul

fn build_batch_matmul(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    Ok(Box::new(MatMulKernel {
        compute: pick(
            &init.node.op,
            dtype,
            batch_matmul::<f32>,
            batch_matmul::<f64>,
            batch_matmul::<i32>,
            batch_matmul::<i64>,
        )?,
        // For real types the adjoint is the transpose.
        transpose_a: init.node.attr_bool_or("adj_x", false)?,
        transpose_b: init.node.attr_bool_or("adj_y", false)?,
    }))
}

fn batch_matmul<T: Gemm>(a: &Tensor, b: &Tensor, ta: bool, tb: bool, pool: Option<&dyn IntraOpPool>) -> Result<Tensor> {
    for (i, x) in [a, b].iter().enumerate() {
        if x.rank() < 2 {
            bail!(invalid_argument, "In[{i}] ndims must be >= 2: {}", x.rank());
        }
    }
    let (ad, bd) = (a.dims(), b.dims());
    let (ra, rb) = (ad.len(), bd.len());
    let (a_rows, a_cols) = (ad[ra - 2], ad[ra - 1]);
    let (b_rows, b_cols) = (bd[rb - 2], bd[rb - 1]);
    let (m, k) = if ta { (a_cols, a_rows) } else { (a_rows, a_cols) };
    let (k2, n) = if tb { (b_cols, b_rows) } else { (b_rows, b_cols) };
    if k != k2 {
        bail!(invalid_argument, "Matrix size-incompatible: In[0]: {}, In[1]: {}", a.shape(), b.shape());
    }
    let (a_batch, b_batch) = (&ad[..ra - 2], &bd[..rb - 2]);
    let batch = broadcast_shape(a_batch, b_batch).map_err(|_| {
        crate::error::Status::invalid_argument(format!(
            "In[0] and In[1] must have compatible batch dimensions: {} vs. {}",
            a.shape(),
            b.shape()
        ))
    })?;
    let mut out_dims = batch.dims().to_vec();
    out_dims.extend([m, n]);
    let out_shape = Shape::from_vec(out_dims);
    let (sa, sb) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
    if out_shape.num_elements() == 0 {
        return Tensor::zeros(T::DTYPE, out_shape);
    }
    let (a_size, b_size, c_size) = (a_rows * a_cols, b_rows * b_cols, m * n);
    let (rsa, csa) = op_strides(a_cols, ta);
    let (rsb, csb) = op_strides(b_cols, tb);
    let plan = Plan::new(a_batch, b_batch, batch.dims());
    let fill = |c: &mut [MaybeUninit<T>]| {
        let mut out_batch = 0;
        plan.for_each_index(|ia, ib| {
            gemm_rows(
                pool,
                [m, k, n],
                Strided { data: &sa[ia * a_size..(ia + 1) * a_size], rows: rsa, cols: csa },
                Strided { data: &sb[ib * b_size..(ib + 1) * b_size], rows: rsb, cols: csb },
                &mut c[out_batch * c_size..(out_batch + 1) * c_size],
            );
            out_batch += 1;
        });
        // Unwritten elements would be read uninitialised: never go on.
        assert_eq!(out_batch * c_size, c.len(), "BatchMatMul: batches do not cover the output");
    };
    // SAFETY: each batch's product writes its `c_size` elements (the `Gemm`
    // contract) and the assert above shows the batches cover the output.
    unsafe { Tensor::build_uninit::<T>(out_shape, fill) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrValue, NodeSpec};
    use crate::ops::testing::{node, run1, ty};

    fn mm(t: DType, ta: bool, tb: bool) -> NodeSpec {
        node("MatMul")
            .attr("T", ty(t))
            .attr("transpose_a", AttrValue::Bool(ta))
            .attr("transpose_b", AttrValue::Bool(tb))
    }

    /// Row-major `r x c` matrix transposed.
    fn transpose(v: &[f64], r: usize, c: usize) -> Vec<f64> {
        let mut out = vec![0.0; v.len()];
        for i in 0..r {
            for j in 0..c {
                out[j * r + i] = v[i * c + j];
            }
        }
        out
    }

    /// Naive reference product of row-major matrices.
    fn reference(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    fn values(len: usize, seed: u64) -> Vec<f64> {
        // Small integers keep f32 products exact, so results compare
        // exactly whatever the summation order.
        (0..len as u64).map(|i| (((i * 7919 + seed * 104729) % 17) as f64) - 8.0).collect()
    }

    /// Every path of `Gemm::gemm` (empty sum, direct loop, sgemm/dgemm; row
    /// blocks are calls of it) must overwrite its output, never accumulate
    /// into it: fresh outputs are not zeroed. NaN in the buffer beforehand would survive
    /// any read of it (0 · NaN = NaN).
    #[test]
    fn gemm_overwrites_whatever_the_output_held() {
        for &(m, k, n) in &[(3, 0, 4), (2, 3, 4), (33, 17, 29)] {
            let a = values(m * k, 3);
            let b = values(k * n, 4);
            let want = reference(&a, &b, m, k, n);
            let (a32, b32): (Vec<f32>, Vec<f32>) =
                (a.iter().map(|&x| x as f32).collect(), b.iter().map(|&x| x as f32).collect());
            let mut c32 = vec![f32::NAN; m * n];
            f32::gemm_over([m, k, n], Strided::row_major(&a32, k), Strided::row_major(&b32, n), &mut c32);
            assert_eq!(c32.iter().map(|&x| x as f64).collect::<Vec<_>>(), want, "f32 {m}x{k}x{n}");
            let mut c64 = vec![f64::NAN; m * n];
            f64::gemm_over([m, k, n], Strided::row_major(&a, k), Strided::row_major(&b, n), &mut c64);
            assert_eq!(c64, want, "f64 {m}x{k}x{n}");
            let (ai, bi): (Vec<i64>, Vec<i64>) =
                (a.iter().map(|&x| x as i64).collect(), b.iter().map(|&x| x as i64).collect());
            let mut ci = vec![i64::MIN; m * n];
            i64::gemm_over([m, k, n], Strided::row_major(&ai, k), Strided::row_major(&bi, n), &mut ci);
            assert_eq!(ci.iter().map(|&x| x as f64).collect::<Vec<_>>(), want, "i64 {m}x{k}x{n}");
        }
    }

    /// A strided output: column-major, and rows spread apart with other
    /// data between them (as Einsum writes a slab of a permuted output).
    /// Elements outside the `m x n` block are never touched.
    #[test]
    fn strided_outputs_land_where_their_strides_say() {
        for &(m, k, n) in &[(2, 3, 4), (33, 17, 29), (5, 0, 3)] {
            let a = values(m * k, 7);
            let b = values(k * n, 8);
            let want = reference(&a, &b, m, k, n);
            for (rows, cols) in [(1, m), (2 * n + 3, 2)] {
                let len = (m - 1) * rows + (n - 1) * cols + 1;
                let (a32, b32): (Vec<f32>, Vec<f32>) =
                    (a.iter().map(|&x| x as f32).collect(), b.iter().map(|&x| x as f32).collect());
                let mut c32 = vec![f32::NAN; len];
                let mut c64 = vec![f64::NAN; len];
                let mut ci = vec![i64::MIN; len];
                let (ai, bi): (Vec<i64>, Vec<i64>) =
                    (a.iter().map(|&x| x as i64).collect(), b.iter().map(|&x| x as i64).collect());
                // SAFETY: (i, j) -> i * rows + j * cols is injective for these
                // strides (one of them exceeds the other's whole extent) and
                // stays below `len`; each buffer is a unique borrow.
                unsafe {
                    f32::gemm_strided(
                        [m, k, n],
                        Strided::row_major(&a32, k),
                        Strided::row_major(&b32, n),
                        StridedOut { ptr: c32.as_mut_ptr(), rows, cols },
                    );
                    f64::gemm_strided(
                        [m, k, n],
                        Strided::row_major(&a, k),
                        Strided::row_major(&b, n),
                        StridedOut { ptr: c64.as_mut_ptr(), rows, cols },
                    );
                    i64::gemm_strided(
                        [m, k, n],
                        Strided::row_major(&ai, k),
                        Strided::row_major(&bi, n),
                        StridedOut { ptr: ci.as_mut_ptr(), rows, cols },
                    );
                }
                let mut written = vec![false; len];
                for i in 0..m {
                    for j in 0..n {
                        let at = i * rows + j * cols;
                        written[at] = true;
                        let w = want[i * n + j];
                        assert_eq!((c32[at] as f64, c64[at], ci[at] as f64), (w, w, w), "{m}x{k}x{n} ({i},{j})");
                    }
                }
                for (at, _) in written.iter().enumerate().filter(|(_, w)| !**w) {
                    assert!(c32[at].is_nan() && c64[at].is_nan() && ci[at] == i64::MIN, "{m}x{k}x{n} touched {at}");
                }
            }
        }
    }

    #[test]
    fn all_transpose_combinations_match_reference() {
        // Sizes on both sides of DIRECT_LIMIT.
        for &(m, k, n) in &[(2, 3, 4), (1, 1, 1), (33, 17, 29), (64, 40, 3)] {
            let a = values(m * k, 1);
            let b = values(k * n, 2);
            let want = reference(&a, &b, m, k, n);
            for ta in [false, true] {
                for tb in [false, true] {
                    // Store each operand as TF would receive it.
                    let (a_dims, a_vals) = if ta { ([k, m], transpose(&a, m, k)) } else { ([m, k], a.clone()) };
                    let (b_dims, b_vals) = if tb { ([n, k], transpose(&b, k, n)) } else { ([k, n], b.clone()) };
                    for dtype in [DType::F32, DType::F64, DType::I32, DType::I64] {
                        let mk = |dims: [usize; 2], v: &[f64]| {
                            match dtype {
                                DType::F32 => {
                                    Tensor::from_slice::<f32>(dims, &v.iter().map(|&x| x as f32).collect::<Vec<_>>())
                                }
                                DType::F64 => Tensor::from_slice::<f64>(dims, v),
                                DType::I32 => {
                                    Tensor::from_slice::<i32>(dims, &v.iter().map(|&x| x as i32).collect::<Vec<_>>())
                                }
                                _ => Tensor::from_slice::<i64>(dims, &v.iter().map(|&x| x as i64).collect::<Vec<_>>()),
                            }
                            .unwrap()
                        };
                        let out = run1(&mm(dtype, ta, tb), &[mk(a_dims, &a_vals), mk(b_dims, &b_vals)]).unwrap();
                        assert_eq!(out.dims(), &[m, n]);
                        assert_eq!(out.dtype(), dtype);
                        assert_eq!(out.to_f64_vec(), want, "{dtype} {m}x{k}x{n} ta={ta} tb={tb}");
                    }
                }
            }
        }
    }

    /// A device pool that records how a kernel used it.
    struct WatchedPool {
        pool: crate::executor::ThreadPool,
        chunks: std::sync::atomic::AtomicUsize,
        threads_seen: parking_lot::Mutex<std::collections::HashSet<std::thread::ThreadId>>,
    }

    impl WatchedPool {
        fn new(threads: usize) -> WatchedPool {
            let options = crate::executor::PoolOptions { threads, ..Default::default() };
            WatchedPool {
                pool: crate::executor::ThreadPool::new(options).unwrap(),
                chunks: Default::default(),
                threads_seen: Default::default(),
            }
        }
    }

    impl IntraOpPool for WatchedPool {
        fn threads(&self) -> usize {
            self.pool.threads()
        }
        fn run_chunks(&self, chunks: usize, f: &(dyn Fn(usize) + Sync)) {
            self.chunks.fetch_add(chunks, std::sync::atomic::Ordering::Relaxed);
            self.pool.run_chunks(chunks, &|i| {
                self.threads_seen.lock().insert(std::thread::current().id());
                f(i)
            });
        }
    }

    fn run_with_pool(n: &NodeSpec, inputs: &[Tensor], pool: &dyn IntraOpPool) -> Tensor {
        let def = crate::ops::lookup(&n.op).unwrap();
        let sig = (def.signature)(n).unwrap();
        let crate::ops::Implementation::Kernel(build) = def.implementation else { panic!("not a kernel") };
        let kernel = build(&KernelInit { node: n, signature: &sig }).unwrap();
        let resources = crate::ops::ResourceMgr::default();
        let mut ins: Vec<Option<crate::ops::Value>> =
            inputs.iter().map(|t| Some(crate::ops::Value::Tensor(t.clone()))).collect();
        let mut outs = vec![None];
        kernel.compute(&mut OpContext::new(&mut ins, &mut outs, &resources).with_intra_op(pool)).unwrap();
        match outs.pop().flatten() {
            Some(crate::ops::Value::Tensor(t)) => t,
            _ => panic!("no tensor output"),
        }
    }

    #[test]
    fn row_blocks_on_the_pool_give_the_bits_of_one_call() {
        // Non-integer values: any change in summation order would show.
        let pool = WatchedPool::new(4);
        for &(m, k, n) in &[(256, 256, 256), (301, 130, 77), (64, 512, 100)] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let fill = |len: usize, seed: usize| -> Vec<f32> {
                    (0..len).map(|i| ((i * 37 + seed * 11) % 101) as f32 / 7.3 - 6.1).collect()
                };
                let a_dims = if ta { [k, m] } else { [m, k] };
                let b_dims = if tb { [n, k] } else { [k, n] };
                let a = Tensor::from_slice::<f32>(a_dims, &fill(m * k, 1)).unwrap();
                let b = Tensor::from_slice::<f32>(b_dims, &fill(k * n, 2)).unwrap();
                let node = mm(DType::F32, ta, tb);
                let before = pool.chunks.load(std::sync::atomic::Ordering::Relaxed);
                let sharded = run_with_pool(&node, &[a.clone(), b.clone()], &pool);
                assert!(pool.chunks.load(std::sync::atomic::Ordering::Relaxed) > before, "{m}x{k}x{n} was not split");
                let whole = run1(&node, &[a, b]).unwrap();
                assert_eq!(sharded.dims(), &[m, n]);
                assert_eq!(sharded.as_bytes(), whole.as_bytes(), "{m}x{k}x{n} ta={ta} tb={tb}");
            }
        }
        assert!(pool.threads_seen.lock().len() > 1, "no chunk ever ran off the calling thread");
    }

    #[test]
    fn batch_products_split_too_and_small_ones_stay_whole() {
        let pool = WatchedPool::new(3);
        let a = Tensor::build::<f32>([2, 128, 96], |v| {
            v.iter_mut().enumerate().for_each(|(i, e)| *e = (i % 23) as f32 * 0.37)
        })
        .unwrap();
        let b = Tensor::build::<f32>([96, 200], |v| {
            v.iter_mut().enumerate().for_each(|(i, e)| *e = (i % 19) as f32 * -0.21)
        })
        .unwrap();
        let node = node("BatchMatMulV2").attr("T", ty(DType::F32));
        let sharded = run_with_pool(&node, &[a.clone(), b.clone()], &pool);
        assert!(pool.chunks.load(std::sync::atomic::Ordering::Relaxed) > 0);
        assert_eq!(sharded.as_bytes(), run1(&node, &[a, b]).unwrap().as_bytes());
        let small = WatchedPool::new(3);
        let x = Tensor::from_slice::<f32>([8, 8], &[1.5; 64]).unwrap();
        run_with_pool(&mm(DType::F32, false, false), &[x.clone(), x], &small);
        assert_eq!(small.chunks.load(std::sync::atomic::Ordering::Relaxed), 0, "a tiny product was split");
        // One thread: splitting would only repack `b` for each block.
        let single = WatchedPool::new(1);
        let big = Tensor::from_slice::<f32>([256, 256], &[0.5; 256 * 256]).unwrap();
        run_with_pool(&mm(DType::F32, false, false), &[big.clone(), big], &single);
        assert_eq!(single.chunks.load(std::sync::atomic::Ordering::Relaxed), 0, "a 1-thread pool split a product");
    }

    #[test]
    fn errors_and_empty_products() {
        let a = Tensor::zeros(DType::F32, [2, 3]).unwrap();
        let b = Tensor::zeros(DType::F32, [4, 5]).unwrap();
        let err = run1(&mm(DType::F32, false, false), &[a.clone(), b]).unwrap_err();
        assert_eq!(err.message, "Matrix size-incompatible: In[0]: [2,3], In[1]: [4,5]");
        let err =
            run1(&mm(DType::F32, false, false), &[a.clone(), Tensor::zeros(DType::F32, [3]).unwrap()]).unwrap_err();
        assert_eq!(err.message, "In[1] is not a matrix. Instead it has shape [3]");
        // k = 0: a zero matrix of the right shape.
        let out = run1(
            &mm(DType::F32, false, false),
            &[Tensor::zeros(DType::F32, [2, 0]).unwrap(), Tensor::zeros(DType::F32, [0, 3]).unwrap()],
        )
        .unwrap();
        assert_eq!(out.dims(), &[2, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[0.; 6]);
        assert!(run1(&mm(DType::Bool, false, false), &[]).is_err());
        let kernel = build_matmul(&crate::ops::KernelInit {
            node: &mm(DType::F32, false, false),
            signature: &crate::ops::OpSignature::default(),
        })
        .unwrap();
        assert!(kernel.is_expensive());
    }

    #[test]
    fn batch_matmul_v2_broadcasts_rank_3_against_rank_4_with_adjoints() {
        // [2,1,3,4] x [5,4,6] -> [2,5,3,6]: batch [2,1] against [5].
        let (m, k, n) = (3, 4, 6);
        let a_vals = values(2 * m * k, 5);
        let b_vals = values(5 * k * n, 6);
        for (adj_x, adj_y) in [(false, false), (true, false), (false, true), (true, true)] {
            // Store each batch's matrix as the op reads it under its adjoint.
            let a_stored: Vec<f64> = (0..2)
                .flat_map(|i| {
                    let mat = &a_vals[i * m * k..(i + 1) * m * k];
                    if adj_x { transpose(mat, m, k) } else { mat.to_vec() }
                })
                .collect();
            let b_stored: Vec<f64> = (0..5)
                .flat_map(|j| {
                    let mat = &b_vals[j * k * n..(j + 1) * k * n];
                    if adj_y { transpose(mat, k, n) } else { mat.to_vec() }
                })
                .collect();
            let a_dims: [usize; 4] = if adj_x { [2, 1, k, m] } else { [2, 1, m, k] };
            let b_dims: [usize; 3] = if adj_y { [5, n, k] } else { [5, k, n] };
            for dtype in [DType::F32, DType::F64, DType::I32] {
                let mk = |dims: &[usize], v: &[f64]| {
                    match dtype {
                        DType::F32 => Tensor::from_slice::<f32>(dims, &v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
                        DType::F64 => Tensor::from_slice::<f64>(dims, v),
                        _ => Tensor::from_slice::<i32>(dims, &v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
                    }
                    .unwrap()
                };
                let op = node("BatchMatMulV2")
                    .attr("T", ty(dtype))
                    .attr("adj_x", AttrValue::Bool(adj_x))
                    .attr("adj_y", AttrValue::Bool(adj_y));
                let out = run1(&op, &[mk(&a_dims, &a_stored), mk(&b_dims, &b_stored)]).unwrap();
                assert_eq!(out.dims(), &[2, 5, 3, 6]);
                let got = out.to_f64_vec();
                for i in 0..2 {
                    for j in 0..5 {
                        let want = reference(
                            &a_vals[i * m * k..(i + 1) * m * k],
                            &b_vals[j * k * n..(j + 1) * k * n],
                            m,
                            k,
                            n,
                        );
                        let at = (i * 5 + j) * m * n;
                        assert_eq!(
                            &got[at..at + m * n],
                            &want[..],
                            "{dtype} adj_x={adj_x} adj_y={adj_y} batch {i},{j}"
                        );
                    }
                }
            }
        }
        // TensorFlow's value: tf.linalg.matmul(a, b) with a = arange(24)
        // reshaped [2,1,3,4], b = arange(120) reshaped [5,4,6] has 9490 at
        // [1,4,2,5] (float32).
        let a = Tensor::from_slice::<f32>([2, 1, 3, 4], &(0..24).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
        let b = Tensor::from_slice::<f32>([5, 4, 6], &(0..120).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
        let out = run1(&node("BatchMatMulV2").attr("T", ty(DType::F32)), &[a, b]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap()[((5 + 4) * 3 + 2) * 6 + 5], 9490.0);
    }

    #[test]
    fn batch_matmul_broadcasts_batches() {
        // a: [2,1,2,3], b: [3,3,2] -> [2,3,2,2].
        let a_vals = values(12, 3);
        let b_vals = values(18, 4);
        let a = Tensor::from_slice::<f64>([2, 1, 2, 3], &a_vals).unwrap();
        let b = Tensor::from_slice::<f64>([3, 3, 2], &b_vals).unwrap();
        let n = node("BatchMatMulV2").attr("T", ty(DType::F64));
        let out = run1(&n, &[a.clone(), b.clone()]).unwrap();
        assert_eq!(out.dims(), &[2, 3, 2, 2]);
        let got = out.as_slice::<f64>().unwrap();
        for i in 0..2 {
            for j in 0..3 {
                let want = reference(&a_vals[i * 6..i * 6 + 6], &b_vals[j * 6..j * 6 + 6], 2, 3, 2);
                assert_eq!(&got[(i * 3 + j) * 4..(i * 3 + j + 1) * 4], &want[..], "batch {i},{j}");
            }
        }
        // adj_x: a [3,2] per batch read as its transpose [2,3].
        let at = Tensor::from_slice::<f64>([1, 3, 2], &transpose(&a_vals[..6], 2, 3)).unwrap();
        let bt = Tensor::from_slice::<f64>([1, 3, 2], &b_vals[..6]).unwrap();
        let adj = n.clone().attr("adj_x", AttrValue::Bool(true));
        let out = run1(&adj, &[at, bt]).unwrap();
        assert_eq!(out.as_slice::<f64>().unwrap(), &reference(&a_vals[..6], &b_vals[..6], 2, 3, 2)[..]);
        let err =
            run1(&n, &[Tensor::zeros(DType::F64, [2, 2, 3]).unwrap(), Tensor::zeros(DType::F64, [3, 3, 2]).unwrap()])
                .unwrap_err();
        assert_eq!(err.message, "In[0] and In[1] must have compatible batch dimensions: [2,2,3] vs. [3,3,2]");
    }
}
