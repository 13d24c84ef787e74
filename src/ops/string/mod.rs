//! Text preprocessing: the string ops Keras `TextVectorization`,
//! `Hashing` and `tf.strings` put in graphs. Case (`StringLower`,
//! `StringUpper`), regular expressions (`StaticRegexReplace`,
//! `RegexReplace`, `StaticRegexFullMatch`, `RegexFullMatch`: RE2 syntax
//! through the `regex` crate, which reads it alike), splitting into
//! a sparse tensor of tokens (`StringSplitV2`; v1's `StringSplit` at
//! any byte of its delimiter), n-grams of ragged rows of
//! tokens (`StringNGrams`, Keras `TextVectorization(ngrams=...)`), hashing into buckets
//! (`StringToHashBucketFast`: FarmHash's Fingerprint64, as TensorFlow;
//! `StringToHashBucketStrong`: keyed SipHash-2-4), `AsString` (numbers
//! as C's printf writes them, booleans), `StringStrip` and
//! `StringToNumber`; code points in [`unicode`]; substrings, joins and
//! base64 in [`pieces`].
//!
//! Owns: these kernels. Must not keep state between steps: a pattern is
//! compiled once, when its kernel is built (a static one), or per step.

use crate::error::{Result, Status};
use crate::graph::spec::{AttrList, AttrValue, NodeSpec};
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Tensor};
use regex::bytes::Regex;

pub mod pieces;
pub mod unicode;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("StringLower", unary_signature, build_case::<false>),
    OpDef::kernel("StringUpper", unary_signature, build_case::<true>),
    OpDef::kernel("StaticRegexReplace", unary_signature, build_static_replace),
    OpDef::kernel("RegexReplace", regex_replace_signature, build_regex_replace),
    OpDef::kernel("StaticRegexFullMatch", full_match_signature, build_static_full_match),
    OpDef::kernel("RegexFullMatch", dynamic_full_match_signature, build_dynamic_full_match),
    OpDef::kernel("StringSplitV2", split_signature, build_split),
    OpDef::kernel("StringSplit", split_signature, build_split),
    OpDef::kernel("StringNGrams", ngrams_signature, build_ngrams),
    OpDef::kernel("StringToHashBucketFast", hash_signature, build_hash_fast),
    OpDef::kernel("StringToHashBucketStrong", hash_signature, build_hash_strong),
    OpDef::kernel("AsString", as_string_signature, build_as_string),
    OpDef::kernel("StringStrip", unary_signature, build_strip),
    OpDef::kernel("StringToNumber", to_number_signature, build_to_number),
];

fn to_number_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING], vec![ValueType::Tensor(node.attr_dtype_or("out_type", DType::F32)?)]))
}

const STRING: ValueType = ValueType::Tensor(DType::String);
const INT64: ValueType = ValueType::Tensor(DType::I64);

fn unary_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING], vec![STRING]))
}

fn regex_replace_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING, STRING, STRING], vec![STRING]))
}

fn full_match_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING], vec![ValueType::Tensor(DType::Bool)]))
}

fn dynamic_full_match_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING, STRING], vec![ValueType::Tensor(DType::Bool)]))
}

fn split_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING, STRING], vec![INT64, STRING, INT64]))
}

/// `[string data, Tsplits splits] -> [string ngrams, Tsplits splits]`.
fn ngrams_signature(node: &NodeSpec) -> Result<OpSignature> {
    let splits = ValueType::Tensor(node.attr_dtype_or("Tsplits", DType::I64)?);
    Ok(OpSignature::new(vec![STRING, splits], vec![STRING, splits]))
}

fn hash_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING], vec![INT64]))
}

fn as_string_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![ValueType::Tensor(node.attr_dtype("T")?)], vec![STRING]))
}

/// `f` applied to every string of input 0, output shaped as it.
fn map_strings(ctx: &mut OpContext<'_>, mut f: impl FnMut(&[u8]) -> Result<Vec<u8>>) -> Result<()> {
    let input = ctx.input(0)?;
    let out: Vec<Vec<u8>> = input.strings()?.iter().map(&mut f).collect::<Result<_>>()?;
    let out = Tensor::from_strings(input.shape().clone(), &out)?;
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// Case

struct Case<const UPPER: bool> {
    /// `encoding: "utf-8"`: Unicode case mapping; `""`: ASCII letters only.
    utf8: bool,
    node: String,
}

fn build_case<const UPPER: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let utf8 = match node.attr_str_or("encoding", "")?.to_ascii_lowercase().as_str() {
        "" => false,
        "utf-8" | "utf8" => true,
        other => {
            return Err(Status::unimplemented(format!(
                "node '{}' ({}): encoding '{other}' (only '' and 'utf-8')",
                node.name, node.op
            )));
        }
    };
    Ok(Box::new(Case::<UPPER> { utf8, node: node.name.clone() }))
}

impl<const UPPER: bool> OpKernel for Case<UPPER> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        map_strings(ctx, |s| {
            if !self.utf8 {
                return Ok(if UPPER { s.to_ascii_uppercase() } else { s.to_ascii_lowercase() });
            }
            let text = std::str::from_utf8(s).map_err(|e| {
                Status::invalid_argument(format!("node '{}': a string that is not UTF-8 ({e})", self.node))
            })?;
            Ok(if UPPER { text.to_uppercase() } else { text.to_lowercase() }.into_bytes())
        })
    }
}

// ---------------------------------------------------------------------------
// Regular expressions

/// RE2's rewrite string (`\1`, `\\`) as the `regex` crate's (`${1}`, `$$`
/// for a literal dollar).
fn regex_rewrite(rewrite: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(rewrite.len());
    let mut bytes = rewrite.iter().copied();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(d @ b'0'..=b'9') => out.extend_from_slice(format!("${{{}}}", d - b'0').as_bytes()),
                Some(b'\\') => out.push(b'\\'),
                other => {
                    return Err(Status::invalid_argument(format!(
                        "rewrite '{}': a backslash must be followed by a digit or a backslash, not {}",
                        String::from_utf8_lossy(rewrite),
                        other.map_or("the end".to_string(), |c| format!("'{}'", c as char))
                    )));
                }
            },
            b'$' => out.extend_from_slice(b"$$"),
            other => out.push(other),
        }
    }
    Ok(out)
}

fn compile(pattern: &[u8], node: &NodeSpec) -> Result<Regex> {
    let pattern = std::str::from_utf8(pattern).map_err(|_| {
        Status::invalid_argument(format!("node '{}' ({}): the pattern is not UTF-8", node.name, node.op))
    })?;
    Regex::new(pattern)
        .map_err(|e| Status::invalid_argument(format!("node '{}' ({}): pattern '{pattern}': {e}", node.name, node.op)))
}

fn replace(regex: &Regex, text: &[u8], rewrite: &[u8], global: bool) -> Vec<u8> {
    if global { regex.replace_all(text, rewrite).into_owned() } else { regex.replace(text, rewrite).into_owned() }
}

struct StaticReplace {
    regex: Regex,
    rewrite: Vec<u8>,
    global: bool,
}

fn build_static_replace(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let bytes = |key: &str| match node.get_attr(key) {
        Some(AttrValue::Bytes(b)) => Ok(b.clone()),
        // An empty string may arrive as an attr with no value set.
        Some(AttrValue::List(AttrList::Int(v))) if v.is_empty() => Ok(Vec::new()),
        other => Err(Status::invalid_argument(format!(
            "node '{}' ({}): attr '{key}' should be a string, got {other:?}",
            node.name, node.op
        ))),
    };
    let regex = compile(&bytes("pattern")?, node)?;
    let rewrite = regex_rewrite(&bytes("rewrite")?).map_err(|e| e.context(format_args!("node '{}'", node.name)))?;
    Ok(Box::new(StaticReplace { regex, rewrite, global: node.attr_bool_or("replace_global", true)? }))
}

impl OpKernel for StaticReplace {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        map_strings(ctx, |s| Ok(replace(&self.regex, s, &self.rewrite, self.global)))
    }
}

struct DynamicReplace {
    node: NodeSpec,
    global: bool,
}

fn build_regex_replace(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(DynamicReplace {
        node: NodeSpec::new(init.node.name.clone(), init.node.op.clone()),
        global: init.node.attr_bool_or("replace_global", true)?,
    }))
}

impl OpKernel for DynamicReplace {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let regex = compile(ctx.input(1)?.string_value().map_err(|e| e.context("pattern"))?, &self.node)?;
        let rewrite = regex_rewrite(ctx.input(2)?.string_value().map_err(|e| e.context("rewrite"))?)?;
        map_strings(ctx, |s| Ok(replace(&regex, s, &rewrite, self.global)))
    }
}

/// A pattern that must match the whole string, as RE2's `FullMatch`.
fn compile_full(pattern: &[u8], node: &NodeSpec) -> Result<Regex> {
    let mut anchored = b"^(?:".to_vec();
    anchored.extend_from_slice(pattern);
    anchored.extend_from_slice(b")\\z");
    compile(&anchored, node).map_err(|_| {
        // Name the pattern as written, not as anchored here.
        match compile(pattern, node) {
            Err(e) => e,
            Ok(_) => {
                Status::invalid_argument(format!("node '{}' ({}): pattern cannot be anchored", node.name, node.op))
            }
        }
    })
}

fn full_matches(ctx: &mut OpContext<'_>, regex: &Regex) -> Result<()> {
    let input = ctx.input(0)?;
    let matches: Vec<bool> = input.strings()?.iter().map(|s| regex.is_match(s)).collect();
    let out = Tensor::from_slice(input.shape().clone(), &matches)?;
    ctx.set_output(0, out);
    Ok(())
}

struct StaticFullMatch {
    regex: Regex,
}

fn build_static_full_match(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let pattern = match init.node.get_attr("pattern") {
        Some(AttrValue::Bytes(b)) => b.clone(),
        other => {
            return Err(Status::invalid_argument(format!(
                "node '{}' ({}): attr 'pattern' should be a string, got {other:?}",
                init.node.name, init.node.op
            )));
        }
    };
    Ok(Box::new(StaticFullMatch { regex: compile_full(&pattern, init.node)? }))
}

impl OpKernel for StaticFullMatch {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        full_matches(ctx, &self.regex)
    }
}

struct DynamicFullMatch {
    node: NodeSpec,
}

fn build_dynamic_full_match(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(DynamicFullMatch { node: NodeSpec::new(init.node.name.clone(), init.node.op.clone()) }))
}

impl OpKernel for DynamicFullMatch {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let regex = compile_full(ctx.input(1)?.string_value().map_err(|e| e.context("pattern"))?, &self.node)?;
        full_matches(ctx, &regex)
    }
}

// ---------------------------------------------------------------------------
// Splitting

/// The whitespace an empty separator splits on.
fn is_split_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `text`'s tokens: on runs of whitespace when `sep` is empty (no empty
/// tokens), on each `sep` otherwise (empty tokens kept). With a
/// non-negative `maxsplit`, after that many tokens the rest is one more
/// token: on whitespace, what follows the next run of whitespace, even
/// when empty, as TensorFlow's kernel splits (`"a b"` split at most twice
/// is `a`, `b` and an empty token).
fn split<'a>(text: &'a [u8], sep: &[u8], maxsplit: i64) -> Vec<&'a [u8]> {
    let limit = usize::try_from(maxsplit).ok();
    let mut tokens = Vec::new();
    if sep.is_empty() {
        let skip_space = |mut at: usize| {
            while at < text.len() && is_split_space(text[at]) {
                at += 1;
            }
            at
        };
        let mut at = skip_space(0);
        while at < text.len() {
            let end = text[at..].iter().position(|&b| is_split_space(b)).map_or(text.len(), |p| at + p);
            tokens.push(&text[at..end]);
            at = skip_space(end);
            if limit.is_some_and(|l| tokens.len() == l) {
                tokens.push(&text[at..]);
                break;
            }
        }
        return tokens;
    }
    let mut rest = text;
    while let Some(p) = rest.windows(sep.len()).position(|w| w == sep) {
        if limit.is_some_and(|l| tokens.len() == l) {
            break;
        }
        tokens.push(&rest[..p]);
        rest = &rest[p + sep.len()..];
    }
    tokens.push(rest);
    tokens
}

struct Split {
    maxsplit: i64,
    /// `StringSplit` (v1, `tf.compat.v1.string_split`): the delimiter is a
    /// set of bytes, each of which splits (none: every byte a token), and
    /// empty tokens are dropped when this is true.
    v1_skip_empty: Option<bool>,
}

fn build_split(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let v1_skip_empty =
        if init.node.op == "StringSplit" { Some(init.node.attr_bool_or("skip_empty", true)?) } else { None };
    Ok(Box::new(Split { maxsplit: init.node.attr_int_or("maxsplit", -1)?, v1_skip_empty }))
}

/// `StringSplit`'s tokens: split at any byte of `delimiters` (every byte
/// its own token for none); an empty text has no tokens.
fn split_v1<'a>(text: &'a [u8], delimiters: &[u8], skip_empty: bool) -> Vec<&'a [u8]> {
    if text.is_empty() {
        return Vec::new();
    }
    if delimiters.is_empty() {
        return text.chunks(1).collect();
    }
    text.split(|b| delimiters.contains(b)).filter(|t| !(skip_empty && t.is_empty())).collect()
}

impl OpKernel for Split {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        if input.rank() != 1 {
            return Err(Status::invalid_argument(format!("input must be a vector, got shape {}", input.shape())));
        }
        let sep = ctx.input(1)?.string_value().map_err(|e| e.context("sep (delimiter)"))?;
        let mut indices: Vec<i64> = Vec::new();
        let mut values: Vec<&[u8]> = Vec::new();
        let mut widest = 0;
        let strings = input.strings()?;
        for (row, text) in strings.iter().enumerate() {
            let tokens = match self.v1_skip_empty {
                Some(skip_empty) => split_v1(text, sep, skip_empty),
                None => split(text, sep, self.maxsplit),
            };
            widest = widest.max(tokens.len());
            for (column, token) in tokens.into_iter().enumerate() {
                indices.extend([row as i64, column as i64]);
                values.push(token);
            }
        }
        let n = values.len();
        let shape = [strings.len() as i64, widest as i64];
        let (indices, values) = (Tensor::from_slice([n, 2], &indices)?, Tensor::from_strings([n], &values)?);
        ctx.set_output(0, indices);
        ctx.set_output(1, values);
        ctx.set_output(2, Tensor::from_slice([2], &shape)?);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// N-grams

struct NGrams {
    separator: Vec<u8>,
    widths: Vec<usize>,
    left_pad: Vec<u8>,
    right_pad: Vec<u8>,
    /// < 0: each width pads `width - 1` tokens a side.
    pad_width: i64,
    preserve_short: bool,
}

fn build_ngrams(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let widths = match node.get_attr("ngram_widths") {
        Some(AttrValue::List(AttrList::Int(w))) if !w.is_empty() && w.iter().all(|&w| w > 0) => {
            w.iter().map(|&w| w as usize).collect()
        }
        other => {
            return Err(Status::invalid_argument(format!(
                "node '{}' ({}): ngram_widths must be positive ints, got {other:?}",
                node.name, node.op
            )));
        }
    };
    Ok(Box::new(NGrams {
        separator: node.attr_str_or("separator", " ")?.into_bytes(),
        widths,
        left_pad: node.attr_str_or("left_pad", "")?.into_bytes(),
        right_pad: node.attr_str_or("right_pad", "")?.into_bytes(),
        pad_width: node.attr_int_or("pad_width", 0)?,
        preserve_short: node.attr_bool_or("preserve_short_sequences", false)?,
    }))
}

impl NGrams {
    fn pad_for(&self, width: usize) -> usize {
        usize::try_from(self.pad_width).map_or(width - 1, |p| p.min(width - 1))
    }

    fn count(&self, tokens: usize, width: usize) -> usize {
        (tokens + 2 * self.pad_for(width) + 1).saturating_sub(width)
    }

    /// The `count` n-grams of `width` over `tokens` padded on both sides,
    /// as TensorFlow makes them.
    fn push(&self, tokens: &[&[u8]], width: usize, count: usize, out: &mut Vec<Vec<u8>>) {
        let pad = self.pad_for(width);
        for index in 0..count {
            let left = pad.saturating_sub(index);
            let right = pad.saturating_sub(count - (index + 1));
            let taken = width - (left + right);
            let start = if left > 0 { 0 } else { index - pad };
            let pieces = std::iter::repeat_n(&self.left_pad[..], left)
                .chain(tokens[start..start + taken].iter().copied())
                .chain(std::iter::repeat_n(&self.right_pad[..], right));
            let mut gram = Vec::new();
            for (i, piece) in pieces.enumerate() {
                if i > 0 {
                    gram.extend_from_slice(&self.separator);
                }
                gram.extend_from_slice(piece);
            }
            out.push(gram);
        }
    }
}

impl OpKernel for NGrams {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (data, splits_tensor) = (ctx.input(0)?, ctx.input(1)?);
        let data = data.strings()?;
        let splits: Vec<i64> = match splits_tensor.dtype() {
            DType::I32 => splits_tensor.as_slice::<i32>()?.iter().map(|&s| i64::from(s)).collect(),
            _ => splits_tensor.as_slice::<i64>()?.to_vec(),
        };
        let bad = splits.first() != Some(&0)
            || splits.last() != Some(&(data.len() as i64))
            || splits.windows(2).any(|w| w[1] < w[0]);
        if bad {
            return Err(Status::invalid_argument(format!(
                "data_splits must start at 0, never decrease and end at the {} strings, got {splits:?}",
                data.len()
            )));
        }
        let tokens: Vec<&[u8]> = data.iter().collect();
        let mut grams: Vec<Vec<u8>> = Vec::new();
        let mut out_splits = vec![0i64];
        for w in splits.windows(2) {
            let row = &tokens[w[0] as usize..w[1] as usize];
            let before = grams.len();
            for &width in &self.widths {
                let count = self.count(row.len(), width);
                self.push(row, width, count, &mut grams);
            }
            if self.preserve_short && grams.len() == before && !row.is_empty() {
                // Shorter than every width: one n-gram of the whole padded row.
                let pad = usize::try_from(self.pad_width).unwrap_or(0);
                self.push(row, row.len() + 2 * pad, 1, &mut grams);
            }
            out_splits.push(grams.len() as i64);
        }
        let n = grams.len();
        let (grams, rows) = (Tensor::from_strings([n], &grams)?, out_splits.len());
        let out_splits = match splits_tensor.dtype() {
            DType::I32 => Tensor::from_slice([rows], &out_splits.iter().map(|&s| s as i32).collect::<Vec<_>>())?,
            _ => Tensor::from_slice([rows], &out_splits)?,
        };
        ctx.set_output(0, grams);
        ctx.set_output(1, out_splits);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Hashing

fn num_buckets(node: &NodeSpec) -> Result<u64> {
    let n = node.attr_int("num_buckets")?;
    u64::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
        Status::invalid_argument(format!("node '{}' ({}): num_buckets must be positive, got {n}", node.name, node.op))
    })
}

fn hash_into_buckets(ctx: &mut OpContext<'_>, hash: impl Fn(&[u8]) -> u64, buckets: u64) -> Result<()> {
    let input = ctx.input(0)?;
    let out: Vec<i64> = input.strings()?.iter().map(|s| (hash(s) % buckets) as i64).collect();
    let out = Tensor::from_slice(input.shape().clone(), &out)?;
    ctx.set_output(0, out);
    Ok(())
}

struct HashFast {
    buckets: u64,
}

fn build_hash_fast(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(HashFast { buckets: num_buckets(init.node)? }))
}

impl OpKernel for HashFast {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        hash_into_buckets(ctx, farmhash::fingerprint64, self.buckets)
    }
}

struct HashStrong {
    buckets: u64,
    key: [u64; 2],
}

fn build_hash_strong(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let key = match node.get_attr("key") {
        Some(AttrValue::List(AttrList::Int(k))) if k.len() == 2 => [k[0] as u64, k[1] as u64],
        other => {
            return Err(Status::invalid_argument(format!(
                "node '{}' ({}): attr 'key' must be two ints, got {other:?}",
                node.name, node.op
            )));
        }
    };
    Ok(Box::new(HashStrong { buckets: num_buckets(node)?, key }))
}

impl OpKernel for HashStrong {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let [k0, k1] = self.key;
        let hash = |s: &[u8]| {
            use std::hash::Hasher;
            let mut hasher = siphasher::sip::SipHasher24::new_with_keys(k0, k1);
            hasher.write(s);
            hasher.finish()
        };
        hash_into_buckets(ctx, hash, self.buckets)
    }
}

// ---------------------------------------------------------------------------
// AsString

struct AsString {
    width: usize,
    fill: u8,
    /// Floats: printf's conversion (`f`, `e` or `g`) and precision.
    float_style: (u8, Option<usize>),
}

fn build_as_string(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    if !matches!(dtype, DType::I32 | DType::I64 | DType::U8 | DType::U64 | DType::Bool | DType::F32 | DType::F64) {
        return Err(Status::unimplemented(format!(
            "node '{}' ({}): AsString of {dtype} (numbers and bools are formatted)",
            node.name, node.op
        )));
    }
    let (scientific, shortest) = (node.attr_bool_or("scientific", false)?, node.attr_bool_or("shortest", false)?);
    if scientific && shortest {
        return Err(Status::invalid_argument(format!(
            "node '{}' ({}): Cannot select both scientific and shortest notation",
            node.name, node.op
        )));
    }
    let conversion = if scientific {
        b'e'
    } else if shortest {
        b'g'
    } else {
        b'f'
    };
    let precision = usize::try_from(node.attr_int_or("precision", -1)?).ok();
    let fill = node.attr_str_or("fill", "")?;
    let fill = match fill.as_bytes() {
        [] => b' ',
        [c] => *c,
        _ => {
            return Err(Status::invalid_argument(format!(
                "node '{}' ({}): fill must be one character, got '{fill}'",
                node.name, node.op
            )));
        }
    };
    Ok(Box::new(AsString {
        width: usize::try_from(node.attr_int_or("width", -1)?).unwrap_or(0),
        fill,
        float_style: (conversion, precision),
    }))
}

impl OpKernel for AsString {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let plain: Vec<String> = match input.dtype() {
            DType::I32 => input.as_slice::<i32>()?.iter().map(i32::to_string).collect(),
            DType::I64 => input.as_slice::<i64>()?.iter().map(i64::to_string).collect(),
            DType::U8 => input.as_slice::<u8>()?.iter().map(u8::to_string).collect(),
            DType::U64 => input.as_slice::<u64>()?.iter().map(u64::to_string).collect(),
            DType::Bool => input.as_slice::<bool>()?.iter().map(|b| b.to_string()).collect(),
            DType::F32 => {
                input.as_slice::<f32>()?.iter().map(|&x| printf_float(f64::from(x), self.float_style)).collect()
            }
            DType::F64 => input.as_slice::<f64>()?.iter().map(|&x| printf_float(x, self.float_style)).collect(),
            other => return Err(Status::unimplemented(format!("AsString of {other}"))),
        };
        let padded: Vec<Vec<u8>> = plain
            .into_iter()
            .map(|s| {
                let pad = self.width.saturating_sub(s.len());
                // A '0' fill goes after the sign, as printf's does.
                let (sign, digits) =
                    if self.fill == b'0' && s.starts_with('-') { ("-", &s[1..]) } else { ("", &s[..]) };
                let mut out = sign.as_bytes().to_vec();
                out.extend(std::iter::repeat_n(self.fill, pad));
                out.extend_from_slice(digits.as_bytes());
                out
            })
            .collect();
        let out = Tensor::from_strings(input.shape().clone(), &padded)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// C's `printf("%.{precision}{conversion}", x)` for `f`, `e` and `g`
/// (TensorFlow formats floats with it): default precision 6, exponents of
/// at least two digits, `%g` without trailing zeros, `nan`/`inf`.
fn printf_float(x: f64, (conversion, precision): (u8, Option<usize>)) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let exponent_form = |x: f64, digits: usize| -> (String, i32) {
        let text = format!("{x:.digits$e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let sign = if exponent < 0 { '-' } else { '+' };
        (format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs()), exponent)
    };
    match conversion {
        b'e' => exponent_form(x, precision.unwrap_or(6)).0,
        b'g' => {
            let p = precision.unwrap_or(6).max(1);
            let (_, exponent) = exponent_form(x, p - 1);
            let text = if (exponent as i64) < p as i64 && exponent >= -4 {
                let digits = (p as i64 - 1 - exponent as i64).max(0) as usize;
                format!("{x:.digits$}")
            } else {
                exponent_form(x, p - 1).0
            };
            // %g drops trailing zeros (and a bare point) from the mantissa.
            let (mantissa, tail) = match text.find('e') {
                Some(at) => text.split_at(at),
                None => (text.as_str(), ""),
            };
            let mantissa =
                if mantissa.contains('.') { mantissa.trim_end_matches('0').trim_end_matches('.') } else { mantissa };
            format!("{mantissa}{tail}")
        }
        _ => format!("{x:.*}", precision.unwrap_or(6)),
    }
}

// ---------------------------------------------------------------------------
// Strip, numbers

struct Strip;

fn build_strip(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Strip))
}

impl OpKernel for Strip {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        map_strings(ctx, |s| Ok(s.trim_ascii().to_vec()))
    }
}

struct ToNumber {
    out: DType,
}

fn build_to_number(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let out = node.attr_dtype_or("out_type", DType::F32)?;
    if !matches!(out, DType::F32 | DType::F64 | DType::I32 | DType::I64) {
        return Err(Status::invalid_argument(format!(
            "node '{}' ({}): out_type {out} (float32, float64, int32 or int64)",
            node.name, node.op
        )));
    }
    Ok(Box::new(ToNumber { out }))
}

impl OpKernel for ToNumber {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let strings = input.strings()?;
        let texts = strings.iter().map(|s| {
            std::str::from_utf8(s).ok().map(str::trim_ascii).filter(|t| !t.is_empty()).ok_or_else(|| not_a_number(s))
        });
        fn parse<'a, T: std::str::FromStr>(texts: impl Iterator<Item = Result<&'a str>>) -> Result<Vec<T>> {
            texts.map(|t| t.and_then(|t| t.parse::<T>().map_err(|_| not_a_number(t.as_bytes())))).collect()
        }
        let shape = input.shape().clone();
        let out = match self.out {
            DType::F32 => Tensor::from_slice(shape, &parse::<f32>(texts)?)?,
            DType::F64 => Tensor::from_slice(shape, &parse::<f64>(texts)?)?,
            DType::I32 => Tensor::from_slice(shape, &parse::<i32>(texts)?)?,
            _ => Tensor::from_slice(shape, &parse::<i64>(texts)?)?,
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

fn not_a_number(s: &[u8]) -> Status {
    Status::invalid_argument(format!(
        "StringToNumberOp could not correctly convert string: {}",
        String::from_utf8_lossy(s)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ResourceMgr;
    use crate::ops::Value;
    use crate::ops::testing::ty;

    fn strings(v: &[&str]) -> Tensor {
        Tensor::from_strings([v.len()], v).unwrap()
    }

    fn run(node: &NodeSpec, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let mgr = ResourceMgr::default();
        let out = crate::ops::run_kernel_once(node, inputs.into_iter().map(Value::Tensor).collect(), &mgr)?;
        Ok(out.into_iter().map(|v| v.as_tensor().unwrap().clone()).collect())
    }

    fn texts(t: &Tensor) -> Vec<String> {
        t.strings().unwrap().iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
    }

    fn bytes(s: &str) -> AttrValue {
        AttrValue::Bytes(s.as_bytes().to_vec())
    }

    #[test]
    fn case_maps_ascii_by_default_and_unicode_when_asked() {
        let input = strings(&["Hello WORLD", "ÄÖ Straße"]);
        let lower = run(&NodeSpec::new("l", "StringLower"), vec![input.clone()]).unwrap();
        assert_eq!(texts(&lower[0]), ["hello world", "ÄÖ straße"]);
        let utf8 = NodeSpec::new("l", "StringLower").attr("encoding", bytes("utf-8"));
        assert_eq!(texts(&run(&utf8, vec![input.clone()]).unwrap()[0]), ["hello world", "äö straße"]);
        let upper = NodeSpec::new("u", "StringUpper").attr("encoding", bytes("utf-8"));
        assert_eq!(texts(&run(&upper, vec![input]).unwrap()[0]), ["HELLO WORLD", "ÄÖ STRASSE"]);
        let bad = Tensor::from_strings([1], &[&b"\xff"[..]]).unwrap();
        let err = run(&utf8, vec![bad]).unwrap_err();
        assert!(err.message.contains("node 'l'") && err.message.contains("UTF-8"), "{err}");
    }

    #[test]
    fn regex_replace_strips_punctuation_as_keras_standardizes() {
        // TextVectorization's default standardization pattern, as exported.
        let pattern = r##"[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']"##;
        let node = NodeSpec::new("r", "StaticRegexReplace").attr("pattern", bytes(pattern)).attr("rewrite", bytes(""));
        let out = run(&node, vec![strings(&["a dog, a cat!", "[x] (y)"])]).unwrap();
        assert_eq!(texts(&out[0]), ["a dog a cat", "x y"]);
        // Groups, a literal dollar and backslash; only the first when not global.
        let node = NodeSpec::new("r", "StaticRegexReplace")
            .attr("pattern", bytes(r"(\w+)@(\w+)"))
            .attr("rewrite", bytes(r"\2$\\\1"))
            .attr("replace_global", AttrValue::Bool(false));
        assert_eq!(texts(&run(&node, vec![strings(&["a@b c@d"])]).unwrap()[0]), [r"b$\a c@d"]);
        let dynamic = NodeSpec::new("d", "RegexReplace");
        let out =
            run(&dynamic, vec![strings(&["aaa"]), Tensor::string_scalar("a"), Tensor::string_scalar("bb")]).unwrap();
        assert_eq!(texts(&out[0]), ["bbbbbb"]);
        let broken = NodeSpec::new("r", "StaticRegexReplace").attr("pattern", bytes("(")).attr("rewrite", bytes(""));
        let err = run(&broken, vec![strings(&["x"])]).unwrap_err();
        assert!(err.message.contains("node 'r'") && err.message.contains("pattern '('"), "{err}");
        let rewrite =
            NodeSpec::new("r", "StaticRegexReplace").attr("pattern", bytes("x")).attr("rewrite", bytes(r"\q"));
        assert!(run(&rewrite, vec![strings(&["x"])]).unwrap_err().message.contains("backslash"));
    }

    #[test]
    fn v1_split_splits_at_any_delimiter_byte_as_tensorflow_does() {
        // tf.raw_ops.StringSplit in TensorFlow 2.21 on the same inputs.
        let text = strings(&["a b,c", "  ", "d,,e f", ""]);
        let split = |skip: bool| NodeSpec::new("s", "StringSplit").attr("skip_empty", AttrValue::Bool(skip));
        let out = run(&split(true), vec![text.clone(), Tensor::string_scalar(" ,")]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 0, 0, 1, 0, 2, 2, 0, 2, 1, 2, 2]);
        let tokens: Vec<&[u8]> = out[1].strings().unwrap().iter().collect();
        assert_eq!(tokens, [b"a".as_slice(), b"b", b"c", b"d", b"e", b"f"]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), [4, 3]);
        let out = run(&split(false), vec![text, Tensor::string_scalar(" ,")]).unwrap();
        assert_eq!(out[1].strings().unwrap().len(), 10, "the empty text gives no token even kept");
        assert_eq!(out[2].as_slice::<i64>().unwrap(), [4, 4]);
        let out = run(&split(true), vec![strings(&["ab", "c"]), Tensor::string_scalar("")]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 0, 0, 1, 1, 0]);
    }

    #[test]
    fn full_matches_match_the_whole_string() {
        let node =
            |p: &str| NodeSpec::new("save/StaticRegexFullMatch", "StaticRegexFullMatch").attr("pattern", bytes(p));
        let paths = strings(&["s3://bucket/m", "/tmp/s3://", "s3:/", "gs://x"]);
        let out = run(&node("^s3://.*"), vec![paths.clone()]).unwrap();
        assert_eq!(out[0].as_slice::<bool>().unwrap(), &[true, false, false, false]);
        let out = run(&node("s3:/"), vec![paths.clone()]).unwrap();
        assert_eq!(out[0].as_slice::<bool>().unwrap(), &[false, false, true, false], "whole string, not a prefix");
        // Alternation binds inside the anchors.
        let out = run(&node("(s3|gs)://.*|/tmp.*"), vec![paths.clone()]).unwrap();
        assert_eq!(out[0].as_slice::<bool>().unwrap(), &[true, true, false, true]);
        let dynamic = NodeSpec::new("m", "RegexFullMatch");
        let out = run(&dynamic, vec![paths.clone(), Tensor::string_scalar("[a-z0-9]+:/+.*")]).unwrap();
        assert_eq!(out[0].as_slice::<bool>().unwrap(), &[true, false, true, true]);
        let err = run(&node("(s3"), vec![paths]).unwrap_err();
        assert!(err.message.contains("save/StaticRegexFullMatch") && err.message.contains("'(s3'"), "{err}");
    }

    #[test]
    fn split_makes_a_sparse_tensor_of_tokens() {
        let node = NodeSpec::new("s", "StringSplitV2");
        let input = strings(&["  the cat\tsat ", "", "dog"]);
        let out = run(&node, vec![input.clone(), Tensor::string_scalar("")]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[0, 0, 0, 1, 0, 2, 2, 0]);
        assert_eq!(texts(&out[1]), ["the", "cat", "sat", "dog"]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), &[3, 3]);
        let out = run(&node, vec![strings(&["1<>2<><>3", ""]), Tensor::string_scalar("<>")]).unwrap();
        assert_eq!(texts(&out[1]), ["1", "2", "", "3", ""]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), &[2, 4]);
        let capped = node.clone().attr("maxsplit", AttrValue::Int(1));
        let out = run(&capped, vec![strings(&["a b  c", "x,y,z"]), Tensor::string_scalar("")]).unwrap();
        assert_eq!(texts(&out[1]), ["a", "b  c", "x,y,z", ""]);
        let twice = node.clone().attr("maxsplit", AttrValue::Int(2));
        let out = run(&twice, vec![strings(&["a b", "a b c", "a  b c "]), Tensor::string_scalar("")]).unwrap();
        assert_eq!(texts(&out[1]), ["a", "b", "", "a", "b", "c", "a", "b", "c "]);
        let out = run(&capped, vec![strings(&["x,y,z"]), Tensor::string_scalar(",")]).unwrap();
        assert_eq!(texts(&out[1]), ["x", "y,z"]);
        let err = run(&node, vec![Tensor::from_strings([1, 1], &["a"]).unwrap(), Tensor::string_scalar("")]);
        assert!(err.unwrap_err().message.contains("vector"));
    }

    #[test]
    fn ngrams_match_tensorflows_with_and_without_padding() {
        let node = |widths: Vec<i64>, sep: &str| {
            NodeSpec::new("g", "StringNGrams")
                .attr("ngram_widths", AttrValue::List(AttrList::Int(widths)))
                .attr("separator", bytes(sep))
        };
        let data = strings(&["a", "b", "c", "d"]);
        let splits = Tensor::from_slice([4], &[0i64, 3, 4, 4]).unwrap();
        // tf.strings.ngrams([[a, b, c], [d], []], ngram_width=(1, 2)).
        let out = run(&node(vec![1, 2], " "), vec![data.clone(), splits.clone()]).unwrap();
        assert_eq!(texts(&out[0]), ["a", "b", "c", "a b", "b c", "d"]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[0, 5, 6, 6]);
        // Width 3, pads '<' '>' one a side, short rows kept.
        let padded = node(vec![3], "|")
            .attr("left_pad", bytes("<"))
            .attr("right_pad", bytes(">"))
            .attr("pad_width", AttrValue::Int(1))
            .attr("preserve_short_sequences", AttrValue::Bool(true));
        let out = run(&padded, vec![data.clone(), splits]).unwrap();
        assert_eq!(texts(&out[0]), ["<|a|b", "a|b|c", "b|c|>", "<|d|>"]);
        // No padding: a row shorter than the width is one n-gram of itself.
        let short = node(vec![3], "|").attr("preserve_short_sequences", AttrValue::Bool(true));
        let out =
            run(&short, vec![strings(&["a", "d", "e"]), Tensor::from_slice([3], &[0i64, 1, 3]).unwrap()]).unwrap();
        assert_eq!(texts(&out[0]), ["a", "d|e"]);
        let bad = run(&node(vec![2], " "), vec![data, Tensor::from_slice([2], &[0i64, 9]).unwrap()]);
        assert!(bad.unwrap_err().message.contains("data_splits"));
    }

    #[test]
    fn hashes_match_tensorflows_buckets() {
        // tf.strings.to_hash_bucket_fast(["", "a", "the cat", "ringflow"], 1000)
        // and to_hash_bucket_strong(..., 1000, key=[1, 2]) in TensorFlow 2.21.
        let input = strings(&["", "a", "the cat", "ringflow"]);
        let fast = NodeSpec::new("h", "StringToHashBucketFast").attr("num_buckets", AttrValue::Int(1000));
        let got = run(&fast, vec![input.clone()]).unwrap();
        assert_eq!(got[0].as_slice::<i64>().unwrap(), FAST_EXPECTED);
        let strong = NodeSpec::new("h", "StringToHashBucketStrong")
            .attr("num_buckets", AttrValue::Int(1000))
            .attr("key", AttrValue::List(AttrList::Int(vec![1, 2])));
        let got = run(&strong, vec![input]).unwrap();
        assert_eq!(got[0].as_slice::<i64>().unwrap(), STRONG_EXPECTED);
        let zero = NodeSpec::new("h", "StringToHashBucketFast").attr("num_buckets", AttrValue::Int(0));
        assert!(run(&zero, vec![strings(&["a"])]).unwrap_err().message.contains("num_buckets"));
    }

    const FAST_EXPECTED: &[i64] = &[263, 939, 218, 254];
    const STRONG_EXPECTED: &[i64] = &[435, 646, 703, 977];

    #[test]
    fn as_string_formats_integers_with_width_and_fill() {
        let node = NodeSpec::new("a", "AsString").attr("T", ty(DType::I64));
        let input = Tensor::from_slice([3], &[7i64, -42, 1234]).unwrap();
        assert_eq!(texts(&run(&node, vec![input.clone()]).unwrap()[0]), ["7", "-42", "1234"]);
        let padded = node.clone().attr("width", AttrValue::Int(4)).attr("fill", bytes("0"));
        assert_eq!(texts(&run(&padded, vec![input]).unwrap()[0]), ["0007", "-042", "1234"]);
        let float = NodeSpec::new("a", "AsString").attr("T", ty(DType::F32));
        assert_eq!(texts(&run(&float, vec![Tensor::scalar(1.5f32)]).unwrap()[0]), ["1.500000"]);
        let both = float.attr("scientific", AttrValue::Bool(true)).attr("shortest", AttrValue::Bool(true));
        let err = run(&both, vec![Tensor::scalar(1.5f32)]).unwrap_err().message.clone();
        assert!(err.contains("node 'a'") && err.contains("both scientific and shortest"), "{err}");
    }

    #[test]
    fn floats_print_as_cs_printf_prints_them() {
        let f = |x: f64, conversion: u8, precision: Option<usize>| printf_float(x, (conversion, precision));
        assert_eq!(f(0.1, b'f', None), "0.100000");
        assert_eq!(f(-2.5e-12, b'e', Some(3)), "-2.500e-12");
        assert_eq!(f(1e100, b'e', Some(1)), "1.0e+100");
        assert_eq!(f(123456789.0, b'g', None), "1.23457e+08");
        assert_eq!(f(0.0001, b'g', None), "0.0001");
        assert_eq!(f(0.00001, b'g', None), "1e-05");
        assert_eq!(f(100.0, b'g', Some(0)), "1e+02");
        assert_eq!(f(f64::NAN, b'g', None), "nan");
        assert_eq!(f(f64::NEG_INFINITY, b'f', None), "-inf");
    }
}
