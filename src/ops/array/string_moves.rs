//! String tensors through the ops that only move elements (gather, slice,
//! transpose, reverse, split, unstack, broadcast, fill, pad, stitch, roll):
//! the op's own kernel runs on the elements' indices as int64, and each
//! index it outputs is replaced by the string it stands for. One kernel per
//! op, whatever it moves, so strings follow every rule the numbers do
//! (bounds, negative indices, masks) with the same errors. Indices start
//! at 1: a 0 the op writes of its own (`Pad`'s padding)
//! stands for the empty string, a string tensor's zero in TensorFlow.
//!
//! Owns: the translation between strings and their indices. Must not know
//! what any op does beyond which of its inputs carry elements and which
//! attr names their type.

use super::super::registry::KernelFactory;
use super::super::{KernelInit, OpContext, OpKernel, ValueType, lookup};
use crate::error::{Result, Status};
use crate::graph::spec::{AttrValue, DataType};
use crate::tensor::{DType, Tensor};

/// Which inputs of an op carry its elements.
#[derive(Debug, Clone, Copy)]
pub enum Carriers {
    /// These inputs.
    Inputs(&'static [usize]),
    /// The second half of the inputs (`DynamicStitch`'s data, after its
    /// indices).
    SecondHalf,
    /// Every input but the last (`ConcatV2`'s values, before its axis).
    AllButLast,
    /// Every input but the first (`Concat`'s values, after its axis).
    AllButFirst,
}

impl Carriers {
    fn carries(self, input: usize, inputs: usize) -> bool {
        match self {
            Carriers::Inputs(which) => which.contains(&input),
            Carriers::SecondHalf => input >= inputs / 2,
            Carriers::AllButLast => input + 1 < inputs,
            Carriers::AllButFirst => input > 0,
        }
    }
}

/// Whether the node's `type_attr` says it moves strings.
pub fn moves_strings(init: &KernelInit<'_>, type_attr: &str) -> bool {
    init.node.attr_dtype(type_attr).is_ok_and(|d| d == DType::String)
}

/// The kernel `build` makes for the node with `type_attr` set to int64,
/// run on element indices of the string inputs `carriers` names.
pub fn build(
    init: &KernelInit<'_>,
    type_attr: &str,
    carriers: Carriers,
    build: KernelFactory,
) -> Result<Box<dyn OpKernel>> {
    let mut node = init.node.clone();
    node.attrs.insert(type_attr.to_string(), AttrValue::Type(DataType::Tensor(DType::I64)));
    let def = lookup(&node.op).ok_or_else(|| Status::internal(format!("op '{}' is not registered", node.op)))?;
    let signature = (def.signature)(&node)?;
    let inner = build(&KernelInit { node: &node, signature: &signature })?;
    let string_outputs = init.signature.outputs.iter().map(|t| *t == ValueType::Tensor(DType::String)).collect();
    Ok(Box::new(StringMoves { inner, carriers, string_outputs }))
}

struct StringMoves {
    /// The op's kernel for int64 elements.
    inner: Box<dyn OpKernel>,
    carriers: Carriers,
    /// Outputs of strings (the others, such as `Unique`'s indices, pass).
    string_outputs: Vec<bool>,
}

impl OpKernel for StringMoves {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let count = ctx.num_inputs();
        let mut sources = Vec::new();
        let mut inputs = Vec::with_capacity(count);
        let mut next = 1i64;
        for i in 0..count {
            let input = ctx.input(i)?.clone();
            if !self.carriers.carries(i, count) {
                inputs.push(Some(crate::ops::Value::Tensor(input)));
                continue;
            }
            let len = input.strings()?.len() as i64;
            let indices = Tensor::from_slice::<i64>(input.shape().clone(), &(next..next + len).collect::<Vec<_>>())?;
            next += len;
            sources.push(input);
            inputs.push(Some(crate::ops::Value::Tensor(indices)));
        }
        let mut outputs = vec![None; self.string_outputs.len()];
        self.inner.compute(&mut OpContext::new(&mut inputs, &mut outputs, ctx.resources()))?;
        let views = sources.iter().map(Tensor::strings).collect::<Result<Vec<_>>>()?;
        let pool: Vec<&[u8]> = std::iter::once(&b""[..]).chain(views.iter().flat_map(|v| v.iter())).collect();
        for (index, (output, is_string)) in outputs.into_iter().zip(&self.string_outputs).enumerate() {
            let Some(value) = output else {
                return Err(Status::internal(format!("output {index} was not set")));
            };
            if !is_string {
                ctx.set_output_value(index, value);
                continue;
            }
            let crate::ops::Value::Tensor(picked) = value else {
                return Err(Status::internal(format!("output {index} is not a tensor")));
            };
            let strings = picked
                .as_slice::<i64>()?
                .iter()
                .map(|&i| {
                    pool.get(i as usize)
                        .copied()
                        .ok_or_else(|| Status::internal(format!("element {i} of {}", pool.len())))
                })
                .collect::<Result<Vec<_>>>()?;
            ctx.set_output(index, Tensor::from_strings(picked.shape().clone(), &strings)?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};
    use crate::tensor::{DType, Tensor};

    fn words(shape: &[usize], values: &[&str]) -> Tensor {
        Tensor::from_strings(shape, values).unwrap()
    }

    fn strings(t: &Tensor) -> Vec<String> {
        t.strings().unwrap().iter().map(|s| String::from_utf8(s.to_vec()).unwrap()).collect()
    }

    #[test]
    fn a_gather_of_strings_follows_the_numbers_rules_and_errors() {
        let gather = node("GatherV2")
            .attr("Tparams", ty(DType::String))
            .attr("Tindices", ty(DType::I32))
            .attr("Taxis", ty(DType::I32));
        let grid = words(&[2, 3], &["a", "b", "c", "d", "e", "f"]);
        let picked = Tensor::from_slice::<i32>([2], &[2, 0]).unwrap();
        let out = run1(&gather, &[grid.clone(), picked, Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.dims(), &[2, 2]);
        assert_eq!(strings(&out), ["c", "a", "f", "d"]);
        let out_of_range = Tensor::from_slice::<i32>([1], &[3]).unwrap();
        let err = run1(&gather, &[grid, out_of_range, Tensor::scalar(1i32)]).unwrap_err();
        let numbers = Tensor::from_slice::<i64>([2, 3], &[0, 1, 2, 3, 4, 5]).unwrap();
        let gather_numbers = gather.clone().attr("Tparams", ty(DType::I64));
        let same =
            run1(&gather_numbers, &[numbers, Tensor::from_slice::<i32>([1], &[3]).unwrap(), Tensor::scalar(1i32)])
                .unwrap_err();
        assert_eq!(err.message, same.message);
    }

    #[test]
    fn pads_and_stitches_take_their_strings_from_every_carrying_input() {
        let pad = node("PadV2").attr("T", ty(DType::String)).attr("Tpaddings", ty(DType::I32));
        let paddings = Tensor::from_slice::<i32>([1, 2], &[1, 2]).unwrap();
        let out = run1(&pad, &[words(&[2], &["x", "y"]), paddings, Tensor::string_scalar("?")]).unwrap();
        assert_eq!(strings(&out), ["?", "x", "y", "?", "?"]);
        let stitch = node("DynamicStitch").attr("T", ty(DType::String)).attr("N", AttrValue::Int(2));
        let inputs = vec![
            Value::Tensor(Tensor::from_slice::<i32>([2], &[0, 2]).unwrap()),
            Value::Tensor(Tensor::from_slice::<i32>([1], &[1]).unwrap()),
            Value::Tensor(words(&[2], &["first", "third"])),
            Value::Tensor(words(&[1], &["second"])),
        ];
        let out = run_kernel_once(&stitch, inputs, &ResourceMgr::default()).unwrap();
        let Value::Tensor(out) = &out[0] else { panic!("a tensor") };
        assert_eq!(strings(out), ["first", "second", "third"]);
        let pad = node("Pad").attr("T", ty(DType::String)).attr("Tpaddings", ty(DType::I32));
        let out = run1(&pad, &[words(&[2], &["x", "y"]), Tensor::from_slice::<i32>([1, 2], &[1, 1]).unwrap()]).unwrap();
        assert_eq!(strings(&out), ["", "x", "y", ""]);
        let fill = node("Fill").attr("T", ty(DType::String)).attr("index_type", ty(DType::I32));
        let out = run1(&fill, &[Tensor::from_slice::<i32>([2], &[1, 2]).unwrap(), Tensor::string_scalar("z")]).unwrap();
        assert_eq!((out.dims(), strings(&out)), (&[1usize, 2][..], vec!["z".to_string(), "z".to_string()]));
    }
}
