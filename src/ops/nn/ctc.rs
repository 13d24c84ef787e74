//! `CTCGreedyDecoder` (`tf.nn.ctc_greedy_decoder`, Keras'
//! `ctc_decode(greedy=True)`): the best path of a CTC model's outputs (OCR,
//! speech): at each time step the most likely class (the first of equal
//! maxima), repeats merged when `merge_repeated` (before blanks are
//! dropped, as TensorFlow does), blanks dropped; decoded as a sparse tensor
//! `[batch, longest]`, with the path's negative sum of the chosen logits.
//!
//! Owns: this kernel. Must not hold state beyond parsed attributes.

use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::math::FLOAT;
use crate::ops::numeric::Float;
use crate::ops::registry::OpDef;
use crate::ops::sparse::indices_tensor;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("CTCGreedyDecoder", signature, build)];

/// `[T, int32] -> [int64, int64, int64, T]`.
fn signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let i64 = ValueType::Tensor(DType::I64);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::I32)], vec![i64, i64, i64, t]))
}

struct GreedyDecoder {
    merge_repeated: bool,
    /// Negative: the last class.
    blank_index: i64,
    dtype: DType,
}

fn build(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    if !FLOAT.contains(&dtype) {
        return Err(unsupported_dtype(&init.node.op, dtype, FLOAT));
    }
    Ok(Box::new(GreedyDecoder {
        merge_repeated: init.node.attr_bool_or("merge_repeated", false)?,
        blank_index: init.node.attr_int_or("blank_index", -1)?,
        dtype,
    }))
}

impl OpKernel for GreedyDecoder {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        match self.dtype {
            DType::F32 => self.decode::<f32>(ctx),
            _ => self.decode::<f64>(ctx),
        }
    }
}

impl GreedyDecoder {
    fn decode<T: Float>(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (inputs, lengths) = (ctx.input(0)?, ctx.input(1)?);
        if inputs.rank() != 3 {
            bail!(
                invalid_argument,
                "inputs is not a 3-Tensor: [max_time, batch_size, num_classes], got {}",
                inputs.shape()
            );
        }
        let (max_time, batch, classes) = (inputs.dims()[0], inputs.dims()[1], inputs.dims()[2]);
        if lengths.rank() != 1 || lengths.dims()[0] != batch {
            bail!(invalid_argument, "len(sequence_length) != batch_size: {} vs {batch}", lengths.shape());
        }
        if classes == 0 {
            bail!(invalid_argument, "num_classes must be positive");
        }
        let blank = if self.blank_index < 0 { classes as i64 + self.blank_index } else { self.blank_index };
        if blank < 0 || blank >= classes as i64 {
            bail!(
                invalid_argument,
                "blank_index expected to be between -{classes} and {}, got {}",
                classes - 1,
                self.blank_index
            );
        }
        let lengths = lengths.as_slice::<i32>()?;
        if let Some((b, &len)) = lengths.iter().enumerate().find(|&(_, &len)| len as i64 > max_time as i64) {
            bail!(failed_precondition, "sequence_length({b}) <= {max_time}: sequence_length[{b}] = {len}");
        }
        let logits = inputs.as_slice::<T>()?;
        let mut decoded: Vec<Vec<i64>> = vec![Vec::new(); batch];
        let mut log_probs = vec![T::ZERO; batch];
        for (b, path) in decoded.iter_mut().enumerate() {
            let mut previous = None;
            for t in 0..lengths[b].max(0) as usize {
                let row = &logits[(t * batch + b) * classes..(t * batch + b + 1) * classes];
                let (best, &score) =
                    row.iter().enumerate().fold((0, &row[0]), |acc, (i, x)| if *x > *acc.1 { (i, x) } else { acc });
                log_probs[b] = log_probs[b].sub(score);
                let best = best as i64;
                if best != blank && !(self.merge_repeated && previous == Some(best)) {
                    path.push(best);
                }
                previous = Some(best);
            }
        }
        let longest = decoded.iter().map(Vec::len).max().unwrap_or(0);
        let total: usize = decoded.iter().map(Vec::len).sum();
        let mut flat = Vec::with_capacity(total * 2);
        let mut values = Vec::with_capacity(total);
        for (b, path) in decoded.iter().enumerate() {
            for (i, &class) in path.iter().enumerate() {
                flat.extend([b as i64, i as i64]);
                values.push(class);
            }
        }
        ctx.set_output(0, indices_tensor(flat, total, 2)?);
        ctx.set_output(1, Tensor::from_slice::<i64>([total].as_slice(), &values)?);
        ctx.set_output(2, Tensor::from_slice::<i64>([2].as_slice(), &[batch as i64, longest as i64])?);
        ctx.set_output(3, Tensor::from_slice::<T>([batch, 1].as_slice(), &log_probs)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::run_all;
    use crate::ops::testing::{node, ty};
    use crate::tensor::{DType, Tensor};

    fn logits() -> Tensor {
        #[rustfmt::skip]
        let v = [0.1, 0.5, 0.2, 0.0, 1., 0., 0., 0.,
                 0.1, 0.5, 0.2, 0.0, 0., 0., 0., 3.,
                 0., 0., 0., 1., 0., 2., 0., 0.,
                 0.1, 0.5, 0.5, 0.0, 0., 2., 0., 0.];
        Tensor::from_slice::<f32>([4, 2, 4].as_slice(), &v).unwrap()
    }

    #[test]
    fn best_paths_match_tensorflow() {
        // TensorFlow 2.21's tf.raw_ops.CTCGreedyDecoder on the same inputs.
        let lengths = Tensor::from_slice::<i32>([2].as_slice(), &[4, 3]).unwrap();
        let op = node("CTCGreedyDecoder").attr("T", ty(DType::F32));
        let out = run_all(&op, &[logits(), lengths.clone()]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 0, 0, 1, 0, 2, 1, 0, 1, 1]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), [1, 1, 1, 0, 1]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), [2, 3]);
        assert_eq!(out[3].as_slice::<f32>().unwrap(), [-2.5, -6.0]);
        let merged = run_all(&op.clone().attr("merge_repeated", AttrValue::Bool(true)), &[logits(), lengths.clone()]);
        assert_eq!(merged.unwrap()[1].as_slice::<i64>().unwrap(), [1, 1, 0, 1]);
        let blank0 = run_all(&op.clone().attr("blank_index", AttrValue::Int(0)), &[logits(), lengths]).unwrap();
        assert_eq!(blank0[1].as_slice::<i64>().unwrap(), [1, 1, 3, 1, 3, 1]);
        assert_eq!(blank0[2].as_slice::<i64>().unwrap(), [2, 4]);
        let too_long = Tensor::from_slice::<i32>([2].as_slice(), &[5, 3]).unwrap();
        let e = run_all(&op, &[logits(), too_long]).unwrap_err();
        assert!(e.message.contains("sequence_length(0) <= 4"), "{e}");
    }
}
