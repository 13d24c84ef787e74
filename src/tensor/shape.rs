//! Tensor shapes: a list of dimension sizes, rank 0 (scalar) and up.
//!
//! Owns: [`Shape`] and its arithmetic (element counts with overflow checks,
//! row-major strides). Broadcasting rules live with the kernels that use them.

use smallvec::SmallVec;
use std::fmt;

/// Dimension sizes, outermost first. Up to four dimensions live inline.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(SmallVec<[usize; 4]>);

impl Shape {
    pub fn scalar() -> Shape {
        Shape(SmallVec::new())
    }

    pub fn new(dims: &[usize]) -> Shape {
        Shape(SmallVec::from_slice(dims))
    }

    pub fn from_vec(dims: Vec<usize>) -> Shape {
        Shape(SmallVec::from_vec(dims))
    }

    #[inline]
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    #[inline]
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    pub fn dim(&self, axis: usize) -> usize {
        self.0[axis]
    }

    pub fn is_scalar(&self) -> bool {
        self.0.is_empty()
    }

    /// The element count, or `None` if it overflows `usize`.
    pub fn checked_num_elements(&self) -> Option<usize> {
        self.0.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// The element count. Shapes of live tensors were checked when the
    /// tensor was made, so this cannot overflow for them.
    #[inline]
    pub fn num_elements(&self) -> usize {
        self.0.iter().product()
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> SmallVec<[usize; 4]> {
        let mut strides: SmallVec<[usize; 4]> = SmallVec::from_elem(1, self.0.len());
        for axis in (0..self.0.len().saturating_sub(1)).rev() {
            strides[axis] = strides[axis + 1] * self.0[axis + 1];
        }
        strides
    }

    pub fn push(&mut self, dim: usize) {
        self.0.push(dim);
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<&[usize]> for Shape {
    fn from(dims: &[usize]) -> Shape {
        Shape::new(dims)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(dims: [usize; N]) -> Shape {
        Shape::new(&dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_strides_and_display() {
        let s = Shape::new(&[2, 3, 4]);
        assert_eq!(s.num_elements(), 24);
        assert_eq!(s.strides().as_slice(), &[12, 4, 1]);
        assert_eq!(s.to_string(), "[2,3,4]");
        assert_eq!(Shape::scalar().num_elements(), 1);
        assert_eq!(Shape::scalar().to_string(), "[]");
        assert_eq!(Shape::new(&[3, 0]).num_elements(), 0);
        assert_eq!(Shape::new(&[usize::MAX, 2]).checked_num_elements(), None);
    }
}
