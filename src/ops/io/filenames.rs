//! The string ops a sharded `Saver` computes its file names with:
//! `ShardedFilename` (`BASE-00001-of-00004`), `ShardedFilespec`
//! (`BASE-?????-of-00004`) and `StringJoin`. (The `StaticRegexFullMatch`
//! it tells `s3://` paths apart with is a regular-expression op in
//! `ops::string`.)
//!
//! Owns: these kernels and their signatures. Must not touch files.

use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_count};
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("ShardedFilename", sharded_filename_signature, build_sharded_filename),
    OpDef::kernel("ShardedFilespec", sharded_filespec_signature, build_sharded_filespec),
    OpDef::kernel("StringJoin", string_join_signature, build_string_join),
];

const STRING: ValueType = ValueType::Tensor(DType::String);
const INT32: ValueType = ValueType::Tensor(DType::I32);

fn sharded_filename_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING, INT32, INT32], vec![STRING]))
}

fn sharded_filespec_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING, INT32], vec![STRING]))
}

fn string_join_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING; attr_count(node, "N", 1)?], vec![STRING]))
}

fn basename(ctx: &OpContext<'_>) -> Result<String> {
    let bytes = ctx.input(0)?.string_value().map_err(|e| e.context("basename"))?;
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

struct ShardedFilename;

fn build_sharded_filename(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ShardedFilename))
}

impl OpKernel for ShardedFilename {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let base = basename(ctx)?;
        let shard = ctx.input(1)?.scalar_value::<i32>()?;
        let num_shards = ctx.input(2)?.scalar_value::<i32>()?;
        ctx.set_output(0, Tensor::string_scalar(format!("{base}-{shard:05}-of-{num_shards:05}")));
        Ok(())
    }
}

struct ShardedFilespec;

fn build_sharded_filespec(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ShardedFilespec))
}

impl OpKernel for ShardedFilespec {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let base = basename(ctx)?;
        let num_shards = ctx.input(1)?.scalar_value::<i32>()?;
        ctx.set_output(0, Tensor::string_scalar(format!("{base}-?????-of-{num_shards:05}")));
        Ok(())
    }
}

struct StringJoin {
    separator: Vec<u8>,
}

fn build_string_join(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(StringJoin { separator: init.node.attr_str_or("separator", "")?.into_bytes() }))
}

impl OpKernel for StringJoin {
    /// Elementwise over inputs of one shape; scalars join every element.
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let mut inputs = Vec::with_capacity(ctx.num_inputs());
        for i in 0..ctx.num_inputs() {
            inputs.push(ctx.input(i)?);
        }
        let mut shape: Option<&Shape> = None;
        for (i, t) in inputs.iter().enumerate() {
            if t.rank() == 0 {
                continue;
            }
            match shape {
                None => shape = Some(t.shape()),
                Some(s) if s != t.shape() => {
                    return Err(Status::invalid_argument(format!(
                        "StringJoin inputs must be scalars or of one shape: input {i} is {} where another is {s}",
                        t.shape()
                    )));
                }
                Some(_) => {}
            }
        }
        let shape = shape.cloned().unwrap_or_else(Shape::scalar);
        let views = inputs.iter().map(|t| t.strings()).collect::<Result<Vec<_>>>()?;
        let joined: Vec<Vec<u8>> = (0..shape.num_elements())
            .map(|e| {
                let mut out = Vec::new();
                for (k, view) in views.iter().enumerate() {
                    if k > 0 {
                        out.extend_from_slice(&self.separator);
                    }
                    let index = if view.len() == 1 { 0 } else { e };
                    out.extend_from_slice(view.get(index).unwrap_or_default());
                }
                out
            })
            .collect();
        let out = Tensor::from_strings(shape, &joined)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::graph::spec::AttrValue;
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn run(node: NodeSpec, inputs: Vec<Tensor>) -> Result<Tensor> {
        let out = run_kernel_once(&node, inputs.into_iter().map(Value::Tensor).collect(), &ResourceMgr::default())?;
        Ok(out[0].as_tensor().cloned().expect("a tensor output"))
    }

    fn text(t: &Tensor) -> Vec<String> {
        t.strings().unwrap().iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
    }

    #[test]
    fn sharded_names_pad_to_five_digits() {
        let base = Tensor::string_scalar("/tmp/model_temp/part");
        let name =
            run(NodeSpec::new("n", "ShardedFilename"), vec![base.clone(), Tensor::scalar(1i32), Tensor::scalar(2i32)])
                .unwrap();
        assert_eq!(text(&name), ["/tmp/model_temp/part-00001-of-00002"]);
        let spec = run(NodeSpec::new("n", "ShardedFilespec"), vec![base, Tensor::scalar(12i32)]).unwrap();
        assert_eq!(text(&spec), ["/tmp/model_temp/part-?????-of-00012"]);
    }

    #[test]
    fn string_join_joins_elementwise_with_scalars_repeated() {
        let node = NodeSpec::new("n", "StringJoin")
            .attr("N", AttrValue::Int(3))
            .attr("separator", AttrValue::Bytes(b"/".to_vec()));
        let out = run(
            node,
            vec![
                Tensor::string_scalar("ckpt"),
                Tensor::from_strings([2], &["a", "b"]).unwrap(),
                Tensor::from_strings([2], &["x", ""]).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(out.dims(), &[2]);
        assert_eq!(text(&out), ["ckpt/a/x", "ckpt/b/"]);
        let node = NodeSpec::new("n", "StringJoin").attr("N", AttrValue::Int(2));
        let bad =
            vec![Tensor::from_strings([2], &["a", "b"]).unwrap(), Tensor::from_strings([3], &["a", "b", "c"]).unwrap()];
        assert_eq!(run(node, bad).unwrap_err().code, Code::InvalidArgument);
    }
}
