//! Rendezvous: where a `_Send` leaves a value and a `_Recv` picks it up,
//! either side first. One rendezvous serves one step.
//!
//! Owns: [`RendezvousKey`] (parsed once: when a plan is built, or when a
//! pushed tensor arrives; a send reads the destination its parse kept),
//! the [`Rendezvous`] trait the executor talks to, and [`LocalRendezvous`],
//! the in-process table. A remote kind (in `worker`)
//! wraps a local table and forwards sends whose receiver is another task;
//! the executor cannot tell the difference. Must not know about sockets.

use crate::error::{Result, Status};
use crate::ops::Value;
use crate::tensor::placement::SharedPlacement;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

/// `src_device;src_incarnation;dst_device;tensor_name;frame:iter`, with its
/// hash and where its destination device lies computed once.
#[derive(Clone)]
pub struct RendezvousKey {
    text: Arc<str>,
    hash: u64,
    /// Byte range of the destination device in `text` (none for a raw key):
    /// a send asks for it every step to choose local or remote.
    dst_device: Option<(usize, usize)>,
}

/// The five parts of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    pub src_device: &'a str,
    pub src_incarnation: u64,
    pub dst_device: &'a str,
    pub tensor_name: &'a str,
    pub frame_iter: &'a str,
}

fn hash_str(s: &str) -> u64 {
    // A fixed seed: equal keys hash equally wherever in the process they
    // were made (the hash never leaves the process).
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x5eed_2e4d_e2f0_0c01).hash_one(s)
}

/// Splits a key at its four `;` (a pushed tensor's key is parsed on
/// arrival, so this runs per tensor received; `find` scans a word at a time).
fn split_key(text: &str) -> Option<ParsedKey<'_>> {
    let mut cuts = [0usize; 4];
    let mut from = 0;
    for cut in &mut cuts {
        *cut = from + text[from..].find(';')?;
        from = *cut + 1;
    }
    if text[from..].contains(';') {
        return None;
    }
    let [a, b, c, d] = cuts;
    let (src, inc, dst, name) = (&text[..a], &text[a + 1..b], &text[b + 1..c], &text[c + 1..d]);
    if src.is_empty() || dst.is_empty() || name.is_empty() {
        return None;
    }
    Some(ParsedKey {
        src_device: src,
        src_incarnation: u64::from_str_radix(inc, 16).ok()?,
        dst_device: dst,
        tensor_name: name,
        frame_iter: &text[d + 1..],
    })
}

/// The tag of a loop frame instance in rendezvous keys: the same in every
/// partition that runs the instance, since each names it by its parent's
/// tag, the parent's iteration and the frame's name (the root frame is 0).
pub fn frame_tag(parent_tag: u64, parent_iter: u64, frame_name: &str) -> u64 {
    let tag = hash_str(&format!("{parent_tag:x}:{parent_iter};{frame_name}"));
    tag.max(1)
}

fn malformed(text: &str) -> Status {
    Status::invalid_argument(format!("malformed rendezvous key '{text}'"))
}

impl RendezvousKey {
    /// Parses and checks a five-part key.
    pub fn parse(text: &str) -> Result<RendezvousKey> {
        let parts = split_key(text).ok_or_else(|| malformed(text))?;
        let start = parts.dst_device.as_ptr() as usize - text.as_ptr() as usize;
        let dst_device = Some((start, start + parts.dst_device.len()));
        Ok(RendezvousKey { text: Arc::from(text), hash: hash_str(text), dst_device })
    }

    /// A key used only inside one process (partial-run feeds), not parsed.
    pub fn raw(text: &str) -> RendezvousKey {
        RendezvousKey { text: Arc::from(text), hash: hash_str(text), dst_device: None }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// This key for iteration `iter` of the loop frame instance `frame_tag`
    /// (see [`frame_tag`]): its `frame:iter` part replaced. A loop whose body
    /// spans partitions sends once per iteration under these keys.
    pub fn in_frame(&self, frame_tag: u64, iter: u64) -> RendezvousKey {
        let cut = self.text.rfind(';').map_or(0, |c| c + 1);
        let text = format!("{}{frame_tag:x}:{iter}", &self.text[..cut]);
        RendezvousKey { hash: hash_str(&text), text: Arc::from(text), dst_device: self.dst_device }
    }

    /// The destination device of a parsed key; `None` for a raw one.
    pub fn dst_device(&self) -> Option<&str> {
        self.dst_device.map(|(start, end)| &self.text[start..end])
    }

    pub fn parts(&self) -> Result<ParsedKey<'_>> {
        split_key(&self.text).ok_or_else(|| malformed(&self.text))
    }
}

impl PartialEq for RendezvousKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.text == other.text
    }
}
impl Eq for RendezvousKey {}

impl Hash for RendezvousKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl std::fmt::Debug for RendezvousKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Passes a precomputed u64 hash straight through.
#[derive(Default)]
pub struct PrehashedHasher(u64);

impl Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `RendezvousKey`; mix anything else.
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

pub type RecvCallback = Box<dyn FnOnce(Result<Value>) + Send>;

/// The meeting point of Sends and Recvs of one step.
pub trait Rendezvous: Send + Sync {
    /// Leaves `value` under `key`; wakes a waiting receiver (possibly running
    /// its callback on this thread).
    fn send(&self, key: &RendezvousKey, value: Value) -> Result<()>;

    /// Calls `done` with the value under `key` once it is there (possibly at
    /// once, on this thread), or with the abort status.
    fn recv_async(&self, key: &RendezvousKey, done: RecvCallback);

    /// Fails every current and future receive with `status`.
    fn abort(&self, status: Status);

    /// Memory a kernel may write a value into that a `_Send` will later
    /// send to `recv_device`, so it crosses without a copy; `None` (the
    /// default) where sending copies anyway or costs nothing.
    fn output_placement(&self, _recv_device: &str) -> Option<SharedPlacement> {
        None
    }
}

enum Item {
    Value(Value),
    Waiting(RecvCallback),
}

#[derive(Default)]
struct Table {
    items: HashMap<RendezvousKey, Item, BuildHasherDefault<PrehashedHasher>>,
    aborted: Option<Status>,
}

/// The in-process rendezvous: a table of values and waiters.
#[derive(Default)]
pub struct LocalRendezvous {
    table: Mutex<Table>,
}

impl LocalRendezvous {
    pub fn new() -> LocalRendezvous {
        LocalRendezvous::default()
    }

    pub fn aborted(&self) -> Option<Status> {
        self.table.lock().aborted.clone()
    }
}

impl Rendezvous for LocalRendezvous {
    fn send(&self, key: &RendezvousKey, value: Value) -> Result<()> {
        let waiter = {
            let mut table = self.table.lock();
            if let Some(status) = &table.aborted {
                return Err(status.clone());
            }
            match table.items.remove(key) {
                Some(Item::Waiting(done)) => done,
                Some(Item::Value(old)) => {
                    table.items.insert(key.clone(), Item::Value(old));
                    return Err(Status::aborted(format!("duplicate send of rendezvous key '{key:?}'")));
                }
                None => {
                    table.items.insert(key.clone(), Item::Value(value));
                    return Ok(());
                }
            }
        };
        waiter(Ok(value));
        Ok(())
    }

    fn recv_async(&self, key: &RendezvousKey, done: RecvCallback) {
        let ready = {
            let mut table = self.table.lock();
            if let Some(status) = &table.aborted {
                Err(status.clone())
            } else {
                match table.items.remove(key) {
                    Some(Item::Value(v)) => Ok(v),
                    Some(Item::Waiting(other)) => {
                        table.items.insert(key.clone(), Item::Waiting(other));
                        Err(Status::aborted(format!("two receivers for rendezvous key '{key:?}'")))
                    }
                    None => {
                        table.items.insert(key.clone(), Item::Waiting(done));
                        return;
                    }
                }
            }
        };
        done(ready);
    }

    fn abort(&self, status: Status) {
        let waiters: Vec<RecvCallback> = {
            let mut table = self.table.lock();
            if table.aborted.is_some() {
                return;
            }
            table.aborted = Some(status.clone());
            table
                .items
                .drain()
                .filter_map(|(_, item)| match item {
                    Item::Waiting(done) => Some(done),
                    Item::Value(_) => None,
                })
                .collect()
        };
        for done in waiters {
            done(Err(status.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;
    use std::sync::mpsc;

    fn key(name: &str) -> RendezvousKey {
        RendezvousKey::parse(&format!(
            "/job:a/replica:0/task:0/device:CPU:0;00000000000000ff;/job:a/replica:0/task:0/device:CPU:1;{name};0:0"
        ))
        .unwrap()
    }

    #[test]
    fn parses_keys() {
        let k = key("edge_1_x_0");
        let p = k.parts().unwrap();
        assert_eq!(p.src_incarnation, 255);
        assert_eq!(p.tensor_name, "edge_1_x_0");
        assert_eq!(p.dst_device, "/job:a/replica:0/task:0/device:CPU:1");
        assert_eq!(p.frame_iter, "0:0");
        assert_eq!(k.dst_device(), Some("/job:a/replica:0/task:0/device:CPU:1"));
        assert_eq!(RendezvousKey::raw("_arg;0").dst_device(), None);
        for bad in ["a;b;c", "a;zz;c;d;0:0", "a;ff;c;d;0:0;extra", ";ff;c;d;0:0", "a;ff;;d;0:0", "a;ff;c;;0:0", ""] {
            let e = RendezvousKey::parse(bad).err().unwrap_or_else(|| panic!("'{bad}' parsed"));
            assert!(e.message.contains(bad), "{e}");
        }
        // Equal text, equal key, however it was made.
        assert!(RendezvousKey::parse(k.as_str()).unwrap() == k);
    }

    #[test]
    fn frame_keys_differ_by_instance_and_iteration_only() {
        let k = key("edge_1_x_0");
        let outer = frame_tag(0, 0, "while/while_context");
        assert_ne!(outer, 0);
        assert_eq!(outer, frame_tag(0, 0, "while/while_context"), "the same instance everywhere");
        let inner_a = frame_tag(outer, 1, "inner");
        let inner_b = frame_tag(outer, 2, "inner");
        assert_ne!(inner_a, inner_b);
        let k3 = k.in_frame(inner_a, 3);
        let p = k3.parts().unwrap();
        assert_eq!(p.frame_iter, format!("{inner_a:x}:3"));
        assert_eq!((p.tensor_name, p.src_incarnation), ("edge_1_x_0", 255));
        assert_eq!(k3.dst_device(), k.dst_device());
        assert!(k3 == RendezvousKey::parse(k3.as_str()).unwrap());
        assert!(k3 != k.in_frame(inner_a, 4) && k3 != k.in_frame(inner_b, 3));
    }

    #[test]
    fn either_side_may_come_first() {
        let r = LocalRendezvous::new();
        r.send(&key("a"), Value::Tensor(Tensor::scalar(1.0f32))).unwrap();
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        r.recv_async(
            &key("a"),
            Box::new(move |v| tx2.send(v.unwrap().into_tensor().unwrap().scalar_value::<f32>().unwrap()).unwrap()),
        );
        r.recv_async(
            &key("b"),
            Box::new(move |v| tx.send(v.unwrap().into_tensor().unwrap().scalar_value::<f32>().unwrap()).unwrap()),
        );
        r.send(&key("b"), Value::Tensor(Tensor::scalar(2.0f32))).unwrap();
        assert_eq!(rx.recv().unwrap(), 1.0);
        assert_eq!(rx.recv().unwrap(), 2.0);
    }

    #[test]
    fn abort_wakes_waiters_and_fails_later_calls() {
        let r = LocalRendezvous::new();
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        r.recv_async(&key("a"), Box::new(move |v| tx2.send(v.err().unwrap()).unwrap()));
        r.abort(Status::internal("partition 2 failed"));
        assert_eq!(rx.recv().unwrap().message, "partition 2 failed");
        r.recv_async(&key("b"), Box::new(move |v| tx.send(v.err().unwrap()).unwrap()));
        assert_eq!(rx.recv().unwrap().message, "partition 2 failed");
        assert!(r.send(&key("c"), Value::Tensor(Tensor::scalar(1i32))).is_err());
    }

    #[test]
    fn duplicate_send_is_an_error() {
        let r = LocalRendezvous::new();
        r.send(&key("a"), Value::Tensor(Tensor::scalar(1i32))).unwrap();
        let err = r.send(&key("a"), Value::Tensor(Tensor::scalar(1i32))).unwrap_err();
        assert!(err.message.contains("duplicate send"));
    }
}
