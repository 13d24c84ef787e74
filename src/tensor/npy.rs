//! .npy files in and out (numpy's format, through the `npyz` crate).
//!
//! Owns: the mapping between numpy type strings and [`DType`], and reading
//! and writing whole tensors. Errors name the file.
//!
//! String tensors are written as numpy's fixed-width bytes (`|S<n>`, `n` the
//! longest element, at least 1) and read from it or from unicode (`<U<n>`,
//! stored as UTF-8). numpy drops trailing NUL bytes of `S` elements, so a
//! string ending in NULs comes back without them.

use super::{DType, Shape, Tensor};
use crate::error::{Result, Status};
use std::io::{Read, Write};
use std::path::Path;

/// How the elements of a numpy type are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NpyKind {
    Fixed(DType),
    /// `S<n>` (or `a<n>`): bytes, trailing NULs dropped.
    Bytes,
    /// `U<n>`: code points, kept as UTF-8.
    Unicode,
}

fn kind_of_descr(descr: &str) -> Option<NpyKind> {
    // Byte order is handled by npyz; only the kind and size matter here.
    let kind = descr.trim_start_matches(['<', '>', '|', '=']);
    let sized = |prefix: char| kind.strip_prefix(prefix).is_some_and(|n| n.parse::<u64>().is_ok());
    match kind {
        "f4" => Some(NpyKind::Fixed(DType::F32)),
        "f8" => Some(NpyKind::Fixed(DType::F64)),
        "i4" => Some(NpyKind::Fixed(DType::I32)),
        "i8" => Some(NpyKind::Fixed(DType::I64)),
        "b1" => Some(NpyKind::Fixed(DType::Bool)),
        "u1" => Some(NpyKind::Fixed(DType::U8)),
        "u8" => Some(NpyKind::Fixed(DType::U64)),
        "f2" => Some(NpyKind::Fixed(DType::F16)),
        "i1" => Some(NpyKind::Fixed(DType::I8)),
        "i2" => Some(NpyKind::Fixed(DType::I16)),
        "u2" => Some(NpyKind::Fixed(DType::U16)),
        "u4" => Some(NpyKind::Fixed(DType::U32)),
        _ if sized('S') || sized('a') => Some(NpyKind::Bytes),
        _ if sized('U') => Some(NpyKind::Unicode),
        _ => None,
    }
}

/// Reads an .npy image from `reader`; `what` names the source in errors.
pub fn read_npy_from(reader: impl Read, what: &str) -> Result<Tensor> {
    let bad = |e: std::io::Error| Status::invalid_argument(format!("{what}: not a readable .npy file: {e}"));
    let file = npyz::NpyFile::new(reader).map_err(bad)?;
    let descr = match file.dtype() {
        npyz::DType::Plain(type_str) => type_str.to_string(),
        other => other.descr(),
    };
    let kind = kind_of_descr(&descr)
        .ok_or_else(|| Status::unimplemented(format!("{what}: numpy dtype {descr} is not supported")))?;
    if file.order() == npyz::Order::Fortran {
        return Err(Status::unimplemented(format!(
            "{what}: Fortran-ordered arrays are not supported; save with np.ascontiguousarray"
        )));
    }
    let dims: Vec<usize> = file
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Status::invalid_argument(format!("{what}: dimension too large")))?;
    let shape = Shape::from_vec(dims);
    let tensor = match kind {
        NpyKind::Bytes => Tensor::from_strings(shape, &file.into_vec::<Vec<u8>>().map_err(bad)?),
        NpyKind::Unicode => Tensor::from_strings(shape, &file.into_vec::<String>().map_err(bad)?),
        NpyKind::Fixed(dtype) => read_fixed(file, dtype, shape, what),
    };
    tensor.map_err(|e| e.context(what))
}

fn read_fixed(file: npyz::NpyFile<impl Read>, dtype: DType, shape: Shape, what: &str) -> Result<Tensor> {
    let bad = |e: std::io::Error| Status::invalid_argument(format!("{what}: not a readable .npy file: {e}"));
    macro_rules! read_as {
        ($t:ty) => {{
            let values: Vec<$t> = file.into_vec::<$t>().map_err(bad)?;
            Tensor::from_slice::<$t>(shape, &values)
        }};
    }
    match dtype {
        DType::F16 => read_as!(half::f16),
        DType::I8 => read_as!(i8),
        DType::I16 => read_as!(i16),
        DType::U16 => read_as!(u16),
        DType::U32 => read_as!(u32),
        _ => crate::dispatch_dtype!(dtype, T => read_as!(T)),
    }
}

/// Reads an .npy file.
pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let file =
        std::fs::File::open(path).map_err(|e| Status::not_found(format!("cannot open {}: {e}", path.display())))?;
    read_npy_from(std::io::BufReader::new(file), &path.display().to_string())
}

/// Writes `tensor` as an .npy image.
pub fn write_npy_to(tensor: &Tensor, writer: impl Write) -> Result<()> {
    let dims: Vec<u64> = tensor.dims().iter().map(|&d| d as u64).collect();
    let io = |e: std::io::Error| Status::internal(format!("writing .npy: {e}"));
    if let Ok(strings) = tensor.strings() {
        use npyz::WriterBuilder;
        let width = strings.iter().map(<[u8]>::len).max().unwrap_or(0).max(1);
        let descr: npyz::TypeStr = format!("|S{width}")
            .parse()
            .map_err(|e| Status::internal(format!("numpy type for strings of {width} bytes: {e}")))?;
        let mut w = npyz::WriteOptions::<[u8]>::new()
            .dtype(npyz::DType::Plain(descr))
            .shape(&dims)
            .writer(writer)
            .begin_nd()
            .map_err(io)?;
        for s in strings.iter() {
            w.push(s).map_err(io)?;
        }
        w.finish().map_err(io)?;
        return Ok(());
    }
    macro_rules! write_as {
        ($t:ty) => {{
            use npyz::WriterBuilder;
            let mut w =
                npyz::WriteOptions::<$t>::new().default_dtype().shape(&dims).writer(writer).begin_nd().map_err(io)?;
            w.extend(tensor.as_slice::<$t>()?.iter().copied()).map_err(io)?;
            w.finish().map_err(io)?;
        }};
    }
    match tensor.dtype() {
        DType::F16 => write_as!(half::f16),
        DType::I8 => write_as!(i8),
        DType::I16 => write_as!(i16),
        DType::U16 => write_as!(u16),
        DType::U32 => write_as!(u32),
        DType::BF16 => {
            return Err(Status::unimplemented(
                "bfloat16 has no numpy dtype: cast the tensor to float32 to save it as .npy",
            ));
        }
        dtype => crate::dispatch_dtype!(dtype, T => write_as!(T)),
    }
    Ok(())
}

/// Writes `tensor` to an .npy file.
pub fn write_npy(tensor: &Tensor, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let file = std::fs::File::create(path)
        .map_err(|e| Status::permission_denied(format!("cannot create {}: {e}", path.display())))?;
    write_npy_to(tensor, std::io::BufWriter::new(file)).map_err(|e| e.context(path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_dtype() {
        let tensors = [
            Tensor::from_slice::<f32>([2, 2], &[1.5, -2.0, 0.0, 3.25]).unwrap(),
            Tensor::from_slice::<f64>([3], &[1e300, -0.5, 7.0]).unwrap(),
            Tensor::from_slice::<i32>([1, 3], &[1, -2, 3]).unwrap(),
            Tensor::from_slice::<i64>([2], &[i64::MAX, i64::MIN]).unwrap(),
            Tensor::from_slice::<bool>([2], &[true, false]).unwrap(),
            Tensor::scalar(9.0f32),
            Tensor::zeros(DType::F32, [0, 3]).unwrap(),
            Tensor::from_slice::<half::f16>([2], &[half::f16::from_f32(-1.5), half::f16::MAX]).unwrap(),
            Tensor::from_slice::<i8>([3], &[-128, 0, 127]).unwrap(),
            Tensor::from_slice::<i16>([2], &[i16::MIN, 7]).unwrap(),
            Tensor::from_slice::<u16>([2], &[u16::MAX, 1]).unwrap(),
            Tensor::from_slice::<u32>([2], &[u32::MAX, 2]).unwrap(),
        ];
        for t in tensors {
            let mut bytes = Vec::new();
            write_npy_to(&t, &mut bytes).unwrap();
            let back = read_npy_from(&bytes[..], "memory").unwrap();
            assert!(back.bit_eq(&t), "{t:?} -> {back:?}");
        }
    }

    #[test]
    fn string_tensors_round_trip_as_fixed_width_bytes() {
        let long = vec![b'z'; 1000];
        let tensors = [
            Tensor::from_strings([2, 2], &[&b"ab"[..], b"", b"\xff\x00mid", &long]).unwrap(),
            Tensor::string_scalar("checkpoint/model.ckpt"),
            Tensor::from_strings([3], &["", "", ""]).unwrap(),
            Tensor::from_strings::<&str>([0, 2], &[]).unwrap(),
        ];
        for t in tensors {
            let mut bytes = Vec::new();
            write_npy_to(&t, &mut bytes).unwrap();
            let back = read_npy_from(&bytes[..], "memory").unwrap();
            assert!(back.bit_eq(&t), "{t:?} -> {back:?}");
        }
        // The width is the longest element; an empty tensor still gets S1.
        let mut bytes = Vec::new();
        write_npy_to(&Tensor::from_strings([2], &["a", "abc"]).unwrap(), &mut bytes).unwrap();
        assert!(String::from_utf8_lossy(&bytes).contains("'descr': '|S3'"));
        // numpy drops trailing NULs of S elements.
        let mut bytes = Vec::new();
        write_npy_to(&Tensor::string_scalar(b"x\0\0"), &mut bytes).unwrap();
        assert_eq!(read_npy_from(&bytes[..], "memory").unwrap().string_value().unwrap(), b"x");
    }

    /// `np.save` of `np.array(['h\u00e9', 'abc'])` (dtype `<U3`).
    #[test]
    fn unicode_arrays_are_read_as_utf8() {
        let mut npy = b"\x93NUMPY\x01\x00".to_vec();
        let mut header = "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }".to_string();
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
        npy.extend_from_slice(header.as_bytes());
        for c in ['h', '\u{e9}', '\0', 'a', 'b', 'c'] {
            npy.extend_from_slice(&(c as u32).to_le_bytes());
        }
        let t = read_npy_from(&npy[..], "memory").unwrap();
        assert_eq!(t.dtype(), DType::String);
        assert_eq!(t.strings().unwrap().to_vec(), vec!["h\u{e9}".as_bytes(), b"abc"]);
    }

    #[test]
    fn garbage_is_an_error_naming_the_source() {
        let err = read_npy_from(&b"not numpy"[..], "feeds/x.npy").unwrap_err();
        assert!(err.message.contains("feeds/x.npy"), "{err}");
        let err = read_npy("/nonexistent/x.npy").unwrap_err();
        assert!(err.message.contains("/nonexistent/x.npy"), "{err}");
    }
}
