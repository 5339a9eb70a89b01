//! One safe host function per kernel: validate the inputs, compute the launch configuration from
//! the kernel crate's own constants, launch. Each also has its cost model beside it.

pub mod attention;
pub mod decode;
pub mod elementwise;
pub mod gemm;
pub mod hierarchy;
pub mod softmax;
pub mod transpose;

use crate::error::{Error, Result};

/// `n` as the `u32` kernels index with, or a clear error for inputs too large for one launch.
pub(crate) fn len_u32(what: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::Shape(format!(
            "{what} has {n} elements; one launch handles at most {}",
            u32::MAX
        ))
    })
}

/// Checks that buffers that must match in length do.
pub(crate) fn same_len(what: &str, lens: &[usize]) -> Result<()> {
    if lens.windows(2).all(|w| w[0] == w[1]) {
        Ok(())
    } else {
        Err(Error::Shape(format!(
            "{what}: buffer lengths differ ({lens:?})"
        )))
    }
}

/// The counts of an operation made of several launches (nothing from a GPU).
pub(crate) fn then(
    first: crate::runtime::Launched,
    second: crate::runtime::Launched,
) -> crate::runtime::Launched {
    match (first, second) {
        (Some(mut a), Some(b)) => {
            a.add(&b);
            Some(a)
        }
        _ => None,
    }
}
