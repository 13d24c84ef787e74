//! The `TensorList*` kernels: making lists (Reserve, EmptyTensorList,
//! FromTensor), reading them (GetItem, Stack, Gather, Length,
//! ElementShape), and the new lists that writing gives (SetItem, PushBack,
//! PopBack, Resize).
//!
//! Owns: these ops' signatures and kernels, with TensorFlow's checks and
//! messages. Must not keep state between runs: a list is a value on an
//! edge. A writing kernel takes its input list and changes it in place when
//! it holds the only reference (copy on write otherwise).

use super::{TensorList, fully_defined, merge_shapes, shape_from_tensor, shapes_compatible};
use crate::error::{Result, Status};
use crate::graph::spec::{NodeSpec, ShapeSpec};
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, Value, ValueType, attr_index_type_or};
use crate::tensor::{DType, Shape, Tensor};
use std::sync::Arc;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("TensorListReserve", reserve_signature, build::<Reserve>),
    OpDef::kernel("EmptyTensorList", reserve_signature, build::<Empty>),
    OpDef::kernel("TensorListFromTensor", from_tensor_signature, build::<FromTensor>),
    OpDef::kernel("TensorListGetItem", get_item_signature, build::<GetItem>),
    OpDef::kernel("TensorListSetItem", set_item_signature, build::<SetItem>),
    OpDef::kernel("TensorListStack", stack_signature, build::<Stack>),
    OpDef::kernel("TensorListGather", gather_signature, build::<Gather>),
    OpDef::kernel("TensorListLength", length_signature, build::<Length>),
    OpDef::kernel("TensorListElementShape", element_shape_signature, build::<ElementShapeOf>),
    OpDef::kernel("TensorListPushBack", push_back_signature, build::<PushBack>),
    OpDef::kernel("TensorListPopBack", pop_back_signature, build::<PopBack>),
    OpDef::kernel("TensorListResize", resize_signature, build::<Resize>),
];

const LIST: ValueType = ValueType::Variant;
const I32: ValueType = ValueType::Tensor(DType::I32);

fn element_dtype(node: &NodeSpec) -> Result<DType> {
    node.attr_dtype("element_dtype")
}

fn shape_type(node: &NodeSpec) -> Result<DType> {
    attr_index_type_or(node, "shape_type", DType::I32)
}

fn reserve_signature(node: &NodeSpec) -> Result<OpSignature> {
    element_dtype(node)?;
    Ok(OpSignature::new(vec![ValueType::Tensor(shape_type(node)?), I32], vec![LIST]))
}

fn from_tensor_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(element_dtype(node)?);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(shape_type(node)?)], vec![LIST]))
}

fn get_item_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![LIST, I32, I32], vec![ValueType::Tensor(element_dtype(node)?)]))
}

fn set_item_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![LIST, I32, ValueType::Tensor(element_dtype(node)?)], vec![LIST]))
}

fn stack_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![LIST, I32], vec![ValueType::Tensor(element_dtype(node)?)]))
}

fn gather_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![LIST, I32, I32], vec![ValueType::Tensor(element_dtype(node)?)]))
}

fn length_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![LIST], vec![I32]))
}

fn element_shape_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![LIST], vec![ValueType::Tensor(shape_type(node)?)]))
}

fn push_back_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![LIST, ValueType::Tensor(element_dtype(node)?)], vec![LIST]))
}

fn pop_back_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![LIST, I32], vec![LIST, ValueType::Tensor(element_dtype(node)?)]))
}

fn resize_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![LIST, I32], vec![LIST]))
}

/// A list kernel built from its node's attributes.
trait ListKernel: Sized + Send + Sync + 'static {
    fn new(node: &NodeSpec) -> Result<Self>;
    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()>;
}

struct Kernel<K>(K);

impl<K: ListKernel> OpKernel for Kernel<K> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        self.0.run(ctx)
    }
}

fn build<K: ListKernel>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Kernel(K::new(init.node)?)))
}

/// A scalar int32 operand (an index, a count).
fn scalar_i32(t: &Tensor, what: &str) -> Result<i64> {
    if t.dtype() != DType::I32 || t.rank() != 0 {
        return Err(Status::invalid_argument(format!(
            "{what} must be an int32 scalar, got {} of shape {}",
            t.dtype(),
            t.shape()
        )));
    }
    Ok(i64::from(t.scalar_value::<i32>()?))
}

/// A count operand: a non-negative int32 scalar.
fn count(t: &Tensor, what: &str) -> Result<usize> {
    let n = scalar_i32(t, what)?;
    usize::try_from(n)
        .map_err(|_| Status::invalid_argument(format!("The {what} must be a non negative number, but got {n}")))
}

/// The list of input 0, ready to change: the input itself when nothing
/// else holds it, a copy of its element table otherwise (the elements'
/// bytes are shared either way).
fn take_list_for_update(ctx: &mut OpContext<'_>) -> Result<Arc<TensorList>> {
    ctx.take_input_list(0)
}

fn output_list(ctx: &mut OpContext<'_>, index: usize, list: Arc<TensorList>) {
    ctx.set_output_value(index, Value::List(list));
}

/// Byte width of one element of a fixed-size `dtype` (not strings).
fn element_bytes(dtype: DType) -> Result<usize> {
    debug_assert_ne!(dtype, DType::String, "string elements are not fixed-size");
    let one = Tensor::zeros(dtype, [1])?;
    Ok(one.byte_len())
}

/// Stacks `picked` (list positions) into one tensor of shape
/// `[picked.len()] + element shape`; unset elements stack as zeros.
fn stack_elements(list: &TensorList, picked: &[usize], requested: &ShapeSpec) -> Result<Tensor> {
    let dtype = list.element_dtype();
    let mut shape = merge_shapes(list.element_shape(), requested)?;
    // The set elements among those picked fix what the partial shape leaves open.
    for &i in picked {
        if let Some(t) = list.get(i) {
            shape = merge_shapes(&shape, &ShapeSpec::known(t.dims())).map_err(|_| {
                Status::invalid_argument(format!(
                    "Incompatible shapes in list: element {i} has shape {} but the list's elements are {shape}",
                    t.shape()
                ))
            })?;
        }
    }
    let element_shape = fully_defined(&shape).ok_or_else(|| {
        if picked.is_empty() {
            Status::invalid_argument(format!(
                "Tried to stack elements of an empty list with non-fully-defined element_shape: {shape}"
            ))
        } else {
            Status::invalid_argument(format!(
                "Tried to stack list which only contains uninitialized tensors and has a non-fully-defined \
                 element_shape: {shape}"
            ))
        }
    })?;
    let mut dims = vec![picked.len()];
    dims.extend_from_slice(element_shape.dims());
    if dtype == DType::String {
        // tf.map_fn over strings (image bytes, text) stacks its results so;
        // unset elements are empty strings.
        let per = element_shape.num_elements();
        let mut strings: Vec<&[u8]> = Vec::with_capacity(per * picked.len());
        for &i in picked {
            match list.get(i) {
                Some(t) => strings.extend(t.strings()?.iter()),
                None => strings.extend(std::iter::repeat_n(&b""[..], per)),
            }
        }
        return Tensor::from_strings(Shape::from_vec(dims), &strings);
    }
    let row = element_shape.num_elements() * element_bytes(dtype)?;
    let mut bytes = vec![0u8; row * picked.len()];
    for (slot, &i) in bytes.chunks_exact_mut(row.max(1)).zip(picked) {
        if let Some(t) = list.get(i) {
            slot.copy_from_slice(t.as_bytes());
        }
    }
    Tensor::from_bytes(dtype, Shape::from_vec(dims), &bytes)
}

/// An element that reads as zeros: an unset slot, shaped by the list and
/// the op's `element_shape`.
fn unset_element(list: &TensorList, requested: &ShapeSpec) -> Result<Tensor> {
    Tensor::zeros(list.element_dtype(), list.resolved_element_shape(requested)?)
}

fn check_item_shape(list: &TensorList, item: &Tensor, verb: &str) -> Result<()> {
    if !shapes_compatible(list.element_shape(), &ShapeSpec::known(item.dims())) {
        return Err(Status::invalid_argument(format!(
            "Tried to {verb} a tensor with incompatible shape. Item element shape: {} list shape: {}",
            item.shape(),
            list.element_shape()
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------

/// `TensorListReserve(element_shape, num_elements)`: `num_elements` unset slots.
struct Reserve {
    dtype: DType,
}

impl ListKernel for Reserve {
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(Reserve { dtype: element_dtype(node)? })
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = shape_from_tensor(ctx.input(0)?, "element_shape")?;
        let len = count(ctx.input(1)?, "num_elements to reserve")?;
        output_list(ctx, 0, Arc::new(TensorList::reserved(self.dtype, shape, len)));
        Ok(())
    }
}

/// `EmptyTensorList(element_shape, max_num_elements)`.
struct Empty {
    dtype: DType,
}

impl ListKernel for Empty {
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(Empty { dtype: element_dtype(node)? })
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = shape_from_tensor(ctx.input(0)?, "element_shape")?;
        let max = scalar_i32(ctx.input(1)?, "max_num_elements")?;
        let max = match max {
            -1 => None,
            n => Some(usize::try_from(n).map_err(|_| {
                Status::invalid_argument(format!("max_num_elements must be non-negative or -1, got {n}"))
            })?),
        };
        output_list(ctx, 0, Arc::new(TensorList::empty(self.dtype, shape, max)));
        Ok(())
    }
}

/// `TensorListFromTensor(tensor, element_shape)`: the rows of `tensor` along
/// its first axis.
struct FromTensor;

impl ListKernel for FromTensor {
    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(FromTensor)
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let tensor = ctx.input(0)?;
        let shape = shape_from_tensor(ctx.input(1)?, "element_shape")?;
        if tensor.rank() == 0 {
            return Err(Status::invalid_argument(format!(
                "Tensor must be at least a vector, but saw shape: {}",
                tensor.shape()
            )));
        }
        let row_shape = Shape::new(&tensor.dims()[1..]);
        if !shapes_compatible(&shape, &ShapeSpec::known(row_shape.dims())) {
            return Err(Status::invalid_argument(format!(
                "Specified a list with shape {shape} from a tensor with shape {}",
                tensor.shape()
            )));
        }
        let dtype = tensor.dtype();
        let rows = tensor.dims()[0];
        if dtype == DType::String {
            // tf.map_fn over a batch of strings unstacks it so.
            let strings = tensor.strings()?;
            let per = row_shape.num_elements();
            let elements = (0..rows)
                .map(|i| {
                    let row: Vec<&[u8]> =
                        (i * per..(i + 1) * per).map(|j| strings.get(j).unwrap_or_default()).collect();
                    Tensor::from_strings(row_shape.clone(), &row)
                })
                .collect::<Result<Vec<_>>>()?;
            output_list(ctx, 0, Arc::new(TensorList::from_elements(dtype, shape, elements)));
            return Ok(());
        }
        let row_bytes = tensor.byte_len().checked_div(rows).unwrap_or(0);
        let bytes = tensor.as_bytes();
        let elements = (0..rows)
            .map(|i| Tensor::from_bytes(dtype, row_shape.clone(), &bytes[i * row_bytes..(i + 1) * row_bytes]))
            .collect::<Result<Vec<_>>>()?;
        output_list(ctx, 0, Arc::new(TensorList::from_elements(dtype, shape, elements)));
        Ok(())
    }
}

/// `TensorListGetItem(list, index, element_shape)`.
struct GetItem {
    dtype: DType,
}

impl ListKernel for GetItem {
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(GetItem { dtype: element_dtype(node)? })
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let list = ctx.input_list(0)?;
        list.check_dtype(self.dtype)?;
        let index = scalar_i32(ctx.input(1)?, "index")?;
        let requested = shape_from_tensor(ctx.input(2)?, "element_shape")?;
        let slot = usize::try_from(index).ok().filter(|&i| i < list.len()).ok_or_else(|| {
            Status::invalid_argument(format!(
                "Trying to access element {index} in a list with {} elements.",
                list.len()
            ))
        })?;
        let item = match list.get(slot) {
            Some(t) => t.clone(),
            None => unset_element(list, &requested)?,
        };
        ctx.set_output(0, item);
        Ok(())
    }
}

/// `TensorListSetItem(list, index, item)`: the list with element `index`
/// replaced (grown first when `resize_if_index_out_of_bounds`).
struct SetItem {
    dtype: DType,
    resize: bool,
}

impl ListKernel for SetItem {
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(SetItem { dtype: element_dtype(node)?, resize: node.attr_bool_or("resize_if_index_out_of_bounds", false)? })
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let index = scalar_i32(ctx.input(1)?, "index")?;
        let item = ctx.take_input(2)?;
        let mut list = take_list_for_update(ctx)?;
        list.check_dtype(self.dtype)?;
        check_item_shape(&list, &item, "set")?;
        let len = list.len();
        let slot = match usize::try_from(index) {
            Ok(i) if i < len || self.resize => i,
            _ => {
                return Err(Status::invalid_argument(format!(
                    "Trying to modify element {index} in a list with {len} elements."
                )));
            }
        };
        let elements = Arc::make_mut(&mut list).elements_mut();
        if slot >= elements.len() {
            elements.resize(slot + 1, None);
        }
        elements[slot] = Some(item);
        output_list(ctx, 0, list);
        Ok(())
    }
}

/// `TensorListStack(list, element_shape)`: every element stacked along a
/// new first axis.
struct Stack {
    dtype: DType,
    num_elements: i64,
}

impl ListKernel for Stack {
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(Stack { dtype: element_dtype(node)?, num_elements: node.attr_int_or("num_elements", -1)? })
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let list = ctx.input_list(0)?;
        list.check_dtype(self.dtype)?;
        let requested = shape_from_tensor(ctx.input(1)?, "element_shape")?;
        if self.num_elements != -1 && usize::try_from(self.num_elements).ok() != Some(list.len()) {
            return Err(Status::invalid_argument(format!(
                "Operation expected a list with {} elements but got a list with {} elements.",
                self.num_elements,
                list.len()
            )));
        }
        let all: Vec<usize> = (0..list.len()).collect();
        let stacked = stack_elements(list, &all, &requested)?;
        ctx.set_output(0, stacked);
        Ok(())
    }
}

/// `TensorListGather(list, indices, element_shape)`: the elements at
/// `indices` (a vector) stacked.
struct Gather {
    dtype: DType,
}

impl ListKernel for Gather {
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(Gather { dtype: element_dtype(node)? })
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let list = ctx.input_list(0)?;
        list.check_dtype(self.dtype)?;
        let indices = ctx.input(1)?;
        if indices.dtype() != DType::I32 || indices.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "indices must be an int32 vector, got {} of shape {}",
                indices.dtype(),
                indices.shape()
            )));
        }
        let picked = indices
            .as_slice::<i32>()?
            .iter()
            .map(|&i| {
                usize::try_from(i).ok().filter(|&i| i < list.len()).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "Trying to gather element {i} in a list with {} elements.",
                        list.len()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let requested = shape_from_tensor(ctx.input(2)?, "element_shape")?;
        let gathered = stack_elements(list, &picked, &requested)?;
        ctx.set_output(0, gathered);
        Ok(())
    }
}

/// `TensorListLength(list)`: its number of elements, as int32.
struct Length;

impl ListKernel for Length {
    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(Length)
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let len = ctx.input_list(0)?.len();
        let len = i32::try_from(len)
            .map_err(|_| Status::invalid_argument(format!("list of {len} elements is too long for int32")))?;
        ctx.set_output(0, Tensor::scalar(len));
        Ok(())
    }
}

/// `TensorListElementShape(list)`: the list's partial element shape (the
/// scalar -1 when its rank is unknown).
struct ElementShapeOf {
    shape_type: DType,
}

impl ListKernel for ElementShapeOf {
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(ElementShapeOf { shape_type: shape_type(node)? })
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = ctx.input_list(0)?.element_shape().clone();
        let out = match (&shape.dims, self.shape_type) {
            (None, DType::I64) => Tensor::scalar(-1i64),
            (None, _) => Tensor::scalar(-1i32),
            (Some(dims), DType::I64) => Tensor::from_slice::<i64>([dims.len()], dims)?,
            (Some(dims), _) => {
                let dims32: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
                Tensor::from_slice::<i32>([dims32.len()], &dims32)?
            }
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

/// `TensorListPushBack(list, tensor)`: the list with `tensor` appended.
struct PushBack {
    dtype: DType,
}

impl ListKernel for PushBack {
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(PushBack { dtype: element_dtype(node)? })
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let item = ctx.take_input(1)?;
        let mut list = take_list_for_update(ctx)?;
        if item.dtype() != list.element_dtype() || self.dtype != list.element_dtype() {
            return Err(Status::invalid_argument(format!(
                "Invalid data types; list elements {} but tried to append {}",
                list.element_dtype(),
                item.dtype()
            )));
        }
        check_item_shape(&list, &item, "append")?;
        if let Some(max) = list.max_num_elements() {
            if list.len() >= max {
                return Err(Status::invalid_argument(format!(
                    "Tried to push item into a full list list size: {} max_num_elements: {max}",
                    list.len()
                )));
            }
        }
        Arc::make_mut(&mut list).elements_mut().push(Some(item));
        output_list(ctx, 0, list);
        Ok(())
    }
}

/// `TensorListPopBack(list, element_shape)`: the list without its last
/// element, and that element.
struct PopBack {
    dtype: DType,
}

impl ListKernel for PopBack {
    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(PopBack { dtype: element_dtype(node)? })
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let requested = shape_from_tensor(ctx.input(1)?, "element_shape")?;
        let mut list = take_list_for_update(ctx)?;
        list.check_dtype(self.dtype)?;
        if list.is_empty() {
            return Err(Status::invalid_argument("Trying to pop from an empty list."));
        }
        let last = Arc::make_mut(&mut list).elements_mut().pop().flatten();
        let item = match last {
            Some(t) => t,
            None => unset_element(&list, &requested)?,
        };
        output_list(ctx, 0, list);
        ctx.set_output(1, item);
        Ok(())
    }
}

/// `TensorListResize(list, size)`: truncated, or grown with unset slots.
struct Resize;

impl ListKernel for Resize {
    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(Resize)
    }

    fn run(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let size = count(ctx.input(1)?, "size")?;
        let mut list = take_list_for_update(ctx)?;
        if list.len() != size {
            Arc::make_mut(&mut list).elements_mut().resize(size, None);
        }
        output_list(ctx, 0, list);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::ty;
    use crate::ops::{ResourceMgr, run_kernel_once};

    fn list_op(op: &str) -> NodeSpec {
        NodeSpec::new(format!("test_{op}"), op).attr("element_dtype", ty(DType::F32)).attr("shape_type", ty(DType::I32))
    }

    fn run(node: &NodeSpec, inputs: Vec<Value>) -> Result<Vec<Value>> {
        run_kernel_once(node, inputs, &ResourceMgr::default())
    }

    fn t(v: Tensor) -> Value {
        Value::Tensor(v)
    }

    fn shape(dims: &[i32]) -> Value {
        t(Tensor::from_slice::<i32>([dims.len()], dims).unwrap())
    }

    fn unknown_shape() -> Value {
        t(Tensor::scalar(-1i32))
    }

    fn list_of(v: &Value) -> Arc<TensorList> {
        match v {
            Value::List(l) => l.clone(),
            other => panic!("not a list: {other:?}"),
        }
    }

    fn f32s(v: &Value) -> Vec<f32> {
        v.as_tensor().unwrap().as_slice::<f32>().unwrap().to_vec()
    }

    fn matrix() -> Tensor {
        Tensor::from_slice::<f32>([3, 2], &[1., 2., 3., 4., 5., 6.]).unwrap()
    }

    #[test]
    fn from_tensor_get_item_and_stack_round_trip() {
        let list = run(&list_op("TensorListFromTensor"), vec![t(matrix()), shape(&[-1])]).unwrap().remove(0);
        assert_eq!(list_of(&list).len(), 3);
        let item =
            run(&list_op("TensorListGetItem"), vec![list.clone(), t(Tensor::scalar(1i32)), unknown_shape()]).unwrap();
        assert_eq!(f32s(&item[0]), [3., 4.]);
        let stacked = run(&list_op("TensorListStack"), vec![list.clone(), shape(&[2])]).unwrap();
        assert_eq!(stacked[0].as_tensor().unwrap().dims(), &[3, 2]);
        assert_eq!(f32s(&stacked[0]), [1., 2., 3., 4., 5., 6.]);
        let len = run(&list_op("TensorListLength"), vec![list.clone()]).unwrap();
        assert_eq!(len[0].as_tensor().unwrap().scalar_value::<i32>().unwrap(), 3);
        let es = run(&list_op("TensorListElementShape"), vec![list.clone()]).unwrap();
        assert_eq!(es[0].as_tensor().unwrap().as_slice::<i32>().unwrap(), &[-1]);
        let gathered = run(
            &list_op("TensorListGather"),
            vec![list, t(Tensor::from_slice::<i32>([2], &[2, 0]).unwrap()), unknown_shape()],
        )
        .unwrap();
        assert_eq!(f32s(&gathered[0]), [5., 6., 1., 2.]);
    }

    #[test]
    fn string_lists_unstack_and_stack_as_map_fn_over_image_bytes_does() {
        let op = |name: &str| {
            NodeSpec::new(format!("test_{name}"), name)
                .attr("element_dtype", ty(DType::String))
                .attr("shape_type", ty(DType::I32))
        };
        let bytes = Tensor::from_strings([3], &["\u{ff}\u{d8}jpeg", "", "png"]).unwrap();
        let list = run(&op("TensorListFromTensor"), vec![t(bytes), shape(&[])]).unwrap().remove(0);
        let item = run(&op("TensorListGetItem"), vec![list.clone(), t(Tensor::scalar(2i32)), unknown_shape()]).unwrap();
        assert_eq!(item[0].as_tensor().unwrap().string_value().unwrap(), b"png");
        let stacked = run(&op("TensorListStack"), vec![list, shape(&[])]).unwrap();
        let stacked = stacked[0].as_tensor().unwrap();
        assert_eq!(stacked.dims(), &[3]);
        let got: Vec<&[u8]> = stacked.strings().unwrap().iter().collect();
        assert_eq!(got, ["\u{ff}\u{d8}jpeg".as_bytes(), b"", b"png"]);
        // Unset slots stack as empty strings.
        let reserved = run(&op("TensorListReserve"), vec![shape(&[2]), t(Tensor::scalar(2i32))]).unwrap().remove(0);
        let two = Tensor::from_strings([2], &["a", "b"]).unwrap();
        let set = run(&op("TensorListSetItem"), vec![reserved, t(Tensor::scalar(1i32)), t(two)]).unwrap().remove(0);
        let stacked = run(&op("TensorListStack"), vec![set, shape(&[2])]).unwrap();
        let got: Vec<&[u8]> = stacked[0].as_tensor().unwrap().strings().unwrap().iter().collect();
        assert_eq!(got, [&b""[..], b"", b"a", b"b"]);
    }

    #[test]
    fn reserve_set_item_and_stack_with_unset_slots_as_zeros() {
        let list = run(&list_op("TensorListReserve"), vec![shape(&[2]), t(Tensor::scalar(3i32))]).unwrap().remove(0);
        let item = t(Tensor::from_slice::<f32>([2], &[7., 8.]).unwrap());
        let set = run(&list_op("TensorListSetItem"), vec![list.clone(), t(Tensor::scalar(1i32)), item.clone()])
            .unwrap()
            .remove(0);
        // The input list is shared here, so it is left as it was.
        assert!(list_of(&list).get(1).is_none());
        let stacked = run(&list_op("TensorListStack"), vec![set.clone(), unknown_shape()]).unwrap();
        assert_eq!(f32s(&stacked[0]), [0., 0., 7., 8., 0., 0.]);
        let zero = run(&list_op("TensorListGetItem"), vec![set, t(Tensor::scalar(0i32)), unknown_shape()]).unwrap();
        assert_eq!(f32s(&zero[0]), [0., 0.]);
    }

    #[test]
    fn a_uniquely_held_list_is_updated_in_place() {
        let list = Arc::new(TensorList::reserved(DType::F32, ShapeSpec::unknown(), 2));
        let before = Arc::as_ptr(&list);
        let item = t(Tensor::scalar(1.0f32));
        let out = run(&list_op("TensorListSetItem"), vec![Value::List(list), t(Tensor::scalar(0i32)), item])
            .unwrap()
            .remove(0);
        assert_eq!(Arc::as_ptr(&list_of(&out)), before);
    }

    #[test]
    fn errors_name_the_culprit() {
        let list = run(&list_op("TensorListReserve"), vec![shape(&[2]), t(Tensor::scalar(2i32))]).unwrap().remove(0);
        let err = run(&list_op("TensorListGetItem"), vec![list.clone(), t(Tensor::scalar(5i32)), unknown_shape()])
            .unwrap_err();
        assert!(err.message.contains("element 5 in a list with 2 elements"), "{err}");
        let err = run(
            &list_op("TensorListSetItem"),
            vec![list.clone(), t(Tensor::scalar(0i32)), t(Tensor::zeros(DType::F32, [3]).unwrap())],
        )
        .unwrap_err();
        assert!(err.message.contains("Item element shape: [3] list shape: [2]"), "{err}");
        let ints = list_op("TensorListGetItem").attr("element_dtype", ty(DType::I32));
        let err = run(&ints, vec![list.clone(), t(Tensor::scalar(0i32)), unknown_shape()]).unwrap_err();
        assert!(err.message.contains("op elements int32 but list elements float"), "{err}");
        let stack = list_op("TensorListStack").attr("num_elements", AttrValue::Int(3));
        let err = run(&stack, vec![list, unknown_shape()]).unwrap_err();
        assert!(err.message.contains("expected a list with 3 elements but got a list with 2"), "{err}");
        let err = run(&list_op("TensorListFromTensor"), vec![t(Tensor::scalar(1.0f32)), unknown_shape()]).unwrap_err();
        assert!(err.message.contains("at least a vector"), "{err}");
        let err = run(&list_op("TensorListFromTensor"), vec![t(matrix()), shape(&[3])]).unwrap_err();
        assert!(err.message.contains("shape [3] from a tensor with shape [3,2]"), "{err}");
    }

    #[test]
    fn push_back_and_pop_back() {
        let empty = run(&list_op("EmptyTensorList"), vec![unknown_shape(), t(Tensor::scalar(1i32))]).unwrap().remove(0);
        let one = t(Tensor::scalar(1.0f32));
        let pushed = run(&list_op("TensorListPushBack"), vec![empty.clone(), one.clone()]).unwrap().remove(0);
        let err = run(&list_op("TensorListPushBack"), vec![pushed.clone(), one]).unwrap_err();
        assert!(err.message.contains("full list"), "{err}");
        let popped = run(&list_op("TensorListPopBack"), vec![pushed, unknown_shape()]).unwrap();
        assert_eq!(list_of(&popped[0]).len(), 0);
        assert_eq!(f32s(&popped[1]), [1.0]);
        let err = run(&list_op("TensorListPopBack"), vec![empty, unknown_shape()]).unwrap_err();
        assert!(err.message.contains("pop from an empty list"), "{err}");
        let empty_stack = run(&list_op("TensorListStack"), vec![popped[0].clone(), shape(&[2])]).unwrap();
        assert_eq!(empty_stack[0].as_tensor().unwrap().dims(), &[0, 2]);
    }
}
