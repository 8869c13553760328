//! The HTTP/1.1 origin client: the request head sent to an origin and one exchange on an
//! origin connection.

pub mod exchange;
mod request_head;
