//! TensorFlow Serving's REST body format: JSON values ↔ tensors, in the
//! row form (`instances` → `predictions`: one entry per batch row) and the
//! columnar form (`inputs` → `outputs`: whole tensors), with `{"b64": ...}`
//! for binary strings.
//!
//! Owns: the JSON shapes of a predict request and answer, and of a
//! classify or regress request (features → `tf.train.Example`) and answer. Must not know
//! about HTTP or sessions: [`super::rest`] calls these with the signature
//! the request names.

use crate::error::{Result, Status};
use crate::graph::DataType;
use crate::graph::saved_model::Signature;
use crate::serving::inference::{Classification, ExampleInput, Regression};
use crate::tensor::{DType, Tensor};
use base64::Engine;
use serde_json::Value;
use std::fmt::Write;

/// How the request was written, so the answer is written the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `instances` in, `predictions` out.
    Row,
    /// `inputs` in, `outputs` out.
    Columnar,
}

/// A decoded predict body: the signature it names (empty: the default),
/// and the form its inputs came in.
pub struct PredictBody {
    pub signature: String,
    pub form: Form,
    inputs: Value,
}

/// Reads a predict request's JSON body.
pub fn parse_predict_body(body: &[u8]) -> Result<PredictBody> {
    let mut value: Value = serde_json::from_slice(body)
        .map_err(|e| Status::invalid_argument(format!("the request body is not JSON: {e}")))?;
    let Value::Object(fields) = &mut value else {
        return Err(Status::invalid_argument("the request body must be a JSON object"));
    };
    let signature = match fields.remove("signature_name") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(name)) => name,
        Some(other) => return Err(Status::invalid_argument(format!("signature_name must be a string, got {other}"))),
    };
    let (form, inputs) = match (fields.remove("instances"), fields.remove("inputs")) {
        (Some(_), Some(_)) => {
            return Err(Status::invalid_argument("the request has both 'instances' and 'inputs': send one"));
        }
        (Some(instances), None) => (Form::Row, instances),
        (None, Some(inputs)) => (Form::Columnar, inputs),
        (None, None) => {
            return Err(Status::invalid_argument("the request has neither 'instances' (rows) nor 'inputs' (columns)"));
        }
    };
    if let Some(other) = fields.keys().next() {
        return Err(Status::invalid_argument(format!("unexpected field '{other}' in the request")));
    }
    Ok(PredictBody { signature, form, inputs })
}

impl PredictBody {
    /// The inputs by key, each a tensor of the dtype `signature` gives it.
    pub fn inputs(self, signature: &Signature) -> Result<Vec<(String, Tensor)>> {
        let only_input = || -> Result<&String> {
            match signature.inputs.keys().collect::<Vec<_>>().as_slice() {
                [only] => Ok(only),
                keys => Err(Status::invalid_argument(format!(
                    "the signature has {} inputs ({}): name them in each value",
                    keys.len(),
                    keys.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                ))),
            }
        };
        let dtype_of = |key: &str| -> Result<DType> {
            let info = signature.inputs.get(key).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "the signature has no input '{key}' (its inputs: {})",
                    signature.inputs.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
                ))
            })?;
            match info.dtype {
                DataType::Tensor(dtype) => Ok(dtype),
                other => Err(Status::unimplemented(format!("input '{key}' is a {other}, not a tensor"))),
            }
        };
        match self.form {
            Form::Columnar => match self.inputs {
                Value::Object(named) if !is_b64(&named) => named
                    .into_iter()
                    .map(|(key, value)| {
                        let tensor =
                            tensor_of(&value, dtype_of(&key)?).map_err(|e| e.context(format!("input '{key}'")))?;
                        Ok((key, tensor))
                    })
                    .collect(),
                value => {
                    let key = only_input()?.clone();
                    let tensor = tensor_of(&value, dtype_of(&key)?).map_err(|e| e.context(format!("input '{key}'")))?;
                    Ok(vec![(key, tensor)])
                }
            },
            Form::Row => {
                let Value::Array(rows) = self.inputs else {
                    return Err(Status::invalid_argument("'instances' must be a list (one entry per row)"));
                };
                if rows.is_empty() {
                    return Err(Status::invalid_argument("'instances' is empty"));
                }
                let keys: Vec<String> = match &rows[0] {
                    Value::Object(first) if !is_b64(first) => first.keys().cloned().collect(),
                    _ => {
                        let key = only_input()?.clone();
                        let tensor = tensor_of(&Value::Array(rows), dtype_of(&key)?)
                            .map_err(|e| e.context(format!("'instances' of input '{key}'")))?;
                        return Ok(vec![(key, tensor)]);
                    }
                };
                let mut columns: Vec<Vec<Value>> = vec![Vec::with_capacity(rows.len()); keys.len()];
                for (i, row) in rows.into_iter().enumerate() {
                    let Value::Object(mut row) = row else {
                        return Err(Status::invalid_argument(format!(
                            "instance {i} is not an object of named inputs as instance 0 is"
                        )));
                    };
                    for (key, column) in keys.iter().zip(&mut columns) {
                        let value = row.remove(key).ok_or_else(|| {
                            Status::invalid_argument(format!("instance {i} has no input '{key}' (instance 0 has)"))
                        })?;
                        column.push(value);
                    }
                    if let Some(extra) = row.keys().next() {
                        return Err(Status::invalid_argument(format!(
                            "instance {i} has input '{extra}', which instance 0 has not"
                        )));
                    }
                }
                keys.into_iter()
                    .zip(columns)
                    .map(|(key, column)| {
                        let tensor = tensor_of(&Value::Array(column), dtype_of(&key)?)
                            .map_err(|e| e.context(format!("'instances' of input '{key}'")))?;
                        Ok((key, tensor))
                    })
                    .collect()
            }
        }
    }
}

fn is_b64(object: &serde_json::Map<String, Value>) -> bool {
    object.len() == 1 && object.contains_key("b64")
}

/// A nested JSON list (or scalar) as a tensor of `dtype`.
pub fn tensor_of(value: &Value, dtype: DType) -> Result<Tensor> {
    let mut dims = Vec::new();
    let mut probe = value;
    while let Value::Array(items) = probe {
        dims.push(items.len());
        match items.first() {
            Some(first) => probe = first,
            None => break,
        }
    }
    let mut leaves = Vec::with_capacity(dims.iter().product());
    collect_leaves(value, &dims, 0, &mut leaves)?;
    let at = |i: usize| format!("element {i}");
    match dtype {
        DType::F32 => {
            let values =
                leaves.iter().enumerate().map(|(i, v)| float(v).map(|x| x as f32).map_err(|e| e.context(at(i))));
            Tensor::from_slice(dims.as_slice(), &values.collect::<Result<Vec<_>>>()?)
        }
        DType::F64 => {
            let values = leaves.iter().enumerate().map(|(i, v)| float(v).map_err(|e| e.context(at(i))));
            Tensor::from_slice(dims.as_slice(), &values.collect::<Result<Vec<_>>>()?)
        }
        DType::I32 => Tensor::from_slice(dims.as_slice(), &integers::<i32>(&leaves)?),
        DType::I64 => Tensor::from_slice(dims.as_slice(), &integers::<i64>(&leaves)?),
        DType::U8 => Tensor::from_slice(dims.as_slice(), &integers::<u8>(&leaves)?),
        DType::I8 => Tensor::from_slice(dims.as_slice(), &integers::<i8>(&leaves)?),
        DType::I16 => Tensor::from_slice(dims.as_slice(), &integers::<i16>(&leaves)?),
        DType::U16 => Tensor::from_slice(dims.as_slice(), &integers::<u16>(&leaves)?),
        DType::U32 => Tensor::from_slice(dims.as_slice(), &integers::<u32>(&leaves)?),
        DType::F16 => {
            let values =
                leaves.iter().enumerate().map(|(i, v)| float(v).map(half::f16::from_f64).map_err(|e| e.context(at(i))));
            Tensor::from_slice(dims.as_slice(), &values.collect::<Result<Vec<_>>>()?)
        }
        DType::BF16 => {
            let values = leaves
                .iter()
                .enumerate()
                .map(|(i, v)| float(v).map(half::bf16::from_f64).map_err(|e| e.context(at(i))));
            Tensor::from_slice(dims.as_slice(), &values.collect::<Result<Vec<_>>>()?)
        }
        DType::U64 => {
            let values = leaves.iter().enumerate().map(|(i, v)| {
                v.as_u64().ok_or_else(|| {
                    Status::invalid_argument(format!("{}: expected an unsigned integer, got {v}", at(i)))
                })
            });
            Tensor::from_slice(dims.as_slice(), &values.collect::<Result<Vec<_>>>()?)
        }
        DType::Bool => {
            let values = leaves.iter().enumerate().map(|(i, v)| {
                v.as_bool()
                    .ok_or_else(|| Status::invalid_argument(format!("{}: expected true or false, got {v}", at(i))))
            });
            Tensor::from_slice(dims.as_slice(), &values.collect::<Result<Vec<_>>>()?)
        }
        DType::String => {
            let values = leaves.iter().enumerate().map(|(i, v)| string(v).map_err(|e| e.context(at(i))));
            Tensor::from_strings(dims.as_slice(), &values.collect::<Result<Vec<_>>>()?)
        }
        DType::Complex64 => Err(Status::unimplemented("complex64 inputs have no JSON form here")),
    }
}

fn collect_leaves<'a>(value: &'a Value, dims: &[usize], depth: usize, out: &mut Vec<&'a Value>) -> Result<()> {
    match (value, dims.get(depth)) {
        (Value::Array(items), Some(&len)) if items.len() == len => {
            items.iter().try_for_each(|item| collect_leaves(item, dims, depth + 1, out))
        }
        (Value::Array(items), Some(&len)) => Err(Status::invalid_argument(format!(
            "a list of {} where its neighbours have {len}: the lists must form a rectangular tensor",
            items.len()
        ))),
        (Value::Array(_), None) => {
            Err(Status::invalid_argument(format!("a list nested {} deep where its neighbours hold values", depth + 1)))
        }
        (leaf, None) => {
            out.push(leaf);
            Ok(())
        }
        (_, Some(_)) => Err(Status::invalid_argument(format!(
            "a value at depth {depth} where its neighbours are lists: the lists must form a rectangular tensor"
        ))),
    }
}

fn float(value: &Value) -> Result<f64> {
    match value {
        Value::Number(n) => n.as_f64().ok_or_else(|| Status::invalid_argument(format!("{n} is not a number"))),
        // TensorFlow Serving's writer emits these for non-finite values.
        Value::String(s) if s == "NaN" => Ok(f64::NAN),
        Value::String(s) if s == "Infinity" => Ok(f64::INFINITY),
        Value::String(s) if s == "-Infinity" => Ok(f64::NEG_INFINITY),
        other => Err(Status::invalid_argument(format!("expected a number, got {other}"))),
    }
}

fn integers<T: TryFrom<i64> + crate::tensor::Element>(leaves: &[&Value]) -> Result<Vec<T>> {
    leaves
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let n = v
                .as_i64()
                .ok_or_else(|| Status::invalid_argument(format!("element {i}: expected an integer, got {v}")))?;
            T::try_from(n)
                .map_err(|_| Status::invalid_argument(format!("element {i}: {n} is out of range for {:?}", T::DTYPE)))
        })
        .collect()
}

fn string(value: &Value) -> Result<Vec<u8>> {
    match value {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Object(o) if is_b64(o) => match &o["b64"] {
            Value::String(encoded) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| Status::invalid_argument(format!("'b64' is not base64: {e}"))),
            other => Err(Status::invalid_argument(format!("'b64' must be a string, got {other}"))),
        },
        other => Err(Status::invalid_argument(format!("expected a string or {{\"b64\": ...}}, got {other}"))),
    }
}

/// The answer's JSON: `{"predictions": [...]}` (row form: one entry per
/// batch row, an object of outputs when there are several) or
/// `{"outputs": ...}` (columnar: each output whole).
pub fn predict_answer(form: Form, outputs: &[(String, Tensor)]) -> Result<String> {
    let mut out = String::with_capacity(64 + outputs.iter().map(|(_, t)| t.num_elements() * 8).sum::<usize>());
    match form {
        Form::Columnar => {
            out.push_str("{\"outputs\":");
            write_outputs(&mut out, outputs, None)?;
            out.push('}');
        }
        Form::Row => {
            let mut batch = None;
            for (key, tensor) in outputs {
                let rows = *tensor.dims().first().ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "output '{key}' is a scalar, which has no rows: ask with 'inputs' (columnar) instead"
                    ))
                })?;
                match batch {
                    None => batch = Some(rows),
                    Some(n) if n != rows => {
                        return Err(Status::invalid_argument(format!(
                            "output '{key}' has {rows} rows where another has {n}: ask with 'inputs' (columnar) instead"
                        )));
                    }
                    Some(_) => {}
                }
            }
            let rows = batch.unwrap_or(0);
            out.push_str("{\"predictions\":[");
            for row in 0..rows {
                if row > 0 {
                    out.push(',');
                }
                write_outputs(&mut out, outputs, Some((row, rows)))?;
            }
            out.push_str("]}");
        }
    }
    Ok(out)
}

/// One output's value (its row `row` of `rows`, when given), or an object
/// of every output's by key when there are several.
fn write_outputs(out: &mut String, outputs: &[(String, Tensor)], row: Option<(usize, usize)>) -> Result<()> {
    let write_one = |out: &mut String, key: &str, tensor: &Tensor| match row {
        None => write_value(out, tensor, key, 0, tensor.num_elements(), 0),
        Some((row, rows)) => {
            let per_row = tensor.num_elements() / rows;
            write_value(out, tensor, key, row * per_row, per_row, 1)
        }
    };
    if let [(key, tensor)] = outputs {
        return write_one(out, key, tensor);
    }
    out.push('{');
    for (i, (key, tensor)) in outputs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_key(out, key);
        write_one(out, key, tensor)?;
    }
    out.push('}');
    Ok(())
}

/// A columnar predict body for `inputs` (what a client sends; strings
/// that are not UTF-8 go as `{"b64": ...}`).
pub fn columnar_request(signature: &str, inputs: &[(String, Tensor)]) -> Result<String> {
    let mut out = String::from("{\"signature_name\":");
    out.push_str(&Value::String(signature.to_string()).to_string());
    out.push_str(",\"inputs\":{");
    for (i, (key, tensor)) in inputs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_key(&mut out, key);
        write_value(&mut out, tensor, key, 0, tensor.num_elements(), 0)?;
    }
    out.push_str("}}");
    Ok(out)
}

fn write_key(out: &mut String, key: &str) {
    out.push_str(&Value::String(key.to_string()).to_string());
    out.push(':');
}

/// Writes elements `[start, start + len)` of `tensor` nested by its dims
/// from `depth` on.
fn write_value(out: &mut String, tensor: &Tensor, key: &str, start: usize, len: usize, depth: usize) -> Result<()> {
    let dims = tensor.dims();
    if depth == dims.len() {
        return write_element(out, tensor, key, start);
    }
    out.push('[');
    let inner = len.checked_div(dims[depth]).unwrap_or(0);
    for i in 0..dims[depth] {
        if i > 0 {
            out.push(',');
        }
        write_value(out, tensor, key, start + i * inner, inner, depth + 1)?;
    }
    out.push(']');
    Ok(())
}

fn write_element(out: &mut String, tensor: &Tensor, key: &str, at: usize) -> Result<()> {
    let written = match tensor.dtype() {
        DType::F32 => write_float(out, f64::from(tensor.as_slice::<f32>()?[at]), Some(tensor.as_slice::<f32>()?[at])),
        DType::F64 => write_float(out, tensor.as_slice::<f64>()?[at], None),
        DType::I32 => write!(out, "{}", tensor.as_slice::<i32>()?[at]),
        DType::I64 => write!(out, "{}", tensor.as_slice::<i64>()?[at]),
        DType::U8 => write!(out, "{}", tensor.as_slice::<u8>()?[at]),
        DType::U64 => write!(out, "{}", tensor.as_slice::<u64>()?[at]),
        DType::F16 => {
            let x = tensor.as_slice::<half::f16>()?[at].to_f32();
            write_float(out, f64::from(x), Some(x))
        }
        DType::BF16 => {
            let x = tensor.as_slice::<half::bf16>()?[at].to_f32();
            write_float(out, f64::from(x), Some(x))
        }
        DType::I8 => write!(out, "{}", tensor.as_slice::<i8>()?[at]),
        DType::I16 => write!(out, "{}", tensor.as_slice::<i16>()?[at]),
        DType::U16 => write!(out, "{}", tensor.as_slice::<u16>()?[at]),
        DType::U32 => write!(out, "{}", tensor.as_slice::<u32>()?[at]),
        DType::Bool => write!(out, "{}", tensor.as_slice::<bool>()?[at]),
        DType::String => {
            let strings = tensor.strings()?;
            let bytes = strings.get(at).unwrap_or_default();
            // TensorFlow Serving's rule: outputs named `*_bytes` are binary.
            match std::str::from_utf8(bytes) {
                Ok(text) if !key.ends_with("_bytes") => {
                    out.push_str(&Value::String(text.to_string()).to_string());
                    Ok(())
                }
                _ => write!(out, "{{\"b64\":\"{}\"}}", base64::engine::general_purpose::STANDARD.encode(bytes)),
            }
        }
        DType::Complex64 => {
            let (re, im) = tensor.complex_parts()[at];
            out.push('[');
            write_float(out, f64::from(re), Some(re))
                .and_then(|()| {
                    out.push(',');
                    write_float(out, f64::from(im), Some(im))
                })
                .map(|()| out.push(']'))
        }
    };
    written.map_err(|e| Status::internal(format!("writing output '{key}': {e}")))
}

/// The shortest decimal that reads back to the same value (of `single`'s
/// precision when given); non-finite values as TensorFlow Serving writes
/// them (`NaN`, `Infinity`, `-Infinity`, as JSON5 and Python read them).
fn write_float(out: &mut String, value: f64, single: Option<f32>) -> std::fmt::Result {
    if value.is_nan() {
        out.push_str("NaN");
        Ok(())
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "Infinity" } else { "-Infinity" });
        Ok(())
    } else {
        match single {
            Some(x) => write!(out, "{x}"),
            None => write!(out, "{value}"),
        }
    }
}

// ---------------------------------------------------------------------------
// :classify and :regress

/// A classify or regress body: the signature it names (empty: the
/// default) and its examples, each a serialized `tf.train.Example`.
pub struct ExamplesBody {
    pub signature: String,
    pub input: ExampleInput,
}

/// Reads `{"signature_name"?, "context"?, "examples": [{FEATURE: VALUE}...]}`:
/// each feature a value or a list of them, integers as an int64 list,
/// other numbers as a float list, strings (or `{"b64": ...}`) as a bytes
/// list, as TensorFlow Serving reads them.
pub fn parse_examples_body(body: &[u8]) -> Result<ExamplesBody> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| Status::invalid_argument(format!("the request body is not JSON: {e}")))?;
    let Value::Object(mut fields) = value else {
        return Err(Status::invalid_argument("the request body must be a JSON object"));
    };
    let signature = match fields.remove("signature_name") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(name)) => name,
        Some(other) => return Err(Status::invalid_argument(format!("signature_name must be a string, got {other}"))),
    };
    let context = fields.remove("context").map(|c| example_bytes(&c, "context")).transpose()?;
    let examples = match fields.remove("examples") {
        Some(Value::Array(examples)) => examples
            .iter()
            .enumerate()
            .map(|(i, e)| example_bytes(e, &format!("example {i}")))
            .collect::<Result<Vec<_>>>()?,
        Some(other) => return Err(Status::invalid_argument(format!("'examples' must be a list, got {other}"))),
        None => return Err(Status::invalid_argument("the request has no 'examples'")),
    };
    if let Some(other) = fields.keys().next() {
        return Err(Status::invalid_argument(format!("unexpected field '{other}' in the request")));
    }
    Ok(ExamplesBody { signature, input: ExampleInput { examples, context } })
}

/// A JSON object of features as a serialized `tf.train.Example`.
fn example_bytes(value: &Value, what: &str) -> Result<Vec<u8>> {
    use crate::ops::io::parse_example::wire;
    let Value::Object(features) = value else {
        return Err(Status::invalid_argument(format!("{what} must be an object of features, got {value}")));
    };
    let feature = features
        .iter()
        .map(|(key, value)| {
            let kind = feature_kind(value).map_err(|e| e.context(format_args!("{what}, feature '{key}'")))?;
            Ok((key.clone(), wire::Feature { kind: Some(kind) }))
        })
        .collect::<Result<_>>()?;
    let example = wire::Example { features: Some(wire::Features { feature }) };
    Ok(prost::Message::encode_to_vec(&example))
}

fn feature_kind(value: &Value) -> Result<crate::ops::io::parse_example::wire::Kind> {
    use crate::ops::io::parse_example::wire::{BytesList, FloatList, Int64List, Kind};
    let values: Vec<&Value> = match value {
        Value::Array(list) => list.iter().collect(),
        single => vec![single],
    };
    let Some(first) = values.first() else {
        return Err(Status::invalid_argument("an empty list: its type cannot be told"));
    };
    if first.is_number() {
        if values.iter().all(|v| v.is_i64()) {
            let ints = values.iter().filter_map(|v| v.as_i64()).collect();
            return Ok(Kind::Int64(Int64List { value: ints }));
        }
        let floats = values
            .iter()
            .map(|v| {
                v.as_f64()
                    .map(|x| x as f32)
                    .ok_or_else(|| Status::invalid_argument(format!("a list of numbers holds {v}")))
            })
            .collect::<Result<_>>()?;
        return Ok(Kind::Float(FloatList { value: floats }));
    }
    let bytes = values.iter().map(|v| string(v)).collect::<Result<_>>()?;
    Ok(Kind::Bytes(BytesList { value: bytes }))
}

/// `{"result": [[[LABEL, SCORE], ...] per example]}`.
pub fn classify_answer(classification: &Classification) -> Result<String> {
    let mut out = String::from("{\"result\": [");
    for (i, classes) in classification.classes.iter().enumerate() {
        out.push_str(if i == 0 { "[" } else { ", [" });
        for (c, class) in classes.iter().enumerate() {
            out.push_str(if c == 0 { "[" } else { ", [" });
            out.push_str(&Value::String(String::from_utf8_lossy(&class.label).into_owned()).to_string());
            out.push_str(", ");
            write_float(&mut out, f64::from(class.score), Some(class.score))
                .map_err(|e| Status::internal(format!("writing a score: {e}")))?;
            out.push(']');
        }
        out.push(']');
    }
    out.push_str("]}");
    Ok(out)
}

/// `{"result": [VALUE per example]}`.
pub fn regress_answer(regression: &Regression) -> Result<String> {
    let mut out = String::from("{\"result\": [");
    for (i, &value) in regression.values.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_float(&mut out, f64::from(value), Some(value))
            .map_err(|e| Status::internal(format!("writing a value: {e}")))?;
    }
    out.push_str("]}");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::saved_model::TensorInfo;
    use std::collections::BTreeMap;

    fn signature(inputs: &[(&str, DType)]) -> Signature {
        let info = |dtype| TensorInfo { tensor: "t:0".into(), dtype: DataType::Tensor(dtype), shape: None };
        Signature {
            method: "tensorflow/serving/predict".into(),
            inputs: inputs.iter().map(|(k, d)| (k.to_string(), info(*d))).collect(),
            outputs: BTreeMap::new(),
        }
    }

    #[test]
    fn row_instances_stack_into_a_batch_per_named_input() {
        let body = br#"{"signature_name": "s", "instances": [{"x": [1, 2.5], "w": "a"}, {"x": [3, 4], "w": {"b64": "/w=="}}]}"#;
        let parsed = parse_predict_body(body).unwrap();
        assert_eq!((parsed.signature.as_str(), parsed.form), ("s", Form::Row));
        let inputs = parsed.inputs(&signature(&[("x", DType::F32), ("w", DType::String)])).unwrap();
        let x = &inputs.iter().find(|(k, _)| k == "x").unwrap().1;
        assert_eq!(x.dims(), [2, 2]);
        assert_eq!(x.as_slice::<f32>().unwrap(), [1.0, 2.5, 3.0, 4.0]);
        let w = &inputs.iter().find(|(k, _)| k == "w").unwrap().1;
        assert_eq!(w.strings().unwrap().to_vec(), [&b"a"[..], &[0xff][..]]);
    }

    #[test]
    fn unnamed_values_feed_the_one_input_in_either_form() {
        let sig = signature(&[("ids", DType::I64)]);
        let rows = parse_predict_body(br#"{"instances": [[1, 2], [3, 4], [5, 6]]}"#).unwrap().inputs(&sig).unwrap();
        assert_eq!(rows[0].1.dims(), [3, 2]);
        let cols = parse_predict_body(br#"{"inputs": 7}"#).unwrap().inputs(&sig).unwrap();
        assert_eq!((cols[0].1.dims(), cols[0].1.as_slice::<i64>().unwrap()), (&[][..], &[7i64][..]));
        let two = signature(&[("a", DType::F32), ("b", DType::F32)]);
        let err = parse_predict_body(br#"{"inputs": [1]}"#).unwrap().inputs(&two).err().unwrap().to_string();
        assert!(err.contains("2 inputs") && err.contains("a, b"), "{err}");
    }

    #[test]
    fn bad_bodies_are_refused_naming_the_input_and_element() {
        let sig = signature(&[("x", DType::I32)]);
        let err = |body: &[u8]| match parse_predict_body(body) {
            Ok(parsed) => parsed.inputs(&sig).err().unwrap().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(err(b"{").contains("not JSON"));
        assert!(err(br#"{"instances": [1], "inputs": [1]}"#).contains("both"));
        assert!(err(br#"{"rows": [1]}"#).contains("neither"));
        assert!(err(br#"{"instances": []}"#).contains("empty"));
        let ragged = err(br#"{"instances": [[1, 2], [3]]}"#);
        assert!(ragged.contains("input 'x'") && ragged.contains("rectangular"), "{ragged}");
        let fraction = err(br#"{"inputs": [1, 2.5]}"#);
        assert!(fraction.contains("element 1") && fraction.contains("integer"), "{fraction}");
        assert!(err(br#"{"inputs": [1, 3000000000]}"#).contains("out of range"));
        assert!(err(br#"{"inputs": {"y": [1]}}"#).contains("no input 'y'"));
        let missing = err(br#"{"instances": [{"x": 1}, {"z": 2}]}"#);
        assert!(missing.contains("instance 1") && missing.contains("'x'"), "{missing}");
    }

    #[test]
    fn a_columnar_request_reads_back_as_the_tensors_written() {
        let x = Tensor::from_slice([2, 3], &[1.5f32, -2.0, 0.0, 1e-7, 3.25e12, 7.0]).unwrap();
        let w = Tensor::from_strings([2], &[&b"caf\xc3\xa9"[..], &[0xff, 0x00]]).unwrap();
        let body = columnar_request("s", &[("x".into(), x.clone()), ("w".into(), w.clone())]).unwrap();
        let parsed = parse_predict_body(body.as_bytes()).unwrap();
        assert_eq!((parsed.signature.as_str(), parsed.form), ("s", Form::Columnar));
        let inputs = parsed.inputs(&signature(&[("x", DType::F32), ("w", DType::String)])).unwrap();
        for (key, want) in [("x", &x), ("w", &w)] {
            let got = &inputs.iter().find(|(k, _)| k == key).unwrap().1;
            assert!(got.bit_eq(want), "{key}: {got:?} from {body}");
        }
    }

    #[test]
    fn answers_take_the_form_of_the_request() {
        let probs = Tensor::from_slice([2, 2], &[0.25f32, 0.75, 0.1, f32::NAN]).unwrap();
        let ids = Tensor::from_slice([2], &[3i64, 1]).unwrap();
        let words = Tensor::from_strings([2], &[&b"yes"[..], b"no"]).unwrap();
        let one = predict_answer(Form::Row, &[("p".into(), probs.clone())]).unwrap();
        assert_eq!(one, r#"{"predictions":[[0.25,0.75],[0.1,NaN]]}"#);
        let several = predict_answer(Form::Row, &[("ids".into(), ids.clone()), ("w_bytes".into(), words)]).unwrap();
        assert_eq!(
            several,
            r#"{"predictions":[{"ids":3,"w_bytes":{"b64":"eWVz"}},{"ids":1,"w_bytes":{"b64":"bm8="}}]}"#
        );
        let columns = predict_answer(Form::Columnar, &[("ids".into(), ids), ("n".into(), Tensor::scalar(2.5f64))]);
        assert_eq!(columns.unwrap(), r#"{"outputs":{"ids":[3,1],"n":2.5}}"#);
        let scalar = predict_answer(Form::Row, &[("n".into(), Tensor::scalar(1i32))]).unwrap_err().to_string();
        assert!(scalar.contains("'n'") && scalar.contains("columnar"), "{scalar}");
    }
}
