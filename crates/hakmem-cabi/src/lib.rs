//! The C ABI of hakmem (work in progress).
#![deny(unsafe_op_in_unsafe_fn)]
