//! The HTTP/1.1 origin client: the request head sent to an origin and one exchange on an
//! origin connection; and those heads translated for the HTTP/2 client (`for_h2`).

pub mod exchange;
pub mod for_h2;
pub mod probe;
mod request_head;
