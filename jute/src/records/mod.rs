pub mod connect;
pub mod data;
pub mod header;
pub mod multi;
pub mod names;
pub mod request;
pub mod response;
pub mod watch;
