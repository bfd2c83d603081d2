//! Source topic selection and target topic preparation.

pub mod filter;
pub mod target;
