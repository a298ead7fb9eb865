//! The order and durability gate of one session's notices in the output thread
//! ([`super`]): [`Order`] re-orders by seq and drops duplicates, [`Gate`] holds each notice
//! until storage covers its seq. Split from `feed.rs` so the thread and its bookkeeping read
//! separately.

use std::collections::{BTreeMap, VecDeque};

use super::Notice;

/// Seq re-ordering and de-duplication for one session.
#[derive(Debug, Default)]
pub struct Order {
    next: Option<u64>,
    pending: BTreeMap<u64, Notice>,
}

impl Order {
    /// Starts expecting `first` (or the lowest seq seen, when `None`).
    pub fn new(first: Option<u64>) -> Order {
        Order {
            next: first,
            pending: BTreeMap::new(),
        }
    }

    /// Takes a notice; returns the ones now printable, in seq order.
    pub fn push(&mut self, n: Notice) -> Vec<Notice> {
        if self.next.is_some_and(|next| n.seq < next) {
            return Vec::new(); // already printed
        }
        self.pending.entry(n.seq).or_insert(n);
        let next = match self.next {
            Some(next) => next,
            None => {
                let lowest = self.pending.keys().next().copied().unwrap_or(0);
                self.next = Some(lowest);
                lowest
            }
        };
        let mut ready = Vec::new();
        let mut at = next;
        while let Some(n) = self.pending.remove(&at) {
            ready.push(n);
            at += 1;
        }
        self.next = Some(at);
        ready
    }

    /// Everything still held back (after a gap), in seq order.
    pub fn drain(&mut self) -> Vec<Notice> {
        let rest: Vec<Notice> = std::mem::take(&mut self.pending).into_values().collect();
        if let Some(last) = rest.last() {
            self.next = Some(last.seq + 1);
        }
        rest
    }
}

/// One session's notices in seq order ([`Order`]), each held until storage covers its seq.
#[derive(Debug, Default)]
pub struct Gate {
    order: Order,
    durable: Option<u64>,
    ready: VecDeque<Notice>,
}

impl Gate {
    /// Starts expecting `first` (see [`Order::new`]).
    pub fn new(first: Option<u64>) -> Gate {
        Gate {
            order: Order::new(first),
            ..Gate::default()
        }
    }

    /// Takes a notice; returns the ones now printable (in order and durable).
    pub fn push(&mut self, n: Notice) -> Vec<Notice> {
        self.ready.extend(self.order.push(n));
        self.release()
    }

    /// Storage covers every seq up to `seq`; returns the notices this releases.
    pub fn durable(&mut self, seq: u64) -> Vec<Notice> {
        self.durable = Some(self.durable.map_or(seq, |d| d.max(seq)));
        self.release()
    }

    /// At the end of the run: the durable notices still held back (a gap is skipped over).
    /// What is not durable stays unprinted.
    pub fn finish(&mut self) -> Vec<Notice> {
        let rest = self.order.drain();
        self.ready.extend(rest);
        self.release()
    }

    fn release(&mut self) -> Vec<Notice> {
        let mut out = Vec::new();
        while let Some(n) = self.ready.front() {
            if self.durable.is_none_or(|d| n.seq > d) {
                break;
            }
            out.extend(self.ready.pop_front());
        }
        out
    }
}
