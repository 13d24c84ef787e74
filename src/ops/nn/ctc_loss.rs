//! `CTCLoss` (`tf.compat.v1.nn.ctc_loss`, and `tf.nn.ctc_loss` with sparse
//! labels): the negative log probability of each batch entry's label
//! sequence under a CTC model's per-frame logits (time major), and its
//! gradient to those logits, as TensorFlow's CPU kernel computes them.
//!
//! Owns: this kernel: the label checks and messages of TensorFlow's (a
//! label entry's `index >= num_classes - 1` is a null label ending the
//! sequence; the last class is blank), the extended sequence with blanks,
//! the forward-backward recursions in log space with TensorFlow's
//! transition rules (`ctc_merge_repeated`, `preprocess_collapse_repeated`),
//! its log-sum-exp (single-precision `exp`/`log1p`, as TensorFlow's), and
//! the gradient `softmax - exp(log(alpha * beta summed per class) - log p)`.
//! An entry with `ignore_longer_outputs_than_inputs` whose label is longer
//! than its frames, or with no frames, gets loss 0 and gradient 0; an entry
//! with no path at all gets loss +inf and the softmax as gradient, as in
//! TensorFlow. Must not hold state beyond parsed attributes.

use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::math::FLOAT;
use crate::ops::numeric::Float;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("CTCLoss", signature, build)];

/// `[T, int64, int32, int32] -> [T, T]`.
fn signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype_or("T", DType::F32)?);
    let inputs = vec![t, ValueType::Tensor(DType::I64), ValueType::Tensor(DType::I32), ValueType::Tensor(DType::I32)];
    Ok(OpSignature::new(inputs, vec![t, t]))
}

struct CtcLoss {
    collapse_repeated: bool,
    merge_repeated: bool,
    ignore_longer: bool,
    dtype: DType,
}

fn build(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype_or("T", DType::F32)?;
    if !FLOAT.contains(&dtype) {
        return Err(unsupported_dtype(&node.op, dtype, FLOAT));
    }
    Ok(Box::new(CtcLoss {
        collapse_repeated: node.attr_bool_or("preprocess_collapse_repeated", false)?,
        merge_repeated: node.attr_bool_or("ctc_merge_repeated", true)?,
        ignore_longer: node.attr_bool_or("ignore_longer_outputs_than_inputs", false)?,
        dtype,
    }))
}

impl OpKernel for CtcLoss {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        match self.dtype {
            DType::F32 => self.run::<f32>(ctx),
            _ => self.run::<f64>(ctx),
        }
    }
}

/// TensorFlow's `LogSumExp` for CTC: `-inf` is the log of zero; the
/// correction term is computed with single-precision `exp` and `log1p`
/// whatever `T` is.
fn log_sum_exp<T: Float>(a: T, b: T) -> T {
    let neg_inf = T::from_f64(f64::NEG_INFINITY);
    if a == neg_inf {
        return b;
    }
    if b == neg_inf {
        return a;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    let term = (lo.sub(hi).to_f64() as f32).exp().ln_1p();
    hi.add(T::from_f64(term as f64))
}

/// One batch entry's label sequences, checked and split by entry.
fn labels_by_entry(indices: &Tensor, values: &Tensor, batch: usize) -> Result<Vec<Vec<i32>>> {
    let idx = indices.as_slice::<i64>()?;
    let vals = values.as_slice::<i32>()?;
    let n = vals.len();
    let longest = (0..n).map(|i| idx[2 * i + 1] + 1).max().unwrap_or(0).max(0);
    let mut labels = vec![Vec::new(); batch];
    for i in 0..n {
        let (b, p) = (idx[2 * i], idx[2 * i + 1]);
        let bad = |what: &str| {
            crate::error::Status::invalid_argument(format!(
                "label SparseTensor is not valid: indices[{i}] = [{b},{p}] {what}"
            ))
        };
        if b < 0 || b >= batch as i64 || p < 0 || p >= longest {
            return Err(bad(&format!("is out of bounds: need 0 <= index < [{batch},{longest}]")));
        }
        if i > 0 {
            let prev = (idx[2 * i - 2], idx[2 * i - 1]);
            if (b, p) < prev {
                return Err(bad(
                    "is out of order. Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` to create a \
                     correctly ordered copy.\n\n",
                ));
            }
            if (b, p) == prev {
                return Err(bad("is repeated"));
            }
        }
        labels[b as usize].push(vals[i]);
    }
    Ok(labels)
}

fn joined(v: &[i32]) -> String {
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

impl CtcLoss {
    fn run<T: Float>(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let inputs = ctx.input(0)?;
        let (indices, values, lengths) = (ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
        if inputs.rank() != 3 {
            bail!(invalid_argument, "inputs is not a 3-Tensor");
        }
        if lengths.rank() != 1 {
            bail!(invalid_argument, "sequence_length is not a vector");
        }
        if indices.rank() != 2 {
            bail!(invalid_argument, "labels_indices is not a matrix");
        }
        if indices.dims()[1] != 2 {
            bail!(invalid_argument, "labels_indices second dimension must be >= 1. Received {}", indices.dims()[1]);
        }
        if values.rank() != 1 {
            bail!(invalid_argument, "labels_values is not a vector");
        }
        let (max_time, batch, classes) = (inputs.dims()[0], inputs.dims()[1], inputs.dims()[2]);
        if max_time == 0 {
            bail!(invalid_argument, "Max time or first dimension of input cannot be 0.");
        }
        if lengths.dims()[0] != batch {
            bail!(
                invalid_argument,
                "len(sequence_length) != batch_size.  len(sequence_length):  {} batch_size: {batch}",
                lengths.dims()[0]
            );
        }
        if indices.dims()[0] != values.dims()[0] {
            bail!(
                invalid_argument,
                "labels_indices and labels_values must contain the same number of rows, but saw shapes: {} vs. {}",
                indices.shape(),
                values.shape()
            );
        }
        if batch == 0 {
            bail!(invalid_argument, "batch_size must not be 0");
        }
        if classes == 0 {
            bail!(invalid_argument, "num_classes must be positive (the last class is blank), got 0");
        }
        let labels = labels_by_entry(indices, values, batch)?;
        let seq_lens = lengths.as_slice::<i32>()?;
        for (b, &len) in seq_lens.iter().enumerate() {
            if len as i64 > max_time as i64 {
                bail!(invalid_argument, "sequence_length({b}) <= {max_time}");
            }
            if len < 0 {
                bail!(invalid_argument, "seq_len({b}) < 0");
            }
        }
        let mut collapsed = Vec::with_capacity(batch);
        for (b, raw) in labels.iter().enumerate() {
            collapsed.push(self.label_sequence(b, raw, classes, seq_lens[b] as usize)?);
        }
        let x = inputs.as_slice::<T>()?;
        let mut loss = vec![T::ZERO; batch];
        let mut grad = vec![T::ZERO; x.len()];
        for b in 0..batch {
            let frames = seq_lens[b] as usize;
            if frames == 0 || (self.ignore_longer && labels[b].len() > frames) {
                continue;
            }
            let at = |t: usize| (t * batch + b) * classes;
            let rows: Vec<&[T]> = (0..frames).map(|t| &x[at(t)..at(t) + classes]).collect();
            let (l, g) = self.entry(&rows, &collapsed[b], classes);
            loss[b] = l;
            for (t, row) in g.chunks_exact(classes).enumerate() {
                grad[at(t)..at(t) + classes].copy_from_slice(row);
            }
        }
        let gradient = Tensor::from_slice::<T>(inputs.shape().clone(), &grad)?;
        ctx.set_output(0, Tensor::from_slice::<T>([batch], &loss)?);
        ctx.set_output(1, gradient);
        Ok(())
    }

    /// Entry `b`'s label without null labels (collapsed when asked), with
    /// TensorFlow's checks.
    fn label_sequence(&self, b: usize, raw: &[i32], classes: usize, frames: usize) -> Result<Vec<usize>> {
        if raw.is_empty() {
            bail!(invalid_argument, "Labels length is zero in batch {b}");
        }
        let null = classes as i64 - 1;
        let (mut finished, mut l) = (false, Vec::with_capacity(raw.len()));
        for (i, &v) in raw.iter().enumerate() {
            if i > 0 && self.collapse_repeated && v == raw[i - 1] {
                continue;
            }
            if v as i64 >= null {
                finished = true;
            } else if finished {
                bail!(
                    invalid_argument,
                    "Saw a non-null label (index >= num_classes - 1) following a null label, batch: {b} num_classes: \
                     {classes} labels: {} labels seen so far: {}",
                    joined(raw),
                    joined(&l)
                );
            } else {
                l.push(v);
            }
        }
        if l.iter().any(|&v| v < 0) {
            bail!(invalid_argument, "All labels must be nonnegative integers, batch: {b} labels: {}", joined(&l));
        }
        if !self.ignore_longer && raw.len() > frames {
            bail!(
                invalid_argument,
                "Not enough time for target transition sequence (required: {}, available: {frames}){b}You can turn \
                 this error into a warning by using the flag ignore_longer_outputs_than_inputs",
                raw.len()
            );
        }
        Ok(l.into_iter().map(|v| v as usize).collect())
    }

    /// One entry's loss and gradient rows (`rows`: its frames' logits).
    fn entry<T: Float>(&self, rows: &[&[T]], label: &[usize], classes: usize) -> (T, Vec<T>) {
        let neg_inf = T::from_f64(f64::NEG_INFINITY);
        let blank = classes - 1;
        let frames = rows.len();
        // The softmax of each frame: max subtracted, exponentiated, divided
        // by the sum.
        let mut y = Vec::with_capacity(frames * classes);
        for row in rows {
            let max = row.iter().copied().fold(row[0], |m, v| if v > m { v } else { m });
            let e: Vec<T> = row.iter().map(|&v| v.sub(max).exp()).collect();
            let sum = e.iter().fold(T::ZERO, |s, &v| s.add(v));
            y.extend(e.iter().map(|&v| v.div(sum)));
        }
        let log_y = |c: usize, t: usize| y[t * classes + c].ln();
        let mut ext = Vec::with_capacity(2 * label.len() + 1);
        for &c in label {
            ext.extend([blank, c]);
        }
        ext.push(blank);
        let states = ext.len();
        let stays = |u: usize| self.merge_repeated || ext[u] == blank;
        let skips = |u: usize, v: usize| ext[u] != blank && !(self.merge_repeated && ext[u] == ext[v]);
        // Only states from which the label can still be finished, and that
        // can be reached, are visited (the others stay log 0).
        let window = |t: usize| (states.saturating_sub(2 * (frames - t)), states.min(2 * (t + 1)));
        let mut alpha = vec![neg_inf; states * frames];
        alpha[0] = log_y(blank, 0);
        if states > 1 {
            alpha[frames] = log_y(ext[1], 0);
        }
        for t in 1..frames {
            let (lo, hi) = window(t);
            for u in lo..hi {
                let mut acc = if stays(u) { alpha[u * frames + t - 1] } else { neg_inf };
                if u > 0 {
                    acc = log_sum_exp(acc, alpha[(u - 1) * frames + t - 1]);
                }
                if u > 1 && skips(u, u - 2) {
                    acc = log_sum_exp(acc, alpha[(u - 2) * frames + t - 1]);
                }
                alpha[u * frames + t] = log_y(ext[u], t).add(acc);
            }
        }
        let mut beta = vec![neg_inf; states * frames];
        for u in states.saturating_sub(2)..states {
            beta[u * frames + frames - 1] = T::ZERO;
        }
        for t in (0..frames.saturating_sub(1)).rev() {
            let (lo, hi) = window(t);
            for u in lo..hi {
                let mut acc = neg_inf;
                if stays(u) {
                    acc = log_sum_exp(acc, beta[u * frames + t + 1].add(log_y(ext[u], t + 1)));
                }
                if u + 1 < states {
                    acc = log_sum_exp(acc, beta[(u + 1) * frames + t + 1].add(log_y(ext[u + 1], t + 1)));
                }
                if u + 2 < states && skips(u, u + 2) {
                    acc = log_sum_exp(acc, beta[(u + 2) * frames + t + 1].add(log_y(ext[u + 2], t + 1)));
                }
                beta[u * frames + t] = acc;
            }
        }
        let log_p = (0..states).fold(neg_inf, |acc, u| log_sum_exp(acc, alpha[u * frames].add(beta[u * frames])));
        if log_p == neg_inf {
            return (T::from_f64(f64::INFINITY), y);
        }
        let mut grad = y.clone();
        let mut per_class = vec![neg_inf; classes];
        for t in 0..frames {
            per_class.fill(neg_inf);
            for u in 0..states {
                let c = ext[u];
                per_class[c] = log_sum_exp(per_class[c], alpha[u * frames + t].add(beta[u * frames + t]));
            }
            for c in 0..classes {
                let taken = (per_class[c].sub(log_p).to_f64() as f32).exp();
                grad[t * classes + c] = y[t * classes + c].sub(T::from_f64(taken as f64));
            }
        }
        (log_p.neg(), grad)
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run_all};
    use crate::tensor::Tensor;

    /// TensorFlow's own `testBasic` case: 5 frames of 6 classes (blank 5)
    /// given as log probabilities; entry 0's label [0, 1, 2, 1, 0], entry
    /// 1's [0, 1, 1, 0] over 5 of its 7 frames (the last two NaN, unread).
    #[rustfmt::skip]
    const PROBS: [[[f32; 6]; 2]; 5] = [
        [[0.633766, 0.221185, 0.0917319, 0.0129757, 0.0142857, 0.0260553],
         [0.30176, 0.28562, 0.0831517, 0.0862751, 0.0816851, 0.161508]],
        [[0.111121, 0.588392, 0.278779, 0.0055756, 0.00569609, 0.010436],
         [0.24082, 0.397533, 0.0557226, 0.0546814, 0.0557528, 0.19549]],
        [[0.0357786, 0.633813, 0.321418, 0.00249248, 0.00272882, 0.0037688],
         [0.230246, 0.450868, 0.0389607, 0.038309, 0.0391602, 0.202456]],
        [[0.0663296, 0.643849, 0.280111, 0.00283995, 0.0035545, 0.00331533],
         [0.280884, 0.429522, 0.0326593, 0.0339046, 0.0326856, 0.190345]],
        [[0.458235, 0.396634, 0.123377, 0.00648837, 0.00903441, 0.00623107],
         [0.423286, 0.315517, 0.0338439, 0.0393744, 0.0339315, 0.154046]],
    ];

    fn inputs(frames: usize) -> Tensor {
        let mut v = Vec::new();
        for t in 0..frames {
            for b in 0..2 {
                v.extend(PROBS.get(t).map_or([f32::NAN; 6], |f| f[b].map(f32::ln)));
            }
        }
        Tensor::from_slice::<f32>([frames, 2, 6], &v).unwrap()
    }

    fn sparse(labels: &[&[i32]]) -> (Tensor, Tensor) {
        let (mut idx, mut vals) = (Vec::new(), Vec::new());
        for (b, l) in labels.iter().enumerate() {
            for (p, &v) in l.iter().enumerate() {
                idx.extend([b as i64, p as i64]);
                vals.push(v);
            }
        }
        (
            Tensor::from_slice::<i64>([vals.len(), 2], &idx).unwrap(),
            Tensor::from_slice::<i32>([vals.len()], &vals).unwrap(),
        )
    }

    fn ctc(
        inputs: Tensor,
        labels: &[&[i32]],
        lengths: &[i32],
        attrs: &[(&str, bool)],
    ) -> crate::error::Result<Vec<Tensor>> {
        let mut spec = node("CTCLoss");
        for &(k, v) in attrs {
            spec = spec.attr(k, AttrValue::Bool(v));
        }
        let (idx, vals) = sparse(labels);
        run_all(&spec, &[inputs, idx, vals, Tensor::from_slice::<i32>([lengths.len()], lengths).unwrap()])
    }

    #[test]
    fn tensorflows_basic_case() {
        let out = ctc(inputs(7), &[&[0, 1, 2, 1, 0], &[0, 1, 1, 0]], &[5, 5], &[]).unwrap();
        let loss = out[0].as_slice::<f32>().unwrap();
        assert!((loss[0] - 3.34211).abs() < 1e-5 && (loss[1] - 5.42262).abs() < 1e-5, "{loss:?}");
        let grad = out[1].as_slice::<f32>().unwrap();
        let want = [-0.366234, 0.221185, 0.0917319, 0.0129757, 0.0142857, 0.0260553];
        for (g, w) in grad[..6].iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{:?}", &grad[..6]);
        }
        // Past an entry's length the gradient is zero (the NaN frames unread).
        assert!(grad[5 * 12..].iter().all(|&g| g == 0.0));
        assert!(loss.iter().all(|l| l.is_finite()));
    }

    #[test]
    fn long_labels_empty_labels_and_impossible_paths() {
        let err = ctc(inputs(5), &[&[0, 1, 2, 1, 0, 1], &[0]], &[5, 5], &[]).unwrap_err();
        assert!(err.message.starts_with("Not enough time for target transition sequence (required: 6, available: 5)0"));
        let out = ctc(inputs(5), &[&[0, 1, 2, 1, 0, 1], &[0]], &[5, 5], &[("ignore_longer_outputs_than_inputs", true)])
            .unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap()[0], 0.0);
        assert!(out[1].as_slice::<f32>().unwrap().chunks(6).step_by(2).all(|r| r.iter().all(|&g| g == 0.0)));
        // [1, 1] in two frames needs a blank between: no path, loss +inf.
        let out = ctc(inputs(5), &[&[1, 1], &[0]], &[2, 5], &[]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap()[0], f32::INFINITY);
        let err = ctc(inputs(5), &[&[0, 5, 1], &[0]], &[5, 5], &[]).unwrap_err();
        assert!(err.message.contains("following a null label, batch: 0 num_classes: 6 labels: 0,5,1"), "{err}");
        let (idx, vals) = sparse(&[&[0], &[1]]);
        let spec = node("CTCLoss");
        let err =
            run_all(&spec, &[inputs(5), idx, vals, Tensor::from_slice::<i32>([2], &[5, 9]).unwrap()]).unwrap_err();
        assert_eq!(err.message, "sequence_length(1) <= 5");
    }
}
