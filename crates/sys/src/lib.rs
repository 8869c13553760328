//! Kernel interfaces that std, nix and rustix do not wrap, behind safe APIs. The workspace
//! forbids `unsafe`; this crate holds the few blocks these need, each with its proof:
//! - [`ring`]: positional file reads through io_uring, driven by an event loop or a thread
//!   (disk-tier reads);
//! - [`cachestat`]: how many pages of a file range are in the page cache, asked without
//!   reading them (a `preadv2(RWF_NOWAIT)` probe starts reading what it misses).

pub mod cachestat;
pub mod ring;
