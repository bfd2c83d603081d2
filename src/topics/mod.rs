//! Source topic selection and target topic preparation.

pub mod acls;
pub mod clients;
pub mod configs;
pub mod filter;
pub mod identity;
pub mod internal;
pub mod target;
