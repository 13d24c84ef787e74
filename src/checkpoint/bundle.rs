//! TensorFlow's tensor bundle: a checkpoint as `PREFIX.index` (a table of
//! tensor name → [`BundleEntryProto`], with the [`BundleHeaderProto`] under
//! the empty key) and `PREFIX.data-SSSSS-of-NNNNN` files holding the bytes.
//!
//! Owns: the file names, the byte encoding of each dtype in a data file,
//! writing one shard atomically, reading entries and tensors, and merging
//! the shards of a sharded save into one bundle. Must not know about
//! graphs or ops: the kernels hand over names and tensors.
//!
//! A tensor's bytes are its elements, little-endian (a bool is one byte),
//! and its entry's `crc32c` is the masked CRC32C of those bytes. A string
//! tensor's bytes are TensorFlow's: every length as a varint64, a 4-byte
//! length checksum, then the strings' bytes back to back. TensorFlow sums
//! the lengths as 32-bit little-endian integers, not as the varints it
//! writes (measured on its files): the length checksum is the masked
//! CRC32C of those integers, and the entry's checksum covers the integers,
//! the length checksum and the strings' bytes.

use super::crc;
use super::proto::{BundleEntryProto, BundleHeaderProto, LITTLE_ENDIAN, TensorShapeProto, VersionDef};
use super::table;
use crate::error::{Result, Status};
use crate::graph::import::proto::tensor_shape_proto::Dim;
use crate::graph::import::tf_number_of;
use crate::tensor::{DType, Shape, Tensor};
use prost::Message;
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The bundle format version written (TensorFlow's `kTensorBundleVersion`).
const BUNDLE_VERSION: i32 = 1;

/// `PREFIX.index`.
pub fn index_path(prefix: &str) -> String {
    format!("{prefix}.index")
}

/// `PREFIX.data-SSSSS-of-NNNNN`.
pub fn data_path(prefix: &str, shard: i32, num_shards: i32) -> String {
    format!("{prefix}.data-{shard:05}-of-{num_shards:05}")
}

/// The dtype of TensorFlow's `DataType` number, if the runtime has it.
pub fn dtype_of_tf_number(number: i32) -> Option<DType> {
    DType::ALL.into_iter().find(|&d| tf_number_of(d) == number)
}

/// The checksum TensorFlow sums a string's length into: the length as a
/// 32-bit little-endian integer (longer strings wrap, as in TensorFlow).
fn length_sum_bytes(len: usize) -> [u8; 4] {
    (len as u32).to_le_bytes()
}

/// The bytes a tensor occupies in a data file, and the (unmasked) CRC32C
/// its entry records.
pub fn encode_tensor(tensor: &Tensor) -> Result<(Vec<u8>, u32)> {
    if tensor.dtype() != DType::String {
        let bytes = tensor.as_bytes().to_vec();
        let sum = crc::crc32c(&bytes);
        return Ok((bytes, sum));
    }
    let strings = tensor.strings()?;
    let mut out = Vec::with_capacity(strings.data_len() + strings.len() * 2 + 4);
    let mut sum = 0u32;
    for s in strings.iter() {
        table::put_varint64(&mut out, s.len() as u64);
        sum = crc::extend(sum, &length_sum_bytes(s.len()));
    }
    let lengths_sum = crc::mask(sum).to_le_bytes();
    out.extend_from_slice(&lengths_sum);
    sum = crc::extend(sum, &lengths_sum);
    for s in strings.iter() {
        out.extend_from_slice(s);
        sum = crc::extend(sum, s);
    }
    Ok((out, sum))
}

/// The tensor of `dtype` and `shape` that `bytes` encode, and the
/// (unmasked) CRC32C its entry should record; errors say what is wrong and
/// the caller names the tensor and file.
pub fn decode_tensor(dtype: DType, shape: Shape, bytes: &[u8]) -> Result<(Tensor, u32)> {
    if dtype != DType::String {
        let tensor = Tensor::from_bytes(dtype, shape, bytes).map_err(|e| Status::data_loss(e.into_message()))?;
        return Ok((tensor, crc::crc32c(bytes)));
    }
    let count = shape.checked_num_elements().ok_or_else(|| Status::data_loss(format!("shape {shape} overflows")))?;
    let mut pos = 0usize;
    let mut lengths = Vec::with_capacity(count.min(bytes.len()));
    let mut sum = 0u32;
    for i in 0..count {
        let len = table::get_varint64(bytes, &mut pos)
            .and_then(|len| usize::try_from(len).ok())
            .ok_or_else(|| Status::data_loss(format!("the length of string {i} is truncated")))?;
        sum = crc::extend(sum, &length_sum_bytes(len));
        lengths.push(len);
    }
    let stored: [u8; 4] = bytes
        .get(pos..pos + 4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| Status::data_loss("the checksum of the string lengths is missing"))?;
    if crc::unmask(u32::from_le_bytes(stored)) != sum {
        return Err(Status::data_loss("the string lengths fail their checksum"));
    }
    sum = crc::extend(sum, &stored);
    pos += 4;
    let mut strings: Vec<&[u8]> = Vec::with_capacity(count);
    for (i, &len) in lengths.iter().enumerate() {
        let end = pos.checked_add(len).filter(|&e| e <= bytes.len());
        let Some(end) = end else {
            return Err(Status::data_loss(format!("string {i} ({len} bytes) runs past the tensor's bytes")));
        };
        strings.push(&bytes[pos..end]);
        sum = crc::extend(sum, &bytes[pos..end]);
        pos = end;
    }
    if pos != bytes.len() {
        return Err(Status::data_loss(format!("{} bytes follow the last string", bytes.len() - pos)));
    }
    Ok((Tensor::from_strings(shape, &strings)?, sum))
}

fn shape_proto(shape: &Shape) -> TensorShapeProto {
    TensorShapeProto {
        dim: shape.dims().iter().map(|&d| Dim { size: d as i64, name: String::new() }).collect(),
        unknown_rank: false,
    }
}

/// A name no other writer in this or another process picks at the same time.
fn temp_path(path: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{path}.tempstate{}_{nanos}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Temporary files that are removed unless [`TempFiles::commit`] renames
/// them into place.
struct TempFiles {
    /// (temporary path, final path), renamed in this order.
    files: Vec<(String, String)>,
}

impl TempFiles {
    fn write(&mut self, final_path: &str, bytes: &[u8]) -> Result<()> {
        self.write_with(final_path, |out| out.write_all(bytes))
    }

    /// Writes the temporary file of `final_path` through `fill`, buffered,
    /// and syncs it.
    fn write_with(
        &mut self,
        final_path: &str,
        fill: impl FnOnce(&mut std::io::BufWriter<File>) -> std::io::Result<()>,
    ) -> Result<()> {
        let temp = temp_path(final_path);
        self.files.push((temp.clone(), final_path.to_string()));
        let file = File::create(&temp).map_err(|e| io_error(e, "create", &temp))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        fill(&mut out).map_err(|e| io_error(e, "write", &temp))?;
        let file = out.into_inner().map_err(|e| io_error(e.into_error(), "write", &temp))?;
        file.sync_all().map_err(|e| io_error(e, "sync", &temp))
    }

    fn commit(mut self) -> Result<()> {
        while let Some((temp, final_path)) = self.files.first() {
            // On failure the files not yet renamed, this one included, are
            // removed by `drop`.
            fs::rename(temp, final_path)
                .map_err(|e| Status::from(e).context(format_args!("renaming '{temp}' to '{final_path}'")))?;
            self.files.remove(0);
        }
        Ok(())
    }
}

impl Drop for TempFiles {
    fn drop(&mut self) {
        for (temp, _) in &self.files {
            let _ = fs::remove_file(temp);
        }
    }
}

fn io_error(err: std::io::Error, verb: &str, path: &str) -> Status {
    let code = Status::from(err).code;
    Status::new(code, format!("cannot {verb} checkpoint file '{path}'"))
}

/// Creates the directory `prefix` lives in (a sharded save writes into a
/// fresh `..._temp` directory).
fn create_parent(prefix: &str) -> Result<()> {
    match Path::new(prefix).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => {
            fs::create_dir_all(dir).map_err(|e| io_error(e, "create the directory of", prefix))
        }
        _ => Ok(()),
    }
}

fn header_entry(num_shards: i32) -> Vec<u8> {
    BundleHeaderProto {
        num_shards,
        endianness: LITTLE_ENDIAN,
        version: Some(VersionDef { producer: BUNDLE_VERSION, min_consumer: 0, bad_consumers: Vec::new() }),
    }
    .encode_to_vec()
}

/// Writes `tensors` as a one-shard bundle at `prefix`: the index and
/// `PREFIX.data-00000-of-00001`. Both are written in full to temporary
/// files beside them and renamed into place only once every byte is on
/// disk, so a write that fails leaves any earlier checkpoint at `prefix`
/// as it was.
pub fn write_bundle(prefix: &str, tensors: &[(&str, &Tensor)]) -> Result<()> {
    let mut entries: BTreeMap<&str, BundleEntryProto> = BTreeMap::new();
    // Only strings are re-encoded; numbers go from the tensor to the file.
    let mut encoded_strings: Vec<Option<Vec<u8>>> = Vec::with_capacity(tensors.len());
    let mut offset = 0i64;
    for &(name, tensor) in tensors {
        if name.is_empty() {
            return Err(Status::invalid_argument(format!(
                "checkpoint '{prefix}': a tensor name is empty (the empty key holds the bundle header)"
            )));
        }
        let (size, sum) = if tensor.dtype() == DType::String {
            let (bytes, sum) = encode_tensor(tensor).map_err(|e| e.context(format_args!("saving tensor '{name}'")))?;
            let size = bytes.len();
            encoded_strings.push(Some(bytes));
            (size, sum)
        } else {
            encoded_strings.push(None);
            (tensor.byte_len(), crc::crc32c(tensor.as_bytes()))
        };
        let entry = BundleEntryProto {
            dtype: tf_number_of(tensor.dtype()),
            shape: Some(shape_proto(tensor.shape())),
            shard_id: 0,
            offset,
            size: size as i64,
            crc32c: crc::mask(sum),
            slices: Vec::new(),
        };
        if entries.insert(name, entry).is_some() {
            return Err(Status::invalid_argument(format!(
                "checkpoint '{prefix}': tensor '{name}' is saved twice in one call"
            )));
        }
        offset += size as i64;
    }
    let mut index: Vec<(Vec<u8>, Vec<u8>)> = vec![(Vec::new(), header_entry(1))];
    index.extend(entries.iter().map(|(name, entry)| (name.as_bytes().to_vec(), entry.encode_to_vec())));
    let index = table::build_table(&index, table::DEFAULT_BLOCK_SIZE)?;
    create_parent(prefix)?;
    let mut temps = TempFiles { files: Vec::new() };
    // Data first: an index is never renamed in before the bytes it points at.
    temps.write_with(&data_path(prefix, 0, 1), |out| {
        for (&(_, tensor), strings) in tensors.iter().zip(&encoded_strings) {
            out.write_all(strings.as_deref().unwrap_or(tensor.as_bytes()))?;
        }
        Ok(())
    })?;
    temps.write(&index_path(prefix), &index)?;
    temps.commit()
}

/// An opened bundle: its entries, read once, and its data files, opened
/// as tensors are read.
pub struct BundleReader {
    prefix: String,
    num_shards: i32,
    entries: BTreeMap<String, BundleEntryProto>,
    data_files: parking_lot::Mutex<BTreeMap<i32, std::sync::Arc<File>>>,
}

impl BundleReader {
    /// Reads `PREFIX.index`. A missing index is NotFound naming it; a
    /// damaged one DataLoss naming it.
    pub fn open(prefix: &str) -> Result<BundleReader> {
        let index_file = index_path(prefix);
        let bytes = fs::read(&index_file).map_err(|e| {
            let code = Status::from(e).code;
            Status::new(code, format!("cannot read checkpoint index '{index_file}'"))
        })?;
        let corrupt = |what: String| Status::data_loss(format!("checkpoint index '{index_file}' is corrupt: {what}"));
        let mut rows = table::read_table(&bytes, &index_file)?.into_iter();
        let header = match rows.next() {
            Some((key, value)) if key.is_empty() => BundleHeaderProto::decode(value.as_slice())
                .map_err(|e| corrupt(format!("the bundle header does not decode: {e}")))?,
            _ => return Err(corrupt("no bundle header under the empty key".into())),
        };
        if header.endianness != LITTLE_ENDIAN {
            return Err(Status::unimplemented(format!("checkpoint '{index_file}' is big-endian")));
        }
        if let Some(version) = &header.version
            && (version.min_consumer > BUNDLE_VERSION || version.bad_consumers.contains(&BUNDLE_VERSION))
        {
            return Err(Status::failed_precondition(format!(
                "checkpoint '{index_file}' needs bundle reader version {} or newer (this one is {BUNDLE_VERSION})",
                version.min_consumer
            )));
        }
        if header.num_shards < 1 {
            return Err(corrupt(format!("num_shards is {}", header.num_shards)));
        }
        let mut entries = BTreeMap::new();
        for (key, value) in rows {
            let name = String::from_utf8(key).map_err(|_| corrupt("a tensor name is not UTF-8".into()))?;
            let entry = BundleEntryProto::decode(value.as_slice())
                .map_err(|e| corrupt(format!("the entry of tensor '{name}' does not decode: {e}")))?;
            if entry.shard_id < 0 || entry.shard_id >= header.num_shards {
                return Err(corrupt(format!(
                    "tensor '{name}' is in shard {} of {}",
                    entry.shard_id, header.num_shards
                )));
            }
            entries.insert(name, entry);
        }
        Ok(BundleReader {
            prefix: prefix.to_string(),
            num_shards: header.num_shards,
            entries,
            data_files: parking_lot::Mutex::new(BTreeMap::new()),
        })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn num_shards(&self) -> i32 {
        self.num_shards
    }

    /// The tensor names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The entry of `name`, or NotFound naming the tensor and the index.
    pub fn entry(&self, name: &str) -> Result<&BundleEntryProto> {
        self.entries.get(name).ok_or_else(|| {
            Status::not_found(format!(
                "Key {name} not found in checkpoint '{}' (index '{}')",
                self.prefix,
                index_path(&self.prefix)
            ))
        })
    }

    /// The dtype and shape `name` was saved with.
    pub fn dtype_and_shape(&self, name: &str) -> Result<(DType, Shape)> {
        let entry = self.entry(name)?;
        let dtype = dtype_of_tf_number(entry.dtype).ok_or_else(|| {
            Status::unimplemented(format!(
                "tensor '{name}' in checkpoint '{}' has TensorFlow dtype #{}, which ringflow does not support",
                self.prefix, entry.dtype
            ))
        })?;
        let dims = entry.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or_default();
        let mut shape = Vec::with_capacity(dims.len());
        for d in dims {
            let size = usize::try_from(d.size).map_err(|_| {
                Status::data_loss(format!("tensor '{name}' in '{}' has dimension {}", index_path(&self.prefix), d.size))
            })?;
            shape.push(size);
        }
        Ok((dtype, Shape::from_vec(shape)))
    }

    fn data_file(&self, shard: i32) -> Result<std::sync::Arc<File>> {
        let mut files = self.data_files.lock();
        if let Some(file) = files.get(&shard) {
            return Ok(file.clone());
        }
        let path = data_path(&self.prefix, shard, self.num_shards);
        let file = File::open(&path).map_err(|e| {
            let code = Status::from(e).code;
            Status::new(code, format!("cannot open checkpoint data file '{path}'"))
        })?;
        let file = std::sync::Arc::new(file);
        files.insert(shard, file.clone());
        Ok(file)
    }

    /// The tensor saved as `name`, its checksum verified: a mismatch or a
    /// short file is DataLoss naming the data file and the tensor.
    pub fn read(&self, name: &str) -> Result<Tensor> {
        let (dtype, shape) = self.dtype_and_shape(name)?;
        let entry = self.entry(name)?;
        let path = data_path(&self.prefix, entry.shard_id, self.num_shards);
        let lost = |what: String| Status::data_loss(format!("checkpoint data file '{path}', tensor '{name}': {what}"));
        if !entry.slices.is_empty() {
            return Err(Status::unimplemented(format!(
                "tensor '{name}' in checkpoint '{}' is saved in {} slices (a partitioned variable); \
                 ringflow restores whole tensors only",
                self.prefix,
                entry.slices.len()
            )));
        }
        let (Ok(offset), Ok(size)) = (u64::try_from(entry.offset), usize::try_from(entry.size)) else {
            return Err(lost(format!("bad offset {} or size {}", entry.offset, entry.size)));
        };
        let file = self.data_file(entry.shard_id)?;
        let file_len = file.metadata().map_err(|e| io_error(e, "stat", &path))?.len();
        if offset.checked_add(size as u64).is_none_or(|end| end > file_len) {
            return Err(lost(format!("bytes {offset}..+{size} run past the end of the file ({file_len} bytes)")));
        }
        let mut bytes = vec![0u8; size];
        file.read_exact_at(&mut bytes, offset).map_err(|e| io_error(e, "read", &path))?;
        let (tensor, actual) = decode_tensor(dtype, shape, &bytes).map_err(|e| lost(e.into_message()))?;
        if crc::unmask(entry.crc32c) != actual {
            return Err(lost(format!(
                "checksum mismatch (stored {:#010x}, computed {actual:#010x})",
                crc::unmask(entry.crc32c)
            )));
        }
        Ok(tensor)
    }
}

/// Merges the one-or-more-shard bundles at `sources` into one bundle at
/// `destination`, as a sharded save ends: the shards' data files are renamed
/// to `DEST.data-SSSSS-of-NNNNN` in `sources` order, one index listing every
/// tensor is written (atomically), and the sources' index files are
/// deleted, with their directories when `delete_old_dirs` (a directory that
/// is not empty stays). With `allow_missing_files`, a source without an
/// index is skipped.
pub fn merge_bundles(
    sources: &[String],
    destination: &str,
    delete_old_dirs: bool,
    allow_missing_files: bool,
) -> Result<()> {
    let mut readers = Vec::with_capacity(sources.len());
    for source in sources {
        match BundleReader::open(source) {
            Ok(reader) => readers.push(reader),
            Err(e) if allow_missing_files && e.code == crate::error::Code::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    if readers.is_empty() {
        return Err(Status::invalid_argument(format!(
            "merging checkpoint '{destination}': none of the {} source prefixes has an index",
            sources.len()
        )));
    }
    let total_shards = readers
        .iter()
        .try_fold(0i32, |total, r| total.checked_add(r.num_shards()))
        .ok_or_else(|| Status::invalid_argument(format!("merging checkpoint '{destination}': too many shards")))?;
    let mut merged: BTreeMap<String, BundleEntryProto> = BTreeMap::new();
    let mut renames = Vec::new();
    let mut first_shard = 0;
    for reader in &readers {
        for (name, entry) in &reader.entries {
            let mut entry = entry.clone();
            entry.shard_id += first_shard;
            if merged.insert(name.clone(), entry).is_some() {
                return Err(Status::invalid_argument(format!(
                    "merging checkpoint '{destination}': tensor '{name}' is in more than one shard \
                     (again in '{}')",
                    reader.prefix
                )));
            }
        }
        for shard in 0..reader.num_shards {
            renames.push((
                data_path(&reader.prefix, shard, reader.num_shards),
                data_path(destination, first_shard + shard, total_shards),
            ));
        }
        first_shard += reader.num_shards;
    }
    let mut index: Vec<(Vec<u8>, Vec<u8>)> = vec![(Vec::new(), header_entry(total_shards))];
    index.extend(merged.iter().map(|(name, entry)| (name.as_bytes().to_vec(), entry.encode_to_vec())));
    let index = table::build_table(&index, table::DEFAULT_BLOCK_SIZE)?;
    create_parent(destination)?;
    // The merged index is on disk before any data file moves, so what can
    // still fail after the first rename is only a rename.
    let mut temps = TempFiles { files: Vec::new() };
    temps.write(&index_path(destination), &index)?;
    for (from, to) in &renames {
        fs::rename(from, to).map_err(|e| Status::from(e).context(format_args!("renaming '{from}' to '{to}'")))?;
    }
    temps.commit()?;
    for reader in &readers {
        let old_index = index_path(&reader.prefix);
        fs::remove_file(&old_index).map_err(|e| io_error(e, "delete", &old_index))?;
        if delete_old_dirs && let Some(dir) = Path::new(&reader.prefix).parent() {
            // As TensorFlow does: a directory still holding other files stays.
            let _ = fs::remove_dir(dir);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    fn every_dtype() -> Vec<(&'static str, Tensor)> {
        vec![
            ("f32", Tensor::from_slice::<f32>([2, 3], &[1.5, -2.0, 0.0, f32::MAX, f32::MIN_POSITIVE, -0.0]).unwrap()),
            ("f64", Tensor::from_slice::<f64>([3], &[std::f64::consts::PI, -1e300, 7.0]).unwrap()),
            ("i32", Tensor::from_slice::<i32>([2, 2], &[i32::MIN, -1, 0, i32::MAX]).unwrap()),
            ("i64", Tensor::from_slice::<i64>([2], &[i64::MIN, 1 << 40]).unwrap()),
            ("bool", Tensor::from_slice::<bool>([3], &[true, false, true]).unwrap()),
            ("scalar", Tensor::scalar(42.0f32)),
            ("empty", Tensor::zeros(DType::F32, [0, 4]).unwrap()),
            ("str", Tensor::from_strings([2, 2], &[&b"ab"[..], b"", b"\x00\xff", &[b'x'; 300]]).unwrap()),
            ("str_scalar", Tensor::string_scalar("model.ckpt")),
        ]
    }

    fn same(a: &Tensor, b: &Tensor) -> bool {
        a.dtype() == b.dtype() && a.shape() == b.shape() && a.as_bytes() == b.as_bytes()
    }

    fn write(prefix: &str, tensors: &[(&'static str, Tensor)]) -> Result<()> {
        let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
        write_bundle(prefix, &refs)
    }

    #[test]
    fn strings_encode_as_varint_lengths_a_checksum_then_bytes() {
        let t = Tensor::from_strings([3], &[&b"ab"[..], b"", &[b'z'; 200]]).unwrap();
        let (bytes, sum) = encode_tensor(&t).unwrap();
        assert_eq!(&bytes[..4], &[2u8, 0, 0xc8, 0x01]);
        let lengths_as_u32: Vec<u8> = [2u32, 0, 200].iter().flat_map(|l| l.to_le_bytes()).collect();
        let lengths_sum = crc::mask(crc::crc32c(&lengths_as_u32)).to_le_bytes();
        assert_eq!(&bytes[4..8], &lengths_sum);
        assert_eq!(&bytes[8..10], b"ab");
        assert_eq!(bytes.len(), 8 + 202);
        let whole = [&lengths_as_u32[..], &lengths_sum, &bytes[8..]].concat();
        assert_eq!(sum, crc::crc32c(&whole));
        let shape = || Shape::from_vec(vec![3]);
        let (back, back_sum) = decode_tensor(DType::String, shape(), &bytes).unwrap();
        assert!(same(&back, &t));
        assert_eq!(back_sum, sum);
        let mut bad = bytes.clone();
        bad[2] ^= 1;
        assert_eq!(decode_tensor(DType::String, shape(), &bad).unwrap_err().code, Code::DataLoss);
        let err = decode_tensor(DType::String, shape(), &bytes[..bytes.len() - 1]).unwrap_err();
        assert!(err.message.contains("string 2"), "{err}");
    }

    #[test]
    fn every_dtype_round_trips_through_a_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("model.ckpt-7").to_string_lossy().into_owned();
        let tensors = every_dtype();
        write(&prefix, &tensors).unwrap();
        assert!(Path::new(&data_path(&prefix, 0, 1)).exists());
        let reader = BundleReader::open(&prefix).unwrap();
        let mut names: Vec<&str> = tensors.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        assert_eq!(reader.names().collect::<Vec<_>>(), names);
        for (name, tensor) in &tensors {
            let back = reader.read(name).unwrap();
            assert!(same(&back, tensor), "{name}: {back:?} != {tensor:?}");
        }
        let err = reader.read("nope").unwrap_err();
        assert_eq!(err.code, Code::NotFound);
        assert!(err.message.contains("nope") && err.message.contains("model.ckpt-7"), "{err}");
        // Nothing but the two files is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_flipped_data_byte_is_data_loss_naming_file_and_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("ckpt").to_string_lossy().into_owned();
        write(&prefix, &every_dtype()).unwrap();
        let reader = BundleReader::open(&prefix).unwrap();
        let entry = reader.entry("i64").unwrap().clone();
        let data = data_path(&prefix, 0, 1);
        let mut bytes = fs::read(&data).unwrap();
        bytes[entry.offset as usize + 3] ^= 0x10;
        fs::write(&data, &bytes).unwrap();
        let err = BundleReader::open(&prefix).unwrap().read("i64").unwrap_err();
        assert_eq!(err.code, Code::DataLoss);
        assert!(err.message.contains(&data) && err.message.contains("'i64'"), "{err}");
        assert!(BundleReader::open(&prefix).unwrap().read("f32").is_ok());
        let index = index_path(&prefix);
        let mut bytes = fs::read(&index).unwrap();
        bytes[5] ^= 0x01;
        fs::write(&index, &bytes).unwrap();
        let err = BundleReader::open(&prefix).err().unwrap();
        assert_eq!(err.code, Code::DataLoss);
        assert!(err.message.contains(&index), "{err}");
    }

    #[test]
    fn a_failing_write_leaves_the_old_checkpoint_intact() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("ckpt").to_string_lossy().into_owned();
        let old = vec![("w", Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap())];
        write(&prefix, &old).unwrap();
        // A duplicate name fails after the first tensor was encoded.
        let new = vec![("w", Tensor::scalar(9.0f32)), ("w", Tensor::scalar(8.0f32))];
        assert_eq!(write(&prefix, &new).unwrap_err().code, Code::InvalidArgument);
        // The data file's final name is a directory: writing the data
        // succeeds, renaming it in fails, and the index is never replaced.
        let other = dir.path().join("other").to_string_lossy().into_owned();
        write(&other, &old).unwrap();
        fs::remove_file(data_path(&other, 0, 1)).unwrap();
        fs::create_dir(data_path(&other, 0, 1)).unwrap();
        fs::create_dir(Path::new(&data_path(&other, 0, 1)).join("occupied")).unwrap();
        let err = write(&other, &new[..1]).unwrap_err();
        assert!(err.message.contains("renaming"), "{err}");
        let old_index = fs::read(index_path(&other)).unwrap();
        assert_eq!(table::read_table(&old_index, "i").unwrap().len(), 2);
        let reader = BundleReader::open(&prefix).unwrap();
        assert!(same(&reader.read("w").unwrap(), &old[0].1));
        // No temporary file survives either failure.
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("tempstate"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn merged_shards_read_as_one_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("model").to_string_lossy().into_owned();
        let tensors = every_dtype();
        let (first, second) = tensors.split_at(4);
        let parts: Vec<String> = (0..2).map(|i| format!("{base}_temp/part-{i:05}-of-00002")).collect();
        write(&parts[0], first).unwrap();
        write(&parts[1], second).unwrap();
        merge_bundles(&parts, &base, true, false).unwrap();
        assert!(!Path::new(&format!("{base}_temp")).exists(), "the temp directory should be gone");
        assert!(Path::new(&data_path(&base, 1, 2)).exists());
        let reader = BundleReader::open(&base).unwrap();
        assert_eq!(reader.num_shards(), 2);
        for (name, tensor) in &tensors {
            assert!(same(&reader.read(name).unwrap(), tensor), "{name}");
        }
        assert_eq!(reader.entry("str").unwrap().shard_id, 1);
        // Merging what is already merged finds no sources.
        let err = merge_bundles(&parts, &base, true, false).unwrap_err();
        assert_eq!(err.code, Code::NotFound);
    }
}
