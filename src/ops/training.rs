//! Training kernels: the ops `tf.gradients` and the tf.compat.v1 optimizers
//! emit for dense and embedding models, one file each under `training/`:
//! - [`grad`]: elementwise activation gradients (ReluGrad, SigmoidGrad, ...),
//!   BiasAddGrad and L2Loss;
//! - [`xent`]: SoftmaxCrossEntropyWithLogits and
//!   SparseSoftmaxCrossEntropyWithLogits;
//! - [`plumbing`]: the shape and index ops gradient graphs are wired with:
//!   BroadcastGradientArgs, ShapeN, ConcatOffset, InvertPermutation,
//!   DynamicStitch, ParallelDynamicStitch, PreventGradient, Snapshot;
//! - [`segment`]: UnsortedSegmentSum/Max/Min/Prod, and Unique (which the
//!   sparse optimizers use to merge duplicate indices);
//! - [`optimizer`]: the dense updates, ref (`Apply*`) and resource
//!   (`ResourceApply*`) forms;
//! - [`proximal`]: the L1/L2-regularized optimizers (FTRL, proximal
//!   gradient descent and Adagrad, AdagradDA), dense and row forms;
//! - [`sparse`]: the row updates embeddings use: `SparseApply*`,
//!   `ResourceSparseApply*`, `Scatter*` and `ResourceScatter*`;
//! - [`vars`]: how the update ops find their variables and lock them.
//!
//! Owns: these kernels and their signatures, and [`flat_position`] for
//! their messages. Must not touch the
//! convolution and pooling gradients (they belong with `nn`), nor create or
//! assign variables (`variable`): the update ops only rewrite the values of
//! variables that exist, in place, under their locks. Kernels hold nothing
//! between steps but parsed attributes; variables are looked up on every
//! run, as `variable` requires.

pub mod grad;
pub mod optimizer;
pub mod plumbing;
pub mod proximal;
pub mod segment;
pub mod sparse;
pub mod vars;
pub mod xent;

use crate::tensor::Shape;

/// TensorFlow's `SliceDebugString`: where flat element `flat` of a tensor
/// of `shape` sits, as `[1,2]` (empty for a scalar), for messages such as
/// `indices[0,1] = 3 is not in [0, 2)`.
pub fn flat_position(shape: &Shape, flat: usize) -> String {
    if shape.rank() == 0 {
        return String::new();
    }
    let mut rest = flat;
    let mut coords = vec![0; shape.rank()];
    for (c, &d) in coords.iter_mut().zip(shape.dims()).rev() {
        *c = rest % d.max(1);
        rest /= d.max(1);
    }
    let coords: Vec<String> = coords.iter().map(usize::to_string).collect();
    format!("[{}]", coords.join(","))
}
