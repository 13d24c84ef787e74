//! The byte layout of a string tensor, which is also its wire form.
//!
//! Owns: encoding byte strings into one contiguous image, checking an image
//! that came from elsewhere (a peer, a graph, a file), and [`Strings`], the
//! read-only view over a checked image. Must not allocate per element or
//! know about storage kinds: [`super::Tensor`] keeps the image in its usual
//! 64-byte aligned storage, so sharing, reshaping and sending a string
//! tensor work as they do for numbers.
//!
//! ```text
//! image   end_0 u64 | end_1 u64 | ... | end_{n-1} u64 | blob
//!         (little-endian; n = element count, row-major)
//! element i is blob[end_{i-1} .. end_i], with end_{-1} = 0
//! ```
//!
//! The ends never decrease and the last is the blob's length, so an image
//! of `n` elements is `8 n + blob` bytes; `8 n` zero bytes are `n` empty
//! strings (what `Tensor::zeros` makes), and zero elements are zero bytes.
//! Every image a tensor holds was checked by [`check_image`] or built by
//! [`encode_into`], so the view's slicing cannot fail.

use crate::error::{Result, Status};
use std::mem::MaybeUninit;

/// Bytes of one end offset.
pub const END_BYTES: usize = 8;

/// Bytes of the offset table of `elements` strings, `None` on overflow.
pub fn table_len(elements: usize) -> Option<usize> {
    elements.checked_mul(END_BYTES)
}

/// Bytes of the image holding `strings`, `None` on overflow.
pub fn image_len<S: AsRef<[u8]>>(strings: &[S]) -> Option<usize> {
    strings.iter().try_fold(table_len(strings.len())?, |total, s| total.checked_add(s.as_ref().len()))
}

/// Writes the image of `strings` into `out`, which must be exactly
/// [`image_len`] bytes; every byte of `out` is written.
pub fn encode_into<S: AsRef<[u8]>>(strings: &[S], out: &mut [MaybeUninit<u8>]) {
    let (table, blob) = out.split_at_mut(strings.len() * END_BYTES);
    let mut end = 0usize;
    for (slot, s) in table.chunks_exact_mut(END_BYTES).zip(strings) {
        let bytes = s.as_ref();
        let dst = &mut blob[end..end + bytes.len()];
        // SAFETY: `dst` is exactly `bytes.len()` bytes (bounds-checked by
        // the slicing above) and cannot overlap the caller's `strings`,
        // since we hold it mutably.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.as_mut_ptr().cast::<u8>(), bytes.len()) };
        end += bytes.len();
        for (d, b) in slot.iter_mut().zip((end as u64).to_le_bytes()) {
            d.write(b);
        }
    }
    assert_eq!(end, blob.len(), "encode_into was given a buffer of the wrong length");
}

/// Checks that `image` is a well-formed image of `elements` strings: the
/// table fits, the ends never decrease and the last one closes the blob.
pub fn check_image(image: &[u8], elements: usize) -> Result<()> {
    let table = table_len(elements).filter(|&t| t <= image.len()).ok_or_else(|| {
        Status::invalid_argument(format!(
            "{} bytes cannot hold the offsets of {elements} strings ({END_BYTES} bytes each)",
            image.len()
        ))
    })?;
    let blob_len = (image.len() - table) as u64;
    let mut previous = 0u64;
    for (i, slot) in image[..table].chunks_exact(END_BYTES).enumerate() {
        let end = read_end(slot);
        if end < previous || end > blob_len {
            return Err(Status::invalid_argument(format!(
                "string {i} ends at byte {end}, outside {previous}..={blob_len} of the string data"
            )));
        }
        previous = end;
    }
    if previous != blob_len {
        return Err(Status::invalid_argument(format!(
            "the strings end at byte {previous} but {blob_len} bytes of string data follow the offsets"
        )));
    }
    Ok(())
}

#[inline]
fn read_end(slot: &[u8]) -> u64 {
    u64::from_le_bytes(slot.try_into().expect("offset slots are END_BYTES long"))
}

/// The strings of a checked image, read in place.
#[derive(Clone, Copy)]
pub struct Strings<'a> {
    table: &'a [u8],
    blob: &'a [u8],
}

impl<'a> Strings<'a> {
    /// A view of `image`, which [`check_image`] accepted for `elements`.
    pub(crate) fn over_checked(image: &'a [u8], elements: usize) -> Strings<'a> {
        let (table, blob) = image.split_at(elements * END_BYTES);
        Strings { table, blob }
    }

    /// Number of strings.
    #[inline]
    pub fn len(&self) -> usize {
        self.table.len() / END_BYTES
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Where string `i` starts in the blob, which is where string `i - 1`
    /// ends (`i` up to `len()`).
    fn boundary(&self, i: usize) -> usize {
        if i == 0 { 0 } else { read_end(&self.table[(i - 1) * END_BYTES..i * END_BYTES]) as usize }
    }

    /// String `i`, or `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        if i >= self.len() {
            return None;
        }
        let (start, end) = (self.boundary(i), self.boundary(i + 1));
        // The image was checked: the ends are in order and inside the blob.
        Some(&self.blob[start..end])
    }

    /// The strings in row-major order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        let blob = self.blob;
        let mut start = 0usize;
        self.table.chunks_exact(END_BYTES).map(move |slot| {
            let end = read_end(slot) as usize;
            let s = &blob[start..end];
            start = end;
            s
        })
    }

    /// The strings as a vector of slices (one allocation, no copies).
    pub fn to_vec(&self) -> Vec<&'a [u8]> {
        self.iter().collect()
    }

    /// Total bytes of string data (the blob).
    pub fn data_len(&self) -> usize {
        self.blob.len()
    }
}

impl std::fmt::Debug for Strings<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[")?;
        for (i, s) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write_bytes_literal(f, s)?;
        }
        f.write_str("]")
    }
}

/// Writes `bytes` as a Python bytes literal (`b'a\xff\n'`), the way numpy
/// and TensorFlow print string elements.
pub fn write_bytes_literal(out: &mut impl std::fmt::Write, bytes: &[u8]) -> std::fmt::Result {
    // Python quotes with `"` when that spares escaping a `'`.
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') { b'"' } else { b'\'' };
    out.write_char('b')?;
    out.write_char(quote as char)?;
    for &b in bytes {
        match b {
            b'\\' => out.write_str("\\\\")?,
            b'\n' => out.write_str("\\n")?,
            b'\r' => out.write_str("\\r")?,
            b'\t' => out.write_str("\\t")?,
            _ if b == quote => write!(out, "\\{}", b as char)?,
            0x20..=0x7e => out.write_char(b as char)?,
            _ => write!(out, "\\x{b:02x}")?,
        }
    }
    out.write_char(quote as char)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image_of(strings: &[&[u8]]) -> Vec<u8> {
        let mut out = vec![MaybeUninit::<u8>::uninit(); image_len(strings).unwrap()];
        encode_into(strings, &mut out);
        // SAFETY: `encode_into` wrote every byte.
        out.into_iter().map(|b| unsafe { b.assume_init() }).collect()
    }

    #[test]
    fn layout_is_ends_then_blob() {
        let image = image_of(&[b"ab", b"", b"xyz"]);
        let mut want = Vec::new();
        for end in [2u64, 2, 5] {
            want.extend_from_slice(&end.to_le_bytes());
        }
        want.extend_from_slice(b"abxyz");
        assert_eq!(image, want);
        check_image(&image, 3).unwrap();
        let view = Strings::over_checked(&image, 3);
        assert_eq!(view.to_vec(), vec![&b"ab"[..], b"", b"xyz"]);
        assert_eq!((view.get(1), view.get(2), view.get(3)), (Some(&b""[..]), Some(&b"xyz"[..]), None));
        assert_eq!(view.data_len(), 5);
    }

    #[test]
    fn zero_bytes_are_empty_strings_and_no_elements_are_no_bytes() {
        check_image(&[0u8; 24], 3).unwrap();
        assert!(Strings::over_checked(&[0u8; 24], 3).iter().all(|s| s.is_empty()));
        assert_eq!(image_of(&[]), Vec::<u8>::new());
        check_image(&[], 0).unwrap();
        assert!(Strings::over_checked(&[], 0).is_empty());
    }

    #[test]
    fn malformed_images_are_refused() {
        let good = image_of(&[b"ab", b"cde"]);
        let check = |image: &[u8], elements: usize, want: &str| {
            let err = check_image(image, elements).unwrap_err();
            assert!(err.message.contains(want), "{err} lacks '{want}'");
        };
        check(&good[..7], 2, "cannot hold the offsets");
        check(&good, usize::MAX, "cannot hold the offsets");
        check(&good[..good.len() - 1], 2, "outside");
        let mut extra = good.clone();
        extra.push(b'!');
        check(&extra, 2, "end at byte 5 but 6 bytes");
        let mut backwards = good.clone();
        backwards[0..8].copy_from_slice(&4u64.to_le_bytes());
        backwards[8..16].copy_from_slice(&3u64.to_le_bytes());
        check(&backwards, 2, "string 1 ends at byte 3, outside 4..=5");
        let mut huge = good.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        check(&huge, 2, "outside");
        check(&[1u8], 0, "end at byte 0 but 1 bytes");
    }

    #[test]
    fn bytes_literals_escape_like_python() {
        let mut s = String::new();
        write_bytes_literal(&mut s, b"a\\\n\x00\xff~").unwrap();
        assert_eq!(s, r"b'a\\\n\x00\xff~'");
        let mut s = String::new();
        write_bytes_literal(&mut s, b"it's").unwrap();
        assert_eq!(s, r#"b"it's""#);
        let mut s = String::new();
        write_bytes_literal(&mut s, b"'\"").unwrap();
        assert_eq!(s, r#"b'\'"'"#);
    }
}
