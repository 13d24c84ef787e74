//! `LRN`: local response normalization across channels (AlexNet- and
//! GoogLeNet-era graphs): each element divided by
//! `(bias + alpha * Σ x²)^beta` over the `2 * depth_radius + 1` channels
//! around it.
//!
//! Owns: this kernel. Must not hold state beyond parsed attributes.

use crate::bail;
use crate::error::{Result, Status};
use crate::ops::math::unary_signature;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, unsupported_dtype};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("LRN", unary_signature, build_lrn)];

struct Lrn {
    radius: usize,
    bias: f32,
    alpha: f32,
    beta: f32,
}

fn build_lrn(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    if dtype != DType::F32 {
        return Err(unsupported_dtype(&node.op, dtype, &[DType::F32]));
    }
    let radius = node.attr_int_or("depth_radius", 5)?;
    let radius = usize::try_from(radius).map_err(|_| {
        Status::invalid_argument(format!("node '{}' (LRN): depth_radius must be non-negative, got {radius}", node.name))
    })?;
    Ok(Box::new(Lrn {
        radius,
        bias: node.attr_float_or("bias", 1.0)?,
        alpha: node.attr_float_or("alpha", 1.0)?,
        beta: node.attr_float_or("beta", 0.5)?,
    }))
}

impl OpKernel for Lrn {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        if x.shape().rank() != 4 {
            bail!(invalid_argument, "input must be 4-dimensional, got shape {}", x.shape());
        }
        let depth = x.dims()[3];
        let values = x.as_slice::<f32>()?;
        let out = Tensor::build::<f32>(x.shape().clone(), |out| {
            if depth == 0 {
                return;
            }
            for (dst, pixel) in out.chunks_exact_mut(depth).zip(values.chunks_exact(depth)) {
                for (c, o) in dst.iter_mut().enumerate() {
                    let (lo, hi) = (c.saturating_sub(self.radius), (c + self.radius + 1).min(depth));
                    let sum: f32 = pixel[lo..hi].iter().map(|v| v * v).sum();
                    *o = pixel[c] / (self.bias + self.alpha * sum).powf(self.beta);
                }
            }
        })?;
        ctx.set_output(0, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    #[test]
    fn normalizes_by_the_neighbouring_channels() {
        let x = Tensor::from_slice::<f32>([1, 1, 1, 3], &[1., 2., 3.]).unwrap();
        let op = node("LRN")
            .attr("T", ty(DType::F32))
            .attr("depth_radius", AttrValue::Int(1))
            .attr("bias", AttrValue::Float(1.0))
            .attr("alpha", AttrValue::Float(0.5))
            .attr("beta", AttrValue::Float(1.0));
        let out = run1(&op, &[x]).unwrap();
        // Channel 0 sees 1² + 2², channel 1 all three, channel 2 2² + 3².
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1. / 3.5, 2. / 8., 3. / 7.5]);
        let flat = Tensor::from_slice::<f32>([3], &[1., 2., 3.]).unwrap();
        assert!(run1(&node("LRN").attr("T", ty(DType::F32)), &[flat]).unwrap_err().message.contains("4-dim"));
    }
}
