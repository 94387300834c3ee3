//! placeholder
mod frame;
pub use frame::*;
