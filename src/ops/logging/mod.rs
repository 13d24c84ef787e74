//! The ops that print or check at run time: `Assert` (behind
//! `tf.debugging.assert_*`, `tf.Assert` and the checks inside
//! `tf.image.psnr`/`ssim`), `StringFormat` and `PrintV2` (what `tf.print`
//! and `tf.strings.format` build), the legacy `Print` (`tf.compat.v1.Print`)
//! and `Timestamp` (`tf.timestamp`). Tensors print as TensorFlow prints them
//! (`summarize`). `CheckNumerics` fails a step on a NaN or an infinity
//! ([`check_numerics`]).
//!
//! Owns: the kernels, where a print goes (stdout, stderr, the log, or a
//! file it appends to) and `Print`'s count of its prints. Must not format
//! a tensor itself (that is `summarize`).

pub mod check_numerics;
mod summarize;

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::{DataType, NodeSpec};
use crate::tensor::{DType, Tensor};
use std::io::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use summarize::{summarize_v1, summarize_v2};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Assert", assert_signature, build_assert),
    OpDef::kernel("StringFormat", string_format_signature, build_string_format),
    OpDef::kernel("PrintV2", print_v2_signature, build_print_v2).stateful(),
    OpDef::kernel("Print", print_signature, build_print).stateful(),
    OpDef::kernel("Timestamp", timestamp_signature, build_timestamp).stateful(),
];

/// `[bool, T...] -> []`.
fn assert_signature(node: &NodeSpec) -> Result<OpSignature> {
    let mut inputs = vec![ValueType::Tensor(DType::Bool)];
    inputs.extend(printed_inputs(node, "T")?);
    Ok(OpSignature::new(inputs, vec![]))
}

/// The tensors of type-list attr `attr`, each of a type that prints.
fn printed_inputs(node: &NodeSpec, attr: &str) -> Result<Vec<ValueType>> {
    node.attr_type_list(attr)?
        .into_iter()
        .map(|t| match t {
            DataType::Tensor(d) => Ok(ValueType::Tensor(d)),
            other => Err(Status::unimplemented(format!(
                "node '{}' ({}): a data input of {other}, which has no printed form here",
                node.name, node.op
            ))),
        })
        .collect()
}

struct Assert {
    summarize: usize,
}

fn build_assert(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let summarize = init.node.attr_int_or("summarize", 3)?;
    // TensorFlow prints every element for a negative count.
    Ok(Box::new(Assert { summarize: usize::try_from(summarize).unwrap_or(usize::MAX) }))
}

impl OpKernel for Assert {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let condition = ctx.input(0)?;
        if condition.rank() != 0 {
            bail!(invalid_argument, "In[0] should be a scalar: {}", condition.shape());
        }
        if condition.scalar_value::<bool>()? {
            return Ok(());
        }
        let mut message = String::from("assertion failed:");
        for i in 1..ctx.num_inputs() {
            message.push_str(" [");
            message.push_str(&summarize_v1(ctx.input(i)?, self.summarize)?);
            message.push(']');
        }
        Err(Status::invalid_argument(message))
    }
}

/// `[T...] -> string`: the template with each placeholder replaced by the
/// next input, printed as `tf.print` prints it.
fn string_format_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(printed_inputs(node, "T")?, vec![ValueType::Tensor(DType::String)]))
}

struct StringFormat {
    /// The template's text around its placeholders: one more piece than
    /// inputs.
    pieces: Vec<String>,
    summarize: i64,
}

fn build_string_format(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let template = node.attr_str_or("template", "%s")?;
    let placeholder = node.attr_str_or("placeholder", "%s")?;
    if placeholder.is_empty() {
        bail!(invalid_argument, "node '{}' (StringFormat): the placeholder is empty", node.name);
    }
    let pieces: Vec<String> = template.split(placeholder.as_str()).map(str::to_string).collect();
    let inputs = init.signature.inputs.len();
    if pieces.len() - 1 != inputs {
        bail!(
            invalid_argument,
            "node '{}' (StringFormat): num placeholders in template and num inputs must match: {} vs. {inputs}",
            node.name,
            pieces.len() - 1
        );
    }
    Ok(Box::new(StringFormat { pieces, summarize: node.attr_int_or("summarize", 3)? }))
}

impl OpKernel for StringFormat {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let mut text = self.pieces[0].clone();
        for (i, piece) in self.pieces[1..].iter().enumerate() {
            text.push_str(&summarize_v2(ctx.input(i)?, self.summarize)?);
            text.push_str(piece);
        }
        ctx.set_output(0, Tensor::string_scalar(text));
        Ok(())
    }
}

/// `string -> []`.
fn print_v2_signature(_: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::String)], vec![]))
}

/// Where `PrintV2` writes (its `output_stream`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum PrintTarget {
    Stdout,
    Stderr,
    Log(tracing::Level),
    /// `file://PATH`: appended to, created if missing.
    File(std::path::PathBuf),
}

impl PrintTarget {
    fn parse(node: &NodeSpec, stream: &str) -> Result<PrintTarget> {
        Ok(match stream {
            "stdout" => PrintTarget::Stdout,
            "stderr" => PrintTarget::Stderr,
            "log(info)" => PrintTarget::Log(tracing::Level::INFO),
            "log(warning)" => PrintTarget::Log(tracing::Level::WARN),
            "log(error)" => PrintTarget::Log(tracing::Level::ERROR),
            _ => match stream.strip_prefix("file://") {
                Some(path) => PrintTarget::File(path.into()),
                None => bail!(
                    invalid_argument,
                    "node '{}' (PrintV2): unknown output stream: {stream}, valid streams are: stdout stderr \
                     log(info) log(warning) log(error), or file://<filename>",
                    node.name
                ),
            },
        })
    }

    fn write(&self, node: &str, text: &str) -> Result<()> {
        let written = match self {
            PrintTarget::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes()).and_then(|()| out.flush())
            }
            PrintTarget::Stderr => {
                let mut out = std::io::stderr().lock();
                out.write_all(text.as_bytes()).and_then(|()| out.flush())
            }
            PrintTarget::Log(level) => {
                match *level {
                    tracing::Level::ERROR => tracing::error!(target: "tf.print", node, "{text}"),
                    tracing::Level::WARN => tracing::warn!(target: "tf.print", node, "{text}"),
                    _ => tracing::info!(target: "tf.print", node, "{text}"),
                }
                Ok(())
            }
            PrintTarget::File(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(text.as_bytes())),
        };
        written.map_err(|e| {
            let to = match self {
                PrintTarget::File(path) => format!("{}", path.display()),
                other => format!("{other:?}").to_lowercase(),
            };
            Status::internal(format!("node '{node}' (PrintV2): writing to {to}: {e}"))
        })
    }
}

struct PrintV2 {
    node: String,
    target: PrintTarget,
    end: String,
}

fn build_print_v2(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let target = PrintTarget::parse(node, &node.attr_str_or("output_stream", "stderr")?)?;
    Ok(Box::new(PrintV2 { node: node.name.clone(), target, end: node.attr_str_or("end", "\n")? }))
}

impl OpKernel for PrintV2 {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        if input.rank() != 0 {
            bail!(invalid_argument, "Input is expected to be scalar, but got {}", input.shape());
        }
        let strings = input.strings()?;
        let mut text = String::from_utf8_lossy(strings.get(0).unwrap_or_default()).into_owned();
        text.push_str(&self.end);
        self.target.write(&self.node, &text)
    }
}

/// `[T, U...] -> T`: passes its first input through, printing the others.
fn print_signature(node: &NodeSpec) -> Result<OpSignature> {
    let passed = match node.attr_data_type("T")? {
        DataType::Tensor(d) => ValueType::Tensor(d),
        other => bail!(unimplemented, "node '{}' (Print): passes through a {other}", node.name),
    };
    let mut inputs = vec![passed];
    inputs.extend(printed_inputs(node, "U")?);
    Ok(OpSignature::new(inputs, vec![passed]))
}

struct Print {
    message: String,
    summarize: usize,
    /// Prints left (`first_n`); negative: no limit.
    prints_left: AtomicI64,
}

fn build_print(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let summarize = usize::try_from(node.attr_int_or("summarize", 3)?).unwrap_or(usize::MAX);
    Ok(Box::new(Print {
        message: node.attr_str_or("message", "")?,
        summarize,
        prints_left: AtomicI64::new(node.attr_int_or("first_n", -1)?),
    }))
}

impl OpKernel for Print {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let passed = ctx.input(0)?.clone();
        ctx.set_output(0, passed);
        let unlimited = self.prints_left.load(Ordering::Relaxed) < 0;
        if !unlimited
            && self.prints_left.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n > 0).then(|| n - 1)).is_err()
        {
            return Ok(());
        }
        let mut text = self.message.clone();
        for i in 1..ctx.num_inputs() {
            text.push('[');
            text.push_str(&summarize_v1(ctx.input(i)?, self.summarize)?);
            text.push(']');
        }
        text.push('\n');
        let mut err = std::io::stderr().lock();
        // As TensorFlow's: a print that cannot be written is not an error.
        let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
        Ok(())
    }
}

/// `[] -> double`: seconds since the Unix epoch.
fn timestamp_signature(_: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![], vec![ValueType::Tensor(DType::F64)]))
}

struct Timestamp;

fn build_timestamp(_: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Timestamp))
}

impl OpKernel for Timestamp {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| Status::internal(format!("the clock is before 1970: {e}")))?;
        // Microseconds, as TensorFlow reads the clock.
        ctx.set_output(0, Tensor::scalar(since_epoch.as_micros() as f64 / 1e6));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrList, AttrValue};
    use crate::ops::testing::node;
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn assert_node(types: &[DType], summarize: i64) -> NodeSpec {
        let list = types.iter().map(|&d| DataType::Tensor(d)).collect();
        node("Assert").attr("T", AttrValue::List(AttrList::Type(list))).attr("summarize", AttrValue::Int(summarize))
    }

    fn run(condition: Tensor, data: Vec<Tensor>, summarize: i64) -> Result<()> {
        let types: Vec<DType> = data.iter().map(Tensor::dtype).collect();
        let inputs = std::iter::once(condition).chain(data).map(Value::Tensor).collect();
        let outputs = run_kernel_once(&assert_node(&types, summarize), inputs, &ResourceMgr::default())?;
        assert!(outputs.is_empty());
        Ok(())
    }

    #[test]
    fn a_failed_assertion_prints_its_data_as_tensorflow_does() {
        let data = || {
            vec![
                Tensor::string_scalar("x is"),
                Tensor::from_slice::<i32>([5], &[1, 2, 3, 4, 5]).unwrap(),
                Tensor::from_slice::<f32>([2, 2], &[1.5, 2.0, 3.0, 4.0]).unwrap(),
                Tensor::scalar(true),
            ]
        };
        run(Tensor::scalar(true), data(), 3).unwrap();
        let err = run(Tensor::scalar(false), data(), 3).unwrap_err();
        // TensorFlow 2.21's message for the same Assert.
        assert_eq!(err.message, "assertion failed: [x is] [1 2 3...] [[1.5 2][3...]...] [1]");
        let all = run(Tensor::scalar(false), data(), -1).unwrap_err();
        assert_eq!(all.message, "assertion failed: [x is] [1 2 3 4 5] [[1.5 2][3 4]] [1]");
    }

    #[test]
    fn the_condition_must_be_a_scalar() {
        let err = run(Tensor::from_slice::<bool>([1], &[false]).unwrap(), vec![], 3).unwrap_err();
        assert_eq!(err.message, "In[0] should be a scalar: [1]");
    }

    fn format_node(template: &str, types: &[DType], summarize: i64) -> NodeSpec {
        let list = types.iter().map(|&d| DataType::Tensor(d)).collect();
        node("StringFormat")
            .attr("T", AttrValue::List(AttrList::Type(list)))
            .attr("template", AttrValue::Bytes(template.as_bytes().to_vec()))
            .attr("placeholder", AttrValue::Bytes(b"{}".to_vec()))
            .attr("summarize", AttrValue::Int(summarize))
    }

    fn format(template: &str, inputs: Vec<Tensor>, summarize: i64) -> Result<String> {
        let types: Vec<DType> = inputs.iter().map(Tensor::dtype).collect();
        let inputs = inputs.into_iter().map(Value::Tensor).collect();
        let out = run_kernel_once(&format_node(template, &types, summarize), inputs, &ResourceMgr::default())?;
        let Value::Tensor(text) = &out[0] else { panic!("a string tensor") };
        Ok(String::from_utf8(text.strings()?.get(0).unwrap().to_vec()).unwrap())
    }

    #[test]
    fn string_format_prints_tensors_as_tf_print_does() {
        // Each expected string is TensorFlow 2.21's for the same call.
        let floats = Tensor::from_slice::<f32>(
            [10],
            &[0.1, 1.0 / 3.0, 16777217.0, 1e10, 1e-5, 123456.7, f32::NAN, f32::NEG_INFINITY, -0.0, 100.0],
        )
        .unwrap();
        assert_eq!(format("{}", vec![floats], 3).unwrap(), "[0.1 0.333333343 16777216 ... -inf -0 100]");
        let doubles = Tensor::from_slice::<f64>([3], &[0.1, 1.0 / 3.0, 1e22]).unwrap();
        assert_eq!(format("{}", vec![doubles], 3).unwrap(), "[0.1 0.33333333333333331 1e+22]");
        let scalars = vec![
            Tensor::scalar(3i32),
            Tensor::scalar(2.5f32),
            Tensor::scalar(true),
            Tensor::string_scalar("a\"b\n\u{e9}"),
        ];
        assert_eq!(format("{} | {} | {} | {}", scalars, 3).unwrap(), "3 | 2.5 | 1 | \"a\\\"b\\n\u{e9}\"");
        let lists = vec![
            Tensor::from_slice::<bool>([2], &[true, false]).unwrap(),
            Tensor::from_strings([2], &["x", "y"]).unwrap(),
            Tensor::from_slice::<u8>([2], &[1, 2]).unwrap(),
        ];
        assert_eq!(format("{} | {} | {}", lists, 3).unwrap(), "[1 0] | [\"x\" \"y\"] | [1 2]");
        let cube = Tensor::from_slice::<i32>([2, 3, 4], &(0..24).collect::<Vec<_>>()).unwrap();
        assert_eq!(
            format("{}", vec![cube], 3).unwrap(),
            "[[[0 1 2 3]\n  [4 5 6 7]\n  [8 9 10 11]]\n\n [[12 13 14 15]\n  [16 17 18 19]\n  [20 21 22 23]]]"
        );
        let square = Tensor::from_slice::<i32>([10, 10], &(0..100).collect::<Vec<_>>()).unwrap();
        assert_eq!(
            format("{}", vec![square], 3).unwrap(),
            "[[0 1 2 ... 7 8 9]\n [10 11 12 ... 17 18 19]\n [20 21 22 ... 27 28 29]\n ...\n \
             [70 71 72 ... 77 78 79]\n [80 81 82 ... 87 88 89]\n [90 91 92 ... 97 98 99]]"
        );
        let ten = || Tensor::from_slice::<i64>([10], &(0..10).collect::<Vec<_>>()).unwrap();
        assert_eq!(format("{}", vec![ten()], -1).unwrap(), "[0 1 2 3 4 5 6 7 8 9]");
        assert_eq!(format("{}", vec![ten()], 0).unwrap(), "[ ...]");
        let empties = vec![
            Tensor::zeros(DType::F32, [0]).unwrap(),
            Tensor::zeros(DType::F32, [2, 0]).unwrap(),
            Tensor::zeros(DType::F32, [0, 3]).unwrap(),
        ];
        assert_eq!(format("{} | {} | {}", empties, 3).unwrap(), "[] | [\n ...] | []");
        let parts: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let complex = Tensor::from_bytes(DType::Complex64, [1], &parts).unwrap();
        assert_eq!(format("{}", vec![complex], 3).unwrap(), "[?]");
    }

    #[test]
    fn string_format_checks_its_template_against_its_inputs() {
        let err = format("{} and {}", vec![Tensor::scalar(1i32)], 3).unwrap_err();
        assert!(err.message.contains("num placeholders in template and num inputs must match: 2 vs. 1"), "{err}");
        assert!(err.message.contains("test_StringFormat"), "{err}");
    }

    fn print_v2_node(stream: &str, end: &str) -> NodeSpec {
        node("PrintV2")
            .attr("output_stream", AttrValue::Bytes(stream.as_bytes().to_vec()))
            .attr("end", AttrValue::Bytes(end.as_bytes().to_vec()))
    }

    #[test]
    fn print_v2_appends_to_a_file_and_refuses_an_unknown_stream() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("printed.txt");
        let node = print_v2_node(&format!("file://{}", path.display()), "|");
        for text in ["one", "two"] {
            let out = run_kernel_once(&node, vec![Value::Tensor(Tensor::string_scalar(text))], &ResourceMgr::default())
                .unwrap();
            assert!(out.is_empty());
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one|two|");
        let err = run_kernel_once(&print_v2_node("stdlog", "\n"), vec![], &ResourceMgr::default()).unwrap_err();
        assert!(err.message.contains("unknown output stream: stdlog"), "{err}");
        let missing = dir.path().join("no/such/dir.txt");
        let node = print_v2_node(&format!("file://{}", missing.display()), "\n");
        let err = run_kernel_once(&node, vec![Value::Tensor(Tensor::string_scalar("x"))], &ResourceMgr::default())
            .unwrap_err();
        assert!(err.message.contains("no/such/dir.txt") && err.message.contains("test_PrintV2"), "{err}");
    }

    #[test]
    fn print_passes_its_input_through_and_prints_first_n_times() {
        let print = Print { message: "x: ".into(), summarize: 3, prints_left: AtomicI64::new(2) };
        let resources = ResourceMgr::default();
        for step in 0..4 {
            let passed = Tensor::from_slice::<f32>([2], &[step as f32, 1.0]).unwrap();
            let mut inputs = vec![Some(Value::Tensor(passed.clone())), Some(Value::Tensor(Tensor::scalar(7i32)))];
            let mut outputs = vec![None];
            print.compute(&mut OpContext::new(&mut inputs, &mut outputs, &resources)).unwrap();
            let Some(Value::Tensor(out)) = &outputs[0] else { panic!("an output") };
            assert_eq!(out.as_slice::<f32>().unwrap(), passed.as_slice::<f32>().unwrap());
        }
        assert_eq!(print.prints_left.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn timestamp_reads_seconds_since_the_epoch() {
        let out = run_kernel_once(&node("Timestamp"), vec![], &ResourceMgr::default()).unwrap();
        let Value::Tensor(t) = &out[0] else { panic!("a tensor") };
        let seconds = t.scalar_value::<f64>().unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!((now - seconds).abs() < 60.0, "{seconds} vs {now}");
    }
}
