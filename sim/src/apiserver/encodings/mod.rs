//! Wire encodings and descriptions: protobuf request bodies, server-side Tables, conversion
//! between served versions, the OpenAPI v2 and v3 documents and discovery.

pub mod conversion;
pub mod discovery;
pub mod openapi;
pub mod openapi_v2;
pub mod protobuf;
pub mod table;
