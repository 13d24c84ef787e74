//! Image ops on NHWC batches: resizing (`ResizeBilinear`,
//! `ResizeNearestNeighbor`: `tf.image.resize`, Keras' `Resizing` and
//! bilinear `UpSampling2D`, with TensorFlow's `align_corners` and
//! `half_pixel_centers` conventions), cropping boxes to a fixed size
//! (`CropAndResize`, two-stage detectors' region pooling) and greedy
//! non-max suppression of scored boxes (`NonMaxSuppressionV2`..`V5`,
//! soft-NMS included: detectors' post-processing); colour spaces and
//! contrast in [`color`], bicubic and area resizing in [`cubic_area`],
//! kernel resampling with antialiasing in [`scale_translate`], projective
//! transforms (Keras' random rotation, zoom and translation) in
//! [`projective`].
//!
//! Owns: these kernels and the source coordinates they sample. Arithmetic
//! follows TensorFlow's CPU kernels step for step in float32 (the scale,
//! the sampled coordinate, its floor and ceiling, the two lerps; the
//! boxes' intersection over union), so results agree to float rounding,
//! and suppression keeps TensorFlow's order (higher score first, the lower
//! index among equal scores). Must not hold state beyond parsed
//! attributes.

pub mod color;
pub mod cubic_area;
pub mod decode;
pub mod projective;
pub mod scale_translate;

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("ResizeBilinear", bilinear_signature, build_resize),
    OpDef::kernel("ResizeNearestNeighbor", nearest_signature, build_resize),
    OpDef::kernel("CropAndResize", crop_and_resize_signature, build_crop_and_resize),
    OpDef::kernel("NonMaxSuppressionV2", nms_signature::<2>, build_nms),
    OpDef::kernel("NonMaxSuppressionV3", nms_signature::<3>, build_nms),
    OpDef::kernel("NonMaxSuppressionV4", nms_signature::<4>, build_nms),
    OpDef::kernel("NonMaxSuppressionV5", nms_signature::<5>, build_nms),
];

fn bilinear_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::I32)], vec![ValueType::Tensor(DType::F32)]))
}

fn nearest_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t, ValueType::Tensor(DType::I32)], vec![t]))
}

struct Resize {
    bilinear: bool,
    align_corners: bool,
    half_pixel_centers: bool,
}

fn build_resize(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let (align_corners, half_pixel_centers) = resize_conventions(init.node)?;
    Ok(Box::new(Resize { bilinear: init.node.op == "ResizeBilinear", align_corners, half_pixel_centers }))
}

/// A resize node's `align_corners` and `half_pixel_centers` (never both),
/// its input dtype checked.
pub(super) fn resize_conventions(node: &NodeSpec) -> Result<(bool, bool)> {
    let align_corners = node.attr_bool_or("align_corners", false)?;
    let half_pixel_centers = node.attr_bool_or("half_pixel_centers", false)?;
    if align_corners && half_pixel_centers {
        bail!(
            invalid_argument,
            "node '{}' ({}): If half_pixel_centers is True, align_corners must be False.",
            node.name,
            node.op
        );
    }
    let dtype = node.attr_dtype("T")?;
    if !matches!(dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64 | DType::U8) {
        bail!(invalid_argument, "node '{}' ({}): dtype {dtype} is not supported", node.name, node.op);
    }
    Ok((align_corners, half_pixel_centers))
}

/// The output shape of resizing NHWC `images` to `size` ([height, width]),
/// both checked as TensorFlow's resize kernels check them.
pub(super) fn resized_dims(images: &Tensor, size: &Tensor) -> Result<[usize; 4]> {
    let &[batch, in_h, in_w, channels] = images.dims() else {
        bail!(invalid_argument, "input must be 4-dimensional, got shape {}", images.shape());
    };
    if size.shape().rank() != 1 || size.num_elements() != 2 {
        bail!(invalid_argument, "shape_t must be a 1-dimensional tensor of two elements, got shape {}", size.shape());
    }
    let wanted = index_values(size, "size")?;
    let (Ok(out_h), Ok(out_w)) = (usize::try_from(wanted[0]), usize::try_from(wanted[1])) else {
        bail!(invalid_argument, "output dimensions must be positive, got {:?}", &wanted[..]);
    };
    if out_h == 0 || out_w == 0 {
        bail!(invalid_argument, "output dimensions must be positive, got [{out_h}, {out_w}]");
    }
    if batch * channels > 0 && (in_h == 0 || in_w == 0) {
        bail!(invalid_argument, "input image must be of non-zero size, got shape {}", images.shape());
    }
    Ok([batch, out_h, out_w, channels])
}

/// An image element read as float32, as TensorFlow's float-output resize
/// kernels read every input dtype.
pub(super) fn pixels_as_f32<'a>(images: &'a Tensor, op: &str) -> Result<std::borrow::Cow<'a, [f32]>> {
    Ok(match images.dtype() {
        DType::F32 => std::borrow::Cow::Borrowed(images.as_slice::<f32>()?),
        DType::F64 => images.as_slice::<f64>()?.iter().map(|&v| v as f32).collect(),
        DType::I32 => images.as_slice::<i32>()?.iter().map(|&v| v as f32).collect(),
        DType::I64 => images.as_slice::<i64>()?.iter().map(|&v| v as f32).collect(),
        DType::U8 => images.as_slice::<u8>()?.iter().map(|&v| v as f32).collect(),
        other => bail!(invalid_argument, "{op} does not support {other}"),
    })
}

/// Source pixels per output pixel along one axis.
pub(super) fn scale(in_size: usize, out_size: usize, align_corners: bool) -> f32 {
    if align_corners && out_size > 1 {
        (in_size - 1) as f32 / (out_size - 1) as f32
    } else {
        in_size as f32 / out_size as f32
    }
}

/// Where bilinear output pixel `x` samples along one axis: the two source
/// pixels and the weight of the second.
#[derive(Clone, Copy)]
struct Lerp {
    lower: usize,
    upper: usize,
    weight: f32,
}

fn bilinear_axis(in_size: usize, out_size: usize, align_corners: bool, half_pixel: bool) -> Vec<Lerp> {
    let scale = scale(in_size, out_size, align_corners);
    (0..out_size)
        .map(|x| {
            let at = if half_pixel { (x as f32 + 0.5) * scale - 0.5 } else { x as f32 * scale };
            let floor = at.floor();
            Lerp {
                lower: (floor as i64).max(0) as usize,
                upper: (at.ceil() as i64).min(in_size as i64 - 1).max(0) as usize,
                weight: at - floor,
            }
        })
        .collect()
}

/// The source pixel nearest output pixel `x` along one axis.
fn nearest_axis(in_size: usize, out_size: usize, align_corners: bool, half_pixel: bool) -> Vec<usize> {
    let scale = scale(in_size, out_size, align_corners);
    (0..out_size)
        .map(|x| {
            // TensorFlow's nearest-neighbour scaler leaves out the -0.5 of
            // the half-pixel one: the floor below does its work.
            let at = if half_pixel { (x as f32 + 0.5) * scale } else { x as f32 * scale };
            let index = if align_corners { at.round() as i64 } else { at.floor() as i64 };
            index.min(in_size as i64 - 1).max(0) as usize
        })
        .collect()
}

impl OpKernel for Resize {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let images = ctx.input(0)?;
        let dims = resized_dims(images, ctx.input(1)?)?;
        let out = if self.bilinear {
            match images.dtype() {
                DType::F32 => self.bilinear::<f32>(images, dims, |v| v)?,
                DType::F64 => self.bilinear::<f64>(images, dims, |v| v as f32)?,
                DType::I32 => self.bilinear::<i32>(images, dims, |v| v as f32)?,
                DType::I64 => self.bilinear::<i64>(images, dims, |v| v as f32)?,
                DType::U8 => self.bilinear::<u8>(images, dims, |v| v as f32)?,
                other => return Err(Status::invalid_argument(format!("ResizeBilinear does not support {other}"))),
            }
        } else {
            self.nearest(images, dims)?
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

impl Resize {
    fn bilinear<T: Element + Copy>(
        &self,
        images: &Tensor,
        dims: [usize; 4],
        read: impl Fn(T) -> f32,
    ) -> Result<Tensor> {
        let [batch, out_h, out_w, channels] = dims;
        let (in_h, in_w) = (images.dims()[1], images.dims()[2]);
        let ys = bilinear_axis(in_h, out_h, self.align_corners, self.half_pixel_centers);
        let xs = bilinear_axis(in_w, out_w, self.align_corners, self.half_pixel_centers);
        let src = images.as_slice::<T>()?;
        Tensor::build::<f32>(dims, |out| {
            let pixel = |n: usize, y: usize, x: usize| ((n * in_h + y) * in_w + x) * channels;
            let mut at = 0;
            for n in 0..batch {
                for y in &ys {
                    for x in &xs {
                        let (tl, tr) = (pixel(n, y.lower, x.lower), pixel(n, y.lower, x.upper));
                        let (bl, br) = (pixel(n, y.upper, x.lower), pixel(n, y.upper, x.upper));
                        for c in 0..channels {
                            let top_left = read(src[tl + c]);
                            let top = top_left + (read(src[tr + c]) - top_left) * x.weight;
                            let bottom_left = read(src[bl + c]);
                            let bottom = bottom_left + (read(src[br + c]) - bottom_left) * x.weight;
                            out[at] = top + (bottom - top) * y.weight;
                            at += 1;
                        }
                    }
                }
            }
        })
    }

    fn nearest(&self, images: &Tensor, dims: [usize; 4]) -> Result<Tensor> {
        let [batch, out_h, out_w, channels] = dims;
        let (in_h, in_w) = (images.dims()[1], images.dims()[2]);
        let ys = nearest_axis(in_h, out_h, self.align_corners, self.half_pixel_centers);
        let xs = nearest_axis(in_w, out_w, self.align_corners, self.half_pixel_centers);
        let size = images.dtype().size().unwrap_or(0);
        let run = channels * size;
        let src = images.as_bytes();
        let mut out = Vec::with_capacity(batch * out_h * out_w * run);
        for n in 0..batch {
            for &y in &ys {
                for &x in &xs {
                    out.extend_from_slice(&src[((n * in_h + y) * in_w + x) * run..][..run]);
                }
            }
        }
        Tensor::from_bytes(images.dtype(), dims, &out)
    }
}

// ---------------------------------------------------------------------------
// CropAndResize

fn crop_and_resize_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let (f, i) = (ValueType::Tensor(DType::F32), ValueType::Tensor(DType::I32));
    Ok(OpSignature::new(vec![t, f, i, i], vec![f]))
}

struct CropAndResize {
    bilinear: bool,
    extrapolation: f32,
}

fn build_crop_and_resize(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    if !matches!(dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64) {
        bail!(invalid_argument, "node '{}' (CropAndResize): dtype {dtype} is not supported", node.name);
    }
    let method = node.attr_str_or("method", "bilinear")?;
    let bilinear = match method.as_str() {
        "bilinear" => true,
        "nearest" => false,
        other => bail!(
            invalid_argument,
            "node '{}' (CropAndResize): method must be 'bilinear' or 'nearest', got {other}",
            node.name
        ),
    };
    Ok(Box::new(CropAndResize { bilinear, extrapolation: node.attr_float_or("extrapolation_value", 0.0)? }))
}

impl OpKernel for CropAndResize {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let image = ctx.input(0)?;
        let &[batch, height, width, depth] = image.dims() else {
            bail!(invalid_argument, "input image must be 4-D, got shape {}", image.shape());
        };
        let (boxes, box_index, crop_size) = (ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
        let &[num_boxes, 4] = boxes.dims() else {
            bail!(invalid_argument, "boxes must be 2-D [num_boxes, 4], got shape {}", boxes.shape());
        };
        if box_index.dims() != [num_boxes] {
            bail!(invalid_argument, "box_index has incompatible shape {} for {num_boxes} boxes", box_index.shape());
        }
        if crop_size.dims() != [2] {
            bail!(invalid_argument, "crop_size must be a length-2 vector, got shape {}", crop_size.shape());
        }
        let size = index_values(crop_size, "crop_size")?;
        let (Ok(crop_h), Ok(crop_w)) = (usize::try_from(size[0]), usize::try_from(size[1])) else {
            bail!(invalid_argument, "crop dimensions must be positive, got {:?}", &size[..]);
        };
        if crop_h == 0 || crop_w == 0 {
            bail!(invalid_argument, "crop dimensions must be positive, got [{crop_h}, {crop_w}]");
        }
        if num_boxes > 0 && (height == 0 || width == 0) {
            bail!(invalid_argument, "image dimensions must be positive, got shape {}", image.shape());
        }
        let boxes = boxes.as_slice::<f32>()?;
        let indices = index_values(box_index, "box_index")?;
        if let Some(bad) = indices.iter().find(|&&b| b < 0 || b as usize >= batch) {
            bail!(invalid_argument, "box_index has values outside [0, batch_size): {bad} with batch size {batch}");
        }
        // Read where it lies when it is float32 already; other dtypes are
        // converted once (the kernel reads each pixel as a float).
        let pixels: std::borrow::Cow<'_, [f32]> = match image.dtype() {
            DType::F32 => image.as_slice::<f32>()?.into(),
            DType::F64 => image.as_slice::<f64>()?.iter().map(|&v| v as f32).collect(),
            DType::I32 => image.as_slice::<i32>()?.iter().map(|&v| v as f32).collect(),
            DType::I64 => image.as_slice::<i64>()?.iter().map(|&v| v as f32).collect(),
            other => bail!(invalid_argument, "CropAndResize does not support {other}"),
        };
        let out = Tensor::build::<f32>([num_boxes, crop_h, crop_w, depth], |out| {
            let (last_y, last_x) = ((height - 1) as f32, (width - 1) as f32);
            for (b, corners) in boxes.chunks_exact(4).enumerate() {
                let [y1, x1, y2, x2] = [corners[0], corners[1], corners[2], corners[3]];
                let image_base = indices[b] as usize * height * width * depth;
                let pixel = |y: usize, x: usize| image_base + (y * width + x) * depth;
                let h_scale = if crop_h > 1 { (y2 - y1) * last_y / (crop_h - 1) as f32 } else { 0.0 };
                let w_scale = if crop_w > 1 { (x2 - x1) * last_x / (crop_w - 1) as f32 } else { 0.0 };
                for y in 0..crop_h {
                    let in_y = if crop_h > 1 { y1 * last_y + y as f32 * h_scale } else { 0.5 * (y1 + y2) * last_y };
                    let row = &mut out[((b * crop_h + y) * crop_w) * depth..][..crop_w * depth];
                    if !(0.0..=last_y).contains(&in_y) {
                        row.fill(self.extrapolation);
                        continue;
                    }
                    let (top, bottom) = (in_y.floor() as usize, in_y.ceil() as usize);
                    let y_lerp = in_y - in_y.floor();
                    for x in 0..crop_w {
                        let in_x = if crop_w > 1 { x1 * last_x + x as f32 * w_scale } else { 0.5 * (x1 + x2) * last_x };
                        let dst = &mut row[x * depth..(x + 1) * depth];
                        if !(0.0..=last_x).contains(&in_x) {
                            dst.fill(self.extrapolation);
                            continue;
                        }
                        if self.bilinear {
                            let (left, right) = (in_x.floor() as usize, in_x.ceil() as usize);
                            let x_lerp = in_x - in_x.floor();
                            for (c, d) in dst.iter_mut().enumerate() {
                                let top_left = pixels[pixel(top, left) + c];
                                let top_v = top_left + (pixels[pixel(top, right) + c] - top_left) * x_lerp;
                                let bottom_left = pixels[pixel(bottom, left) + c];
                                let bottom_v = bottom_left + (pixels[pixel(bottom, right) + c] - bottom_left) * x_lerp;
                                *d = top_v + (bottom_v - top_v) * y_lerp;
                            }
                        } else {
                            let at = pixel(in_y.round() as usize, in_x.round() as usize);
                            dst.copy_from_slice(&pixels[at..at + depth]);
                        }
                    }
                }
            }
        })?;
        ctx.set_output(0, out);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// NonMaxSuppression

/// V2 `[boxes, scores, max_output_size, iou_threshold] -> [indices]`; V3
/// adds `score_threshold`; V4 also gives the valid count (padding to
/// `max_output_size` if asked); V5 adds `soft_nms_sigma` and gives the
/// selected scores too.
fn nms_signature<const V: u8>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype_or("T", DType::F32)?);
    let threshold = ValueType::Tensor(node.attr_dtype_or("T_threshold", node.attr_dtype_or("T", DType::F32)?)?);
    let i = ValueType::Tensor(DType::I32);
    let mut inputs = vec![t, t, i, threshold];
    if V >= 3 {
        inputs.push(threshold);
    }
    if V == 5 {
        inputs.push(t);
    }
    let outputs = match V {
        2 | 3 => vec![i],
        4 => vec![i, i],
        _ => vec![i, t, i],
    };
    Ok(OpSignature::new(inputs, outputs))
}

struct Nms {
    version: u8,
    pad_to_max: bool,
}

fn build_nms(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype_or("T", DType::F32)?;
    if dtype != DType::F32 {
        bail!(
            invalid_argument,
            "node '{}' ({}): boxes of dtype {dtype} are not supported (float32 only)",
            node.name,
            node.op
        );
    }
    let version = node.op.as_bytes().last().map_or(2, |v| v - b'0');
    Ok(Box::new(Nms { version, pad_to_max: node.attr_bool_or("pad_to_max_output_size", false)? }))
}

fn scalar_f32(t: &Tensor, what: &str) -> Result<f32> {
    if t.shape().rank() != 0 {
        bail!(invalid_argument, "{what} must be 0-D, got shape {}", t.shape());
    }
    match t.dtype() {
        DType::F32 => Ok(t.as_slice::<f32>()?[0]),
        DType::F64 => Ok(t.as_slice::<f64>()?[0] as f32),
        other => Err(Status::invalid_argument(format!("{what} must be a float, got {other}"))),
    }
}

/// TensorFlow's intersection over union of boxes `i` and `j` (`[y1, x1,
/// y2, x2]`, corners in either order); 0 when either box is empty.
fn iou(boxes: &[f32], i: usize, j: usize) -> f32 {
    let corners = |k: usize| {
        let b = &boxes[k * 4..k * 4 + 4];
        (b[0].min(b[2]), b[1].min(b[3]), b[0].max(b[2]), b[1].max(b[3]))
    };
    let (ymin_i, xmin_i, ymax_i, xmax_i) = corners(i);
    let (ymin_j, xmin_j, ymax_j, xmax_j) = corners(j);
    let area_i = (ymax_i - ymin_i) * (xmax_i - xmin_i);
    let area_j = (ymax_j - ymin_j) * (xmax_j - xmin_j);
    if area_i <= 0.0 || area_j <= 0.0 {
        return 0.0;
    }
    let inter_h = (ymax_i.min(ymax_j) - ymin_i.max(ymin_j)).max(0.0);
    let inter_w = (xmax_i.min(xmax_j) - xmin_i.max(xmin_j)).max(0.0);
    let inter = inter_h * inter_w;
    inter / (area_i + area_j - inter)
}

/// A box waiting to be selected: its score so far, and how many selected
/// boxes it has been compared with.
#[derive(Clone, Copy)]
struct Candidate {
    index: usize,
    score: f32,
    compared: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    /// The heap's top: the higher score, then the lower index.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score.total_cmp(&other.score).then_with(|| other.index.cmp(&self.index))
    }
}

impl OpKernel for Nms {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (boxes_t, scores_t) = (ctx.input(0)?, ctx.input(1)?);
        let &[num_boxes, 4] = boxes_t.dims() else {
            bail!(invalid_argument, "boxes must be 2-D [num_boxes, 4], got shape {}", boxes_t.shape());
        };
        if scores_t.dims() != [num_boxes] {
            bail!(invalid_argument, "scores has incompatible shape {} for {num_boxes} boxes", scores_t.shape());
        }
        let max_t = ctx.input(2)?;
        if max_t.shape().rank() != 0 {
            bail!(invalid_argument, "max_output_size must be 0-D, got shape {}", max_t.shape());
        }
        let Ok(max_output) = usize::try_from(index_values(max_t, "max_output_size")?[0]) else {
            bail!(invalid_argument, "max_output_size must be non-negative");
        };
        let iou_threshold = scalar_f32(ctx.input(3)?, "iou_threshold")?;
        if !(0.0..=1.0).contains(&iou_threshold) {
            bail!(invalid_argument, "iou_threshold must be in [0, 1], got {iou_threshold}");
        }
        let score_threshold = if self.version >= 3 { scalar_f32(ctx.input(4)?, "score_threshold")? } else { f32::MIN };
        let sigma = if self.version == 5 { scalar_f32(ctx.input(5)?, "soft_nms_sigma")? } else { 0.0 };
        if sigma < 0.0 {
            bail!(invalid_argument, "soft_nms_sigma must be non-negative, got {sigma}");
        }
        let (boxes, scores) = (boxes_t.as_slice::<f32>()?, scores_t.as_slice::<f32>()?);
        let soft = sigma > 0.0;
        let scale = if soft { -0.5 / sigma } else { 0.0 };
        let mut queue: std::collections::BinaryHeap<Candidate> = scores
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s > score_threshold)
            .map(|(index, &score)| Candidate { index, score, compared: 0 })
            .collect();
        let (mut selected, mut selected_scores) = (Vec::new(), Vec::new());
        while selected.len() < max_output {
            let Some(mut next) = queue.pop() else { break };
            let original = next.score;
            let mut hard_suppressed = false;
            // Newest selections first: overlapping boxes have similar scores.
            for &earlier in selected[next.compared..].iter().rev() {
                let similarity = iou(boxes, next.index, earlier);
                let weight = (scale * similarity * similarity).exp();
                next.score *= if soft || similarity <= iou_threshold { weight } else { 0.0 };
                if !soft && similarity > iou_threshold {
                    hard_suppressed = true;
                    break;
                }
                if next.score <= score_threshold {
                    break;
                }
            }
            next.compared = selected.len();
            if hard_suppressed {
                continue;
            }
            if next.score == original {
                selected.push(next.index);
                selected_scores.push(next.score);
            } else if next.score > score_threshold {
                queue.push(next);
            }
        }
        let valid = selected.len();
        if self.pad_to_max && self.version >= 4 {
            selected.resize(max_output, 0);
            selected_scores.resize(max_output, 0.0);
        }
        let indices: Vec<i32> = selected.iter().map(|&i| i as i32).collect();
        ctx.set_output(0, Tensor::from_slice::<i32>([indices.len()], &indices)?);
        match self.version {
            4 => ctx.set_output(1, Tensor::scalar(valid as i32)),
            5 => {
                ctx.set_output(1, Tensor::from_slice::<f32>([selected_scores.len()], &selected_scores)?);
                ctx.set_output(2, Tensor::scalar(valid as i32));
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn resize(op: &str, x: &Tensor, size: [i32; 2], align: bool, half: bool) -> Result<Tensor> {
        let n = node(op)
            .attr("T", ty(x.dtype()))
            .attr("align_corners", AttrValue::Bool(align))
            .attr("half_pixel_centers", AttrValue::Bool(half));
        run1(&n, &[x.clone(), Tensor::from_slice::<i32>([2], &size).unwrap()])
    }

    fn row(values: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>([1, 1, values.len(), 1], values).unwrap()
    }

    #[test]
    fn bilinear_follows_each_convention() {
        let x = row(&[0.0, 10.0]);
        // tf.compat.v1.image.resize_bilinear to width 4, three ways.
        let legacy = resize("ResizeBilinear", &x, [1, 4], false, false).unwrap();
        assert_eq!(legacy.as_slice::<f32>().unwrap(), &[0.0, 5.0, 10.0, 10.0]);
        let corners = resize("ResizeBilinear", &x, [1, 4], true, false).unwrap();
        let got = corners.as_slice::<f32>().unwrap();
        assert!(got.iter().zip([0.0, 10.0 / 3.0, 20.0 / 3.0, 10.0]).all(|(a, b)| (a - b).abs() < 1e-5), "{got:?}");
        let half = resize("ResizeBilinear", &x, [1, 4], false, true).unwrap();
        assert_eq!(half.as_slice::<f32>().unwrap(), &[0.0, 2.5, 7.5, 10.0]);
        let ints = Tensor::from_slice::<i32>([1, 1, 2, 1], &[0, 10]).unwrap();
        let from_ints = resize("ResizeBilinear", &ints, [1, 4], false, true).unwrap();
        assert_eq!(from_ints.dtype(), DType::F32);
        assert_eq!(from_ints.as_slice::<f32>().unwrap(), &[0.0, 2.5, 7.5, 10.0]);
    }

    #[test]
    fn nearest_follows_each_convention_and_keeps_the_dtype() {
        let x = Tensor::from_slice::<i64>([1, 1, 3, 1], &[1, 2, 3]).unwrap();
        let legacy = resize("ResizeNearestNeighbor", &x, [1, 5], false, false).unwrap();
        assert_eq!(legacy.as_slice::<i64>().unwrap(), &[1, 1, 2, 2, 3]);
        let corners = resize("ResizeNearestNeighbor", &x, [1, 5], true, false).unwrap();
        assert_eq!(corners.as_slice::<i64>().unwrap(), &[1, 2, 2, 3, 3]);
        let half = resize("ResizeNearestNeighbor", &x, [1, 2], false, true).unwrap();
        assert_eq!(half.as_slice::<i64>().unwrap(), &[1, 3]);
    }

    #[test]
    fn crop_and_resize_samples_each_box() {
        let image = Tensor::from_map([1, 3, 3, 1], &(0..9).collect::<Vec<i32>>(), |v| v as f32).unwrap();
        let boxes = Tensor::from_slice::<f32>([2, 4], &[0.0, 0.0, 1.0, 1.0, 0.5, 0.5, 1.5, 1.5]).unwrap();
        let ids = Tensor::from_slice::<i32>([2], &[0, 0]).unwrap();
        let size = Tensor::from_slice::<i32>([2], &[2, 2]).unwrap();
        let op = node("CropAndResize").attr("T", ty(DType::F32)).attr("extrapolation_value", AttrValue::Float(-1.0));
        let out = run1(&op, &[image.clone(), boxes, ids.clone(), size.clone()]).unwrap();
        assert_eq!(out.dims(), &[2, 2, 2, 1]);
        // The whole image's corners; then a box from the centre running off
        // the image, sampled outside it as the extrapolation value.
        assert_eq!(out.as_slice::<f32>().unwrap(), &[0., 2., 6., 8., 4., -1., -1., -1.]);
        let bad = Tensor::from_slice::<i32>([2], &[0, 1]).unwrap();
        let boxes = Tensor::from_slice::<f32>([2, 4], &[0.0; 8]).unwrap();
        assert!(run1(&op, &[image, boxes, bad, size]).unwrap_err().message.contains("outside [0, batch_size)"));
    }

    fn nms(version: u8, scores: &[f32], threshold: f32, sigma: f32) -> Vec<Tensor> {
        use crate::ops::{ResourceMgr, Value, run_kernel_once};
        // Box 1 overlaps box 0 (IoU 0.81 / 1.09); box 2 is apart; box 3 is empty.
        let boxes =
            Tensor::from_slice::<f32>([4, 4], &[0., 0., 1., 1., 0.1, 0., 1.1, 0.9, 2., 2., 3., 3., 5., 5., 5., 6.])
                .unwrap();
        let mut inputs =
            vec![boxes, Tensor::from_slice::<f32>([4], scores).unwrap(), Tensor::scalar(3i32), Tensor::scalar(0.5f32)];
        if version >= 3 {
            inputs.push(Tensor::scalar(threshold));
        }
        if version == 5 {
            inputs.push(Tensor::scalar(sigma));
        }
        let op = node(&format!("NonMaxSuppressionV{version}"))
            .attr("T", ty(DType::F32))
            .attr("pad_to_max_output_size", AttrValue::Bool(true));
        let values = inputs.into_iter().map(Value::Tensor).collect();
        run_kernel_once(&op, values, &ResourceMgr::default())
            .unwrap()
            .into_iter()
            .map(|v| v.into_tensor().unwrap())
            .collect()
    }

    #[test]
    fn nms_suppresses_overlaps_greedily_by_score() {
        let hard = nms(3, &[0.9, 0.8, 0.7, 0.95], 0.0, 0.0);
        assert_eq!(hard[0].as_slice::<i32>().unwrap(), &[3, 0, 2], "box 1 overlaps box 0");
        let thresholded = nms(4, &[0.9, 0.8, 0.1, 0.05], 0.2, 0.0);
        assert_eq!(thresholded[0].as_slice::<i32>().unwrap(), &[0, 0, 0], "padded to max_output_size");
        assert_eq!(thresholded[1].as_slice::<i32>().unwrap(), &[1]);
        // Soft-NMS: box 1 is kept with its score decayed by exp(-iou^2 / (2 sigma)).
        let soft = nms(5, &[0.9, 0.8, 0.7, 0.0], 0.0, 0.5);
        assert_eq!(soft[0].as_slice::<i32>().unwrap(), &[0, 2, 1]);
        let overlap = 0.81f32 / 1.09;
        let decayed = 0.8 * (-(overlap * overlap) / (2.0 * 0.5)).exp();
        let got = soft[1].as_slice::<f32>().unwrap();
        assert!((got[2] - decayed).abs() < 1e-5, "{got:?} vs {decayed}");
        assert_eq!(soft[2].as_slice::<i32>().unwrap(), &[3]);
    }

    #[test]
    fn bad_sizes_and_conventions_are_errors() {
        let x = row(&[1.0, 2.0]);
        assert!(resize("ResizeBilinear", &x, [0, 2], false, false).unwrap_err().message.contains("positive"));
        assert!(resize("ResizeBilinear", &x, [2, 2], true, true).unwrap_err().message.contains("align_corners"));
        let flat = Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap();
        assert!(resize("ResizeNearestNeighbor", &flat, [2, 2], false, false).unwrap_err().message.contains("4-dim"));
    }
}
