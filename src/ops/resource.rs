//! Per-device resource containers: the variables and lookup tables that
//! outlive a step.
//!
//! Owns: [`ResourceMgr`] (container name → variable name → [`Variable`],
//! and the same for [`LookupTable`]s, which `ops::lookup` defines) and
//! [`Variable`] itself. Both variable families live here: ref variables
//! (`VariableV2`) are found by the kernel and passed along edges as
//! `Value::Ref`; resource variables (`VarHandleOp`) are passed as a
//! [`ResourceHandle`] and looked up by the kernel that uses them.
//!
//! A variable's value is a [`Tensor`]; an assignment installs a new tensor
//! rather than writing into the old one, so a reader holding the previous
//! value never sees a torn update. Updates in place (the optimizers) go
//! through a [`VariableGuard`], which writes into the value's own bytes only
//! when no reader holds them and copies them first otherwise (copy on
//! write, as TensorFlow's resource variables do).

use crate::error::{Result, Status};
use crate::graph::spec::ShapeSpec;
use crate::ops::lookup::LookupTable;
use crate::tensor::{DType, Element, Tensor};
use foldhash::HashMap;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use std::sync::{Arc, OnceLock};

/// A named, typed, mutable slot for a tensor.
pub struct Variable {
    name: String,
    dtype: DType,
    value: RwLock<Option<Tensor>>,
    /// The shape a `VariableV2` declared, which a shape-validating
    /// assignment must match even before the first value (TensorFlow
    /// allocates the variable's tensor with that shape up front).
    declared_shape: OnceLock<ShapeSpec>,
}

impl Variable {
    pub fn new(name: impl Into<String>, dtype: DType) -> Variable {
        Variable { name: name.into(), dtype, value: RwLock::new(None), declared_shape: OnceLock::new() }
    }

    /// Records the shape the variable was declared with; the first
    /// declaration wins.
    pub fn declare_shape(&self, shape: &ShapeSpec) {
        self.declared_shape.get_or_init(|| shape.clone());
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn is_initialized(&self) -> bool {
        self.value.read().is_some()
    }

    /// The current value, or FailedPrecondition naming the variable.
    pub fn read(&self) -> Result<Tensor> {
        self.value.read().clone().ok_or_else(|| self.uninitialized())
    }

    fn uninitialized(&self) -> Status {
        Status::failed_precondition(format!(
            "Attempting to use uninitialized value {} (variable '{}' has not been assigned)",
            self.name, self.name
        ))
    }

    /// Exclusive access to the value until the guard drops: the write lock
    /// every update takes, so no reader or other update sees it half done.
    pub fn lock(&self) -> VariableGuard<'_> {
        VariableGuard { var: self, slot: self.value.write() }
    }

    fn check_dtype(&self, value: &Tensor) -> Result<()> {
        if value.dtype() != self.dtype {
            return Err(Status::invalid_argument(format!(
                "variable '{}' holds {}, cannot assign {}",
                self.name,
                self.dtype,
                value.dtype()
            )));
        }
        Ok(())
    }

    /// Installs `value`. With `validate_shape`, an initialised variable keeps
    /// its shape, and an uninitialised one takes only values that fit its
    /// declared shape.
    pub fn assign(&self, value: Tensor, validate_shape: bool) -> Result<()> {
        self.check_dtype(&value)?;
        // A borrowed value lives in memory the variable must not keep: a
        // receive buffer, or a span of a shared-memory ring, which a
        // variable holding it would stop for good. TensorFlow's Assign
        // copies into the variable's own buffer too.
        let value = if value.is_borrowed() { value.deep_copy() } else { value };
        let mut slot = self.value.write();
        if validate_shape {
            let lhs = match (slot.as_ref(), self.declared_shape.get()) {
                (Some(old), _) if old.shape() != value.shape() => Some(old.shape().to_string()),
                (None, Some(declared)) if !declared.admits(value.shape()) => Some(declared.to_string()),
                _ => None,
            };
            if let Some(lhs) = lhs {
                return Err(Status::invalid_argument(format!(
                    "Assign requires shapes of both tensors to match. lhs shape= {lhs} rhs shape= {} (variable '{}')",
                    value.shape(),
                    self.name
                )));
            }
        }
        *slot = Some(value);
        Ok(())
    }

    /// Replaces the value with `update(current)` atomically with respect to
    /// other updates, and returns the new value.
    pub fn update(&self, update: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
        let mut slot = self.value.write();
        let current = slot.as_ref().ok_or_else(|| self.uninitialized())?;
        let next = update(current)?;
        self.check_dtype(&next)?;
        if next.shape() != current.shape() {
            return Err(Status::invalid_argument(format!(
                "update of variable '{}' changed its shape from {} to {}",
                self.name,
                current.shape(),
                next.shape()
            )));
        }
        *slot = Some(next.clone());
        Ok(next)
    }

    fn clear(&self) {
        *self.value.write() = None;
    }
}

/// A variable held for an update in place (see [`Variable::lock`]). It never
/// changes the value's dtype or shape.
pub struct VariableGuard<'a> {
    var: &'a Variable,
    slot: RwLockWriteGuard<'a, Option<Tensor>>,
}

impl VariableGuard<'_> {
    pub fn variable(&self) -> &Variable {
        self.var
    }

    /// The current value, or FailedPrecondition naming the variable.
    pub fn value(&self) -> Result<&Tensor> {
        self.slot.as_ref().ok_or_else(|| self.var.uninitialized())
    }

    /// The value's elements, writable. They are the value's own bytes when
    /// nobody else holds them; otherwise a copy is installed first, so a
    /// reader holding the old value keeps it unchanged.
    pub fn elements_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        let var = self.var;
        let value = self.slot.as_mut().ok_or_else(|| var.uninitialized())?;
        if value.dtype() != T::DTYPE {
            return Err(Status::invalid_argument(format!(
                "variable '{}' holds {}, updated as {}",
                var.name,
                value.dtype(),
                T::DTYPE
            )));
        }
        if value.try_slice_mut::<T>().is_none() {
            *value = value.deep_copy();
        }
        value.try_slice_mut::<T>().ok_or_else(|| Status::internal("a fresh copy of a variable is not writable"))
    }
}

/// What a `VarHandleOp` produces: where to find a resource variable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceHandle {
    pub container: String,
    pub name: String,
    pub dtype: DType,
}

/// The variables and tables of one device, by container.
#[derive(Default)]
pub struct ResourceMgr {
    containers: Mutex<HashMap<String, HashMap<String, Arc<Variable>>>>,
    tables: Mutex<HashMap<String, HashMap<String, Arc<LookupTable>>>>,
}

impl ResourceMgr {
    /// The variable `container/name`, created uninitialised if absent.
    pub fn lookup_or_create(&self, container: &str, name: &str, dtype: DType) -> Result<Arc<Variable>> {
        let mut containers = self.containers.lock();
        // The hit path (every step of a VariableV2) allocates nothing.
        if let Some(var) = containers.get(container).and_then(|vars| vars.get(name)) {
            if var.dtype() != dtype {
                return Err(Status::invalid_argument(format!(
                    "variable '{name}' in container '{container}' holds {}, requested as {dtype}",
                    var.dtype()
                )));
            }
            return Ok(var.clone());
        }
        let vars = containers.entry(container.to_string()).or_default();
        let var = Arc::new(Variable::new(name, dtype));
        vars.insert(name.to_string(), var.clone());
        Ok(var)
    }

    /// The variable `container/name`, if it exists.
    pub fn lookup(&self, container: &str, name: &str) -> Option<Arc<Variable>> {
        self.containers.lock().get(container)?.get(name).cloned()
    }

    /// Removes the variable `container/name` and clears it, so kernels that
    /// still hold it see it uninitialised. Returns it if it existed.
    pub fn remove(&self, container: &str, name: &str) -> Option<Arc<Variable>> {
        let var = self.containers.lock().get_mut(container)?.remove(name)?;
        var.clear();
        Some(var)
    }

    /// The table `container/name`, made by `create` if absent.
    pub fn table_or_create(
        &self,
        container: &str,
        name: &str,
        create: impl FnOnce() -> LookupTable,
    ) -> Arc<LookupTable> {
        let mut tables = self.tables.lock();
        if let Some(table) = tables.get(container).and_then(|t| t.get(name)) {
            return table.clone();
        }
        let table = Arc::new(create());
        tables.entry(container.to_string()).or_default().insert(name.to_string(), table.clone());
        table
    }

    /// The table `container/name`, if it exists.
    pub fn table(&self, container: &str, name: &str) -> Option<Arc<LookupTable>> {
        self.tables.lock().get(container)?.get(name).cloned()
    }

    /// Drops every variable and table of the named containers (all of
    /// them when `containers` is empty). Kernels that still hold a
    /// variable see it uninitialised.
    pub fn clear(&self, containers: &[String]) {
        {
            let mut tables = self.tables.lock();
            if containers.is_empty() {
                tables.clear();
            } else {
                containers.iter().for_each(|c| drop(tables.remove(c)));
            }
        }
        let mut map = self.containers.lock();
        let names: Vec<String> =
            if containers.is_empty() { map.keys().cloned().collect() } else { containers.to_vec() };
        for name in names {
            if let Some(vars) = map.remove(&name) {
                vars.values().for_each(|v| v.clear());
            }
        }
    }

    /// Number of variables across containers.
    pub fn len(&self) -> usize {
        self.containers.lock().values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_and_errors() {
        let mgr = ResourceMgr::default();
        let v = mgr.lookup_or_create("", "v", DType::F32).unwrap();
        let err = v.read().unwrap_err();
        assert_eq!(err.code, crate::error::Code::FailedPrecondition);
        assert!(err.message.contains("v"));
        v.assign(Tensor::from_slice::<f32>([2], &[1., 2.]).unwrap(), true).unwrap();
        assert!(v.assign(Tensor::from_slice::<f32>([3], &[1., 2., 3.]).unwrap(), true).is_err());
        assert!(v.assign(Tensor::scalar(1i32), false).is_err());
        assert!(mgr.lookup_or_create("", "v", DType::I32).is_err());
        assert!(Arc::ptr_eq(&mgr.lookup("", "v").unwrap(), &v));
        mgr.clear(&[]);
        assert!(mgr.lookup("", "v").is_none());
        assert!(!v.is_initialized());
    }

    #[test]
    fn an_assigned_borrowed_value_is_copied_and_its_owner_released() {
        // A reshape of a large tensor borrows its bytes (as a received
        // tensor borrows its receive buffer or ring span).
        let owner = Tensor::build::<f32>([64], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32)).unwrap();
        let borrowed = owner.reshaped([8, 8]).unwrap();
        assert!(borrowed.is_borrowed());
        let v = Variable::new("w", DType::F32);
        v.assign(borrowed, true).unwrap();
        let held = v.read().unwrap();
        assert!(!held.is_borrowed(), "the variable keeps its own bytes");
        assert!(!held.shares_bytes_with(&owner));
        assert_eq!(held.as_slice::<f32>().unwrap(), owner.as_slice::<f32>().unwrap());
    }

    #[test]
    fn guards_write_in_place_unless_a_reader_holds_the_value() {
        let v = Variable::new("w", DType::F32);
        assert_eq!(v.lock().elements_mut::<f32>().unwrap_err().code, crate::error::Code::FailedPrecondition);
        v.assign(Tensor::from_slice::<f32>([2], &[1., 2.]).unwrap(), true).unwrap();
        let before = v.read().unwrap();
        {
            let mut guard = v.lock();
            guard.elements_mut::<f32>().unwrap()[0] = 10.;
            assert!(guard.elements_mut::<i32>().is_err(), "dtype is checked");
        }
        // The reader's tensor is untouched: the update went to a copy.
        assert_eq!(before.as_slice::<f32>().unwrap(), &[1., 2.]);
        drop(before);
        let ptr = v.read().unwrap().data_ptr();
        v.lock().elements_mut::<f32>().unwrap()[1] = 20.;
        let after = v.read().unwrap();
        assert_eq!(after.as_slice::<f32>().unwrap(), &[10., 20.]);
        assert_eq!(after.data_ptr(), ptr, "no reader, no copy");
    }
}
