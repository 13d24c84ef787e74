//! Softmax cross-entropy, the loss and its gradient in one op:
//! - `SoftmaxCrossEntropyWithLogits(features, labels)`: labels a
//!   distribution per row; the two broadcast against each other (as
//!   TensorFlow 2.x allows) to a `[batch, classes]` matrix;
//! - `SparseSoftmaxCrossEntropyWithLogits(features, labels)`: labels a
//!   class index per row (int32 or int64), each checked to lie in
//!   `[0, classes)`.
//!
//! Both output `loss` (`[batch]`) and `backprop` (`[batch, classes]`),
//! computed as TensorFlow's CPU functor does: per row, `shifted = logits -
//! max(logits)`, `sum_exp = sum(exp(shifted))`; `loss = sum(labels *
//! (log(sum_exp) - shifted))` and `backprop = exp(shifted) / sum_exp -
//! labels`. Row sums accumulate in `T::Acc` (f64 for float32).
//!
//! Owns: these kernels and their signatures. Must not hold state.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::broadcast::broadcast_shape;
use crate::ops::math::FLOAT;
use crate::ops::numeric::{Float, Num};
use crate::ops::registry::OpDef;
use crate::ops::{ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("SoftmaxCrossEntropyWithLogits", xent_signature, build_xent),
    OpDef::kernel("SparseSoftmaxCrossEntropyWithLogits", sparse_xent_signature, build_sparse_xent),
];

/// `[T, T] -> [T, T]`.
fn xent_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, t], vec![t, t]))
}

/// `[T, Tlabels] -> [T, T]`; `Tlabels` defaults to int64.
fn sparse_xent_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let labels = crate::ops::attr_index_type_or(node, "Tlabels", DType::I64)?;
    Ok(OpSignature::new(vec![t, ValueType::Tensor(labels)], vec![t, t]))
}

fn build_xent(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => xent::<f32>,
        DType::F64 => xent::<f64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

fn build_sparse_xent(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    crate::ops::attr_index_type_or(init.node, "Tlabels", DType::I64)?;
    let compute: ComputeFn = match dtype {
        DType::F32 => sparse_xent::<f32>,
        DType::F64 => sparse_xent::<f64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

/// How an operand of rank at most 2 is read as a `[batch, classes]`
/// matrix: element `(b, c)` is at `b * row + c * col`.
#[derive(Clone, Copy)]
struct MatrixStrides {
    row: usize,
    col: usize,
}

impl MatrixStrides {
    fn of(dims: &[usize]) -> MatrixStrides {
        let (rows, cols) = match *dims {
            [r, c] => (r, c),
            [c] => (1, c),
            _ => (1, 1),
        };
        MatrixStrides { row: if rows == 1 { 0 } else { cols }, col: if cols == 1 { 0 } else { 1 } }
    }
}

/// `log(sum_exp)` of a row and its maximum, accumulating in `T::Acc`.
fn row_stats<T: Float>(row: impl Iterator<Item = T> + Clone) -> (T, T) {
    let max = row.clone().fold(T::BOTTOM, |m, x| if x > m { x } else { m });
    let sum = row.fold(<T::Acc as Num>::ZERO, |s, x| s.add(x.sub(max).exp().widen()));
    (max, T::narrow(sum))
}

fn xent<T: Float>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (logits, labels) = (ctx.input(0)?, ctx.input(1)?);
    let shape = if logits.shape() == labels.shape() {
        logits.shape().clone()
    } else {
        broadcast_shape(logits.dims(), labels.dims()).map_err(|_| {
            Status::invalid_argument(format!(
                "logits and labels must be broadcastable: logits_size={} labels_size={}",
                logits.shape(),
                labels.shape()
            ))
        })?
    };
    let [batch, classes] = *shape.dims() else {
        bail!(invalid_argument, "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional");
    };
    let (ls, ys) = (MatrixStrides::of(logits.dims()), MatrixStrides::of(labels.dims()));
    let (logit_values, label_values) = (logits.as_slice::<T>()?, labels.as_slice::<T>()?);
    let mut loss = vec![T::ZERO; batch];
    let backprop = Tensor::build::<T>([batch, classes], |backprop| {
        if classes == 0 {
            return;
        }
        for (b, (out, loss)) in backprop.chunks_exact_mut(classes).zip(&mut loss).enumerate() {
            let logit = |c: usize| logit_values[b * ls.row + c * ls.col];
            let label = |c: usize| label_values[b * ys.row + c * ys.col];
            let (max, sum_exp) = row_stats((0..classes).map(logit));
            let log_sum = sum_exp.ln();
            let mut row_loss = <T::Acc as Num>::ZERO;
            for (c, o) in out.iter_mut().enumerate() {
                let shifted = logit(c).sub(max);
                row_loss = row_loss.add(label(c).mul(log_sum.sub(shifted)).widen());
                *o = shifted.exp().div(sum_exp).sub(label(c));
            }
            *loss = T::narrow(row_loss);
        }
    })?;
    ctx.set_output(0, Tensor::from_slice::<T>([batch], &loss)?);
    ctx.set_output(1, backprop);
    Ok(())
}

fn sparse_xent<T: Float>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (logits, labels) = (ctx.input(0)?, ctx.input(1)?);
    let [batch, classes] = *logits.dims() else {
        bail!(invalid_argument, "logits must be 2-D, but got shape {}", logits.shape());
    };
    if labels.rank() != 1 {
        bail!(invalid_argument, "labels must be 1-D, but got shape {}", labels.shape());
    }
    if labels.dims()[0] != batch {
        bail!(
            invalid_argument,
            "logits and labels must have the same first dimension, got logits shape {} and labels shape {}",
            logits.shape(),
            labels.shape()
        );
    }
    if classes == 0 {
        bail!(invalid_argument, "Must have at least one class, but got logits shape {}", logits.shape());
    }
    let label_values = crate::ops::index_values(labels, "labels")?;
    // TensorFlow reports the smallest label if it is negative, else the
    // largest, and lists them all.
    if let (Some(&min), Some(&max)) = (label_values.iter().min(), label_values.iter().max()) {
        if min < 0 || max >= classes as i64 {
            let bad = if min < 0 { min } else { max };
            let all: Vec<String> = label_values.iter().map(i64::to_string).collect();
            bail!(
                invalid_argument,
                "Received a label value of {bad} which is outside the valid range of [0, {classes}).  Label values: {}",
                all.join(" ")
            );
        }
    }
    let logit_values = logits.as_slice::<T>()?;
    let mut loss = vec![T::ZERO; batch];
    let backprop = Tensor::build::<T>([batch, classes], |backprop| {
        let rows = backprop.chunks_exact_mut(classes).zip(logit_values.chunks_exact(classes));
        for ((out, row), (loss, &label)) in rows.zip(loss.iter_mut().zip(label_values.iter())) {
            let (max, sum_exp) = row_stats(row.iter().copied());
            // Checked above: 0 <= label < classes.
            let label = label as usize;
            *loss = sum_exp.ln().sub(row[label].sub(max));
            for (c, (o, &x)) in out.iter_mut().zip(row).enumerate() {
                let p = x.sub(max).exp().div(sum_exp);
                *o = if c == label { p.sub(T::ONE) } else { p };
            }
        }
    })?;
    ctx.set_output(0, Tensor::from_slice::<T>([batch], &loss)?);
    ctx.set_output(1, backprop);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    const LOGITS: [f32; 12] = [0.5, -1.25, 2.0, 0.0, 3.0, 3.0, -2.0, 1.5, -100., 50., 0.25, 49.];
    const LABELS: [f32; 12] = [0.1, 0.2, 0.3, 0.4, 0.0, 1.0, 0.0, 0.0, 0.25, 0.25, 0.25, 0.25];

    fn run2(n: &NodeSpec, inputs: &[Tensor]) -> Result<(Tensor, Tensor)> {
        let values = inputs.iter().cloned().map(Value::Tensor).collect();
        let mut out = run_kernel_once(n, values, &ResourceMgr::default())?.into_iter();
        let loss = out.next().unwrap().into_tensor()?;
        Ok((loss, out.next().unwrap().into_tensor()?))
    }

    fn close(got: &Tensor, want: &[f64], tol: f64) {
        let got = got.to_f64_vec();
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= tol * (1.0 + b.abs()), "element {i}: got {a}, want {b}");
        }
    }

    fn xent(t: DType) -> NodeSpec {
        node("SoftmaxCrossEntropyWithLogits").attr("T", ty(t))
    }

    fn sparse(t: DType, labels: DType) -> NodeSpec {
        node("SparseSoftmaxCrossEntropyWithLogits").attr("T", ty(t)).attr("Tlabels", ty(labels))
    }

    // Expected values: TensorFlow 2.21, tf.raw_ops on CPU.
    #[test]
    fn dense_loss_and_backprop_match_tf() {
        let logits = Tensor::from_slice::<f32>([3, 4], &LOGITS).unwrap();
        let labels = Tensor::from_slice::<f32>([3, 4], &LABELS).unwrap();
        let (loss, backprop) = run2(&xent(DType::F32), &[logits.clone(), labels.clone()]).unwrap();
        assert_eq!((loss.dims(), backprop.dims()), (&[3][..], &[3, 4][..]));
        close(&loss, &[1.9344985485076904, 0.8019424676895142, 50.500762939453125], 2e-7);
        #[rustfmt::skip]
        let want = [
            0.05969355255365372, -0.1722494214773178, 0.41569679975509644, -0.3031409680843353,
            0.4484570026397705, -0.5515429973602295, 0.003021679585799575, 0.10006428509950638,
            -0.25, 0.48105859756469727, -0.25, 0.018941432237625122,
        ];
        close(&backprop, &want, 2e-7);
        // float64.
        let as64 =
            |t: &Tensor| Tensor::from_map(t.shape().clone(), t.as_slice::<f32>().unwrap(), |v| v as f64).unwrap();
        let (loss, backprop) = run2(&xent(DType::F64), &[as64(&logits), as64(&labels)]).unwrap();
        close(&loss, &[1.9344986439221474, 0.8019424389460073, 50.50076168751823], 1e-14);
        assert!((backprop.as_slice::<f64>().unwrap()[11] - 0.018941421369995104).abs() < 1e-14);
    }

    #[test]
    fn dense_labels_broadcast_like_tf() {
        let logits = Tensor::from_slice::<f32>([3, 4], &LOGITS).unwrap();
        // One label per row, broadcast over the classes.
        let column = Tensor::from_slice::<f32>([3, 1], &[1.0, 0.0, 0.5]).unwrap();
        let (loss, backprop) = run2(&xent(DType::F32), &[logits, column]).unwrap();
        close(&loss, &[8.087994575500488, 0.0, 101.00152587890625], 2e-7);
        #[rustfmt::skip]
        let want = [
            -0.8403064608573914, -0.972249448299408, -0.2843031883239746, -0.9031409621238708,
            0.4484570026397705, 0.4484570026397705, 0.003021679585799575, 0.10006428509950638,
            -0.5, 0.23105859756469727, -0.5, -0.23105856776237488,
        ];
        close(&backprop, &want, 2e-7);
        // One row of labels for every row of logits.
        let logits = Tensor::from_slice::<f32>([2, 3], &[1., 2., 3., 1., 1., 1.]).unwrap();
        let row = Tensor::from_slice::<f32>([1, 3], &[0., 0., 1.]).unwrap();
        let (loss, backprop) = run2(&xent(DType::F32), &[logits.clone(), row]).unwrap();
        close(&loss, &[0.40760594606399536, 1.0986123085021973], 2e-7);
        let want =
            [0.09003057330846786, 0.2447284758090973, -0.33475905656814575, 1. / 3., 1. / 3., -0.6666666269302368];
        close(&backprop, &want, 2e-7);
        // A vector of labels broadcasts too.
        let ones = Tensor::from_slice::<f32>([2, 3], &[1.; 6]).unwrap();
        let (loss, backprop) =
            run2(&xent(DType::F32), &[ones, Tensor::from_slice::<f32>([3], &[1.; 3]).unwrap()]).unwrap();
        close(&loss, &[3.295836925506592, 3.295836925506592], 2e-7);
        close(&backprop, &[-0.6666666269302368; 6], 2e-7);
        let err = run2(&xent(DType::F32), &[logits.clone(), Tensor::zeros(DType::F32, [4, 3]).unwrap()]).unwrap_err();
        assert_eq!(err.message, "logits and labels must be broadcastable: logits_size=[2,3] labels_size=[4,3]");
        let cube = Tensor::zeros(DType::F32, [2, 3, 1]).unwrap();
        let err = run2(&xent(DType::F32), &[cube.clone(), cube]).unwrap_err();
        assert_eq!(err.message, "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional");
        // No classes: zero loss, empty backprop.
        let none = Tensor::zeros(DType::F32, [2, 0]).unwrap();
        let (loss, backprop) = run2(&xent(DType::F32), &[none.clone(), none]).unwrap();
        close(&loss, &[0.0, 0.0], 0.0);
        assert_eq!(backprop.dims(), &[2, 0]);
    }

    #[test]
    fn sparse_loss_and_backprop_match_tf() {
        let logits = Tensor::from_slice::<f32>([3, 4], &LOGITS).unwrap();
        let labels = Tensor::from_slice::<i32>([3], &[2, 0, 3]).unwrap();
        let (loss, backprop) = run2(&sparse(DType::F32, DType::I32), &[logits.clone(), labels]).unwrap();
        close(&loss, &[0.33449864387512207, 0.8019424676895142, 1.31326162815094], 2e-7);
        #[rustfmt::skip]
        let want = [
            0.15969355404376984, 0.02775057591497898, -0.2843031883239746, 0.09685903042554855,
            -0.5515429973602295, 0.4484570026397705, 0.003021679585799575, 0.10006428509950638,
            0.0, 0.7310585975646973, 1.810513275177551e-22, -0.7310585975646973,
        ];
        close(&backprop, &want, 2e-7);
        let logits64 = Tensor::from_map([3, 4], &LOGITS, |v| v as f64).unwrap();
        let labels = Tensor::from_slice::<i64>([3], &[1, 1, 1]).unwrap();
        let (loss, backprop) = run2(&sparse(DType::F64, DType::I64), &[logits64, labels]).unwrap();
        close(&loss, &[3.584498612603663, 0.8019424389460073, 0.31326168751822286], 1e-14);
        assert!((backprop.as_slice::<f64>().unwrap()[8] - 5.245415463675446e-66).abs() < 1e-78);
        // Tlabels defaults to int64.
        let default = node("SparseSoftmaxCrossEntropyWithLogits").attr("T", ty(DType::F32));
        let empty = (Tensor::zeros(DType::F32, [0, 3]).unwrap(), Tensor::zeros(DType::I64, [0]).unwrap());
        let (loss, backprop) = run2(&default, &[empty.0, empty.1]).unwrap();
        assert_eq!((loss.dims(), backprop.dims()), (&[0][..], &[0, 3][..]));
    }

    #[test]
    fn sparse_labels_are_checked_like_tf() {
        let logits = Tensor::zeros(DType::F32, [3, 5]).unwrap();
        let n = sparse(DType::F32, DType::I64);
        let labels = |v: &[i64]| Tensor::from_slice::<i64>([v.len()], v).unwrap();
        let err = run2(&n, &[logits.clone(), labels(&[1, 7, 2])]).unwrap_err();
        assert_eq!(
            err.message,
            "Received a label value of 7 which is outside the valid range of [0, 5).  Label values: 1 7 2"
        );
        let err = run2(&n, &[logits.clone(), labels(&[1, 7, -2])]).unwrap_err();
        assert!(err.message.starts_with("Received a label value of -2 which"), "{err}");
        let err = run2(&n, &[Tensor::zeros(DType::F32, [5]).unwrap(), labels(&[1])]).unwrap_err();
        assert_eq!(err.message, "logits must be 2-D, but got shape [5]");
        let two_d = Tensor::from_slice::<i64>([1, 3], &[1, 1, 1]).unwrap();
        let err = run2(&n, &[logits.clone(), two_d]).unwrap_err();
        assert_eq!(err.message, "labels must be 1-D, but got shape [1,3]");
        let err = run2(&n, &[logits, labels(&[1, 1])]).unwrap_err();
        assert_eq!(
            err.message,
            "logits and labels must have the same first dimension, got logits shape [3,5] and labels shape [2]"
        );
        let err = run2(&n, &[Tensor::zeros(DType::F32, [2, 0]).unwrap(), labels(&[0, 0])]).unwrap_err();
        assert_eq!(err.message, "Must have at least one class, but got logits shape [2,0]");
    }
}
