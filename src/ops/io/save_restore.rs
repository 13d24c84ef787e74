//! `SaveV2`, `RestoreV2` and `MergeV2Checkpoints` over
//! [`crate::checkpoint`]'s tensor bundles.
//!
//! Owns: the three kernels, their signatures and the checks on their
//! inputs (names, slice specs, dtypes). Must not write bytes itself: every
//! file goes through `checkpoint::bundle`, which writes atomically. The
//! three ops are stateful: they touch the file system.

use crate::checkpoint::{BundleReader, merge_bundles, write_bundle};
use crate::error::{Result, Status};
use crate::graph::spec::{DataType, NodeSpec};
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("SaveV2", save_signature, build_save).stateful(),
    OpDef::kernel("RestoreV2", restore_signature, build_restore).stateful(),
    OpDef::kernel("MergeV2Checkpoints", merge_signature, build_merge).stateful(),
];

const STRING: ValueType = ValueType::Tensor(DType::String);

/// The `dtypes` attribute: the saved or restored tensors' dtypes.
fn attr_dtypes(node: &NodeSpec) -> Result<Vec<DType>> {
    node.attr_type_list("dtypes")?
        .into_iter()
        .map(|d| match d {
            DataType::Tensor(d) => Ok(d),
            other => Err(Status::unimplemented(format!(
                "node '{}' ({}): cannot save or restore a tensor of type {other}",
                node.name, node.op
            ))),
        })
        .collect()
}

/// `[prefix, tensor_names, shape_and_slices, tensors...] -> []`.
fn save_signature(node: &NodeSpec) -> Result<OpSignature> {
    let mut inputs = vec![STRING; 3];
    inputs.extend(attr_dtypes(node)?.into_iter().map(ValueType::Tensor));
    Ok(OpSignature::new(inputs, vec![]))
}

/// `[prefix, tensor_names, shape_and_slices] -> [dtypes...]`.
fn restore_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING; 3], attr_dtypes(node)?.into_iter().map(ValueType::Tensor).collect()))
}

/// `[checkpoint_prefixes, destination_prefix] -> []`.
fn merge_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING; 2], vec![]))
}

/// A string scalar input as a path.
fn path_input(ctx: &OpContext<'_>, index: usize, what: &str) -> Result<String> {
    let bytes = ctx.input(index)?.string_value().map_err(|e| e.context(what))?;
    String::from_utf8(bytes.to_vec()).map_err(|_| Status::invalid_argument(format!("{what} is not UTF-8")))
}

/// The tensor names and their slice specs, `count` of each; a non-empty
/// slice spec (a partitioned variable's part) is refused.
fn names_and_slices(ctx: &OpContext<'_>, node: &str, count: usize) -> Result<Vec<String>> {
    let (names, slices) = (ctx.input(1)?.strings()?, ctx.input(2)?.strings()?);
    if names.len() != count || slices.len() != count {
        return Err(Status::invalid_argument(format!(
            "node '{node}': {} tensor names and {} shape_and_slices for {count} tensors",
            names.len(),
            slices.len()
        )));
    }
    let mut out = Vec::with_capacity(count);
    for (name, slice) in names.iter().zip(slices.iter()) {
        let name = String::from_utf8_lossy(name).into_owned();
        if !slice.is_empty() {
            return Err(Status::unimplemented(format!(
                "node '{node}': tensor '{name}' has slice spec '{}'; ringflow saves and restores whole tensors only",
                String::from_utf8_lossy(slice)
            )));
        }
        out.push(name);
    }
    Ok(out)
}

struct SaveKernel {
    node: String,
    dtypes: Vec<DType>,
}

fn build_save(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(SaveKernel { node: init.node.name.clone(), dtypes: attr_dtypes(init.node)? }))
}

impl OpKernel for SaveKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let prefix = path_input(ctx, 0, "prefix")?;
        let names = names_and_slices(ctx, &self.node, self.dtypes.len())?;
        let mut tensors: Vec<Tensor> = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            // A ref variable arrives as a ref: save what it holds now.
            let tensor =
                ctx.take_input_value(3 + i)?.into_tensor().map_err(|e| e.context(format_args!("saving '{name}'")))?;
            if tensor.dtype() != self.dtypes[i] {
                return Err(Status::invalid_argument(format!(
                    "node '{}': tensor '{name}' is {} but attr dtypes says {}",
                    self.node,
                    tensor.dtype(),
                    self.dtypes[i]
                )));
            }
            tensors.push(tensor);
        }
        let pairs: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&tensors).collect();
        write_bundle(&prefix, &pairs)
    }
}

struct RestoreKernel {
    node: String,
    dtypes: Vec<DType>,
}

fn build_restore(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(RestoreKernel { node: init.node.name.clone(), dtypes: attr_dtypes(init.node)? }))
}

impl OpKernel for RestoreKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let prefix = path_input(ctx, 0, "prefix")?;
        let names = names_and_slices(ctx, &self.node, self.dtypes.len())?;
        let reader = BundleReader::open(&prefix)?;
        for (i, name) in names.iter().enumerate() {
            let (saved, _) = reader.dtype_and_shape(name)?;
            if saved != self.dtypes[i] {
                return Err(Status::invalid_argument(format!(
                    "tensor '{name}' in checkpoint '{prefix}' is {saved}, but node '{}' restores it as {}",
                    self.node, self.dtypes[i]
                )));
            }
            let tensor = reader.read(name)?;
            ctx.set_output(i, tensor);
        }
        Ok(())
    }
}

struct MergeKernel {
    delete_old_dirs: bool,
    allow_missing_files: bool,
}

fn build_merge(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(MergeKernel {
        delete_old_dirs: init.node.attr_bool_or("delete_old_dirs", true)?,
        allow_missing_files: init.node.attr_bool_or("allow_missing_files", false)?,
    }))
}

impl OpKernel for MergeKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let sources: Vec<String> = ctx
            .input(0)?
            .strings()?
            .iter()
            .map(|s| {
                String::from_utf8(s.to_vec())
                    .map_err(|_| Status::invalid_argument("a checkpoint prefix to merge is not UTF-8"))
            })
            .collect::<Result<_>>()?;
        let destination = path_input(ctx, 1, "destination_prefix")?;
        merge_bundles(&sources, &destination, self.delete_old_dirs, self.allow_missing_files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::graph::spec::{AttrList, AttrValue};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn dtypes(list: &[DType]) -> AttrValue {
        AttrValue::List(AttrList::Type(list.iter().map(|&d| DataType::Tensor(d)).collect()))
    }

    fn strings(values: &[&str]) -> Value {
        Value::Tensor(Tensor::from_strings([values.len()], values).unwrap())
    }

    fn save(prefix: &str, names: &[&str], slices: &[&str], tensors: Vec<Tensor>) -> Result<Vec<Value>> {
        let kinds: Vec<DType> = tensors.iter().map(Tensor::dtype).collect();
        let node = NodeSpec::new("save/SaveV2", "SaveV2").attr("dtypes", dtypes(&kinds));
        let mut inputs = vec![Value::Tensor(Tensor::string_scalar(prefix)), strings(names), strings(slices)];
        inputs.extend(tensors.into_iter().map(Value::Tensor));
        run_kernel_once(&node, inputs, &ResourceMgr::default())
    }

    fn restore(prefix: &str, names: &[&str], kinds: &[DType]) -> Result<Vec<Value>> {
        let node = NodeSpec::new("save/RestoreV2", "RestoreV2").attr("dtypes", dtypes(kinds));
        let slices = vec![""; names.len()];
        let inputs = vec![Value::Tensor(Tensor::string_scalar(prefix)), strings(names), strings(&slices)];
        run_kernel_once(&node, inputs, &ResourceMgr::default())
    }

    #[test]
    fn save_then_restore_gives_the_tensors_back_in_the_asked_order() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("model.ckpt").to_string_lossy().into_owned();
        let w = Tensor::from_slice::<f32>([2], &[1.0, -2.0]).unwrap();
        let step = Tensor::scalar(7i64);
        save(&prefix, &["w", "global_step"], &["", ""], vec![w.clone(), step.clone()]).unwrap();
        let out = restore(&prefix, &["global_step", "w"], &[DType::I64, DType::F32]).unwrap();
        assert_eq!(out[0].as_tensor().unwrap().as_slice::<i64>().unwrap(), &[7]);
        assert_eq!(out[1].as_tensor().unwrap().as_slice::<f32>().unwrap(), &[1.0, -2.0]);
    }

    #[test]
    fn restore_errors_name_the_tensor_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("ckpt").to_string_lossy().into_owned();
        save(&prefix, &["w"], &[""], vec![Tensor::scalar(1.0f32)]).unwrap();
        let err = restore(&prefix, &["bias"], &[DType::F32]).unwrap_err();
        assert_eq!(err.code, Code::NotFound);
        assert!(err.message.contains("bias") && err.message.contains(&prefix), "{err}");
        let err = restore(&prefix, &["w"], &[DType::I32]).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
        assert!(err.message.contains("'w'") && err.message.contains("float32"), "{err}");
        let missing = dir.path().join("absent").to_string_lossy().into_owned();
        let err = restore(&missing, &["w"], &[DType::F32]).unwrap_err();
        assert_eq!(err.code, Code::NotFound);
        assert!(err.message.contains("absent.index"), "{err}");
    }

    #[test]
    fn slice_specs_are_refused_naming_node_and_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("ckpt").to_string_lossy().into_owned();
        let err = save(&prefix, &["part"], &["4 0,2"], vec![Tensor::scalar(1.0f32)]).unwrap_err();
        assert_eq!(err.code, Code::Unimplemented);
        assert!(err.message.contains("save/SaveV2") && err.message.contains("'part'"), "{err}");
        assert!(!dir.path().join("ckpt.index").exists());
    }

    #[test]
    fn merge_joins_two_saved_shards() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("model").to_string_lossy().into_owned();
        let parts: Vec<String> = (0..2).map(|i| format!("{base}_temp/part-{i:05}-of-00002")).collect();
        save(&parts[0], &["a"], &[""], vec![Tensor::scalar(1.0f32)]).unwrap();
        save(&parts[1], &["b"], &[""], vec![Tensor::string_scalar("x")]).unwrap();
        let node = NodeSpec::new("save/MergeV2Checkpoints", "MergeV2Checkpoints");
        let prefixes: Vec<&str> = parts.iter().map(String::as_str).collect();
        let inputs = vec![strings(&prefixes), Value::Tensor(Tensor::string_scalar(&base))];
        run_kernel_once(&node, inputs, &ResourceMgr::default()).unwrap();
        let out = restore(&base, &["a", "b"], &[DType::F32, DType::String]).unwrap();
        assert_eq!(out[1].as_tensor().unwrap().string_value().unwrap(), b"x");
        assert!(dir.path().join("model.data-00001-of-00002").exists());
    }
}
