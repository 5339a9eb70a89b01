//! Exercise 1, solved: one thread per element, and a guard for the last block's extra threads.

use crate::cuda::GlobalPtr;
use crate::cuda::thread::index_1d;
use crate::kernel;

kernel! {
    /// `y[i] = a * x[i] + b` for every `i < n`.
    pub unsafe fn e01_map(x: GlobalPtr<f32>, y: GlobalPtr<f32>, a: f32, b: f32, n: u32) {
        let i = index_1d();
        // The grid is rounded up to whole blocks: the threads past `n` must touch nothing.
        if i < n {
            let v = unsafe { x.read(i as usize) };
            unsafe { y.write(i as usize, a * v + b) };
        }
    }
}
