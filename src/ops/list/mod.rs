//! TensorLists: the `variant` values TensorFlow's `TensorList*` ops pass
//! around (Keras' recurrent layers, `tf.TensorArray` under control flow v2,
//! and the accumulators of `While` gradients).
//!
//! Owns: [`TensorList`] (an element dtype, a partial element shape, the
//! elements, some of which may be unset), the partial-shape arithmetic the
//! list ops share, and the list kernels ([`kernels`]). A list is an
//! immutable value; a kernel that holds the only reference to its input list
//! changes it in place (`Arc::make_mut`), so a loop that sets one item per
//! iteration does not copy the whole list each time. Must not know about
//! frames or devices: lists flow through Enter/Merge/Switch/Exit like any
//! other value.

pub mod kernels;

pub use kernels::DEFS;

use crate::error::{Result, Status};
use crate::graph::spec::ShapeSpec;
use crate::tensor::{DType, Shape, Tensor};

/// A list of tensors of one dtype whose shapes fit one partial shape.
/// An element may be unset (a reserved slot not yet written); reading it
/// gives zeros of the element shape, as in TensorFlow.
#[derive(Clone, Debug)]
pub struct TensorList {
    element_dtype: DType,
    element_shape: ShapeSpec,
    elements: Vec<Option<Tensor>>,
    /// The most elements `PushBack` may grow the list to (`EmptyTensorList`'s
    /// `max_num_elements`); `None` for no bound.
    max_num_elements: Option<usize>,
}

impl TensorList {
    /// A list of `len` unset elements.
    pub fn reserved(element_dtype: DType, element_shape: ShapeSpec, len: usize) -> TensorList {
        TensorList { element_dtype, element_shape, elements: vec![None; len], max_num_elements: None }
    }

    /// An empty list that may grow to `max_num_elements` (no bound when `None`).
    pub fn empty(element_dtype: DType, element_shape: ShapeSpec, max_num_elements: Option<usize>) -> TensorList {
        TensorList { element_dtype, element_shape, elements: Vec::new(), max_num_elements }
    }

    /// A list of the given elements (all of `element_dtype`).
    pub fn from_elements(element_dtype: DType, element_shape: ShapeSpec, elements: Vec<Tensor>) -> TensorList {
        TensorList {
            element_dtype,
            element_shape,
            elements: elements.into_iter().map(Some).collect(),
            max_num_elements: None,
        }
    }

    pub fn element_dtype(&self) -> DType {
        self.element_dtype
    }

    pub fn element_shape(&self) -> &ShapeSpec {
        &self.element_shape
    }

    pub fn len(&self) -> usize {
        self.elements.len()
    }

    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }

    pub fn max_num_elements(&self) -> Option<usize> {
        self.max_num_elements
    }

    /// Element `index`, `None` when unset.
    pub fn get(&self, index: usize) -> Option<&Tensor> {
        self.elements.get(index).and_then(Option::as_ref)
    }

    pub(crate) fn elements_mut(&mut self) -> &mut Vec<Option<Tensor>> {
        &mut self.elements
    }

    /// `ZerosLike` of a list (the zero gradient of a loop's accumulator):
    /// zeros in place of each set element, unset elements left unset, as
    /// TensorFlow's `TensorListZerosLike`.
    pub fn zeros_like(&self) -> Result<TensorList> {
        let elements = self
            .elements
            .iter()
            .map(|e| e.as_ref().map(|t| Tensor::zeros(t.dtype(), t.shape().clone())).transpose())
            .collect::<Result<Vec<_>>>()?;
        Ok(TensorList {
            element_dtype: self.element_dtype,
            element_shape: self.element_shape.clone(),
            elements,
            max_num_elements: self.max_num_elements,
        })
    }

    /// The elementwise sum of two lists (`AddN` of `variant`s, as gradients
    /// of a loop's accumulators add up), as TensorFlow's
    /// `TensorListBinaryAdd`: the lists agree in dtype, length and element
    /// shape; an element unset in one list is the other's; set elements of
    /// one shape add.
    pub fn add(&self, other: &TensorList) -> Result<TensorList> {
        let both = |what: &str, a: &dyn std::fmt::Display, b: &dyn std::fmt::Display| {
            Status::invalid_argument(format!(
                "Trying to add two lists of tensors {what}. One is {a} and the other is {b}"
            ))
        };
        if self.element_dtype != other.element_dtype {
            return Err(both("of different dtypes", &self.element_dtype, &other.element_dtype));
        }
        if self.len() != other.len() {
            return Err(both("with different lengths", &self.len(), &other.len()));
        }
        if !shapes_compatible(&self.element_shape, &other.element_shape) {
            return Err(both("with incompatible element shapes", &self.element_shape, &other.element_shape));
        }
        let element_shape = merge_shapes(&self.element_shape, &other.element_shape)?;
        let elements = self
            .elements
            .iter()
            .zip(&other.elements)
            .map(|pair| match pair {
                (None, None) => Ok(None),
                (Some(t), None) | (None, Some(t)) => Ok(Some(t.clone())),
                (Some(a), Some(b)) if a.shape() != b.shape() => Err(Status::invalid_argument(format!(
                    "Trying to add two tensors with incompatible element shapes. One is {} and the other is {}",
                    a.shape(),
                    b.shape()
                ))),
                (Some(a), Some(b)) => crate::ops::math::add_same_shape(a, b).map(Some),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(TensorList { element_dtype: self.element_dtype, element_shape, elements, max_num_elements: None })
    }

    /// The error for an op whose `element_dtype` differs from the list's.
    pub fn check_dtype(&self, op_dtype: DType) -> Result<()> {
        if op_dtype != self.element_dtype {
            return Err(Status::invalid_argument(format!(
                "Invalid data types; op elements {op_dtype} but list elements {}",
                self.element_dtype
            )));
        }
        Ok(())
    }

    /// The shape an unset element reads as: the list's element shape merged
    /// with `requested` and, where still partial, with the first set
    /// element's shape. Fails when that is still not fully defined.
    pub fn resolved_element_shape(&self, requested: &ShapeSpec) -> Result<Shape> {
        let mut shape = merge_shapes(&self.element_shape, requested)?;
        if !is_fully_defined(&shape) {
            if let Some(first) = self.elements.iter().flatten().next() {
                shape = merge_shapes(&shape, &ShapeSpec::known(first.dims()))?;
            }
        }
        fully_defined(&shape).ok_or_else(|| {
            Status::invalid_argument(format!(
                "Trying to read an uninitialized tensor but element_shape is not fully defined: {shape} and no list \
                 element is set."
            ))
        })
    }
}

/// A partial shape given as a tensor (an `element_shape` input): a scalar
/// -1 for unknown rank, or a vector whose -1 entries are unknown dims.
pub fn shape_from_tensor(t: &Tensor, what: &str) -> Result<ShapeSpec> {
    let values = super::index_values(t, what)?;
    if t.rank() == 0 {
        return match values.first() {
            Some(-1) => Ok(ShapeSpec::unknown()),
            other => Err(Status::invalid_argument(format!(
                "{what} must be a vector or the scalar -1 (unknown rank), got the scalar {}",
                other.copied().unwrap_or_default()
            ))),
        };
    }
    if t.rank() != 1 {
        return Err(Status::invalid_argument(format!("{what} must be at most rank 1 but is rank {}", t.rank())));
    }
    if let Some(bad) = values.iter().find(|&&d| d < -1) {
        return Err(Status::invalid_argument(format!("{what} has dimension {bad}; dimensions must be >= -1")));
    }
    Ok(ShapeSpec { dims: Some(values.to_vec()) })
}

/// The most specific shape both `a` and `b` admit, or the error TensorFlow
/// gives when they disagree.
pub fn merge_shapes(a: &ShapeSpec, b: &ShapeSpec) -> Result<ShapeSpec> {
    let (Some(x), Some(y)) = (&a.dims, &b.dims) else {
        return Ok(if a.dims.is_some() { a.clone() } else { b.clone() });
    };
    let incompatible = || Status::invalid_argument(format!("Incompatible shapes during merge: {a} vs. {b}"));
    if x.len() != y.len() {
        return Err(incompatible());
    }
    let dims = x
        .iter()
        .zip(y)
        .map(|(&p, &q)| match (p, q) {
            (p, q) if p < 0 => Ok(q),
            (p, q) if q < 0 || p == q => Ok(p),
            _ => Err(incompatible()),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ShapeSpec { dims: Some(dims) })
}

/// Whether some concrete shape fits both `a` and `b`.
pub fn shapes_compatible(a: &ShapeSpec, b: &ShapeSpec) -> bool {
    merge_shapes(a, b).is_ok()
}

pub fn is_fully_defined(shape: &ShapeSpec) -> bool {
    shape.dims.as_ref().is_some_and(|d| d.iter().all(|&x| x >= 0))
}

/// The concrete shape a fully defined partial shape names.
pub fn fully_defined(shape: &ShapeSpec) -> Option<Shape> {
    let dims = shape.dims.as_ref()?;
    dims.iter().map(|&d| usize::try_from(d).ok()).collect::<Option<Vec<_>>>().map(Shape::from_vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(d: &[i64]) -> ShapeSpec {
        ShapeSpec { dims: Some(d.to_vec()) }
    }

    #[test]
    fn shapes_merge_as_tensorflow_merges_them() {
        assert_eq!(merge_shapes(&spec(&[-1, 3]), &spec(&[2, -1])).unwrap(), spec(&[2, 3]));
        assert_eq!(merge_shapes(&ShapeSpec::unknown(), &spec(&[4])).unwrap(), spec(&[4]));
        let err = merge_shapes(&spec(&[2, 3]), &spec(&[2, 4])).unwrap_err();
        assert!(err.message.contains("[2,3] vs. [2,4]"), "{err}");
        assert!(!shapes_compatible(&spec(&[2]), &spec(&[2, 1])));
        assert!(is_fully_defined(&spec(&[])) && !is_fully_defined(&spec(&[-1])));
    }

    #[test]
    fn lists_add_and_zero_as_tensorflow_does() {
        let t = |v: &[f32]| Tensor::from_slice::<f32>([v.len()], v).unwrap();
        let mut a = TensorList::reserved(DType::F32, spec(&[-1]), 3);
        a.elements_mut()[0] = Some(t(&[1., 2.]));
        a.elements_mut()[1] = Some(t(&[5.]));
        let mut b = TensorList::reserved(DType::F32, spec(&[2]), 3);
        b.elements_mut()[0] = Some(t(&[0.5, -2.]));
        b.elements_mut()[2] = Some(t(&[7., 8.]));
        let sum = a.add(&b).unwrap();
        assert_eq!(sum.element_shape(), &spec(&[2]));
        assert_eq!(sum.get(0).unwrap().as_slice::<f32>().unwrap(), &[1.5, 0.]);
        assert_eq!(sum.get(1).unwrap().as_slice::<f32>().unwrap(), &[5.]);
        assert_eq!(sum.get(2).unwrap().as_slice::<f32>().unwrap(), &[7., 8.]);
        let zeros = sum.zeros_like().unwrap();
        assert_eq!(zeros.get(2).unwrap().as_slice::<f32>().unwrap(), &[0., 0.]);
        let mut c = TensorList::reserved(DType::F32, spec(&[-1]), 3);
        c.elements_mut()[0] = Some(t(&[1., 2., 3.]));
        let err = a.add(&c).unwrap_err();
        assert!(err.message.contains("incompatible element shapes. One is [2] and the other is [3]"), "{err}");
        let err = a.add(&TensorList::reserved(DType::F32, spec(&[-1]), 2)).unwrap_err();
        assert!(err.message.contains("different lengths. One is 3 and the other is 2"), "{err}");
        let err = a.add(&TensorList::reserved(DType::I32, spec(&[-1]), 3)).unwrap_err();
        assert!(err.message.contains("different dtypes"), "{err}");
        let unset = TensorList::reserved(DType::F32, spec(&[-1]), 1).zeros_like().unwrap();
        assert!(unset.get(0).is_none());
    }

    #[test]
    fn element_shapes_come_from_tensors() {
        assert_eq!(shape_from_tensor(&Tensor::scalar(-1i32), "s").unwrap(), ShapeSpec::unknown());
        let v = Tensor::from_slice::<i64>([2], &[-1, 5]).unwrap();
        assert_eq!(shape_from_tensor(&v, "s").unwrap(), spec(&[-1, 5]));
        assert!(shape_from_tensor(&Tensor::scalar(3i32), "s").is_err());
        let bad = Tensor::from_slice::<i32>([1], &[-2]).unwrap();
        assert!(shape_from_tensor(&bad, "s").unwrap_err().message.contains("-2"));
    }

    #[test]
    fn unset_elements_read_with_the_shape_of_a_set_one() {
        let mut list = TensorList::reserved(DType::F32, ShapeSpec::unknown(), 2);
        let err = list.resolved_element_shape(&ShapeSpec::unknown()).unwrap_err();
        assert!(err.message.contains("not fully defined"), "{err}");
        list.elements_mut()[1] = Some(Tensor::zeros(DType::F32, [3]).unwrap());
        assert_eq!(list.resolved_element_shape(&ShapeSpec::unknown()).unwrap().dims(), &[3]);
    }
}
