//! Decode: generating one token, the memory-bound half of inference (docs/decode.md).
//!
//! At decode time every sequence of the batch contributes **one** new token, so the big
//! operations degenerate: a projection `Y = X W^T` has `M` = batch rows of activations (1 to 16)
//! against a weight matrix of millions of elements, and attention has one query per head against
//! a KV cache of thousands of positions. Both read far more bytes than they do FLOPs with them
//! (about `M` FLOP per byte of weights, and `2 * group` per byte of cache), far below any ridge
//! point, so the only thing that counts is streaming those bytes from HBM once, with every SM
//! busy:
//!
//! - [`gemv`]: `Y = X W^T` for `M <= 16`, the weights read exactly once with 16-byte loads, one
//!   warp per [`gemv::ROWS_PER_WARP`] rows of `W`, lanes reduced with warp shuffles.
//! - [`attention`]: split-KV ("flash-decoding") attention. The KV cache of each (sequence, KV
//!   head) is cut into chunks, one block per chunk, so that even one sequence keeps every SM
//!   streaming; each block leaves a partial `(m, l, o)` in HBM and a second small kernel merges
//!   them with the online-softmax merge law of [`crate::softmax::merge`].
//!
//! Both take bf16 and accumulate in f32.

pub mod attention;
pub mod gemv;

/// The registered decode kernels' specs (`kernels/src/lib.rs`'s `registry!` names them here).
#[cfg(not(target_arch = "nvptx64"))]
pub use attention::{DECODE_ATTENTION_BF16, DECODE_ATTENTION_PAGED_BF16};
#[cfg(not(target_arch = "nvptx64"))]
pub use gemv::GEMV_BF16;

pub use attention::{
    decode_attention_merge_bf16, decode_attention_paged_bf16_g1, decode_attention_paged_bf16_g2,
    decode_attention_paged_bf16_g4, decode_attention_paged_bf16_g8, decode_attention_split_bf16_g1,
    decode_attention_split_bf16_g2, decode_attention_split_bf16_g4, decode_attention_split_bf16_g8,
};
pub use gemv::{gemv_bf16_m1, gemv_bf16_m2, gemv_bf16_m4, gemv_bf16_m8, gemv_bf16_m16};

use crate::elementwise::Words4;

/// bf16 values in one 16-byte load: the widest access a thread can make.
pub const BF16_PER_VECTOR: usize = size_of::<Words4>() / 2;

/// The eight bf16 values of a 16-byte word, widened to f32 (exact: a bf16 is the top half of an
/// f32). Element `2i` is the low half of word `i`: the GPU and the host are both little-endian,
/// so the lowest address holds the low half.
#[inline(always)]
pub fn widen_bf16x8(w: Words4) -> [f32; BF16_PER_VECTOR] {
    let mut out = [0.0f32; BF16_PER_VECTOR];
    for (i, word) in w.0.iter().enumerate() {
        out[2 * i] = f32::from_bits(word << 16);
        out[2 * i + 1] = f32::from_bits(word & 0xffff_0000);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_follows_memory_order() {
        // Eight bf16 values as they lie in memory, reinterpreted as four little-endian words.
        let values = [1.0f32, -2.0, 0.5, 3.0, -0.25, 8.0, 1.5, -1024.0];
        let bits: std::vec::Vec<u16> = values.iter().map(|&v| (v.to_bits() >> 16) as u16).collect();
        let mut words = [0u32; 4];
        for (i, w) in words.iter_mut().enumerate() {
            let bytes = [bits[2 * i].to_le_bytes(), bits[2 * i + 1].to_le_bytes()].concat();
            *w = u32::from_le_bytes(bytes.try_into().unwrap());
        }
        assert_eq!(widen_bf16x8(Words4(words)), values);
    }
}
