//! The sorted-string table TensorFlow keeps a checkpoint's index in (the
//! LevelDB table layout), written whole and read whole: an index file holds
//! one entry per tensor, so it fits in memory.
//!
//! Owns: blocks (prefix-compressed keys, restart points), block trailers
//! (compression byte + masked CRC32C), the index and metaindex blocks and
//! the 48-byte footer. Must not know what keys and values mean; the bundle
//! layer gives and takes byte strings, and names the file for messages.
//!
//! ```text
//! file    data block* | metaindex block | index block | footer (48 bytes)
//! block   entry* | restart u32 * n | n u32 | then a 5-byte trailer:
//!         compression u8 (0 = none) | masked crc32c(block ++ compression) u32
//! entry   shared varint32 | unshared varint32 | value_len varint32 |
//!         key[shared..] | value
//! handle  offset varint64 | size varint64 (size excludes the trailer)
//! footer  metaindex handle | index handle | zero padding to 40 bytes |
//!         magic u64 0xdb4775248b80fb57 (all integers little-endian)
//! ```
//! The index block maps, for each data block, a key at least as large as
//! the block's last key (we store that last key) to the block's handle.

use super::crc;
use crate::error::{Result, Status};

/// The table magic number, the footer's last eight bytes.
pub const TABLE_MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// Bytes of the footer.
pub const FOOTER_LEN: usize = 48;
/// Bytes after each block: compression type and masked CRC32C.
const TRAILER_LEN: usize = 5;
/// Longest encoding of a block handle (two varint64s).
const MAX_HANDLE_LEN: usize = 20;
/// Data blocks close once they pass this many bytes (TensorFlow's default).
pub const DEFAULT_BLOCK_SIZE: usize = 256 * 1024;
/// Keys between full (unshared) keys in data blocks.
const DATA_RESTART_INTERVAL: usize = 16;
const NO_COMPRESSION: u8 = 0;
const SNAPPY_COMPRESSION: u8 = 1;

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends the varint64 encoding of `value` (also the varint32 encoding of
/// values that fit in 32 bits).
pub fn put_varint64(out: &mut Vec<u8>, value: u64) {
    put_varint(out, value);
}

/// Reads a varint64 at `*pos`, advancing it; `None` when truncated or
/// longer than ten bytes.
pub fn get_varint64(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn get_varint32(bytes: &[u8], pos: &mut usize) -> Option<usize> {
    get_varint64(bytes, pos).filter(|&v| v <= u64::from(u32::MAX)).map(|v| v as usize)
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let four = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([four[0], four[1], four[2], four[3]]))
}

/// Where a block sits in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    fn encode_into(self, out: &mut Vec<u8>) {
        put_varint64(out, self.offset);
        put_varint64(out, self.size);
    }

    fn decode(bytes: &[u8], pos: &mut usize) -> Option<BlockHandle> {
        let offset = get_varint64(bytes, pos)?;
        let size = get_varint64(bytes, pos)?;
        Some(BlockHandle { offset, size })
    }
}

/// Builds one block: entries in key order, a full key every
/// `restart_interval` entries.
struct BlockBuilder {
    bytes: Vec<u8>,
    restarts: Vec<u32>,
    since_restart: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder { bytes: Vec::new(), restarts: vec![0], since_restart: 0, restart_interval, last_key: Vec::new() }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn estimated_len(&self) -> usize {
        self.bytes.len() + 4 * (self.restarts.len() + 1)
    }

    fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.since_restart < self.restart_interval {
            self.last_key.iter().zip(key).take_while(|(a, b)| a == b).count()
        } else {
            self.restarts.push(self.bytes.len() as u32);
            self.since_restart = 0;
            0
        };
        put_varint64(&mut self.bytes, shared as u64);
        put_varint64(&mut self.bytes, (key.len() - shared) as u64);
        put_varint64(&mut self.bytes, value.len() as u64);
        self.bytes.extend_from_slice(&key[shared..]);
        self.bytes.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.since_restart += 1;
    }

    /// The finished block's bytes; the builder starts over.
    fn finish(&mut self) -> Vec<u8> {
        let mut block = std::mem::take(&mut self.bytes);
        for &restart in &self.restarts {
            block.extend_from_slice(&restart.to_le_bytes());
        }
        block.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts = vec![0];
        self.since_restart = 0;
        self.last_key.clear();
        block
    }
}

/// Appends `block` and its uncompressed trailer to `file`; its handle.
fn append_block(file: &mut Vec<u8>, block: &[u8]) -> BlockHandle {
    let handle = BlockHandle { offset: file.len() as u64, size: block.len() as u64 };
    file.extend_from_slice(block);
    let sum = crc::extend(crc::crc32c(block), &[NO_COMPRESSION]);
    file.push(NO_COMPRESSION);
    file.extend_from_slice(&crc::mask(sum).to_le_bytes());
    handle
}

/// The bytes of a table holding `entries`, whose keys must be strictly
/// increasing (bytewise); data blocks close past `block_size` bytes.
pub fn build_table<K: AsRef<[u8]>, V: AsRef<[u8]>>(entries: &[(K, V)], block_size: usize) -> Result<Vec<u8>> {
    if let Some(pair) = entries.windows(2).find(|w| w[0].0.as_ref() >= w[1].0.as_ref()) {
        return Err(Status::internal(format!(
            "table keys must be strictly increasing: {:?} is followed by {:?}",
            String::from_utf8_lossy(pair[0].0.as_ref()),
            String::from_utf8_lossy(pair[1].0.as_ref())
        )));
    }
    let mut file = Vec::new();
    let mut data = BlockBuilder::new(DATA_RESTART_INTERVAL);
    let mut index = BlockBuilder::new(1);
    let close_data_block = |data: &mut BlockBuilder, file: &mut Vec<u8>, index: &mut BlockBuilder| {
        let last_key = data.last_key.clone();
        let handle = append_block(file, &data.finish());
        let mut encoded = Vec::with_capacity(MAX_HANDLE_LEN);
        handle.encode_into(&mut encoded);
        index.add(&last_key, &encoded);
    };
    for (key, value) in entries {
        data.add(key.as_ref(), value.as_ref());
        if data.estimated_len() >= block_size {
            close_data_block(&mut data, &mut file, &mut index);
        }
    }
    if !data.is_empty() {
        close_data_block(&mut data, &mut file, &mut index);
    }
    let metaindex = append_block(&mut file, &BlockBuilder::new(1).finish());
    let index_handle = append_block(&mut file, &index.finish());
    let mut footer = Vec::with_capacity(FOOTER_LEN);
    metaindex.encode_into(&mut footer);
    index_handle.encode_into(&mut footer);
    footer.resize(FOOTER_LEN - 8, 0);
    footer.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
    file.extend_from_slice(&footer);
    Ok(file)
}

/// Reads tables, naming `file` in every error.
struct TableReader<'a> {
    bytes: &'a [u8],
    file: &'a str,
}

impl<'a> TableReader<'a> {
    fn corrupt(&self, what: impl std::fmt::Display) -> Status {
        Status::data_loss(format!("checkpoint index '{}' is corrupt: {what}", self.file))
    }

    /// The contents of the block at `handle`, its checksum verified.
    fn block(&self, handle: BlockHandle, what: &str) -> Result<&'a [u8]> {
        let start = usize::try_from(handle.offset).ok();
        let end = start.zip(usize::try_from(handle.size).ok()).and_then(|(s, n)| s.checked_add(n));
        let (Some(start), Some(end)) = (start, end) else {
            return Err(self.corrupt(format_args!("{what} block handle {handle:?} is out of range")));
        };
        let Some(with_trailer) = end.checked_add(TRAILER_LEN).and_then(|e| self.bytes.get(start..e)) else {
            return Err(self.corrupt(format_args!(
                "{what} block at offset {start} ({} bytes) runs past the end of the file ({} bytes)",
                handle.size,
                self.bytes.len()
            )));
        };
        let (contents, trailer) = with_trailer.split_at(end - start);
        let compression = trailer[0];
        let stored = read_u32(trailer, 1).ok_or_else(|| self.corrupt("short block trailer"))?;
        let actual = crc::extend(crc::crc32c(contents), &trailer[..1]);
        if crc::unmask(stored) != actual {
            return Err(self.corrupt(format_args!(
                "{what} block at offset {start} fails its checksum (stored {:#010x}, computed {:#010x})",
                crc::unmask(stored),
                actual
            )));
        }
        match compression {
            NO_COMPRESSION => Ok(contents),
            SNAPPY_COMPRESSION => Err(Status::unimplemented(format!(
                "checkpoint index '{}': {what} block at offset {start} is snappy-compressed; only uncompressed tables are read",
                self.file
            ))),
            other => Err(self.corrupt(format_args!("{what} block at offset {start} has compression type {other}"))),
        }
    }

    /// The entries of one block, in order.
    fn entries(&self, block: &[u8], what: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let bad = |detail: &str| self.corrupt(format_args!("{what} block: {detail}"));
        let len = block.len();
        let count = len.checked_sub(4).and_then(|at| read_u32(block, at)).ok_or_else(|| bad("shorter than 4 bytes"))?;
        let restarts_len = (count as usize).checked_mul(4).and_then(|n| n.checked_add(4));
        let Some(data_end) = restarts_len.and_then(|n| len.checked_sub(n)) else {
            return Err(bad("its restart array does not fit"));
        };
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut pos = 0usize;
        let mut key: Vec<u8> = Vec::new();
        while pos < data_end {
            let header = (|| {
                let shared = get_varint32(block, &mut pos)?;
                let unshared = get_varint32(block, &mut pos)?;
                let value_len = get_varint32(block, &mut pos)?;
                Some((shared, unshared, value_len))
            })();
            let Some((shared, unshared, value_len)) = header else {
                return Err(bad("truncated entry header"));
            };
            if shared > key.len() {
                return Err(bad("an entry shares more key bytes than the previous key has"));
            }
            let key_end = pos.checked_add(unshared).filter(|&e| e <= data_end);
            let value_end = key_end.and_then(|k| k.checked_add(value_len)).filter(|&e| e <= data_end);
            let (Some(key_end), Some(value_end)) = (key_end, value_end) else {
                return Err(bad("an entry runs past the block's data"));
            };
            key.truncate(shared);
            key.extend_from_slice(&block[pos..key_end]);
            entries.push((key.clone(), block[key_end..value_end].to_vec()));
            pos = value_end;
        }
        Ok(entries)
    }
}

/// Every entry of the table in `bytes` (the contents of `file`), in key
/// order. Corruption is DataLoss naming the file.
pub fn read_table(bytes: &[u8], file: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let reader = TableReader { bytes, file };
    let Some(footer_start) = bytes.len().checked_sub(FOOTER_LEN) else {
        return Err(reader.corrupt(format_args!("{} bytes cannot hold the {FOOTER_LEN}-byte footer", bytes.len())));
    };
    let footer = &bytes[footer_start..];
    let magic = u64::from_le_bytes(footer[FOOTER_LEN - 8..].try_into().map_err(|_| reader.corrupt("footer"))?);
    if magic != TABLE_MAGIC {
        return Err(reader.corrupt(format_args!("bad table magic {magic:#018x} (not a checkpoint index)")));
    }
    let mut pos = 0;
    let handles = BlockHandle::decode(footer, &mut pos).zip(BlockHandle::decode(footer, &mut pos));
    let Some((metaindex, index_handle)) = handles.filter(|_| pos <= FOOTER_LEN - 8) else {
        return Err(reader.corrupt("the footer's block handles do not decode"));
    };
    // Bundles keep nothing in the metaindex; it is checked, not used.
    reader.entries(reader.block(metaindex, "metaindex")?, "metaindex")?;
    let index = reader.block(index_handle, "index")?;
    let mut entries = Vec::new();
    for (_, encoded) in reader.entries(index, "index")? {
        let mut pos = 0;
        let handle = BlockHandle::decode(&encoded, &mut pos)
            .ok_or_else(|| reader.corrupt("an index entry does not hold a block handle"))?;
        let block = reader.block(handle, "data")?;
        entries.extend(reader.entries(block, "data")?);
    }
    if let Some(pair) = entries.windows(2).find(|w| w[0].0 >= w[1].0) {
        return Err(reader.corrupt(format_args!(
            "keys out of order: {:?} before {:?}",
            String::from_utf8_lossy(&pair[0].0),
            String::from_utf8_lossy(&pair[1].0)
        )));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    fn sample(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut entries = vec![(Vec::new(), b"header".to_vec())];
        for i in 0..n {
            let key = format!("layer_{:03}/kernel/Momentum", i).into_bytes();
            entries.push((key, vec![i as u8; i % 7]));
        }
        entries
    }

    #[test]
    fn varints_round_trip_at_their_boundaries() {
        for value in [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_varint64(&mut out, value);
            let mut pos = 0;
            assert_eq!(get_varint64(&out, &mut pos), Some(value));
            assert_eq!(pos, out.len());
            let mut pos = 0;
            assert_eq!(get_varint64(&out[..out.len() - 1], &mut pos), None);
        }
    }

    #[test]
    fn one_block_table_round_trips_and_ends_with_the_footer() {
        let entries = sample(40);
        let table = build_table(&entries, DEFAULT_BLOCK_SIZE).unwrap();
        assert_eq!(&table[table.len() - 8..], &TABLE_MAGIC.to_le_bytes());
        assert_eq!(read_table(&table, "t.index").unwrap(), entries);
    }

    #[test]
    fn many_block_table_round_trips() {
        let entries = sample(300);
        let table = build_table(&entries, 256).unwrap();
        assert!(table.len() > 300 * 20);
        assert_eq!(read_table(&table, "t.index").unwrap(), entries);
        let empty: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        assert!(read_table(&build_table(&empty, 256).unwrap(), "e").unwrap().is_empty());
    }

    #[test]
    fn keys_share_prefixes_between_restarts() {
        let mut block = BlockBuilder::new(DATA_RESTART_INTERVAL);
        let keys: Vec<String> = (0..32).map(|i| format!("layer_{i:03}/kernel")).collect();
        for key in &keys {
            block.add(key.as_bytes(), b"");
        }
        let bytes = block.finish();
        // Two restarts, at entries 0 and 16, each a whole key (shared 0,
        // unshared 16); every other key shares its "layer_0" prefix.
        assert_eq!(read_u32(&bytes, bytes.len() - 4), Some(2));
        assert_eq!(read_u32(&bytes, bytes.len() - 12), Some(0));
        let second = read_u32(&bytes, bytes.len() - 8).unwrap() as usize;
        assert_eq!(&bytes[second..second + 2], &[0, 16]);
        assert_eq!(&bytes[19..21], &[8, 8]);
        let raw_keys: usize = keys.iter().map(String::len).sum();
        assert!(bytes.len() < raw_keys, "{} bytes for {raw_keys} bytes of keys", bytes.len());
        let reader = TableReader { bytes: &[], file: "t" };
        let back: Vec<Vec<u8>> = reader.entries(&bytes, "data").unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(back, keys.iter().map(|k| k.as_bytes().to_vec()).collect::<Vec<_>>());
    }

    #[test]
    fn unsorted_keys_are_refused() {
        let entries = vec![(b"b".to_vec(), vec![]), (b"a".to_vec(), vec![])];
        assert_eq!(build_table(&entries, 64).unwrap_err().code, Code::Internal);
    }

    #[test]
    fn any_flipped_byte_is_data_loss_naming_the_file() {
        let table = build_table(&sample(30), 200).unwrap();
        // Every byte before the footer is under a block checksum; the
        // footer's padding is not read.
        let checked = (0..table.len() - FOOTER_LEN).chain(table.len() - 8..table.len());
        for at in checked {
            let mut bad = table.clone();
            bad[at] ^= 0x40;
            match read_table(&bad, "model.ckpt.index") {
                Ok(entries) => panic!("byte {at} flipped and {} entries read", entries.len()),
                Err(err) => {
                    assert!(matches!(err.code, Code::DataLoss), "byte {at}: {err}");
                    assert!(err.message.contains("model.ckpt.index"), "{err}");
                }
            }
        }
        let err = read_table(&table[..20], "short.index").unwrap_err();
        assert!(err.code == Code::DataLoss && err.message.contains("short.index"), "{err}");
    }

    #[test]
    fn snappy_blocks_are_refused_naming_the_file() {
        let mut file = Vec::new();
        let block = BlockBuilder::new(1).finish();
        let handle = BlockHandle { offset: 0, size: block.len() as u64 };
        file.extend_from_slice(&block);
        file.push(SNAPPY_COMPRESSION);
        let sum = crc::extend(crc::crc32c(&block), &[SNAPPY_COMPRESSION]);
        file.extend_from_slice(&crc::mask(sum).to_le_bytes());
        let mut footer = Vec::new();
        handle.encode_into(&mut footer);
        handle.encode_into(&mut footer);
        footer.resize(FOOTER_LEN - 8, 0);
        footer.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        file.extend_from_slice(&footer);
        let err = read_table(&file, "snappy.index").unwrap_err();
        assert_eq!(err.code, Code::Unimplemented);
        assert!(err.message.contains("snappy.index") && err.message.contains("snappy"), "{err}");
    }
}
