//! .npy files in and out (numpy's format, through the `npyz` crate).
//!
//! Owns: the mapping between numpy type strings and [`DType`], and reading
//! and writing whole tensors. Errors name the file.

use super::{DType, Shape, Tensor};
use crate::error::{Result, Status};
use std::io::{Read, Write};
use std::path::Path;

fn dtype_of_descr(descr: &str) -> Option<DType> {
    // Byte order is handled by npyz; only the kind and size matter here.
    let kind = descr.trim_start_matches(['<', '>', '|', '=']);
    match kind {
        "f4" => Some(DType::F32),
        "f8" => Some(DType::F64),
        "i4" => Some(DType::I32),
        "i8" => Some(DType::I64),
        "b1" => Some(DType::Bool),
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
    let dtype = dtype_of_descr(&descr)
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
    let tensor = crate::dispatch_dtype!(dtype, T => {
        let values: Vec<T> = file.into_vec::<T>().map_err(bad)?;
        Tensor::from_slice::<T>(shape, &values)
    });
    tensor.map_err(|e| e.context(what))
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
    crate::dispatch_dtype!(tensor.dtype(), T => {
        use npyz::WriterBuilder;
        let mut w = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(&dims)
            .writer(writer)
            .begin_nd()
            .map_err(io)?;
        w.extend(tensor.as_slice::<T>()?.iter().copied()).map_err(io)?;
        w.finish().map_err(io)?;
    });
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
        ];
        for t in tensors {
            let mut bytes = Vec::new();
            write_npy_to(&t, &mut bytes).unwrap();
            let back = read_npy_from(&bytes[..], "memory").unwrap();
            assert!(back.bit_eq(&t), "{t:?} -> {back:?}");
        }
    }

    #[test]
    fn garbage_is_an_error_naming_the_source() {
        let err = read_npy_from(&b"not numpy"[..], "feeds/x.npy").unwrap_err();
        assert!(err.message.contains("feeds/x.npy"), "{err}");
        let err = read_npy("/nonexistent/x.npy").unwrap_err();
        assert!(err.message.contains("/nonexistent/x.npy"), "{err}");
    }
}
