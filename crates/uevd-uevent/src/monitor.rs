//! udev's monitor message: the format in which a device manager announces a
//! processed event on netlink group 2, and which libudev clients filter in
//! the kernel with a socket filter.
//!
//! Layout (40 bytes, then the properties as a NUL-separated list):
//!
//! | offset | size | field                                       |
//! |--------|------|---------------------------------------------|
//! | 0      | 8    | `"libudev\0"`                               |
//! | 8      | 4    | magic 0xfeedcafe, big-endian                |
//! | 12     | 4    | header size, native endian                  |
//! | 16     | 4    | offset of the properties, native endian     |
//! | 20     | 4    | length of the properties, native endian     |
//! | 24     | 4    | MurmurHash2 of SUBSYSTEM, big-endian        |
//! | 28     | 4    | MurmurHash2 of DEVTYPE, big-endian          |
//! | 32     | 4    | tag bloom filter, high word, big-endian     |
//! | 36     | 4    | tag bloom filter, low word, big-endian      |

use crate::{ParseError, Uevent, MAX_MESSAGE};

pub const PREFIX: &[u8; 8] = b"libudev\0";
pub const MAGIC: u32 = 0xfeed_cafe;
pub const HEADER_SIZE: usize = 40;

/// MurmurHash2 (32-bit), the hash libudev's filters compare.
pub fn murmur2(data: &[u8], seed: u32) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h = seed ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u32) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// The four bits a tag sets in the 64-bit bloom filter.
pub fn tag_bloom(tag: &[u8]) -> u64 {
    let h = murmur2(tag, 0);
    (0..4).fold(0u64, |bits, i| bits | 1u64 << ((h >> (6 * i)) & 63))
}

/// Encodes a processed event for netlink group 2. `tags` are the device's
/// current tags (they feed the bloom filter; the TAGS property itself is
/// part of `properties`).
pub fn encode<'a>(
    properties: &[u8],
    subsystem: Option<&[u8]>,
    devtype: Option<&[u8]>,
    tags: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<u8> {
    encode_with_room(properties, subsystem, devtype, tags, 0)
}

/// [`encode`], with room for `more` bytes of properties to be pushed
/// ([`push_property`]) without the message being moved.
pub fn encode_with_room<'a>(
    properties: &[u8],
    subsystem: Option<&[u8]>,
    devtype: Option<&[u8]>,
    tags: impl IntoIterator<Item = &'a [u8]>,
    more: usize,
) -> Vec<u8> {
    let bloom = tags.into_iter().fold(0u64, |b, t| b | tag_bloom(t));
    let mut out = Vec::with_capacity(HEADER_SIZE + properties.len() + more);
    out.extend_from_slice(PREFIX);
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&(HEADER_SIZE as u32).to_ne_bytes());
    out.extend_from_slice(&(HEADER_SIZE as u32).to_ne_bytes());
    out.extend_from_slice(&(properties.len() as u32).to_ne_bytes());
    out.extend_from_slice(&subsystem.map_or(0, |s| murmur2(s, 0)).to_be_bytes());
    out.extend_from_slice(&devtype.map_or(0, |s| murmur2(s, 0)).to_be_bytes());
    out.extend_from_slice(&((bloom >> 32) as u32).to_be_bytes());
    out.extend_from_slice(&(bloom as u32).to_be_bytes());
    out.extend_from_slice(properties);
    out
}

/// Appends the property `key=value` to a message [`encode`] made, and
/// counts it in the header's length: what a message gets last, once it
/// is known, without encoding the rest again.
pub fn push_property(msg: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    msg.extend_from_slice(key);
    msg.push(b'=');
    msg.extend_from_slice(value);
    msg.push(0);
    let len = (msg.len() - HEADER_SIZE) as u32;
    msg[20..24].copy_from_slice(&len.to_ne_bytes());
}

fn word(msg: &[u8], at: usize) -> [u8; 4] {
    [msg[at], msg[at + 1], msg[at + 2], msg[at + 3]]
}

/// Decodes a udev monitor message into its event.
pub fn decode(msg: &[u8]) -> Result<Uevent, ParseError> {
    if msg.len() > MAX_MESSAGE {
        return Err(ParseError::TooLarge(msg.len()));
    }
    if msg.len() < HEADER_SIZE || &msg[..8] != PREFIX {
        return Err(ParseError::BadMonitorHeader("no libudev prefix"));
    }
    if u32::from_be_bytes(word(msg, 8)) != MAGIC {
        return Err(ParseError::BadMonitorHeader("wrong magic"));
    }
    let off = u32::from_ne_bytes(word(msg, 16)) as usize;
    let len = u32::from_ne_bytes(word(msg, 20)) as usize;
    let props = off
        .checked_add(len)
        .and_then(|end| msg.get(off.max(HEADER_SIZE)..end))
        .ok_or(ParseError::BadMonitorHeader("properties out of bounds"))?;
    Uevent::parse_properties(props)
}

/// Whether a message is a udev monitor message rather than a kernel one.
pub fn is_monitor_message(msg: &[u8]) -> bool {
    msg.starts_with(PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_reference_values() {
        // Published values of the reference MurmurHash2 with seed 0; the
        // end-to-end proof is libudev's own filter accepting our messages.
        assert_eq!(murmur2(b"", 0), 0);
        assert_eq!(murmur2(b"a", 0), 0x92685f5e);
    }

    #[test]
    fn bloom_sets_at_most_four_bits() {
        for tag in [&b"systemd"[..], b"uaccess", b"seat", b""] {
            let b = tag_bloom(tag);
            assert!((1..=4).contains(&b.count_ones()), "{b:x}");
        }
    }

    #[test]
    fn round_trip() {
        let props = b"ACTION=add\0DEVPATH=/devices/virtual/net/v0\0SUBSYSTEM=net\0SEQNUM=5\0TAGS=:systemd:\0";
        let msg = encode(props, Some(b"net"), None, [&b"systemd"[..]]);
        assert_eq!(msg.len(), HEADER_SIZE + props.len());
        assert!(is_monitor_message(&msg));
        let ev = decode(&msg).unwrap();
        assert_eq!(ev.devpath(), b"/devices/virtual/net/v0");
        assert_eq!(u32::from_be_bytes(word(&msg, 24)), murmur2(b"net", 0));
        let bloom = (u32::from_be_bytes(word(&msg, 32)) as u64) << 32
            | u32::from_be_bytes(word(&msg, 36)) as u64;
        assert_eq!(bloom, tag_bloom(b"systemd"));
    }

    #[test]
    fn a_property_pushed_last_is_as_if_encoded_with_the_rest() {
        let tags: [&[u8]; 1] = [b"systemd"];
        let props = b"ACTION=add\0DEVPATH=/devices/a\0SUBSYSTEM=block\0SEQNUM=3\0";
        let mut msg = encode(props, Some(b"block"), None, tags);
        push_property(&mut msg, b"UEVD_SEQ", b"12");
        assert_eq!(
            msg,
            encode(
                &[&props[..], b"UEVD_SEQ=12\0"].concat(),
                Some(b"block"),
                None,
                tags
            )
        );
        let ev = decode(&msg).unwrap();
        assert_eq!(ev.get(b"UEVD_SEQ"), Some(&b"12"[..]));
    }

    #[test]
    fn rejects_inconsistent_headers() {
        let props = b"ACTION=add\0DEVPATH=/d\0";
        let mut msg = encode(props, None, None, []);
        msg[20..24].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(decode(&msg).is_err());
        msg[8] = 0;
        assert!(decode(&msg).is_err());
        assert!(decode(b"libudev\0").is_err());
    }
}
