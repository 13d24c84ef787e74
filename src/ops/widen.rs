//! Ops on the narrow dtypes (float16, bfloat16, int8, int16, uint16,
//! uint32): the kernel built is the op's own at the wide dtype
//! ([`DType::wide`]: float32, int32, int64), and this adapter widens the
//! node's narrow inputs before it runs and narrows its outputs after.
//!
//! Why it is exact where it matters: every narrow value is exact in its
//! wide dtype; an elementwise float16 op in TensorFlow (Eigen's `half`) is
//! computed in float32 and rounded once, to nearest even, which is what
//! narrowing does; integer results wrap as TensorFlow's do, since the low
//! bits of a wide sum or product are the narrow ones. Where it departs:
//! reductions of float16 accumulate in float32 (TensorFlow accumulates in
//! float16, so its sums lose low bits and overflow sooner), and the empty
//! Max/Min of a small integer is the wide type's lowest/highest wrapped,
//! not the narrow one's.
//!
//! Which inputs and outputs are narrow is read off the op's own signature
//! function, resolved with each narrow type attribute set to its wide
//! dtype and then to a second one ([`DType::wider`]): the positions that
//! change follow that attribute.
//!
//! Owns: that rule, the conversions, the ops that move narrow tensors as
//! they are ([`MOVED_AS_IS`]), the two width-dependent fix-ups (shift
//! amounts clamped, popcounts masked to the narrow width) and the ops
//! refused. Must not know any other op's arithmetic.

use super::registry::{Implementation, OpDef};
use super::{KernelInit, OpContext, OpKernel, OpSignature, Value, ValueType};
use crate::error::{Result, Status};
use crate::graph::spec::{AttrList, AttrValue, DataType, NodeSpec};
use crate::tensor::{DType, Tensor};
use half::slice::HalfFloatSliceExt;

/// Ops whose kernels only move bytes or read shapes: they see narrow
/// tensors as they are, at no conversion cost.
pub const MOVED_AS_IS: &[&str] = &[
    "Bitcast",
    "Const",
    "EnsureShape",
    "ExpandDims",
    "Identity",
    "IdentityN",
    "NoOp",
    "Placeholder",
    "PlaceholderWithDefault",
    "PreventGradient",
    "Rank",
    "Reshape",
    "Shape",
    "ShapeN",
    "Size",
    "Snapshot",
    "Squeeze",
    "StopGradient",
];

/// Ops that clamp their shift amount (input 1) to the integer's width:
/// clamped to the narrow width before the wide kernel shifts, the low bits
/// are the narrow shift's.
const SHIFTS: &[&str] = &["LeftShift", "RightShift"];

/// How one node computes: its kernel's node (narrow attributes widened),
/// that node's signature, and which inputs and outputs are narrow.
struct Widening {
    wide_node: NodeSpec,
    wide_signature: OpSignature,
    inputs: Vec<Option<DType>>,
    outputs: Vec<Option<DType>>,
    /// `Cast` with `Truncate`: a float output narrowed by dropping the
    /// bits the narrow type lacks before rounding (TensorFlow's rule).
    truncate: bool,
    /// The first narrow dtype, for errors.
    first: DType,
    /// The width-dependent fix-up of one widened input, if the op needs one.
    fixup: Option<Fixup>,
}

/// What a width-dependent op needs done to a widened input so the wide
/// kernel gives the narrow result.
#[derive(Debug, Clone, Copy)]
enum Fixup {
    /// A shift: input 1's amounts clamped to `[0, bits - 1]`.
    ClampShift { bits: i64 },
    /// `PopulationCount`: input 0 masked to its low `bits`.
    LowBits { bits: i64 },
}

impl Fixup {
    fn input(self) -> usize {
        match self {
            Fixup::ClampShift { .. } => 1,
            Fixup::LowBits { .. } => 0,
        }
    }

    fn apply(self, t: &Tensor) -> Result<Tensor> {
        match self {
            Fixup::ClampShift { bits } => clamp_shift(t, bits),
            Fixup::LowBits { bits } => low_bits(t, bits),
        }
    }
}

/// The node's narrow type attributes, in attribute order.
fn narrow_attrs(node: &NodeSpec) -> Result<Vec<(String, DType)>> {
    let mut found = Vec::new();
    for (key, value) in &node.attrs {
        match value {
            AttrValue::Type(DataType::Tensor(d)) if d.is_narrow() => found.push((key.clone(), *d)),
            AttrValue::List(AttrList::Type(list)) => {
                if let Some(DataType::Tensor(d)) =
                    list.iter().find(|t| matches!(t, DataType::Tensor(d) if d.is_narrow()))
                {
                    return Err(Status::unimplemented(format!(
                        "node '{}' ({}): attr '{key}' lists {d}; {d} is computed as {} only by ops with single type attributes",
                        node.name,
                        node.op,
                        d.wide()
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

fn with_type(node: &NodeSpec, key: &str, dtype: DType) -> NodeSpec {
    let mut node = node.clone();
    node.attrs.insert(key.to_string(), AttrValue::Type(DataType::Tensor(dtype)));
    node
}

/// `None` when the node computes as it is.
fn plan(def: &OpDef, node: &NodeSpec) -> Result<Option<Widening>> {
    if !matches!(def.implementation, Implementation::Kernel(_)) || MOVED_AS_IS.contains(&def.name) {
        return Ok(None);
    }
    let narrow = narrow_attrs(node)?;
    let Some(&(_, first)) = narrow.first() else {
        return Ok(None);
    };
    if def.name == "Cast" && [node.attr_dtype("SrcT")?, node.attr_dtype("DstT")?].contains(&DType::String) {
        return Ok(None); // refused by Cast itself, naming both types
    }
    let refuse = |why: &str| Err(Status::unimplemented(format!("node '{}' ({}): {first} {why}", node.name, node.op)));
    if def.name.contains("Random") || def.name.starts_with("Stateless") {
        return refuse("draws are not supported (TensorFlow draws them from their own bits); draw float32 and cast");
    }
    if def.stateful {
        return refuse(
            "variables and other state are not supported; keep them in float32 (as Keras mixed precision does)",
        );
    }
    let mut wide_node = node.clone();
    for (key, dtype) in &narrow {
        wide_node = with_type(&wide_node, key, dtype.wide());
    }
    let wide_signature =
        (def.signature)(&wide_node).map_err(|e| e.context(format_args!("{first} computed in {}", first.wide())))?;
    let mut inputs = vec![None; wide_signature.inputs.len()];
    let mut outputs = vec![None; wide_signature.outputs.len()];
    for (key, dtype) in &narrow {
        let wide = ValueType::Tensor(dtype.wide());
        let probe = (def.signature)(&with_type(&wide_node, key, dtype.wider())).ok().filter(|p| {
            p.inputs.len() == wide_signature.inputs.len() && p.outputs.len() == wide_signature.outputs.len()
        });
        let mark = |slots: &mut [Option<DType>], base: &[ValueType], probed: Option<&[ValueType]>| {
            for (i, slot) in slots.iter_mut().enumerate() {
                let follows = match probed {
                    Some(p) => p[i] != base[i],
                    None => base[i] == wide && slot.is_none(),
                };
                if follows {
                    *slot = Some(*dtype);
                }
            }
        };
        mark(&mut inputs, &wide_signature.inputs, probe.as_ref().map(|p| p.inputs.as_slice()));
        mark(&mut outputs, &wide_signature.outputs, probe.as_ref().map(|p| p.outputs.as_slice()));
    }
    let positions = inputs.iter().zip(&wide_signature.inputs).chain(outputs.iter().zip(&wide_signature.outputs));
    for (narrow, ty) in positions {
        if narrow.is_some() && !matches!(ty, ValueType::Tensor(_)) {
            return refuse(&format!("as a {ty} is not supported"));
        }
    }
    let truncate = def.name == "Cast" && node.attr_bool_or("Truncate", false)?;
    let bits = first.size().unwrap_or(0) as i64 * 8;
    let fixup = if SHIFTS.contains(&def.name) {
        Some(Fixup::ClampShift { bits })
    } else if def.name == "PopulationCount" {
        Some(Fixup::LowBits { bits })
    } else {
        None
    };
    Ok(Some(Widening { wide_node, wide_signature, inputs, outputs, truncate, first, fixup }))
}

/// The node's signature, narrow types included.
pub fn signature(def: &OpDef, node: &NodeSpec) -> Result<OpSignature> {
    let Some(w) = plan(def, node)? else {
        return (def.signature)(node);
    };
    let narrowed = |types: &[ValueType], narrow: &[Option<DType>]| {
        types.iter().zip(narrow).map(|(&ty, n)| n.map_or(ty, ValueType::Tensor)).collect()
    };
    Ok(OpSignature::new(narrowed(&w.wide_signature.inputs, &w.inputs), narrowed(&w.wide_signature.outputs, &w.outputs)))
}

/// The node's kernel: its own, or its wide one between conversions.
pub fn build(def: &OpDef, init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let Implementation::Kernel(build) = def.implementation else {
        return Err(Status::invalid_argument(format!("op '{}' is run by the executor, not a kernel", def.name)));
    };
    let Some(w) = plan(def, init.node)? else {
        return build(init);
    };
    let inner = build(&KernelInit { node: &w.wide_node, signature: &w.wide_signature })
        .map_err(|e| e.context(format_args!("{} computed in {}", w.first, w.first.wide())))?;
    let lent_widened = w.inputs.iter().map(|_| std::sync::OnceLock::new()).collect();
    Ok(Box::new(WideKernel {
        inner,
        inputs: w.inputs,
        outputs: w.outputs,
        truncate: w.truncate,
        lent_widened,
        fixup: w.fixup,
    }))
}

struct WideKernel {
    inner: Box<dyn OpKernel>,
    inputs: Vec<Option<DType>>,
    outputs: Vec<Option<DType>>,
    truncate: bool,
    /// Input `i` as first lent (a constant bound to the graph) and widened,
    /// so a float16 weight is widened once, not every step. Holding the
    /// lent tensor keeps its bytes from being reused by another.
    lent_widened: Vec<std::sync::OnceLock<(Tensor, Tensor)>>,
    fixup: Option<Fixup>,
}

impl WideKernel {
    /// Narrow input `i` in its wide dtype.
    fn wide_input(&self, ctx: &mut OpContext<'_>, i: usize) -> Result<Tensor> {
        if !ctx.input_is_lent(i) {
            return widen(&ctx.take_input(i)?);
        }
        let lent = ctx.input(i)?;
        if let Some((source, wide)) = self.lent_widened[i].get() {
            // A loop's constants may be bound anew: reuse only the same bytes.
            if source.shares_bytes_with(lent) && source.shape() == lent.shape() {
                return Ok(wide.clone());
            }
            return widen(lent);
        }
        let wide = widen(lent)?;
        let _ = self.lent_widened[i].set((lent.clone(), wide.clone()));
        Ok(wide)
    }
}

impl OpKernel for WideKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for (i, narrow) in self.inputs.iter().enumerate() {
            inputs.push(Some(match narrow {
                Some(_) => match self.fixup.filter(|f| f.input() == i) {
                    Some(fixup) => Value::Tensor(fixup.apply(&self.wide_input(ctx, i)?)?),
                    None => Value::Tensor(self.wide_input(ctx, i)?),
                },
                None => ctx.take_input_value(i)?,
            }));
        }
        let mut outputs = vec![None; self.outputs.len()];
        let mut inner_ctx = OpContext::new(&mut inputs, &mut outputs, ctx.resources());
        if let Some(pool) = ctx.intra_op() {
            inner_ctx = inner_ctx.with_intra_op(pool);
        }
        self.inner.compute(&mut inner_ctx)?;
        for (i, (value, narrow)) in outputs.into_iter().zip(&self.outputs).enumerate() {
            let Some(value) = value else { continue };
            match (value, narrow) {
                (Value::Tensor(t), Some(to)) => ctx.set_output(i, narrow_to(&t, *to, self.truncate)?),
                (value, _) => ctx.set_output_value(i, value),
            }
        }
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        self.inner.is_expensive()
    }

    // Shapes decide it, and widening keeps them.
    fn worth_a_thread(&self, inputs: &[Option<Value>], lent: &[Option<Value>]) -> bool {
        self.inner.worth_a_thread(inputs, lent)
    }
}

/// Shift amounts clamped to `[0, bits - 1]`, as TensorFlow clamps them
/// for the narrow type.
fn clamp_shift(t: &Tensor, bits: i64) -> Result<Tensor> {
    let shape = t.shape().clone();
    match t.dtype() {
        DType::I32 => Tensor::from_map(shape, t.as_slice::<i32>()?, |y| y.clamp(0, bits as i32 - 1)),
        _ => Tensor::from_map(shape, t.as_slice::<i64>()?, |y| y.clamp(0, bits - 1)),
    }
}

/// The low `bits` of each value (a sign-extended int8 counts 8 bits, not 32).
fn low_bits(t: &Tensor, bits: i64) -> Result<Tensor> {
    let shape = t.shape().clone();
    let mask = (1i64 << bits) - 1;
    match t.dtype() {
        DType::I32 => Tensor::from_map(shape, t.as_slice::<i32>()?, |x| x & mask as i32),
        _ => Tensor::from_map(shape, t.as_slice::<i64>()?, |x| x & mask),
    }
}

/// A narrow tensor in its wide dtype (exact); any other as it is.
pub fn widen(t: &Tensor) -> Result<Tensor> {
    let shape = t.shape().clone();
    match t.dtype() {
        DType::F16 => {
            let src = t.as_slice::<half::f16>()?;
            Tensor::build::<f32>(shape, |out| src.convert_to_f32_slice(out))
        }
        DType::BF16 => {
            let src = t.as_slice::<half::bf16>()?;
            Tensor::build::<f32>(shape, |out| src.convert_to_f32_slice(out))
        }
        DType::I8 => Tensor::from_map(shape, t.as_slice::<i8>()?, i32::from),
        DType::I16 => Tensor::from_map(shape, t.as_slice::<i16>()?, i32::from),
        DType::U16 => Tensor::from_map(shape, t.as_slice::<u16>()?, i32::from),
        DType::U32 => Tensor::from_map(shape, t.as_slice::<u32>()?, i64::from),
        _ => Ok(t.clone()),
    }
}

/// `t` (of `to.wide()`) in the narrow dtype `to`: floats rounded to
/// nearest even (or, with `truncate`, their surplus bits dropped first, as
/// TensorFlow's `Cast` with `Truncate` does), integers wrapped.
pub fn narrow_to(t: &Tensor, to: DType, truncate: bool) -> Result<Tensor> {
    if t.dtype() != to.wide() {
        return Err(Status::internal(format!(
            "a {} result where {} (computed as {}) was due",
            t.dtype(),
            to,
            to.wide()
        )));
    }
    let shape = t.shape().clone();
    // Bits of float32's 23-bit mantissa the narrow float lacks.
    let dropped = |bits: u32| -> u32 { (1u32 << (23 - bits)) - 1 };
    match to {
        DType::F16 | DType::BF16 if truncate => {
            let mask = !dropped(if to == DType::F16 { 10 } else { 7 });
            let masked: Vec<f32> = t.as_slice::<f32>()?.iter().map(|x| f32::from_bits(x.to_bits() & mask)).collect();
            narrow_to(&Tensor::from_slice(shape, &masked)?, to, false)
        }
        DType::F16 => {
            let src = t.as_slice::<f32>()?;
            Tensor::build::<half::f16>(shape, |out| out.convert_from_f32_slice(src))
        }
        DType::BF16 => {
            let src = t.as_slice::<f32>()?;
            Tensor::build::<half::bf16>(shape, |out| out.convert_from_f32_slice(src))
        }
        DType::I8 => Tensor::from_map(shape, t.as_slice::<i32>()?, |x| x as i8),
        DType::I16 => Tensor::from_map(shape, t.as_slice::<i32>()?, |x| x as i16),
        DType::U16 => Tensor::from_map(shape, t.as_slice::<i32>()?, |x| x as u16),
        DType::U32 => Tensor::from_map(shape, t.as_slice::<i64>()?, |x| x as u32),
        _ => Ok(t.clone()),
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::{node, run_all, run1, ty};
    use crate::tensor::{DType, Tensor};
    use half::{bf16, f16};

    fn bits16(t: &Tensor) -> Vec<u16> {
        t.as_bytes().chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
    }

    /// TensorFlow 2.21's bits for `tf.cast` of these float32 values, and
    /// with `Truncate=True` (the literals are the ones it was given).
    #[test]
    #[allow(clippy::excessive_precision, clippy::approx_constant)]
    fn casts_round_to_nearest_even_or_truncate_as_tensorflow() {
        let x = [1.00390625f32, 1.01171875, 1.0000001, 3.14159, -2.7182817, 65520.0, 1e-8, 70000.0, f32::NAN];
        let x = Tensor::from_slice([9], &x).unwrap();
        let cast = |to: DType, truncate: bool| {
            let n = node("Cast")
                .attr("SrcT", ty(DType::F32))
                .attr("DstT", ty(to))
                .attr("Truncate", crate::graph::spec::AttrValue::Bool(truncate));
            bits16(&run1(&n, std::slice::from_ref(&x)).unwrap())
        };
        assert_eq!(cast(DType::BF16, false), [16256, 16258, 16256, 16457, 49198, 18304, 12844, 18313, 32704]);
        assert_eq!(cast(DType::BF16, true), [16256, 16257, 16256, 16457, 49197, 18303, 12843, 18312, 32704]);
        assert_eq!(cast(DType::F16, false), [15364, 15372, 15360, 16968, 49520, 31744, 0, 31744, 32256]);
        assert_eq!(cast(DType::F16, true), [15364, 15372, 15360, 16968, 49519, 31743, 0, 31744, 32256]);
        // And back: every narrow value is exact in float32.
        let h = Tensor::from_slice([2], &[f16::from_f32(-2.5), f16::MAX]).unwrap();
        let back = run1(&node("Cast").attr("SrcT", ty(DType::F16)).attr("DstT", ty(DType::F32)), &[h]).unwrap();
        assert_eq!(back.as_slice::<f32>().unwrap(), &[-2.5, 65504.0]);
    }

    /// TensorFlow: bfloat16 1 + 2⁻⁸ rounds to 1 (even), 1 + 3·2⁻⁸ to 1 + 2⁻⁶;
    /// int8 and uint16 wrap.
    #[test]
    fn arithmetic_rounds_once_and_integers_wrap() {
        let a = Tensor::from_slice([3], &[bf16::from_f32(1.0), bf16::from_f32(1.0), bf16::from_f32(100.0)]).unwrap();
        let b = Tensor::from_slice([3], &[bf16::from_f32(0.00390625), bf16::from_f32(0.01171875), bf16::from_f32(0.3)])
            .unwrap();
        let sum = run1(&node("AddV2").attr("T", ty(DType::BF16)), &[a, b]).unwrap();
        assert_eq!(sum.dtype(), DType::BF16);
        assert_eq!(bits16(&sum), [16256, 16258, 17097]);
        let i8s = Tensor::from_slice([2], &[100i8, -100]).unwrap();
        let wrapped = run1(&node("AddV2").attr("T", ty(DType::I8)), &[i8s.clone(), i8s]).unwrap();
        assert_eq!(wrapped.as_slice::<i8>().unwrap(), &[-56, 56]);
        let u = Tensor::from_slice([1], &[60000u16]).unwrap();
        let two = Tensor::from_slice([1], &[2u16]).unwrap();
        assert_eq!(
            run1(&node("Mul").attr("T", ty(DType::U16)), &[u, two]).unwrap().as_slice::<u16>().unwrap(),
            &[54464]
        );
        // float32 to int8 goes through int32 and wraps, as TensorFlow's does.
        let f = Tensor::from_slice([2], &[300.7f32, -129.5]).unwrap();
        let n = node("Cast").attr("SrcT", ty(DType::F32)).attr("DstT", ty(DType::I8));
        assert_eq!(run1(&n, &[f]).unwrap().as_slice::<i8>().unwrap(), &[44, 127]);
    }

    #[test]
    fn only_the_positions_that_follow_the_attribute_are_narrow() {
        // FusedBatchNormV3 with T = half keeps its statistics in U = float.
        let n = node("FusedBatchNormV3")
            .attr("T", ty(DType::F16))
            .attr("U", ty(DType::F32))
            .attr("is_training", crate::graph::spec::AttrValue::Bool(false));
        let x = Tensor::from_slice([1, 1, 1, 2], &[f16::from_f32(1.0), f16::from_f32(3.0)]).unwrap();
        let c = |v: f32| Tensor::from_slice([2], &[v, v]).unwrap();
        let outs = run_all(&n, &[x, c(2.0), c(0.5), c(1.0), c(4.0)]).unwrap();
        assert_eq!(outs[0].dtype(), DType::F16);
        assert!(outs[1..].iter().all(|t| t.dtype() == DType::F32));
        // (x - 1) / sqrt(4 + 0.001) * 2 + 0.5
        let y: Vec<f32> = outs[0].as_slice::<f16>().unwrap().iter().map(|v| v.to_f32()).collect();
        assert_eq!(y, [f16::from_f32(0.5).to_f32(), f16::from_f64(2.0 / 4.001f64.sqrt() * 2.0 + 0.5).to_f32()]);
        // ArgMax of float16 gives int64 indices.
        let h = Tensor::from_slice([3], &[f16::from_f32(1.0), f16::from_f32(7.0), f16::from_f32(2.0)]).unwrap();
        let am = node("ArgMax").attr("T", ty(DType::F16)).attr("Tidx", ty(DType::I32));
        let out = run1(&am, &[h, Tensor::scalar(0i32)]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), &[1]);
    }

    /// TensorFlow 2.21 clamps the shift to the narrow width.
    #[test]
    fn shifts_clamp_to_the_narrow_width() {
        let shift = |op: &str, d: DType, x: Tensor, y: Tensor| run1(&node(op).attr("T", ty(d)), &[x, y]).unwrap();
        let (x, y) = (
            Tensor::from_slice([5], &[1i8, -3, 127, -128, 5]).unwrap(),
            Tensor::from_slice([5], &[2i8, 1, 9, -1, 7]).unwrap(),
        );
        assert_eq!(
            shift("LeftShift", DType::I8, x.clone(), y.clone()).as_slice::<i8>().unwrap(),
            &[4, -6, -128, -128, -128]
        );
        assert_eq!(shift("RightShift", DType::I8, x, y).as_slice::<i8>().unwrap(), &[0, -2, 0, -128, 0]);
        let (x, y) = (
            Tensor::from_slice([4], &[1u16, 65535, 40000, 3]).unwrap(),
            Tensor::from_slice([4], &[15u16, 20, 3, 16]).unwrap(),
        );
        assert_eq!(
            shift("LeftShift", DType::U16, x.clone(), y.clone()).as_slice::<u16>().unwrap(),
            &[32768, 32768, 57856, 32768]
        );
        assert_eq!(shift("RightShift", DType::U16, x, y).as_slice::<u16>().unwrap(), &[0, 1, 5000, 0]);
    }

    /// Bits are counted in the narrow width: TensorFlow's popcount of int8
    /// -1 is 8, of int16 -2 is 15.
    #[test]
    fn population_counts_see_the_narrow_width() {
        let count = |d: DType, x: Tensor| run1(&node("PopulationCount").attr("T", ty(d)), &[x]).unwrap();
        let out = count(DType::I8, Tensor::from_slice([3], &[-1i8, 5, -128]).unwrap());
        assert_eq!(out.as_slice::<u8>().unwrap(), &[8, 2, 1]);
        let out = count(DType::I16, Tensor::from_slice([2], &[-2i16, 255]).unwrap());
        assert_eq!(out.as_slice::<u8>().unwrap(), &[15, 8]);
        let out = count(DType::U32, Tensor::from_slice([1], &[u32::MAX]).unwrap());
        assert_eq!(out.as_slice::<u8>().unwrap(), &[32]);
    }

    #[test]
    fn stateful_ops_and_draws_are_refused_by_name() {
        let var = node("VarHandleOp").attr("dtype", ty(DType::F16));
        let err = run1(&var, &[]).unwrap_err();
        assert!(err.message.contains("float16 variables"), "{err}");
        let draw = node("RandomUniform").attr("dtype", ty(DType::BF16)).attr("T", ty(DType::I32));
        let err = run1(&draw, &[Tensor::from_slice([1], &[2i32]).unwrap()]).unwrap_err();
        assert!(err.message.contains("bfloat16 draws"), "{err}");
    }

    /// A lent constant is widened once; another lent value (a loop's
    /// constant bound anew) is widened for itself.
    #[test]
    fn lent_constants_are_widened_once_and_only_for_their_own_bytes() {
        use crate::ops::{OpContext, ResourceMgr, Value};
        let kernel = crate::ops::testing::build(&node("Mul").attr("T", ty(DType::F16))).unwrap();
        let halves =
            |v: &[f32]| Tensor::from_slice([v.len()], &v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>());
        let (w1, w2) = (halves(&[2.0; 32]).unwrap(), halves(&[-3.0; 32]).unwrap());
        let resources = ResourceMgr::default();
        let run = |w: &Tensor| {
            let lent = [None, Some(Value::Tensor(w.clone()))];
            let mut inputs = [Some(Value::Tensor(halves(&[1.5; 32]).unwrap())), None];
            let mut outputs = [None];
            kernel.compute(&mut OpContext::with_lent(&mut inputs, &lent, &mut outputs, &resources)).unwrap();
            let out = outputs[0].take().unwrap().into_tensor().unwrap();
            out.as_slice::<f16>().unwrap()[0].to_f32()
        };
        assert_eq!([run(&w1), run(&w1), run(&w2), run(&w1)], [3.0, 3.0, -4.5, 3.0]);
    }

    #[test]
    fn byte_moving_ops_keep_narrow_tensors_as_they_are() {
        let h = Tensor::from_slice([2, 2], &[1i16, -2, 3, i16::MIN]).unwrap();
        let n = node("Reshape").attr("T", ty(DType::I16)).attr("Tshape", ty(DType::I32));
        let out = run1(&n, &[h.clone(), Tensor::from_slice([1], &[4i32]).unwrap()]).unwrap();
        assert!(out.shares_bytes_with(&h) || out.bit_eq(&h.reshaped([4]).unwrap()));
        assert_eq!(out.dims(), &[4]);
    }
}
