//! `DepthToSpace` and `SpaceToDepth` on NHWC images (`tf.nn.depth_to_space`,
//! sub-pixel upsampling; `tf.nn.space_to_depth`): blocks of
//! `block_size × block_size` pixels trade places with groups of channels.
//!
//! Owns: these kernels. Channels of one pixel are contiguous in NHWC, so
//! each moves as one run of bytes and one path serves every fixed-width
//! dtype. Only NHWC, as TensorFlow's CPU kernels. Must not hold state
//! beyond parsed attributes.

use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("DepthToSpace", signature, build_depth_space),
    OpDef::kernel("SpaceToDepth", signature, build_depth_space),
];

fn signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

struct DepthSpace {
    block: usize,
    to_space: bool,
}

fn build_depth_space(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_depth_space);
    }
    let node = init.node;
    let block = node.attr_int("block_size")?;
    let block = usize::try_from(block).ok().filter(|&b| b >= 2).ok_or_else(|| {
        Status::invalid_argument(format!(
            "node '{}' ({}): block_size must be at least 2, got {block}",
            node.name, node.op
        ))
    })?;
    let format = node.attr_str_or("data_format", "NHWC")?;
    if format != "NHWC" {
        bail!(
            invalid_argument,
            "node '{}' ({}): only NHWC data_format is supported on CPU, got {format}",
            node.name,
            node.op
        );
    }
    Ok(Box::new(DepthSpace { block, to_space: node.op == "DepthToSpace" }))
}

impl OpKernel for DepthSpace {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let &[batch, height, width, depth] = x.dims() else {
            bail!(invalid_argument, "input rank should be 4 instead of {}", x.shape().rank());
        };
        let size = super::element_size(x, if self.to_space { "DepthToSpace" } else { "SpaceToDepth" })?;
        let b = self.block;
        // The space-side image [batch, sh, sw, sd] and the depth side
        // [batch, sh/b, sw/b, sd*b*b]; pixel (h*b + i, w*b + j) of the first
        // is channel group (i*b + j) of pixel (h, w) of the second.
        let (space_h, space_w, space_d) = if self.to_space {
            if depth % (b * b) != 0 {
                bail!(invalid_argument, "Input depth dimension {depth} should be divisible by: {}", b * b);
            }
            (height * b, width * b, depth / (b * b))
        } else {
            if height % b != 0 || width % b != 0 {
                bail!(
                    invalid_argument,
                    "Image width {width} and height {height} should be divisible by block_size: {b}"
                );
            }
            (height, width, depth)
        };
        let run = space_d * size;
        let src = x.as_bytes();
        let mut out = vec![0u8; src.len()];
        let (depth_h, depth_w) = (space_h / b, space_w / b);
        for n in 0..batch {
            for h in 0..depth_h {
                for i in 0..b {
                    for w in 0..depth_w {
                        for j in 0..b {
                            let space_at = ((n * space_h + h * b + i) * space_w + w * b + j) * run;
                            let depth_at = ((n * depth_h + h) * depth_w + w) * run * b * b + (i * b + j) * run;
                            let (from, to) = if self.to_space { (depth_at, space_at) } else { (space_at, depth_at) };
                            out[to..to + run].copy_from_slice(&src[from..from + run]);
                        }
                    }
                }
            }
        }
        let dims =
            if self.to_space { [batch, space_h, space_w, space_d] } else { [batch, depth_h, depth_w, space_d * b * b] };
        let t = Tensor::from_bytes(x.dtype(), Shape::new(&dims), &out)?;
        ctx.set_output(0, t);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use crate::tensor::DType;

    fn op(name: &str, block: i64) -> NodeSpec {
        node(name).attr("T", ty(DType::F32)).attr("block_size", AttrValue::Int(block))
    }

    #[test]
    fn depth_to_space_spreads_channel_groups_over_blocks() {
        // tf.nn.depth_to_space([[[[1,2,3,4]]]], 2) is [[[[1],[2]],[[3],[4]]]].
        let x = Tensor::from_slice::<f32>([1, 1, 1, 4], &[1., 2., 3., 4.]).unwrap();
        let out = run1(&op("DepthToSpace", 2), &[x]).unwrap();
        assert_eq!(out.dims(), &[1, 2, 2, 1]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 2., 3., 4.]);
    }

    #[test]
    fn space_to_depth_inverts_depth_to_space() {
        let x = Tensor::from_map([2, 4, 6, 3], &(0..144).collect::<Vec<i32>>(), |v| v as f32).unwrap();
        let packed = run1(&op("SpaceToDepth", 2), std::slice::from_ref(&x)).unwrap();
        assert_eq!(packed.dims(), &[2, 2, 3, 12]);
        // Pixel (0, 0) of the packed image: pixels (0,0), (0,1), (1,0), (1,1).
        assert_eq!(&packed.as_slice::<f32>().unwrap()[..12], &[0., 1., 2., 3., 4., 5., 18., 19., 20., 21., 22., 23.]);
        let back = run1(&op("DepthToSpace", 2), &[packed]).unwrap();
        assert_eq!((back.dims(), back.as_slice::<f32>().unwrap()), (x.dims(), x.as_slice::<f32>().unwrap()));
    }

    #[test]
    fn sizes_the_block_does_not_divide_are_errors() {
        let x = Tensor::from_slice::<f32>([1, 1, 1, 3], &[1., 2., 3.]).unwrap();
        assert!(
            run1(&op("DepthToSpace", 2), std::slice::from_ref(&x)).unwrap_err().message.contains("divisible by: 4")
        );
        assert!(run1(&op("SpaceToDepth", 2), &[x]).unwrap_err().message.contains("divisible by block_size"));
        let nchw = op("DepthToSpace", 2).attr("data_format", AttrValue::Bytes(b"NCHW".to_vec()));
        let one = Tensor::from_slice::<f32>([1, 1, 1, 4], &[1., 2., 3., 4.]).unwrap();
        assert!(run1(&nchw, &[one]).unwrap_err().message.contains("NHWC"));
    }
}
