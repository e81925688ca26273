//! CustomResourceDefinitions and CEL: serving custom resources, validating them against their
//! schema, the CEL environment, and ValidatingAdmissionPolicies.

pub mod crd;
pub mod expr;
pub mod schema;
pub mod vap;
