//! CRC32C as TensorFlow's table and bundle formats store it: masked, so a
//! checksum of bytes that themselves hold checksums stays well spread.
//!
//! Owns: the mask and its inverse over the `crc32c` crate's sums. Must not
//! know where a checksum is stored; callers place the four bytes.

/// The constant added by the mask (LevelDB's `kMaskDelta`).
const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// CRC32C of what was summed into `crc` followed by `bytes`.
pub fn extend(crc: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, bytes)
}

/// The stored form of a checksum: rotated right by 15 bits, plus a constant.
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The checksum a stored (masked) value stands for.
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The CRC-32C check value (RFC 3720, appendix B.4).
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(extend(crc32c(b"1234"), b"56789"), crc32c(b"123456789"));
    }

    #[test]
    fn mask_round_trips_and_changes_the_value() {
        for crc in [0u32, 1, 0xe306_9283, u32::MAX, 0x8000_0000] {
            assert_eq!(unmask(mask(crc)), crc);
            assert_ne!(mask(crc), crc);
            assert_ne!(mask(mask(crc)), mask(crc));
        }
        // Worked by hand: rotr(0xe3069283, 15) = 0x2507c60d; + delta.
        assert_eq!(mask(0xe306_9283), 0x2507_c60du32.wrapping_add(MASK_DELTA));
    }
}
