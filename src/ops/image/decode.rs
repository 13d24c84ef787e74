//! Image decoding: `DecodeJpeg`, `DecodePng` and `DecodeImage` (which tells
//! JPEG from PNG by their first bytes), what serving graphs that take
//! image bytes start with (`tf.io.decode_jpeg`, `tf.io.decode_image`).
//!
//! JPEG goes through libjpeg-turbo's decoder (the `mozjpeg` crate's build
//! of it, as TensorFlow links libjpeg-turbo) with TensorFlow's settings:
//! the fast integer IDCT unless `dct_method` is `INTEGER_ACCURATE`, fancy
//! upsampling unless turned off, `ratio` as libjpeg's output scaling, so
//! pixels are TensorFlow's exactly. PNG goes through the `png` crate
//! (lossless, so any decoder gives the same pixels), expanded to 8 bits
//! per sample and converted to the channels asked as libpng does for
//! TensorFlow.
//!
//! Owns: these kernels and the conversions between channel layouts. Must
//! not keep state between calls. A decoder's failure is an
//! `InvalidArgument` naming what was wrong with the bytes.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("DecodeJpeg", jpeg_signature, build_jpeg),
    OpDef::kernel("DecodePng", png_signature, build_png),
    OpDef::kernel("DecodeImage", image_signature, build_image),
];

/// `[string contents] -> [uint8 image]`.
fn jpeg_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::String)], vec![ValueType::Tensor(DType::U8)]))
}

/// `[string contents] -> [dtype image]`.
fn png_signature(node: &NodeSpec) -> Result<OpSignature> {
    let dtype = node.attr_dtype_or("dtype", DType::U8)?;
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::String)], vec![ValueType::Tensor(dtype)]))
}

fn image_signature(node: &NodeSpec) -> Result<OpSignature> {
    png_signature(node)
}

/// How a JPEG is decoded: TensorFlow's attributes.
#[derive(Debug, Clone, Copy)]
struct JpegOptions {
    /// 0 (as in the file), 1 or 3.
    channels: usize,
    /// 1, 2, 4 or 8: the output is that many times smaller.
    ratio: u8,
    fancy_upscaling: bool,
    accurate_dct: bool,
}

fn channels_attr(node: &NodeSpec, allowed: &[i64]) -> Result<usize> {
    let channels = node.attr_int_or("channels", 0)?;
    if !allowed.contains(&channels) {
        bail!(invalid_argument, "channels must be one of {allowed:?}, got {channels}");
    }
    Ok(channels as usize)
}

fn jpeg_options(node: &NodeSpec) -> Result<JpegOptions> {
    let channels = channels_attr(node, &[0, 1, 3])?;
    let ratio = match node.attr_int_or("ratio", 1)? {
        r @ (1 | 2 | 4 | 8) => r as u8,
        other => bail!(invalid_argument, "ratio must be 1, 2, 4 or 8, got {other}"),
    };
    let accurate_dct = match node.attr_str_or("dct_method", "")?.as_str() {
        "" | "INTEGER_FAST" => false,
        "INTEGER_ACCURATE" => true,
        other => bail!(invalid_argument, "dct_method '{other}' (expected INTEGER_FAST or INTEGER_ACCURATE)"),
    };
    Ok(JpegOptions { channels, ratio, fancy_upscaling: node.attr_bool_or("fancy_upscaling", true)?, accurate_dct })
}

struct DecodeJpeg(JpegOptions);

fn build_jpeg(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(DecodeJpeg(jpeg_options(init.node)?)))
}

impl OpKernel for DecodeJpeg {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let contents = scalar_contents(ctx.input(0)?)?;
        ctx.set_output(0, decode_jpeg(contents, self.0)?);
        Ok(())
    }
}

struct DecodePng {
    channels: usize,
}

fn build_png(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    output_dtype(node, &[DType::U8])?;
    Ok(Box::new(DecodePng { channels: channels_attr(node, &[0, 1, 2, 3, 4])? }))
}

impl OpKernel for DecodePng {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let contents = scalar_contents(ctx.input(0)?)?;
        ctx.set_output(0, decode_png(contents, self.channels)?);
        Ok(())
    }
}

/// The node's output `dtype`, one of `allowed` (uint16 images have no
/// dtype here: refused at build, by name).
fn output_dtype(node: &NodeSpec, allowed: &[DType]) -> Result<DType> {
    let dtype = node.attr_dtype_or("dtype", DType::U8)?;
    if !allowed.contains(&dtype) {
        let names: Vec<String> = allowed.iter().map(ToString::to_string).collect();
        bail!(invalid_argument, "dtype {dtype} is not supported (only {})", names.join(" or "));
    }
    Ok(dtype)
}

struct DecodeImage {
    channels: usize,
    dtype: DType,
    jpeg: JpegOptions,
}

fn build_image(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = output_dtype(node, &[DType::U8, DType::F32])?;
    let channels = channels_attr(node, &[0, 1, 3, 4])?;
    // A JPEG is decoded with DecodeJpeg's defaults (4 channels are refused
    // when one arrives).
    let jpeg = JpegOptions { channels: channels.min(3), ratio: 1, fancy_upscaling: true, accurate_dct: false };
    Ok(Box::new(DecodeImage { channels, dtype, jpeg }))
}

impl OpKernel for DecodeImage {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let contents = scalar_contents(ctx.input(0)?)?;
        let image = match contents {
            [0xff, 0xd8, 0xff, ..] => {
                if self.channels == 4 {
                    bail!(invalid_argument, "channels attribute 4 is not supported for JPEG images (1 or 3)");
                }
                decode_jpeg(contents, self.jpeg)?
            }
            [0x89, b'P', b'N', b'G', ..] => decode_png(contents, self.channels)?,
            [b'G', b'I', b'F', b'8', ..] => bail!(unimplemented, "a GIF image: DecodeGif is not supported here"),
            [b'B', b'M', ..] => bail!(unimplemented, "a BMP image: DecodeBmp is not supported here"),
            _ => bail!(
                invalid_argument,
                "Unknown image file format. One of JPEG, PNG, GIF, BMP required (the contents start {:02x?})",
                &contents[..contents.len().min(4)]
            ),
        };
        let image = match self.dtype {
            DType::F32 => to_unit_floats(&image)?,
            _ => image,
        };
        ctx.set_output(0, image);
        Ok(())
    }
}

/// uint8 pixels as floats in [0, 1], as TensorFlow's `convert_image_dtype`.
fn to_unit_floats(image: &Tensor) -> Result<Tensor> {
    let pixels = image.as_slice::<u8>()?;
    let scale = 1.0f32 / 255.0;
    Tensor::build::<f32>(image.shape().clone(), |out| {
        for (o, &p) in out.iter_mut().zip(pixels) {
            *o = f32::from(p) * scale;
        }
    })
}

fn scalar_contents(contents: &Tensor) -> Result<&[u8]> {
    if contents.rank() != 0 {
        bail!(invalid_argument, "contents must be scalar, got shape {}", contents.shape());
    }
    contents.string_value()
}

/// libjpeg reports a fatal error by unwinding (the `mozjpeg` crate's error
/// manager); its message becomes the error.
fn decode_jpeg(contents: &[u8], options: JpegOptions) -> Result<Tensor> {
    if contents.is_empty() {
        bail!(invalid_argument, "Invalid JPEG data or crop window: empty contents");
    }
    let decoded = std::panic::catch_unwind(|| -> std::io::Result<(usize, usize, usize, Vec<u8>)> {
        let mut jpeg = mozjpeg::Decompress::builder().from_mem(contents)?;
        jpeg.dct_method(if options.accurate_dct {
            mozjpeg::DctMethod::IntegerSlow
        } else {
            mozjpeg::DctMethod::IntegerFast
        });
        jpeg.do_fancy_upsampling(options.fancy_upscaling);
        jpeg.scale(8 / options.ratio);
        let in_file = jpeg.components().len();
        let channels = match options.channels {
            0 if in_file == 1 => 1,
            0 => 3,
            c => c,
        };
        let mut started = match channels {
            1 => jpeg.grayscale()?,
            _ => jpeg.rgb()?,
        };
        let (width, height) = (started.width(), started.height());
        let pixels: Vec<u8> = started.read_scanlines()?;
        started.finish()?;
        Ok((height, width, channels, pixels))
    });
    let (height, width, channels, pixels) = match decoded {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => bail!(invalid_argument, "Invalid JPEG data: {e}"),
        Err(unwound) => {
            let why = unwound
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| unwound.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "libjpeg failed".to_string());
            bail!(invalid_argument, "Invalid JPEG data: {why}");
        }
    };
    if pixels.len() != height * width * channels {
        bail!(invalid_argument, "Invalid JPEG data: {} bytes decoded for {height}x{width}x{channels}", pixels.len());
    }
    Tensor::from_slice(Shape::from_vec(vec![height, width, channels]), &pixels)
}

fn decode_png(contents: &[u8], channels: usize) -> Result<Tensor> {
    let invalid = |e: png::DecodingError| Status::invalid_argument(format!("Invalid PNG data: {e}"));
    let mut decoder = png::Decoder::new(std::io::Cursor::new(contents));
    // Palettes and transparency chunks to RGB(A), low bit depths to 8 and
    // 16-bit samples to their high byte, as TensorFlow has libpng do for
    // uint8 output.
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(invalid)?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| Status::invalid_argument("Invalid PNG data: the image is too large"))?;
    let mut buffer = vec![0u8; size];
    let frame = reader.next_frame(&mut buffer).map_err(invalid)?;
    let (width, height) = (frame.width as usize, frame.height as usize);
    let from = frame.color_type.samples();
    debug_assert_eq!(frame.bit_depth, png::BitDepth::Eight);
    let rows: Vec<&[u8]> = buffer.chunks(frame.line_size).take(height).map(|row| &row[..width * from]).collect();
    let to = if channels == 0 { from } else { channels };
    let color = |from: usize| from >= 3;
    if color(from) && !color(to) {
        bail!(
            unimplemented,
            "converting a {from}-channel color PNG to {to} gray channel(s) is not supported (ask for 3 or 4 channels, or 0)"
        );
    }
    let mut pixels = Vec::with_capacity(width * height * to);
    for row in rows {
        for px in row.chunks_exact(from) {
            let alpha = if from == 2 || from == 4 { px[from - 1] } else { 255 };
            match to {
                1 => pixels.push(px[0]),
                2 => pixels.extend_from_slice(&[px[0], alpha]),
                3 if from < 3 => pixels.extend_from_slice(&[px[0], px[0], px[0]]),
                3 => pixels.extend_from_slice(&px[..3]),
                _ if from < 3 => pixels.extend_from_slice(&[px[0], px[0], px[0], alpha]),
                _ => pixels.extend_from_slice(&[px[0], px[1], px[2], alpha]),
            }
        }
    }
    Tensor::from_slice(Shape::from_vec(vec![height, width, to]), &pixels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_bytes(color: png::ColorType, width: u32, height: u32, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(color);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(data).unwrap();
        writer.finish().unwrap();
        out
    }

    #[test]
    fn png_channels_convert_as_tensorflow_asks() {
        let gray = png_bytes(png::ColorType::Grayscale, 2, 1, &[10, 200]);
        let as_rgba = decode_png(&gray, 4).unwrap();
        assert_eq!(as_rgba.dims(), &[1, 2, 4]);
        assert_eq!(as_rgba.as_slice::<u8>().unwrap(), &[10, 10, 10, 255, 200, 200, 200, 255]);
        let rgba = png_bytes(png::ColorType::Rgba, 1, 2, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(decode_png(&rgba, 0).unwrap().dims(), &[2, 1, 4]);
        assert_eq!(decode_png(&rgba, 3).unwrap().as_slice::<u8>().unwrap(), &[1, 2, 3, 5, 6, 7]);
        let err = decode_png(&rgba, 1).unwrap_err();
        assert!(err.message.contains("4-channel color PNG to 1 gray"), "{err}");
        let err = decode_png(&gray[..20], 0).unwrap_err();
        assert!(err.message.starts_with("Invalid PNG data"), "{err}");
    }

    #[test]
    fn sixteen_bit_pngs_keep_their_high_byte_as_tensorflow_does() {
        // tf.io.encode_png of uint16 [[0x12FF, 0x1280, 0xFFFF, 0x00FF]];
        // tf.io.decode_png gave [18, 18, 255, 0].
        let bytes = [
            137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 4, 0, 0, 0, 1, 16, 0, 0, 0, 0, 140,
            199, 140, 82, 0, 0, 0, 17, 73, 68, 65, 84, 8, 153, 99, 16, 250, 47, 212, 240, 255, 63, 195, 127, 0, 18,
            118, 4, 161, 93, 168, 153, 135, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
        ];
        let image = decode_png(&bytes, 0).unwrap();
        assert_eq!(image.dims(), &[1, 4, 1]);
        assert_eq!(image.as_slice::<u8>().unwrap(), &[18, 18, 255, 0]);
    }

    #[test]
    fn broken_jpegs_are_refused_with_libjpegs_reason() {
        let err = decode_jpeg(
            b"\xff\xd8\xff\xe0 not a jpeg at all",
            JpegOptions { channels: 3, ratio: 1, fancy_upscaling: true, accurate_dct: false },
        )
        .unwrap_err();
        assert!(err.message.starts_with("Invalid JPEG data"), "{err}");
        assert_eq!(err.code, crate::error::Code::InvalidArgument);
    }
}
