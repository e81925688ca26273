//! The request kit: a request's path routed to what it addresses, the kit every verb shares
//! (the request taken apart, its options and output), API errors as `Status` objects, and
//! authentication and authorization.

pub mod auth;
pub mod error;
pub mod kit;
pub mod request;
