//! [`Origin`]: where a server's requests come from (one per connection);
//! [`OriginRef`], the counted reference each request and reply holds; and
//! [`ServingScope`], the serving thread's batching of both counts.
//!
//! Owns: the strong counts of a connection's origin and the count of its
//! requests answered after their handler returned (`max_in_flight`). Must
//! not send or read anything: the server decides what a request and a reply
//! do, this module only what they cost.
//!
//! Why a scope: every request hands its handler two references to the
//! origin (the request's and the reply's) and is counted in flight until
//! answered. With `Arc` clones and atomic adds that is six locked
//! instructions on the serving thread between a request's arrival and its
//! answer, on the path of every round trip. While a serving thread holds
//! its [`ServingScope`], references made and dropped on that thread move
//! credits of a strong count the scope holds in bulk (plain adds on a
//! thread-local), and a request answered before its handler returns is
//! never counted in flight. References that leave the thread are ordinary
//! strong counts, and a reply answered on another thread counts down the
//! atomic as before, so nothing changes for work moved elsewhere.

use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Where requests come from: one per connection, shared by its requests
/// and replies (one reference each, not one per field).
pub(crate) struct Origin {
    pub(crate) peer: Arc<str>,
    /// The name the peer gave in its hello (a server's task name).
    pub(crate) peer_name: Arc<str>,
    /// The connection, when replies and pushes can go back over it (a
    /// server's accepted one; not a client's, whose pushes need no answer).
    pub(crate) conn: Option<Arc<super::conn::Conn>>,
    /// Requests answered later than their handler returned. Signed: a
    /// reply moved to another thread may be answered there before the
    /// serving thread counts it, taking the count below zero for a moment.
    in_flight: AtomicIsize,
}

impl Origin {
    pub(crate) fn new(peer: Arc<str>, peer_name: Arc<str>, conn: Option<Arc<super::conn::Conn>>) -> Origin {
        Origin { peer, peer_name, conn, in_flight: AtomicIsize::new(0) }
    }

    /// A client's connection to `peer`, for the pushes it serves.
    pub(crate) fn pushes_from(peer: Arc<str>) -> Arc<Origin> {
        Arc::new(Origin::new(peer.clone(), peer, None))
    }

    /// Requests answered after their handler returned, not yet answered.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire).max(0) as usize
    }

    /// The request of dispatch `serial` was answered: counted down unless
    /// its handler is still running on this thread (then it never was
    /// counted; see [`ServingScope::dispatch`]).
    pub(crate) fn answered(&self, serial: u64) {
        let in_dispatch = SCOPE.with(|cell| {
            let mut scope = cell.get();
            let mine = std::ptr::eq(scope.origin, self) && scope.dispatching == Some(serial);
            if mine {
                scope.answered = true;
                cell.set(scope);
            }
            mine
        });
        if !in_dispatch {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The most credits a scope keeps; references dropped past it give their
/// count back at once.
const MAX_CREDITS: usize = 64;

/// The serving thread's state, for the origin it serves.
#[derive(Clone, Copy)]
struct ScopeState {
    /// Null when this thread serves no origin.
    origin: *const Origin,
    /// Strong counts of `origin` this thread holds beyond the scope's own.
    credits: usize,
    /// The dispatch whose handler is running, if one is.
    dispatching: Option<u64>,
    /// Whether that dispatch's request was answered already.
    answered: bool,
    /// Dispatches started in this scope (each reply names its own).
    serials: u64,
}

impl ScopeState {
    const NONE: ScopeState =
        ScopeState { origin: std::ptr::null(), credits: 0, dispatching: None, answered: false, serials: 0 };
}

thread_local! {
    // `Copy` without drop glue: reachable even while the thread's other
    // locals are torn down, so a reference dropped then still finds it.
    static SCOPE: Cell<ScopeState> = const { Cell::new(ScopeState::NONE) };
}

/// One strong count of an `Arc<Origin>`: dropped, it gives the count back
/// to the serving thread's scope when there is one for this origin, else
/// to the `Arc`.
pub(crate) struct OriginRef(NonNull<Origin>);

// SAFETY: an `OriginRef` is an `Arc<Origin>` in all but how its count moves
// (see `new` and `drop`), and `Origin` is `Send + Sync`.
unsafe impl Send for OriginRef {}
// SAFETY: as above; shared access reaches `&Origin` only.
unsafe impl Sync for OriginRef {}

impl OriginRef {
    pub(crate) fn new(origin: &Arc<Origin>) -> OriginRef {
        Self::counted(Arc::as_ptr(origin))
    }

    /// A new reference to the origin at `ptr`, which the caller holds a
    /// strong count of: a credit of this thread's scope, or a new count.
    fn counted(ptr: *const Origin) -> OriginRef {
        let took_credit = SCOPE.with(|cell| {
            let mut scope = cell.get();
            let take = std::ptr::eq(scope.origin, ptr) && scope.credits > 0;
            if take {
                scope.credits -= 1;
                cell.set(scope);
            }
            take
        });
        if !took_credit {
            // SAFETY: `ptr` came from `Arc::as_ptr` of an `Arc` the caller
            // holds (or of one an `OriginRef` stands for), so the
            // allocation is alive and its count at least one.
            unsafe { Arc::increment_strong_count(ptr) };
        }
        OriginRef(NonNull::from(
            // SAFETY: as above; the count taken keeps it alive while we are.
            unsafe { &*ptr },
        ))
    }
}

impl std::ops::Deref for OriginRef {
    type Target = Origin;
    fn deref(&self) -> &Origin {
        // SAFETY: we own a strong count (a credit moved to us, or our own).
        unsafe { self.0.as_ref() }
    }
}

impl Clone for OriginRef {
    fn clone(&self) -> OriginRef {
        Self::counted(self.0.as_ptr())
    }
}

impl Drop for OriginRef {
    fn drop(&mut self) {
        let ptr = self.0.as_ptr().cast_const();
        let kept = SCOPE.with(|cell| {
            let mut scope = cell.get();
            let keep = std::ptr::eq(scope.origin, ptr) && scope.credits < MAX_CREDITS;
            if keep {
                scope.credits += 1;
                cell.set(scope);
            }
            keep
        });
        if !kept {
            // SAFETY: we own one strong count of an `Arc<Origin>` (see
            // `counted`) and give it back here, once.
            unsafe { Arc::decrement_strong_count(ptr) };
        }
    }
}

/// A serving thread's hold on the origin it serves (at most one per
/// thread): credits of references dropped on this thread, and the dispatch
/// whose handler is running. Dropping it gives the credits back.
pub(crate) struct ServingScope {
    /// Keeps the origin alive while credits of it exist.
    origin: Arc<Origin>,
}

impl ServingScope {
    pub(crate) fn enter(origin: Arc<Origin>) -> ServingScope {
        SCOPE.with(|cell| {
            assert!(cell.get().origin.is_null(), "one serving scope per thread");
            cell.set(ScopeState { origin: Arc::as_ptr(&origin), ..ScopeState::NONE });
        });
        ServingScope { origin }
    }

    pub(crate) fn origin(&self) -> &Arc<Origin> {
        &self.origin
    }

    /// Runs the handler of one request that expects an answer (a one-way
    /// push never comes here: nothing would ever count it down): `run`
    /// gets the dispatch's serial (for the reply's [`Origin::answered`]);
    /// a request still unanswered when it returns is counted in flight.
    pub(crate) fn dispatch(&self, run: impl FnOnce(u64)) {
        let serial = SCOPE.with(|cell| {
            let mut scope = cell.get();
            debug_assert!(std::ptr::eq(scope.origin, Arc::as_ptr(&self.origin)), "dispatch outside its scope");
            debug_assert!(scope.dispatching.is_none(), "nested dispatch");
            scope.serials += 1;
            scope.dispatching = Some(scope.serials);
            scope.answered = false;
            cell.set(scope);
            scope.serials
        });
        run(serial);
        let answered = SCOPE.with(|cell| {
            let mut scope = cell.get();
            scope.dispatching = None;
            cell.set(scope);
            scope.answered
        });
        if !answered {
            self.origin.in_flight.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for ServingScope {
    fn drop(&mut self) {
        let scope = SCOPE.with(|cell| cell.replace(ScopeState::NONE));
        debug_assert!(std::ptr::eq(scope.origin, Arc::as_ptr(&self.origin)));
        for _ in 0..scope.credits {
            // SAFETY: each credit is a strong count this thread owns (moved
            // here by a dropped `OriginRef`); `self.origin` keeps one more.
            unsafe { Arc::decrement_strong_count(Arc::as_ptr(&self.origin)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Arc<Origin> {
        Origin::pushes_from(Arc::from("peer"))
    }

    #[test]
    fn references_made_and_dropped_in_a_scope_leave_the_count_where_it_was() {
        let origin = origin();
        let scope = ServingScope::enter(origin.clone());
        assert_eq!(Arc::strong_count(&origin), 2);
        for _ in 0..1000 {
            let a = OriginRef::new(scope.origin());
            let b = a.clone();
            assert_eq!(&*b.peer, "peer");
            drop((a, b));
        }
        // Two counts in credit at most (the two references above).
        assert!(Arc::strong_count(&origin) <= 4);
        drop(scope);
        assert_eq!(Arc::strong_count(&origin), 1);
    }

    #[test]
    fn a_reference_moved_to_another_thread_counts_as_an_arc_there() {
        let origin = origin();
        let scope = ServingScope::enter(origin.clone());
        let held: Vec<OriginRef> = (0..200).map(|_| OriginRef::new(scope.origin())).collect();
        std::thread::spawn(move || drop(held)).join().unwrap();
        drop(scope);
        assert_eq!(Arc::strong_count(&origin), 1);
    }

    #[test]
    fn references_dropped_in_a_scope_past_its_credit_limit_give_their_count_back() {
        let origin = origin();
        let held: Vec<OriginRef> = (0..3 * MAX_CREDITS).map(|_| OriginRef::new(&origin)).collect();
        let scope = ServingScope::enter(origin.clone());
        drop(held);
        assert_eq!(Arc::strong_count(&origin), 2 + MAX_CREDITS);
        drop(scope);
        assert_eq!(Arc::strong_count(&origin), 1);
    }

    #[test]
    fn only_requests_answered_after_their_handler_returned_count_in_flight() {
        let origin = origin();
        let scope = ServingScope::enter(origin.clone());
        scope.dispatch(|serial| origin.answered(serial));
        assert_eq!(origin.in_flight(), 0);
        let mut later = Vec::new();
        scope.dispatch(|serial| later.push(serial));
        scope.dispatch(|serial| later.push(serial));
        assert_eq!(origin.in_flight(), 2);
        // Answered while another dispatch runs: not that one's answer.
        let first = later.remove(0);
        scope.dispatch(|_| origin.answered(first));
        assert_eq!(origin.in_flight(), 2, "one answered, the new one counted");
        let second = later.remove(0);
        std::thread::scope(|s| {
            s.spawn(|| origin.answered(second));
        });
        assert_eq!(origin.in_flight(), 1);
        drop(scope);
    }

    #[test]
    fn an_answer_from_another_thread_before_the_handler_returns_nets_to_zero() {
        let origin = origin();
        let scope = ServingScope::enter(origin.clone());
        scope.dispatch(|serial| {
            std::thread::scope(|s| {
                s.spawn(|| origin.answered(serial));
            });
            assert_eq!(origin.in_flight(), 0, "a moment below zero reads as none");
        });
        assert_eq!(origin.in_flight(), 0);
        drop(scope);
    }
}
