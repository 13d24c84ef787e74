//! Lookup tables: the hash tables behind Keras `StringLookup`,
//! `IntegerLookup` and `TextVectorization`, and `tf.lookup`.
//! `HashTableV2` (filled once, by its initializer) and `MutableHashTableV2`
//! (filled any time, restored from checkpoints) make a table in the
//! device's [`ResourceMgr`] and output its handle; `LookupTableImportV2`,
//! `InitializeTableV2`, `InitializeTableFromTextFileV2` (a vocabulary
//! file, a SavedModel's asset) and `LookupTableInsertV2` fill it;
//! `LookupTableFindV2` maps keys to values (a default where a key is
//! missing); `LookupTableSizeV2` and `LookupTableExportV2` read it back.
//!
//! Owns: [`LookupTable`] and those kernels. Tables map scalar keys
//! (string, int64, int32) to scalar values (int64, int32, float, double,
//! string, bool). Must not know where a table's contents come from (a
//! constant, a checkpoint, the path of a file): the graph feeds them in.

use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::resource::{ResourceHandle, ResourceMgr};
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, Value, ValueType};
use crate::tensor::{DType, Tensor};
use foldhash::HashMap;
use parking_lot::RwLock;
use std::sync::Arc;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("HashTableV2", table_signature, build_table::<false>).stateful(),
    OpDef::kernel("MutableHashTableV2", table_signature, build_table::<true>).stateful(),
    OpDef::kernel("LookupTableImportV2", fill_signature, build_import).stateful(),
    OpDef::kernel("InitializeTableV2", fill_signature, build_initialize).stateful(),
    OpDef::kernel("LookupTableInsertV2", fill_signature, build_insert).stateful(),
    OpDef::kernel("InitializeTableFromTextFileV2", text_file_signature, build_from_text_file).stateful(),
    OpDef::kernel("LookupTableFindV2", find_signature, build_find).stateful(),
    OpDef::kernel("LookupTableSizeV2", size_signature, build_size).stateful(),
    OpDef::kernel("LookupTableExportV2", export_signature, build_export).stateful(),
];

/// A table key: int32 keys are held widened.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Int(i64),
    Bytes(Box<[u8]>),
}

/// The scalar values of one tensor, in element order.
enum Column {
    I64(Vec<i64>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    Bytes(Vec<Box<[u8]>>),
}

impl Column {
    fn of(tensor: &Tensor) -> Result<Column> {
        Ok(match tensor.dtype() {
            DType::I64 => Column::I64(tensor.as_slice::<i64>()?.to_vec()),
            DType::I32 => Column::I32(tensor.as_slice::<i32>()?.to_vec()),
            DType::F32 => Column::F32(tensor.as_slice::<f32>()?.to_vec()),
            DType::F64 => Column::F64(tensor.as_slice::<f64>()?.to_vec()),
            DType::Bool => Column::Bool(tensor.as_slice::<bool>()?.to_vec()),
            DType::String => Column::Bytes(tensor.strings()?.iter().map(Box::from).collect()),
            other => return Err(Status::unimplemented(format!("lookup tables hold no {other} values"))),
        })
    }

    fn len(&self) -> usize {
        match self {
            Column::I64(v) => v.len(),
            Column::I32(v) => v.len(),
            Column::F32(v) => v.len(),
            Column::F64(v) => v.len(),
            Column::Bool(v) => v.len(),
            Column::Bytes(v) => v.len(),
        }
    }

    fn empty_like(&self) -> Column {
        match self {
            Column::I64(_) => Column::I64(Vec::new()),
            Column::I32(_) => Column::I32(Vec::new()),
            Column::F32(_) => Column::F32(Vec::new()),
            Column::F64(_) => Column::F64(Vec::new()),
            Column::Bool(_) => Column::Bool(Vec::new()),
            Column::Bytes(_) => Column::Bytes(Vec::new()),
        }
    }

    /// Appends element `i` of `from` (a column of the same kind).
    fn push_from(&mut self, from: &Column, i: usize) {
        match (self, from) {
            (Column::I64(to), Column::I64(v)) => to.push(v[i]),
            (Column::I32(to), Column::I32(v)) => to.push(v[i]),
            (Column::F32(to), Column::F32(v)) => to.push(v[i]),
            (Column::F64(to), Column::F64(v)) => to.push(v[i]),
            (Column::Bool(to), Column::Bool(v)) => to.push(v[i]),
            (Column::Bytes(to), Column::Bytes(v)) => to.push(v[i].clone()),
            _ => unreachable!("columns of one table share a dtype"),
        }
    }

    fn into_tensor(self, shape: &[usize]) -> Result<Tensor> {
        match self {
            Column::I64(v) => Tensor::from_slice(shape, &v),
            Column::I32(v) => Tensor::from_slice(shape, &v),
            Column::F32(v) => Tensor::from_slice(shape, &v),
            Column::F64(v) => Tensor::from_slice(shape, &v),
            Column::Bool(v) => Tensor::from_slice(shape, &v),
            Column::Bytes(v) => Tensor::from_strings(shape, &v),
        }
    }
}

fn keys_of(tensor: &Tensor) -> Result<Vec<Key>> {
    Ok(match tensor.dtype() {
        DType::I64 => tensor.as_slice::<i64>()?.iter().map(|&k| Key::Int(k)).collect(),
        DType::I32 => tensor.as_slice::<i32>()?.iter().map(|&k| Key::Int(i64::from(k))).collect(),
        DType::String => tensor.strings()?.iter().map(|k| Key::Bytes(Box::from(k))).collect(),
        other => return Err(Status::unimplemented(format!("lookup tables take no {other} keys"))),
    })
}

/// A table's entries: key → row of `values`.
struct Entries {
    rows: HashMap<Key, usize>,
    values: Column,
}

/// A hash table of one key dtype and one value dtype.
pub struct LookupTable {
    name: String,
    key_dtype: DType,
    value_dtype: DType,
    /// `MutableHashTableV2`: filled any time. `HashTableV2`: once.
    mutable: bool,
    /// `None` until first filled (a mutable table starts empty, not unset).
    entries: RwLock<Option<Entries>>,
}

impl LookupTable {
    pub fn new(name: impl Into<String>, key_dtype: DType, value_dtype: DType, mutable: bool) -> LookupTable {
        let entries = mutable.then(|| Entries { rows: HashMap::default(), values: empty_column(value_dtype) });
        LookupTable { name: name.into(), key_dtype, value_dtype, mutable, entries: RwLock::new(entries) }
    }

    pub fn key_dtype(&self) -> DType {
        self.key_dtype
    }

    pub fn value_dtype(&self) -> DType {
        self.value_dtype
    }

    pub fn len(&self) -> usize {
        self.entries.read().as_ref().map_or(0, |e| e.rows.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check(&self, keys: &Tensor, values: Option<&Tensor>) -> Result<()> {
        if keys.dtype() != self.key_dtype {
            return Err(Status::invalid_argument(format!(
                "table '{}' has {} keys, given {} keys",
                self.name,
                self.key_dtype,
                keys.dtype()
            )));
        }
        if let Some(values) = values {
            if values.dtype() != self.value_dtype {
                return Err(Status::invalid_argument(format!(
                    "table '{}' has {} values, given {} values",
                    self.name,
                    self.value_dtype,
                    values.dtype()
                )));
            }
            if values.shape() != keys.shape() {
                return Err(Status::invalid_argument(format!(
                    "table '{}': keys of shape {} and values of shape {} (one value per key)",
                    self.name,
                    keys.shape(),
                    values.shape()
                )));
            }
        }
        Ok(())
    }

    /// Fills the table. `replace`: drop what it held first (an import);
    /// otherwise add to it (later keys win, as TensorFlow's inserts do).
    fn fill(&self, keys: &Tensor, values: &Tensor, how: Fill) -> Result<()> {
        self.check(keys, Some(values))?;
        let mut entries = self.entries.write();
        match (how, self.mutable, entries.is_some()) {
            (Fill::Insert, false, _) => {
                return Err(Status::unimplemented(format!(
                    "table '{}' is a HashTable: its initializer fills it, inserts cannot",
                    self.name
                )));
            }
            (Fill::Import | Fill::Initialize, false, true) => {
                return Err(Status::failed_precondition(format!("Table '{}' already initialized.", self.name)));
            }
            _ => {}
        }
        let new_keys = keys_of(keys)?;
        let new_values = Column::of(values)?;
        let mut kept = match entries.take() {
            Some(old) if how == Fill::Insert => old,
            _ => Entries { rows: HashMap::default(), values: new_values.empty_like() },
        };
        for (i, key) in new_keys.into_iter().enumerate() {
            match kept.rows.get(&key) {
                Some(&row) => overwrite(&mut kept.values, row, &new_values, i),
                None => {
                    kept.rows.insert(key, kept.values.len());
                    kept.values.push_from(&new_values, i);
                }
            }
        }
        *entries = Some(kept);
        Ok(())
    }

    /// The value of every key in `keys`, `default` (a scalar) where absent;
    /// shaped as `keys`.
    pub fn find(&self, keys: &Tensor, default: &Tensor) -> Result<Tensor> {
        self.check(keys, None)?;
        if default.dtype() != self.value_dtype || default.num_elements() != 1 {
            return Err(Status::invalid_argument(format!(
                "table '{}': the default value must be one {} (got {} of shape {})",
                self.name,
                self.value_dtype,
                default.dtype(),
                default.shape()
            )));
        }
        let entries = self.entries.read();
        let Some(entries) = entries.as_ref() else {
            return Err(Status::failed_precondition(format!("Table '{}' not initialized.", self.name)));
        };
        let default = Column::of(default)?;
        let mut out = default.empty_like();
        for key in keys_of(keys)? {
            match entries.rows.get(&key) {
                Some(&row) => out.push_from(&entries.values, row),
                None => out.push_from(&default, 0),
            }
        }
        out.into_tensor(keys.dims())
    }

    /// Every key and its value, keys in order (TensorFlow's order is its
    /// hash map's; a sorted one makes exports repeatable).
    pub fn export(&self) -> Result<(Tensor, Tensor)> {
        let entries = self.entries.read();
        let empty = Entries { rows: HashMap::default(), values: empty_column(self.value_dtype) };
        let entries = entries.as_ref().unwrap_or(&empty);
        let mut rows: Vec<(&Key, usize)> = entries.rows.iter().map(|(k, &r)| (k, r)).collect();
        rows.sort();
        let n = rows.len();
        let keys = match self.key_dtype {
            DType::String => {
                let keys: Vec<&[u8]> =
                    rows.iter().map(|(k, _)| if let Key::Bytes(b) = k { &b[..] } else { &[][..] }).collect();
                Tensor::from_strings([n], &keys)?
            }
            DType::I32 => {
                let keys: Vec<i32> =
                    rows.iter().map(|(k, _)| if let Key::Int(i) = k { *i as i32 } else { 0 }).collect();
                Tensor::from_slice([n], &keys)?
            }
            _ => {
                let keys: Vec<i64> = rows.iter().map(|(k, _)| if let Key::Int(i) = k { *i } else { 0 }).collect();
                Tensor::from_slice([n], &keys)?
            }
        };
        let mut values = entries.values.empty_like();
        for (_, row) in &rows {
            values.push_from(&entries.values, *row);
        }
        Ok((keys, values.into_tensor(&[n])?))
    }
}

fn empty_column(dtype: DType) -> Column {
    match dtype {
        DType::I32 => Column::I32(Vec::new()),
        DType::F32 => Column::F32(Vec::new()),
        DType::F64 => Column::F64(Vec::new()),
        DType::Bool => Column::Bool(Vec::new()),
        DType::String => Column::Bytes(Vec::new()),
        _ => Column::I64(Vec::new()),
    }
}

fn overwrite(to: &mut Column, row: usize, from: &Column, i: usize) {
    match (to, from) {
        (Column::I64(t), Column::I64(f)) => t[row] = f[i],
        (Column::I32(t), Column::I32(f)) => t[row] = f[i],
        (Column::F32(t), Column::F32(f)) => t[row] = f[i],
        (Column::F64(t), Column::F64(f)) => t[row] = f[i],
        (Column::Bool(t), Column::Bool(f)) => t[row] = f[i],
        (Column::Bytes(t), Column::Bytes(f)) => t[row] = f[i].clone(),
        _ => unreachable!("columns of one table share a dtype"),
    }
}

const KEY_DTYPES: [DType; 3] = [DType::String, DType::I64, DType::I32];
const VALUE_DTYPES: [DType; 6] = [DType::I64, DType::I32, DType::F32, DType::F64, DType::String, DType::Bool];

// ---------------------------------------------------------------------------
// Signatures

fn table_signature(node: &NodeSpec) -> Result<OpSignature> {
    let (key, value) = (node.attr_dtype("key_dtype")?, node.attr_dtype("value_dtype")?);
    if !KEY_DTYPES.contains(&key) || !VALUE_DTYPES.contains(&value) {
        return Err(Status::unimplemented(format!(
            "node '{}' ({}): a table of {key} keys and {value} values (keys: string, int64, int32; values: int64, int32, float, double, string, bool)",
            node.name, node.op
        )));
    }
    Ok(OpSignature::new(vec![], vec![ValueType::Resource]))
}

/// Import, Initialize, Insert: `[table, keys, values] -> []`.
fn fill_signature(node: &NodeSpec) -> Result<OpSignature> {
    let (keys, values) = if node.op == "InitializeTableV2" {
        (node.attr_dtype("Tkey")?, node.attr_dtype("Tval")?)
    } else {
        (node.attr_dtype("Tin")?, node.attr_dtype("Tout")?)
    };
    Ok(OpSignature::new(vec![ValueType::Resource, ValueType::Tensor(keys), ValueType::Tensor(values)], vec![]))
}

/// `[table, keys, default] -> [values]`.
fn find_signature(node: &NodeSpec) -> Result<OpSignature> {
    let (keys, values) = (node.attr_dtype("Tin")?, node.attr_dtype("Tout")?);
    Ok(OpSignature::new(
        vec![ValueType::Resource, ValueType::Tensor(keys), ValueType::Tensor(values)],
        vec![ValueType::Tensor(values)],
    ))
}

/// `[table, filename] -> []`.
fn text_file_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Resource, ValueType::Tensor(DType::String)], vec![]))
}

fn size_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Resource], vec![ValueType::Tensor(DType::I64)]))
}

fn export_signature(node: &NodeSpec) -> Result<OpSignature> {
    let (keys, values) = (node.attr_dtype("Tkeys")?, node.attr_dtype("Tvalues")?);
    Ok(OpSignature::new(vec![ValueType::Resource], vec![ValueType::Tensor(keys), ValueType::Tensor(values)]))
}

// ---------------------------------------------------------------------------
// Kernels

/// The table behind `handle`, or FailedPrecondition naming it.
fn existing(resources: &ResourceMgr, handle: &ResourceHandle) -> Result<Arc<LookupTable>> {
    resources.table(&handle.container, &handle.name).ok_or_else(|| {
        Status::failed_precondition(format!(
            "Could not find table {} (container '{}'). It has not been created, or it has been destroyed.",
            handle.name, handle.container
        ))
    })
}

struct MakeTable<const MUTABLE: bool> {
    handle: Arc<ResourceHandle>,
    key_dtype: DType,
}

fn build_table<const MUTABLE: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let shared = node.attr_str_or("shared_name", "")?;
    // Without a shared name, a table is its node's own.
    let name = if shared.is_empty() { node.name.clone() } else { shared };
    Ok(Box::new(MakeTable::<MUTABLE> {
        handle: Arc::new(ResourceHandle {
            container: node.attr_str_or("container", "")?,
            name,
            dtype: node.attr_dtype("value_dtype")?,
        }),
        key_dtype: node.attr_dtype("key_dtype")?,
    }))
}

impl<const MUTABLE: bool> OpKernel for MakeTable<MUTABLE> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let handle = &self.handle;
        let table = ctx.resources().table_or_create(&handle.container, &handle.name, || {
            LookupTable::new(handle.name.clone(), self.key_dtype, handle.dtype, MUTABLE)
        });
        if table.key_dtype != self.key_dtype || table.value_dtype != handle.dtype || table.mutable != MUTABLE {
            return Err(Status::invalid_argument(format!(
                "table '{}' exists as a {} of {} keys and {} values, requested as another",
                handle.name,
                if table.mutable { "MutableHashTable" } else { "HashTable" },
                table.key_dtype,
                table.value_dtype
            )));
        }
        ctx.set_output_value(0, Value::Resource(handle.clone()));
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    Import,
    Initialize,
    Insert,
}

struct FillTable(Fill);

fn build_import(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(FillTable(Fill::Import)))
}

fn build_initialize(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(FillTable(Fill::Initialize)))
}

fn build_insert(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(FillTable(Fill::Insert)))
}

impl OpKernel for FillTable {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let table = existing(ctx.resources(), ctx.input_resource(0)?)?;
        table.fill(ctx.input(1)?, ctx.input(2)?, self.0)
    }
}

/// `InitializeTableFromTextFileV2`: fills a table from a vocabulary file,
/// one entry per line: the key and the value each a tab-separated field
/// (`delimiter`), the whole line (`-2`) or the line number plus `offset`
/// (`-1`); at most `vocab_size` lines when that is >= 0.
struct FromTextFile {
    key_index: i64,
    value_index: i64,
    vocab_size: Option<usize>,
    delimiter: Vec<u8>,
    offset: i64,
}

const WHOLE_LINE: i64 = -2;
const LINE_NUMBER: i64 = -1;

fn build_from_text_file(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let index = |key: &str| -> Result<i64> {
        let i = node.attr_int(key)?;
        if i < WHOLE_LINE {
            return Err(Status::invalid_argument(format!(
                "node '{}' ({}): {key} {i} (a field number, -1 for the line number or -2 for the whole line)",
                node.name, node.op
            )));
        }
        Ok(i)
    };
    Ok(Box::new(FromTextFile {
        key_index: index("key_index")?,
        value_index: index("value_index")?,
        vocab_size: usize::try_from(node.attr_int_or("vocab_size", -1)?).ok(),
        delimiter: node.attr_str_or("delimiter", "\t")?.into_bytes(),
        offset: node.attr_int_or("offset", 0)?,
    }))
}

impl FromTextFile {
    /// Column `index` of `lines` as a tensor of `dtype`.
    fn column(&self, lines: &[&[u8]], index: i64, dtype: DType, file: &str) -> Result<Tensor> {
        let field = |n: usize, line: &[u8]| -> Result<Vec<u8>> {
            match index {
                WHOLE_LINE => Ok(line.to_vec()),
                LINE_NUMBER => Ok((n as i64 + self.offset).to_string().into_bytes()),
                i => split_fields(line, &self.delimiter).nth(i as usize).map(<[u8]>::to_vec).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "{file} line {}: no field {i} in '{}'",
                        n + 1,
                        String::from_utf8_lossy(line)
                    ))
                }),
            }
        };
        let fields: Vec<Vec<u8>> = lines.iter().enumerate().map(|(n, l)| field(n, l)).collect::<Result<_>>()?;
        let n = fields.len();
        let parse = |n: usize, f: &[u8]| -> Result<i64> {
            std::str::from_utf8(f).ok().and_then(|s| s.trim().parse::<i64>().ok()).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "{file} line {}: '{}' is not an integer",
                    n + 1,
                    String::from_utf8_lossy(f)
                ))
            })
        };
        match dtype {
            DType::String => Tensor::from_strings([n], &fields),
            DType::I64 => {
                let v: Vec<i64> = fields.iter().enumerate().map(|(n, f)| parse(n, f)).collect::<Result<_>>()?;
                Tensor::from_slice([n], &v)
            }
            DType::I32 => {
                let v: Vec<i32> =
                    fields.iter().enumerate().map(|(n, f)| parse(n, f).map(|x| x as i32)).collect::<Result<_>>()?;
                Tensor::from_slice([n], &v)
            }
            other => Err(Status::unimplemented(format!("a table of {other} read from a text file"))),
        }
    }
}

fn split_fields<'a>(line: &'a [u8], delimiter: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut rest = Some(line);
    std::iter::from_fn(move || {
        let text = rest?;
        match text.windows(delimiter.len().max(1)).position(|w| w == delimiter) {
            Some(p) if !delimiter.is_empty() => {
                rest = Some(&text[p + delimiter.len()..]);
                Some(&text[..p])
            }
            _ => {
                rest = None;
                Some(text)
            }
        }
    })
}

impl OpKernel for FromTextFile {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let table = existing(ctx.resources(), ctx.input_resource(0)?)?;
        let path =
            String::from_utf8_lossy(ctx.input(1)?.string_value().map_err(|e| e.context("filename"))?).into_owned();
        let text = std::fs::read(&path).map_err(|e| Status::not_found(format!("vocabulary file {path}: {e}")))?;
        let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l)).collect();
        if lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        if let Some(limit) = self.vocab_size {
            if lines.len() < limit {
                return Err(Status::invalid_argument(format!(
                    "vocabulary file {path} has {} lines, vocab_size asks for {limit}",
                    lines.len()
                )));
            }
            lines.truncate(limit);
        }
        let keys = self.column(&lines, self.key_index, table.key_dtype, &path)?;
        let values = self.column(&lines, self.value_index, table.value_dtype, &path)?;
        table.fill(&keys, &values, Fill::Initialize)
    }
}

struct Find;

fn build_find(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Find))
}

impl OpKernel for Find {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let table = existing(ctx.resources(), ctx.input_resource(0)?)?;
        let found = table.find(ctx.input(1)?, ctx.input(2)?)?;
        ctx.set_output(0, found);
        Ok(())
    }
}

struct Size;

fn build_size(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Size))
}

impl OpKernel for Size {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let table = existing(ctx.resources(), ctx.input_resource(0)?)?;
        ctx.set_output(0, Tensor::scalar(table.len() as i64));
        Ok(())
    }
}

struct Export;

fn build_export(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Export))
}

impl OpKernel for Export {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let table = existing(ctx.resources(), ctx.input_resource(0)?)?;
        let (keys, values) = table.export()?;
        ctx.set_output(0, keys);
        ctx.set_output(1, values);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::ops::testing::ty;

    fn strings(v: &[&str]) -> Tensor {
        Tensor::from_strings([v.len()], v).unwrap()
    }

    fn i64s(v: &[i64]) -> Tensor {
        Tensor::from_slice([v.len()], v).unwrap()
    }

    #[test]
    fn a_hash_table_is_filled_once_and_maps_keys_with_a_default() {
        let table = LookupTable::new("vocab", DType::String, DType::I64, false);
        let default = Tensor::scalar(-1i64);
        let err = table.find(&strings(&["a"]), &default).unwrap_err();
        assert!(err.code == Code::FailedPrecondition && err.message.contains("'vocab' not initialized"), "{err}");
        table.fill(&strings(&["a", "b", "c"]), &i64s(&[1, 2, 3]), Fill::Import).unwrap();
        let keys = Tensor::from_strings([2, 2], &["c", "zz", "a", "b"]).unwrap();
        let found = table.find(&keys, &default).unwrap();
        assert_eq!(found.dims(), &[2, 2]);
        assert_eq!(found.as_slice::<i64>().unwrap(), &[3, -1, 1, 2]);
        assert_eq!(table.len(), 3);
        let again = table.fill(&strings(&["d"]), &i64s(&[4]), Fill::Initialize).unwrap_err();
        assert!(again.message.contains("already initialized"), "{again}");
        let insert = table.fill(&strings(&["d"]), &i64s(&[4]), Fill::Insert).unwrap_err();
        assert_eq!(insert.code, Code::Unimplemented);
        // Wrong dtypes and shapes name the table.
        let keys = table.find(&i64s(&[1]), &default).unwrap_err();
        assert!(keys.message.contains("'vocab'") && keys.message.contains("string keys"), "{keys}");
        let default = table.find(&strings(&["a"]), &Tensor::scalar(0.5f32)).unwrap_err();
        assert!(default.message.contains("default value"), "{default}");
    }

    #[test]
    fn a_mutable_table_is_replaced_by_imports_and_added_to_by_inserts() {
        let table = LookupTable::new("m", DType::I64, DType::String, true);
        let default = Tensor::string_scalar("?");
        // Empty, not unset.
        let found = table.find(&i64s(&[7]), &default).unwrap();
        assert_eq!(found.strings().unwrap().get(0), Some(&b"?"[..]));
        table.fill(&i64s(&[7, 8]), &strings(&["seven", "eight"]), Fill::Import).unwrap();
        table.fill(&i64s(&[9, 7]), &strings(&["nine", "SEVEN"]), Fill::Insert).unwrap();
        let found = table.find(&i64s(&[7, 8, 9, 10]), &default).unwrap();
        let got: Vec<&[u8]> = found.strings().unwrap().iter().collect();
        assert_eq!(got, [&b"SEVEN"[..], b"eight", b"nine", b"?"]);
        let (keys, values) = table.export().unwrap();
        assert_eq!(keys.as_slice::<i64>().unwrap(), &[7, 8, 9]);
        assert_eq!(values.strings().unwrap().get(2), Some(&b"nine"[..]));
        table.fill(&i64s(&[1]), &strings(&["one"]), Fill::Import).unwrap();
        assert_eq!(table.len(), 1, "an import replaces");
        let mismatch = table.fill(&i64s(&[1, 2]), &strings(&["one"]), Fill::Insert).unwrap_err();
        assert!(mismatch.message.contains("one value per key"), "{mismatch}");
    }

    #[test]
    fn a_vocabulary_file_fills_a_table_by_line_or_by_field() {
        let dir = tempfile::tempdir().unwrap();
        let vocab = dir.path().join("vocab.txt");
        std::fs::write(&vocab, "cat\t7\ndog\t9\r\nbird\t11\n").unwrap();
        let mgr = ResourceMgr::default();
        let path = Tensor::string_scalar(vocab.to_string_lossy().as_bytes());
        let load = |name: &str, key: i64, value: i64, size: i64, value_dtype: DType| {
            let table = mgr.table_or_create("", name, || LookupTable::new(name, DType::String, value_dtype, false));
            let handle = Arc::new(ResourceHandle { container: String::new(), name: name.into(), dtype: value_dtype });
            let node = NodeSpec::new("init", "InitializeTableFromTextFileV2")
                .attr("key_index", crate::graph::spec::AttrValue::Int(key))
                .attr("value_index", crate::graph::spec::AttrValue::Int(value))
                .attr("vocab_size", crate::graph::spec::AttrValue::Int(size));
            let run =
                crate::ops::run_kernel_once(&node, vec![Value::Resource(handle), Value::Tensor(path.clone())], &mgr);
            run.map(|_| table)
        };
        // Whole line -> line number (the StringLookup layout), tab-split.
        let by_line = load("by_line", -2, -1, -1, DType::I64).unwrap();
        let found = by_line.find(&strings(&["dog\t9", "bird\t11", "cat"]), &Tensor::scalar(-1i64)).unwrap();
        assert_eq!(found.as_slice::<i64>().unwrap(), &[1, 2, -1]);
        let by_field = load("by_field", 0, 1, 2, DType::I64).unwrap();
        let found = by_field.find(&strings(&["cat", "dog", "bird"]), &Tensor::scalar(-1i64)).unwrap();
        assert_eq!(found.as_slice::<i64>().unwrap(), &[7, 9, -1], "vocab_size 2 reads two lines");
        let short = load("short", 0, 1, 5, DType::I64).err().expect("five lines asked of three");
        assert!(short.message.contains("vocab.txt") && short.message.contains("3 lines"), "{short}");
        let not_int = load("not_int", 1, 0, -1, DType::I64).err().expect("keys are strings, values 'cat' are not ints");
        assert!(not_int.message.contains("line 1") && not_int.message.contains("'cat'"), "{not_int}");
        let no_field = load("no_field", 0, 3, -1, DType::I64).err().expect("no fourth field");
        assert!(no_field.message.contains("no field 3"), "{no_field}");
    }

    #[test]
    fn the_kernels_share_a_table_through_the_resource_manager() {
        let mgr = ResourceMgr::default();
        let run = |node: &NodeSpec, inputs: Vec<Value>| crate::ops::run_kernel_once(node, inputs, &mgr);
        let make = NodeSpec::new("t", "HashTableV2")
            .attr("key_dtype", ty(DType::String))
            .attr("value_dtype", ty(DType::I64))
            .attr("shared_name", crate::graph::spec::AttrValue::Bytes(b"hash_table_1".to_vec()));
        let handle = run(&make, vec![]).unwrap().remove(0);
        let import =
            NodeSpec::new("i", "LookupTableImportV2").attr("Tin", ty(DType::String)).attr("Tout", ty(DType::I64));
        run(&import, vec![handle.clone(), Value::Tensor(strings(&["x", "y"])), Value::Tensor(i64s(&[10, 20]))])
            .unwrap();
        let find = NodeSpec::new("f", "LookupTableFindV2").attr("Tin", ty(DType::String)).attr("Tout", ty(DType::I64));
        let found =
            run(&find, vec![handle.clone(), Value::Tensor(strings(&["y", "q"])), Value::Tensor(Tensor::scalar(0i64))])
                .unwrap();
        assert_eq!(found[0].as_tensor().unwrap().as_slice::<i64>().unwrap(), &[20, 0]);
        let size = run(&NodeSpec::new("s", "LookupTableSizeV2"), vec![handle.clone()]).unwrap();
        assert_eq!(size[0].as_tensor().unwrap().scalar_value::<i64>().unwrap(), 2);
        // Run again (a later step): the same table, still filled.
        let again = run(&make, vec![]).unwrap().remove(0);
        let found =
            run(&find, vec![again, Value::Tensor(strings(&["x"])), Value::Tensor(Tensor::scalar(0i64))]).unwrap();
        assert_eq!(found[0].as_tensor().unwrap().as_slice::<i64>().unwrap(), &[10]);
        // The same shared name as another kind of table is refused.
        let other = NodeSpec::new("t2", "MutableHashTableV2")
            .attr("key_dtype", ty(DType::String))
            .attr("value_dtype", ty(DType::I64))
            .attr("shared_name", crate::graph::spec::AttrValue::Bytes(b"hash_table_1".to_vec()));
        let err = run(&other, vec![]).unwrap_err();
        assert!(err.message.contains("hash_table_1"), "{err}");
        // Reset drops it: finds then name the table.
        mgr.clear(&[]);
        let err =
            run(&find, vec![handle, Value::Tensor(strings(&["x"])), Value::Tensor(Tensor::scalar(0i64))]).unwrap_err();
        assert!(err.code == Code::FailedPrecondition && err.message.contains("hash_table_1"), "{err}");
    }
}
