//! Positional file reads through io_uring, behind a safe API: a [`Read`] names a file, an
//! offset and a length, and its `done` callback receives the bytes (or an error).
//!
//! Why (issue 21, "a thread pool or io_uring: measure both"; bench/RESULTS.md 2026-11-27):
//! a blocking read thread costs two context switches per read and one device
//! notification per read; the ring keeps any number of reads in flight, submits what
//! arrived together in one system call, and waits for them without a thread per read.
//!
//! # Who drives it
//! [`ReadRing::submit`] queues a read to the kernel on the caller's thread; a driver on an
//! event loop hands what was queued in one turn to the kernel in one `io_uring_enter`,
//! and without one the caller does at once. Completions are taken and their callbacks run by
//! [`ReadRing::drive`], called by whoever watches the ring's descriptor
//! ([`ReadRing::poll_fd`], readable while completions wait): a task on the proxy's event
//! loop, or a [`ThreadDriver`] where there is none ([`RingDriver`] picks). With the
//! event loop driving it, a read costs its worker no hand-off at all: no thread to wake
//! for the read, none to wake the worker back, the record checked by the thread that sends
//! it. Until 2026-11-27 the ring had its own thread: on a shared core, cold 64 KiB hits
//! cost 54.6 CPU-µs with it against 48.7 driven by the event loop (medians of three
//! interleaved runs), with 4.0 system calls and 0.88 context switches per hit against 2.3
//! and 0.07 (bench/RESULTS.md, "Issue 21, ninth stop").
//!
//!
//! # Files
//! - `read_ring.rs`: [`ReadRing`], the ring and its lock;
//! - `runtime.rs`: [`RingDriver`], which drives it from the caller's event loop, and hands it
//!   to a thread if that loop ends;
//! - `thread.rs`: [`ThreadDriver`], which drives it from a thread of its own;
//! - `guard.rs`: what a driver that ends without being asked to leaves behind;
//! - `driver.rs`, `read.rs`, `buffers.rs`, `slab.rs`: the ring's slots, a read and its
//!   callback, the reused read buffers and the huge-page region they come from first.

mod buffers;
mod driver;
mod guard;
mod read;
mod read_ring;
mod runtime;
mod slab;
mod thread;

pub use buffers::held_bytes;
pub use read::{Done, Read};
pub use read_ring::ReadRing;
pub use runtime::RingDriver;
pub use slab::SlabGauge;
pub use thread::ThreadDriver;

#[cfg(test)]
mod tests;
