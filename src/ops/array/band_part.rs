//! `MatrixBandPart`: the band of each innermost matrix, zeros elsewhere
//! (`tf.linalg.band_part`; Keras' causal attention mask is its lower
//! triangle).
//!
//! Owns: this kernel. It copies each row's band as one run of bytes, so one
//! path serves every fixed-width dtype. Must not hold state.

use super::super::registry::OpDef;
use super::super::{
    FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values,
};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("MatrixBandPart", band_part_signature, build_band_part)];

fn band_part_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let tindex = ValueType::Tensor(attr_index_type_or(node, "Tindex", DType::I64)?);
    Ok(OpSignature::new(vec![t, tindex, tindex], vec![t]))
}

fn build_band_part(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(band_part))
}

fn scalar_index(t: &Tensor, what: &str) -> Result<i64> {
    if t.shape().rank() != 0 {
        bail!(invalid_argument, "{what} must be scalar, got shape {}", t.shape());
    }
    Ok(index_values(t, what)?[0])
}

fn band_part(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let dims = x.dims();
    let rank = dims.len();
    if rank < 2 {
        bail!(invalid_argument, "input must be at least 2-dim, received shape: {}", x.shape());
    }
    let (rows, cols) = (dims[rank - 2], dims[rank - 1]);
    let lower = scalar_index(ctx.input(1)?, "num_lower")?;
    let upper = scalar_index(ctx.input(2)?, "num_upper")?;
    if lower > rows as i64 {
        bail!(invalid_argument, "num_lower must be negative or less or equal to number of rows ({rows}) got: {lower}");
    }
    if upper > cols as i64 {
        bail!(
            invalid_argument,
            "num_upper must be negative or less or equal to number of columns ({cols}) got: {upper}"
        );
    }
    let size = super::element_size(x, "MatrixBandPart")?;
    let src = x.as_bytes();
    let mut out = vec![0u8; src.len()];
    let row_bytes = cols * size;
    for (row_index, (from, to)) in
        src.chunks_exact(row_bytes.max(1)).zip(out.chunks_exact_mut(row_bytes.max(1))).enumerate()
    {
        if row_bytes == 0 {
            break;
        }
        // Row `i` keeps columns `j` with i - j <= lower and j - i <= upper.
        let i = (row_index % rows) as i64;
        let first = if lower < 0 { 0 } else { (i - lower).max(0) as usize };
        let end = if upper < 0 { cols } else { ((i + upper + 1) as usize).min(cols) };
        if first < end {
            to[first * size..end * size].copy_from_slice(&from[first * size..end * size]);
        }
    }
    let t = Tensor::from_bytes(x.dtype(), x.shape().clone(), &out)?;
    ctx.set_output(0, t);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run1, ty};

    fn band(x: &Tensor, lower: i64, upper: i64) -> Result<Tensor> {
        let op = node("MatrixBandPart").attr("T", ty(x.dtype()));
        run1(&op, &[x.clone(), Tensor::scalar(lower), Tensor::scalar(upper)])
    }

    #[test]
    fn keeps_the_band_of_each_matrix() {
        let x = Tensor::from_map([2, 3, 3], &(1..=18).collect::<Vec<i32>>(), |v| v as f32).unwrap();
        let lower_triangle = band(&x, -1, 0).unwrap();
        assert_eq!(
            lower_triangle.as_slice::<f32>().unwrap(),
            &[1., 0., 0., 4., 5., 0., 7., 8., 9., 10., 0., 0., 13., 14., 0., 16., 17., 18.]
        );
        let tridiagonal = band(&x, 1, 1).unwrap();
        assert_eq!(&tridiagonal.as_slice::<f32>().unwrap()[..9], &[1., 2., 0., 4., 5., 6., 0., 8., 9.]);
        let everything = band(&x, -1, -1).unwrap();
        assert_eq!(everything.as_slice::<f32>().unwrap(), x.as_slice::<f32>().unwrap());
        let wide = Tensor::from_slice::<bool>([2, 4], &[true; 8]).unwrap();
        let upper = band(&wide, 0, 2).unwrap();
        assert_eq!(upper.as_slice::<bool>().unwrap(), &[true, true, true, false, false, true, true, true]);
    }

    #[test]
    fn bands_wider_than_the_matrix_and_vectors_are_errors() {
        let x = Tensor::from_slice::<f32>([2, 2], &[1., 2., 3., 4.]).unwrap();
        assert!(band(&x, 3, 0).unwrap_err().message.contains("number of rows (2)"));
        assert!(band(&x, 0, 3).unwrap_err().message.contains("number of columns (2)"));
        let v = Tensor::from_slice::<f32>([2], &[1., 2.]).unwrap();
        assert!(band(&v, 0, 0).unwrap_err().message.contains("at least 2-dim"));
    }
}
